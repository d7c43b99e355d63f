//! `order` is an integer literal.

use hooks_core::ToolCallHookContext;
use hooks_macros::{after_tool_call, on};

const FIRST: i32 = -1;

#[on(PRE_TOOL_CALL, tools = ["ui_probe_fail"], order = FIRST)]
fn named_constant(_ctx: &mut ToolCallHookContext) {}

#[after_tool_call(tools = ["ui_probe_fail"], order = 1.5)]
fn float(_ctx: &mut ToolCallHookContext) {}

fn main() {}
