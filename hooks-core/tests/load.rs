//! The registry under load: 8 threads dispatching while 2 threads register,
//! unregister, clear and restore, and hooks register hooks. No deadlock
//! (a watchdog bounds the test), no torn chain, nothing leaked afterwards.
//!
//! `HOOKS_TEST_SCALE=20` runs the full 8 × 100,000 dispatches (CI does);
//! the default runs 8 × 5,000.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, mpsc};
use std::time::Duration;

use hooks_core::{HookOptions, HookRegistry, POST_TOOL_CALL, PRE_TOOL_CALL, ToolCallHookContext};
use serde_json::{Value, json};

const DISPATCH_THREADS: usize = 8;

fn dispatches_per_thread() -> usize {
    let scale: usize = std::env::var("HOOKS_TEST_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    5_000 * scale.max(1)
}

#[test]
fn registry_under_load_has_no_deadlock_no_torn_chain_and_no_leak() {
    let token = Arc::new(());
    let (done, finished) = mpsc::channel();
    let worker_token = token.clone();
    let worker = std::thread::spawn(move || {
        let token = worker_token;
        let registry = Arc::new(HookRegistry::new());
        let stop = Arc::new(AtomicBool::new(false));
        let barrier = Arc::new(Barrier::new(DISPATCH_THREADS + 2));
        let nested = Arc::new(AtomicUsize::new(0));

        // Writer 1: a sliding window of labelled hooks on both points.
        let window_writer = {
            let (registry, stop, barrier, token) = (
                registry.clone(),
                stop.clone(),
                barrier.clone(),
                token.clone(),
            );
            std::thread::spawn(move || {
                barrier.wait();
                let mut ids = VecDeque::new();
                let mut label = 0_u64;
                while !stop.load(Ordering::Relaxed) {
                    let held = token.clone();
                    let id = registry
                        .register_hook_with(
                            PRE_TOOL_CALL,
                            HookOptions::new().tools(["probe"]),
                            move |ctx: &mut ToolCallHookContext| {
                                let _ = &held;
                                if let Some(Value::Array(seen)) = ctx.tool_input.get_mut("seen") {
                                    seen.push(json!(label));
                                }
                            },
                        )
                        .expect("() fits PRE");
                    ids.push_back(id);
                    label += 1;
                    if ids.len() > 6
                        && let Some(oldest) = ids.pop_front()
                    {
                        // It may already be gone: the other writer clears.
                        registry.unregister_hook(PRE_TOOL_CALL, oldest);
                    }
                }
            })
        };

        // Writer 2: clears, restores, and churns the POST chain; its POST
        // hook registers and removes a hook from inside a dispatch.
        let churn_writer = {
            let (registry, stop, barrier, nested, token) = (
                registry.clone(),
                stop.clone(),
                barrier.clone(),
                nested.clone(),
                token.clone(),
            );
            std::thread::spawn(move || {
                barrier.wait();
                let mut round = 0_u64;
                while !stop.load(Ordering::Relaxed) {
                    round += 1;
                    match round % 4 {
                        0 => {
                            registry.clear_all_hooks();
                        }
                        1 => {
                            registry.restore_static_hooks();
                        }
                        2 => {
                            let weak = Arc::downgrade(&registry);
                            let nested = nested.clone();
                            let held = token.clone();
                            registry
                                .register_hook(
                                    POST_TOOL_CALL,
                                    move |_: &mut ToolCallHookContext| {
                                        let _ = &held;
                                        if let Some(registry) = weak.upgrade() {
                                            let id = registry.register_after_tool_call_hook(
                                                |_: &mut ToolCallHookContext| None::<String>,
                                            );
                                            registry.unregister_hook(POST_TOOL_CALL, id);
                                            nested.fetch_add(1, Ordering::Relaxed);
                                        }
                                    },
                                )
                                .expect("() fits POST");
                        }
                        _ => {
                            registry.clear_hooks(POST_TOOL_CALL);
                        }
                    }
                    std::thread::yield_now();
                }
            })
        };

        let dispatchers: Vec<_> = (0..DISPATCH_THREADS)
            .map(|_| {
                let (registry, barrier) = (registry.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    let mut saw_hooks = 0_usize;
                    for _ in 0..dispatches_per_thread() {
                        let mut ctx = ToolCallHookContext::new(
                            "probe",
                            json!({"seen": []}).as_object().cloned().unwrap_or_default(),
                        );
                        registry.dispatch_pre(&mut ctx);
                        registry.dispatch_post(&mut ctx);
                        let seen: Vec<u64> = match ctx.tool_input.get("seen") {
                            Some(Value::Array(seen)) => {
                                seen.iter().filter_map(Value::as_u64).collect()
                            }
                            _ => Vec::new(),
                        };
                        for pair in seen.windows(2) {
                            assert_eq!(pair[1], pair[0] + 1, "torn chain: {seen:?}");
                        }
                        saw_hooks += usize::from(!seen.is_empty());
                    }
                    saw_hooks
                })
            })
            .collect();
        let saw_hooks: usize = dispatchers
            .into_iter()
            .map(|d| d.join().expect("dispatcher"))
            .sum();
        stop.store(true, Ordering::Relaxed);
        window_writer.join().expect("window writer");
        churn_writer.join().expect("churn writer");
        registry.clear_all_hooks();
        drop(registry);
        let _ = done.send((saw_hooks, nested.load(Ordering::Relaxed)));
    });

    let (saw_hooks, _nested) = finished
        .recv_timeout(Duration::from_secs(300))
        .expect("deadlock: the load test did not finish within the watchdog's limit");
    worker.join().expect("worker");
    assert!(saw_hooks > 0, "dispatches ran the writers' hooks");
    assert_eq!(
        Arc::strong_count(&token),
        1,
        "a hook (or a snapshot holding it) leaked"
    );
}
