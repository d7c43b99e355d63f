//! One tool call, the only way any tool runs: arguments checked, context
//! built, PRE chain, tool, POST chain, events, observation.
//!
//! What the agent sees, case by case:
//! - arguments that are not a JSON object (or not JSON): `Invalid arguments
//!   for tool …`; no hook and no tool runs; a `ToolUsageError` event;
//! - a tool the agent does not have: `Tool not found: <name>. Available
//!   tools: …`; PRE and POST hooks run with `ctx.tool` absent; a
//!   `ToolUsageError` event (before the POST chain);
//! - a call a PRE hook blocks: `Tool execution blocked by hook. Tool: …`
//!   (POST hooks run and may replace it);
//! - a tool that fails, panics or times out: `Error executing tool:
//!   <message>` (POST hooks see it); `ToolUsageError` and
//!   `ToolFailureDetected` events, sent as soon as the tool failed, before
//!   the POST chain, as the reference sends them;
//! - otherwise the tool's rendered result, after POST hooks;
//! - past the crew's `max_tool_calls_per_turn`: `Tool call refused: …`; no
//!   hook and no tool runs; a `ToolUsageError` event.
//!
//! An observation longer than the crew's `max_observation_bytes` is cut
//! (on a character boundary, with a line saying how much) after the POST
//! chain: hooks see, and may redact, the whole result; the model, the
//! console and the `ToolUsageFinished` event get the cut one. Call ids are
//! made unique within a turn before any call runs.
//!
//! Events keep the reference's places: every call begins with one
//! `ToolUsageStarted` (before the PRE chain, with the arguments as the
//! model sent them, for a call a hook then blocks too) and ends with
//! exactly one of `ToolUsageFinished` (the text the agent sees; blocked
//! calls too), `ToolUsageError` (a failure, or a POST hook aborting the
//! run) or `ToolUsageAbandoned` (left behind), so a listener pairing starts
//! with ends pairs every call once. `ToolExecutionStarted` says when the
//! tool's body itself starts (after the PRE chain let the call through),
//! with the arguments it receives: what an audit trail records as
//! `tool_started`.
//!
//! With a crew's redaction set, the observation is cleaned after the POST
//! chain (before the cut to `max_observation_bytes`), and every event, console line and log line of the call carries
//! cleaned texts (`ToolExecutionStarted` its input as the PRE chain left
//! it, credentials a hook injected included, cleaned). A panicking tool is contained without the panic hook printing
//! it.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt::Write as _;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::Either;
use tracing::Instrument;

use hooks_core::events::{
    EventId, EventMeta, EventSequence, ToolFailureDetectedEvent, ToolUsageAbandonedEvent,
    ToolUsageErrorEvent, ToolUsageFinishedEvent, ToolUsageStartedEvent,
};
use hooks_core::runtime::{
    TOOL_CALL_POINTS, TOOL_ERROR_PREFIX, ToolCallReport, ToolOutput, contain_panic,
    contain_panic_async, take_panic_message,
};
use hooks_core::{Event, RawToolResult, ToolCallHookContext, ToolInfo, normalize_tool_name};
use serde_json::{Map, Value};

use super::{AgentRun, CrewHooks, InCrew, KickoffDepth, excerpt};
use crate::error::CrewError;
use crate::join::within;
use crate::llm::ToolCallRequest;
use crate::placement::{self, Placement, PlacementRecord, Where};
use crate::tool::{Tool, ToolResult, ToolRun};

impl AgentRun {
    /// Runs one tool call the model asked for and returns the observation
    /// the model gets, or the abort of a POST hook.
    pub(crate) async fn run_call(&self, call: &ToolCallRequest) -> Result<String, CrewError> {
        let span = tracing::info_span!(
            "execute_tool",
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = %self.redaction().text(&call.name),
            gen_ai.tool.call.id = %self.redaction().text(&call.id),
            gen_ai.agent.name = %self.role(),
        );
        self.run_call_in_span(call).instrument(span).await
    }

