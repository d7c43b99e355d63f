//! What a budget's reservation costs (SPEC §5, §15): the round trip of a
//! reservation and its settlement, one call after another, on the
//! in-process counters, a SQLite file, PostgreSQL and Redis (each started
//! here where installed); one budget per call,
//! then three. Medians of `RUNS` runs of `CALLS` calls.
//!
//! And what budgets add to a kickoff: a crew on the scripted model makes
//! 100 turns of 100 calls of a trivial tool, one at a time, with no budget,
//! then with a tool-call budget and a model-call budget on the in-process
//! counters (SPEC §5: within 2 × the runtime's cost per call without
//! budgets). The kickoff's time over its 10,000 calls, medians of
//! `RUNS` kickoffs of fresh crews.
//!
//! `cargo bench -p crew-runtime --features budget,store,redis --bench budget`

#[path = "shared/stores.rs"]
mod stores;
#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use std::sync::Arc;

use crew_runtime::budget::{Budget, Charge, InProcessLedger, Ledger, Window};
use crew_runtime::prelude::*;
use crew_runtime::store::Store;

const CALLS: usize = 400;
const RUNS: usize = 5;

fn fail(what: &str, error: impl std::fmt::Display) -> ! {
    eprintln!("{what}: {error}");
    std::process::exit(1)
}

/// The charges of one call: `budgets` budgets, generous limits.
fn charges(budgets: usize) -> Vec<Charge> {
    [
        Charge::new("tool-calls", "tenant:acme", u64::MAX / 4, 1).window(Window::DayUtc),
        Charge::new("tokens", "kickoff:bench", u64::MAX / 4, 4_096),
        Charge::new("hourly", "user:carol", u64::MAX / 4, 1)
            .window(Window::Rolling(Duration::from_secs(3_600))),
    ]
    .into_iter()
    .take(budgets)
    .collect()
}

/// The median time of one reservation and its settlement.
async fn round_trip(ledger: &dyn Ledger, label: &str, budgets: usize) -> Duration {
    let charges = charges(budgets);
    let costs: Vec<(&str, u64)> = charges.iter().map(|c| (c.budget(), 1)).collect();
    let mut runs = Vec::new();
    for run in 0..RUNS {
        let started = Instant::now();
        for n in 0..CALLS {
            let call = format!("{label}-{budgets}-{run}-{n}");
            if let Err(error) = ledger.reserve(&call, &charges).await {
                fail("a reservation", error);
            }
            if let Err(error) = ledger.settle(&call, &costs).await {
                fail("a settlement", error);
            }
        }
        runs.push(started.elapsed() / u32::try_from(CALLS).unwrap_or(1));
    }
    runs.sort();
    runs[RUNS / 2]
}

fn show(time: Duration) -> String {
    if time < Duration::from_micros(10) {
        format!("{:>8.0} ns", time.as_secs_f64() * 1e9)
    } else {
        format!("{:>8.1} µs", time.as_secs_f64() * 1e6)
    }
}

async fn report(backend: &str, ledger: &dyn Ledger) {
    let one = round_trip(ledger, backend, 1).await;
    let three = round_trip(ledger, backend, 3).await;
    println!(
        "{backend:<10} reserve + settle: one budget {}, three budgets {}",
        show(one),
        show(three)
    );
}

const TURNS: u64 = 100;
const PER_TURN: u64 = 100;

/// A fresh crew of `TURNS` turns of `PER_TURN` calls, with `budgets`.
fn crew(budgets: bool) -> Crew {
    let mut llm = ScriptedLlm::new().without_recording();
    for turn in 0..TURNS {
        llm = llm.calls((0..PER_TURN).map(|i| ("ping", json!({ "n": turn * PER_TURN + i }))));
    }
    let tool = Tool::dynamic("ping", "Adds one", json!({"type": "object"}), |args| {
        Ok::<_, String>(json!(args["n"].as_u64().unwrap_or(0).wrapping_add(1)))
    });
    let agent = Agent::builder("Pinger")
        .tool(tool)
        .llm(Arc::new(llm.answer("done")))
        .max_iter(usize::try_from(TURNS + 1).unwrap_or(usize::MAX))
        .build();
    let mut builder = Crew::builder()
        .agent(agent.clone())
        .task(Task::builder("Ping").agent(&agent).build())
        .global_registry(Arc::new(HookRegistry::new()))
        .max_concurrent_tool_calls(1);
    if budgets {
        builder = builder
            .budget(Budget::tool_calls("calls", u64::MAX / 4).window(Window::DayUtc))
            .budget(Budget::model_calls("turns", u64::MAX / 4));
    }
    builder
        .build()
        .unwrap_or_else(|error| fail("the benchmark crew", error))
}

/// The median time per call of a kickoff, with or without budgets.
fn per_call(runtime: &tokio::runtime::Runtime, budgets: bool) -> Duration {
    let mut runs: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let crew = crew(budgets);
            let started = Instant::now();
            match runtime.block_on(crew.kickoff(())) {
                Ok(output) if output.raw == "done" => {}
                other => fail("the benchmark kickoff", format!("{other:?}")),
            }
            started.elapsed() / u32::try_from(TURNS * PER_TURN).unwrap_or(1)
        })
        .collect();
    runs.sort();
    runs[RUNS / 2]
}

fn main() {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => fail("no runtime", error),
    };
    let (without, with) = (per_call(&runtime, false), per_call(&runtime, true));
    println!(
        "kickoff per call: no budget {}, a tool-call and a model-call budget in process {}, ratio {:.2} x",
        show(without),
        show(with),
        with.as_secs_f64() / without.as_secs_f64()
    );
    runtime.block_on(async {
        report("in process", &InProcessLedger::new()).await;
        stores::on_each_store(|backend, url| async move {
            let store = match Store::connect(&url).await {
                Ok(store) => store,
                Err(error) => fail("the store does not open", error),
            };
            report(backend, &store).await;
        })
        .await;
        match support::RedisServer::start() {
            Some(server) => {
                let ledger = async {
                    crew_runtime::budget::RedisLedger::initialize(&server.url()).await?;
                    crew_runtime::budget::RedisLedger::connect(&server.url()).await
                };
                match ledger.await {
                    Ok(ledger) => report("Redis", &ledger).await,
                    Err(error) => fail("Redis", error),
                }
            }
            None => println!("Redis: skipped (not installed here)"),
        }
    });
}
