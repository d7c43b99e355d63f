//! The hook attributes go on functions.

use hooks_macros::before_tool_call;

#[before_tool_call(tools = ["ui_probe_fail"])]
struct NotAHook;

fn main() {}
