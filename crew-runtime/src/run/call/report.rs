//! What a call tells the buses, each at its own boundary: the start
//! (`ToolUsageStarted`, before the PRE chain, with the arguments as the
//! model sent them), the tool's own start (`ToolExecutionStarted`, with
//! the arguments it receives), a failure as it happens (`ToolUsageError`
//! then `ToolFailureDetected`, before the POST chain), and exactly one end
//! (`ToolUsageFinished`, `ToolUsageError` or, left behind,
//! `ToolUsageAbandoned`), so a listener pairing starts with ends pairs
//! every call once. Every event is built only when someone listens, and is
//! cleaned by the crew's redaction where it leaves: the dispatcher's edge,
//! which every event of the crew passes.

use std::time::Duration;

use hooks_core::events::{
    EventId, EventMeta, ToolFailureDetectedEvent, ToolUsageAbandonedEvent, ToolUsageErrorEvent,
    ToolUsageFinishedEvent, ToolUsageStartedEvent,
};
use hooks_core::runtime::TOOL_ERROR_PREFIX;
use hooks_core::{Event, ToolCallStatus, normalize_tool_name};
use serde_json::{Map, Value};

use super::wire::sort_keys;
use crate::run::context::RunContext;

/// How a tool call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Failure {
    /// The tool returned an error (or its arguments did not fit).
    Error,
    /// The tool panicked.
    Panic,
    /// The tool ran past its timeout.
    Timeout,
    /// The agent has no tool of that name.
    NotFound,
}

/// The events of one call: its start's id, which every later event of the
/// call names.
#[derive(Clone, Copy)]
pub(super) struct Report<'c> {
    cx: &'c RunContext,
    started: Option<EventId>,
}

impl<'c> Report<'c> {
    /// A call of the tool the model named `called` that begins with its
    /// arguments as the model sent them (`ToolUsageStarted`, with the
    /// tool's normalized name, when someone listens).
    pub(super) fn begin(cx: &'c RunContext, called: &str, input: &Map<String, Value>) -> Self {
        let mut report = Report { cx, started: None };
        if cx.listening() {
            let tool_name = normalize_tool_name(called);
            report.started = Some(report.announce(&tool_name, event_input(input)));
        }
        report
    }

    /// A call that begins and ends at once, no hook having run: its start
    /// and its `ToolUsageError`.
    pub(super) fn refused(cx: &'c RunContext, tool_name: &str, input: Value, error: &str) {
        if cx.listening() {
            let mut report = Report { cx, started: None };
            report.started = Some(report.announce(tool_name, input.clone()));
            report.error(tool_name, input, error);
        }
    }

    /// The id of the call's start (its parent, for a kickoff its tool
    /// starts), when someone listened then.
    pub(super) fn started(&self) -> Option<EventId> {
        self.started
    }

    fn announce(&self, tool_name: &str, tool_input: Value) -> EventId {
        let cx = self.cx;
        let meta = EventMeta::new().with_parent(cx.execution_event());
        let id = meta.event_id;
        cx.emit(Event::ToolUsageStarted(ToolUsageStartedEvent {
            meta,
            tool_name: tool_name.to_owned(),
            tool_input,
            agent_role: Some(cx.role().to_owned()),
            task: Some(cx.task_for_events()),
            crew: cx.settings().crew_label(),
        }));
        id
    }

    /// What a call's end carries: the call's start, and the agent's
    /// execution as its parent.
    pub(super) fn end_meta(&self) -> EventMeta {
        EventMeta::new()
            .with_parent(self.cx.execution_event())
            .with_started(self.started)
    }

    /// The tool's body starts, with the arguments the PRE chain left
    /// (credentials a hook injected are cleaned at the edge, while the tool
    /// receives them): `ToolExecutionStarted`. Returns those arguments, as
    /// events carry them, when someone listens.
    pub(super) fn executing(&self, tool_name: &str, input: &Map<String, Value>) -> Option<Value> {
        let cx = self.cx;
        if !cx.listening() {
            return None;
        }
        let input = event_input(input);
        cx.emit(Event::ToolExecutionStarted(ToolUsageStartedEvent {
            meta: EventMeta::new().with_parent(self.started),
            tool_name: tool_name.to_owned(),
            tool_input: input.clone(),
            agent_role: Some(cx.role().to_owned()),
            task: Some(cx.task_for_events()),
            crew: cx.settings().crew_label(),
        }));
        Some(input)
    }

