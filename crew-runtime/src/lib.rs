//! Agents, tasks, crews and tools whose every tool call runs through
//! tool-call hooks.
//!
//! This is the one crate to depend on: it re-exports the hook engine
//! (`hooks-core`: [`ToolCallHookContext`], [`HookAborted`], [`HookRegistry`],
//! the management functions, [`events`], [`testing`]) next to the runtime:
//! [`Tool`], [`Agent`], [`Task`], [`Crew`], the [`llm::Llm`] trait, the
//! offline [`ScriptedLlm`], the live [`console`] and the terminal as the
//! crew's default person ([`TerminalInput`]).
//!
//! An agent's model asks for tool calls; the executor runs each one through
//! the `PRE_TOOL_CALL` chain, the tool and the `POST_TOOL_CALL` chain, and
//! hands the result back to the model. There is no other way to run a tool.
//!
//! ```
//! use std::sync::Arc;
//! use crew_runtime::prelude::*;
//! use crew_runtime::schemars::JsonSchema;
//! use serde::Deserialize;
//!
//! #[derive(Deserialize, JsonSchema)]
//! #[schemars(crate = "crew_runtime::schemars")]
//! struct SearchArgs {
//!     query: String,
//! }
//!
//! let search = Tool::typed("web_search", "Searches the web", |args: SearchArgs| {
//!     Ok::<_, String>(format!("password: hunter2, results for {}", args.query))
//! });
//!
//! // The model: one tool call, then an answer built from what it saw.
//! let llm = Arc::new(
//!     ScriptedLlm::new()
//!         .call("web_search", json!({"query": "rust"}))
//!         .answer_with(|request| request.messages.last().map(|m| m.content.clone()).unwrap_or_default()),
//! );
//! let researcher = Agent::builder("Researcher").tool(search).llm(llm.clone()).build();
//! let task = Task::builder("Research {topic}").agent(&researcher).build();
//!
//! // A registry of our own instead of the process-wide one.
//! let hooks = Arc::new(HookRegistry::new());
//! hooks.register_hook(POST_TOOL_CALL, |ctx: &mut ToolCallHookContext| {
//!     ctx.tool_result.as_deref().map(|r| r.replace("hunter2", "[REDACTED]"))
//! })?;
//!
//! let crew = Crew::builder()
//!     .agent(researcher)
//!     .task(task)
//!     .global_registry(hooks)
//!     .build()?;
//! let output = crew.kickoff_blocking([("topic", "Rust")])?;
//! assert_eq!(output.raw, "password: [REDACTED], results for rust");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Typed tools derive their argument schema with `schemars` and read their
//! arguments with `serde`; both are re-exported ([`schemars`], [`serde`],
//! [`serde_json`]) for crates that do not depend on them directly (point
//! the derives at them with `#[schemars(crate = "crew_runtime::schemars")]`
//! and `#[serde(crate = "crew_runtime::serde")]`).
//!
//! To keep secrets out of everything a crew lets out (the model's
//! requests, events, logs, the console, errors, the output), give the crew
//! a redaction: [`CrewBuilder::redact_with`] with the
//! [`guards::SecretRedactor`] or a [`Redact`] of your own (see
//! [`guards`](crate::guards#nothing-secret-leaves-a-crew)).
//!
//! The tools of an MCP server (stdio or streamable HTTP) become crew tools
//! with `mcp::McpServer` (feature `mcp`): every call of
//! one goes through the same hooks, and hooks can guard by what a tool
//! declares it does ([`Capability`]: read-only,
//! destructive, idempotent, open-world), not only by its name.

