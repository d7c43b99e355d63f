//! The CrewAI-named API is written once, in `hooks_core::legacy`: its
//! functions keep their old paths at the crate's root, and they, the
//! registry's methods of the same names and the point API all act on the
//! same chains.

use hooks_core::testing::GlobalHooksFixture;
use hooks_core::{
    HookStyle, LlmCallHookContext, POST_MODEL_CALL, PRE_TOOL_CALL, ToolCallHookContext, get_hooks,
    global_registry, legacy,
};

#[test]
fn legacy_functions_keep_their_root_paths() {
    let _fixture = GlobalHooksFixture::new();

    // Registered through the old root path, listed and removed through the
    // module and the method: one API under three spellings.
    let id = hooks_core::register_before_tool_call_hook(|_: &mut ToolCallHookContext| true);
    let listed = legacy::get_before_tool_call_hooks();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].id, listed[0].style),
        (id, HookStyle::BeforeToolCall)
    );
    assert_eq!(listed, global_registry().get_before_tool_call_hooks());
    assert!(global_registry().unregister_before_tool_call_hook(id));
    assert!(!hooks_core::unregister_before_tool_call_hook(id));
}

#[test]
fn legacy_functions_act_on_the_global_registry_chains() {
    let _fixture = GlobalHooksFixture::new();

    legacy::register_before_tool_call_hook(|_: &mut ToolCallHookContext| false);
    legacy::register_after_llm_call_hook(|_: &mut LlmCallHookContext| None::<String>);
    global_registry().register_after_llm_call_hook(|_: &mut LlmCallHookContext| {});

    assert_eq!(
        get_hooks(PRE_TOOL_CALL),
        legacy::get_before_tool_call_hooks()
    );
    assert_eq!(get_hooks(POST_MODEL_CALL).len(), 2);
    assert_eq!(legacy::clear_all_tool_call_hooks(), (1, 0));
    assert_eq!(hooks_core::clear_all_llm_call_hooks(), (0, 2));
    assert!(get_hooks(POST_MODEL_CALL).is_empty());
}
