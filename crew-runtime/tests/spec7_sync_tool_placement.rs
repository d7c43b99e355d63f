//! SPEC §7 (sync tools run without blocking the runtime) and §5 (a plain
//! `fn` tool with a quick body costs within 2 x an async tool): a
//! synchronous tool starts on the blocking pool, runs in place once its
//! calls have proven quick, and goes back to the pool at the first call in
//! place that overruns; `SyncPlacement` fixes either for those who know.
//!
//! Where a call ran is read from the thread it ran on: `kickoff_blocking`
//! outside a runtime drives its current-thread runtime on the calling
//! thread, so "in place" is the test's own thread.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::ThreadId;
use std::time::Duration;

use common::*;
use crew_runtime::SyncPlacement;
use crew_runtime::prelude::*;

/// Runs `calls` calls of `tool` (one a turn) through a crew on the calling
/// thread; the tool records the thread of each call in `threads`.
fn run_calls(tool: Tool, calls: usize) {
    let mut llm = ScriptedLlm::new();
    for n in 0..calls {
        llm = llm.call("probe", json!({ "n": n }));
    }
    let llm = Arc::new(llm.answer("done"));
    let worker = Agent::builder("Worker")
        .tool(tool)
        .llm(llm.clone())
        .max_iter(calls + 1)
        .build();
    let crew = Crew::builder()
        .agent(worker.clone())
        .task(Task::builder("Probe").agent(&worker).build())
        .global_registry(fresh_registry())
        .build()
        .expect("builds");
    let output = crew.kickoff_blocking(()).expect("runs");
    assert_eq!(output.raw, "done");
}

/// A `probe` tool that records its thread and sleeps as `sleep(n)` says.
fn probe(threads: &Log<ThreadId>, sleep: impl Fn(u64) -> Duration + Send + Sync + 'static) -> Tool {
    let threads = threads.clone();
    Tool::dynamic(
        "probe",
        "Records its thread",
        json!({"type": "object"}),
        move |args| {
            push(&threads, std::thread::current().id());
            let pause = sleep(args["n"].as_u64().unwrap_or(0));
            if !pause.is_zero() {
                std::thread::sleep(pause);
            }
            Ok::<_, String>(json!("ok"))
        },
    )
}

/// Which calls ran in place (on this thread).
fn in_place(threads: &Log<ThreadId>) -> Vec<bool> {
    let here = std::thread::current().id();
    take(threads)
        .into_iter()
        .map(|thread| thread == here)
        .collect()
}

#[test]
fn a_quick_plain_tool_moves_in_place_once_its_calls_prove_quick() {
    let threads = log();
    run_calls(probe(&threads, |_| Duration::ZERO), 40);

    let placed = in_place(&threads);
    assert_eq!(placed.len(), 40);
    assert!(!placed[0], "a new tool starts on the blocking pool");
    // A call preempted on a busy machine can look slow and send the tool
    // back for a while: most calls, not all, are asserted in place.
    let here = placed.iter().filter(|here| **here).count();
    assert!(
        here >= 20,
        "after a few quick calls it runs in place: {placed:?}"
    );
}

#[test]
fn a_slow_plain_tool_never_runs_in_place() {
    let threads = log();
    run_calls(probe(&threads, |_| Duration::from_millis(2)), 8);

    assert_eq!(in_place(&threads), [false; 8]);
}

#[test]
fn a_tool_that_overruns_in_place_goes_back_to_the_pool() {
    // Quick for its first 30 calls, then slow.
    let threads = log();
    run_calls(
        probe(&threads, |n| {
            if n >= 30 {
                Duration::from_millis(2)
            } else {
                Duration::ZERO
            }
        }),
        36,
    );

    let placed = in_place(&threads);
    assert!(
        placed[..30].iter().any(|here| *here),
        "proven quick meanwhile: {placed:?}"
    );
    // A slow call in place overruns: every later (slow) call is on the
    // pool, where it never proves quick again.
    let first_slow_in_place = (30..36).find(|&at| placed[at]).unwrap_or(29);
    assert!(
        placed[first_slow_in_place + 1..].iter().all(|here| !here),
        "after its overrun it stays on the pool while slow: {placed:?}"
    );
    assert!(!placed[35], "{placed:?}");
}

#[test]
fn explicit_placements_are_kept() {
    let threads = log();
    run_calls(
        probe(&threads, |_| Duration::ZERO).with_sync_placement(SyncPlacement::InPlace),
        3,
    );
    assert_eq!(in_place(&threads), [true; 3]);

    let threads = log();
    run_calls(
        probe(&threads, |_| Duration::ZERO).with_sync_placement(SyncPlacement::BlockingPool),
        10,
    );
    assert_eq!(in_place(&threads), [false; 10]);
}

#[test]
fn a_typed_tool_takes_its_placement_too() {
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Args {
        n: u64,
    }
    let calls = Arc::new(AtomicUsize::new(0));
    let here = std::thread::current().id();
    let seen = calls.clone();
    let tool: Tool = Tool::typed("probe", "Counts", move |args: Args| {
        assert_eq!(std::thread::current().id(), here, "ran in place");
        seen.fetch_add(1, Ordering::SeqCst);
        Ok::<_, String>(args.n)
    })
    .with_sync_placement(SyncPlacement::InPlace)
    .into();
    assert_eq!(tool.sync_placement(), SyncPlacement::InPlace);
    run_calls(tool, 3);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[tokio::test(flavor = "current_thread")]
async fn a_quick_plain_tool_in_place_works_on_a_current_thread_runtime() {
    // Where `block_in_place` would panic: running in place is a plain call.
    let threads = log();
    let mut llm = ScriptedLlm::new();
    for n in 0..8 {
        llm = llm.call("probe", json!({ "n": n }));
    }
    let llm = Arc::new(llm.answer("done"));
    let worker = Agent::builder("Worker")
        .tool(probe(&threads, |_| Duration::ZERO))
        .llm(llm)
        .build();
    let crew = Crew::builder()
        .agent(worker.clone())
        .task(Task::builder("Probe").agent(&worker).build())
        .global_registry(fresh_registry())
        .build()
        .expect("builds");
    assert_eq!(crew.kickoff(()).await.expect("runs").raw, "done");
    assert!(in_place(&threads)[7]);
}
