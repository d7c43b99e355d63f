//! The engine of hooks for AI agents.
//!
//! An agent's language model asks for tool calls; hooks stand between the
//! model and everything it does, at ten interception points: the
//! execution's start and end, its inputs and output, each step (task), each
//! model call and each tool call. `PRE_TOOL_CALL` hooks run before a tool:
//! they can edit its arguments in place or block the call. `POST_TOOL_CALL`
//! hooks run after it: they can replace the text the agent sees or abort
//! the run. The other points work the same way on their own context (see
//! [`InterceptionPoint`]).
//!
//! Most users reach this crate through `crew-runtime`, which re-exports it
//! together with the attributes (`#[on]`, `#[before_tool_call]`,
//! `#[after_tool_call]`, `#[crew_base]`). Everything the attributes do can
//! also be done by hand with a [`HookRegistry`] and closures:
//!
//! ```
//! use hooks_core::runtime::ToolOutput;
//! use hooks_core::{
//!     HookAborted, HookOptions, HookRegistry, ToolCallHookContext, POST_TOOL_CALL, PRE_TOOL_CALL,
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
//!         Err(HookAborted::new(format!("{} is not allowed", ctx.tool_name()), "safety-policy"))
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
//!
//! ## Points are types
//!
//! Each point names its context and what its hooks may replace, so a hook
//! that does not fit its point does not compile:
//!
//! ```compile_fail
//! use hooks_core::{HookRegistry, StepContext, PRE_TOOL_CALL};
//! // A step hook cannot run at a tool-call point.
//! HookRegistry::new().register_hook(PRE_TOOL_CALL, |_: &mut StepContext| {});
//! ```

#![deny(missing_docs)]

mod api;
mod approval;
mod capability;
mod chain;
mod contain;
mod context;
mod dispatch;
mod event_meta;
pub mod events;
mod explain;
mod extensions;
mod hook;
mod hook_clock;
mod human;
mod inputs;
pub mod legacy;
mod lend;
mod linked;
mod message;
mod name;
mod observation;
mod outcome;
mod output;
mod panic;
mod point;
mod redaction;
mod registry;
mod returns;
pub mod testing;
mod tool_call;

#[doc(hidden)]
pub mod __private;

/// What a runtime needs to run calls through the hooks: the dispatcher,
/// the tool-output builder and the messages agents are shown. Programs
/// that only write hooks never need this module.
///
/// ```
/// use hooks_core::runtime::{Dispatcher, ToolOutput};
/// use hooks_core::{HookRegistry, ToolCallHookContext, POST_TOOL_CALL, PRE_TOOL_CALL};
///
/// // A runtime runs each call through the global hooks and the crew's own.
/// let global = HookRegistry::new();
/// let crew = HookRegistry::new();
/// global.register_hook(POST_TOOL_CALL, |ctx: &mut ToolCallHookContext| {
///     ctx.tool_result.as_deref().map(|r| format!("{r} [checked]"))
/// })?;
/// crew.register_hook(PRE_TOOL_CALL, |ctx: &mut ToolCallHookContext| {
///     ctx.tool_input.insert("region".into(), "eu".into());
/// })?;
///
/// let dispatcher = Dispatcher::new(&global).with_scope(&crew);
/// let mut ctx = ToolCallHookContext::new("lookup", Default::default());
/// let report = dispatcher.run_tool_call(&mut ctx, |ctx| {
///     ToolOutput::text(format!("region {}", ctx.tool_input["region"].as_str().unwrap_or("?")))
/// })?;
/// assert_eq!(report.observation, "region eu [checked]");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub mod runtime {
    pub use crate::contain::{ContainedPanic, contain_panic, contain_panic_async};
    pub use crate::dispatch::{CallHooks, Dispatcher, MODEL_CALL_POINTS, TOOL_CALL_POINTS};
    pub use crate::events::redact_json;
    pub use crate::observation::{blocked_message, blocked_message_with_reason, withheld_message};
    pub use crate::panic::{drop_payload as drop_panic_payload, panic_message, take_panic_message};
    pub use crate::redaction::{
        InRedactionScope, REDACTION_FAILED, RedactionScope, redact_contained, redact_in_scope,
        redaction_in_scope,
    };
    pub use crate::tool_call::{TOOL_ERROR_PREFIX, ToolCallReport, ToolOutput};

    use crate::hook::{AsyncHookFn, HookCall, HookId, HookOptions, HookStyle};
    use crate::point::Point;
    use crate::registry::{HookRegistry, RegisterError, async_call, crew_entry};
    use crate::returns::HookReturn;

    /// Registers `hook` on `registry` as a hook of the crew named `crew`
    /// (listed with [`HookOrigin::Crew`](crate::HookOrigin::Crew)): the way
    /// a runtime gives a crew hooks of its own.
    ///
    /// ```
    /// use hooks_core::runtime::register_crew_hook;
    /// use hooks_core::{HookOptions, HookOrigin, HookRegistry, HookStyle, StepContext, POST_STEP};
    /// let crew_hooks = HookRegistry::new();
    /// register_crew_hook(&crew_hooks, POST_STEP, "research", HookStyle::On, HookOptions::new(), |_: &mut StepContext| {})?;
    /// assert_eq!(crew_hooks.get_hooks(POST_STEP)[0].origin, HookOrigin::Crew { crew: "research".into() });
    /// # Ok::<(), hooks_core::RegisterError>(())
    /// ```
    pub fn register_crew_hook<P, F, R>(
        registry: &HookRegistry,
        point: P,
        crew: &str,
        style: HookStyle,
        options: HookOptions,
        hook: F,
    ) -> Result<HookId, RegisterError>
    where
        P: Point,
        F: Fn(&mut P::Context) -> R + Send + Sync + 'static,
        R: HookReturn<P>,
    {
        let _ = point;
        let entry = crew_entry::<P>(
            crew,
            style,
            options,
            HookCall::Shared(std::sync::Arc::new(move |ctx: &mut P::Context| {
                hook(ctx).into_decision()
            })),
        )?;
        Ok(registry.insert(entry))
    }

    /// Registers an `async` hook on `registry` as a hook of the crew named
    /// `crew` (see [`register_crew_hook`] and
    /// [`HookRegistry::register_async_hook`]).
    ///
    /// ```
    /// use hooks_core::runtime::register_crew_async_hook;
    /// use hooks_core::{HookOptions, HookRegistry, StepContext, POST_STEP};
    ///
    /// async fn review(ctx: &mut StepContext) -> Option<String> {
    ///     Some(format!("{} (reviewed)", ctx.payload))
    /// }
    /// let crew_hooks = HookRegistry::new();
    /// register_crew_async_hook(&crew_hooks, POST_STEP, "research", HookOptions::new(), review)?;
    /// assert_eq!(crew_hooks.get_hooks(POST_STEP).len(), 1);
    /// # Ok::<(), hooks_core::RegisterError>(())
    /// ```
    pub fn register_crew_async_hook<P, F, R>(
        registry: &HookRegistry,
        point: P,
        crew: &str,
        options: HookOptions,
        hook: F,
    ) -> Result<HookId, RegisterError>
    where
        P: Point,
        F: for<'c> AsyncHookFn<'c, P::Context, R>,
        R: HookReturn<P> + 'static,
    {
        let _ = point;
        let entry = crew_entry::<P>(crew, HookStyle::On, options, async_call(hook))?;
        Ok(registry.insert(entry))
    }
}

