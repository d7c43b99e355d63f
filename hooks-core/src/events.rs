//! Telemetry: the events hooks and tool calls emit, and the bus that carries
//! them to listeners.
//!
//! Emitting costs one atomic load when no one listens: events are only built
//! when a listener is attached (or `tracing` wants them).
//!
//! What events carry can be cleaned on its way out: a [`Redact`] put in
//! scope on a thread with [`RedactionScope`] applies to the texts of the
//! dispatches and contained panics of that thread (a crew's calls) before
//! they reach a bus or `tracing`.
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use hooks_core::{Event, HookRegistry, StepContext, StepKind, POST_STEP};
//!
//! let registry = HookRegistry::new();
//! registry.register_hook(POST_STEP, |ctx: &mut StepContext| Some(ctx.payload.trim().to_owned()))?;
//!
//! // Listen to what the registry's dispatches report.
//! let log = Arc::new(Mutex::new(Vec::new()));
//! let sink = Arc::clone(&log);
//! registry.events().subscribe(move |event| {
//!     if let Event::HookDispatched(dispatched) = event {
//!         sink.lock().unwrap().push(format!("{} {}", dispatched.point, dispatched.outcome));
//!     }
//! });
//! registry.dispatch(POST_STEP, &mut StepContext::new(StepKind::Task, "report", " text "));
//! assert_eq!(*log.lock().unwrap(), ["POST_STEP modified"]);
//! # Ok::<(), hooks_core::RegisterError>(())
//! ```

use std::any::Any;
use std::fmt;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use arc_swap::ArcSwap;

pub use crate::event_meta::{
    EventId, EventIdError, EventMeta, EventSequence, InSequence, SequenceScope,
};
pub use crate::redaction::{
    InRedactionScope, REDACTION_FAILED, Redact, RedactionScope, redact_contained, redact_in_scope,
    redaction_in_scope,
};

mod redact;

pub use redact::redact_json;

use crate::contain::contain_panic;
use crate::outcome::DispatchOutcome;
use crate::panic::{drop_payload, panic_message};
use crate::point::InterceptionPoint;

/// One dispatch of a hook chain in which at least one hook ran.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use hooks_core::{Event, HookAborted, HookDispatchedEvent, HookRegistry, ToolCallHookContext, PRE_TOOL_CALL};
///
/// let registry = HookRegistry::new();
/// registry.register_hook(PRE_TOOL_CALL, |_: &mut ToolCallHookContext| -> Result<(), HookAborted> {
///     Err(HookAborted::new("no network", "sandbox"))
/// })?;
/// let seen: Arc<Mutex<Vec<HookDispatchedEvent>>> = Arc::default();
/// let sink = Arc::clone(&seen);
/// registry.events().subscribe(move |event| {
///     if let Event::HookDispatched(dispatched) = event {
///         sink.lock().unwrap().push(dispatched.clone());
///     }
/// });
///
/// registry.dispatch(PRE_TOOL_CALL, &mut ToolCallHookContext::new("Fetch URL", Default::default()));
/// let event = seen.lock().unwrap().remove(0);
/// assert_eq!((event.point, event.outcome, event.hooks_run), (PRE_TOOL_CALL.into(), "aborted", 1));
/// assert_eq!(event.tool_name.as_deref(), Some("fetch_url"));
/// assert_eq!(event.abort_source.as_deref(), Some("sandbox"));
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookDispatchedEvent {
    /// Its id, time, place in its kickoff and links (see [`EventMeta`]).
    pub meta: EventMeta,
    /// The point dispatched.
    pub point: InterceptionPoint,
    /// `proceeded`, `modified` or `aborted` (see [`DispatchOutcome::as_str`]).
    pub outcome: &'static str,
    /// How many hooks ran.
    pub hooks_run: usize,
    /// How long the chain took.
    pub duration: Duration,
    /// The abort's reason, when aborted.
    pub abort_reason: Option<String>,
    /// The abort's source (the hook's name where none was given).
    pub abort_source: Option<String>,
    /// The normalized tool name, at the tool-call points.
    pub tool_name: Option<Arc<str>>,
    /// The agent's role, where the point has an agent.
    pub agent_role: Option<Arc<str>>,
}

impl HookDispatchedEvent {
    pub(crate) fn new(
        point: InterceptionPoint,
        outcome: &DispatchOutcome,
        hooks_run: usize,
        started: quanta::Instant,
        tool_name: Option<Arc<str>>,
        agent_role: Option<Arc<str>>,
    ) -> Self {
        // One reading of the clock: the chain's end, and the event's time.
        let ended = quanta::Instant::now();
        // Built for listeners and `tracing` only (never on the unobserved
        // path); cleaned at the bus's edge (`Dispatcher::clean`).
        let abort = outcome.aborted();
        HookDispatchedEvent {
            meta: EventMeta::at(ended),
            point,
            outcome: outcome.as_str(),
            hooks_run,
            duration: ended.saturating_duration_since(started),
            abort_reason: abort.map(|a| a.reason.clone()),
            abort_source: abort.map(|a| a.source.clone()),
            tool_name,
            agent_role,
        }
    }
}

/// A hook panicked; the panic was contained.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use hooks_core::events::HookPanickedEvent;
/// use hooks_core::{Event, HookOptions, HookRegistry, ToolCallHookContext, POST_TOOL_CALL};
///
/// let registry = HookRegistry::new();
/// registry.register_hook_with(
///     POST_TOOL_CALL,
///     HookOptions::new().name("flaky-audit"),
///     |_: &mut ToolCallHookContext| -> () { panic!("audit store unreachable") },
/// )?;
/// let seen: Arc<Mutex<Vec<HookPanickedEvent>>> = Arc::default();
/// let sink = Arc::clone(&seen);
/// registry.events().subscribe(move |event| {
///     if let Event::HookPanicked(panicked) = event {
///         sink.lock().unwrap().push(panicked.clone());
///     }
/// });
///
/// // The panic is contained; listeners are told.
/// registry.dispatch(POST_TOOL_CALL, &mut ToolCallHookContext::new("search", Default::default()));
/// let event = seen.lock().unwrap().remove(0);
/// assert_eq!(event.hook, "flaky-audit");
/// assert_eq!(event.message, "audit store unreachable");
/// assert!(!event.fail_closed);
/// assert_eq!(event.tool_name.as_deref(), Some("search"));
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookPanickedEvent {
    /// Its id, time, place in its kickoff and links (see [`EventMeta`]).
    pub meta: EventMeta,
    /// The point the hook ran at.
    pub point: InterceptionPoint,
    /// The hook's name.
    pub hook: String,
    /// The panic message.
    pub message: String,
    /// Whether the hook was fail-closed (the call was blocked or the result
    /// withheld) or fail-open (its effect was dropped).
    pub fail_closed: bool,
    /// The normalized tool name, at the tool-call points.
    pub tool_name: Option<String>,
}

