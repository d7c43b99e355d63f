//! The executor: runs a crew's tasks, each as a loop of model turns, and
//! every tool call the model asks for through one path (see
//! [`tool_call`](super::tool_call)).
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
    AgentExecutionCompletedEvent, AgentExecutionErrorEvent, AgentExecutionStartedEvent,
    CrewKickoffCompletedEvent, CrewKickoffFailedEvent, CrewKickoffStartedEvent, EventId, EventMeta,
    EventSequence, LlmCallCompletedEvent, LlmCallFailedEvent, LlmCallStartedEvent,
    LlmStreamChunkEvent, TaskCompletedEvent, TaskFailedEvent, TaskStartedEvent,
};
use hooks_core::runtime::{
    Dispatcher, MODEL_CALL_POINTS, RedactionScope, ToolOutput, contain_panic, contain_panic_async,
    take_panic_message,
};
use hooks_core::{
    CrewInfo, CrewOutput, DispatchOutcome, EXECUTION_END, EXECUTION_START, Event,
    ExecutionEndContext, ExecutionStartContext, HookAborted, INPUT, InputContext, Inputs,
    InterceptionPoint, LlmCallHookContext, ModelResponse, OUTPUT, OutputContext, POST_MODEL_CALL,
    POST_STEP, PRE_MODEL_CALL, PRE_STEP, TaskOutput, TokenUsage,
};

