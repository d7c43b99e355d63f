//! Capabilities are names, not strings (unlike tool names, which are
//! whatever the tool is called).

use hooks_core::ToolCallHookContext;
use hooks_macros::on;

#[on(PRE_TOOL_CALL, capabilities = ["destructive"])]
fn quoted(_ctx: &mut ToolCallHookContext) {}

fn main() {}