/// A tool call begins: sent before its `PRE_TOOL_CALL` chain, as the
/// reference sends it, for a call a hook then blocks too, with the
/// arguments as the model sent them. Exactly one end follows:
/// [`ToolUsageFinishedEvent`] (the call ran, or a hook blocked it),
/// [`ToolUsageErrorEvent`] (it failed), or
/// [`ToolUsageAbandonedEvent`] (it was left behind).
///
/// The same payload, as [`Event::ToolExecutionStarted`], says when the
/// tool's body itself starts (after the PRE chain let the call through),
/// with the arguments it receives.
///
/// ```
/// use hooks_core::Event;
/// use hooks_core::events::ToolUsageStartedEvent;
///
/// let event = ToolUsageStartedEvent {
///     meta: Default::default(),
///     tool_name: "web_search".into(),
///     tool_input: serde_json::json!({"query": "rust"}),
///     agent_role: Some("Researcher".into()),
///     task: Some("Find sources".into()),
///     crew: None,
/// };
/// assert_eq!(event.tool_input["query"], "rust");
/// assert_eq!(event.agent_role.as_deref(), Some("Researcher"));
/// // A tool event, not one of a kickoff's lifecycle.
/// assert!(!Event::ToolUsageStarted(event).is_lifecycle());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ToolUsageStartedEvent {
    /// Its id, time, place in its kickoff and links (see [`EventMeta`]).
    pub meta: EventMeta,
    /// The normalized tool name.
    pub tool_name: String,
    /// The arguments: as the model sent them (`ToolUsageStarted`; the raw
    /// text, as a JSON string, when they were not a JSON object), or as the
    /// tool receives them (`ToolExecutionStarted`).
    pub tool_input: serde_json::Value,
    /// The agent's role.
    pub agent_role: Option<String>,
    /// The task's description.
    pub task: Option<String>,
    /// The crew's name, absent outside a crew.
    pub crew: Option<String>,
}

/// A tool call finished; `result` is the text the agent sees (after POST
/// hooks, so redactions hold here too).
///
/// ```
/// use hooks_core::Event;
/// use hooks_core::events::ToolUsageFinishedEvent;
///
/// let event = ToolUsageFinishedEvent {
///     meta: Default::default(),
///     tool_name: "web_search".into(),
///     tool_input: serde_json::json!({"query": "rust"}),
///     result: "3 results".into(),
///     blocked: false,
///     duration: std::time::Duration::from_millis(120),
///     agent_role: Some("Researcher".into()),
///     task: None,
///     crew: Some("research".into()),
/// };
/// assert_eq!((event.result.as_str(), event.blocked), ("3 results", false));
/// assert!(event.duration.as_millis() >= 100);
/// // A tool event, not one of a kickoff's lifecycle.
/// assert!(!Event::ToolUsageFinished(event).is_lifecycle());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ToolUsageFinishedEvent {
    /// Its id, time, place in its kickoff and links (see [`EventMeta`]).
    pub meta: EventMeta,
    /// The normalized tool name.
    pub tool_name: String,
    /// The arguments the tool got (for a blocked call, as the PRE chain
    /// left them).
    pub tool_input: serde_json::Value,
    /// The agent-facing result.
    pub result: String,
    /// Whether a PRE hook blocked the call.
    pub blocked: bool,
    /// How long the tool itself ran (zero when blocked).
    pub duration: Duration,
    /// The agent's role.
    pub agent_role: Option<String>,
    /// The task's description.
    pub task: Option<String>,
    /// The crew's name, absent outside a crew.
    pub crew: Option<String>,
}

/// A tool call failed: the tool returned an error, panicked or timed out
/// (sent right away, before the `POST_TOOL_CALL` chain, and followed by a
/// [`ToolFailureDetectedEvent`]), the tool was unknown, its arguments were
/// malformed, the turn asked for too many calls, or a `POST_TOOL_CALL`
/// hook aborted the run. It ends the call: no [`ToolUsageFinishedEvent`]
/// follows.
///
/// ```
/// use hooks_core::Event;
/// use hooks_core::events::ToolUsageErrorEvent;
///
/// let event = ToolUsageErrorEvent {
///     meta: Default::default(),
///     tool_name: "serch".into(),
///     tool_input: serde_json::json!({"query": "rust"}),
///     error: "no tool named `serch`".into(),
///     agent_role: Some("Researcher".into()),
///     task: None,
///     crew: None,
/// };
/// assert!(event.error.contains(&event.tool_name));
/// // A tool event, not one of a kickoff's lifecycle.
/// assert!(!Event::ToolUsageError(event).is_lifecycle());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ToolUsageErrorEvent {
    /// Its id, time, place in its kickoff and links (see [`EventMeta`]).
    pub meta: EventMeta,
    /// The tool name as normalized (the model's spelling when unknown).
    pub tool_name: String,
    /// The arguments the tool got (as the model sent them when no tool
    /// ran).
    pub tool_input: serde_json::Value,
    /// What went wrong.
    pub error: String,
    /// The agent's role.
    pub agent_role: Option<String>,
    /// The task's description.
    pub task: Option<String>,
    /// The crew's name, absent outside a crew.
    pub crew: Option<String>,
}

