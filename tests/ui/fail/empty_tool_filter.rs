//! A filter entry that could never match: a tool name that normalizes to
//! nothing, or an empty agent role.

use hooks_core::ToolCallHookContext;
use hooks_macros::on;

#[on(PRE_TOOL_CALL, tools = ["ui_probe_fail", "--"])]
fn empty_tool(_ctx: &mut ToolCallHookContext) {}

#[on(PRE_TOOL_CALL, tools = ["ui_probe_fail"], agents = [""])]
fn empty_role(_ctx: &mut ToolCallHookContext) {}

fn main() {}
