//! Hooks run synchronously: `async fn` is refused.

use hooks_core::ToolCallHookContext;
use hooks_macros::on;

#[on(PRE_TOOL_CALL, tools = ["ui_probe_fail"])]
async fn hook(_ctx: &mut ToolCallHookContext) {}

fn main() {}
