//! The rate limiter is exact under concurrency: however many threads call
//! at once, each window admits exactly `limit` calls per key — directly,
//! and as a PRE hook on a crew whose tool calls run concurrently.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Condvar, Mutex, PoisonError};
use std::time::Duration;

use common::*;
use crew_runtime::guards::{ManualClock, RateLimiter};
use crew_runtime::prelude::*;

const WINDOW: Duration = Duration::from_secs(60);

/// `threads` threads start together and each tries `attempts` checks of
/// every key; returns how many were admitted per key.
fn hammer(limiter: &RateLimiter, keys: &[&str], threads: usize, attempts: usize) -> Vec<usize> {
    let admitted: Vec<AtomicUsize> = keys.iter().map(|_| AtomicUsize::new(0)).collect();
    let start = Barrier::new(threads);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                start.wait();
                for _ in 0..attempts {
                    for (key, count) in keys.iter().zip(&admitted) {
                        match limiter.check(key) {
                            Ok(()) => {
                                count.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(refused) => assert_eq!(refused.source, "rate-limiter"),
                        }
                    }
                }
            });
        }
    });
    admitted.into_iter().map(AtomicUsize::into_inner).collect()
}

#[test]
fn exactly_limit_calls_per_key_are_admitted_in_each_window_across_threads() {
    let scale = test_scale();
    let (threads, attempts, limit) = (8, 250 * scale, 37);
    let clock = Arc::new(ManualClock::new());
    let limiter = RateLimiter::with_clock(limit, WINDOW, clock.clone());
    let keys = ["web_search", "send_email", "read_file"];

    for round in 0..4 + scale {
        let admitted = hammer(&limiter, &keys, threads, attempts);
        assert_eq!(admitted, [limit; 3], "round {round}");
        clock.advance(WINDOW);
    }
}

#[test]
fn the_window_slides_rather_than_resets() {
    let limit = 40;
    let clock = Arc::new(ManualClock::new());
    let limiter = RateLimiter::with_clock(limit, WINDOW, clock.clone());
    let half = WINDOW / 2;

    // t=0: only 10 calls come.
    assert_eq!(hammer(&limiter, &["k"], 2, 5), [10]);
    clock.advance(half);
    // t=30s: a crowd; 30 more fit in the window (0, 30s].
    assert_eq!(hammer(&limiter, &["k"], 8, 50), [30]);
    clock.advance(half);
    // t=60s: the 10 calls of t=0 have left the window, the 30 have not.
    assert_eq!(hammer(&limiter, &["k"], 8, 50), [10]);
    clock.advance(half);
    // t=90s: the 30 of t=30s have left.
    assert_eq!(hammer(&limiter, &["k"], 8, 50), [30]);
    clock.advance(half - Duration::from_nanos(1));
    // Just before t=120s the 10 of t=60s are still in the window.
    assert_eq!(hammer(&limiter, &["k"], 8, 50), [0]);
}

/// The first `wanted` callers wait for each other (or a generous safety
/// timeout, so a regression fails an assertion instead of hanging); later
/// callers pass straight through.
struct Crowd {
    arrived: Mutex<usize>,
    changed: Condvar,
    wanted: usize,
}

impl Crowd {
    fn gather(&self) {
        let mut arrived = self.arrived.lock().unwrap_or_else(PoisonError::into_inner);
        *arrived += 1;
        self.changed.notify_all();
        let _ = self
            .changed
            .wait_timeout_while(arrived, Duration::from_secs(10), |arrived| {
                *arrived < self.wanted
            })
            .unwrap_or_else(PoisonError::into_inner);
    }
}

