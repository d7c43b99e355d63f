//! A hook takes exactly one argument.

use hooks_core::ToolCallHookContext;
use hooks_macros::on;

#[on(PRE_TOOL_CALL, tools = ["ui_probe_fail"])]
fn none() {}

#[on(POST_TOOL_CALL, tools = ["ui_probe_fail"])]
fn two(_ctx: &mut ToolCallHookContext, _extra: u32) {}

fn main() {}
