//! Rule 4, tightened: one snapshot per call (PRE and POST of one tool or
//! model call see the same hooks), batches applied atomically, and hooks'
//! captured state dropped outside every lock.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use hooks_core::runtime::{MODEL_CALL_POINTS, ToolOutput};
use hooks_core::testing::GlobalHooksFixture;
use hooks_core::{
    ChatMessage, HookId, HookRegistry, LlmCallHookContext, POST_MODEL_CALL, POST_TOOL_CALL,
    PRE_MODEL_CALL, PRE_TOOL_CALL, ToolCallHookContext, clear_hooks, register_hook,
    unregister_hook,
};

fn call(tool: &str) -> ToolCallHookContext {
    ToolCallHookContext::new(tool, Default::default())
}

/// Runs `test` on another thread and fails (rather than hangs) when it does
/// not finish in time: a deadlock shows as a failure.
fn within_seconds(seconds: u64, test: impl FnOnce() + Send + 'static) {
    let (done, finished) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        test();
        let _ = done.send(());
    });
    match finished.recv_timeout(Duration::from_secs(seconds)) {
        Ok(()) => {
            if worker.join().is_err() {
                panic!("the test thread panicked");
            }
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            // The worker panicked before sending: report its panic.
            if let Err(panic) = worker.join() {
                std::panic::resume_unwind(panic);
            }
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("no progress within {seconds} s: a deadlock")
        }
    }
}

#[test]
fn a_post_hook_registered_during_a_call_runs_from_the_next_call_on() {
    let registry = Arc::new(HookRegistry::new());
    let post_runs = Arc::new(AtomicUsize::new(0));
    let weak = Arc::downgrade(&registry);
    let counter = Arc::clone(&post_runs);
    let registered = Arc::new(AtomicBool::new(false));
    registry
        .register_hook(PRE_TOOL_CALL, move |_: &mut ToolCallHookContext| {
            if registered.swap(true, Ordering::SeqCst) {
                return;
            }
            if let Some(registry) = weak.upgrade() {
                let counter = Arc::clone(&counter);
                registry
                    .register_hook(POST_TOOL_CALL, move |_: &mut ToolCallHookContext| {
                        counter.fetch_add(1, Ordering::SeqCst);
                    })
                    .expect("registers");
            }
        })
        .expect("registers");

    registry
        .run_tool_call(&mut call("t"), |_| ToolOutput::text("ok"))
        .expect("no abort");
    assert_eq!(
        post_runs.load(Ordering::SeqCst),
        0,
        "not in the call that registered it"
    );
    registry
        .run_tool_call(&mut call("t"), |_| ToolOutput::text("ok"))
        .expect("no abort");
    assert_eq!(post_runs.load(Ordering::SeqCst), 1, "from the next call on");
}

#[test]
fn a_post_hook_removed_during_a_call_still_runs_at_that_calls_post() {
    let registry = Arc::new(HookRegistry::new());
    let post_runs = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&post_runs);
    let post: HookId = registry
        .register_hook(POST_TOOL_CALL, move |_: &mut ToolCallHookContext| {
            counter.fetch_add(1, Ordering::SeqCst);
        })
        .expect("registers");
    let weak = Arc::downgrade(&registry);
    registry
        .register_hook(PRE_TOOL_CALL, move |_: &mut ToolCallHookContext| {
            if let Some(registry) = weak.upgrade() {
                registry.unregister_hook(POST_TOOL_CALL, post);
            }
        })
        .expect("registers");

    registry
        .run_tool_call(&mut call("t"), |_| ToolOutput::text("ok"))
        .expect("no abort");
    assert_eq!(
        post_runs.load(Ordering::SeqCst),
        1,
        "the call's snapshot keeps it"
    );
    registry
        .run_tool_call(&mut call("t"), |_| ToolOutput::text("ok"))
        .expect("no abort");
    assert_eq!(
        post_runs.load(Ordering::SeqCst),
        1,
        "gone from the next call on"
    );
}

