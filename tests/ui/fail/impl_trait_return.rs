//! A hook names its return type.

use hooks_core::ToolCallHookContext;
use hooks_macros::on;

#[on(POST_TOOL_CALL, tools = ["ui_probe_fail"])]
fn hook(_ctx: &mut ToolCallHookContext) -> impl Into<Option<String>> {
    None::<String>
}

fn main() {}
