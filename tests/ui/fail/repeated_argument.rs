//! Each argument may be given once.

use hooks_core::ToolCallHookContext;
use hooks_macros::on;

#[on(PRE_TOOL_CALL, tools = ["ui_probe_fail"], order = 1, tools = ["ui_probe_other"], fail_closed, fail_closed)]
fn hook(_ctx: &mut ToolCallHookContext) {}

fn main() {}