#[test]
fn pre_and_post_of_one_model_call_share_one_snapshot() {
    let registry = Arc::new(HookRegistry::new());
    let post_runs = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&post_runs);
    registry
        .register_hook(POST_MODEL_CALL, move |_: &mut LlmCallHookContext| {
            counter.fetch_add(1, Ordering::SeqCst);
        })
        .expect("registers");
    let weak = Arc::downgrade(&registry);
    registry
        .register_hook(PRE_MODEL_CALL, move |_: &mut LlmCallHookContext| {
            if let Some(registry) = weak.upgrade() {
                registry.clear_hooks(POST_MODEL_CALL);
            }
        })
        .expect("registers");

    let dispatcher = registry.dispatcher();
    let hooks = dispatcher.begin_call(&MODEL_CALL_POINTS);
    let mut ctx = LlmCallHookContext::new(vec![ChatMessage::user("hi")]);
    hooks.dispatch(PRE_MODEL_CALL, &mut ctx);
    hooks.dispatch(POST_MODEL_CALL, &mut ctx);
    drop(hooks);
    assert_eq!(post_runs.load(Ordering::SeqCst), 1);
    assert!(registry.get_hooks(POST_MODEL_CALL).is_empty());
}

#[test]
fn no_call_ever_sees_a_batch_half_applied() {
    within_seconds(60, || {
        let registry = Arc::new(HookRegistry::new());
        let stop = Arc::new(AtomicBool::new(false));
        let pairs: [(u64, u64); 2] = [(1, 2), (3, 4)];
        let install = |registry: &HookRegistry, (a, b): (u64, u64)| {
            registry
                .update(|batch| {
                    batch.clear_hooks(PRE_MODEL_CALL);
                    for label in [a, b] {
                        batch.register_hook(
                            PRE_MODEL_CALL,
                            move |ctx: &mut LlmCallHookContext| {
                                ctx.messages.push(ChatMessage::user(label.to_string()));
                            },
                        )?;
                    }
                    Ok::<_, hooks_core::RegisterError>(())
                })
                .expect("registers");
        };
        install(&registry, pairs[0]);

        let readers: Vec<_> = (0..2)
            .map(|_| {
                let registry = Arc::clone(&registry);
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    let mut seen = 0usize;
                    while !stop.load(Ordering::Relaxed) || seen < 1000 {
                        let mut ctx = LlmCallHookContext::new(Vec::new());
                        registry.dispatch(PRE_MODEL_CALL, &mut ctx);
                        let labels: Vec<&str> =
                            ctx.messages.iter().map(|m| m.content.as_str()).collect();
                        assert!(
                            labels == ["1", "2"] || labels == ["3", "4"],
                            "a call saw {labels:?}: a batch half-applied"
                        );
                        seen += 1;
                    }
                    seen
                })
            })
            .collect();
        for round in 0..2_000 {
            install(&registry, pairs[round % 2]);
        }
        stop.store(true, Ordering::Relaxed);
        for reader in readers {
            assert!(reader.join().expect("reader finished") >= 1000);
        }
    });
}

#[test]
fn a_failed_batch_changes_nothing() {
    let registry = HookRegistry::new();
    registry
        .register_hook(PRE_TOOL_CALL, |_: &mut ToolCallHookContext| {})
        .expect("registers");
    let result: Result<(), &str> = registry.update(|batch| {
        batch.clear_hooks(PRE_TOOL_CALL);
        Err("policy incomplete")
    });
    assert_eq!(result, Err("policy incomplete"));
    assert_eq!(registry.get_hooks(PRE_TOOL_CALL).len(), 1);
}

/// State a hook captures whose `Drop` calls back into the registry, the
/// event bus and the fixture.
struct CallsBackOnDrop {
    registry: Arc<HookRegistry>,
    dropped: Arc<AtomicBool>,
}

