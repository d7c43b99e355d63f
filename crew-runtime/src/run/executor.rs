//! The executor: runs a crew's tasks, each as a loop of model turns, and
//! every tool call the model asks for through one path (see
//! [`call`](super::call)).
//!
//! A task's loop: the model is told who the agent is and what the task is
//! (with the outputs of its context tasks); each turn it either answers, or
//! asks for tool calls. The calls of one turn run concurrently as tasks of
//! the runtime (up to the crew's `max_concurrent_tool_calls`; a single call
//! runs in the kickoff's own task), and their observations go back to the
//! model in call order. An agent that reaches its `max_iter` turns without
//! answering stops with a note as its output, and the crew goes on.
//! A model call that fails is asked again on the conversation as it stood,
//! up to the agent's `max_retry_limit` times per task; each retry is a new
//! `AgentExecutionStarted` (each answered by an `AgentExecutionCompleted`
//! when the agent finishes), and the last failure sends
//! `AgentExecutionError` before the task fails. Refusals by hooks and
//! cancellations are never retried.
//!
//! Everything is awaited: models, async tools, `async` hooks. Synchronous
//! tools run on the runtime's blocking pool. Dropping a kickoff's future
//! cancels what it awaits (the model's answer, async tools, the tasks of
//! a turn's calls).
//!
//! `tracing` spans follow the work: `crew.kickoff` → `invoke_agent` (one
//! task) → `chat` (a model call) / `execute_tool` (a tool call), with the
//! GenAI semantic-convention field names (`gen_ai.operation.name`,
//! `gen_ai.agent.name`, `gen_ai.request.model`, `gen_ai.tool.name`,
//! `gen_ai.tool.call.id`); the hook dispatches are events inside them.
//!
//! With a crew's redaction set, what the executor lets out passes through
//! it (see [`redaction`](crate::redaction)): each message as it enters the
//! conversation, the console, the kickoff's output and error.

use std::panic::AssertUnwindSafe;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use hooks_core::events::{
    CrewKickoffCompletedEvent, CrewKickoffFailedEvent, CrewKickoffStartedEvent, EventId, EventMeta,
    EventSequence, TaskCompletedEvent, TaskFailedEvent, TaskStartedEvent,
};
use hooks_core::runtime::{Dispatcher, RedactionScope, contain_panic, take_panic_message};
use hooks_core::{
    CrewInfo, CrewOutput, DispatchOutcome, EXECUTION_END, EXECUTION_START, Event,
    ExecutionEndContext, ExecutionStartContext, HookAborted, INPUT, InputContext, Inputs,
    InterceptionPoint, OUTPUT, OutputContext, TaskOutput, TokenUsage,
};

use super::agent_run::AgentRun;
use super::context::RunContext;
use super::journal::{JournalAt, KickoffJournal};
use super::{InCrew, KickoffDepth, Plan, RunScope, dispatch, go_on};
use crate::error::CrewError;
use crate::prompt;
use crate::redaction::Redaction;
use crate::task::Task;
use tracing::Instrument;

/// Runs a kickoff of `plan` through every point, with the crew's kickoff
/// callbacks where the reference runs them: the `before_kickoff`
/// callbacks, `EXECUTION_START`, `INPUT`, each task (`PRE_STEP`, its model
/// and tool calls, `POST_STEP`), `OUTPUT`, the `after_kickoff` callbacks,
/// and `EXECUTION_END` once the rest has completed or failed. `crew` is
/// what hooks see as the kickoff's crew (none for a standalone agent's
/// run). Its output or error leaves through the crew's redaction, and so
/// does what `hooks-core` reports while the kickoff is polled, on
/// whichever thread.
///
/// Its events take sequence numbers of their own, from 1; `parent` is the
/// tool call (its `ToolUsageStarted`) the kickoff was started in, if any.
///
/// With a durable kickoff's `journal`, every step is committed before the
/// run goes on, and what the journal already holds is replayed, not run
/// again (see [`journal`](super::journal)): a resumed kickoff passes
/// `EXECUTION_START` and `INPUT` no second time. Dropping it gives its
/// lease up and runs no `EXECUTION_END` (only its end does).
pub(crate) async fn kickoff(
    plan: &Arc<Plan>,
    crew: Option<Arc<dyn CrewInfo>>,
    inputs: Inputs,
    parent: Option<EventId>,
    journal: Option<Arc<dyn KickoffJournal>>,
) -> Result<CrewOutput, CrewError> {
    let redaction = &plan.settings.redaction;
    let span = tracing::info_span!(
        "crew.kickoff",
        crew.name = %plan.settings.name,
        gen_ai.operation.name = "invoke_workflow",
    );
    // A resumed kickoff's events go on numbering where it stopped.
    let sequence = match &journal {
        Some(journal) => EventSequence::starting_after(journal.events_before()),
        None => EventSequence::new(),
    };
    let work = kickoff_unredacted(plan, crew, inputs, parent, journal).instrument(span);
    let work = RedactionScope::instrument(redaction.redactor(), work);
    // The output was cleaned where the kickoff reported it.
    EventSequence::instrument(Arc::new(sequence), work)
        .await
        .map_err(|error| error.redacted(redaction))
}