    /// The end a call left behind reports (see
    /// [`CallWatch`](super::watch::CallWatch)): only its links count here,
    /// it is stamped anew when sent.
    pub(super) fn abandoned(&self, tool_name: &str) -> ToolUsageAbandonedEvent {
        let cx = self.cx;
        ToolUsageAbandonedEvent {
            meta: {
                // It takes no number before it is sent.
                let _uncounted = hooks_core::events::EventSequence::enter(None);
                self.end_meta()
            },
            tool_name: tool_name.to_owned(),
            completed: false,
            result: None,
            agent_role: Some(cx.role().to_owned()),
            task: Some(cx.task_for_events()),
            crew: cx.settings().crew_label(),
        }
    }

    /// A tool that failed, as it happens (before the POST chain): a
    /// `ToolUsageError`, then a `ToolFailureDetected`, with the error its
    /// status carries.
    #[cold]
    pub(super) fn failed(
        &self,
        failure: Failure,
        tool_name: &str,
        input: Value,
        status: &ToolCallStatus,
    ) {
        let cx = self.cx;
        let reason = status_error(status).to_owned();
        self.error(tool_name, input, &reason);
        let (error_type, retryable) = match failure {
            Failure::Error | Failure::NotFound => ("error", false),
            Failure::Panic => ("panic", false),
            Failure::Timeout => ("timeout", true),
        };
        cx.emit(Event::ToolFailureDetected(ToolFailureDetectedEvent {
            meta: EventMeta::new().with_parent(self.started),
            tool_name: tool_name.to_owned(),
            reason,
            error_type,
            retryable,
            agent_role: Some(cx.role().to_owned()),
            task: Some(cx.task_for_events()),
            crew: cx.settings().crew_label(),
        }));
    }

    /// The call ends with an error: `ToolUsageError`.
    pub(super) fn error(&self, tool_name: &str, input: Value, error: &str) {
        let cx = self.cx;
        if cx.listening() {
            cx.emit(Event::ToolUsageError(ToolUsageErrorEvent {
                meta: self.end_meta(),
                tool_name: tool_name.to_owned(),
                tool_input: input,
                error: error.to_owned(),
                agent_role: Some(cx.role().to_owned()),
                task: Some(cx.task_for_events()),
                crew: cx.settings().crew_label(),
            }));
        }
    }

    /// The call ends with the observation the agent gets (`blocked` when a
    /// PRE hook blocked it): `ToolUsageFinished`.
    pub(super) fn finished(
        &self,
        tool_name: &str,
        input: Value,
        observation: String,
        blocked: bool,
        duration: Duration,
    ) {
        let cx = self.cx;
        cx.emit(Event::ToolUsageFinished(ToolUsageFinishedEvent {
            meta: self.end_meta(),
            tool_name: tool_name.to_owned(),
            tool_input: input,
            result: observation,
            blocked,
            duration,
            agent_role: Some(cx.role().to_owned()),
            task: Some(cx.task_for_events()),
            crew: cx.settings().crew_label(),
        }));
    }
}

/// Arguments as events carry them: keys in order (a hook's added keys
/// too).
pub(super) fn event_input(input: &Map<String, Value>) -> Value {
    let mut input = input.clone();
    sort_keys(&mut input);
    Value::Object(input)
}

/// The error a failed call's status carries (empty for any other status).
fn status_error(status: &ToolCallStatus) -> &str {
    match status {
        ToolCallStatus::Failed { error } => error,
        _ => "",
    }
}

/// Logs a contained panic of a tool with its message as the agent was
/// told it (`told`: the observation the POST chain left, cleaned), so a
/// hook that cleaned the message cleaned the log line too.
pub(super) fn warn_panic(cx: &RunContext, tool_name: &str, told: &str) {
    tracing::warn!(
        target: "crew_runtime::executor",
        tool = %cx.redaction().text(tool_name),
        agent = %cx.role(),
        "{}; the panic was contained and reported to the agent",
        told.strip_prefix(TOOL_ERROR_PREFIX).unwrap_or(told)
    );
}
