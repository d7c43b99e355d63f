//! One agent working on one task ([`AgentRun`]): `PRE_STEP`, the loop of
//! model turns, each turn's tool calls one at a time or at once (through
//! the call stack, [`call`](super::call)), `POST_STEP`.

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, PoisonError};

use hooks_core::events::{
    AgentExecutionCompletedEvent, AgentExecutionErrorEvent, AgentExecutionStartedEvent, EventId,
    EventMeta, EventSequence, LlmCallCompletedEvent, LlmCallFailedEvent, LlmCallStartedEvent,
    LlmStreamChunkEvent,
};
use hooks_core::runtime::{
    MODEL_CALL_POINTS, RedactionScope, ToolOutput, contain_panic_async, take_panic_message,
};
use hooks_core::{
    Event, InterceptionPoint, LlmCallHookContext, ModelResponse, POST_MODEL_CALL, POST_STEP,
    PRE_MODEL_CALL, PRE_STEP, TaskOutput, TokenUsage,
};

use super::call;
use super::context::RunContext;
use super::journal::RecordedAnswer;
use super::{Conversation, InCrew, KickoffDepth, dispatch, go_on};
use crate::error::CrewError;
use crate::join::BoundedJoinSet;
use crate::llm::{ChatMessage, DeltaSink, LlmError, LlmRequest, ModelTurn, ToolCallRequest};
use crate::prompt;
use tracing::Instrument;

/// One agent working on one task: the loop of model turns over its
/// [`RunContext`] (which it dereferences to), shared by the tasks that run
/// one turn's calls; not the crew itself.
pub(crate) struct AgentRun {
    pub(crate) cx: RunContext,
    /// A standalone agent's run: where the conversation is left when the
    /// agent stops.
    pub(crate) conversation: Option<Conversation>,
    /// The tokens of the kickoff's model responses so far, shared by its
    /// tasks.
    pub(crate) usage: Arc<Mutex<TokenUsage>>,
    /// The model turn under way (from 1): the calls it asked for carry it.
    pub(crate) turn: std::sync::atomic::AtomicUsize,
    /// How many failed model calls were asked again so far (up to the
    /// agent's `max_retry_limit`): each one an `AgentExecutionStarted`
    /// that its `AgentExecutionCompleted` answers.
    pub(crate) retries: std::sync::atomic::AtomicUsize,
}

impl std::ops::Deref for AgentRun {
    type Target = RunContext;

    fn deref(&self) -> &RunContext {
        &self.cx
    }
}

