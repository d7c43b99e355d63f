//! Hook methods run on any thread with their copy of the instance: the type
//! must be `Send + Sync`, and rustc says so on the impl.

use std::rc::Rc;

use hooks_core::__private::CrewScope;
use hooks_core::{HookRegistry, ToolCallHookContext};
use hooks_macros::{crew, crew_base, on};

struct Crew(HookRegistry);

impl CrewScope for Crew {
    fn crew_hooks(&self) -> &HookRegistry {
        &self.0
    }
}

#[derive(Clone)]
struct MyCrew {
    calls: Rc<u32>,
}

#[crew_base]
impl MyCrew {
    #[on(PRE_TOOL_CALL)]
    fn check(&self, _ctx: &mut ToolCallHookContext) {
        let _ = self.calls;
    }

    #[crew]
    fn crew(&self) -> Crew {
        Crew(HookRegistry::new())
    }
}

fn main() {}
