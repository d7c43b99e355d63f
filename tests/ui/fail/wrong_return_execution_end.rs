//! EXECUTION_END hooks observe: they cannot replace anything.

use hooks_core::ExecutionEndContext;
use hooks_macros::on;

#[on(EXECUTION_END)]
fn hook(_ctx: &mut ExecutionEndContext) -> Option<String> {
    None
}

fn main() {}
