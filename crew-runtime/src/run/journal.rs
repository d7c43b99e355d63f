//! The seam through which a durable kickoff's journal takes part in a run
//! (SPEC §13): what the run asks of it before each step (was this step
//! recorded? then its record stands for it: no hook, no model, no tool runs
//! again) and what it hands it after each step (commit this before going
//! on). The run names no store: the `durable` integration implements
//! [`KickoffJournal`] over the store's journal, and a kickoff without one
//! runs as it always did.
//!
//! A place in the run is a task (its position, from 0), a turn of that task
//! (from 1) and a tool call's id within the turn (ids made unique before
//! any call runs, so they are the same when a turn is replayed).

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, SystemTime};

use std::sync::{Arc, PoisonError};

use hooks_core::events::EventId;
use hooks_core::{
    ApprovedCallOutcome, ChainGate, GateFuture, HumanAnswer, HumanInputError, HumanInputRequest,
    HumanInputSource,
};
use hooks_core::{ChatMessage, CrewOutput, Event, Inputs, ModelResponse, TaskOutput, TokenUsage};
use serde_json::{Map, Value};

use crate::error::CrewError;
use crate::tool::IdempotencyKey;

/// A journal write under way: `Err` when the kickoff must stop before its
/// next step (its lease is lost, its store cannot be written).
pub(crate) type JournalFuture<'a, T> =
    Pin<Box<dyn Future<Output = Result<T, CrewError>> + Send + 'a>>;

/// A model's answer as recorded: what `POST_MODEL_CALL` left of it, the
/// conversation as it then stood when model-call hooks could have changed
/// it (otherwise rebuilt by appending), and the tokens it took.
#[derive(Debug, Clone)]
pub(crate) struct RecordedAnswer {
    pub(crate) response: ModelResponse,
    pub(crate) messages: Option<Vec<ChatMessage>>,
    pub(crate) usage: Option<TokenUsage>,
}

/// What the journal holds of one tool call.
#[allow(
    dead_code,
    reason = "made by the integration compiled in, if any (`durable`)"
)]
#[derive(Debug, Clone)]
pub(crate) enum RecordedCall {
    /// Nothing: the call runs as any call does.
    Unrecorded,
    /// A hook of its PRE chain asked a person about it, and no tool
    /// started: resumed, the chain starts again at that hook, with the
    /// arguments the hooks before it left, and asks again the question of
    /// id `question` (whose answer the person may have given meanwhile).
    Gated {
        gate: ChainGate,
        question: Option<String>,
    },
    /// Its intent (the tool was about to start, on `input`, with `key`)
    /// and no result: the tool may or may not have acted.
    InDoubt(Intent),
    /// Its observation, as the model got it: the call is over.
    Finished(String),
}

/// A recorded intent to run a tool.
#[allow(
    dead_code,
    reason = "made by the integration compiled in, if any (`durable`)"
)]
#[derive(Debug, Clone)]
pub(crate) struct Intent {
    /// The tool, as the call named it after the PRE chain.
    pub(crate) tool: String,
    /// The arguments the PRE chain left (what the tool was given).
    pub(crate) input: Map<String, Value>,
    /// The call's idempotency key.
    pub(crate) key: IdempotencyKey,
    /// Which attempt the key is of (0 first).
    pub(crate) attempt: u32,
    /// When the intent was committed, on the database's clock.
    pub(crate) at: SystemTime,
}

/// What became of a call found in doubt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(
    dead_code,
    reason = "read by the integration compiled in, if any (`durable`)"
)]
pub(crate) enum Settled {
    /// It may run again, and did, with the same key.
    RanAgain,
    /// It may run again, but the crew's rules refuse it now.
    Refused,
    /// Its reconciler says the effect happened: its result stands.
    Happened,
    /// Its reconciler says the effect did not happen: it ran again as a
    /// new attempt.
    DidNotHappen,
    /// Nothing could tell: the kickoff ends in doubt.
    LeftInDoubt,
}

/// A place in the run: a task, a turn, a call.
#[allow(
    dead_code,
    reason = "made by the integration compiled in, if any (`durable`)"
)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct Place<'a> {
    pub(crate) task: usize,
    pub(crate) turn: usize,
    pub(crate) call: &'a str,
}

/// A durable kickoff's journal, as the run sees it. The `recorded_*`
/// methods read what a resumed kickoff replays (nothing, for a fresh one);
/// the `record_*` methods commit a step before the run goes on, and fail
/// when the kickoff must stop.
pub(crate) trait KickoffJournal: Send + Sync {
    /// The inputs the kickoff began its tasks with (after
    /// `EXECUTION_START` and `INPUT`), and the id of its
    /// `CrewKickoffStarted` (which its later events name), if it got that
    /// far before.
    fn recorded_inputs(&self) -> Option<(Inputs, EventId)>;
    /// Commits the inputs the tasks begin with, and the kickoff's start
    /// event's id.
    fn record_inputs<'a>(&'a self, inputs: &'a Inputs, started: EventId) -> JournalFuture<'a, ()>;
    /// The number of the last event the kickoff sent before this process
    /// took it up (0 for a fresh kickoff): its events go on from there.
    fn events_before(&self) -> u64;
    /// What a resumed kickoff reports as it resumes (nothing for a fresh
    /// one).
    fn resumed_event(&self) -> Option<Event>;