/// A tool itself failed (after its [`ToolUsageErrorEvent`]): what
/// went wrong, of which kind, and whether the same call may succeed if
/// made again.
///
/// ```
/// use hooks_core::Event;
/// use hooks_core::events::ToolFailureDetectedEvent;
///
/// let event = ToolFailureDetectedEvent {
///     meta: Default::default(),
///     tool_name: "web_search".into(),
///     reason: "timed out after 30s".into(),
///     error_type: "timeout",
///     retryable: true,
///     agent_role: Some("Researcher".into()),
///     task: None,
///     crew: None,
/// };
/// assert!(event.retryable);
/// assert!(!Event::ToolFailureDetected(event).is_lifecycle());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolFailureDetectedEvent {
    /// Its id, time, place in its kickoff and links (see [`EventMeta`]).
    pub meta: EventMeta,
    /// The normalized tool name.
    pub tool_name: String,
    /// What went wrong, as the agent is told it.
    pub reason: String,
    /// `error` (the tool returned an error), `panic` or `timeout`.
    pub error_type: &'static str,
    /// Whether the same call may succeed if made again (a timeout).
    pub retryable: bool,
    /// The agent's role.
    pub agent_role: Option<String>,
    /// The task's description.
    pub task: Option<String>,
    /// The crew's name, absent outside a crew.
    pub crew: Option<String>,
}

/// A kickoff began: its `EXECUTION_START` and `INPUT` hooks let it
/// through. Exactly one [`CrewKickoffCompletedEvent`] or
/// [`CrewKickoffFailedEvent`] follows.
///
/// ```
/// use hooks_core::Event;
/// use hooks_core::events::CrewKickoffStartedEvent;
///
/// let event = CrewKickoffStartedEvent {
///     meta: Default::default(),
///     crew_name: "research".into(),
///     inputs: hooks_core::Inputs::new().with("topic", "Rust"),
///     user: Some("alice".into()),
///     kickoff_id: None,
/// };
/// assert_eq!(event.inputs.get("topic"), Some("Rust"));
/// assert_eq!(event.user.as_deref(), Some("alice"));
/// assert!(Event::CrewKickoffStarted(event).is_lifecycle());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrewKickoffStartedEvent {
    /// Its id, time, place in its kickoff and links (see [`EventMeta`]).
    pub meta: EventMeta,
    /// The crew's name.
    pub crew_name: String,
    /// The inputs as the boundary hooks left them (what `{placeholders}`
    /// are filled from).
    pub inputs: crate::Inputs,
    /// Who the kickoff runs for, when it names someone
    /// (`Crew::for_user`).
    pub user: Option<String>,
    /// The kickoff's id (see [`CrewInfo::kickoff_id`](crate::CrewInfo::kickoff_id)).
    pub kickoff_id: Option<String>,
}

/// A kickoff completed.
///
/// ```
/// use hooks_core::Event;
/// use hooks_core::events::CrewKickoffCompletedEvent;
///
/// let event = CrewKickoffCompletedEvent {
///     meta: Default::default(),
///     crew_name: "research".into(),
///     output: "the report".into(),
///     token_usage: hooks_core::TokenUsage::new(900, 100, 1_000),
///     user: None,
///     kickoff_id: None,
/// };
/// assert_eq!(event.output, "the report");
/// assert_eq!(event.token_usage.total_tokens, 1_000);
/// assert!(Event::CrewKickoffCompleted(event).is_lifecycle());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrewKickoffCompletedEvent {
    /// Its id, time, place in its kickoff and links (see [`EventMeta`]).
    pub meta: EventMeta,
    /// The crew's name.
    pub crew_name: String,
    /// The final output, as the `OUTPUT` hooks left it.
    pub output: String,
    /// The tokens of the kickoff's model responses, summed.
    pub token_usage: crate::TokenUsage,
    /// Who the kickoff runs for, when it names someone
    /// (`Crew::for_user`).
    pub user: Option<String>,
    /// The kickoff's id (see [`CrewInfo::kickoff_id`](crate::CrewInfo::kickoff_id)).
    pub kickoff_id: Option<String>,
}

/// A kickoff that had started failed (a hook aborted it, a model failed).
///
/// ```
/// use hooks_core::Event;
/// use hooks_core::events::CrewKickoffFailedEvent;
///
/// let event = CrewKickoffFailedEvent {
///     meta: Default::default(),
///     crew_name: "research".into(),
///     error: "hook aborted by budget: over budget".into(),
///     user: None,
///     kickoff_id: None,
/// };
/// assert!(event.error.contains("over budget"));
/// assert!(Event::CrewKickoffFailed(event).is_lifecycle());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrewKickoffFailedEvent {
    /// Its id, time, place in its kickoff and links (see [`EventMeta`]).
    pub meta: EventMeta,
    /// The crew's name.
    pub crew_name: String,
    /// What went wrong.
    pub error: String,
    /// Who the kickoff runs for, when it names someone
    /// (`Crew::for_user`).
    pub user: Option<String>,
    /// The kickoff's id (see [`CrewInfo::kickoff_id`](crate::CrewInfo::kickoff_id)).
    pub kickoff_id: Option<String>,
}

/// A task began (before its `PRE_STEP` hooks).
///
/// ```
/// use hooks_core::Event;
/// use hooks_core::events::TaskStartedEvent;
///
/// let event = TaskStartedEvent {
///     meta: Default::default(),
///     task_name: "report".into(),
///     agent_role: "Writer".into(),
///     crew: "research".into(),
///     context: "notes from the research task".into(),
///     task_index: 2,
///     task_count: 2,
/// };
/// assert_eq!((event.task_name.as_str(), event.agent_role.as_str()), ("report", "Writer"));
/// assert!(event.context.starts_with("notes"));
/// assert!(Event::TaskStarted(event).is_lifecycle());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskStartedEvent {
    /// Its id, time, place in its kickoff and links (see [`EventMeta`]).
    pub meta: EventMeta,
    /// The task's name (see `Task::name`).
    pub task_name: String,
    /// The role of the agent doing it.
    pub agent_role: String,
    /// The crew's name (empty for an agent run without a crew, see
    /// `Agent::kickoff` in `crew-runtime`).
    pub crew: String,
    /// The earlier outputs it receives as context.
    pub context: String,
    /// Its place in the crew's list of tasks, from 1.
    pub task_index: usize,
    /// How many tasks the crew has.
    pub task_count: usize,
}

/// A task completed; `output` is what later tasks and the crew output see
/// (after the `POST_STEP` hooks).
///
/// ```
/// use hooks_core::Event;
/// use hooks_core::events::TaskCompletedEvent;
///
/// let event = TaskCompletedEvent {
///     meta: Default::default(),
///     task_name: "report".into(),
///     agent_role: "Writer".into(),
///     crew: "research".into(),
///     output: "the report".into(),
/// };
/// assert_eq!(event.output, "the report");
/// assert!(Event::TaskCompleted(event).is_lifecycle());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskCompletedEvent {
    /// Its id, time, place in its kickoff and links (see [`EventMeta`]).
    pub meta: EventMeta,
    /// The task's name.
    pub task_name: String,
    /// The role of the agent that did it.
    pub agent_role: String,
    /// The crew's name (empty for an agent run without a crew, see
    /// `Agent::kickoff` in `crew-runtime`).
    pub crew: String,
    /// The task's output.
    pub output: String,
}

