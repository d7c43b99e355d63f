//! The `#[crew]` method returns a crew that hook methods can be attached to.

use hooks_core::ToolCallHookContext;
use hooks_macros::{crew, crew_base, on};

#[derive(Clone)]
struct MyCrew;

#[crew_base]
impl MyCrew {
    #[on(PRE_TOOL_CALL)]
    fn check(&self, _ctx: &mut ToolCallHookContext) {}

    #[crew]
    fn crew(&self) -> String {
        String::new()
    }
}

fn main() {}
