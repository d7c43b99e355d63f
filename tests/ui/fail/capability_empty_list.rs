//! A capability filter that names no capability is refused: leave the
//! argument out to run for every tool.

use hooks_core::ToolCallHookContext;
use hooks_macros::on;

#[on(PRE_TOOL_CALL, capabilities = [])]
fn empty(_ctx: &mut ToolCallHookContext) {}

fn main() {}