/// The calls run as tasks of a multi-threaded runtime with as many workers
/// as calls at once, so that the crowd of PRE hooks really meets.
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn concurrent_tool_calls_of_a_crew_run_exactly_limit_times_per_window() {
    let scale = test_scale();
    let (limit, calls_per_turn, concurrency) = (5, 40 * scale, 8);
    let clock = Arc::new(ManualClock::new());
    let limiter = RateLimiter::with_clock(limit, WINDOW, clock.clone());
    let executions = Arc::new(AtomicUsize::new(0));

    for round in 0..3 {
        let crowd = Arc::new(Crowd {
            arrived: Mutex::new(0),
            changed: Condvar::new(),
            wanted: concurrency,
        });
        let pre_threads = log();
        let counter = executions.clone();
        let lookup = Tool::dynamic(
            "lookup",
            "Looks a number up",
            json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
            move |args| {
                counter.fetch_add(1, Ordering::SeqCst);
                Ok::<_, String>(json!(format!("found {}", args["n"])))
            },
        );
        // Two turns of calls; a few of them name a tool that does not
        // exist, which must not use up the limit.
        let turn = |offset: usize| {
            (0..calls_per_turn).map(move |n| {
                let name = if n % 8 == 3 { "lookup_typo" } else { "lookup" };
                (name, json!({ "n": offset + n }))
            })
        };
        let llm = Arc::new(
            ScriptedLlm::new()
                .calls(turn(0))
                .calls(turn(calls_per_turn))
                .answer("done"),
        );
        let worker = agent("Worker", vec![lookup], &llm);
        let (gather, threads) = (crowd.clone(), pre_threads.clone());
        let crew = Crew::builder()
            .name("limited")
            .agent(worker.clone())
            .task(Task::builder("Look numbers up").agent(&worker).build())
            .global_registry(fresh_registry())
            .max_concurrent_tool_calls(concurrency)
            // The full-size run asks for more calls in one turn than the
            // default per-turn limit (tested in `hardening_limits.rs`).
            .max_tool_calls_per_turn(usize::MAX)
            .hook_with(
                PRE_TOOL_CALL,
                HookOptions::new().name("crowd"),
                move |_: &mut ToolCallHookContext| {
                    push(&threads, std::thread::current().id());
                    gather.gather();
                },
            )
            .hook_with(
                PRE_TOOL_CALL,
                HookOptions::new().name("rate-limiter"),
                limiter.pre_hook(),
            )
            .build()
            .expect("builds");
        let refusals = log();
        let sink = refusals.clone();
        crew.events().subscribe(move |event| {
            if let Event::HookDispatched(dispatch) = event
                && dispatch.abort_source.as_deref() == Some("rate-limiter")
            {
                push(&sink, dispatch.abort_reason.clone().unwrap_or_default());
            }
        });
        let before = executions.load(Ordering::SeqCst);

        crew.kickoff(()).await.expect("runs");

        assert_eq!(
            executions.load(Ordering::SeqCst) - before,
            limit,
            "round {round}: exactly the limit ran, over both turns"
        );
        let requests = llm.requests();
        let mut ran = 0;
        for request in &requests[1..3] {
            for observation in request.observations() {
                if observation.starts_with("found ") {
                    ran += 1;
                } else if !observation.starts_with("Tool not found: lookup_typo") {
                    assert_eq!(observation, "Tool execution blocked by hook. Tool: lookup");
                }
            }
        }
        assert_eq!(ran, limit, "round {round}");
        assert_eq!(
            requests[2]
                .observations()
                .iter()
                .filter(|o| o.starts_with("found "))
                .count(),
            0,
            "round {round}: the second turn is in the same window"
        );
        let lookups = 2 * (0..calls_per_turn).filter(|n| n % 8 != 3).count();
        let refusals = take(&refusals);
        assert_eq!(refusals.len(), lookups - limit, "round {round}");
        assert!(
            refusals
                .iter()
                .all(|r| r.starts_with("rate limit reached for `lookup`: at most 5 call(s)")),
            "{refusals:?}"
        );
        let mut threads = take(&pre_threads);
        threads.sort_by_key(|id| format!("{id:?}"));
        threads.dedup();
        assert!(
            threads.len() > 1,
            "round {round}: the calls ran on several threads"
        );
        clock.advance(WINDOW);
    }
}
