//! The executor: runs a crew's tasks, each as a loop of model turns, and
//! every tool call the model asks for through one path (see
//! [`tool_call`](crate::tool_call)).
//!
//! A task's loop: the model is told who the agent is and what the task is
//! (with the outputs of its context tasks); each turn it either answers, or
//! asks for tool calls. The calls of one turn run concurrently (up to the
//! crew's `max_concurrent_tool_calls`, a single call on the agent's own
//! thread), and their observations go back to the model in call order. An
//! agent that reaches its `max_iter` turns without answering stops with a
//! note as its output, and the crew goes on.
//!
//! With a crew's redaction set, what the executor lets out passes through
//! it (see [`redaction`](crate::redaction)): each message as it enters the
//! conversation, the console, the kickoff's output and error.

use std::sync::Arc;

use hooks_core::runtime::{Dispatcher, MODEL_CALL_POINTS, ToolOutput};
use hooks_core::{
    AgentInfo, CrewInfo, CrewOutput, DispatchOutcome, EXECUTION_END, EXECUTION_START, Event,
    ExecutionEndContext, ExecutionStartContext, HookAborted, INPUT, InputContext, Inputs,
    InterceptionPoint, LlmCallHookContext, ModelResponse, OUTPUT, OutputContext, POST_MODEL_CALL,
    POST_STEP, PRE_MODEL_CALL, PRE_STEP, StepContext, StepKind, TaskInfo, TaskOutput,
};

use crate::crew::{Crew, CrewAgent, CrewInner};
use crate::error::CrewError;
use crate::llm::{ChatMessage, LlmRequest, ModelTurn, ToolCallRequest};
use crate::pool::{CallPool, Turn};
use crate::prompt;
use crate::redaction::Redaction;
use crate::task::Task;

/// Runs a kickoff through every point: `EXECUTION_START`, `INPUT`, each
/// task (`PRE_STEP`, its model and tool calls, `POST_STEP`), `OUTPUT`, and
/// `EXECUTION_END` once the rest has completed or failed. Its output or
/// error leaves through the crew's redaction, and so does what `hooks-core`
/// reports on this thread meanwhile.
pub(crate) fn kickoff(crew: &Crew, inputs: Inputs) -> Result<CrewOutput, CrewError> {
    let redaction = &crew.inner().redaction;
    let _scope = redaction.scope();
    match kickoff_unredacted(crew, inputs) {
        Ok(output) => Ok(redaction.output(output)),
        Err(error) => Err(error.redacted(redaction)),
    }
}

fn kickoff_unredacted(crew: &Crew, inputs: Inputs) -> Result<CrewOutput, CrewError> {
    let dispatcher = crew.dispatcher();
    let crew_info: Arc<dyn CrewInfo> = Arc::new(crew.clone());
    let mut start = ExecutionStartContext::new(inputs).with_crew(Arc::clone(&crew_info));
    if let DispatchOutcome::Aborted(abort) = dispatcher.dispatch(EXECUTION_START, &mut start) {
        // EXECUTION_END fires only for kickoffs that passed EXECUTION_START.
        return Err(aborted_at(InterceptionPoint::EXECUTION_START, None, abort));
    }
    let result = run(crew, start.inputs, &crew_info);
    finish(&dispatcher, result, crew_info, &crew.inner().redaction)
}

/// `EXECUTION_END`, exactly once: with the output, or with the error that
/// ended the run. On the failure path an abort is ignored (the original
/// error stands); after a completed run it becomes the kickoff's error.
fn finish(
    dispatcher: &Dispatcher<'_>,
    result: Result<CrewOutput, CrewError>,
    crew_info: Arc<dyn CrewInfo>,
    redaction: &Redaction,
) -> Result<CrewOutput, CrewError> {
    if !dispatcher.has_hooks(InterceptionPoint::EXECUTION_END) {
        return result;
    }
    match result {
        Ok(output) => {
            let mut end = ExecutionEndContext::completed(output).with_crew(crew_info);
            let outcome = dispatcher.dispatch(EXECUTION_END, &mut end);
            let output = end.output.take().unwrap_or_default();
            match outcome {
                DispatchOutcome::Aborted(abort) => {
                    Err(aborted_at(InterceptionPoint::EXECUTION_END, None, abort))
                }
                DispatchOutcome::Proceeded | DispatchOutcome::Modified => Ok(output),
            }
        }
        Err(error) => {
            let mut end = ExecutionEndContext::failed(&error).with_crew(crew_info);
            if let DispatchOutcome::Aborted(abort) = dispatcher.dispatch(EXECUTION_END, &mut end) {
                let abort = redaction.abort(abort);
                tracing::warn!(
                    target: "crew_runtime::executor",
                    "an EXECUTION_END hook aborted a run that had already failed; the original \
                     error stands ({abort})"
                );
            }
            Err(error)
        }
    }
}