impl Drop for CallsBackOnDrop {
    fn drop(&mut self) {
        let id = self
            .registry
            .register_hook(PRE_TOOL_CALL, |_: &mut ToolCallHookContext| {})
            .expect("registers from Drop");
        self.registry.unregister_hook(PRE_TOOL_CALL, id);
        self.registry.clear_hooks(POST_TOOL_CALL);
        let listener = self.registry.events().subscribe(|_| {});
        self.registry.events().unsubscribe(listener);
        self.dropped.store(true, Ordering::SeqCst);
    }
}

#[test]
fn a_drop_that_calls_back_into_the_registry_does_not_deadlock() {
    within_seconds(30, || {
        let registry = Arc::new(HookRegistry::new());
        let dropped = Arc::new(AtomicBool::new(false));
        let state = CallsBackOnDrop {
            registry: Arc::clone(&registry),
            dropped: Arc::clone(&dropped),
        };
        let id = registry
            .register_hook(PRE_TOOL_CALL, move |_: &mut ToolCallHookContext| {
                let _keep = &state;
            })
            .expect("registers");
        assert!(registry.unregister_hook(PRE_TOOL_CALL, id));
        assert!(dropped.load(Ordering::SeqCst), "dropped when unregistered");

        // The same through clear_hooks and a listener's state.
        let dropped = Arc::new(AtomicBool::new(false));
        let state = CallsBackOnDrop {
            registry: Arc::clone(&registry),
            dropped: Arc::clone(&dropped),
        };
        let listener = registry.events().subscribe(move |_| {
            let _keep = &state;
        });
        assert!(registry.events().unsubscribe(listener));
        assert!(dropped.load(Ordering::SeqCst), "listener state dropped");
    });
}

/// State whose `Drop` takes the global fixture and clears the global
/// registry.
struct TakesFixtureOnDrop(Arc<Mutex<bool>>);

impl Drop for TakesFixtureOnDrop {
    fn drop(&mut self) {
        let fixture = GlobalHooksFixture::new();
        clear_hooks(POST_TOOL_CALL);
        drop(fixture);
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = true;
    }
}

#[test]
fn a_drop_that_takes_the_fixture_when_the_fixture_restores_does_not_deadlock() {
    within_seconds(30, || {
        let dropped = Arc::new(Mutex::new(false));
        {
            let _fixture = GlobalHooksFixture::new();
            let state = TakesFixtureOnDrop(Arc::clone(&dropped));
            let id = register_hook(PRE_TOOL_CALL, move |_: &mut ToolCallHookContext| {
                let _keep = &state;
            })
            .expect("registers");
            let _ = id;
            // The fixture's drop restores the registry and drops the hook.
        }
        assert!(*dropped.lock().unwrap_or_else(PoisonError::into_inner));
        // The global registry is usable afterwards.
        let _fixture = GlobalHooksFixture::new();
        let id = register_hook(PRE_TOOL_CALL, |_: &mut ToolCallHookContext| {}).expect("registers");
        assert!(unregister_hook(PRE_TOOL_CALL, id));
    });
}

#[test]
fn a_panic_payload_whose_drop_panics_is_still_contained() {
    struct PanicsOnDrop;
    impl Drop for PanicsOnDrop {
        fn drop(&mut self) {
            if !std::thread::panicking() {
                panic!("payload drop bug");
            }
        }
    }
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let registry = HookRegistry::new();
    registry
        .register_hook(PRE_TOOL_CALL, |_: &mut ToolCallHookContext| -> () {
            std::panic::panic_any(PanicsOnDrop)
        })
        .expect("registers");
    let ran = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&ran);
    let report = registry.run_tool_call(&mut call("t"), move |_| {
        flag.store(true, Ordering::SeqCst);
        ToolOutput::text("ran")
    });
    std::panic::set_hook(default);
    assert_eq!(report.map(|r| r.observation), Ok("ran".to_owned()));
    assert!(ran.load(Ordering::SeqCst), "fail-open: the tool still ran");
}