/// The kickoff, its output cleaned once (the text `CrewKickoffCompleted`
/// carries is the very text returned), its error not yet.
async fn kickoff_unredacted(
    plan: &Arc<Plan>,
    crew_info: Option<Arc<dyn CrewInfo>>,
    inputs: Inputs,
    parent: Option<EventId>,
    journal: Option<Arc<dyn KickoffJournal>>,
) -> Result<CrewOutput, CrewError> {
    let journal = journal.as_ref();
    let recorded = journal.and_then(|journal| journal.recorded_inputs());
    // The kickoff's start, which its tasks' events name: handed out now,
    // or, for a resumed kickoff, as it was.
    let kickoff = KickoffEvents {
        started: recorded
            .as_ref()
            .map_or_else(EventId::new, |(_, started)| *started),
        parent,
    };
    let dispatcher = plan.hooks.dispatcher();
    let mut cancelled = EndIfCancelled {
        plan: Arc::clone(plan),
        crew_info: crew_info.clone(),
        armed: false,
        started: false,
        kickoff,
        sequence: EventSequence::current(),
    };
    let begun = match recorded {
        // A resumed kickoff passed its start in an earlier process.
        Some((inputs, _)) => {
            cancelled.started = true;
            if let Some(event) = journal.and_then(|journal| journal.resumed_event())
                && plan.hooks.listening()
            {
                plan.hooks.emit(event);
            }
            Ok(inputs)
        }
        None => {
            // As the reference: before anything of the kickoff runs or is
            // reported.
            let inputs = before_kickoff(plan, inputs)?;
            let mut start = ExecutionStartContext::new(inputs).in_crew(&crew_info);
            // EXECUTION_END fires only for kickoffs that passed
            // EXECUTION_START.
            let outcome = dispatch(&dispatcher, EXECUTION_START, &mut start).await;
            go_on(outcome, InterceptionPoint::EXECUTION_START, None)?;
            // From here on, EXECUTION_END fires once: at the end, or, if
            // the kickoff is dropped first, while it is dropped (unless it
            // is durable: then it is resumed, and ends later).
            cancelled.armed = journal.is_none();
            match input(plan, start.inputs, &crew_info, kickoff).await {
                Ok(inputs) => {
                    // The kickoff has begun: its end is reported, whatever
                    // it is.
                    cancelled.started = true;
                    match journal {
                        Some(journal) => journal
                            .record_inputs(&inputs, kickoff.started)
                            .await
                            .map(|()| inputs),
                        None => Ok(inputs),
                    }
                }
                Err(error) => Err(error),
            }
        }
    };
    let result = match begun {
        Ok(inputs) => match tasks(plan, inputs, &crew_info, kickoff, journal).await {
            // `EXECUTION_END` sees what the callbacks left.
            Ok(output) => after_kickoff(plan, output),
            Err(error) => Err(error),
        },
        Err(error) => Err(error),
    };
    cancelled.armed = false;
    // A durable kickoff that must stop (its lease lost, its journal not
    // written) has not ended: whoever holds it now goes on with it.
    if let (Err(error), Some(stop)) = (&result, journal.and_then(|journal| journal.stopped())) {
        tracing::warn!(target: "crew_runtime::executor", %stop, "a durable kickoff stopped before its next step");
        return Err(error.clone());
    }
    let started = cancelled.started;
    let (user, kickoff_id) = who_and_which(&crew_info);
    let redaction = &plan.settings.redaction;
    let result = finish(&dispatcher, result, crew_info, redaction)
        .await
        .map(|output| redaction.output(output));
    let result = match journal {
        Some(journal) => match journal.finish(&result).await {
            Ok(()) => result,
            // Its end could not be committed: it stays for a resumer.
            Err(error) => Err(error),
        },
        None => result,
    };
    // A standalone agent's run is no crew kickoff: its task, agent and
    // model events say what it did.
    if started && plan.hooks.listening() && !plan.settings.standalone {
        let crew_name = plan.settings.name.clone();
        plan.hooks.emit(match &result {
            Ok(output) => Event::CrewKickoffCompleted(CrewKickoffCompletedEvent {
                meta: kickoff.end(),
                crew_name,
                output: output.raw.clone(),
                token_usage: output.token_usage,
                user,
                kickoff_id,
            }),
            Err(error) => Event::CrewKickoffFailed(CrewKickoffFailedEvent {
                meta: kickoff.end(),
                crew_name,
                error: error.to_string(),
                user,
                kickoff_id,
            }),
        });
    }
    result
}

