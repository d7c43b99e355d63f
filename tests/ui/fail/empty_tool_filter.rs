//! A tool filter that normalizes to an empty name could never match.

use hooks_core::ToolCallHookContext;
use hooks_macros::on;

#[on(PRE_TOOL_CALL, tools = ["ui_probe_fail", "--"])]
fn hook(_ctx: &mut ToolCallHookContext) {}

fn main() {}
