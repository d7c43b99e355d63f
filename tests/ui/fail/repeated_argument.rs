//! Each argument may be given once, the interception point too.

use hooks_core::ToolCallHookContext;
use hooks_macros::on;

#[on(PRE_TOOL_CALL, tools = ["ui_probe_fail"], order = 1, tools = ["ui_probe_other"], fail_closed, fail_closed)]
fn hook(_ctx: &mut ToolCallHookContext) {}

#[on(PRE_TOOL_CALL, POST_TOOL_CALL, tools = ["ui_probe_fail"])]
fn two_points(_ctx: &mut ToolCallHookContext) {}

fn main() {}