/// The inputs as the crew's `before_kickoff` callbacks leave them, each
/// given what the one before returned.
fn before_kickoff(plan: &Plan, mut inputs: Inputs) -> Result<Inputs, CrewError> {
    for (index, callback) in plan.callbacks.before.iter().enumerate() {
        inputs = contain_panic(AssertUnwindSafe(|| callback(inputs)))
            .map_err(|panic| callback_panicked("before_kickoff", index, panic))?;
    }
    Ok(inputs)
}

/// The output as the crew's `after_kickoff` callbacks leave it, each
/// given what the one before returned.
fn after_kickoff(plan: &Plan, mut output: CrewOutput) -> Result<CrewOutput, CrewError> {
    for (index, callback) in plan.callbacks.after.iter().enumerate() {
        output = contain_panic(AssertUnwindSafe(|| callback(output)))
            .map_err(|panic| callback_panicked("after_kickoff", index, panic))?;
    }
    Ok(output)
}

/// A contained panic of the callback at `index` of the `which` list.
#[cold]
fn callback_panicked(
    which: &'static str,
    index: usize,
    panic: Box<dyn std::any::Any + Send>,
) -> CrewError {
    CrewError::CallbackPanicked {
        which,
        position: index + 1,
        message: take_panic_message(panic),
    }
}

/// A kickoff that passed `EXECUTION_START` and has not reached its
/// `EXECUTION_END` yet: dropped now (its future cancelled), it runs the
/// synchronous `EXECUTION_END` hooks with `Cancelled` during the drop, and
/// spawns the `async` ones on the runtime when there is one (they are
/// skipped when there is none); a kickoff that had begun reports
/// `CrewKickoffFailed`.
struct EndIfCancelled {
    plan: Arc<Plan>,
    crew_info: Option<Arc<dyn CrewInfo>>,
    armed: bool,
    started: bool,
    kickoff: KickoffEvents,
    /// The kickoff's sequence, which the drop does not have in scope.
    sequence: Option<Arc<EventSequence>>,
}

/// The ids a kickoff's own events carry: its start's, and the tool call it
/// runs in.
#[derive(Debug, Clone, Copy)]
struct KickoffEvents {
    started: EventId,
    parent: Option<EventId>,
}

impl KickoffEvents {
    /// What `CrewKickoffStarted` carries.
    fn start(self) -> EventMeta {
        EventMeta::new()
            .with_event_id(self.started)
            .with_parent(self.parent)
    }

    /// What the kickoff's end carries.
    fn end(self) -> EventMeta {
        EventMeta::new()
            .with_parent(self.parent)
            .with_started(Some(self.started))
    }
}

