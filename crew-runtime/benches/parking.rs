//! What a parked kickoff costs (SPEC §5, §13 "Parking").
//!
//! **From an answer to the kickoff running again.** A durable crew parks
//! at once when its refund asks for an approval. A resumer runs in the
//! background (`Resumer::run`, looking every 10 s, so only the store's
//! news of the answer wakes it in time) on the service's store handle; the
//! answer is given through another handle of the same store (its own
//! connection pool, as an inbox on another replica has), so the resumer
//! hears of it as another process would: `NOTIFY` on PostgreSQL, the
//! file's data version read every 100 ms on SQLite. For each of `ANSWERS`
//! kickoffs, one at a time: the time from the answer's return to the
//! refund's start in the resumed run. p50 and p95 (targets: 1 s on
//! PostgreSQL, 2 s on SQLite, at p95).
//!
//! **1,000 parked kickoffs.** Another process (this program, run again)
//! runs `PARKED` kickoffs of the crew until they park, and exits; the
//! resumer of this process runs all along. Its resident memory
//! (`/proc/self/statm`), heap in use (counted by this bench's allocator)
//! and the runtime's live tasks, after against before (target: at most
//! 1 MiB more).
//!
//! `cargo bench -p crew-runtime --features durable,store --bench parking`

#[path = "shared/counting.rs"]
mod counting;
#[path = "shared/stores.rs"]
mod stores;
#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crew_runtime::ToolAnnotations;
use crew_runtime::durable::{Durable, Resumer};
use crew_runtime::guards::ApprovalGate;
use crew_runtime::prelude::*;
use crew_runtime::store::journal::{JournalKey, KickoffStatus};
use crew_runtime::store::{Answer, Decision, Store, StoreApprovals};
use tokio::sync::mpsc;

use counting::IN_USE;

const ANSWERS: usize = 40;
const PARKED: usize = 1000;

fn fail(what: &str, error: impl std::fmt::Display) -> ! {
    eprintln!("{what}: {error}");
    std::process::exit(1)
}

/// The resident memory of this process, in bytes (Linux).
fn resident() -> usize {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|statm| statm.split_whitespace().nth(1)?.parse::<usize>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// A refund crew that parks at once, its model following `script`, its
/// refund telling `started` when it runs.
fn crew(
    store: &Store,
    key: &JournalKey,
    script: ScriptedLlm,
    started: mpsc::UnboundedSender<Instant>,
) -> Crew {
    let refund = Tool::dynamic(
        "refund",
        "Refunds an order",
        json!({"type": "object"}),
        move |_| {
            let _ = started.send(Instant::now());
            Ok::<_, String>(json!("refunded"))
        },
    )
    .with_annotations(ToolAnnotations::new().destructive(true))
    .with_timeout(Duration::from_secs(5));
    let llm = Arc::new(script);
    let support = Agent::builder("Support")
        .llm(llm as Arc<dyn Llm>)
        .tool(refund)
        .build();
    let built = Crew::builder()
        .name("refunds")
        .agent(support.clone())
        .task(
            Task::builder("Settle order {order}")
                .agent(&support)
                .build(),
        )
        .global_registry(Arc::new(HookRegistry::new()))
        .human_input(Arc::new(StoreApprovals::new(store.clone())))
        .async_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("approval-gate"),
            ApprovalGate::for_capabilities([Capability::Destructive]).pre_hook(),
        )
        .durable(
            Durable::new(store.clone())
                .journal_key(key.clone())
                .park_after(Duration::ZERO),
        )
        .build();
    match built {
        Ok(crew) => crew.for_user("customer-7"),
        Err(error) => fail("the crew does not build", error),
    }
}

/// A kickoff of `crew`, run until it parks.
async fn park(crew: &Crew) {
    match crew.kickoff([("order", "A-1")]).await {
        Err(CrewError::Parked { .. }) => {}
        other => fail("the kickoff did not park", format!("{other:?}")),
    }
}

fn percentile(sorted: &[Duration], percent: usize) -> Duration {
    let at = (sorted.len() * percent).div_ceil(100).saturating_sub(1);
    sorted[at.min(sorted.len() - 1)]
}

