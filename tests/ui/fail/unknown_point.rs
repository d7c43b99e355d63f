//! An interception point that does not exist.

use hooks_core::ToolCallHookContext;
use hooks_macros::on;

#[on(PRE_TOOL, tools = ["ui_probe_fail"])]
fn hook(_ctx: &mut ToolCallHookContext) {}

fn main() {}
