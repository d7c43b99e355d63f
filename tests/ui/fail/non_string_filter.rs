//! Filter entries are string literals, read at compile time.

use hooks_core::ToolCallHookContext;
use hooks_macros::on;

const TOOL: &str = "ui_probe_fail";

#[on(PRE_TOOL_CALL, tools = [TOOL, "ui_probe_fail"], agents = [42])]
fn hook(_ctx: &mut ToolCallHookContext) {}

fn main() {}
