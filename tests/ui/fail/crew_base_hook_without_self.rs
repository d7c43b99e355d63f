//! A hook method of a `#[crew_base]` impl takes `&self`.

use hooks_core::__private::CrewScope;
use hooks_core::{HookRegistry, ToolCallHookContext};
use hooks_macros::{after_tool_call, before_tool_call, crew, crew_base};

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
    #[before_tool_call]
    fn no_receiver(_ctx: &mut ToolCallHookContext) {}

    #[after_tool_call]
    fn mutable_receiver(&mut self, _ctx: &mut ToolCallHookContext) {}

    #[crew]
    fn crew(&self) -> Crew {
        Crew(HookRegistry::new())
    }
}

fn main() {}
