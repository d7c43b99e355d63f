//! What the audit trail costs (SPEC §11, §5).
//!
//! - `crew`: the `kickoff` bench's one-call-per-turn shape — `TURNS` turns
//!   of one call, through `kickoff().await` on a multi-threaded runtime —
//!   with a tool whose body spins for 200 µs (a tool that does some work,
//!   as real ones do), audit off against audit on (an `AuditTrail` on an
//!   SQLite store in a temporary directory, attached to the crew). With
//!   the audit on, the clock stops when `trail.flush()` returns: every
//!   record of the kickoff is in the store. No record may be dropped.
//!   Printed: the median per call of `RUNS` kickoffs each way, their ratio
//!   (target ≤ 1.2 x) and the cost per record.
//! - `sustained`: `RECORDS` records queued with `trail.record` as fast as
//!   a thread can, then `flush()`: records per second written, on SQLite
//!   and (a throw-away cluster started here, skipped with a message where
//!   it is missing) on PostgreSQL. Target ≥ 20,000 records/s. The buffer
//!   holds them all: this measures the writer, not the drop counter.
//! - `verify`: a trail of 1,000,000 records on SQLite (written with
//!   `record` and `flush`, 50,000 at a time), then `audit::verify` of it:
//!   the time to write and to verify, and records per second; the same for
//!   100,000 records, to show that verify is linear.
//!
//! `cargo bench -p crew-runtime --features store,audit --bench audit`

#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crew_runtime::audit::{self, AuditTrail};
use crew_runtime::prelude::*;
use crew_runtime::store::Store;
use serde::Deserialize;

const TURNS: u64 = 2_000;
const RUNS: usize = 5;
const BODY: Duration = Duration::from_micros(200);
const RECORDS: usize = 200_000;
const VERIFY_LARGE: usize = 1_000_000;
const VERIFY_SMALL: usize = 100_000;
/// Records queued between two flushes while filling a trail for verify:
/// enough to keep the writer's batches full, few enough to bound memory.
const FILL_CHUNK: usize = 50_000;

fn fail(what: &str, error: impl std::fmt::Display) -> ! {
    eprintln!("{what}: {error}");
    std::process::exit(1)
}

fn verdict(pass: bool) -> &'static str {
    if pass { "PASS" } else { "FAIL" }
}

#[derive(Deserialize, schemars::JsonSchema)]
struct Work {
    n: u64,
}

/// 200 µs of work: spun, not slept (a timer's granularity is a
/// millisecond).
fn work(args: Work) -> Result<u64, std::convert::Infallible> {
    let started = Instant::now();
    while started.elapsed() < BODY {
        std::hint::spin_loop();
    }
    Ok(args.n.wrapping_add(1))
}

