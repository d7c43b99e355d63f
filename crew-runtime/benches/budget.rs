//! What a budget's reservation costs (SPEC §5, §15): the round trip of a
//! reservation and its settlement, one call after another, on the
//! in-process counters, a SQLite file and PostgreSQL; one budget per call,
//! then three. Medians of `RUNS` runs of `CALLS` calls.
//!
//! `cargo bench -p crew-runtime --features budget,store --bench budget`

#[path = "shared/stores.rs"]
mod stores;
#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use crew_runtime::budget::{Charge, InProcessLedger, Ledger, Window};
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

fn main() {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => fail("no runtime", error),
    };
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
    });
}
