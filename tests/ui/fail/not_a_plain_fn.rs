//! A hook is a plain, safe Rust function: no `unsafe`, no foreign ABI.

use hooks_core::ToolCallHookContext;
use hooks_macros::{after_tool_call, on};

#[on(PRE_TOOL_CALL, tools = ["ui_probe_fail"])]
unsafe fn unsafe_hook(_ctx: &mut ToolCallHookContext) {}

#[after_tool_call(tools = ["ui_probe_fail"])]
extern "C" fn foreign_hook(_ctx: &mut ToolCallHookContext) {}

fn main() {}