    async fn run_call_in_span(&self, call: &ToolCallRequest) -> Result<String, CrewError> {
        let input = match parse_arguments(&call.arguments) {
            Ok(input) => input,
            Err(problem) => return Ok(self.reject_arguments(call, &problem)),
        };
        let listening = self.listening();
        // The call's start, which its end and a kickoff started by its tool
        // name.
        let started = listening.then(|| self.announce(&normalize_tool_name(&call.name), &input));
        let mut ctx = ToolCallHookContext::new(&call.name, input)
            .with_call_id(call.id.clone())
            .with_iteration(self.turn.load(std::sync::atomic::Ordering::Relaxed))
            .with_agent(Arc::clone(&self.agent_info))
            .with_task(Arc::clone(&self.task_info))
            .in_crew(&self.crew_info)
            .with_human_input(Arc::clone(&self.settings().human_input))
            .with_human_input_timeout(self.settings().human_input_timeout)
            .with_block_reasons_shown(self.settings().tell_model_why_blocked);
        for extension in &self.settings().extensions {
            extension.enter_tool_call(&mut ctx);
        }
        let tool = self.agent().find_tool(ctx.tool_name());
        if let Some(tool) = tool {
            ctx.tool = Some(Arc::clone(tool) as Arc<dyn ToolInfo>);
        }
        if self.verbose {
            let input = serde_json::to_string(&ctx.tool_input).unwrap_or_default();
            let input = self.redaction().text(&input);
            self.say(&format!("→ {} {}", ctx.tool_name(), excerpt(&input, 300)));
        }

        let verbose = self.verbose;
        let (result, ran) = self
            .dispatcher()
            .begin_call(&TOOL_CALL_POINTS)
            .run_tool_call_async_keeping(&mut ctx, |ctx| {
                let running = match tool {
                    Some(tool) => Either::Left(self.execute(tool, ctx, started)),
                    None => {
                        let not_found = Ran {
                            failed: Some(Failure::NotFound),
                            ..Ran::default()
                        };
                        let output = self.not_found(call, ctx, started);
                        Either::Right(std::future::ready((output, not_found)))
                    }
                };
                async move {
                    let (output, mut ran) = running.await;
                    if verbose {
                        ran.before_post = Some(output.rendered.clone());
                    }
                    (output, ran)
                }
            })
            .await;
        let Ran {
            ran_for,
            failed,
            before_post,
            input: ran_with,
        } = ran.unwrap_or_default();

        let replaced = matches!(
            (&result, &before_post),
            (Ok(report), Some(before)) if *before != report.observation
        );
        // Cleaned, then cut: a cut through a secret could hide it from the
        // redaction. What the model, the events and the console get.
        let result = result.map(|mut report| {
            let observation = std::mem::take(&mut report.observation);
            report.observation = self.redaction().owned(observation);
            self.limit_observation(report)
        });
        match result {
            Ok(report) => {
                let observation = report.observation;
                if failed == Some(Failure::Panic) {
                    self.warn_panic(ctx.tool_name(), &observation);
                }
                if self.verbose {
                    if let Some(abort) = &report.blocked {
                        self.say(&format!("  blocked by {}: {}", abort.source, abort.reason));
                    } else if replaced {
                        self.say("  result replaced by a POST_TOOL_CALL hook");
                    }
                    self.say(&format!(
                        "← {}: {}",
                        ctx.tool_name(),
                        excerpt(&observation, 300)
                    ));
                }
                // A failed call ended with its `ToolUsageError`.
                if self.listening() && failed.is_none() {
                    let tool_input = match ran_with {
                        Some(input) => input,
                        None => self.cleaned_input(&ctx.tool_input),
                    };
                    self.emit(Event::ToolUsageFinished(ToolUsageFinishedEvent {
                        meta: self.call_end(started),
                        tool_name: self.redaction().owned(ctx.tool_name().to_owned()),
                        tool_input,
                        result: observation.clone(),
                        blocked: report.blocked.is_some(),
                        duration: ran_for,
                        agent_role: Some(self.role().to_owned()),
                        task: Some(self.task_for_events()),
                        crew: self.settings().crew_label(),
                    }));
                }
                Ok(observation)
            }
            Err(abort) => {
                if failed == Some(Failure::Panic) {
                    let text = ctx.tool_result.as_deref().unwrap_or_default();
                    let text = self.redaction().text(text);
                    self.warn_panic(ctx.tool_name(), &text);
                }
                // The call's end, unless its failure already ended it.
                if failed.is_none() && self.listening() {
                    let input = match &ran_with {
                        Some(input) => input.clone(),
                        None => self.cleaned_input(&ctx.tool_input),
                    };
                    let error = format!(
                        "the run was aborted after the call by {}: {}",
                        abort.source, abort.reason
                    );
                    self.report_error(ctx.tool_name(), input, &error, started);
                }
                if self.verbose {
                    self.say(&format!(
                        "  run aborted after {} by {}: {}",
                        ctx.tool_name(),
                        abort.source,
                        abort.reason
                    ));
                }
                Err(CrewError::Aborted {
                    tool: ctx.tool_name().to_owned(),
                    agent: self.role().to_owned(),
                    abort,
                })
            }
        }
    }

