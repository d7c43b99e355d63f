//! `capabilities` may be given once: list every capability in it.

use hooks_core::ToolCallHookContext;
use hooks_macros::on;

#[on(PRE_TOOL_CALL, capabilities = [destructive], capabilities = [open_world])]
fn twice(_ctx: &mut ToolCallHookContext) {}

fn main() {}
