//! A POST hook returns `Option<String>`, `()` or
//! `Result<Option<String>, HookAborted>`.

use hooks_core::ToolCallHookContext;
use hooks_macros::on;

#[on(POST_TOOL_CALL, tools = ["ui_probe_fail"])]
fn hook(_ctx: &ToolCallHookContext) -> Option<bool> {
    None
}

fn main() {}
