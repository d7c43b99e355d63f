//! Rule 23: the fixture serializes tests that touch the global registry and
//! restores it on drop, also after a panic.

use std::time::Duration;

use hooks_core::testing::GlobalHooksFixture;
use hooks_core::{
    HookOptions, POST_TOOL_CALL, PRE_TOOL_CALL, ToolCallHookContext, clear_all_hooks, get_hooks,
    register_hook_with,
};

fn exclusive_use(name: &'static str) {
    let _fixture = GlobalHooksFixture::new();
    clear_all_hooks();
    for round in 0..20 {
        register_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name(name),
            |_: &mut ToolCallHookContext| {},
        )
        .expect("() fits PRE");
        std::thread::sleep(Duration::from_millis(1));
        let names: Vec<String> = get_hooks(PRE_TOOL_CALL)
            .into_iter()
            .map(|h| h.name)
            .collect();
        assert!(
            names.iter().all(|n| n == name),
            "round {round}: saw another test's hooks: {names:?}"
        );
        assert_eq!(names.len(), round + 1);
    }
}

#[test]
fn fixture_isolates_concurrent_tests_a() {
    exclusive_use("test_a_hook");
}

#[test]
fn fixture_isolates_concurrent_tests_b() {
    exclusive_use("test_b_hook");
}

#[test]
fn fixture_restores_the_registry_after_a_panicking_test() {
    let outcome = std::thread::spawn(|| {
        let _fixture = GlobalHooksFixture::new();
        register_hook_with(
            POST_TOOL_CALL,
            HookOptions::new().name("left_behind"),
            |_: &mut ToolCallHookContext| {},
        )
        .expect("() fits POST");
        panic!("the test fails while holding the fixture");
    })
    .join();
    assert!(outcome.is_err(), "the inner test panicked");
    let _fixture = GlobalHooksFixture::new();
    assert!(
        get_hooks(POST_TOOL_CALL)
            .iter()
            .all(|h| h.name != "left_behind"),
        "the panicking test's hook was removed on drop"
    );
}
