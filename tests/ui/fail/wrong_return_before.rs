//! A legacy before hook returns `Option<bool>`, `bool` or `()`.

use hooks_core::{HookAborted, ToolCallHookContext};
use hooks_macros::before_tool_call;

#[before_tool_call(tools = ["ui_probe_fail"])]
fn hook(_ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
    Ok(())
}

fn main() {}