/// A task failed, which ends the kickoff.
///
/// ```
/// use hooks_core::Event;
/// use hooks_core::events::TaskFailedEvent;
///
/// let event = TaskFailedEvent {
///     meta: Default::default(),
///     task_name: "report".into(),
///     agent_role: "Writer".into(),
///     crew: "research".into(),
///     error: "the model server is down".into(),
/// };
/// assert_eq!(event.error, "the model server is down");
/// assert!(Event::TaskFailed(event).is_lifecycle());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskFailedEvent {
    /// Its id, time, place in its kickoff and links (see [`EventMeta`]).
    pub meta: EventMeta,
    /// The task's name.
    pub task_name: String,
    /// The role of the agent doing it.
    pub agent_role: String,
    /// The crew's name (empty for an agent run without a crew, see
    /// `Agent::kickoff` in `crew-runtime`).
    pub crew: String,
    /// What went wrong.
    pub error: String,
}

/// An agent began working on a task (after the task's `PRE_STEP` hooks).
///
/// ```
/// use hooks_core::Event;
/// use hooks_core::events::AgentExecutionStartedEvent;
///
/// let event = AgentExecutionStartedEvent {
///     meta: Default::default(),
///     agent_role: "Researcher".into(),
///     task_name: "research".into(),
///     crew: String::new(), // an agent run without a crew
///     tools: vec!["web_search".into()],
///     task_prompt: "Find three sources on Rust hooks".into(),
/// };
/// assert_eq!(event.tools, ["web_search"]);
/// assert!(event.crew.is_empty());
/// assert!(Event::AgentExecutionStarted(event).is_lifecycle());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentExecutionStartedEvent {
    /// Its id, time, place in its kickoff and links (see [`EventMeta`]).
    pub meta: EventMeta,
    /// The agent's role.
    pub agent_role: String,
    /// The task's name.
    pub task_name: String,
    /// The crew's name (empty for an agent run without a crew, see
    /// `Agent::kickoff` in `crew-runtime`).
    pub crew: String,
    /// The names of the tools it may call.
    pub tools: Vec<String>,
    /// The whole prompt the agent's model gets for the task, as the
    /// reference sends it: in `crew-runtime`, the task's message (its
    /// description and expected output, inputs filled in, and the context
    /// of earlier tasks), through the crew's redaction; for an agent run
    /// without a crew, what it was asked last.
    pub task_prompt: String,
}

/// An agent finished its work on a task, with this answer (before the
/// task's `POST_STEP` hooks).
///
/// ```
/// use hooks_core::Event;
/// use hooks_core::events::AgentExecutionCompletedEvent;
///
/// let event = AgentExecutionCompletedEvent {
///     meta: Default::default(),
///     agent_role: "Researcher".into(),
///     task_name: "research".into(),
///     crew: "research".into(),
///     output: "three sources".into(),
/// };
/// assert_eq!(event.output, "three sources");
/// assert!(Event::AgentExecutionCompleted(event).is_lifecycle());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentExecutionCompletedEvent {
    /// Its id, time, place in its kickoff and links (see [`EventMeta`]).
    pub meta: EventMeta,
    /// The agent's role.
    pub agent_role: String,
    /// The task's name.
    pub task_name: String,
    /// The crew's name (empty for an agent run without a crew, see
    /// `Agent::kickoff` in `crew-runtime`).
    pub crew: String,
    /// The agent's final answer.
    pub output: String,
}

/// An agent's work on a task failed: its model call failed on the last
/// attempt its `max_retry_limit` allows (in `crew-runtime`, each earlier
/// failure is retried, announced by a new [`AgentExecutionStartedEvent`]),
/// or a hook refused the run (never retried). It ends the innermost
/// attempt; the task fails after it.
///
/// ```
/// use hooks_core::Event;
/// use hooks_core::events::AgentExecutionErrorEvent;
///
/// let event = AgentExecutionErrorEvent {
///     meta: Default::default(),
///     agent_role: "Researcher".into(),
///     task_name: "research".into(),
///     crew: "research".into(),
///     error: "the model server answered HTTP 503: overloaded".into(),
/// };
/// assert!(event.error.contains("503"));
/// assert!(Event::AgentExecutionError(event).is_lifecycle());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentExecutionErrorEvent {
    /// Its id, time, place in its kickoff and links (see [`EventMeta`]).
    pub meta: EventMeta,
    /// The agent's role.
    pub agent_role: String,
    /// The task's name.
    pub task_name: String,
    /// The crew's name (empty for an agent run without a crew, see
    /// `Agent::kickoff` in `crew-runtime`).
    pub crew: String,
    /// What went wrong (through the crew's redaction).
    pub error: String,
}

/// A model call is about to be made (after its `PRE_MODEL_CALL` hooks).
///
/// ```
/// use hooks_core::Event;
/// use hooks_core::events::LlmCallStartedEvent;
///
/// let event = LlmCallStartedEvent {
///     meta: Default::default(),
///     model: "gpt-4o-mini".into(),
///     messages: std::sync::Arc::new(vec![hooks_core::ChatMessage::user("hi")]),
///     agent_role: "Assistant".into(),
///     task_name: "greet".into(),
///     iteration: Some(1),
///     crew: String::new(),
/// };
/// assert_eq!(event.messages.len(), 1);
/// assert_eq!(event.messages[0].content, "hi");
/// assert!(Event::LlmCallStarted(event).is_lifecycle());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LlmCallStartedEvent {
    /// Its id, time, place in its kickoff and links (see [`EventMeta`]).
    pub meta: EventMeta,
    /// The model's name.
    pub model: String,
    /// The messages it receives, shared: the event lends the conversation
    /// instead of copying it, so a listener costs the same at the first
    /// turn and the thousandth. A listener that keeps the event (or this
    /// `Arc`) past its call makes the next turn copy the conversation
    /// once; one that only reads it costs nothing.
    pub messages: std::sync::Arc<Vec<crate::ChatMessage>>,
    /// The agent's role.
    pub agent_role: String,
    /// The task's name.
    pub task_name: String,
    /// The agent's turn this call is for, from 1 (a retried call keeps its
    /// turn); `None` for a model called outside an agent's loop.
    pub iteration: Option<usize>,
    /// The crew's name (empty for an agent run without a crew, see
    /// `Agent::kickoff` in `crew-runtime`).
    pub crew: String,
}

