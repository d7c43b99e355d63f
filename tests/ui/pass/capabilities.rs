//! `capabilities = [...]` on `#[on]` and the legacy tool attributes: the
//! filter reaches the registry, combined with the other arguments.

use hooks_core::{
    Capabilities, Capability, FailureMode, POST_TOOL_CALL, PRE_TOOL_CALL, ToolCallHookContext,
    get_hooks,
};
use hooks_macros::{after_tool_call, before_tool_call, on};

#[on(PRE_TOOL_CALL, capabilities = [destructive, open_world, destructive], agents = ["Ops"], fail_closed)]
fn guard(_ctx: &mut ToolCallHookContext) {}

#[before_tool_call(capabilities = [r#idempotent], tools = ["ui_probe_pass"])]
fn legacy_before(_ctx: &ToolCallHookContext) -> bool {
    true
}

#[after_tool_call(capabilities = [read_only,])]
fn legacy_after(_ctx: &ToolCallHookContext) -> Option<String> {
    None
}

#[on(POST_TOOL_CALL, capabilities = [read_only, idempotent, destructive, open_world])]
fn every_capability(_ctx: &mut ToolCallHookContext) {}

fn capabilities(list: &[Capability]) -> Capabilities {
    list.iter().copied().collect()
}

fn main() {
    let pre = get_hooks(PRE_TOOL_CALL);
    let post = get_hooks(POST_TOOL_CALL);
    let find = |hooks: &[hooks_core::HookInfo], name: &str| {
        hooks
            .iter()
            .find(|hook| hook.name == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} is not registered"))
    };

    let guard = find(&pre, "guard");
    assert_eq!(
        guard.capabilities,
        capabilities(&[Capability::Destructive, Capability::OpenWorld])
    );
    assert_eq!(guard.agents, ["Ops"]);
    assert_eq!(guard.failure, FailureMode::FailClosed);

    let legacy = find(&pre, "legacy_before");
    assert_eq!(legacy.capabilities, capabilities(&[Capability::Idempotent]));
    assert_eq!(legacy.tools, ["ui_probe_pass"]);

    assert_eq!(
        find(&post, "legacy_after").capabilities,
        capabilities(&[Capability::ReadOnly])
    );
    assert_eq!(
        find(&post, "every_capability").capabilities,
        capabilities(&Capability::ALL)
    );
}
