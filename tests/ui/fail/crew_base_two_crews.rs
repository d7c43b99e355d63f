//! A `#[crew_base]` impl builds its crew in one `#[crew]` method.

use hooks_core::__private::CrewScope;
use hooks_core::HookRegistry;
use hooks_macros::{crew, crew_base};

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
    #[crew]
    fn crew(&self) -> Crew {
        Crew(HookRegistry::new())
    }

    #[crew]
    fn other_crew(&self) -> Crew {
        Crew(HookRegistry::new())
    }
}

fn main() {}
