//! Each point takes its own context type.

use hooks_core::ToolCallHookContext;
use hooks_macros::on;

#[on(PRE_MODEL_CALL)]
fn hook(_ctx: &mut ToolCallHookContext) {}

fn main() {}