impl Drop for EndIfCancelled {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let plan = &*self.plan;
        let redaction = &plan.settings.redaction;
        // The kickoff's redaction scope and sequence are not entered during
        // a drop.
        let _scope = redaction.scope();
        let _sequence = EventSequence::enter(self.sequence.clone());
        if self.started && plan.hooks.listening() && !plan.settings.standalone {
            let (user, kickoff_id) = who_and_which(&self.crew_info);
            plan.hooks
                .emit(Event::CrewKickoffFailed(CrewKickoffFailedEvent {
                    meta: self.kickoff.end(),
                    crew_name: plan.settings.name.clone(),
                    error: "the kickoff was cancelled".to_owned(),
                    user,
                    kickoff_id,
                }));
        }
        let dispatcher = plan.hooks.dispatcher();
        if !dispatcher.has_hooks(InterceptionPoint::EXECUTION_END) {
            return;
        }
        let mut end = ExecutionEndContext::cancelled().in_crew(&self.crew_info);
        let (_, skipped) = dispatcher
            .begin_call(&[InterceptionPoint::EXECUTION_END])
            .dispatch_skipping_async(EXECUTION_END, &mut end);
        if skipped == 0 {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                let hooks = plan.hooks.clone();
                let crew_info = self.crew_info.clone();
                let redactor = redaction.redactor();
                let sequence = self.sequence.clone().unwrap_or_default();
                let end = RedactionScope::instrument(redactor, async move {
                    let mut end = ExecutionEndContext::cancelled().in_crew(&crew_info);
                    hooks
                        .dispatcher()
                        .begin_call(&[InterceptionPoint::EXECUTION_END])
                        .dispatch_async_only(EXECUTION_END, &mut end)
                        .await;
                });
                runtime.spawn(EventSequence::instrument(sequence, end));
            }
            Err(_) => tracing::warn!(
                target: "crew_runtime::executor",
                skipped,
                "a kickoff was dropped outside any tokio runtime: its async EXECUTION_END \
                 hooks cannot run and are skipped"
            ),
        }
    }
}

/// `EXECUTION_END`, exactly once: with the output, or with the error that
/// ended the run. Its hooks observe: an abort is reported (a warning, and
/// the dispatch's event) and ignored, and the run's output or original
/// error stands.
async fn finish(
    dispatcher: &Dispatcher<'_>,
    result: Result<CrewOutput, CrewError>,
    crew_info: Option<Arc<dyn CrewInfo>>,
    redaction: &Redaction,
) -> Result<CrewOutput, CrewError> {
    if !dispatcher.has_hooks(InterceptionPoint::EXECUTION_END) {
        return result;
    }
    match result {
        Ok(output) => {
            let mut end = ExecutionEndContext::completed(output).in_crew(&crew_info);
            if let DispatchOutcome::Aborted(abort) =
                dispatch(dispatcher, EXECUTION_END, &mut end).await
            {
                ignored_end_abort(redaction, abort, "completed; its output stands");
            }
            Ok(end.output.take().unwrap_or_default())
        }
        Err(error) => {
            let mut end = ExecutionEndContext::failed(&error).in_crew(&crew_info);
            if let DispatchOutcome::Aborted(abort) =
                dispatch(dispatcher, EXECUTION_END, &mut end).await
            {
                ignored_end_abort(
                    redaction,
                    abort,
                    "had already failed; the original error stands",
                );
            }
            Err(error)
        }
    }
}

/// An `EXECUTION_END` abort, which comes after the run: reported, never
/// acted on.
#[cold]
fn ignored_end_abort(redaction: &Redaction, abort: HookAborted, run: &str) {
    let abort = redaction.abort(abort);
    tracing::warn!(
        target: "crew_runtime::executor",
        "an EXECUTION_END hook aborted a run that {run} ({abort})"
    );
}

/// `INPUT`: the inputs as its hooks leave them, and the kickoff reported
/// as started.
async fn input(
    plan: &Plan,
    inputs: Inputs,
    crew_info: &Option<Arc<dyn CrewInfo>>,
    kickoff: KickoffEvents,
) -> Result<Inputs, CrewError> {
    let mut input = InputContext::new(inputs).in_crew(crew_info);
    let outcome = dispatch(&plan.hooks.dispatcher(), INPUT, &mut input).await;
    go_on(outcome, InterceptionPoint::INPUT, None)?;
    if plan.hooks.listening() && !plan.settings.standalone {
        let inputs = input.inputs.clone();
        let (user, kickoff_id) = who_and_which(crew_info);
        plan.hooks
            .emit(Event::CrewKickoffStarted(CrewKickoffStartedEvent {
                meta: kickoff.start(),
                crew_name: plan.settings.name.clone(),
                inputs,
                user,
                kickoff_id,
            }));
    }
    Ok(input.inputs)
}

