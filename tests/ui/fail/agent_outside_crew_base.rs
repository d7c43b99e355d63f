//! `#[agent]` only means something inside a `#[crew_base]` impl.

use hooks_macros::agent;

struct Crew;

impl Crew {
    #[agent]
    fn researcher(&self) -> String {
        "Researcher".to_owned()
    }
}

fn main() {}
