//! `timeout_ms` is a positive integer literal of milliseconds.

use hooks_core::ToolCallHookContext;
use hooks_macros::{before_tool_call, on};

const LIMIT: u64 = 500;

#[on(PRE_TOOL_CALL, timeout_ms = LIMIT)]
async fn named_constant(_ctx: &mut ToolCallHookContext) {}

#[on(PRE_TOOL_CALL, timeout_ms = "5s")]
async fn text(_ctx: &mut ToolCallHookContext) {}

#[on(POST_TOOL_CALL, timeout_ms = 0)]
async fn zero(_ctx: &mut ToolCallHookContext) {}

#[before_tool_call(timeout_ms = -5)]
async fn negative(_ctx: &mut ToolCallHookContext) {}

fn main() {}