/// The tasks in order, then `OUTPUT`.
async fn tasks(
    plan: &Plan,
    inputs: Inputs,
    crew_info: &Option<Arc<dyn CrewInfo>>,
    kickoff: KickoffEvents,
    journal: Option<&Arc<dyn KickoffJournal>>,
) -> Result<CrewOutput, CrewError> {
    // A standalone agent's run reports no kickoff of its own.
    let kickoff_event = (!plan.settings.standalone).then_some(kickoff.started);
    let redaction = &plan.settings.redaction;
    let tasks = fill_inputs(plan, &inputs)?;
    let usage = Arc::new(Mutex::new(TokenUsage::default()));
    let mut outputs: Vec<TaskOutput> = Vec::with_capacity(tasks.len());
    for (position, (crew_task, task)) in plan.tasks.iter().zip(tasks).enumerate() {
        // A task a resumed kickoff finished before: its output, as then.
        if let Some((output, used)) = journal.and_then(|journal| journal.recorded_task(position)) {
            *usage.lock().unwrap_or_else(PoisonError::into_inner) = used;
            outputs.push(output);
            continue;
        }
        // Built crews only hold agent indices they resolved themselves.
        let agent = &plan.agents[crew_task.agent];
        let context: Vec<&str> = crew_task
            .context
            .iter()
            .filter_map(|&earlier| outputs.get(earlier))
            .map(|output| output.raw.as_str())
            .collect();
        let run = Arc::new(AgentRun {
            cx: RunContext {
                settings: Arc::clone(&plan.settings),
                hooks: plan.hooks.clone(),
                agent: Arc::clone(agent),
                agent_info: agent.agent.clone(),
                task_info: task.clone(),
                task,
                crew_info: crew_info.clone(),
                depth: KickoffDepth::current(),
                scope: RunScope::new(kickoff_event),
                journal: journal.map(|journal| JournalAt::new(journal, position)),
            },
            conversation: plan.conversation.clone(),
            usage: Arc::clone(&usage),
            turn: std::sync::atomic::AtomicUsize::new(0),
            retries: std::sync::atomic::AtomicUsize::new(0),
        });
        let span = tracing::info_span!(
            "invoke_agent",
            gen_ai.operation.name = "invoke_agent",
            gen_ai.agent.name = %agent.agent.role(),
            crew.task.index = position + 1,
        );
        if run.listening() {
            let context = prompt::context_text(&context);
            run.emit(Event::TaskStarted(TaskStartedEvent {
                meta: EventMeta::new()
                    .with_event_id(run.scope.task)
                    .with_parent(run.scope.kickoff),
                task_name: run.task_name(),
                agent_role: run.role().to_owned(),
                crew: run.settings().crew_name(),
                context,
                task_index: position + 1,
                task_count: plan.tasks.len(),
            }));
        }
        let finished = async {
            let output = run.task(&context).instrument(span).await?;
            if let Some(path) = run.task.output_file() {
                // Written as `POST_STEP` left it, through the crew's
                // redaction (a file is an exit of the crew).
                let text = redaction.text(&output.raw).into_owned();
                write_output_file(path, text, run.task.name()).await?;
            }
            Ok::<_, CrewError>(output)
        };
        let output = match finished.await {
            Ok(output) => output,
            Err(error) => {
                if run.listening() {
                    run.emit(Event::TaskFailed(TaskFailedEvent {
                        meta: run.task_end(),
                        task_name: run.task_name(),
                        agent_role: run.role().to_owned(),
                        crew: run.settings().crew_name(),
                        error: error.to_string(),
                    }));
                }
                return Err(error);
            }
        };
        if let Some(journal) = journal {
            let used = *usage.lock().unwrap_or_else(PoisonError::into_inner);
            journal.record_task(position, &output, used).await?;
        }
        if run.listening() {
            run.emit(Event::TaskCompleted(TaskCompletedEvent {
                meta: run.task_end(),
                task_name: run.task_name(),
                agent_role: run.role().to_owned(),
                crew: run.settings().crew_name(),
                output: output.raw.clone(),
            }));
        }
        outputs.push(output);
    }
    let raw = outputs.last().map(|o| o.raw.clone()).unwrap_or_default();
    let token_usage = *usage.lock().unwrap_or_else(PoisonError::into_inner);
    let mut output = OutputContext::new(CrewOutput {
        raw,
        tasks_output: outputs,
        token_usage,
    })
    .in_crew(crew_info);
    let outcome = dispatch(&plan.hooks.dispatcher(), OUTPUT, &mut output).await;
    go_on(outcome, InterceptionPoint::OUTPUT, None)?;
    Ok(output.output)
}

