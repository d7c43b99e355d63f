//! A budget whose counters' store stops mid-run (SPEC §15, "A counter
//! store that is down refuses the calls its budgets cover (fail closed)"):
//! on a real PostgreSQL server, stopped and started again by the test, a
//! crew's budgeted calls run, are refused while the server is down, and
//! run again once it is back; a budget that allows calls when its
//! counters are down lets them through uncounted. Its own binary: it stops
//! the binary's PostgreSQL cluster.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crew_runtime::InterceptionPoint;
use crew_runtime::budget::{Budget, Charge, Ledger, Per};
use crew_runtime::prelude::*;
use crew_runtime::store::Store;

/// How long the store may take to be reachable again.
const PATIENCE: Duration = Duration::from_secs(30);

/// A tool that counts its runs.
fn counted(runs: &Arc<AtomicUsize>) -> Tool {
    let runs = Arc::clone(runs);
    Tool::dynamic(
        "lookup",
        "Looks it up",
        json!({"type": "object"}),
        move |_| {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok::<_, String>(json!("found"))
        },
    )
}

/// A crew whose one call of `lookup` is under `budget`, counted on
/// `store`; the sources of the blocks its calls met.
fn crew(store: &Store, budget: Budget, runs: &Arc<AtomicUsize>) -> (Crew, Arc<Mutex<Vec<String>>>) {
    // Each kickoff calls `lookup` once and answers; enough of them.
    let script = (0..50).fold(ScriptedLlm::new(), |script, _| {
        script.call("lookup", json!({})).answer("done")
    });
    let agent = Agent::builder("Clerk")
        .tool(counted(runs))
        .llm(Arc::new(script))
        .build();
    let hooks = Arc::new(HookRegistry::new());
    let blocks = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&blocks);
    hooks.events().subscribe(move |event| {
        if let Event::HookDispatched(dispatched) = event
            && dispatched.point == InterceptionPoint::PRE_TOOL_CALL
            && let Some(source) = &dispatched.abort_source
        {
            sink.lock().expect("blocks").push(source.clone());
        }
    });
    let crew = Crew::builder()
        .name("lookups")
        .agent(agent.clone())
        .task(Task::builder("Look it up").agent(&agent).build())
        .global_registry(hooks)
        .budget(budget.per(Per::Crew))
        .budget_ledger(Arc::new(store.clone()))
        .build()
        .expect("builds");
    (crew, blocks)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_whose_store_stops_mid_run_refuses_calls_then_admits_them_once_it_is_back() {
    let Some(url) = support::postgres_database().await else {
        return;
    };
    let store = Store::connect(&url).await.expect("PostgreSQL opens");
    let (strict_runs, lenient_runs) =
        (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (strict, strict_blocks) = crew(&store, Budget::tool_calls("strict", 10), &strict_runs);
    let (lenient, lenient_blocks) = crew(
        &store,
        Budget::tool_calls("lenient", 10).allow_when_unavailable(),
        &lenient_runs,
    );
    strict.kickoff(()).await.expect("runs");
    lenient.kickoff(()).await.expect("runs");
    assert_eq!(strict_runs.load(Ordering::SeqCst), 1);

    tokio::task::spawn_blocking(support::stop_postgres)
        .await
        .expect("stops");
    // Fail closed: the call is blocked by its budget, the kickoff goes on.
    let output = strict.kickoff(()).await.expect("runs, its call blocked");
    assert_eq!(output.raw, "done");
    assert_eq!(
        strict_runs.load(Ordering::SeqCst),
        1,
        "the call did not run"
    );
    assert_eq!(*strict_blocks.lock().expect("blocks"), ["budget:strict"]);
    // Opted out: the call runs uncounted, with a warning.
    lenient.kickoff(()).await.expect("runs");
    assert_eq!(lenient_runs.load(Ordering::SeqCst), 2);
    assert!(lenient_blocks.lock().expect("blocks").is_empty());

    tokio::task::spawn_blocking(support::start_postgres)
        .await
        .expect("starts");
    // The same store reconnects: calls are admitted and counted again.
    let started = std::time::Instant::now();
    loop {
        strict.kickoff(()).await.expect("runs");
        if strict_runs.load(Ordering::SeqCst) == 2 {
            break;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "calls are admitted once the store is back"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let used = async |name: &str| {
        store
            .used(&Charge::new(name, "crew:lookups", 10, 1))
            .await
            .expect("reads")
    };
    assert_eq!(used("strict").await, 2, "the call refused was not counted");
    assert_eq!(
        used("lenient").await,
        1,
        "the call let through was not counted"
    );
}