//!
//! ## Hooks as attributes, and crew-scoped hooks
//!
//! Attributes on free functions register global hooks at link time; hook
//! methods of a `#[crew_base]` type belong only to the crews an instance
//! builds, and see the instance's state.
//!
//! ```
//! use std::sync::Arc;
//! use crew_runtime::prelude::*;
//!
//! // Global: every crew of the program, unless a crew injects its own
//! // registry. Filtered, so it only meets `drop_table` calls.
//! #[on(PRE_TOOL_CALL, tools = ["Drop Table"])]
//! fn no_ddl(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
//!     Err(HookAborted::new(format!("{} is not allowed", ctx.tool_name()), "safety-policy"))
//! }
//!
//! #[derive(Clone)]
//! struct ReportCrew {
//!     banned_word: &'static str,
//!     llm: Arc<ScriptedLlm>,
//! }
//!
//! #[crew_base]
//! impl ReportCrew {
//!     #[agent]
//!     fn analyst(&self) -> Agent {
//!         let lookup = Tool::dynamic("lookup", "Looks a term up", json!({"type": "object"}), |args| {
//!             Ok::<_, String>(json!({"found": args}))
//!         });
//!         Agent::builder("Analyst").tool(lookup).llm(self.llm.clone()).build()
//!     }
//!
//!     #[task]
//!     fn report(&self) -> Task {
//!         Task::builder("Report on {topic}").agent(&self.analyst()).build()
//!     }
//!
//!     // Crew-scoped: runs for this crew's calls only, with this instance's state.
//!     #[on(PRE_TOOL_CALL, tools = ["lookup"])]
//!     fn screen_terms(&self, ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
//!         let term = ctx.tool_input.get("term").and_then(|t| t.as_str()).unwrap_or("");
//!         if term.contains(self.banned_word) {
//!             return Err(HookAborted::new("term not allowed", "report-crew"));
//!         }
//!         Ok(())
//!     }
//!
//!     #[crew]
//!     fn crew(&self) -> Result<Crew, BuildError> {
//!         Crew::builder().agents(self.agents()).tasks(self.tasks()).build()
//!     }
//! }
//!
//! let llm = Arc::new(
//!     ScriptedLlm::new()
//!         .call("lookup", json!({"term": "secret plans"}))
//!         .answer("done"),
//! );
//! let crew = ReportCrew { banned_word: "secret", llm: llm.clone() }.crew()?;
//! crew.kickoff_blocking([("topic", "plans")])?;
//! // What the model was told after its tool call:
//! assert_eq!(llm.requests()[1].observations(), ["Tool execution blocked by hook. Tool: lookup"]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
mod agent;
/// A client for Anthropic's Messages API with native tool calling (feature
/// `anthropic`).
#[cfg(feature = "anthropic")]
pub mod anthropic;
// The store and what is built on it need a database backend (`sqlite`,
// `postgres`): without one they are left out, and the build stops with
// the one error below, which says what to add.
#[cfg(all(feature = "audit", any(feature = "sqlite", feature = "postgres")))]
pub mod audit;
#[cfg(feature = "budget")]
pub mod budget;
#[cfg(all(feature = "channels", any(feature = "sqlite", feature = "postgres")))]
pub mod channels;
mod check;
// Test-only (feature `crash-points`): the points where a crash test kills
// the process. Without the feature, every point compiles to nothing.
#[cfg(all(
    any(feature = "audit", feature = "inbox"),
    any(feature = "sqlite", feature = "postgres")
))]
mod command_line;
pub mod console;
#[doc(hidden)]
pub mod crash_point;
mod crew;
mod direct;
#[cfg(all(feature = "durable", any(feature = "sqlite", feature = "postgres")))]
pub mod durable;
mod error;
mod extension;
/// Ready-made guard hooks: a secret redactor for tool results and a
/// sliding-window rate limiter for tool calls.
pub mod guards;
#[cfg(any(feature = "openai", feature = "anthropic", feature = "channels"))]
#[cfg_attr(
    not(any(feature = "openai", feature = "anthropic")),
    allow(
        dead_code,
        reason = "the channels use its error text and bounded reads only"
    )
)]
mod http_client;
#[cfg(any(feature = "openai", feature = "anthropic"))]
mod http_model;
#[cfg(any(feature = "openai", feature = "anthropic", feature = "channels"))]
mod http_retry;
#[cfg(any(feature = "openai", feature = "anthropic"))]
mod http_secrets;
#[cfg(all(feature = "inbox", any(feature = "sqlite", feature = "postgres")))]
pub mod inbox;
mod join;
pub mod llm;
#[cfg(feature = "mcp")]
pub mod mcp;
/// The options both HTTP model clients share (model, base URL, key, timeout,
/// retries, limits), checked once for both.
#[cfg(any(feature = "openai", feature = "anthropic"))]
pub mod model_options;
/// A client for OpenAI-compatible chat-completions servers (OpenAI, Ollama,
/// vLLM, llama.cpp) with native tool calling (feature `openai`).
#[cfg(feature = "openai")]
pub mod openai;
#[cfg(feature = "otel")]
pub mod otel;
mod placement;
#[cfg(feature = "policy")]
pub mod policy;
mod prompt;
mod redaction;
mod registry;
mod run;
mod scripted;
mod standalone;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub mod store;
#[cfg(all(feature = "_store", not(any(feature = "sqlite", feature = "postgres"))))]
compile_error!(
    "crew-runtime's store (used by the features `audit` and `inbox`) needs a database: add the feature `sqlite`, `postgres`, or `store` (both) to crew-runtime's features"
);
mod task;
mod terminal;
mod tool;
pub mod transcript;