    /// Runs the tool on the input the PRE chain left, containing a panic,
    /// within its timeout. Says beside the output how long the tool ran and
    /// whether it failed, panicked or timed out: the caller reports (and
    /// logs) the error once the POST chain has seen, and maybe redacted,
    /// it.
    fn execute<'a>(
        &'a self,
        tool: &'a Tool,
        ctx: &ToolCallHookContext,
        started: Option<EventId>,
    ) -> impl Future<Output = (ToolOutput, Ran)> + Send + use<'a> {
        let listening = self.listening();
        // As the PRE chain left it: credentials a hook injected are
        // cleaned here, while the tool receives them.
        let ran_with = listening.then(|| self.cleaned_input(&ctx.tool_input));
        if let Some(input) = &ran_with {
            self.emit(Event::ToolExecutionStarted(ToolUsageStartedEvent {
                meta: EventMeta::new().with_parent(started),
                tool_name: self.redaction().owned(ctx.tool_name().to_owned()),
                tool_input: input.clone(),
                agent_role: Some(self.role().to_owned()),
                task: Some(self.task_for_events()),
                crew: self.settings().crew_label(),
            }));
        }
        let tool_name = listening.then(|| ctx.tool_name().to_owned());
        let clock = (listening || self.verbose).then(Instant::now);
        let timeout = tool.timeout().unwrap_or(self.settings().tool_timeout);
        let run = tool.invoke(&ctx.tool_input);
        let placement = tool.placement();
        let watch = listening.then(|| {
            Arc::new(CallWatch {
                state: std::sync::Mutex::new(CallState::Running),
                hooks: self.hooks.clone(),
                redaction: self.redaction().clone(),
                event: ToolUsageAbandonedEvent {
                    // Only its links count here: it is stamped anew when
                    // sent (see `report`), and takes no number before.
                    meta: {
                        let _uncounted = EventSequence::enter(None);
                        self.call_end(started)
                    },
                    tool_name: self.redaction().owned(ctx.tool_name().to_owned()),
                    completed: false,
                    result: None,
                    agent_role: Some(self.role().to_owned()),
                    task: Some(self.task_for_events()),
                    crew: self.settings().crew_label(),
                },
            })
        });
        async move {
            let running = self.run_tool(run, placement, timeout, watch);
            // A kickoff the tool starts names this call as its parent (when
            // the call has an event to name).
            let result = match started {
                Some(_) => KickoffDepth::scope(self.depth.in_call(started), running).await,
                None => running.await,
            };
            let ran_for = clock.map_or(Duration::ZERO, |clock| clock.elapsed());
            let (output, failed) = match result {
                Ok(Ok(output)) => (output, None),
                Ok(Err(failure)) => {
                    let mut output = ToolOutput::error(&failure);
                    if let Some(result) = failure.into_result() {
                        output.raw = RawToolResult::from_json(result);
                    }
                    (output, Some(Failure::Error))
                }
                Err(Stopped::Panicked(message)) => (
                    ToolOutput::error(format!("the tool panicked: {message}")),
                    Some(Failure::Panic),
                ),
                Err(Stopped::TimedOut) => (
                    ToolOutput::error(format!("timed out after {}", format_duration(timeout))),
                    Some(Failure::Timeout),
                ),
            };
            // A failure is reported as it happens, before the POST chain
            // sees it, as the reference reports it.
            if let (Some(failure), Some(input), Some(tool_name)) = (failed, &ran_with, &tool_name) {
                let input = input.clone();
                self.report_tool_failure(failure, tool_name, input, &output.rendered, started);
            }
            let ran = Ran {
                ran_for,
                failed,
                before_post: None,
                input: ran_with,
            };
            (output, ran)
        }
    }

    /// Runs a prepared tool call: an async tool awaited here, a
    /// synchronous one in place or on the runtime's blocking pool (with
    /// the kickoff's redaction scope and depth on its thread), as its
    /// placement says (see [`crate::placement`]). Panics are contained and
    /// silent (their message, cleaned by the redaction in scope, reaches
    /// the POST chain and the agent).
    async fn run_tool(
        &self,
        run: ToolRun,
        placement: &Placement,
        timeout: Duration,
        watch: Option<Arc<CallWatch>>,
    ) -> Result<ToolResult, Stopped> {
        match run {
            ToolRun::Ready(result) => Ok(result),
            ToolRun::Blocking(body) => match placement.next() {
                // Quick by its record (or by its author's word): the hop to
                // the pool would cost more than the body.
                Where::InPlace(record) => {
                    let ran =
                        placement::timed(record.as_deref(), PlacementRecord::ran_in_place, || {
                            contain_panic(AssertUnwindSafe(body))
                        });
                    ran.map_err(|panic| {
                        if let Some(record) = &record {
                            record.overran();
                        }
                        Stopped::Panicked(take_panic_message(panic))
                    })
                }
                Where::Pool(record) => self.run_on_pool(body, record, timeout, watch).await,
            },
            ToolRun::Async(running) => {
                // Dropped before the tool ends: the kickoff was cancelled.
                let _left = watch
                    .as_ref()
                    .map(|watch| Abandon(Arc::clone(watch), false));
                let ran = within(timeout, contain_panic_async(AssertUnwindSafe(running))).await;
                // Ended, or timed out (reported as the call's error).
                if let Some(watch) = &watch {
                    watch.settle();
                }
                match ran {
                    Err(_) => Err(Stopped::TimedOut),
                    Ok(Err(panic)) => Err(Stopped::Panicked(take_panic_message(panic))),
                    Ok(Ok(result)) => Ok(result),
                }
            }
        }
    }

    /// Runs a synchronous body on the runtime's blocking pool, within
    /// `timeout`, telling `record` how long it took.
    async fn run_on_pool(
        &self,
        body: Box<dyn FnOnce() -> ToolResult + Send>,
        record: Option<Arc<PlacementRecord>>,
        timeout: Duration,
        watch: Option<Arc<CallWatch>>,
    ) -> Result<ToolResult, Stopped> {
        let redaction = self.redaction().clone();
        let depth = KickoffDepth::current();
        let sequence = EventSequence::current();
        // Left behind (cancelled, or past its timeout), the body still
        // runs to its end: then its end is reported.
        let _left = watch.as_ref().map(|watch| Abandon(Arc::clone(watch), true));
        let thread = tokio::task::spawn_blocking(move || {
            let _scope = redaction.scope();
            let _depth = KickoffDepth::at(depth);
            let _sequence = EventSequence::enter(sequence);
            let ran = placement::timed(record.as_deref(), PlacementRecord::ran_on_pool, || {
                contain_panic(AssertUnwindSafe(body))
            });
            if let Some(watch) = watch {
                watch.body_ended(&ran);
            }
            ran
        });
        // A synchronous tool cannot be stopped: past its timeout it
        // finishes on its thread, and its result is dropped.
        match tokio::time::timeout(timeout, thread).await {
            Err(_) => Err(Stopped::TimedOut),
            Ok(Err(join)) => {
                let message = format!("its thread stopped before it finished ({join})");
                if let Ok(panic) = join.try_into_panic() {
                    hooks_core::runtime::drop_panic_payload(panic);
                }
                Err(Stopped::Panicked(message))
            }
            Ok(Ok(Err(panic))) => Err(Stopped::Panicked(take_panic_message(panic))),
            Ok(Ok(Ok(result))) => Ok(result),
        }
    }

    /// Logs a contained panic of a tool with its message as the agent was
    /// told it (`told`, already cleaned).
    fn warn_panic(&self, tool_name: &str, told: &str) {
        tracing::warn!(
            target: "crew_runtime::executor",
            tool = %self.redaction().text(tool_name),
            agent = %self.role(),
            "{}; the panic was contained and reported to the agent",
            failure_text(told)
        );
    }

    /// Reports a tool that failed with the error it returned (`rendered`,
    /// the observation before the POST chain): a `ToolUsageError` event,
    /// then a `ToolFailureDetected`, their texts cleaned.
    #[cold]
    fn report_tool_failure(
        &self,
        failure: Failure,
        tool_name: &str,
        input: Value,
        rendered: &str,
        started: Option<EventId>,
    ) {
        let reason = self.redaction().text(failure_text(rendered)).into_owned();
        self.report_error(tool_name, input, &reason, started);
        let (error_type, retryable) = match failure {
            Failure::Error | Failure::NotFound => ("error", false),
            Failure::Panic => ("panic", false),
            Failure::Timeout => ("timeout", true),
        };
        self.emit(Event::ToolFailureDetected(ToolFailureDetectedEvent {
            meta: EventMeta::new().with_parent(started),
            tool_name: self.redaction().owned(tool_name.to_owned()),
            reason,
            error_type,
            retryable,
            agent_role: Some(self.role().to_owned()),
            task: Some(self.task_for_events()),
            crew: self.settings().crew_label(),
        }));
    }

    /// Sends the `ToolUsageStarted` that begins a call (its arguments as
    /// the model sent them, cleaned); returns its id.
    fn announce(&self, tool_name: &str, input: &Map<String, Value>) -> EventId {
        let tool_input = self.cleaned_input(input);
        self.announce_value(tool_name, tool_input)
    }

    fn announce_value(&self, tool_name: &str, tool_input: Value) -> EventId {
        let meta = EventMeta::new().with_parent(self.execution_event());
        let id = meta.event_id;
        self.emit(Event::ToolUsageStarted(ToolUsageStartedEvent {
            meta,
            tool_name: self.redaction().text(tool_name).into_owned(),
            tool_input,
            agent_role: Some(self.role().to_owned()),
            task: Some(self.task_for_events()),
            crew: self.settings().crew_label(),
        }));
        id
    }

    /// What a call's end carries: the call's start, and the agent's
    /// execution as its parent.
    fn call_end(&self, started: Option<EventId>) -> EventMeta {
        EventMeta::new()
            .with_parent(self.execution_event())
            .with_started(started)
    }

    /// Arguments as events carry them: keys in order (a hook's added keys
    /// too), cleaned by the crew's redaction.
    fn cleaned_input(&self, input: &Map<String, Value>) -> Value {
        let mut input = input.clone();
        sort_keys(&mut input);
        self.redaction().json(Value::Object(input))
    }

    /// The observation for a tool the agent does not have (its
    /// `ToolUsageError` ends the call, before the POST chain).
    fn not_found(
        &self,
        call: &ToolCallRequest,
        ctx: &ToolCallHookContext,
        started: Option<EventId>,
    ) -> ToolOutput {
        let escaped = escape_control_characters(&call.name);
        let named = if call.name.trim().is_empty() {
            "(the call named no tool)"
        } else {
            escaped.as_ref()
        };
        let message = format!(
            "Tool not found: {named}. Available tools: {}",
            self.agent().tool_names()
        );
        if self.listening() {
            let input = self.cleaned_input(&ctx.tool_input);
            self.report_error(&call.name, input, &message, started);
        }
        ToolOutput::not_found(message)
    }

    /// The observation for arguments that are not a JSON object: no hook
    /// and no tool runs.
    fn reject_arguments(&self, call: &ToolCallRequest, problem: &str) -> String {
        let name = normalize_tool_name(&call.name);
        let message = format!(
            "Invalid arguments for tool `{name}`: {problem}. No tool ran; call it again with a \
             JSON object of arguments that matches its schema."
        );
        // The observation itself: no POST chain runs after it.
        let message = self.redaction().owned(message);
        let event_name = if self.agent().find_tool(&name).is_some() {
            name.as_str()
        } else {
            call.name.as_str()
        };
        if self.listening() {
            // Begun and ended at once: no hook ran. The model's text, as
            // it sent it, is what the call carries.
            let sent = self.redaction().json(Value::String(call.arguments.clone()));
            let started = self.announce_value(event_name, sent.clone());
            self.report_error(event_name, sent, &message, Some(started));
        }
        if self.verbose {
            self.say(&format!("✗ {}: {message}", call.name));
        }
        message
    }

    /// The observation for a call past the turn's limit: no hook and no
    /// tool runs.
    pub(crate) fn refuse_call(&self, call: &ToolCallRequest, asked: usize) -> String {
        let name = normalize_tool_name(&call.name);
        let limit = self.settings().max_tool_calls_per_turn;
        let message = format!(
            "Tool call refused: this turn asked for {asked} tool calls and at most {limit} run \
             per turn, so this call of `{name}` did not run. Ask for it again in a later turn if \
             it is still needed."
        );
        if self.listening() {
            // Begun and ended at once: no hook ran.
            let input = match parse_arguments(&call.arguments) {
                Ok(input) => input,
                Err(_) => Map::new(),
            };
            let started = self.announce(&name, &input);
            self.report_error(&name, self.cleaned_input(&input), &message, Some(started));
        }
        if self.verbose {
            self.say(&format!(
                "✗ {name}: refused, past {limit} calls in one turn"
            ));
        }
        // The observation itself (it names the model's tool): no POST
        // chain runs after it.
        self.redaction().owned(message)
    }

    /// The report with its observation cut to the crew's limit.
    fn limit_observation(&self, mut report: ToolCallReport) -> ToolCallReport {
        report.observation = self.limit_text(std::mem::take(&mut report.observation));
        report
    }

    /// `text` cut to the crew's `max_observation_bytes` (on a character
    /// boundary), with a line saying how much was cut.
    fn limit_text(&self, text: String) -> String {
        truncate_observation(text, self.settings().max_observation_bytes)
    }

    /// Sends a `ToolUsageError` event (`input` already cleaned), its texts
    /// cleaned.
    fn report_error(&self, tool_name: &str, input: Value, error: &str, started: Option<EventId>) {
        if self.listening() {
            let redaction = self.redaction();
            self.emit(Event::ToolUsageError(ToolUsageErrorEvent {
                meta: self.call_end(started),
                tool_name: redaction.text(tool_name).into_owned(),
                tool_input: input,
                error: redaction.text(error).into_owned(),
                agent_role: Some(self.role().to_owned()),
                task: Some(self.task_for_events()),
                crew: self.settings().crew_label(),
            }));
        }
    }
}

