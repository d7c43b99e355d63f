//! The argument is the context, by reference.

use hooks_core::ToolCallHookContext;
use hooks_macros::on;

#[on(PRE_TOOL_CALL, tools = ["ui_probe_fail"])]
fn takes_a_string(_input: &mut String) {}

#[on(PRE_TOOL_CALL, tools = ["ui_probe_fail"])]
fn takes_the_context_by_value(_ctx: ToolCallHookContext) {}

fn main() {}