/// A model call answered (before its `POST_MODEL_CALL` hooks).
///
/// ```
/// use hooks_core::Event;
/// use hooks_core::events::LlmCallCompletedEvent;
///
/// let event = LlmCallCompletedEvent {
///     meta: Default::default(),
///     model: "gpt-4o-mini".into(),
///     response: String::new(),
///     tool_calls: vec!["web_search".into()],
///     usage: Some(hooks_core::TokenUsage::new(50, 10, 60)),
///     agent_role: "Assistant".into(),
///     task_name: "greet".into(),
///     iteration: Some(1),
///     crew: String::new(),
/// };
/// // Not a final answer: the model asked for a tool.
/// assert_eq!(event.tool_calls, ["web_search"]);
/// assert_eq!(event.usage.map(|u| u.total_tokens), Some(60));
/// assert!(Event::LlmCallCompleted(event).is_lifecycle());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LlmCallCompletedEvent {
    /// Its id, time, place in its kickoff and links (see [`EventMeta`]).
    pub meta: EventMeta,
    /// The model's name.
    pub model: String,
    /// The text of the answer.
    pub response: String,
    /// The names of the tools it asked to call (empty for a final answer).
    pub tool_calls: Vec<String>,
    /// The tokens the provider reported for this response.
    pub usage: Option<crate::TokenUsage>,
    /// The agent's role.
    pub agent_role: String,
    /// The task's name.
    pub task_name: String,
    /// The agent's turn this call is for, from 1 (a retried call keeps its
    /// turn); `None` for a model called outside an agent's loop.
    pub iteration: Option<usize>,
    /// The crew's name (empty for an agent run without a crew, see
    /// `Agent::kickoff` in `crew-runtime`).
    pub crew: String,
}

/// A model call failed (an error, a timeout, a panic of the client). In
/// `crew-runtime` the agent asks again, up to its `max_retry_limit`; the
/// last failure ends the task (after an [`AgentExecutionErrorEvent`]).
///
/// ```
/// use hooks_core::Event;
/// use hooks_core::events::LlmCallFailedEvent;
///
/// let event = LlmCallFailedEvent {
///     meta: Default::default(),
///     model: "gpt-4o-mini".into(),
///     error: "timed out after 60s".into(),
///     retry: Some(1),
///     max_retries: 2,
///     agent_role: "Assistant".into(),
///     task_name: "greet".into(),
///     iteration: Some(1),
///     crew: String::new(),
/// };
/// assert!(event.error.contains("timed out"));
/// assert!(Event::LlmCallFailed(event).is_lifecycle());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LlmCallFailedEvent {
    /// Its id, time, place in its kickoff and links (see [`EventMeta`]).
    pub meta: EventMeta,
    /// The model's name.
    pub model: String,
    /// What went wrong.
    pub error: String,
    /// The retry that follows, from 1, when the agent asks again (retries
    /// are counted per task); `None` when this failure is the last.
    pub retry: Option<usize>,
    /// How many retries the agent has per task (its `max_retry_limit`;
    /// 0 for a model called outside an agent's loop).
    pub max_retries: usize,
    /// The agent's role.
    pub agent_role: String,
    /// The task's name.
    pub task_name: String,
    /// The agent's turn this call is for, from 1 (a retried call keeps its
    /// turn); `None` for a model called outside an agent's loop.
    pub iteration: Option<usize>,
    /// The crew's name (empty for an agent run without a crew, see
    /// `Agent::kickoff` in `crew-runtime`).
    pub crew: String,
}

/// A tool call was left behind: its kickoff was dropped while the tool
/// ran, or (for a synchronous tool) it ran past its timeout. An async tool
/// is stopped there (`completed` false). A synchronous one cannot be
/// stopped: the event comes when its body has finished, saying what it
/// returned, so that its side effects are on record.
///
/// ```
/// use hooks_core::Event;
/// use hooks_core::events::ToolUsageAbandonedEvent;
///
/// let event = ToolUsageAbandonedEvent {
///     meta: Default::default(),
///     tool_name: "send_email".into(),
///     completed: true,
///     result: Some("sent".into()),
///     agent_role: Some("Assistant".into()),
///     task: None,
///     crew: None,
/// };
/// // The kickoff was dropped, but the email went out: on record.
/// assert!(event.completed);
/// assert_eq!(event.result.as_deref(), Some("sent"));
/// // A tool event, not one of a kickoff's lifecycle.
/// assert!(!Event::ToolUsageAbandoned(event).is_lifecycle());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolUsageAbandonedEvent {
    /// Its id, time, place in its kickoff and links (see [`EventMeta`]).
    pub meta: EventMeta,
    /// The normalized tool name.
    pub tool_name: String,
    /// Whether the tool's body ran to its end.
    pub completed: bool,
    /// What it returned (its text, or its error), when it ran to its end
    /// and that is known.
    pub result: Option<String>,
    /// The agent's role.
    pub agent_role: Option<String>,
    /// The task's description.
    pub task: Option<String>,
    /// The crew's name, absent outside a crew.
    pub crew: Option<String>,
}