/// Where one watched tool call is: running, settled (its result reached
/// the call, or its end was already reported), or left behind.
enum CallState {
    Running,
    Settled,
    Abandoned,
}

/// What reports a tool call left behind ([`ToolUsageAbandonedEvent`]):
/// made only when someone listens when the call starts.
pub(crate) struct CallWatch {
    state: std::sync::Mutex<CallState>,
    hooks: CrewHooks,
    redaction: crate::redaction::Redaction,
    event: ToolUsageAbandonedEvent,
}

impl CallWatch {
    fn state(&self) -> std::sync::MutexGuard<'_, CallState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The call has its result, or its failure is reported already.
    fn settle(&self) {
        *self.state() = CallState::Settled;
    }

    /// The call was left behind while the tool ran: an async tool stops
    /// here; a synchronous one, `on_pool`, reports when its body ends (see
    /// `body_ended`).
    fn abandon(&self, on_pool: bool) {
        let mut state = self.state();
        if let CallState::Running = *state {
            *state = CallState::Abandoned;
            drop(state);
            if !on_pool {
                self.report(false, None);
            }
        }
    }

    /// A synchronous body ended on the pool with `ran`.
    fn body_ended(&self, ran: &std::thread::Result<ToolResult>) {
        let mut state = self.state();
        match *state {
            CallState::Abandoned => {
                drop(state);
                let result = match ran {
                    Ok(Ok(output)) => output.rendered.clone(),
                    Ok(Err(failure)) => format!("{TOOL_ERROR_PREFIX}{failure}"),
                    Err(_) => format!("{TOOL_ERROR_PREFIX}the tool panicked"),
                };
                self.report(true, Some(self.redaction.owned(result)));
            }
            _ => *state = CallState::Settled,
        }
    }

