//! `#[agent]`, `#[task]` and `#[crew]` methods take only `&self` and return
//! what they build.

use hooks_macros::{agent, crew_base, task};

#[derive(Clone)]
struct MyCrew;

#[crew_base]
impl MyCrew {
    #[agent]
    fn researcher(&self, _role: &str) -> String {
        String::new()
    }

    #[task]
    fn research(&self) {}
}

fn main() {}
