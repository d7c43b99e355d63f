//! `#[on]` without its interception point.

use hooks_core::ToolCallHookContext;
use hooks_macros::on;

#[on]
fn bare(_ctx: &mut ToolCallHookContext) {}

#[on(tools = ["ui_probe_fail"])]
fn filter_first(_ctx: &mut ToolCallHookContext) {}

fn main() {}