/// Everything that travels on an [`EventBus`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Event {
    /// A hook chain ran.
    HookDispatched(HookDispatchedEvent),
    /// A hook panicked.
    HookPanicked(HookPanickedEvent),
    /// A tool call began (before its `PRE_TOOL_CALL` chain).
    ToolUsageStarted(ToolUsageStartedEvent),
    /// A tool's body starts (after the `PRE_TOOL_CALL` chain let the call
    /// through), with the arguments it receives: where an audit trail
    /// records that the tool ran.
    ToolExecutionStarted(ToolUsageStartedEvent),
    /// A tool finished.
    ToolUsageFinished(ToolUsageFinishedEvent),
    /// A tool call failed.
    ToolUsageError(ToolUsageErrorEvent),
    /// A tool failed (after its `ToolUsageError`): the kind of failure.
    ToolFailureDetected(ToolFailureDetectedEvent),
    /// A tool call was left behind (cancelled, or a synchronous tool past
    /// its timeout).
    ToolUsageAbandoned(ToolUsageAbandonedEvent),
    /// A piece of a model's answer arrived while the answer streams.
    LlmStreamChunk(LlmStreamChunkEvent),
    /// A kickoff began.
    CrewKickoffStarted(CrewKickoffStartedEvent),
    /// A kickoff completed.
    CrewKickoffCompleted(CrewKickoffCompletedEvent),
    /// A kickoff failed.
    CrewKickoffFailed(CrewKickoffFailedEvent),
    /// A task began.
    TaskStarted(TaskStartedEvent),
    /// A task completed.
    TaskCompleted(TaskCompletedEvent),
    /// A task failed.
    TaskFailed(TaskFailedEvent),
    /// An agent began working on a task.
    AgentExecutionStarted(AgentExecutionStartedEvent),
    /// An agent finished its work on a task.
    AgentExecutionCompleted(AgentExecutionCompletedEvent),
    /// An agent's work on a task failed (its last attempt).
    AgentExecutionError(AgentExecutionErrorEvent),
    /// A model call is about to be made.
    LlmCallStarted(LlmCallStartedEvent),
    /// A model call answered.
    LlmCallCompleted(LlmCallCompletedEvent),
    /// A model call failed.
    LlmCallFailed(LlmCallFailedEvent),
    /// An event an integration defines (a policy set's decision, an audit
    /// trail's dropped records): read its payload by type with
    /// [`IntegrationEvent::downcast_ref`].
    Integration(IntegrationEvent),
}

impl Event {
    /// The event's id, time, place in its kickoff and links, whatever its
    /// kind.
    ///
    /// ```
    /// use hooks_core::Event;
    /// use hooks_core::events::{EventMeta, TaskFailedEvent};
    ///
    /// let meta = EventMeta::new();
    /// let failed = Event::TaskFailed(TaskFailedEvent {
    ///     meta,
    ///     task_name: "report".into(),
    ///     agent_role: "Writer".into(),
    ///     crew: "research".into(),
    ///     error: "the model server is down".into(),
    /// });
    /// assert_eq!(failed.meta().event_id, meta.event_id);
    /// ```
    pub fn meta(&self) -> &EventMeta {
        match self {
            Event::HookDispatched(e) => &e.meta,
            Event::HookPanicked(e) => &e.meta,
            Event::ToolUsageStarted(e) | Event::ToolExecutionStarted(e) => &e.meta,
            Event::ToolUsageFinished(e) => &e.meta,
            Event::ToolUsageError(e) => &e.meta,
            Event::ToolFailureDetected(e) => &e.meta,
            Event::ToolUsageAbandoned(e) => &e.meta,
            Event::LlmStreamChunk(e) => &e.meta,
            Event::CrewKickoffStarted(e) => &e.meta,
            Event::CrewKickoffCompleted(e) => &e.meta,
            Event::CrewKickoffFailed(e) => &e.meta,
            Event::TaskStarted(e) => &e.meta,
            Event::TaskCompleted(e) => &e.meta,
            Event::TaskFailed(e) => &e.meta,
            Event::AgentExecutionStarted(e) => &e.meta,
            Event::AgentExecutionCompleted(e) => &e.meta,
            Event::AgentExecutionError(e) => &e.meta,
            Event::LlmCallStarted(e) => &e.meta,
            Event::LlmCallCompleted(e) => &e.meta,
            Event::LlmCallFailed(e) => &e.meta,
            Event::Integration(e) => &e.meta,
        }
    }

    /// Whether this is one of a kickoff's lifecycle events (kickoff, task,
    /// agent execution, model call), as opposed to the hook and tool
    /// events: for a listener that wants one kind only.
    ///
    /// ```
    /// use hooks_core::Event;
    /// use hooks_core::events::CrewKickoffFailedEvent;
    ///
    /// let failed = Event::CrewKickoffFailed(CrewKickoffFailedEvent {
    ///     meta: Default::default(),
    ///     crew_name: "crew".into(),
    ///     error: "the model server is down".into(),
    ///     user: None,
    ///     kickoff_id: None,
    /// });
    /// assert!(failed.is_lifecycle());
    /// ```
    pub fn is_lifecycle(&self) -> bool {
        matches!(
            self,
            Event::CrewKickoffStarted(_)
                | Event::CrewKickoffCompleted(_)
                | Event::CrewKickoffFailed(_)
                | Event::TaskStarted(_)
                | Event::TaskCompleted(_)
                | Event::TaskFailed(_)
                | Event::AgentExecutionStarted(_)
                | Event::AgentExecutionCompleted(_)
                | Event::AgentExecutionError(_)
                | Event::LlmCallStarted(_)
                | Event::LlmCallCompleted(_)
                | Event::LlmCallFailed(_)
        )
    }
}

