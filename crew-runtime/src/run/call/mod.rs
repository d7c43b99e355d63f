//! One tool call, the only way any tool runs, as a stack of layers, each
//! in its file and each reporting at its own boundary:
//!
//! 1. [`wire`]: the call as the model sent it, its arguments read once
//!    (an object, or the unparsable text);
//! 2. the hooks (this file): the call's context, then the PRE chain, the
//!    tool and the POST chain through hooks-core's one implementation of a
//!    tool call (`run_tool_call_async_keeping`);
//! 3. [`execute`]: the tool itself (placement, timeout, panic), a failure
//!    kept as the call's status ([`watch`]: a call left behind);
//! 4. [`observe`]: the observation, cleaned once, then cut;
//! 5. [`report`]: the events each layer sends.
//!
//! A durable journal (a record of each step before it acts) belongs
//! between the hooks and execute, as one more layer.
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

use std::sync::Arc;

use futures_util::future::Either;
use hooks_core::runtime::{TOOL_CALL_POINTS, ToolOutput};
use hooks_core::{ToolCallHookContext, ToolInfo, normalize_tool_name};
use serde_json::{Map, Value};
use tracing::Instrument;

use crate::error::CrewError;
use crate::llm::ToolCallRequest;
use crate::run::InCrew;
use crate::run::context::RunContext;
use crate::run::journal::{FlushBeforeAsking, JournalAt, Place, RecordedCall};
use crate::tool::Tool;

mod execute;
mod observe;
mod replay;
mod report;
mod watch;
mod wire;

use execute::{Ran, execute};
use report::{Failure, Report, event_input, warn_panic};
pub(crate) use wire::unique_call_ids;
use wire::{Arguments, escape_control_characters};

/// Runs one tool call the model asked for in turn `turn` and returns the
/// observation the model gets, or the abort of a POST hook.
pub(crate) async fn run(
    cx: &RunContext,
    turn: usize,
    call: &ToolCallRequest,
) -> Result<String, CrewError> {
    let span = tracing::info_span!(
        "execute_tool",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = %cx.redaction().text(&call.name),
        gen_ai.tool.call.id = %cx.redaction().text(&call.id),
        gen_ai.agent.name = %cx.role(),
    );
    stack(cx, turn, call).instrument(span).await
}