/// What each integration compiled in does at every crew's build (see
/// [`extension`]): the one list that names them.
pub(crate) const AT_BUILD: &[extension::AtBuild] = &[
    #[cfg(feature = "policy")]
    policy::at_build,
    #[cfg(all(feature = "durable", any(feature = "sqlite", feature = "postgres")))]
    durable::at_build,
    #[cfg(feature = "budget")]
    budget::at_build,
];

// The hook engine, item by item: what a crew program writes hooks with.
/// Cleans what leaves a crew: see [`CrewBuilder::redact_with`].
#[doc(inline)]
pub use hooks_core::Redact;
#[doc(inline)]
pub use hooks_core::{
    APPROVAL_RECHECK_SOURCE, AgentInfo, ApprovedCallOutcome, AsyncHookFn, CallbackInput,
    Capabilities, Capability, ChannelInput, ChatMessage, CrewInfo, CrewOutput,
    DEFAULT_HOOK_TIMEOUT, DEFAULT_HUMAN_INPUT_TIMEOUT, Decision, DispatchOutcome, EXECUTION_END,
    EXECUTION_START, Event, EventBus, ExecutionEndContext, ExecutionStartContext, ExecutionStatus,
    ExplainedHook, Explanation, Extensions, FailureMode, HookAborted, HookBatch, HookContext,
    HookDispatchedEvent, HookFuture, HookHandle, HookId, HookInfo, HookOptions, HookOrigin,
    HookRegistry, HookReturn, HookStyle, HumanAnswer, HumanInputError, HumanInputFuture,
    HumanInputReply, HumanInputRequest, HumanInputSource, INPUT, InputContext, Inputs,
    InterceptionPoint, LEGACY_BLOCK_REASON, LEGACY_LLM_BLOCK_REASON, LegacyBeforePoint,
    LegacyBeforeReturn, LlmCallHookContext, LlmInfo, ModelResponse, NoReplacement, OUTPUT,
    OutputContext, POST_MODEL_CALL, POST_STEP, POST_TOOL_CALL, PRE_MODEL_CALL, PRE_STEP,
    PRE_TOOL_CALL, PendingHumanInput, Point, RawToolResult, RegisterError, Role, ScriptedInput,
    StepContext, StepKind, TaskInfo, TaskOutput, TokenUsage, ToolAnnotations, ToolCallHookContext,
    ToolCallRequest, ToolCallStatus, ToolCapabilities, ToolDefinition, ToolInfo, ToolNameProblem,
    ToolNameSkeleton, Verdict, async_hook, check_tool_name, clear_all_hooks, clear_hooks, events,
    explain, explain_point, get_hooks, global_registry, is_normalized_tool_name,
    normalize_tool_name, points, register_async_hook, register_async_hook_with, register_hook,
    register_hook_with, restore_static_hooks, testing, unregister_hook,
};

/// The CrewAI-named hook API, for code ported from CrewAI
/// (`register_before_tool_call_hook` and the rest): see
/// [`legacy`].
#[doc(inline)]
pub use hooks_core::legacy;
// The legacy functions at the root too, where they always were.
#[doc(no_inline)]
pub use hooks_core::legacy::*;

// The pieces of a streamed answer.
#[doc(inline)]
pub use hooks_core::LlmStreamChunkEvent;