fn aborted_at(point: InterceptionPoint, agent: Option<&str>, abort: HookAborted) -> CrewError {
    CrewError::AbortedAt {
        point,
        agent: agent.map(str::to_owned),
        abort,
    }
}

/// `INPUT`, the tasks in order, and `OUTPUT`.
fn run(
    crew: &Crew,
    inputs: Inputs,
    crew_info: &Arc<dyn CrewInfo>,
) -> Result<CrewOutput, CrewError> {
    let inner = crew.inner();
    let dispatcher = crew.dispatcher();
    let mut input = InputContext::new(inputs).with_crew(Arc::clone(crew_info));
    if let DispatchOutcome::Aborted(abort) = dispatcher.dispatch(INPUT, &mut input) {
        return Err(aborted_at(InterceptionPoint::INPUT, None, abort));
    }
    let tasks = fill_inputs(inner, &input.inputs)?;
    let mut pool = CallPool::new(inner.max_concurrent_tool_calls);
    let mut outputs: Vec<TaskOutput> = Vec::with_capacity(tasks.len());
    for (position, (crew_task, task)) in inner.tasks.iter().zip(tasks).enumerate() {
        // Built crews only hold agent indices they resolved themselves.
        let agent = &inner.agents[crew_task.agent];
        let context: Vec<&str> = crew_task
            .context
            .iter()
            .filter_map(|&earlier| outputs.get(earlier))
            .map(|output| output.raw.as_str())
            .collect();
        let run = Arc::new(AgentRun {
            crew: crew.clone(),
            agent: crew_task.agent,
            agent_info: agent.agent.clone(),
            task_info: task.clone(),
            task,
            crew_info: Arc::clone(crew_info),
            verbose: inner.verbose || agent.agent.verbose(),
        });
        if run.verbose {
            hooks_core::console::print_line(&format!(
                "[{}] task {}/{} for {}: {}",
                inner.name,
                position + 1,
                inner.tasks.len(),
                agent.agent.role(),
                // Cleaned whole: a secret cut by the excerpt could slip by.
                excerpt(&inner.redaction.text(run.task.description()), 200)
            ));
        }
        let mut pre_step = run.step_context(prompt::context_text(&context));
        if let DispatchOutcome::Aborted(abort) = dispatcher.dispatch(PRE_STEP, &mut pre_step) {
            return Err(aborted_at(
                InterceptionPoint::PRE_STEP,
                Some(run.role()),
                abort,
            ));
        }
        let mut output = run.work(&pre_step.payload, &mut pool)?;
        let mut post_step = run.step_context(std::mem::take(&mut output.raw));
        let outcome = dispatcher.dispatch(POST_STEP, &mut post_step);
        output.raw = post_step.payload;
        if let DispatchOutcome::Aborted(abort) = outcome {
            return Err(aborted_at(
                InterceptionPoint::POST_STEP,
                Some(run.role()),
                abort,
            ));
        }
        outputs.push(output);
    }
    let raw = outputs.last().map(|o| o.raw.clone()).unwrap_or_default();
    let mut output = OutputContext::new(CrewOutput {
        raw,
        tasks_output: outputs,
    })
    .with_crew(Arc::clone(crew_info));
    if let DispatchOutcome::Aborted(abort) = dispatcher.dispatch(OUTPUT, &mut output) {
        return Err(aborted_at(InterceptionPoint::OUTPUT, None, abort));
    }
    Ok(output.output)
}

/// Every task with its inputs filled in, or the first task that uses an
/// input that was not given (checked before anything runs).
fn fill_inputs(inner: &CrewInner, inputs: &Inputs) -> Result<Vec<Arc<Task>>, CrewError> {
    let mut filled = Vec::with_capacity(inner.tasks.len());
    for (position, crew_task) in inner.tasks.iter().enumerate() {
        let task = &crew_task.task;
        let mut missing = Vec::new();
        let description = inputs.interpolate(task.description(), &mut missing);
        let expected_output = inputs.interpolate(task.expected_output(), &mut missing);
        if !missing.is_empty() {
            return Err(CrewError::MissingInputs {
                index: position + 1,
                task: task.description().to_owned(),
                missing,
                provided: inputs.names().map(str::to_owned).collect(),
            });
        }
        filled.push(Arc::new(task.with_texts(description, expected_output)));
    }
    Ok(filled)
}

