//! `timeout_ms` may be given once.

use hooks_core::ToolCallHookContext;
use hooks_macros::on;

#[on(PRE_TOOL_CALL, timeout_ms = 500, timeout_ms = 800)]
async fn twice(_ctx: &mut ToolCallHookContext) {}

fn main() {}
