//! Hook methods may be `async`; the methods that build a crew may not.

use hooks_macros::{agent, crew_base};

#[derive(Clone)]
struct MyCrew;

#[crew_base]
impl MyCrew {
    #[agent]
    async fn researcher(&self) -> String {
        String::new()
    }
}

fn main() {}
