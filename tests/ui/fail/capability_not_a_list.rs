//! `capabilities` takes a bracketed list, even of one.

use hooks_core::ToolCallHookContext;
use hooks_macros::on;

#[on(PRE_TOOL_CALL, capabilities = destructive)]
fn bare(_ctx: &mut ToolCallHookContext) {}

fn main() {}
