//! Every problem of one attribute is reported, each on its own token, and
//! the function is still there (no "cannot find function" follows).

use hooks_core::ToolCallHookContext;
use hooks_macros::on;

#[on(PRE_TOOL, tools = [1], colour = "blue")]
unsafe fn hook(_ctx: &mut ToolCallHookContext) {}

fn main() {
    let _still_defined = hook;
}
