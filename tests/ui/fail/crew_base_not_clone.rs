//! Hook methods keep a copy of the instance: the type must be `Clone`, and
//! rustc says so on the impl.

use hooks_core::__private::CrewScope;
use hooks_core::{HookRegistry, ToolCallHookContext};
use hooks_macros::{crew, crew_base, on};

struct Crew(HookRegistry);

impl CrewScope for Crew {
    fn crew_hooks(&self) -> &HookRegistry {
        &self.0
    }
}

struct MyCrew;

#[crew_base]
impl MyCrew {
    #[on(PRE_TOOL_CALL)]
    fn check(&self, _ctx: &mut ToolCallHookContext) {}

    #[crew]
    fn crew(&self) -> Crew {
        Crew(HookRegistry::new())
    }
}

fn main() {}