/// The layers, top to bottom.
async fn stack(cx: &RunContext, turn: usize, call: &ToolCallRequest) -> Result<String, CrewError> {
    let mut gated = None;
    if let Some(at) = &cx.journal {
        // A call a resumed kickoff made before: its recorded observation,
        // no hook and no tool run again; or, begun and never finished, a
        // call in doubt; or one that asked a person, whose chain starts
        // again where it asked.
        at.go_on()?;
        match at.journal.recorded_call(at.place(turn, &call.id)) {
            RecordedCall::Finished(observation) => return Ok(observation),
            RecordedCall::InDoubt(intent) => {
                return replay::in_doubt(cx, at, turn, call, intent).await;
            }
            RecordedCall::Gated { gate, question } => gated = Some((gate, question)),
            RecordedCall::Unrecorded => {}
        }
    }
    let input = match Arguments::read(&call.arguments) {
        Arguments::Object(input) => input,
        Arguments::Unparsable(problem) => return Ok(reject_arguments(cx, call, &problem)),
    };
    // The call's start, which its end and a kickoff started by its tool
    // name.
    let report = Report::begin(cx, &call.name, &input);
    // Asked again where it asked before, the same question (by its id).
    let resumed = gated
        .as_ref()
        .and_then(|(gate, question)| Some((gate.clone(), question.clone()?)));
    let mut ctx = context(cx, turn, call, input, resumed);
    if let Some((gate, _)) = gated {
        // The hooks before the one that asked ran in an earlier process:
        // not again (a counter, a rate limit would count the call twice).
        ctx.resume_chain_at(gate);
    }
    let tool = cx.agent().find_tool(ctx.tool_name());
    if let Some(tool) = tool {
        ctx.tool = Some(Arc::clone(tool) as Arc<dyn ToolInfo>);
    }
    let (result, ran) = cx
        .dispatcher()
        .begin_call(&TOOL_CALL_POINTS)
        .run_tool_call_async_keeping(&mut ctx, |ctx| match tool {
            Some(tool) => match &cx.journal {
                None => Either::Left(Either::Left(execute(cx, report, tool, ctx))),
                // Boxed: the journal's layer does not grow every call's
                // future (moved on each poll) for the kickoffs without one.
                Some(at) => {
                    let place = at.place(turn, &call.id);
                    Either::Left(Either::Right(Box::pin(journaled(
                        cx, at, place, report, tool, ctx,
                    ))))
                }
            },
            None => {
                let output = not_found_output(cx, report, call, ctx);
                let not_found = Ran {
                    failed: Some(Failure::NotFound),
                    ..Ran::default()
                };
                Either::Right(std::future::ready((output, not_found)))
            }
        })
        .await;
    let Ran {
        ran_for,
        failed,
        input: ran_with,
        stopped,
    } = ran.unwrap_or_default();
    // The journal could not take the call's intent: the tool did not run,
    // and the kickoff stops here.
    if let Some(error) = stopped {
        return Err(*error);
    }

    match result.map(|report| observe::observation(cx, report)) {
        Ok(outcome) => {
            let observation = outcome.observation;
            if failed == Some(Failure::Panic) {
                warn_panic(cx, ctx.tool_name(), &observation);
            }
            // A failed call ended with its `ToolUsageError`.
            if cx.listening() && failed.is_none() {
                let input = ran_with.unwrap_or_else(|| event_input(&ctx.tool_input));
                let blocked = outcome.blocked.is_some();
                report.finished(
                    ctx.tool_name(),
                    input,
                    observation.clone(),
                    blocked,
                    ran_for,
                );
            }
            if let Some(at) = &cx.journal {
                at.journal
                    .record_result(at.place(turn, &call.id), &observation)
                    .await?;
            }
            // A block that ends the kickoff (a budget's, when it says so).
            if let Some(error) = outcome
                .blocked
                .as_ref()
                .and_then(|blocked| cx.settings().tool_call_refused(&ctx, blocked))
            {
                return Err(error);
            }
            Ok(observation)
        }
        Err(abort) => {
            if failed == Some(Failure::Panic) {
                let told = ctx.tool_result.as_deref().unwrap_or_default();
                warn_panic(cx, ctx.tool_name(), &cx.redaction().text(told));
            }
            // The call's end, unless its failure already ended it.
            if failed.is_none() && cx.listening() {
                let input = ran_with.unwrap_or_else(|| event_input(&ctx.tool_input));
                let error = format!(
                    "the run was aborted after the call by {}: {}",
                    abort.source, abort.reason
                );
                report.error(ctx.tool_name(), input, &error);
            }
            Err(CrewError::Aborted {
                tool: ctx.tool_name().to_owned(),
                agent: cx.role().to_owned(),
                abort,
            })
        }
    }
}

/// The tool, in a durable kickoff: its idempotency key put where the tool
/// reads it, then its intent committed, and only then the tool run. An
/// intent the journal cannot take stops the kickoff before the tool.
fn journaled<'a>(
    cx: &'a RunContext,
    at: &'a JournalAt,
    place: Place<'a>,
    report: Report<'a>,
    tool: &'a Tool,
    ctx: &mut ToolCallHookContext,
) -> impl std::future::Future<Output = (ToolOutput, Ran)> + Send + use<'a> {
    let key = at.journal.key(place, 0);
    ctx.extensions.insert(key);
    let name = ctx.tool_name().to_owned();
    let input = ctx.tool_input.clone();
    let run = execute(cx, report, tool, ctx);
    async move {
        match at.journal.record_intent(place, &name, &input, 0).await {
            Ok(()) => run.await,
            Err(error) => {
                let output = ToolOutput::error(format!(
                    "the kickoff's journal could not record the call, so the tool did not run: {error}"
                ));
                let ran = Ran {
                    failed: Some(Failure::Error),
                    stopped: Some(Box::new(error)),
                    ..Ran::default()
                };
                (output, ran)
            }
        }
    }
}

