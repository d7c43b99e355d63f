//! The engine of tool-call hooks for AI agents.
//!
//! An agent's language model asks for tool calls; hooks stand between the
//! model and the tools. `PRE_TOOL_CALL` hooks run before a tool: they can
//! edit its arguments in place or block the call. `POST_TOOL_CALL` hooks run
//! after it: they can replace the text the agent sees or abort the run.
//!
//! Most users reach this crate through `crew-runtime`, which re-exports it
//! together with the attributes (`#[on]`, `#[before_tool_call]`,
//! `#[after_tool_call]`, `#[crew_base]`). Everything the attributes do can
//! also be done by hand with a [`HookRegistry`] and closures:
//!
//! ```
//! use hooks_core::{
//!     HookAborted, HookOptions, HookRegistry, ToolCallHookContext, ToolOutput,
//!     POST_TOOL_CALL, PRE_TOOL_CALL,
//! };
//! use serde_json::json;
//!
//! let registry = HookRegistry::new();
//!
//! // Block destructive tools, with a reason and a source for telemetry.
//! registry.register_hook_with(
//!     PRE_TOOL_CALL,
//!     HookOptions::new().tools(["delete_file", "Drop Table"]),
//!     |ctx: &mut ToolCallHookContext| -> Result<(), HookAborted> {
//!         Err(HookAborted::new(format!("{} is not allowed", ctx.tool_name), "safety-policy"))
//!     },
//! )?;
//!
//! // Redact a secret from every result.
//! registry.register_hook(POST_TOOL_CALL, |ctx: &mut ToolCallHookContext| {
//!     ctx.tool_result.as_deref().map(|r| r.replace("hunter2", "[REDACTED]"))
//! })?;
//!
//! // A call the PRE chain lets through: the tool runs, the POST chain redacts.
//! let input = json!({"path": "notes.txt"}).as_object().cloned().unwrap_or_default();
//! let mut ctx = ToolCallHookContext::new("read_file", input);
//! let report = registry.run_tool_call(&mut ctx, |_| ToolOutput::text("password: hunter2"))?;
//! assert_eq!(report.observation, "password: [REDACTED]");
//!
//! // A blocked call: the tool never runs, the agent is told why it got nothing.
//! let mut ctx = ToolCallHookContext::new("DropTable", Default::default());
//! let report = registry.run_tool_call(&mut ctx, |_| unreachable!("blocked"))?;
//! assert_eq!(report.observation, "Tool execution blocked by hook. Tool: drop_table");
//! assert_eq!(report.blocked.map(|a| a.source), Some("safety-policy".to_owned()));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Order
//!
//! Each point has one chain. Link-time hooks (attributes on free functions)
//! come first, sorted by `order = N` (default 0), then module path, then
//! source position; the physical order of the linker's slice is never used.
//! Hooks registered at run time follow, in call order. A crew's own hooks
//! take their place in that run-time sequence when the crew is built.
//!
//! ## Failure
//!
//! A panicking hook is contained. By default it fails open (its decision is
//! dropped, later hooks run, a warning names it); a hook registered
//! fail-closed blocks the call (PRE) or withholds the result (POST) instead.
//! Edits a hook made to `tool_input` before panicking are not rolled back.

#![deny(missing_docs)]

mod api;
pub mod console;
mod context;
mod dispatch;
pub mod events;
mod explain;
mod hook;
mod human;
mod name;
mod outcome;
mod point;
mod registry;
pub mod testing;

#[doc(hidden)]
pub mod __private;

pub use api::{
    clear_after_tool_call_hooks, clear_all_hooks, clear_all_tool_call_hooks,
    clear_before_tool_call_hooks, clear_hooks, explain, get_after_tool_call_hooks,
    get_before_tool_call_hooks, get_hooks, register_after_tool_call_hook,
    register_before_tool_call_hook, register_hook, register_hook_with, restore_static_hooks,
    unregister_after_tool_call_hook, unregister_before_tool_call_hook, unregister_hook,
};
pub use context::{AgentInfo, CrewInfo, RawToolResult, TaskInfo, ToolCallHookContext, ToolInfo};
pub use dispatch::{
    Dispatcher, TOOL_ERROR_PREFIX, ToolCallReport, ToolOutput, blocked_message, panic_message,
    withheld_message,
};
pub use events::{Event, EventBus, HookDispatchedEvent};
pub use explain::{ExplainedHook, Explanation, Verdict};
pub use hook::{FailureMode, HookHandle, HookId, HookInfo, HookOptions, HookOrigin, HookStyle};
pub use human::{
    CallbackInput, ChannelInput, HumanInputError, HumanInputRequest, HumanInputSource,
    ScriptedInput, TerminalInput,
};
pub use name::{is_normalized_tool_name, normalize_tool_name};
pub use outcome::{
    DispatchOutcome, HookAborted, HookReturn, LEGACY_BLOCK_REASON, LegacyBeforeReturn,
    PostDecision, PostHookReturn, PreDecision, PreHookReturn,
};
pub use point::{InterceptionPoint, POST_TOOL_CALL, PRE_TOOL_CALL};
pub use registry::{HookRegistry, RegisterError, global_registry};