/// An event an integration defines (a policy engine, an audit trail, a
/// program's own): the engine carries it on the bus without knowing its
/// type.
///
/// It holds the integration's payload (any `'static` value, shared, so
/// cloning the event is cheap), the payload's kind name for logs and
/// `Debug` output, and the usual [`EventMeta`]. A listener reads one by
/// matching [`Event::Integration`] and asking for the payload's type with
/// [`downcast_ref`](Self::downcast_ref): `None` for the events of other
/// integrations.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use hooks_core::events::{EventMeta, IntegrationEvent};
/// use hooks_core::{Event, EventBus};
///
/// // An integration's own event.
/// #[derive(Debug, Clone, PartialEq)]
/// struct CacheEvicted {
///     entries: usize,
/// }
///
/// let bus = EventBus::new();
/// let evicted = Arc::new(Mutex::new(0));
/// let sink = Arc::clone(&evicted);
/// bus.subscribe(move |event| {
///     // Read it by its type; any other integration's event is passed over.
///     if let Event::Integration(integration) = event
///         && let Some(cache) = integration.downcast_ref::<CacheEvicted>()
///     {
///         *sink.lock().unwrap() += cache.entries;
///     }
/// });
///
/// let event = IntegrationEvent::new("CacheEvicted", CacheEvicted { entries: 3 });
/// assert_eq!(event.kind(), "CacheEvicted");
/// bus.emit(&Event::Integration(event));
/// bus.emit(&Event::Integration(IntegrationEvent::new("Other", "not a cache event")));
/// assert_eq!(*evicted.lock().unwrap(), 3);
/// ```
#[derive(Clone)]
pub struct IntegrationEvent {
    /// Its id, time, place in its kickoff and links (see [`EventMeta`]).
    pub meta: EventMeta,
    kind: &'static str,
    payload: Arc<dyn Any + Send + Sync>,
    /// Compares two payloads of the type this event was made with.
    payload_eq: fn(&(dyn Any + Send + Sync), &(dyn Any + Send + Sync)) -> bool,
    /// Formats a payload of the type this event was made with.
    payload_debug: fn(&(dyn Any + Send + Sync), &mut fmt::Formatter<'_>) -> fmt::Result,
}

impl IntegrationEvent {
    /// An event of kind `kind` (a name for logs, such as the payload's type
    /// name) carrying `payload`, with new metadata ([`EventMeta::new`]:
    /// numbered in the kickoff whose sequence is in scope).
    ///
    /// ```
    /// use hooks_core::events::IntegrationEvent;
    ///
    /// let event = IntegrationEvent::new("RetryScheduled", 3_u32);
    /// assert_eq!(event.downcast_ref::<u32>(), Some(&3));
    /// ```
    pub fn new<T>(kind: &'static str, payload: T) -> Self
    where
        T: Any + Send + Sync + fmt::Debug + PartialEq,
    {
        IntegrationEvent {
            meta: EventMeta::new(),
            kind,
            payload: Arc::new(payload),
            payload_eq: payload_eq::<T>,
            payload_debug: payload_debug::<T>,
        }
    }

    /// The same event with `meta` as its metadata (links to the events it
    /// belongs with, say).
    ///
    /// ```
    /// use hooks_core::events::{EventMeta, IntegrationEvent};
    ///
    /// let opened = EventMeta::new();
    /// let event = IntegrationEvent::new("Closed", ()).with_meta(EventMeta::new().with_started(Some(opened.event_id)));
    /// assert_eq!(event.meta.started_event_id, Some(opened.event_id));
    /// ```
    pub fn with_meta(mut self, meta: EventMeta) -> Self {
        self.meta = meta;
        self
    }

    /// The payload's kind name, as given when the event was made.
    ///
    /// ```
    /// let event = hooks_core::events::IntegrationEvent::new("CacheEvicted", 3_usize);
    /// assert_eq!(event.kind(), "CacheEvicted");
    /// ```
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// The payload, if it is a `T`.
    ///
    /// ```
    /// let event = hooks_core::events::IntegrationEvent::new("Count", 3_usize);
    /// assert_eq!(event.downcast_ref::<usize>(), Some(&3));
    /// assert_eq!(event.downcast_ref::<String>(), None);
    /// ```
    pub fn downcast_ref<T: Any>(&self) -> Option<&T> {
        (*self.payload).downcast_ref::<T>()
    }

    /// Whether the payload is a `T`.
    ///
    /// ```
    /// let event = hooks_core::events::IntegrationEvent::new("Count", 3_usize);
    /// assert!(event.is::<usize>());
    /// ```
    pub fn is<T: Any>(&self) -> bool {
        (*self.payload).is::<T>()
    }

    /// The payload, whatever its type.
    ///
    /// ```
    /// let event = hooks_core::events::IntegrationEvent::new("Count", 3_usize);
    /// assert!(event.payload().is::<usize>());
    /// ```
    pub fn payload(&self) -> &(dyn Any + Send + Sync) {
        &*self.payload
    }
}

fn payload_eq<T: Any + PartialEq>(
    a: &(dyn Any + Send + Sync),
    b: &(dyn Any + Send + Sync),
) -> bool {
    match (a.downcast_ref::<T>(), b.downcast_ref::<T>()) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

fn payload_debug<T: Any + fmt::Debug>(
    payload: &(dyn Any + Send + Sync),
    f: &mut fmt::Formatter<'_>,
) -> fmt::Result {
    match payload.downcast_ref::<T>() {
        Some(payload) => payload.fmt(f),
        None => f.write_str(".."),
    }
}

/// Two events are equal when their metadata, kinds and payloads are (a
/// payload of another type is never equal).
impl PartialEq for IntegrationEvent {
    fn eq(&self, other: &Self) -> bool {
        self.meta == other.meta
            && self.kind == other.kind
            && (self.payload_eq)(&*self.payload, &*other.payload)
    }
}

impl fmt::Debug for IntegrationEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        /// The payload through the formatter of its own type.
        struct Payload<'a>(&'a IntegrationEvent);

        impl fmt::Debug for Payload<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                (self.0.payload_debug)(&*self.0.payload, f)
            }
        }

        f.debug_struct("IntegrationEvent")
            .field("kind", &self.kind)
            .field("meta", &self.meta)
            .field("payload", &Payload(self))
            .finish()
    }
}

/// A piece of a streamed model answer, as it arrives (before the
/// `POST_MODEL_CALL` chain, which sees the assembled answer). With a
/// crew's redaction, pieces come a line at a time, cleaned.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use hooks_core::{Event, EventBus, LlmStreamChunkEvent};
///
/// // A listener that shows the answer as it streams.
/// let bus = EventBus::new();
/// let shown = Arc::new(Mutex::new(String::new()));
/// let screen = Arc::clone(&shown);
/// bus.subscribe(move |event| {
///     if let Event::LlmStreamChunk(piece) = event {
///         screen.lock().unwrap().push_str(&piece.chunk);
///     }
/// });
/// for chunk in ["Hel", "lo"] {
///     bus.emit(&Event::LlmStreamChunk(LlmStreamChunkEvent {
///         meta: Default::default(),
///         chunk: chunk.into(),
///         agent_role: Some("Assistant".into()),
///         task: None,
///         crew: None,
///     }));
/// }
/// assert_eq!(*shown.lock().unwrap(), "Hello");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LlmStreamChunkEvent {
    /// Its id, time, place in its kickoff and links (see [`EventMeta`]).
    pub meta: EventMeta,
    /// The text that arrived.
    pub chunk: String,
    /// The agent whose model answers.
    pub agent_role: Option<String>,
    /// The task the agent works on.
    pub task: Option<String>,
    /// The crew's name, absent outside a crew.
    pub crew: Option<String>,
}

