//! `#[agent]`, `#[task]` and `#[crew]` take no arguments.

use hooks_macros::{agent, crew_base, task};

#[derive(Clone)]
struct MyCrew;

#[crew_base]
impl MyCrew {
    #[agent(role = "Researcher")]
    fn researcher(&self) -> String {
        String::new()
    }

    #[task = "research"]
    fn research(&self) -> String {
        String::new()
    }
}

fn main() {}
