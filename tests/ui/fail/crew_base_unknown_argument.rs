//! `#[crew_base]` takes only `crate = path`.

use hooks_macros::crew_base;

#[derive(Clone)]
struct MyCrew;

#[crew_base(process = "sequential")]
impl MyCrew {}

fn main() {}
