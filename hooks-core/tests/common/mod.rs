//! Helpers shared by the property tests.
#![allow(dead_code)] // each test file uses a different part

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