use super::{AgentRun, Conversation, InCrew, KickoffDepth, Plan, RunScope, excerpt};
use crate::error::CrewError;
use crate::join::BoundedJoinSet;
use crate::llm::{ChatMessage, DeltaSink, LlmError, LlmRequest, ModelTurn, ToolCallRequest};
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
pub(crate) async fn kickoff(
    plan: &Arc<Plan>,
    crew: Option<Arc<dyn CrewInfo>>,
    inputs: Inputs,
    parent: Option<EventId>,
) -> Result<CrewOutput, CrewError> {
    let redaction = &plan.settings.redaction;
    let span = tracing::info_span!(
        "crew.kickoff",
        crew.name = %plan.settings.name,
        gen_ai.operation.name = "invoke_workflow",
    );
    let work = kickoff_unredacted(plan, crew, inputs, parent).instrument(span);
    let work = RedactionScope::instrument(redaction.redactor(), work);
    // The output was cleaned where the kickoff reported it.
    EventSequence::instrument(Arc::new(EventSequence::new()), work)
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
) -> Result<CrewOutput, CrewError> {
    // As the reference: before anything of the kickoff runs or is
    // reported.
    let inputs = before_kickoff(plan, inputs)?;
    // The kickoff's start, which its tasks' events name: handed out now.
    let kickoff = KickoffEvents {
        started: EventId::new(),
        parent,
    };
    let dispatcher = plan.hooks.dispatcher();
    let mut start = ExecutionStartContext::new(inputs).in_crew(&crew_info);
    // EXECUTION_END fires only for kickoffs that passed EXECUTION_START.
    let outcome = dispatch(&dispatcher, EXECUTION_START, &mut start).await;
    go_on(outcome, InterceptionPoint::EXECUTION_START, None)?;
    // From here on, EXECUTION_END fires once: at the end, or, if the
    // kickoff is dropped first, while it is dropped.
    let mut cancelled = EndIfCancelled {
        plan: Arc::clone(plan),
        crew_info: crew_info.clone(),
        armed: true,
        started: false,
        kickoff,
        sequence: EventSequence::current(),
    };
    let result = match input(plan, start.inputs, &crew_info, kickoff).await {
        Ok(inputs) => {
            // The kickoff has begun: its end is reported, whatever it is.
            cancelled.started = true;
            match tasks(plan, inputs, &crew_info, kickoff).await {
                // `EXECUTION_END` sees what the callbacks left.
                Ok(output) => after_kickoff(plan, output),
                Err(error) => Err(error),
            }
        }
        Err(error) => Err(error),
    };
    cancelled.armed = false;
    let started = cancelled.started;
    let (user, kickoff_id) = who_and_which(&crew_info);
    let redaction = &plan.settings.redaction;
    let result = finish(&dispatcher, result, crew_info, redaction)
        .await
        .map(|output| redaction.output(output));
    // A standalone agent's run is no crew kickoff: its task, agent and
    // model events say what it did.
    if started && plan.hooks.listening() && !plan.settings.standalone {
        let crew_name = plan.settings.name.clone();
        plan.hooks.emit(&match &result {
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
                error: redaction.owned(error.to_string()),
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
                .emit(&Event::CrewKickoffFailed(CrewKickoffFailedEvent {
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

/// One point's chain, on a snapshot of its own, `async` hooks awaited.
async fn dispatch<P: hooks_core::Point>(
    dispatcher: &Dispatcher<'_>,
    point: P,
    ctx: &mut P::Context,
) -> DispatchOutcome {
    if !dispatcher.has_hooks(P::ID) {
        return DispatchOutcome::Proceeded;
    }
    dispatcher
        .begin_call(&[P::ID])
        .dispatch_async(point, ctx)
        .await
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

/// Goes on unless a hook at `point` aborted the run; then the run ends
/// with the abort, naming the agent whose step or model call it stopped.
fn go_on(
    outcome: DispatchOutcome,
    point: InterceptionPoint,
    agent: Option<&str>,
) -> Result<(), CrewError> {
    match outcome {
        DispatchOutcome::Aborted(abort) => Err(CrewError::AbortedAt {
            point,
            agent: agent.map(str::to_owned),
            abort,
        }),
        DispatchOutcome::Proceeded | DispatchOutcome::Modified => Ok(()),
    }
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
    let redaction = &plan.settings.redaction;
    if plan.hooks.listening() && !plan.settings.standalone {
        let mut inputs = input.inputs.clone();
        if redaction.is_set() {
            inputs = inputs
                .iter()
                .map(|(name, value)| (name.to_owned(), redaction.text(value).into_owned()))
                .collect();
        }
        let (user, kickoff_id) = who_and_which(crew_info);
        plan.hooks
            .emit(&Event::CrewKickoffStarted(CrewKickoffStartedEvent {
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
) -> Result<CrewOutput, CrewError> {
    // A standalone agent's run reports no kickoff of its own.
    let kickoff_event = (!plan.settings.standalone).then_some(kickoff.started);
    let redaction = &plan.settings.redaction;
    let tasks = fill_inputs(plan, &inputs)?;
    let usage = Arc::new(Mutex::new(TokenUsage::default()));
    let mut outputs: Vec<TaskOutput> = Vec::with_capacity(tasks.len());
    for (position, (crew_task, task)) in plan.tasks.iter().zip(tasks).enumerate() {
        // Built crews only hold agent indices they resolved themselves.
        let agent = &plan.agents[crew_task.agent];
        let context: Vec<&str> = crew_task
            .context
            .iter()
            .filter_map(|&earlier| outputs.get(earlier))
            .map(|output| output.raw.as_str())
            .collect();
        let run = Arc::new(AgentRun {
            settings: Arc::clone(&plan.settings),
            hooks: plan.hooks.clone(),
            agent: Arc::clone(agent),
            agent_info: agent.agent.clone(),
            task_info: task.clone(),
            task,
            crew_info: crew_info.clone(),
            conversation: plan.conversation.clone(),
            verbose: plan.settings.verbose || agent.agent.verbose(),
            depth: KickoffDepth::current(),
            scope: RunScope::new(kickoff_event),
            usage: Arc::clone(&usage),
            turn: std::sync::atomic::AtomicUsize::new(0),
            retries: std::sync::atomic::AtomicUsize::new(0),
        });
        if run.verbose {
            crate::console::print_line(&format!(
                "[{}] task {}/{} for {}: {}",
                plan.settings.name,
                position + 1,
                plan.tasks.len(),
                agent.agent.role(),
                // Cleaned whole: a secret cut by the excerpt could slip by.
                excerpt(&run.redaction().text(run.task.description()), 200)
            ));
        }
        let span = tracing::info_span!(
            "invoke_agent",
            gen_ai.operation.name = "invoke_agent",
            gen_ai.agent.name = %agent.agent.role(),
            crew.task.index = position + 1,
        );
        if run.listening() {
            let context = redaction.owned(prompt::context_text(&context));
            run.emit(Event::TaskStarted(TaskStartedEvent {
                meta: EventMeta::new()
                    .with_event_id(run.scope.task)
                    .with_parent(run.scope.kickoff),
                task_name: run.task_name(),
                agent_role: run.role().to_owned(),
                crew: run.settings().crew_name(),
                context,
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
                        error: redaction.owned(error.to_string()),
                    }));
                }
                return Err(error);
            }
        };
        if run.listening() {
            run.emit(Event::TaskCompleted(TaskCompletedEvent {
                meta: run.task_end(),
                task_name: run.task_name(),
                agent_role: run.role().to_owned(),
                crew: run.settings().crew_name(),
                output: redaction.text(&output.raw).into_owned(),
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

impl AgentRun {
    /// What the task's end carries.
    fn task_end(&self) -> EventMeta {
        EventMeta::new()
            .with_parent(self.scope.kickoff)
            .with_started(Some(self.scope.task))
    }

    /// What an agent execution's start carries; its id becomes the parent
    /// of the execution's events.
    /// A retry's attempt opens inside the attempt that failed.
    fn begin_execution(&self) -> EventMeta {
        let mut attempts = self
            .scope
            .execution
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let parent = attempts.last().copied().unwrap_or(self.scope.task);
        let meta = EventMeta::new().with_parent(Some(parent));
        attempts.push(meta.event_id);
        meta
    }

    /// What the end of the innermost agent execution under way carries;
    /// the one around it (if any) is under way again.
    fn execution_end(&self) -> EventMeta {
        let mut attempts = self
            .scope
            .execution
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let started = attempts.pop();
        let parent = attempts.last().copied().unwrap_or(self.scope.task);
        EventMeta::new()
            .with_parent(Some(parent))
            .with_started(started)
    }

    /// One task: `PRE_STEP`, the model-turn loop, `POST_STEP`.
    async fn task(self: &Arc<Self>, context: &[&str]) -> Result<TaskOutput, CrewError> {
        let dispatcher = self.dispatcher();
        let mut pre_step = self.step_context(prompt::context_text(context));
        let outcome = dispatch(&dispatcher, PRE_STEP, &mut pre_step).await;
        go_on(outcome, InterceptionPoint::PRE_STEP, Some(self.role()))?;
        let messages = self.opening(&pre_step.payload);
        let mut started = None;
        if self.listening() {
            // The prompt as the model gets it: a crew task's message (the
            // last of its opening); a standalone agent's run was given no
            // task message, and is named by what it was asked last.
            let task_prompt = match self.task.opening() {
                None => messages
                    .last()
                    .map(|message| message.content.clone())
                    .unwrap_or_default(),
                Some(_) => self.redaction().text(self.task.description()).into_owned(),
            };
            let event = AgentExecutionStartedEvent {
                meta: self.begin_execution(),
                agent_role: self.role().to_owned(),
                task_name: self.task_name(),
                crew: self.settings().crew_name(),
                tools: self
                    .agent()
                    .definitions
                    .iter()
                    .map(|tool| tool.name.clone())
                    .collect(),
                task_prompt,
            };
            self.emit(Event::AgentExecutionStarted(event.clone()));
            started = Some(event);
        }
        let mut output = match self.work(messages, started.as_ref()).await {
            Ok(output) => output,
            Err(error) => {
                // The end of the work whose last attempt failed (a model
                // that kept failing, or a hook's refusal).
                if self.listening() {
                    self.emit(Event::AgentExecutionError(AgentExecutionErrorEvent {
                        meta: self.execution_end(),
                        agent_role: self.role().to_owned(),
                        task_name: self.task_name(),
                        crew: self.settings().crew_name(),
                        error: self.redaction().owned(error.to_string()),
                    }));
                }
                return Err(error);
            }
        };
        if self.listening() {
            let output = self.redaction().text(&output.raw).into_owned();
            // One end per start, as the reference's nested attempts each
            // end theirs, the last attempt first: a listener pairing them
            // pairs every one.
            for _ in 0..=self.retries.load(std::sync::atomic::Ordering::Relaxed) {
                self.emit(Event::AgentExecutionCompleted(
                    AgentExecutionCompletedEvent {
                        meta: self.execution_end(),
                        agent_role: self.role().to_owned(),
                        task_name: self.task_name(),
                        crew: self.settings().crew_name(),
                        output: output.clone(),
                    },
                ));
            }
        }
        let mut post_step = self.step_context(std::mem::take(&mut output.raw));
        let outcome = dispatch(&dispatcher, POST_STEP, &mut post_step).await;
        output.raw = post_step.payload;
        go_on(outcome, InterceptionPoint::POST_STEP, Some(self.role()))?;
        Ok(output)
    }
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

impl AgentRun {
    /// The conversation a task opens with, given the context text the
    /// `PRE_STEP` hooks left: the agent's system message, then the task
    /// message (a crew's task) or the caller's messages after that context
    /// (a standalone agent's run). Each message is cleaned as it enters
    /// the conversation, so the model-call hooks see it as the model will.
    fn opening(&self, context: &str) -> Vec<ChatMessage> {
        let redaction = self.redaction();
        let mut messages = vec![redaction.message(prompt::system_message(&self.agent().agent))];
        match self.task.opening() {
            Some(opening) => {
                if !context.is_empty() {
                    messages.push(redaction.message(prompt::context_message(context)));
                }
                messages.extend(opening.iter().cloned().map(|m| redaction.message(m)));
            }
            None => messages.push(redaction.message(prompt::task_message(&self.task, context))),
        }
        messages
    }

    /// The model-turn loop of one task, from its opening `messages`. Each
    /// model call runs its `PRE_MODEL_CALL` chain (what it leaves in the
    /// messages is what the model receives, and stays in the conversation)
    /// and its `POST_MODEL_CALL` chain (what it leaves of the answer is
    /// what is used), on one snapshot of the hooks. A failed model call is
    /// asked again (see [`AgentRun::ask`]); `started` is the task's
    /// `AgentExecutionStarted`, which announces each new attempt.
    async fn work(
        self: &Arc<Self>,
        mut messages: Vec<ChatMessage>,
        started: Option<&AgentExecutionStartedEvent>,
    ) -> Result<TaskOutput, CrewError> {
        let crew_agent = self.agent();
        let agent = &*crew_agent.agent;
        let dispatcher = self.dispatcher();
        let redaction = self.redaction();
        for turn in 1..=agent.max_iter() {
            self.turn.store(turn, std::sync::atomic::Ordering::Relaxed);
            let mut hooks = dispatcher.begin_call(&MODEL_CALL_POINTS);
            let mut call = LlmCallHookContext::new(std::mem::take(&mut messages))
                .with_agent(Arc::clone(&self.agent_info))
                .in_crew(&self.crew_info)
                .with_llm(Arc::clone(&crew_agent.llm_info))
                .with_tools(
                    self.settings()
                        .offered_tools(self.role(), &crew_agent.definitions),
                )
                .with_iterations(turn)
                .with_human_input(Arc::clone(&self.settings().human_input))
                .with_human_input_timeout(self.settings().human_input_timeout);
            // A standalone agent's run has no task to show its model-call
            // hooks, as in the reference (its other points still name the
            // run by what it was asked).
            if self.task.opening().is_none() {
                call.task = Some(Arc::clone(&self.task_info));
            }
            let outcome = hooks.dispatch_async(PRE_MODEL_CALL, &mut call).await;
            go_on(
                outcome,
                InterceptionPoint::PRE_MODEL_CALL,
                Some(self.role()),
            )?;
            // Model-call hooks may have edited or added messages (now, or
            // after the last answer): clean them all as they leave.
            if redaction.is_set()
                && (dispatcher.has_hooks(PRE_MODEL_CALL) || dispatcher.has_hooks(POST_MODEL_CALL))
            {
                for message in &mut call.messages {
                    redaction.message_in_place(message);
                }
            }
            // The snapshot outlives the model's answer, which may take
            // seconds: hold it without borrowing the thread's slots.
            hooks.hold();
            let answer = self.ask(&mut call, turn, started).await?;
            call.response = Some(answer.into());
            let outcome = hooks.dispatch_async(POST_MODEL_CALL, &mut call).await;
            go_on(
                outcome,
                InterceptionPoint::POST_MODEL_CALL,
                Some(self.role()),
            )?;
            drop(hooks);
            let response = call.response.take().unwrap_or_default();
            messages = call.messages;
            // Text with no calls (or whose calls the hooks dropped) is the
            // model answering.
            if response.tool_calls.is_empty() {
                if let Some(conversation) = &self.conversation {
                    let answer = ChatMessage::assistant(response.content.clone());
                    messages.push(redaction.message(answer));
                    self.keep_conversation(conversation, messages);
                }
                return Ok(self.finish(response.content, false));
            }
            let ModelResponse {
                content,
                tool_calls: calls,
            } = response;
            let calls = super::tool_call::unique_call_ids(calls);
            if self.verbose {
                self.say(&format!(
                    "turn {turn}: asks for {} tool call(s)",
                    calls.len()
                ));
            }
            let (calls, observations) = self.run_calls(calls).await?;
            let answers: Vec<ChatMessage> = calls
                .iter()
                .zip(observations)
                .map(|(call, observation)| ChatMessage::tool(call.id.clone(), observation))
                .collect();
            messages.push(redaction.message(ChatMessage::assistant_tool_calls(content, calls)));
            messages.extend(answers);
        }
        let note = format!(
            "Agent stopped: it reached its limit of {} model turns (max_iter) without giving a \
             final answer.",
            agent.max_iter()
        );
        tracing::warn!(target: "crew_runtime::executor", agent = %self.role(), "{note}");
        if let Some(conversation) = &self.conversation {
            self.keep_conversation(conversation, messages);
        }
        Ok(self.finish(note, true))
    }

    /// Asks the model for one turn on `call`'s messages and tools, and asks
    /// again on a failure, up to the agent's `max_retry_limit` times per
    /// task (counted on the run): on the conversation exactly as it stood,
    /// with no hook run again, so no tool runs twice because of a retry.
    /// Each failure sends `LlmCallFailed`, each new attempt
    /// `AgentExecutionStarted` (as the reference, which starts the agent's
    /// work over) and `LlmCallStarted`; the last failure sends
    /// `AgentExecutionError` and fails the task. Only the model's failures
    /// come here: a refusal by a hook and a cancellation never do.
    async fn ask(
        &self,
        call: &mut LlmCallHookContext,
        turn: usize,
        started: Option<&AgentExecutionStartedEvent>,
    ) -> Result<ModelTurn, CrewError> {
        let redaction = self.redaction();
        let model = self.agent().agent.llm().name();
        let limit = self.agent().agent.max_retry_limit();
        // Bounded: each pass either returns or takes one of `limit` retries.
        loop {
            let mut model_call = None;
            if self.listening() {
                // Lend the conversation to the listeners rather than copy it
                // (a copy per turn would make a long run quadratic); it is
                // copied back only if a listener kept it.
                let messages = Arc::new(std::mem::take(&mut call.messages));
                let started = EventId::new();
                model_call = Some(started);
                self.emit(Event::LlmCallStarted(LlmCallStartedEvent {
                    meta: EventMeta::new()
                        .with_event_id(started)
                        .with_parent(self.execution_event()),
                    model: model.to_owned(),
                    messages: Arc::clone(&messages),
                    agent_role: self.role().to_owned(),
                    task_name: self.task_name(),
                    crew: self.settings().crew_name(),
                }));
                call.messages = Arc::try_unwrap(messages).unwrap_or_else(|kept| (*kept).clone());
            }
            let source = match self.complete(&call.messages, &call.tools, turn).await {
                Ok((answer, usage)) => {
                    if let Some(usage) = usage {
                        *self.usage.lock().unwrap_or_else(PoisonError::into_inner) += usage;
                    }
                    if self.listening() {
                        self.report_answer(model.to_owned(), &answer, usage, model_call);
                    }
                    return Ok(answer);
                }
                Err(source) => source,
            };
            if self.listening() {
                self.emit(Event::LlmCallFailed(LlmCallFailedEvent {
                    meta: EventMeta::new()
                        .with_parent(self.execution_event())
                        .with_started(model_call),
                    model: model.to_owned(),
                    error: redaction.owned(source.to_string()),
                    agent_role: self.role().to_owned(),
                    task_name: self.task_name(),
                    crew: self.settings().crew_name(),
                }));
            }
            let retries = self.retries.load(std::sync::atomic::Ordering::Relaxed);
            if retries < limit && retryable(&source) {
                self.retries
                    .store(retries + 1, std::sync::atomic::Ordering::Relaxed);
                if self.verbose {
                    self.say(&format!(
                        "turn {turn}: the model call failed ({source}); retrying ({} of {limit})",
                        retries + 1
                    ));
                }
                if let (true, Some(started)) = (self.listening(), started) {
                    // A new attempt, inside the one that failed (as the
                    // reference's retry runs inside the failed attempt).
                    let mut attempt = started.clone();
                    attempt.meta = self.begin_execution();
                    self.emit(Event::AgentExecutionStarted(attempt));
                }
                continue;
            }
            return Err(CrewError::Model {
                agent: self.role().to_owned(),
                source,
            });
        }
    }

    /// Leaves a standalone agent's conversation where its kickoff reads it.
    fn keep_conversation(&self, conversation: &Conversation, messages: Vec<ChatMessage>) {
        *conversation.lock().unwrap_or_else(PoisonError::into_inner) = messages;
    }

    fn finish(&self, raw: String, iteration_limit_reached: bool) -> TaskOutput {
        if self.verbose {
            let answer = self.redaction().text(&raw);
            self.say(&format!("final answer: {}", excerpt(&answer, 500)));
        }
        TaskOutput {
            description: self.task.description().to_owned(),
            expected_output: self.task.expected_output().to_owned(),
            agent: self.role().to_owned(),
            raw,
            iteration_limit_reached,
        }
    }

    /// Reports a model's answer (before `POST_MODEL_CALL`), cleaned.
    #[cold]
    fn report_answer(
        &self,
        model: String,
        answer: &ModelTurn,
        usage: Option<TokenUsage>,
        started: Option<EventId>,
    ) {
        let (text, calls) = match answer {
            ModelTurn::FinalAnswer(text) => (text, &[][..]),
            ModelTurn::ToolCalls { content, calls } => (content, &calls[..]),
        };
        self.emit(Event::LlmCallCompleted(LlmCallCompletedEvent {
            meta: EventMeta::new()
                .with_parent(self.execution_event())
                .with_started(started),
            model,
            response: self.redaction().text(text).into_owned(),
            tool_calls: calls
                .iter()
                .map(|call| self.redaction().text(&call.name).into_owned())
                .collect(),
            usage,
            agent_role: self.role().to_owned(),
            task_name: self.task_name(),
            crew: self.settings().crew_name(),
        }));
    }

    /// Asks the agent's model, within the crew's model timeout, with a
    /// panic of the model contained; streamed text goes to the buses'
    /// listeners as it arrives. Returns the tokens the model reported too.
    async fn complete(
        &self,
        messages: &[ChatMessage],
        tools: &[hooks_core::ToolDefinition],
        turn: usize,
    ) -> Result<(ModelTurn, Option<TokenUsage>), LlmError> {
        let llm = self.agent().agent.llm();
        let stream = self.listening().then(|| StreamToBuses::new(self));
        let request = LlmRequest {
            messages,
            tools,
            stream: stream.as_ref().map(|sink| sink as &dyn DeltaSink),
        };
        let timeout = self.settings().model_timeout;
        let span = tracing::info_span!(
            "chat",
            gen_ai.operation.name = "chat",
            gen_ai.request.model = %llm.name(),
            gen_ai.agent.name = %self.role(),
            crew.turn = turn,
        );
        let answer = crate::join::within(
            timeout,
            contain_panic_async(AssertUnwindSafe(llm.complete_with_usage(&request))),
        )
        .instrument(span)
        .await;
        let answer = match answer {
            Err(_) => Err(LlmError::Timeout(timeout)),
            Ok(Err(panic)) => Err(LlmError::Panicked(take_panic_message(panic))),
            Ok(Ok(answer)) => answer,
        };
        if let Some(stream) = stream {
            stream.flush();
        }
        answer
    }

    /// Runs one turn's calls; returns them with their observations, in
    /// call order.
    ///
    /// A single call runs in this task. Several run as tasks of the
    /// runtime, up to `max_concurrent_tool_calls` at once, started in call
    /// order. Once a POST hook aborts, no further call starts; calls
    /// already running finish, and the abort of the earliest call (in call
    /// order) ends the run. Calls past `max_tool_calls_per_turn` are
    /// refused, each with an observation saying so; every call keeps its
    /// place.
    #[allow(clippy::type_complexity)]
    async fn run_calls(
        self: &Arc<Self>,
        mut calls: Vec<ToolCallRequest>,
    ) -> Result<(Vec<ToolCallRequest>, Vec<String>), CrewError> {
        let asked = calls.len();
        let refused = calls.split_off(asked.min(self.settings().max_tool_calls_per_turn));
        let mut observations = if calls.len() <= 1 || self.settings().max_concurrent_tool_calls <= 1
        {
            let mut observations = Vec::with_capacity(asked);
            for call in &calls {
                observations.push(self.run_call(call).await?);
            }
            observations
        } else {
            self.run_concurrently(&calls).await?
        };
        for call in refused {
            observations.push(self.refuse_call(&call, asked));
            calls.push(call);
        }
        Ok((calls, observations))
    }

    async fn run_concurrently(
        self: &Arc<Self>,
        calls: &[ToolCallRequest],
    ) -> Result<Vec<String>, CrewError> {
        let mut set = BoundedJoinSet::new(self.settings().max_concurrent_tool_calls);
        for (index, call) in calls.iter().enumerate() {
            let run = Arc::clone(self);
            let call = call.clone();
            // A task of its own: it takes the kickoff's depth, redaction
            // scope and span with it.
            let work = KickoffDepth::scope(self.depth, async move { run.run_call(&call).await });
            let work = RedactionScope::instrument(None, work).instrument(tracing::Span::current());
            let work = EventSequence::inherit(work);
            set.push(index, work);
        }
        let mut observations: Vec<Option<String>> = vec![None; calls.len()];
        let mut aborted: Option<(usize, CrewError)> = None;
        while let Some((index, outcome)) = set.join_next().await {
            match outcome {
                Ok(Ok(observation)) => {
                    if let Some(slot) = observations.get_mut(index) {
                        *slot = Some(observation);
                    }
                }
                Ok(Err(error)) => {
                    set.cancel_waiting();
                    if aborted
                        .as_ref()
                        .is_none_or(|(earliest, _)| index < *earliest)
                    {
                        aborted = Some((index, error));
                    }
                }
                Err(failure) => {
                    tracing::error!(
                        target: "crew_runtime::executor",
                        "a task running a tool call failed: {failure}"
                    );
                    if let Ok(panic) = failure.try_into_panic() {
                        hooks_core::runtime::drop_panic_payload(panic);
                    }
                }
            }
        }
        if let Some((_, error)) = aborted {
            return Err(error);
        }
        Ok(observations
            .into_iter()
            .map(|observation| {
                observation.unwrap_or_else(|| {
                    ToolOutput::error("the call was interrupted by an internal error").rendered
                })
            })
            .collect())
    }
}

/// Sends a streamed answer's text to the buses' listeners as it arrives,
/// as [`Event::LlmStreamChunk`] events.
///
/// With the crew's redaction, text goes out a line at a time: the text so
/// far is cleaned whole at each line's end, and what the cleaned text adds
/// past what was already sent goes out. A secret the redaction recognizes
/// from its first line (a key block, cleaned to its end while it is not
/// closed) never goes out; once the cleaned text stops extending what was
/// sent, nothing more goes out until the answer is complete.
struct StreamToBuses<'r> {
    run: &'r AgentRun,
    state: Mutex<Streamed>,
}

#[derive(Default)]
struct Streamed {
    /// Everything that arrived (with a redaction).
    raw: String,
    /// How much of the cleaned text has been sent.
    sent: usize,
    /// The cleaned text sent so far (with a redaction).
    cleaned: String,
}

impl<'r> StreamToBuses<'r> {
    fn new(run: &'r AgentRun) -> Self {
        StreamToBuses {
            run,
            state: Mutex::new(Streamed::default()),
        }
    }

    fn send(&self, chunk: String) {
        if chunk.is_empty() {
            return;
        }
        let run = self.run;
        run.emit(Event::LlmStreamChunk(LlmStreamChunkEvent {
            meta: EventMeta::new().with_parent(run.execution_event()),
            chunk,
            agent_role: Some(run.role().to_owned()),
            task: Some(run.task_for_events()),
            crew: run.settings().crew_label(),
        }));
    }

    /// What `cleaned` adds past what was sent, when it extends it.
    fn fresh(state: &mut Streamed, cleaned: String) -> Option<String> {
        if !cleaned.starts_with(state.cleaned.as_str()) {
            return None;
        }
        let fresh = cleaned[state.cleaned.len()..].to_owned();
        state.cleaned = cleaned;
        Some(fresh)
    }

    /// Sends what the redaction held back, once the answer is complete.
    fn flush(&self) {
        let redaction = self.run.redaction();
        if !redaction.is_set() {
            return;
        }
        let fresh = {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            let cleaned = redaction.text(&state.raw).into_owned();
            Self::fresh(&mut state, cleaned)
        };
        if let Some(fresh) = fresh {
            self.send(fresh);
        }
    }
}

impl DeltaSink for StreamToBuses<'_> {
    fn delta(&self, text: &str) {
        let redaction = self.run.redaction();
        if !redaction.is_set() {
            self.send(text.to_owned());
            return;
        }
        let fresh = {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.raw.push_str(text);
            // Only whole lines are judged: a secret's start alone may not
            // look like one.
            let Some(end) = state.raw.rfind('\n').map(|at| at + 1) else {
                return;
            };
            if end <= state.sent {
                return;
            }
            state.sent = end;
            let cleaned = redaction.text(&state.raw[..end]).into_owned();
            Self::fresh(&mut state, cleaned)
        };
        if let Some(fresh) = fresh {
            self.send(fresh);
        }
    }
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

/// Whether a model call that failed this way is asked again. Every
/// failure of the model is (a timeout, a contained panic of its client, an
/// answer that could not be read…); a cancelled kickoff never gets here
/// (its future is dropped). The match names every variant so that a new
/// kind of failure is decided here, not retried by default.
fn retryable(error: &LlmError) -> bool {
    match error {
        LlmError::Http { .. }
        | LlmError::Timeout(_)
        | LlmError::Transport(_)
        | LlmError::InvalidResponse(_)
        | LlmError::Config(_)
        | LlmError::ScriptExhausted { .. }
        | LlmError::Panicked(_) => true,
    }
}