/// What a runtime author needs to run calls through the hooks (the
/// dispatcher, the tool-output builder, the messages agents are shown).
/// Crew programs never need it.
///
/// ```
/// use crew_runtime::runtime::blocked_message;
///
/// // What an agent is told when a PRE_TOOL_CALL hook blocks its call.
/// assert_eq!(
///     blocked_message("delete_file"),
///     "Tool execution blocked by hook. Tool: delete_file"
/// );
/// ```
pub mod runtime {
    #[doc(inline)]
    pub use hooks_core::runtime::*;
}

/// The engine crate itself, for code generated by the attributes (which
/// names `::crew_runtime::hooks_core::__private`).
#[doc(hidden)]
pub use hooks_core;

/// The attributes: `#[on]`, `#[before_tool_call]`, `#[after_tool_call]`,
/// `#[before_llm_call]`, `#[after_llm_call]` register hooks at link time;
/// `#[crew_base]` (with `#[agent]`, `#[task]`, `#[crew]`) scopes hook
/// methods to the crews an instance builds.
#[doc(inline)]
pub use hooks_macros::{
    after_llm_call, after_tool_call, agent, before_llm_call, before_tool_call, crew, crew_base, on,
    task,
};

pub use schemars;
pub use serde;
pub use serde_json;

pub use agent::{Agent, AgentBuilder, DEFAULT_MAX_ITER, DEFAULT_MAX_RETRY_LIMIT};
pub use check::{FilterKind, FilterScope, FilterWarning};
pub use crew::{
    Crew, CrewBuilder, DEFAULT_MAX_CONCURRENT_TOOL_CALLS, DEFAULT_MAX_KICKOFF_DEPTH,
    DEFAULT_MAX_OBSERVATION_BYTES, DEFAULT_MAX_TOOL_CALLS_PER_TURN, DEFAULT_MODEL_TIMEOUT,
    DEFAULT_TOOL_TIMEOUT, Process,
};
pub use direct::{ModelAnswer, ModelCallError, call_model};
pub use error::{BuildError, CrewError, IntegrationError};
#[cfg(any(feature = "openai", feature = "anthropic"))]
pub use model_options::{ModelOptions, ModelOptionsError};
pub use placement::SyncPlacement;
pub use registry::SharedRegistry;
pub use scripted::{RecordedRequest, ScriptedCall, ScriptedLlm};
pub use standalone::{AgentMessages, AgentOutput};
pub use task::{Task, TaskBuilder};
pub use terminal::TerminalInput;
pub use tool::{
    CurrentCall, IdempotencyKey, ReconcileError, Reconciled, Reconciler, Tool, ToolOutcome,
    TypedTool,
};

/// Implements [`llm::Llm`], [`HumanInputSource`] (and any trait with
/// `async fn`s used as `dyn`).
///
/// ```
/// use std::sync::Arc;
/// use crew_runtime::async_trait;
/// use crew_runtime::llm::{Llm, LlmError, LlmRequest, ModelTurn};
/// use crew_runtime::prelude::*;
///
/// /// A model that says how many messages it was given.
/// struct Counter;
///
/// #[async_trait]
/// impl Llm for Counter {
///     fn name(&self) -> &str {
///         "counter"
///     }
///     async fn complete(&self, request: &LlmRequest<'_>) -> Result<ModelTurn, LlmError> {
///         Ok(ModelTurn::FinalAnswer(format!("{} messages", request.messages.len())))
///     }
/// }
///
/// let writer = Agent::builder("Writer").llm(Arc::new(Counter)).build();
/// let crew = Crew::builder()
///     .agent(writer.clone())
///     .task(Task::builder("Count").agent(&writer).build())
///     .global_registry(Arc::new(HookRegistry::new()))
///     .build()?;
/// assert_eq!(crew.kickoff_blocking(())?.raw, "2 messages");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub use async_trait::async_trait;