    fn report(&self, completed: bool, result: Option<String>) {
        let mut event = self.event.clone();
        event.meta = EventMeta::new()
            .with_parent(event.meta.parent_event_id)
            .with_started(event.meta.started_event_id);
        event.completed = completed;
        event.result = result;
        self.hooks.emit(&Event::ToolUsageAbandoned(event));
    }
}

/// Marks a watched call left behind when dropped before it settled; the
/// flag says whether its body runs on the blocking pool.
struct Abandon(Arc<CallWatch>, bool);

impl Drop for Abandon {
    fn drop(&mut self) {
        self.0.abandon(self.1);
    }
}

/// `text` cut to at most `limit` bytes on a character boundary, followed
/// by a line saying how much was cut; unchanged when it fits.
fn truncate_observation(mut text: String, limit: usize) -> String {
    if text.len() <= limit {
        return text;
    }
    let total = text.len();
    let mut cut = limit;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text.truncate(cut);
    let _ = write!(
        text,
        "\n[observation truncated: {} of {total} bytes cut, past the limit of {limit} bytes]",
        total - cut
    );
    text
}

/// The calls with ids unique within the turn: an empty id, or one an
/// earlier call of the turn already has, is replaced by a generated one
/// (`call_<n>`, suffixed until it is no id the model gave in the turn), so
/// each observation answers exactly one call. A turn whose ids are fine
/// (the usual case) costs no allocation.
pub(crate) fn unique_call_ids(mut calls: Vec<ToolCallRequest>) -> Vec<ToolCallRequest> {
    let replace = ids_to_replace(&calls);
    if replace.is_empty() {
        return calls;
    }
    let mut taken: HashSet<String> = calls.iter().map(|call| call.id.clone()).collect();
    for position in replace {
        let base = format!("call_{}", position + 1);
        let mut id = base.clone();
        let mut suffix = 1;
        while taken.contains(&id) {
            suffix += 1;
            id = format!("{base}_{suffix}");
        }
        taken.insert(id.clone());
        calls[position].id = id;
    }
    calls
}