    /// The context text `PRE_STEP` left for task `task`, if recorded.
    fn recorded_step(&self, task: usize) -> Option<String>;
    /// Commits what `PRE_STEP` left for task `task`.
    fn record_step<'a>(&'a self, task: usize, context: &'a str) -> JournalFuture<'a, ()>;

    /// The model's answer in `turn` of `task`, if recorded.
    fn recorded_answer(&self, task: usize, turn: usize) -> Option<RecordedAnswer>;
    /// Commits the model's answer in `turn` of `task`, before any of its
    /// calls runs.
    fn record_answer<'a>(
        &'a self,
        task: usize,
        turn: usize,
        answer: &'a RecordedAnswer,
    ) -> JournalFuture<'a, ()>;

    /// What the journal holds of the call at `place`.
    fn recorded_call(&self, place: Place<'_>) -> RecordedCall;
    /// The idempotency key of the call at `place`, at `attempt` (0 first):
    /// the same in every process that runs the kickoff.
    fn key(&self, place: Place<'_>, attempt: u32) -> IdempotencyKey;
    /// The idempotency key of the model turn `turn` of task `task`: the
    /// same in every process that runs the kickoff, and unlike any tool
    /// call's (a budget keys the turn's reservation by it, so a turn asked
    /// again after a crash is counted once).
    fn model_key(&self, task: usize, turn: usize) -> IdempotencyKey;
    /// Commits where the call at `place` asks a person about it (see
    /// [`HumanInputSource::keep_gate`]), with the id the question gets:
    /// returns that id.
    fn record_gate<'a>(
        &'a self,
        place: Place<'a>,
        gate: &'a ChainGate,
    ) -> JournalFuture<'a, String>;
    /// Commits the intent to run `tool` on `input` at `place` (attempt
    /// `attempt`). The tool starts only once this returned `Ok`.
    fn record_intent<'a>(
        &'a self,
        place: Place<'a>,
        tool: &'a str,
        input: &'a Map<String, Value>,
        attempt: u32,
    ) -> JournalFuture<'a, ()>;
    /// Commits the observation the model gets for the call at `place`.
    fn record_result<'a>(&'a self, place: Place<'a>, observation: &'a str)
    -> JournalFuture<'a, ()>;
    /// How long from now, on the database's clock, until a call with no
    /// result counts as in doubt: its intent's time plus the tool's timeout
    /// plus one lease (before then, its first owner may still be running
    /// it). Zero once that has passed.
    fn in_doubt_in<'a>(
        &'a self,
        intent: &'a Intent,
        tool_timeout: std::time::Duration,
    ) -> JournalFuture<'a, std::time::Duration>;
    /// What reports a call found in doubt (`key` its key, `tool` its
    /// tool), and what became of it.
    fn settled_events(
        &self,
        place: Place<'_>,
        tool: &str,
        key: &IdempotencyKey,
        settled: Settled,
    ) -> Vec<Event>;

    /// The output of task `task`, if it finished before, with the tokens
    /// the kickoff had used by then.
    fn recorded_task(&self, task: usize) -> Option<(TaskOutput, TokenUsage)>;
    /// Commits the output of task `task` (after `POST_STEP`) and the
    /// tokens the kickoff used so far.
    fn record_task<'a>(
        &'a self,
        task: usize,
        output: &'a TaskOutput,
        used: TokenUsage,
    ) -> JournalFuture<'a, ()>;

    /// Ends the kickoff with its result (completed, failed, in doubt), once
    /// `EXECUTION_END` ran.
    fn finish<'a>(&'a self, result: &'a Result<CrewOutput, CrewError>) -> JournalFuture<'a, ()>;

    /// Commits what the journal deferred (a model's answer, say) now:
    /// before a person is asked about one of its calls, so that the answer
    /// is not asked of the model again after a crash, with calls the person
    /// never saw.
    fn flush(&self) -> JournalFuture<'_, ()>;

    /// Why the kickoff must stop before its next step, if it must (its
    /// lease was lost while it worked).
    fn stopped(&self) -> Option<CrewError>;

    /// The kickoff's id, as its events and the error of a call in doubt
    /// name it.
    fn kickoff_id(&self) -> String;

    /// How long a question of this kickoff stays open, for a crew whose
    /// own human-input timeout is `configured`: a kickoff that parks keeps
    /// its question until the question's deadline instead.
    fn human_input_timeout(&self, configured: Duration) -> Duration {
        configured
    }

    /// The call at `place`, approved by a person in this kickoff (maybe in
    /// an earlier process), came to `outcome` as it was settled on resume
    /// (found in doubt, run again, its effect found done): kept on the
    /// question that approved it, with this process's name. Must not
    /// wait.
    fn settle_call(&self, place: Place<'_>, outcome: ApprovedCallOutcome) {
        let _ = (place, outcome);
    }

    /// This process held the call the answered question `question_id` was
    /// about when it settled: its name is kept on the question. Must not
    /// wait.
    fn settled_here(&self, question_id: &str) {
        let _ = question_id;
    }

    /// A person is asked about a call (`true`), or no longer (`false`): a
    /// kickoff that parks does so once someone was asked for longer than
    /// it parks after, or than `within` (the crew's human-input timeout),
    /// whichever comes first.
    fn asking(&self, asked: bool, within: Duration) {
        let _ = (asked, within);
    }
}

