//! `#[crew_base]` goes on an impl block.

use hooks_macros::crew_base;

#[crew_base]
struct MyCrew;

fn main() {}
