//! Filters are lists of string literals, read at compile time.

use hooks_core::ToolCallHookContext;
use hooks_macros::on;

const TOOL: &str = "ui_probe_fail";

#[on(PRE_TOOL_CALL, tools = [TOOL, "ui_probe_fail"], agents = [42])]
fn entries(_ctx: &mut ToolCallHookContext) {}

#[on(PRE_TOOL_CALL, tools = "ui_probe_fail")]
fn not_a_list(_ctx: &mut ToolCallHookContext) {}

fn main() {}