/// A kickoff's journal, from where one task of it runs.
#[derive(Clone)]
pub(crate) struct JournalAt {
    pub(crate) journal: Arc<dyn KickoffJournal>,
    /// The task's position (from 0).
    pub(crate) task: usize,
}

impl JournalAt {
    pub(crate) fn new(journal: &Arc<dyn KickoffJournal>, task: usize) -> JournalAt {
        JournalAt {
            journal: Arc::clone(journal),
            task,
        }
    }

    /// The place of the call `call` in `turn` of this task.
    pub(crate) fn place<'a>(&self, turn: usize, call: &'a str) -> Place<'a> {
        Place {
            task: self.task,
            turn,
            call,
        }
    }

    /// `Err` when the kickoff must stop before its next step.
    pub(crate) fn go_on(&self) -> Result<(), CrewError> {
        match self.journal.stopped() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }
}

/// A durable kickoff's human-input source: the crew's, with the journal
/// flushed before each question (see [`KickoffJournal::flush`]), the
/// place in the PRE chain that asks journaled against the call with the
/// id its question gets, and the journal told while a person is asked (a
/// kickoff may park meanwhile). A journal that cannot be written refuses
/// the question: the call it is about does not run.
pub(crate) struct FlushBeforeAsking {
    pub(crate) inner: Arc<dyn HumanInputSource>,
    pub(crate) journal: Arc<dyn KickoffJournal>,
    /// The crew's human-input timeout.
    pub(crate) within: Duration,
    /// The call the questions are about: its task, turn and id.
    pub(crate) call: (usize, usize, String),
    /// The id the next approval question gets: the one journaled with its
    /// gate (for a resumed call, the one journaled before).
    pub(crate) question: Arc<std::sync::Mutex<Option<String>>>,
    /// A resumed call's gate, as journaled, and its question's id: asked
    /// again there, it is not journaled again.
    pub(crate) resumed: Option<(ChainGate, String)>,
}

impl FlushBeforeAsking {
    /// `request` with the id its gate's journal entry gave it, if a gate
    /// was just kept (the next question only).
    fn with_question_id(&self, mut request: HumanInputRequest) -> HumanInputRequest {
        let kept = self
            .question
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(id) = kept {
            request.question_id = Some(id);
        }
        request
    }

    async fn flushed(&self) -> Result<(), HumanInputError> {
        self.journal.flush().await.map_err(|error| {
            HumanInputError::SourceFailed(format!(
                "the kickoff's journal could not be written before asking: {error}"
            ))
        })
    }

    /// Tells the journal a person is asked, until dropped.
    fn asking(&self) -> Asking<'_> {
        self.journal.asking(true, self.within);
        Asking(self)
    }
}

/// A person asked, for as long as it lives (a wait dropped too ends it).
struct Asking<'a>(&'a FlushBeforeAsking);

impl Drop for Asking<'_> {
    fn drop(&mut self) {
        self.0.journal.asking(false, self.0.within);
    }
}

#[hooks_core::async_trait]
impl HumanInputSource for FlushBeforeAsking {
    async fn ask(&self, request: HumanInputRequest) -> Result<String, HumanInputError> {
        // Its id taken first: a question refused here leaves none behind
        // for the next.
        let request = self.with_question_id(request);
        self.flushed().await?;
        let _asking = self.asking();
        self.inner.ask(request).await
    }

    async fn answer(&self, request: HumanInputRequest) -> Result<HumanAnswer, HumanInputError> {
        let request = self.with_question_id(request);
        self.flushed().await?;
        let _asking = self.asking();
        self.inner.answer(request).await
    }

    fn never_blocks(&self) -> bool {
        self.inner.never_blocks()
    }

    fn settled(&self, question_id: &str, outcome: &ApprovedCallOutcome) {
        self.inner.settled(question_id, outcome);
        self.journal.settled_here(question_id);
    }

    fn keeps_gates(&self) -> bool {
        true
    }

    fn keep_gate(&self, gate: ChainGate) -> GateFuture {
        let slot = Arc::clone(&self.question);
        // Asked again where a resumed call asked before: the same
        // question, journaled already.
        if let Some((asked, question)) = &self.resumed
            && *asked == gate
        {
            *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(question.clone());
            return Box::pin(std::future::ready(Ok(())));
        }
        let journal = Arc::clone(&self.journal);
        let (task, turn, call) = self.call.clone();
        Box::pin(async move {
            let place = Place {
                task,
                turn,
                call: &call,
            };
            let question = journal.record_gate(place, &gate).await.map_err(|error| {
                HumanInputError::SourceFailed(format!(
                    "the kickoff's journal could not record where the call asks: {error}"
                ))
            })?;
            *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(question);
            Ok(())
        })
    }
}