/// The positions of the calls whose id is blank or repeats an earlier
/// call's.
fn ids_to_replace(calls: &[ToolCallRequest]) -> Vec<usize> {
    let blank = |call: &ToolCallRequest| call.id.trim().is_empty();
    // Few calls: comparing each with the earlier ones allocates nothing.
    if calls.len() <= 32 {
        return (0..calls.len())
            .filter(|&n| blank(&calls[n]) || calls[..n].iter().any(|c| c.id == calls[n].id))
            .collect();
    }
    let mut seen = HashSet::with_capacity(calls.len());
    (0..calls.len())
        .filter(|&n| blank(&calls[n]) || !seen.insert(calls[n].id.as_str()))
        .collect()
}

/// Whether `c` would drive or garble a terminal when echoed: a control
/// character, or an invisible mark that reorders the text around it
/// (bidirectional overrides, isolates and marks).
fn is_hostile_character(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{200e}' | '\u{200f}' | '\u{061c}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

/// `text` with the characters of [`is_hostile_character`] escaped as
/// `\n`, `\u{1b}`, `\u{202e}`, …, so a name the model chose can neither
/// drive a terminal nor hide text when it is echoed.
fn escape_control_characters(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_hostile_character) {
        return Cow::Borrowed(text);
    }
    let mut escaped = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if is_hostile_character(c) {
            escaped.extend(c.escape_default());
        } else {
            escaped.push(c);
        }
    }
    Cow::Owned(escaped)
}

