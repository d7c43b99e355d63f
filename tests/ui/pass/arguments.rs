//! Every attribute argument: filters (normalized at compile time), order
//! (negative too), fail_closed, crate = path, a trailing comma.

use hooks_core::{FailureMode, HookInfo, POST_TOOL_CALL, PRE_TOOL_CALL, ToolCallHookContext, get_hooks};
use hooks_macros::{after_tool_call, before_tool_call, on};

mod facade {
    //! A crate that re-exports the engine under another path.
    pub use hooks_core as engine;
}

#[on(PRE_TOOL_CALL, tools = ["Web Search", "WebSearch", "web-search", "ReadFile"], agents = ["Researcher", "Senior Writer"])]
fn filtered(_ctx: &mut ToolCallHookContext) {}

#[on(PRE_TOOL_CALL, tools = [], agents = [], order = -20, fail_closed,)]
fn unfiltered_early(_ctx: &mut ToolCallHookContext) {}

#[before_tool_call(order = 7i32, tools = ["ui_probe_pass"], fail_closed)]
fn legacy_with_options(_ctx: &ToolCallHookContext) -> bool {
    true
}

#[after_tool_call(crate = ::hooks_core, tools = ["ui_probe_pass"])]
fn rooted_absolute(_ctx: &ToolCallHookContext) -> Option<String> {
    None
}

#[on(POST_TOOL_CALL, crate = crate::facade::engine, tools = ["ui_probe_pass"], order = 3)]
fn rooted_through_facade(_ctx: &mut ToolCallHookContext) {}

fn find(hooks: &[HookInfo], name: &str) -> HookInfo {
    hooks
        .iter()
        .find(|hook| hook.name == name)
        .cloned()
        .unwrap_or_else(|| panic!("{name} is not registered"))
}

fn main() {
    let pre = get_hooks(PRE_TOOL_CALL);
    let post = get_hooks(POST_TOOL_CALL);

    let filtered = find(&pre, "filtered");
    assert_eq!(filtered.tools, ["web_search", "read_file"]);
    assert_eq!(filtered.agents, ["Researcher", "Senior Writer"]);
    assert_eq!(filtered.order, 0);
    assert_eq!(filtered.failure, FailureMode::FailOpen);

    let early = find(&pre, "unfiltered_early");
    assert!(early.tools.is_empty() && early.agents.is_empty());
    assert_eq!(early.order, -20);
    assert_eq!(early.failure, FailureMode::FailClosed);
    assert_eq!(pre[0].name, "unfiltered_early", "lowest order runs first");

    let legacy = find(&pre, "legacy_with_options");
    assert_eq!(legacy.order, 7);
    assert_eq!(legacy.failure, FailureMode::FailClosed);

    assert_eq!(find(&post, "rooted_absolute").tools, ["ui_probe_pass"]);
    assert_eq!(find(&post, "rooted_through_facade").order, 3);
}
