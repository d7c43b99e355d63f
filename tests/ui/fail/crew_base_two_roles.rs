//! A method of a `#[crew_base]` impl has one role.

use hooks_core::__private::CrewScope;
use hooks_core::{HookRegistry, ToolCallHookContext};
use hooks_macros::{agent, crew, crew_base, on, task};

struct Crew(HookRegistry);

impl CrewScope for Crew {
    fn crew_hooks(&self) -> &HookRegistry {
        &self.0
    }
}

#[derive(Clone)]
struct MyCrew;

#[crew_base]
impl MyCrew {
    #[agent]
    #[task]
    fn both(&self) -> String {
        String::new()
    }

    #[on(PRE_TOOL_CALL)]
    #[agent]
    fn hook_and_agent(&self, _ctx: &mut ToolCallHookContext) {}

    #[crew]
    fn crew(&self) -> Crew {
        Crew(HookRegistry::new())
    }
}

fn main() {}
