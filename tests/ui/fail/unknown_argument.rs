//! An argument the attribute does not know.

use hooks_core::ToolCallHookContext;
use hooks_macros::{after_tool_call, before_tool_call};

#[before_tool_call(tool = ["ui_probe_fail"])]
fn misspelled(_ctx: &mut ToolCallHookContext) {}

#[after_tool_call(POST_TOOL_CALL, tools = ["ui_probe_fail"])]
fn point_on_a_legacy_attribute(_ctx: &mut ToolCallHookContext) {}

fn main() {}
