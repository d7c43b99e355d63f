//! Hook methods are attached by the `#[crew]` method: without one they
//! would never run.

use hooks_core::ToolCallHookContext;
use hooks_macros::{crew_base, on};

#[derive(Clone)]
struct MyCrew;

#[crew_base]
impl MyCrew {
    #[on(PRE_TOOL_CALL)]
    fn check(&self, _ctx: &mut ToolCallHookContext) {}
}

fn main() {}