/// The context the call's hooks see: the call, its agent, task and crew,
/// the person to ask, and what the crew's integrations add.
fn context(
    cx: &RunContext,
    turn: usize,
    call: &ToolCallRequest,
    input: Map<String, Value>,
    resumed: Option<(hooks_core::ChainGate, String)>,
) -> ToolCallHookContext {
    let settings = cx.settings();
    let mut ctx = ToolCallHookContext::new(&call.name, input)
        .with_call_id(call.id.as_str())
        .with_iteration(turn)
        .with_agent(Arc::clone(&cx.agent_info))
        .with_task(Arc::clone(&cx.task_info))
        .in_crew(&cx.crew_info)
        .with_human_input(match &cx.journal {
            // A durable kickoff commits what it deferred before it asks.
            Some(at) => Arc::new(FlushBeforeAsking {
                inner: Arc::clone(&settings.human_input),
                journal: Arc::clone(&at.journal),
                within: settings.human_input_timeout,
                call: (at.task, turn, call.id.clone()),
                question: Arc::default(),
                resumed,
            }),
            None => Arc::clone(&settings.human_input),
        })
        .with_human_input_timeout(match &cx.journal {
            Some(at) => at.journal.human_input_timeout(settings.human_input_timeout),
            None => settings.human_input_timeout,
        })
        .with_block_reasons_shown(settings.tell_model_why_blocked);
    // A durable kickoff's call has its key from the start: its PRE hooks
    // see it (a budget counts a call whose chain runs again once).
    if let Some(at) = &cx.journal {
        ctx.extensions
            .insert(at.journal.key(at.place(turn, &call.id), 0));
    }
    for extension in &settings.extensions {
        extension.enter_tool_call(&mut ctx);
    }
    ctx
}

/// The observation for a tool the agent does not have (its
/// `ToolUsageError` ends the call, before the POST chain).
fn not_found_output(
    cx: &RunContext,
    report: Report<'_>,
    call: &ToolCallRequest,
    ctx: &ToolCallHookContext,
) -> ToolOutput {
    let escaped = escape_control_characters(&call.name);
    let named = if call.name.trim().is_empty() {
        "(the call named no tool)"
    } else {
        escaped.as_ref()
    };
    let message = format!(
        "Tool not found: {named}. Available tools: {}",
        cx.agent().tool_names()
    );
    if cx.listening() {
        report.error(&call.name, event_input(&ctx.tool_input), &message);
    }
    ToolOutput::not_found(message)
}

/// The observation for arguments that are not a JSON object: no hook and
/// no tool runs.
fn reject_arguments(cx: &RunContext, call: &ToolCallRequest, problem: &str) -> String {
    let name = normalize_tool_name(&call.name);
    let message = format!(
        "Invalid arguments for tool `{name}`: {problem}. No tool ran; call it again with a \
         JSON object of arguments that matches its schema."
    );
    // The observation itself: no POST chain runs after it.
    let message = cx.redaction().owned(message);
    let event_name = if cx.agent().find_tool(&name).is_some() {
        name.as_str()
    } else {
        call.name.as_str()
    };
    if cx.listening() {
        // Begun and ended at once: no hook ran. The model's text, as it
        // sent it, is what the call carries.
        let sent = Value::String(call.arguments.clone());
        Report::refused(cx, event_name, sent, &message);
    }
    message
}

/// The observation for a call past the turn's limit (`asked` calls in the
/// turn): no hook and no tool runs.
pub(crate) fn refuse(cx: &RunContext, call: &ToolCallRequest, asked: usize) -> String {
    let name = normalize_tool_name(&call.name);
    let limit = cx.settings().max_tool_calls_per_turn;
    let message = format!(
        "Tool call refused: this turn asked for {asked} tool calls and at most {limit} run per \
         turn, so this call of `{name}` did not run. Ask for it again in a later turn if it is \
         still needed."
    );
    if cx.listening() {
        // Begun and ended at once: no hook ran.
        let input = match Arguments::read(&call.arguments) {
            Arguments::Object(input) => input,
            Arguments::Unparsable(_) => Map::new(),
        };
        Report::refused(cx, &name, Value::Object(input), &message);
    }
    // The observation itself (it names the model's tool): no POST chain
    // runs after it.
    cx.redaction().owned(message)
}