async fn report(backend: &str, url: &str) {
    let (service, approver) = match (Store::connect(url).await, Store::connect(url).await) {
        (Ok(service), Ok(approver)) => (service, approver),
        (Err(error), _) | (_, Err(error)) => fail("the store does not open", error),
    };
    let key = match JournalKey::generate() {
        Ok(key) => key,
        Err(error) => fail("no key", error),
    };
    let (started, mut starts) = mpsc::unbounded_channel();
    // One kickoff at a time: a refund, then (resumed) the answer.
    let mut script = ScriptedLlm::new().without_recording();
    for _ in 0..ANSWERS {
        script = script
            .call("refund", json!({"order": "A-1"}))
            .answer("settled");
    }
    let crew = crew(&service, &key, script, started.clone());
    let resumer = Resumer::new(service.clone())
        .crew(&crew)
        .every(Duration::from_secs(10));
    let background = tokio::spawn(async move { resumer.run().await });
    let mut latencies = Vec::with_capacity(ANSWERS);
    for _ in 0..ANSWERS {
        park(&crew).await;
        let pending = match approver.pending().await {
            Ok(pending) if pending.len() == 1 => pending,
            other => fail("one question pending", format!("{other:?}")),
        };
        if let Err(error) = approver
            .decide(&pending[0].id, Answer::new("ops", Decision::Approve))
            .await
        {
            fail("the answer is refused", error);
        }
        let answered = Instant::now();
        match tokio::time::timeout(Duration::from_secs(30), starts.recv()).await {
            Ok(Some(at)) => latencies.push(at.saturating_duration_since(answered)),
            _ => fail("the parked kickoff", "was not taken up within 30 s"),
        }
        // Its end, before the next.
        while service
            .kickoffs()
            .await
            .map(|all| all.iter().any(|k| !k.status.is_finished()))
            .unwrap_or(false)
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    latencies.sort();
    println!(
        "{backend:<10} from an answer to the parked kickoff running again ({ANSWERS} kickoffs): \
         p50 {:>7.1} ms, p95 {:>7.1} ms, max {:>7.1} ms",
        percentile(&latencies, 50).as_secs_f64() * 1e3,
        percentile(&latencies, 95).as_secs_f64() * 1e3,
        latencies[latencies.len() - 1].as_secs_f64() * 1e3,
    );

    // 1,000 kickoffs parked by another process: what the resumer (this
    // process, still running) holds for them.
    let metrics = tokio::runtime::Handle::current().metrics();
    let (heap, rss, tasks) = (
        IN_USE.load(Ordering::Relaxed),
        resident(),
        metrics.num_alive_tasks(),
    );
    let parker = std::env::current_exe()
        .and_then(|exe| {
            std::process::Command::new(exe)
                .env(CHILD, "1")
                .env("CREW_BENCH_STORE", url)
                .env("CREW_BENCH_KEY", key.to_base64())
                .status()
        })
        .unwrap_or_else(|error| fail("the parking process does not run", error));
    if !parker.success() {
        fail("the parking process failed", parker);
    }
    // The resumer heard of every change meanwhile, and looked.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (heap_after, rss_after, tasks_after) = (
        IN_USE.load(Ordering::Relaxed),
        resident(),
        metrics.num_alive_tasks(),
    );
    // Counted after: listing them costs this process memory too.
    let parked = service
        .kickoffs()
        .await
        .map(|all| {
            all.iter()
                .filter(|k| k.status == KickoffStatus::Parked)
                .count()
        })
        .unwrap_or(0);
    background.abort();
    let kib = |before: usize, after: usize| (after as f64 - before as f64) / 1024.0;
    println!(
        "{backend:<10} {parked} kickoffs parked by another process: the resumer's resident memory \
         {:+.1} KiB, heap in use {:+.1} KiB, live tasks {tasks} -> {tasks_after}",
        kib(rss, rss_after),
        kib(heap, heap_after),
    );
}

/// The environment variable that makes this program the process that
/// parks the kickoffs.
const CHILD: &str = "CREW_BENCH_PARKER";

/// The parking process: `PARKED` kickoffs on the store and key it is
/// given, each run at once until it parks.
async fn park_all() {
    let (url, key) = match (
        std::env::var("CREW_BENCH_STORE"),
        std::env::var("CREW_BENCH_KEY"),
    ) {
        (Ok(url), Ok(key)) => (url, key),
        _ => fail("the parking process", "has no store or key"),
    };
    let store = match Store::connect(&url).await {
        Ok(store) => store,
        Err(error) => fail("the store does not open", error),
    };
    let key = match JournalKey::from_base64(&key) {
        Ok(key) => key,
        Err(error) => fail("no key", error),
    };
    // Each of them asks for a refund, at once, and parks.
    let mut script = ScriptedLlm::new().without_recording();
    for _ in 0..PARKED {
        script = script.call("refund", json!({"order": "A-1"}));
    }
    let (started, _) = mpsc::unbounded_channel();
    let crew = crew(&store, &key, script, started);
    // Sixteen at a time: more would only wait for the store's connections.
    use futures_util::StreamExt as _;
    futures_util::stream::iter((0..PARKED).map(|_| park(&crew)))
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;
}

fn main() {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => fail("no runtime", error),
    };
    if std::env::var_os(CHILD).is_some() {
        runtime.block_on(park_all());
        return;
    }
    runtime.block_on(stores::on_each_store(|backend, url| async move {
        report(backend, &url).await;
    }));
}
