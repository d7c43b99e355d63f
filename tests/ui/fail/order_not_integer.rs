//! `order` is an integer literal that fits in an `i32`.

use hooks_core::ToolCallHookContext;
use hooks_macros::{after_tool_call, before_tool_call, on};

const FIRST: i32 = -1;

#[on(PRE_TOOL_CALL, tools = ["ui_probe_fail"], order = FIRST)]
fn named_constant(_ctx: &mut ToolCallHookContext) {}

#[after_tool_call(tools = ["ui_probe_fail"], order = 1.5)]
fn float(_ctx: &mut ToolCallHookContext) {}

#[before_tool_call(tools = ["ui_probe_fail"], order = 3000000000)]
fn too_large(_ctx: &mut ToolCallHookContext) {}

fn main() {}
