//! A PRE hook of the `#[on]` style returns `()` or `Result<(), HookAborted>`.

use hooks_core::ToolCallHookContext;
use hooks_macros::on;

#[on(PRE_TOOL_CALL, tools = ["ui_probe_fail"])]
fn hook(_ctx: &mut ToolCallHookContext) -> Option<String> {
    None
}

fn main() {}
