//! Hooks that no code calls or names: link-time registration must still put
//! them in the global registry of any program that links this library.

use hooks_core::ToolCallHookContext;
use hooks_macros::{after_tool_call, on};

#[on(PRE_TOOL_CALL, tools = ["ui_probe_orphan"])]
fn orphan_marks_input(ctx: &mut ToolCallHookContext) {
    ctx.tool_input.insert("orphan".into(), true.into());
}

#[after_tool_call(tools = ["ui_probe_orphan"])]
fn orphan_tags_result(ctx: &ToolCallHookContext) -> Option<String> {
    ctx.tool_result
        .as_deref()
        .map(|result| format!("{result} (seen by orphan)"))
}
