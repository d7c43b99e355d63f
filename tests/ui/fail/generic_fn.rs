//! A generic hook names no single function: type and const parameters are
//! refused (lifetimes are fine).

use hooks_core::ToolCallHookContext;
use hooks_macros::{after_tool_call, before_tool_call};

#[before_tool_call(tools = ["ui_probe_fail"])]
fn by_type<'a, T: Default>(_ctx: &'a mut ToolCallHookContext) {}

#[after_tool_call(tools = ["ui_probe_fail"])]
fn by_const<const N: usize>(_ctx: &mut ToolCallHookContext) {}

fn main() {}