/// One agent working on one task: everything a tool call needs, shared by
/// the threads that run one turn's calls.
pub(crate) struct AgentRun {
    pub(crate) crew: Crew,
    /// Index into the crew's agents.
    pub(crate) agent: usize,
    pub(crate) task: Arc<Task>,
    pub(crate) agent_info: Arc<dyn AgentInfo>,
    pub(crate) task_info: Arc<dyn TaskInfo>,
    pub(crate) crew_info: Arc<dyn CrewInfo>,
    pub(crate) verbose: bool,
}

impl AgentRun {
    pub(crate) fn inner(&self) -> &CrewInner {
        self.crew.inner()
    }

    pub(crate) fn agent(&self) -> &CrewAgent {
        // Built crews only hold agent indices they resolved themselves.
        &self.crew.inner().agents[self.agent]
    }

    pub(crate) fn dispatcher(&self) -> Dispatcher<'_> {
        self.crew.dispatcher()
    }

    pub(crate) fn role(&self) -> &str {
        self.agent().agent.role()
    }

    /// The crew's redaction.
    pub(crate) fn redaction(&self) -> &Redaction {
        &self.inner().redaction
    }

    /// A step context for this task with `payload`.
    fn step_context(&self, payload: String) -> StepContext {
        StepContext::new(StepKind::Task, self.task.description(), payload)
            .with_agent(Arc::clone(&self.agent_info))
            .with_task(Arc::clone(&self.task_info))
            .with_crew(Arc::clone(&self.crew_info))
    }

    /// The model-turn loop of one task. Each model call runs its
    /// `PRE_MODEL_CALL` chain (what it leaves in the messages is what the
    /// model receives, and stays in the conversation) and its
    /// `POST_MODEL_CALL` chain (what it leaves of the answer is what is
    /// used), on one snapshot of the hooks.
    fn work(self: &Arc<Self>, context: &str, pool: &mut CallPool) -> Result<TaskOutput, CrewError> {
        let crew_agent = self.agent();
        let agent = &*crew_agent.agent;
        let dispatcher = self.dispatcher();
        let redaction = self.redaction();
        // Each message is cleaned as it enters the conversation, so the
        // model-call hooks see it as the model will.
        let mut messages = vec![
            redaction.message(prompt::system_message(agent)),
            redaction.message(prompt::task_message(&self.task, context)),
        ];
        for turn in 1..=agent.max_iter() {
            let hooks = dispatcher.begin_call(&MODEL_CALL_POINTS);
            let mut call = LlmCallHookContext::new(std::mem::take(&mut messages))
                .with_agent(Arc::clone(&self.agent_info))
                .with_task(Arc::clone(&self.task_info))
                .with_crew(Arc::clone(&self.crew_info))
                .with_llm(Arc::clone(&crew_agent.llm_info))
                .with_tools(Arc::clone(&crew_agent.definitions))
                .with_iterations(turn)
                .with_human_input(Arc::clone(&self.inner().human_input));
            if let DispatchOutcome::Aborted(abort) = hooks.dispatch(PRE_MODEL_CALL, &mut call) {
                return Err(aborted_at(
                    InterceptionPoint::PRE_MODEL_CALL,
                    Some(self.role()),
                    abort,
                ));
            }
            // Model-call hooks may have edited or added messages (now, or
            // after the last answer): clean them all as they leave.
            if redaction.is_set()
                && (dispatcher.has_hooks(PRE_MODEL_CALL) || dispatcher.has_hooks(POST_MODEL_CALL))
            {
                for message in &mut call.messages {
                    redaction.in_place(&mut message.content);
                }
            }
            let request = LlmRequest {
                messages: &call.messages,
                tools: &call.tools,
            };
            let answer = agent
                .llm()
                .complete(&request)
                .map_err(|source| CrewError::Model {
                    agent: self.role().to_owned(),
                    source,
                })?;
            call.response = Some(match answer {
                ModelTurn::FinalAnswer(content) => ModelResponse {
                    content,
                    tool_calls: Vec::new(),
                },
                ModelTurn::ToolCalls { content, calls } => ModelResponse {
                    content,
                    tool_calls: calls,
                },
            });
            if let DispatchOutcome::Aborted(abort) = hooks.dispatch(POST_MODEL_CALL, &mut call) {
                return Err(aborted_at(
                    InterceptionPoint::POST_MODEL_CALL,
                    Some(self.role()),
                    abort,
                ));
            }
            drop(hooks);
            let response = call.response.take().unwrap_or_default();
            messages = call.messages;
            // Text with no calls (or whose calls the hooks dropped) is the
            // model answering.
            if response.tool_calls.is_empty() {
                return Ok(self.finish(response.content, false));
            }
            let ModelResponse {
                content,
                tool_calls: calls,
            } = response;
            let calls = crate::tool_call::unique_call_ids(calls);
            if self.verbose {
                self.say(&format!(
                    "turn {turn}: asks for {} tool call(s)",
                    calls.len()
                ));
            }
            let (calls, observations) = self.run_calls(calls, pool)?;
            let answers: Vec<ChatMessage> = calls
                .iter()
                .zip(observations)
                .map(|(call, observation)| ChatMessage::tool(call.id.clone(), observation))
                .collect();
            messages.push(ChatMessage::assistant_tool_calls(
                redaction.owned(content),
                calls,
            ));
            messages.extend(answers);
        }
        let note = format!(
            "Agent stopped: it reached its limit of {} model turns (max_iter) without giving a \
             final answer.",
            agent.max_iter()
        );
        tracing::warn!(target: "crew_runtime::executor", agent = %self.role(), "{note}");
        Ok(self.finish(note, true))
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

    /// Runs one turn's calls; returns them with their observations, in
    /// call order.
    ///
    /// A single call runs on this thread. Several run on up to
    /// `max_concurrent_tool_calls` threads (this one included), each taking
    /// the next call in order. Once a POST hook aborts, no further call
    /// starts; calls already running finish, and the abort of the earliest
    /// call (in call order) ends the run.
    #[allow(clippy::type_complexity)]
    fn run_calls(
        self: &Arc<Self>,
        calls: Vec<ToolCallRequest>,
        pool: &mut CallPool,
    ) -> Result<(Vec<ToolCallRequest>, Vec<String>), CrewError> {
        if calls.len() > self.inner().max_tool_calls_per_turn {
            return self.run_calls_within_limit(calls, pool);
        }
        if calls.len() <= 1 || self.inner().max_concurrent_tool_calls <= 1 {
            let observations = calls
                .iter()
                .map(|call| self.run_call(call))
                .collect::<Result<_, _>>()?;
            return Ok((calls, observations));
        }
        let (calls, outcomes) = pool.run(Turn::new(Arc::clone(self), calls));
        let mut observations = Vec::with_capacity(calls.len());
        for outcome in outcomes {
            match outcome {
                Some(Ok(observation)) => observations.push(observation),
                Some(Err(error)) => return Err(error),
                None => observations.push(
                    ToolOutput::error("the call was interrupted by an internal error").rendered,
                ),
            }
        }
        Ok((calls, observations))
    }

    /// Runs the first `max_tool_calls_per_turn` calls of a turn that asked
    /// for more; each call past the limit is refused with an observation
    /// saying so, and no hook and no tool runs for it. Every call keeps its
    /// place, so each one the model made is answered.
    #[allow(clippy::type_complexity)]
    fn run_calls_within_limit(
        self: &Arc<Self>,
        mut calls: Vec<ToolCallRequest>,
        pool: &mut CallPool,
    ) -> Result<(Vec<ToolCallRequest>, Vec<String>), CrewError> {
        let asked = calls.len();
        let refused = calls.split_off(self.inner().max_tool_calls_per_turn);
        let (mut calls, mut observations) = self.run_calls(calls, pool)?;
        for call in refused {
            observations.push(self.refuse_call(&call, asked));
            calls.push(call);
        }
        Ok((calls, observations))
    }

    /// Prints a line of the verbose console, cleaned by the crew's
    /// redaction. Callers that cut a text to an excerpt clean it first.
    pub(crate) fn say(&self, line: &str) {
        let line = self.redaction().text(line);
        hooks_core::console::print_line(&format!("[{}] {line}", self.role()));
    }

    pub(crate) fn listening(&self) -> bool {
        let inner = self.inner();
        inner.global.events().has_listeners() || inner.scoped.events().has_listeners()
    }

    /// Sends a tool-usage event to the global registry's bus and the
    /// crew's, as dispatches do.
    pub(crate) fn emit(&self, event: Event) {
        let inner = self.inner();
        inner.global.events().emit(&event);
        inner.scoped.events().emit(&event);
    }
}

/// At most `limit` characters of `text`, with `…` when cut.
pub(crate) fn excerpt(text: &str, limit: usize) -> String {
    match text.char_indices().nth(limit) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}
