//! `#[on]` without its interception point.

use hooks_core::ToolCallHookContext;
use hooks_macros::on;

#[on(tools = ["ui_probe_fail"])]
fn hook(_ctx: &mut ToolCallHookContext) {}

fn main() {}