/// The names a crew program needs, in one `use`.
///
/// ```
/// use std::sync::Arc;
/// use crew_runtime::prelude::*;
///
/// let model = Arc::new(ScriptedLlm::new().answer("Hello."));
/// let greeter = Agent::builder("Greeter").llm(model).build();
/// let crew = Crew::builder()
///     .agent(greeter.clone())
///     .task(Task::builder("Greet {name}").agent(&greeter).build())
///     .global_registry(Arc::new(HookRegistry::new()))
///     .build()?;
/// assert_eq!(crew.kickoff_blocking([("name", "Ada")])?.raw, "Hello.");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// It holds these 30 names:
///
/// | Name | What it is |
/// |---|---|
/// | [`Agent`] | A role with a model and tools. |
/// | [`Task`] | A piece of work for an agent, its description a template of `{inputs}`. |
/// | [`Crew`] | Agents and tasks run together; `kickoff` runs them. |
/// | [`Tool`] | A function an agent can call, every call through the hooks. |
/// | [`Llm`](crate::llm::Llm) | The model trait, for a model of your own. |
/// | [`ScriptedLlm`] | An offline model that follows a script (tests and examples). |
/// | [`Inputs`] | The values a kickoff fills the `{placeholders}` with. |
/// | [`CrewOutput`] | What a kickoff returns. |
/// | [`CrewError`] | Why a kickoff failed. |
/// | [`BuildError`] | Why a crew could not be built. |
/// | [`HookRegistry`] | A set of hook chains, one per interception point. |
/// | [`HookOptions`] | A hook's name, filters, order and failure mode, for `register_hook_with`. |
/// | [`HookAborted`] | What a hook returns to block a call or end the run, with a reason and a source. |
/// | [`ToolCallHookContext`] | What tool-call hooks see and may edit. |
/// | [`LlmCallHookContext`] | What model-call hooks see and may edit. |
/// | [`Capability`] | What a tool declares it does (read-only, destructive, …), for `capabilities` filters. |
/// | [`Event`] | What a crew reports onto its event bus. |
/// | [`PRE_TOOL_CALL`] | The point before each tool call (for `register_hook`). |
/// | [`POST_TOOL_CALL`] | The point after each tool call (for `register_hook`). |
/// | [`on`](macro@on) | `#[on(POINT, …)]`: a hook at any of the ten points. |
/// | [`before_tool_call`](macro@before_tool_call) | The legacy before-tool hook attribute (`false` blocks). |
/// | [`after_tool_call`](macro@after_tool_call) | The legacy after-tool hook attribute (`Some(text)` replaces the result). |
/// | [`before_llm_call`](macro@before_llm_call) | The legacy before-model hook attribute (`false` blocks). |
/// | [`after_llm_call`](macro@after_llm_call) | The legacy after-model hook attribute (`Some(text)` replaces the answer). |
/// | [`crew_base`](macro@crew_base) | Makes an impl block a crew type whose hook methods belong to its crews. |
/// | [`agent`](macro@agent) | Marks a `#[crew_base]` method that builds an agent. |
/// | [`task`](macro@task) | Marks a `#[crew_base]` method that builds a task. |
/// | [`crew`](macro@crew) | Marks the `#[crew_base]` method that builds the crew. |
/// | [`json!`](macro@serde_json::json) | Builds a JSON value (tool arguments, schemas). |
/// | [`Value`](serde_json::Value) | A JSON value. |
///
/// Everything else is one path away: the other eight points, their
/// contexts and the management functions at the root (`crew_runtime::
/// {POST_STEP, StepContext, register_hook, get_hooks, global_registry,
/// TaskOutput, …}`), the CrewAI-named functions in [`crate::legacy`]
/// (`crew_runtime::legacy::register_before_tool_call_hook`, …), models in
/// [`crate::llm`] (and `crate::openai`, `crate::anthropic` with their
/// features), the ready-made guards in [`crate::guards`], and
/// [`crate::transcript::Transcript`].
pub mod prelude {
    pub use crate::llm::Llm;
    pub use crate::{
        Agent, BuildError, Crew, CrewError, CrewOutput, Inputs, ScriptedLlm, Task, Tool,
    };
    pub use hooks_core::{
        Capability, Event, HookAborted, HookOptions, HookRegistry, LlmCallHookContext,
        POST_TOOL_CALL, PRE_TOOL_CALL, ToolCallHookContext,
    };
    pub use hooks_macros::{
        after_llm_call, after_tool_call, agent, before_llm_call, before_tool_call, crew, crew_base,
        on, task,
    };
    pub use serde_json::{Value, json};
}
