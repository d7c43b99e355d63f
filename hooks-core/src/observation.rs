//! What the agent is told in place of a tool's result: that a hook blocked
//! the call, or that a fail-closed hook withheld the result.
//!
//! ```
//! use hooks_core::runtime::{blocked_message, withheld_message};
//!
//! assert!(blocked_message("rm").ends_with("Tool: rm"));
//! assert!(withheld_message("rm").ends_with("Tool: rm"));
//! ```

/// The text the agent receives when a PRE hook blocks a call.
///
/// ```
/// use hooks_core::runtime::blocked_message;
/// use hooks_core::{HookAborted, HookRegistry, ToolCallHookContext, PRE_TOOL_CALL};
///
/// let registry = HookRegistry::new();
/// registry.register_hook(PRE_TOOL_CALL, |_: &mut ToolCallHookContext| -> Result<(), HookAborted> {
///     Err("read-only mode".into())
/// })?;
/// let mut ctx = ToolCallHookContext::new("write_file", Default::default());
/// let report = registry.run_tool_call(&mut ctx, |_| unreachable!("blocked"))?;
/// // The agent is not told the reason unless a hook asks for it.
/// assert_eq!(report.observation, blocked_message("write_file"));
/// assert_eq!(blocked_message("write_file"), "Tool execution blocked by hook. Tool: write_file");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn blocked_message(tool_name: &str) -> String {
    format!("Tool execution blocked by hook. Tool: {tool_name}")
}

/// The text the agent receives when a PRE hook blocks a call and the agent
/// is told why ([`HookAborted::tell_model`](crate::HookAborted::tell_model)).
///
/// ```
/// assert_eq!(
///     hooks_core::runtime::blocked_message_with_reason("refund", "offer a voucher"),
///     "Tool execution blocked by hook. Tool: refund. Reason: offer a voucher"
/// );
/// ```
pub fn blocked_message_with_reason(tool_name: &str, reason: &str) -> String {
    format!("{}. Reason: {reason}", blocked_message(tool_name))
}

/// The text the agent receives when a fail-closed POST hook panics.
///
/// ```
/// use hooks_core::runtime::{withheld_message, ToolOutput};
/// use hooks_core::{HookOptions, HookRegistry, ToolCallHookContext, POST_TOOL_CALL};
///
/// // A fail-closed redaction hook that panics: the result is not shown.
/// let registry = HookRegistry::new();
/// registry.register_hook_with(
///     POST_TOOL_CALL,
///     HookOptions::new().name("redactor").fail_closed(),
///     |_: &mut ToolCallHookContext| -> () { panic!("the redaction service is down") },
/// )?;
/// let mut ctx = ToolCallHookContext::new("read_secrets", Default::default());
/// let report = registry.run_tool_call(&mut ctx, |_| ToolOutput::text("password=hunter2"))?;
/// assert_eq!(report.observation, withheld_message("read_secrets"));
/// assert!(!report.observation.contains("hunter2"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn withheld_message(tool_name: &str) -> String {
    format!("Tool result withheld: a fail-closed hook failed. Tool: {tool_name}")
}