/// Every task with its inputs filled in, or the first task that uses an
/// input that was not given (checked before anything runs).
fn fill_inputs(plan: &Plan, inputs: &Inputs) -> Result<Vec<Arc<Task>>, CrewError> {
    let mut filled = Vec::with_capacity(plan.tasks.len());
    for (position, crew_task) in plan.tasks.iter().enumerate() {
        let task = &crew_task.task;
        if task.opening().is_some() {
            // A standalone agent's messages are not templates.
            filled.push(Arc::new(task.clone()));
            continue;
        }
        let mut missing = Vec::new();
        let description = inputs.interpolate(task.description(), &mut missing);
        let expected_output = inputs.interpolate(task.expected_output(), &mut missing);
        let output_file = task
            .output_file()
            .map(|path| fill_path(path, inputs, task.name(), &mut missing))
            .transpose()?;
        if !missing.is_empty() {
            return Err(CrewError::MissingInputs {
                index: position + 1,
                task: task.description().to_owned(),
                missing,
                provided: inputs.names().map(str::to_owned).collect(),
            });
        }
        filled.push(Arc::new(task.with_texts(
            description,
            expected_output,
            output_file,
        )));
    }
    Ok(filled)
}

/// An output file's path with its `{placeholder}`s filled (those without
/// an input are added to `missing`), refused when an input takes it out of
/// its folder: a `..` or a root the path as written did not have.
fn fill_path(
    template: &Path,
    inputs: &Inputs,
    task: &str,
    missing: &mut Vec<String>,
) -> Result<PathBuf, CrewError> {
    // A path that is not UTF-8 holds no placeholder this can fill.
    let Some(text) = template.to_str().filter(|text| text.contains('{')) else {
        return Ok(template.to_owned());
    };
    let filled = PathBuf::from(inputs.interpolate(text, missing));
    let parents = |path: &Path| {
        path.components()
            .filter(|part| matches!(part, Component::ParentDir))
            .count()
    };
    let rooted = |path: &Path| path.has_root() || path.is_absolute();
    if parents(&filled) > parents(template) || (rooted(&filled) && !rooted(template)) {
        return Err(CrewError::OutputFile {
            task: task.to_owned(),
            path: filled,
            kind: std::io::ErrorKind::InvalidInput,
            message: "the inputs filled into the path take it out of its folder (a `..` or a \
                      root): output files stay where the task's path puts them"
                .to_owned(),
        });
    }
    Ok(filled)
}

/// Writes a finished task's output to its output file, creating the
/// missing parent folders, off the runtime's threads.
async fn write_output_file(path: &Path, text: String, task: &str) -> Result<(), CrewError> {
    let target = path.to_owned();
    let written = tokio::task::spawn_blocking(move || {
        if let Some(folder) = target.parent().filter(|f| !f.as_os_str().is_empty()) {
            std::fs::create_dir_all(folder)?;
        }
        std::fs::write(&target, text)
    })
    .await
    .unwrap_or_else(|failure| Err(std::io::Error::other(failure.to_string())));
    written.map_err(|error| CrewError::OutputFile {
        task: task.to_owned(),
        path: path.to_owned(),
        kind: error.kind(),
        message: error.to_string(),
    })
}

/// Who a kickoff runs for and its id, for its events.
fn who_and_which(crew_info: &Option<Arc<dyn CrewInfo>>) -> (Option<String>, Option<String>) {
    match crew_info.as_deref() {
        Some(crew) => (
            crew.user().map(str::to_owned),
            crew.kickoff_id().map(str::to_owned),
        ),
        None => (None, None),
    }
}