/// Identifies one listener on a bus.
///
/// ```
/// use hooks_core::EventBus;
///
/// let bus = EventBus::new();
/// let id = bus.subscribe(|event| println!("{event:?}"));
/// assert!(bus.has_listeners());
/// assert!(bus.unsubscribe(id));
/// assert!(!bus.unsubscribe(id)); // already gone
/// assert!(!bus.has_listeners());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ListenerId(u64);

type Listener = Arc<dyn Fn(&Event) + Send + Sync>;

/// Delivers events to listeners, synchronously, on the emitting thread.
///
/// Listeners are kept in a lock-free snapshot: emitting takes no lock, and a
/// listener may subscribe or unsubscribe listeners from inside a callback. A
/// panicking listener is contained and reported through `tracing`.
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use hooks_core::events::TaskCompletedEvent;
/// use hooks_core::{Event, EventBus};
///
/// let bus = EventBus::new();
/// let completed = Arc::new(AtomicUsize::new(0));
/// let count = Arc::clone(&completed);
/// bus.subscribe(move |event| {
///     if let Event::TaskCompleted(_) = event {
///         count.fetch_add(1, Ordering::Relaxed);
///     }
/// });
/// bus.emit(&Event::TaskCompleted(TaskCompletedEvent {
///     meta: Default::default(),
///     task_name: "report".into(),
///     agent_role: "Writer".into(),
///     crew: "research".into(),
///     output: "done".into(),
/// }));
/// assert_eq!(completed.load(Ordering::Relaxed), 1);
/// assert_eq!(bus.clear(), 1);
/// ```
pub struct EventBus {
    listeners: ArcSwap<Vec<(ListenerId, Listener)>>,
    count: AtomicUsize,
    write: Mutex<()>,
}

static NEXT_LISTENER: AtomicU64 = AtomicU64::new(1);

impl EventBus {
    /// A bus with no listeners.
    pub fn new() -> Self {
        EventBus {
            listeners: ArcSwap::from_pointee(Vec::new()),
            count: AtomicUsize::new(0),
            write: Mutex::new(()),
        }
    }

    /// Adds a listener; it receives every event emitted from now on.
    pub fn subscribe(&self, listener: impl Fn(&Event) + Send + Sync + 'static) -> ListenerId {
        let id = ListenerId(NEXT_LISTENER.fetch_add(1, Ordering::Relaxed));
        self.update(|list| list.push((id, Arc::new(listener))));
        id
    }

    /// Removes a listener; returns whether it was there.
    pub fn unsubscribe(&self, id: ListenerId) -> bool {
        self.update(|list| {
            let before = list.len();
            list.retain(|(other, _)| *other != id);
            before != list.len()
        })
    }

    /// Removes every listener; returns how many there were.
    pub fn clear(&self) -> usize {
        self.update(|list| std::mem::take(list).len())
    }

    /// Whether anyone listens. One relaxed atomic load.
    #[inline]
    pub fn has_listeners(&self) -> bool {
        self.count.load(Ordering::Relaxed) != 0
    }

    /// Delivers `event` to every listener.
    pub fn emit(&self, event: &Event) {
        if !self.has_listeners() {
            return;
        }
        let listeners = self.listeners.load();
        for (_, listener) in listeners.iter() {
            if let Err(panic) = contain_panic(AssertUnwindSafe(|| listener(event))) {
                tracing::warn!(
                    target: "hooks_core::events",
                    "an event listener panicked: {}; the panic was contained",
                    panic_message(&*panic)
                );
                drop_payload(panic);
            }
        }
    }

    pub(crate) fn listeners_snapshot(&self) -> Arc<Vec<(ListenerId, Listener)>> {
        self.listeners.load_full()
    }

    /// Puts back a saved list of listeners; returns the list it replaces,
    /// for the caller to drop once its own locks are released.
    pub(crate) fn restore_listeners(
        &self,
        saved: Arc<Vec<(ListenerId, Listener)>>,
    ) -> Arc<Vec<(ListenerId, Listener)>> {
        let _write = self.write.lock().unwrap_or_else(PoisonError::into_inner);
        self.count.store(saved.len(), Ordering::Relaxed);
        self.listeners.swap(saved)
    }

    fn update<T>(&self, change: impl FnOnce(&mut Vec<(ListenerId, Listener)>) -> T) -> T {
        let (result, old) = {
            // The lock only orders writers; it guards no data a panic could
            // leave half-changed, so poisoning is ignored.
            let _write = self.write.lock().unwrap_or_else(PoisonError::into_inner);
            let mut list = Vec::clone(&self.listeners.load());
            let result = change(&mut list);
            self.count.store(list.len(), Ordering::Relaxed);
            (result, self.listeners.swap(Arc::new(list)))
        };
        // A removed listener's captured state is dropped here, outside the
        // lock: its `Drop` may subscribe or unsubscribe without deadlock.
        drop(old);
        result
    }
}

impl Default for EventBus {
    fn default() -> Self {
        EventBus::new()
    }
}

impl fmt::Debug for EventBus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventBus")
            .field("listeners", &self.count.load(Ordering::Relaxed))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::{Event, EventMeta, IntegrationEvent};

    #[derive(Debug, Clone, PartialEq)]
    struct Refund {
        amount: u32,
    }

    #[test]
    fn an_integration_event_has_its_metadata_like_any_other() {
        let meta = EventMeta::new();
        let event = Event::Integration(
            IntegrationEvent::new("Refund", Refund { amount: 40 }).with_meta(meta),
        );
        assert_eq!(*event.meta(), meta);
        assert!(!event.is_lifecycle());
    }

    #[test]
    fn integration_events_compare_and_print_by_their_payload() {
        let meta = EventMeta::new();
        let refund = |amount| IntegrationEvent::new("Refund", Refund { amount }).with_meta(meta);
        assert_eq!(refund(40), refund(40).clone());
        assert_ne!(refund(40), refund(41));
        // The same kind name over another type is another event.
        assert_ne!(
            refund(40),
            IntegrationEvent::new("Refund", 40_u32).with_meta(meta)
        );
        let shown = format!("{:?}", refund(40));
        assert!(shown.contains("kind: \"Refund\""), "{shown}");
        assert!(shown.contains("payload: Refund { amount: 40 }"), "{shown}");
    }
}