/// The model's argument text as a JSON object, or what is wrong with it.
/// Empty text means no arguments.
fn parse_arguments(text: &str) -> Result<Map<String, Value>, String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str::<Value>(trimmed) {
        Ok(Value::Object(mut input)) => {
            sort_keys(&mut input);
            Ok(input)
        }
        Ok(other) => Err(format!(
            "expected a JSON object, got {}: {}",
            json_kind(&other),
            excerpt(trimmed, 200)
        )),
        Err(error) => Err(format!(
            "they are not valid JSON ({error}): {}",
            excerpt(trimmed, 200)
        )),
    }
}

/// Sorts the keys of a JSON object at every level, so that what the
/// runtime renders of it is the same whether or not serde_json keeps
/// insertion order (its `preserve_order` feature, which any crate of the
/// program may turn on). Without that feature maps are always sorted and
/// this does nothing.
pub(crate) fn sort_keys(map: &mut Map<String, Value>) {
    map.values_mut().for_each(Value::sort_all_objects);
    map.sort_keys();
}

/// What a tool's run tells beside its output: how long it ran (measured
/// only when someone listens or the console is verbose), how it failed,
/// and, for the verbose console, the observation before the POST chain.
#[derive(Debug, Default)]
struct Ran {
    ran_for: Duration,
    failed: Option<Failure>,
    before_post: Option<String>,
    /// The arguments the tool got, cleaned (only when someone listens).
    input: Option<Value>,
}