fn crew() -> Crew {
    let mut llm = ScriptedLlm::new().without_recording();
    for n in 0..TURNS {
        llm = llm.call("work", json!({ "n": n }));
    }
    let agent = Agent::builder("Worker")
        .tool(Tool::typed(
            "work",
            "Works 200 µs",
            |args: Work| async move { work(args) },
        ))
        .llm(Arc::new(llm.answer("done")))
        .max_iter(usize::try_from(TURNS + 1).unwrap_or(usize::MAX))
        .build();
    Crew::builder()
        .agent(agent.clone())
        .task(Task::builder("Work").agent(&agent).build())
        .global_registry(Arc::new(HookRegistry::new()))
        .build()
        .unwrap_or_else(|error| fail("the benchmark crew could not be built", error))
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// One kickoff, with a trail attached when `trail` is given: the time
/// until its records are written, the part of it spent waiting for the
/// flush once the kickoff had returned, and how many records it wrote.
async fn kickoff(trail: Option<&AuditTrail>, listen: bool) -> (Duration, Duration, u64) {
    let crew = crew();
    if let Some(trail) = trail {
        trail.attach(&crew);
    }
    if listen {
        // A listener that keeps nothing: the cost of the events alone.
        crew.events().subscribe(|event| {
            std::hint::black_box(event);
        });
    }
    let before = trail.map_or(0, AuditTrail::written);
    let started = Instant::now();
    match crew.kickoff(()).await {
        Ok(output) if output.raw == "done" => {}
        other => fail(
            "the benchmark crew did not finish as planned",
            format!("{other:?}"),
        ),
    }
    let kicked_off = started.elapsed();
    if let Some(trail) = trail
        && let Err(error) = trail.flush().await
    {
        fail("the trail could not be flushed", error);
    }
    let elapsed = started.elapsed();
    (
        elapsed,
        elapsed.saturating_sub(kicked_off),
        trail.map_or(0, AuditTrail::written) - before,
    )
}

async fn crew_cost(store: &Store) {
    let trail = AuditTrail::open_with(store.clone(), "crew", audit::DEFAULT_BUFFER)
        .unwrap_or_else(|error| fail("the trail does not open", error));
    // Warm up both ways once.
    let _ = kickoff(None, false).await;
    let _ = kickoff(Some(&trail), false).await;
    let mut off = Vec::new();
    let mut listened = Vec::new();
    let mut on = Vec::new();
    let mut flush_waits = Vec::new();
    let mut records = 0;
    // Interleaved: a neighbour's load falls on both alike.
    for _ in 0..RUNS {
        off.push(kickoff(None, false).await.0);
        listened.push(kickoff(None, true).await.0);
        let (elapsed, flush_wait, written) = kickoff(Some(&trail), false).await;
        on.push(elapsed);
        flush_waits.push(flush_wait);
        records = written;
    }
    if trail.dropped() > 0 {
        fail(
            "records were dropped with the audit on",
            format!("{} dropped", trail.dropped()),
        );
    }
    let per_call = |total: Duration| total.as_secs_f64() * 1e6 / TURNS as f64;
    let (off, listened, on) = (median(off), median(listened), median(on));
    println!(
        "crew audit_off {:.1} µs per call ({TURNS} turns of one call, 200 µs tool body)",
        per_call(off)
    );
    println!(
        "crew listener  {:.1} µs per call (audit off, a listener that keeps nothing: the events' own cost)",
        per_call(listened)
    );
    println!(
        "crew audit_on  {:.1} µs per call, timed until flush() returned ({records} records per kickoff, 0 dropped)",
        per_call(on)
    );
    println!(
        "crew audit_on  of which {:.1} ms waiting for flush() once the kickoff had returned (median)",
        median(flush_waits).as_secs_f64() * 1e3
    );
    let cost = on.saturating_sub(off).as_secs_f64() * 1e9 / records.max(1) as f64;
    println!("crew cost per record {cost:.0} ns");
    let ratio = on.as_secs_f64() / off.as_secs_f64();
    println!(
        "target audit_on <= 1.2 x audit_off: {ratio:.3} x {}",
        verdict(ratio <= 1.2)
    );
}

/// A record the size of a tool's: its name, input, result and where.
fn data(n: usize) -> Value {
    json!({
        "tool": "work", "input": {"n": n}, "result": n + 1, "blocked": false,
        "duration_ms": 0, "agent": "Worker", "task": "Work", "crew": "crew",
    })
}

/// Writes `count` records to trail `name`, `chunk` at a time: the time
/// until the last flush returned.
async fn fill(store: &Store, name: &str, count: usize, chunk: usize) -> Duration {
    let trail = AuditTrail::open_with(store.clone(), name, chunk)
        .unwrap_or_else(|error| fail("the trail does not open", error));
    let started = Instant::now();
    let mut queued = 0;
    while queued < count {
        let end = (queued + chunk).min(count);
        for n in queued..end {
            trail.record("tool_finished", data(n));
        }
        if let Err(error) = trail.flush().await {
            fail("the trail could not be flushed", error);
        }
        queued = end;
    }
    let elapsed = started.elapsed();
    if trail.dropped() > 0 || trail.written() != count as u64 {
        fail(
            "the trail lost records",
            format!("{} written, {} dropped", trail.written(), trail.dropped()),
        );
    }
    elapsed
}

async fn sustained(backend: &str, url: &str) {
    let store = Store::connect(url)
        .await
        .unwrap_or_else(|error| fail("the store does not open", error));
    let elapsed = fill(&store, "sustained", RECORDS, RECORDS).await;
    let rate = RECORDS as f64 / elapsed.as_secs_f64();
    println!(
        "sustained {backend:<10} {RECORDS} records in {:.2} s: {rate:.0} records/s; target >= 20,000 {}",
        elapsed.as_secs_f64(),
        verdict(rate >= 20_000.0)
    );
}

async fn verify_cost(store: &Store, count: usize) -> Duration {
    let name = format!("verify-{count}");
    let written = fill(store, &name, count, FILL_CHUNK).await;
    let started = Instant::now();
    let verified = audit::verify(store, &name, None)
        .await
        .unwrap_or_else(|error| fail("the trail does not verify", error));
    let elapsed = started.elapsed();
    if verified.head.count != count as i64 {
        fail(
            "verify saw another count",
            format!("{} for {count}", verified.head.count),
        );
    }
    println!(
        "verify {count:>9} records on SQLite: written in {:.2} s ({:.0} records/s), verified in {:.2} s ({:.0} records/s)",
        written.as_secs_f64(),
        count as f64 / written.as_secs_f64(),
        elapsed.as_secs_f64(),
        count as f64 / elapsed.as_secs_f64()
    );
    elapsed
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|error| fail("no runtime", error));
    runtime.block_on(async {
        let dir = tempfile::tempdir().unwrap_or_else(|error| fail("no temporary directory", error));
        let sqlite = |file: &str| format!("sqlite://{}", dir.path().join(file).display());
        let store = Store::connect(&sqlite("crew.db"))
            .await
            .unwrap_or_else(|error| fail("the store does not open", error));
        crew_cost(&store).await;

        sustained("SQLite", &sqlite("sustained.db")).await;
        match support::postgres_database().await {
            Some(url) => sustained("PostgreSQL", &url).await,
            None => println!("sustained PostgreSQL: not installed here, not measured"),
        }

        let store = Store::connect(&sqlite("verify.db"))
            .await
            .unwrap_or_else(|error| fail("the store does not open", error));
        let small = verify_cost(&store, VERIFY_SMALL).await;
        let large = verify_cost(&store, VERIFY_LARGE).await;
        println!(
            "verify linear: {VERIFY_LARGE} records take {:.1} x the time of {VERIFY_SMALL} (10 x is linear)",
            large.as_secs_f64() / small.as_secs_f64()
        );
    });
}