impl AgentRun {
    /// The model turn under way (from 1).
    fn turn(&self) -> usize {
        self.turn.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// What the task's end carries.
    pub(super) fn task_end(&self) -> EventMeta {
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
    pub(super) async fn task(self: &Arc<Self>, context: &[&str]) -> Result<TaskOutput, CrewError> {
        let dispatcher = self.dispatcher();
        // What `PRE_STEP` left, once: a resumed task does not run it again.
        let recorded = self
            .journal
            .as_ref()
            .and_then(|at| at.journal.recorded_step(at.task));
        let step_context = match recorded {
            Some(context) => context,
            None => {
                let mut pre_step = self.step_context(prompt::context_text(context));
                let outcome = dispatch(&dispatcher, PRE_STEP, &mut pre_step).await;
                go_on(outcome, InterceptionPoint::PRE_STEP, Some(self.role()))?;
                if let Some(at) = &self.journal {
                    at.journal.record_step(at.task, &pre_step.payload).await?;
                }
                pre_step.payload
            }
        };
        let messages = self.opening(&step_context);
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
                Some(_) => self.task.description().to_owned(),
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
                        error: error.to_string(),
                    }));
                }
                return Err(error);
            }
        };
        if self.listening() {
            let output = output.raw.clone();
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
        let redaction = self.redaction();
        for turn in 1..=agent.max_iter() {
            self.turn.store(turn, std::sync::atomic::Ordering::Relaxed);
            let recorded = match &self.journal {
                Some(at) => {
                    at.go_on()?;
                    at.journal.recorded_answer(at.task, turn)
                }
                None => None,
            };
            let response = match recorded {
                // A turn a resumed kickoff took before: its answer as then,
                // no hook and no model asked again.
                Some(recorded) => {
                    if let Some(usage) = recorded.usage {
                        *self.usage.lock().unwrap_or_else(PoisonError::into_inner) += usage;
                    }
                    if let Some(kept) = recorded.messages {
                        messages = kept;
                    }
                    recorded.response
                }
                None => {
                    let (response, kept) = self.model_turn(messages, turn, started).await?;
                    messages = kept;
                    response
                }
            };
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
            let calls = call::unique_call_ids(calls);
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

    /// One model turn on `messages`: `PRE_MODEL_CALL`, the model (asked
    /// again on a failure, see [`AgentRun::ask`]), `POST_MODEL_CALL`. The
    /// answer as the hooks left it, and the conversation as it then stands;
    /// in a durable kickoff, committed before any of its calls runs.
    async fn model_turn(
        self: &Arc<Self>,
        messages: Vec<ChatMessage>,
        turn: usize,
        started: Option<&AgentExecutionStartedEvent>,
    ) -> Result<(ModelResponse, Vec<ChatMessage>), CrewError> {
        let crew_agent = self.agent();
        let dispatcher = self.dispatcher();
        let redaction = self.redaction();
        // Only a durable kickoff records the tokens each answer took.
        let used_before = self
            .journal
            .is_some()
            .then(|| *self.usage.lock().unwrap_or_else(PoisonError::into_inner));
        {
            let mut hooks = dispatcher.begin_call(&MODEL_CALL_POINTS);
            let mut call = LlmCallHookContext::new(messages)
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
            // A durable kickoff's turn has a key of its own, the same when
            // it is asked again after a crash (a budget counts it once).
            if let Some(at) = &self.journal {
                call.extensions.insert(at.journal.model_key(at.task, turn));
            }
            let outcome = hooks.dispatch_async(PRE_MODEL_CALL, &mut call).await;
            self.settings()
                .model_call_refused(&call, outcome, self.role())?;
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
            if let Some(at) = &self.journal {
                let used_after = *self.usage.lock().unwrap_or_else(PoisonError::into_inner);
                // The conversation is kept only where hooks could change it;
                // otherwise a replay rebuilds it by appending.
                let hooked =
                    dispatcher.has_hooks(PRE_MODEL_CALL) || dispatcher.has_hooks(POST_MODEL_CALL);
                let recorded = RecordedAnswer {
                    response,
                    messages: hooked.then(|| call.messages.clone()),
                    usage: used_before.map(|before| used_since(before, used_after)),
                };
                at.journal.record_answer(at.task, turn, &recorded).await?;
                return Ok((recorded.response, call.messages));
            }
            Ok((response, call.messages))
        }
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
                    iteration: Some(turn),
                    crew: self.settings().crew_name(),
                }));
                call.messages = Arc::try_unwrap(messages).unwrap_or_else(|kept| (*kept).clone());
            }
            let source = match self.complete(&call.messages, &call.tools, turn).await {
                Ok((answer, usage)) => {
                    if let Some(usage) = usage {
                        *self.usage.lock().unwrap_or_else(PoisonError::into_inner) += usage;
                        // What the answer took, for the POST_MODEL_CALL
                        // chain (a token budget settles with it).
                        call.extensions.insert(usage);
                    }
                    if self.listening() {
                        self.report_answer(model.to_owned(), &answer, usage, model_call, turn);
                    }
                    return Ok(answer);
                }
                Err(source) => source,
            };
            let retries = self.retries.load(std::sync::atomic::Ordering::Relaxed);
            let retry = (retries < limit && retryable(&source)).then_some(retries + 1);
            if self.listening() {
                self.emit(Event::LlmCallFailed(LlmCallFailedEvent {
                    meta: EventMeta::new()
                        .with_parent(self.execution_event())
                        .with_started(model_call),
                    model: model.to_owned(),
                    error: source.to_string(),
                    retry,
                    max_retries: limit,
                    agent_role: self.role().to_owned(),
                    task_name: self.task_name(),
                    iteration: Some(turn),
                    crew: self.settings().crew_name(),
                }));
            }
            if let Some(retry) = retry {
                self.retries
                    .store(retry, std::sync::atomic::Ordering::Relaxed);
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
        turn: usize,
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
            response: text.clone(),
            tool_calls: calls.iter().map(|call| call.name.clone()).collect(),
            usage,
            agent_role: self.role().to_owned(),
            task_name: self.task_name(),
            iteration: Some(turn),
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
                observations.push(call::run(self, self.turn(), call).await?);
            }
            observations
        } else {
            self.run_concurrently(&calls).await?
        };
        for call in refused {
            observations.push(call::refuse(self, &call, asked));
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
            let work = KickoffDepth::scope(self.depth, async move {
                call::run(&run, run.turn(), &call).await
            });
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

/// Whether a model call that failed this way is asked again. Every
/// failure of the model is (a timeout, a contained panic of its client, an
/// answer that could not be read…); a cancelled kickoff never gets here
/// (its future is dropped). The match names every variant so that a new
/// kind of failure is decided here, not retried by default.
/// The tokens used between two readings of a run's count.
fn used_since(before: TokenUsage, after: TokenUsage) -> TokenUsage {
    TokenUsage::new(
        after.prompt_tokens.saturating_sub(before.prompt_tokens),
        after
            .completion_tokens
            .saturating_sub(before.completion_tokens),
        after.total_tokens.saturating_sub(before.total_tokens),
    )
}

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