/// How a tool call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    /// The tool returned an error (or its arguments did not fit).
    Error,
    /// The tool panicked.
    Panic,
    /// The tool ran past its timeout.
    Timeout,
    /// The agent has no tool of that name.
    NotFound,
}

/// The error of a failed call as the agent was told it, without the
/// `Error executing tool: ` its observation starts with.
fn failure_text(observation: &str) -> &str {
    observation
        .strip_prefix(TOOL_ERROR_PREFIX)
        .unwrap_or(observation)
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Why a tool call produced no result of its own.
enum Stopped {
    /// The tool panicked (the message).
    Panicked(String),
    /// The tool did not finish within its timeout.
    TimedOut,
}

/// A duration as people write it: `30s`, `1.5s`, `250ms`, `2m`.
fn format_duration(duration: Duration) -> String {
    let millis = duration.as_millis();
    if millis < 1000 {
        format!("{millis}ms")
    } else if millis.is_multiple_of(60_000) {
        format!("{}m", millis / 60_000)
    } else if millis.is_multiple_of(1000) {
        format!("{}s", millis / 1000)
    } else {
        format!("{}s", duration.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_arguments_parse() {
        let input = parse_arguments(r#" {"query": "rust"} "#);
        assert_eq!(input.map(|m| m["query"].clone()), Ok(Value::from("rust")));
    }

    #[test]
    fn empty_arguments_are_no_arguments() {
        assert_eq!(parse_arguments("  "), Ok(Map::new()));
    }

    #[test]
    fn non_objects_are_refused_with_their_kind() {
        assert_eq!(
            parse_arguments("[1, 2]"),
            Err("expected a JSON object, got an array: [1, 2]".to_owned())
        );
        assert_eq!(
            parse_arguments(r#""rust""#),
            Err(r#"expected a JSON object, got a string: "rust""#.to_owned())
        );
    }

    #[test]
    fn truncation_keeps_whole_characters_and_says_how_much_was_cut() {
        assert_eq!(truncate_observation("abc".to_owned(), 3), "abc");
        assert_eq!(
            truncate_observation("aéb".to_owned(), 2),
            "a\n[observation truncated: 3 of 4 bytes cut, past the limit of 2 bytes]"
        );
        assert!(truncate_observation("é".to_owned(), 0).starts_with("\n[observation truncated"));
    }

    #[test]
    fn ids_are_made_unique_in_long_turns_too() {
        let calls: Vec<ToolCallRequest> = (0..40)
            .map(|n| ToolCallRequest {
                // Every fourth call repeats the id of the call before it.
                id: format!("id{}", n - usize::from(n % 4 == 3)),
                name: "t".into(),
                arguments: String::new(),
            })
            .collect();
        let ids: Vec<String> = unique_call_ids(calls).into_iter().map(|c| c.id).collect();
        let distinct: HashSet<&String> = ids.iter().collect();
        assert_eq!(distinct.len(), 40);
        assert_eq!(ids[2], "id2");
        assert_eq!(ids[3], "call_4");
    }

    #[test]
    fn only_hostile_characters_are_escaped() {
        assert!(matches!(
            escape_control_characters("web_search ü"),
            Cow::Borrowed("web_search ü")
        ));
        assert_eq!(
            escape_control_characters("a\tb\u{1b}c\u{2066}"),
            "a\\tb\\u{1b}c\\u{2066}"
        );
    }

    #[test]
    fn invalid_json_is_refused() {
        let problem = parse_arguments("{not json").err().unwrap_or_default();
        assert!(
            problem.starts_with("they are not valid JSON ("),
            "{problem}"
        );
        assert!(problem.ends_with("): {not json"), "{problem}");
    }
}
