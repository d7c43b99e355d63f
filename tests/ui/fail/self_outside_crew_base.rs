//! A hook method taking `self` belongs in a `#[crew_base]` impl.

use hooks_core::ToolCallHookContext;
use hooks_macros::on;

struct Policy;

impl Policy {
    #[on(PRE_TOOL_CALL, tools = ["ui_probe_fail"])]
    fn check(&self, _ctx: &mut ToolCallHookContext) {}
}

fn main() {}
