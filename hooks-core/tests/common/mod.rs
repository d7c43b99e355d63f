//! Helpers shared by the tests.
#![allow(dead_code)] // each test file uses a different part

use std::sync::{Arc, Mutex};

use hooks_core::{HookOptions, HookRegistry, PRE_TOOL_CALL, ToolCallHookContext};

/// A shared log hooks write their names into, in run order.
#[derive(Clone, Default)]
pub(crate) struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    pub(crate) fn push(&self, entry: impl Into<String>) {
        self.0.lock().expect("log lock").push(entry.into());
    }
    pub(crate) fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().expect("log lock"))
    }
}

/// Registers at `PRE_TOOL_CALL` of `registry` a hook named `name`, with
/// `options`, that writes its name into `log`.
pub(crate) fn logging_pre(
    registry: &HookRegistry,
    log: &Log,
    name: &'static str,
    options: HookOptions,
) {
    let log = log.clone();
    registry
        .register_hook_with(
            PRE_TOOL_CALL,
            options.name(name),
            move |_: &mut ToolCallHookContext| log.push(name),
        )
        .expect("the hook fits PRE_TOOL_CALL");
}

/// Proptest cases: 64, times `HOOKS_TEST_SCALE` (CI runs it larger).
pub(crate) fn cases() -> u32 {
    let scale: u32 = std::env::var("HOOKS_TEST_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    64 * scale.max(1)
}

/// Keeps the deliberate hook panics (messages ending in `hook bug`) out of
/// the test output; any other panic is reported as usual.
pub(crate) fn quiet_deliberate_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let deliberate = info
            .payload()
            .downcast_ref::<&str>()
            .is_some_and(|m| m.ends_with("hook bug"));
        if !deliberate {
            default(info);
        }
    }));
}
