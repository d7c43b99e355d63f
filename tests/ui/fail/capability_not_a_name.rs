//! Capability filter entries are bare names: not paths to the
//! `Capability` type, not other expressions.

use hooks_core::ToolCallHookContext;
use hooks_macros::on;

#[on(PRE_TOOL_CALL, capabilities = [Capability::OpenWorld, 3])]
fn paths_and_numbers(_ctx: &mut ToolCallHookContext) {}

fn main() {}
