//! A type that is only named like the context is reported by rustc on the
//! argument's type.

use hooks_macros::on;

struct ToolCallHookContext;

#[on(PRE_TOOL_CALL, tools = ["ui_probe_fail"])]
fn hook(_ctx: &mut ToolCallHookContext) {}

fn main() {}
