//! `#[crew_base]` goes on an inherent impl block, not a trait impl.

use hooks_macros::{agent, crew_base};

#[derive(Clone)]
struct MyCrew;

#[crew_base]
impl Default for MyCrew {
    #[agent]
    fn default() -> Self {
        MyCrew
    }
}

fn main() {}