pub use api::{
    clear_all_hooks, clear_hooks, explain, explain_point, get_hooks, register_async_hook,
    register_async_hook_with, register_hook, register_hook_with, restore_static_hooks,
    unregister_hook,
};
pub use approval::APPROVAL_RECHECK_SOURCE;
pub use capability::{Capabilities, Capability, ToolAnnotations};
pub use context::{
    AgentInfo, CrewInfo, ExecutionEndContext, ExecutionStartContext, ExecutionStatus, HookContext,
    InputContext, LlmCallHookContext, LlmInfo, ModelResponse, OutputContext, RawToolResult,
    StepContext, StepKind, TaskInfo, ToolCallHookContext, ToolCallStatus, ToolInfo,
};
pub use events::{Event, EventBus, HookDispatchedEvent, LlmStreamChunkEvent};
pub use explain::{ExplainedHook, Explanation, ToolCapabilities, Verdict};
pub use extensions::{Extensions, RegistryExtensions};
pub use hook::{
    AsyncHookFn, FailureMode, HookFuture, HookHandle, HookId, HookInfo, HookOptions, HookOrigin,
    HookStyle, async_hook,
};
pub use hook_clock::DEFAULT_HOOK_TIMEOUT;
pub use human::{
    ApprovedCallOutcome, AskedUnder, CallbackInput, ChainGate, ChannelInput,
    DEFAULT_HUMAN_INPUT_TIMEOUT, GateFuture, HumanAnswer, HumanInputError, HumanInputFuture,
    HumanInputReply, HumanInputRequest, HumanInputSource, PendingHumanInput, ScriptedInput,
};

/// Implements [`HumanInputSource`] (an `async fn` in a trait used as
/// `dyn`): put `#[async_trait]` on the `impl`.
///
/// ```
/// use hooks_core::{HumanInputError, HumanInputRequest, HumanInputSource, async_trait};
///
/// struct AlwaysYes;
///
/// #[async_trait]
/// impl HumanInputSource for AlwaysYes {
///     async fn ask(&self, _request: HumanInputRequest) -> Result<String, HumanInputError> {
///         Ok("yes".to_owned())
///     }
/// }
/// # let _ = AlwaysYes;
/// ```
pub use async_trait::async_trait;
pub use inputs::Inputs;
// The CrewAI-named functions at the root too, where they always were.
#[doc(no_inline)]
pub use legacy::*;
pub use message::{ChatMessage, Role, ToolCallRequest, ToolDefinition};
pub use name::{
    ToolNameProblem, ToolNameSkeleton, check_tool_name, is_normalized_tool_name,
    normalize_tool_name,
};
pub use outcome::{
    Decision, DispatchOutcome, HookAborted, LEGACY_BLOCK_REASON, LEGACY_LLM_BLOCK_REASON,
    NoReplacement,
};
pub use output::{CrewOutput, TaskOutput, TokenUsage};
pub use point::{
    EXECUTION_END, EXECUTION_START, INPUT, InterceptionPoint, OUTPUT, POST_MODEL_CALL, POST_STEP,
    POST_TOOL_CALL, PRE_MODEL_CALL, PRE_STEP, PRE_TOOL_CALL, Point, points,
};
pub use redaction::Redact;
pub use registry::{HookBatch, HookRegistry, RegisterError, global_registry};
pub use returns::{
    HookReturn, LegacyBeforePoint, LegacyBeforeReturn, ReplacesInputs, ReplacesText,
};
