//! Rule 4: registering and unregistering at any time, from any thread, while
//! other threads dispatch, and from inside a running hook.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use hooks_core::{HookOptions, HookRegistry, PRE_TOOL_CALL, ToolCallHookContext};
use serde_json::{Value, json};

const DISPATCH_THREADS: usize = 4;
const DISPATCHES_PER_THREAD: usize = 20_000;
const WINDOW: u64 = 4;

fn labelled_hook(label: u64) -> impl Fn(&mut ToolCallHookContext) + Send + Sync + 'static {
    move |ctx: &mut ToolCallHookContext| {
        if let Some(Value::Array(seen)) = ctx.tool_input.get_mut("seen") {
            seen.push(json!(label));
        }
    }
}

fn seen_labels(ctx: &ToolCallHookContext) -> Vec<u64> {
    match ctx.tool_input.get("seen") {
        Some(Value::Array(seen)) => seen.iter().filter_map(Value::as_u64).collect(),
        _ => Vec::new(),
    }
}

#[test]
fn dispatch_sees_a_consistent_chain_while_others_register_and_unregister() {
    let (done, finished) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        let registry = Arc::new(HookRegistry::new());
        let stop = Arc::new(AtomicBool::new(false));
        let nested_registrations = Arc::new(AtomicUsize::new(0));

        // A hook that registers (and at once unregisters) another hook from
        // inside a running dispatch.
        let weak = Arc::downgrade(&registry);
        let nested = nested_registrations.clone();
        registry
            .register_hook_with(
                PRE_TOOL_CALL,
                HookOptions::new().tools(["nested"]),
                move |_: &mut ToolCallHookContext| {
                    if let Some(registry) = weak.upgrade() {
                        let id = registry
                            .register_hook_with(
                                PRE_TOOL_CALL,
                                HookOptions::new().tools(["never_called"]),
                                |_: &mut ToolCallHookContext| {},
                            )
                            .expect("() fits PRE");
                        assert!(registry.unregister_hook(PRE_TOOL_CALL, id));
                        nested.fetch_add(1, Ordering::Relaxed);
                    }
                },
            )
            .expect("() fits PRE");

        let barrier = Arc::new(Barrier::new(DISPATCH_THREADS + 1));
        let writer = {
            let registry = registry.clone();
            let stop = stop.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                let mut ids = std::collections::VecDeque::new();
                let mut label = 0_u64;
                while !stop.load(Ordering::Relaxed) {
                    let id = registry
                        .register_hook_with(
                            PRE_TOOL_CALL,
                            HookOptions::new().tools(["probe"]),
                            labelled_hook(label),
                        )
                        .expect("() fits PRE");
                    ids.push_back(id);
                    label += 1;
                    if ids.len() as u64 > WINDOW
                        && let Some(oldest) = ids.pop_front()
                    {
                        assert!(registry.unregister_hook(PRE_TOOL_CALL, oldest));
                    }
                }
                label
            })
        };

        let dispatchers: Vec<_> = (0..DISPATCH_THREADS)
            .map(|thread| {
                let registry = registry.clone();
                let barrier = barrier.clone();
                std::thread::spawn(move || {
                    barrier.wait();
                    let mut non_empty = 0;
                    for i in 0..DISPATCHES_PER_THREAD {
                        let tool = if (i + thread) % 10 == 0 {
                            "nested"
                        } else {
                            "probe"
                        };
                        let mut ctx = ToolCallHookContext::new(
                            tool,
                            json!({"seen": []}).as_object().cloned().unwrap_or_default(),
                        );
                        registry.dispatch_pre(&mut ctx);
                        let seen = seen_labels(&ctx);
                        // One snapshot: labels are contiguous and in
                        // registration order, never a torn mix of two chains.
                        for pair in seen.windows(2) {
                            assert_eq!(pair[1], pair[0] + 1, "torn chain: {seen:?}");
                        }
                        assert!(
                            seen.len() as u64 <= WINDOW + 1,
                            "too many hooks in one snapshot: {seen:?}"
                        );
                        if !seen.is_empty() {
                            non_empty += 1;
                        }
                    }
                    non_empty
                })
            })
            .collect();

        let mut dispatches_that_ran_hooks = 0;
        for dispatcher in dispatchers {
            dispatches_that_ran_hooks += dispatcher.join().expect("dispatcher thread");
        }
        stop.store(true, Ordering::Relaxed);
        let registered = writer.join().expect("writer thread");
        let _ = done.send((
            dispatches_that_ran_hooks,
            registered,
            nested_registrations.load(Ordering::Relaxed),
        ));
    });

    let (ran_hooks, registered, nested) = finished
        .recv_timeout(Duration::from_secs(120))
        .expect("deadlock: the threads did not finish within the watchdog's limit");
    worker.join().expect("worker thread");
    assert!(registered > 0, "the writer registered hooks");
    assert!(ran_hooks > 0, "some dispatches saw the writer's hooks");
    assert!(nested > 0, "hooks registered hooks from inside a dispatch");
}
