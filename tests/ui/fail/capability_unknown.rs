//! A capability filter names one of the four capabilities; a near miss
//! gets a suggestion.

use hooks_core::ToolCallHookContext;
use hooks_macros::{before_tool_call, on};

#[on(PRE_TOOL_CALL, capabilities = [destrutive, open_world])]
fn misspelled(_ctx: &mut ToolCallHookContext) {}

#[before_tool_call(capabilities = [ReadOnly])]
fn camel_case(_ctx: &ToolCallHookContext) -> bool {
    true
}

#[on(POST_TOOL_CALL, capabilities = [deletes_files])]
fn unrelated(_ctx: &mut ToolCallHookContext) {}

fn main() {}
