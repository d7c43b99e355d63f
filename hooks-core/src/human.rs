//! Where answers to `request_human_input` come from.
//!
//! A question is a [`HumanInputRequest`]: the prompt, the default message,
//! and which call it is about (call id, tool, input, agent), so that an
//! answer can only approve the call it was given for. A
//! [`HumanInputSource`] answers it, asynchronously: the terminal, a script,
//! a callback, a channel to a web or chat UI. The contexts'
//! `request_human_input` puts a timeout on every source and turns every
//! failure into an error (see [`HumanInputFuture`]).
//!
//! The engine has no default person: a context given no source refuses
//! every question with [`HumanInputError::NoSource`], so an approval gate
//! fails closed. The terminal is a source of the runtime (`crew-runtime`'s
//! `TerminalInput`), which gives it to the contexts of a crew built without
//! another.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot};

/// How long `request_human_input` waits for an answer unless told
/// otherwise: five minutes. A crew changes it with its builder's
/// `human_input_timeout`, a context with `with_human_input_timeout`.
///
/// ```
/// use std::time::Duration;
/// use hooks_core::{DEFAULT_HUMAN_INPUT_TIMEOUT, ToolCallHookContext};
///
/// assert_eq!(DEFAULT_HUMAN_INPUT_TIMEOUT, Duration::from_secs(5 * 60));
/// let ctx = ToolCallHookContext::new("send_email", Default::default());
/// assert_eq!(ctx.human_input_timeout(), DEFAULT_HUMAN_INPUT_TIMEOUT);
/// ```
pub const DEFAULT_HUMAN_INPUT_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// Why no answer could be had from a person.
///
/// Every one of them makes `request_human_input` an error, and `?` in a
/// `PRE_TOOL_CALL` hook turns that error into a block.
///
/// ```
/// use hooks_core::{HookAborted, HumanInputError};
///
/// let error = HumanInputError::SourceFailed("the chat service is down".into());
/// assert_eq!(error.to_string(), "the answer source failed: the chat service is down");
/// let block = HookAborted::from(error);
/// assert_eq!(block.source, "human-input");
/// assert_eq!(
///     block.reason,
///     "no human approval: the answer source failed: the chat service is down"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HumanInputError {
    /// The input was closed before an answer came: end of file on the
    /// terminal, a channel whose receiving side is gone, a request dropped
    /// unanswered.
    #[error("human input is closed: no answer can be read")]
    Closed,
    /// Standard input is not a terminal, so no person can be asked.
    #[error("standard input is not a terminal: no person can be asked")]
    NotATerminal,
    /// The question was given no source to ask: no person can be asked.
    /// The engine has no default person; a crew gives its contexts one
    /// (the terminal unless its builder was given another).
    #[error(
        "no human-input source is set: no person can be asked (give the context one with \
         `with_human_input`)"
    )]
    NoSource,
    /// No answer came in time.
    #[error("no answer within {0:?}")]
    TimedOut(Duration),
    /// A scripted source ran out of answers.
    #[error("the scripted answers are used up")]
    Exhausted,
    /// Reading the answer failed.
    #[error("reading the answer failed: {0}")]
    Io(String),
    /// The source itself failed: it panicked, or a source of your own
    /// reports a failure of its kind (a web UI that cannot be reached).
    #[error("the answer source failed: {0}")]
    SourceFailed(String),
}

/// One question to a person, as a [`HumanInputSource`] receives it: what
/// to show, and which call it is about.
///
/// The contexts fill in the call: a tool call's id, tool name, input and
/// agent role; a model call's agent role. A source that can answer several
/// questions at once (a web UI, a chat) shows them, and matches each answer
/// to its question by [`call_id`](Self::call_id), so that a queue of
/// answers cannot approve the wrong call. Every text in it (the input too)
/// has passed through the crew's redaction when one is set.
///
/// ```
/// use hooks_core::HumanInputRequest;
/// use serde_json::json;
///
/// let request = HumanInputRequest::new("Send it?", "yes/no")
///     .with_call_id("call_7")
///     .with_tool("send_email", json!({"to": "team@example.com"}))
///     .with_agent_role("Assistant");
/// assert_eq!(request.call_id.as_deref(), Some("call_7"));
/// assert_eq!(request.tool_input, Some(json!({"to": "team@example.com"})));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct HumanInputRequest {
    /// The question.
    pub prompt: String,
    /// The explanation shown with it (how to answer).
    pub default_message: String,
    /// The id of the tool call it is about (unique within a turn), when it
    /// is about a tool call that has one.
    pub call_id: Option<String>,
    /// The normalized name of the tool it is about.
    pub tool_name: Option<String>,
    /// The tool's input as the tool would receive it (a JSON object; a
    /// string when the crew's redaction left something that is not JSON).
    pub tool_input: Option<Value>,
    /// The role of the agent making the call.
    pub agent_role: Option<String>,
    /// The JSON schema of the tool's arguments, so that a source letting a
    /// person edit them can check the edit.
    pub tool_schema: Option<Value>,
    /// What the tool declares it does (a tool that declares nothing counts
    /// as destructive and open-world), so that a source can let a person
    /// answer only for some kinds of tools.
    pub tool_capabilities: Option<crate::Capabilities>,
    /// The name of the task being worked on.
    pub task: Option<String>,
    /// The name of the crew running the call.
    pub crew: Option<String>,
    /// The id of the kickoff running the call (see
    /// [`CrewInfo::kickoff_id`](crate::CrewInfo::kickoff_id)).
    pub kickoff_id: Option<String>,
    /// Who the kickoff runs for (see [`CrewInfo::user`](crate::CrewInfo::user)):
    /// the requester, who must not approve their own call.
    pub requester: Option<String>,
    /// How long the question waits for an answer, set when it is asked:
    /// an answer given later is refused whatever the source does.
    pub timeout: Option<Duration>,
    /// Why it is asked, in plain words (a policy's `@ask` text, a gate's
    /// message), for sources that show the call beside it (a web page, a
    /// chat) rather than the terminal wording of [`prompt`](Self::prompt).
    pub reason: Option<String>,
    /// The id the question has, chosen by the runtime before it is asked
    /// (a durable kickoff journals it first, so that the kickoff resumed
    /// in another process asks the very same question again and takes its
    /// answer). A source that keeps its questions by id keeps this one
    /// under it, and takes up the question it already holds under it; any
    /// other source may ignore it.
    pub question_id: Option<String>,
    /// The rules the call was checked by when the question was asked, so
    /// that a source in another process (an approval inbox) can check a
    /// person's edit by them before it takes it. A rule engine puts them
    /// in the call's [`extensions`](crate::ToolCallHookContext::extensions)
    /// (as an `Arc<AskedUnder>`) before a question is asked about it; a
    /// source may ignore them (the crew's hooks check an edit again when
    /// the call runs).
    pub asked_under: Option<Arc<AskedUnder>>,
}

/// The rules a question was asked under: their language, their text, and
/// what else of the call they read, as JSON (see
/// [`HumanInputRequest::asked_under`]).
///
/// ```
/// use std::sync::Arc;
/// use hooks_core::AskedUnder;
/// use serde_json::json;
///
/// let rules = AskedUnder::new("cedar", Arc::from("permit(principal, action, resource);"), json!({}));
/// assert_eq!(rules.language, "cedar");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AskedUnder {
    /// The language of [`text`](Self::text), as the checker names it
    /// (`"cedar"`).
    pub language: String,
    /// The rules, whole.
    pub text: Arc<str>,
    /// What the checker needs besides the question and the rules (the
    /// engine's settings, facts of the call that the question lacks).
    pub context: Value,
}

impl AskedUnder {
    /// Rules in `language`, with `context`.
    ///
    /// ```
    /// let rules = hooks_core::AskedUnder::new("cedar", "forbid(principal, action, resource);".into(), serde_json::Value::Null);
    /// assert!(rules.text.starts_with("forbid"));
    /// ```
    pub fn new(language: impl Into<String>, text: Arc<str>, context: Value) -> Self {
        AskedUnder {
            language: language.into(),
            text,
            context,
        }
    }
}

impl HumanInputRequest {
    /// A question about no call in particular.
    ///
    /// ```
    /// let request = hooks_core::HumanInputRequest::new("Deploy?", "yes/no");
    /// assert_eq!((request.prompt.as_str(), request.call_id), ("Deploy?", None));
    /// ```
    pub fn new(prompt: impl Into<String>, default_message: impl Into<String>) -> Self {
        HumanInputRequest {
            prompt: prompt.into(),
            default_message: default_message.into(),
            ..HumanInputRequest::default()
        }
    }

    /// Names the tool call the question is about.
    ///
    /// ```
    /// let request = hooks_core::HumanInputRequest::new("Send?", "").with_call_id("call_1");
    /// assert_eq!(request.call_id.as_deref(), Some("call_1"));
    /// ```
    pub fn with_call_id(mut self, call_id: impl Into<String>) -> Self {
        self.call_id = Some(call_id.into());
        self
    }

    /// Names the tool and its input.
    ///
    /// ```
    /// use serde_json::json;
    /// let request = hooks_core::HumanInputRequest::new("Send?", "").with_tool("send_email", json!({}));
    /// assert_eq!(request.tool_name.as_deref(), Some("send_email"));
    /// ```
    pub fn with_tool(mut self, tool_name: impl Into<String>, tool_input: Value) -> Self {
        self.tool_name = Some(tool_name.into());
        self.tool_input = Some(tool_input);
        self
    }

    /// Names the agent making the call.
    ///
    /// ```
    /// let request = hooks_core::HumanInputRequest::new("Send?", "").with_agent_role("Writer");
    /// assert_eq!(request.agent_role.as_deref(), Some("Writer"));
    /// ```
    pub fn with_agent_role(mut self, role: impl Into<String>) -> Self {
        self.agent_role = Some(role.into());
        self
    }

    /// Gives the question the id `id` (see
    /// [`question_id`](Self::question_id)).
    ///
    /// ```
    /// let request = hooks_core::HumanInputRequest::new("Pay?", "").with_question_id("q-7");
    /// assert_eq!(request.question_id.as_deref(), Some("q-7"));
    /// ```
    pub fn with_question_id(mut self, id: impl Into<String>) -> Self {
        self.question_id = Some(id.into());
        self
    }

    /// Says why the question is asked, in plain words (see
    /// [`reason`](Self::reason)).
    ///
    /// ```
    /// let request = hooks_core::HumanInputRequest::new("Pay `x`? (yes/no)", "")
    ///     .with_reason("payments above 100 EUR need a person");
    /// assert_eq!(request.reason.as_deref(), Some("payments above 100 EUR need a person"));
    /// ```
    pub fn with_reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }

    /// The request as it may leave the crew: every text through the
    /// redaction in scope (a credential an earlier PRE hook put in the
    /// input must not reach the person, nor the UI that shows it).
    pub(crate) fn redacted_in_scope(mut self) -> Self {
        if !crate::redaction::redaction_in_scope() {
            return self;
        }
        let texts = [
            Some(&mut self.prompt),
            Some(&mut self.default_message),
            self.call_id.as_mut(),
            self.tool_name.as_mut(),
            self.agent_role.as_mut(),
            self.task.as_mut(),
            self.crew.as_mut(),
            self.requester.as_mut(),
            self.reason.as_mut(),
        ];
        for text in texts.into_iter().flatten() {
            if let std::borrow::Cow::Owned(cleaned) = crate::redaction::redact_in_scope(text) {
                *text = cleaned;
            }
        }
        if let Some(input) = &mut self.tool_input {
            // The whole document as text, so that key/value rules see the
            // keys; read back as JSON, or kept as text if it is no longer.
            let text = input.to_string();
            if let std::borrow::Cow::Owned(cleaned) = crate::redaction::redact_in_scope(&text) {
                *input = serde_json::from_str(&cleaned).unwrap_or(Value::String(cleaned));
            }
        }
        self
    }
}

/// A place to get answers from a person: the terminal, a script (in tests),
/// a callback or a channel (a web UI, a chat approval).
///
/// [`ask`](Self::ask) is `async`: a source waiting for a person never
/// blocks a runtime thread. Implement it with [`async_trait`](crate::async_trait)
/// (the trait stays usable as `Arc<dyn HumanInputSource>`).
///
/// A source is free to fail in any way: `request_human_input` puts a
/// timeout on it and turns an error, a timeout, a closed input and a panic
/// of the source alike into an error, so a gate written with `?` refuses.
/// The texts it is given may hold what a model or a tool wrote: a source
/// that shows them on a terminal escapes every control character in them
/// (as `crew-runtime`'s `TerminalInput` does with
/// `crew_runtime::console::escape_control`), and one that shows them in a
/// web page escapes them for HTML.
///
/// ```
/// use hooks_core::{HumanInputError, HumanInputRequest, HumanInputSource, async_trait};
///
/// /// Approves nothing, without asking anyone.
/// struct Nobody;
///
/// #[async_trait]
/// impl HumanInputSource for Nobody {
///     async fn ask(&self, request: HumanInputRequest) -> Result<String, HumanInputError> {
///         Err(HumanInputError::SourceFailed(format!("nobody is on call for {}", request.prompt)))
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// assert!(Nobody.ask(HumanInputRequest::new("Deploy?", "yes/no")).await.is_err());
/// # }
/// ```
#[async_trait]
pub trait HumanInputSource: Send + Sync {
    /// Shows the request's prompt and default message and returns one
    /// answer (the caller trims it).
    async fn ask(&self, request: HumanInputRequest) -> Result<String, HumanInputError>;

    /// Returns one answer with what else the person said: who answered,
    /// a comment, and arguments they edited for the call to run with. The
    /// default asks [`ask`](Self::ask) and takes its text as the answer.
    ///
    /// Approvals ([`ToolCallHookContext::request_approval`](crate::ToolCallHookContext::request_approval))
    /// read answers through it; a source whose people can edit a call's
    /// arguments (a web inbox) implements it.
    ///
    /// ```
    /// use hooks_core::{HumanAnswer, HumanInputError, HumanInputRequest, HumanInputSource, async_trait};
    /// use serde_json::json;
    ///
    /// /// Approves every e-mail, to the team only.
    /// struct TeamOnly;
    ///
    /// #[async_trait]
    /// impl HumanInputSource for TeamOnly {
    ///     async fn ask(&self, _request: HumanInputRequest) -> Result<String, HumanInputError> {
    ///         Err(HumanInputError::SourceFailed("answers carry edits: use `answer`".into()))
    ///     }
    ///
    ///     async fn answer(&self, request: HumanInputRequest) -> Result<HumanAnswer, HumanInputError> {
    ///         let mut input = request.tool_input.and_then(|v| v.as_object().cloned()).unwrap_or_default();
    ///         input.insert("to".into(), json!("team@example.com"));
    ///         Ok(HumanAnswer::new("yes").with_edited_input(input).with_answered_by("ops-bot"))
    ///     }
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let answer = TeamOnly.answer(HumanInputRequest::new("Send?", "")).await.unwrap();
    /// assert_eq!(answer.edited_input.unwrap()["to"], "team@example.com");
    /// # }
    /// ```
    async fn answer(&self, request: HumanInputRequest) -> Result<HumanAnswer, HumanInputError> {
        self.ask(request).await.map(HumanAnswer::new)
    }

    /// Whether [`ask`](Self::ask) only ever waits by awaiting, never by
    /// blocking its thread. `false` by default: each question of such a
    /// source is asked on a thread of its own, so that a source that does
    /// block (a synchronous read inside `ask`) holds no runtime thread and
    /// its question still gives up on time. A source that returns `true`
    /// is polled where the hook asking is, and is dropped the moment its
    /// question gives up. The sources of this crate that wait for a person
    /// ([`ChannelInput`], [`ScriptedInput`]) return `true`, as does
    /// `crew-runtime`'s `TerminalInput`; a [`CallbackInput`] runs code of yours, and keeps the
    /// default.
    ///
    /// Either way, an answer given after the question's deadline is
    /// refused.
    ///
    /// ```
    /// use hooks_core::{HumanInputSource, ScriptedInput};
    /// assert!(ScriptedInput::new(["yes"]).never_blocks());
    /// ```
    fn never_blocks(&self) -> bool {
        false
    }

    /// Hears what became of a call whose question it answered with a
    /// [`question_id`](HumanAnswer::question_id): it ran, failed, or a
    /// guard refused it after the answer (a later hook, a policy, the
    /// second round of an edited call). A source that keeps its questions
    /// (a store, an inbox) shows it beside the answer, so a person who
    /// approved a call learns what their approval led to. Nothing by
    /// default.
    ///
    /// It is called on the call's path and must not wait: write the news
    /// somewhere that takes it at once, or hand it to a task. A panic here
    /// is contained and ignored.
    ///
    /// ```
    /// use std::sync::Mutex;
    /// use hooks_core::{ApprovedCallOutcome, HumanInputError, HumanInputRequest, HumanInputSource, async_trait};
    ///
    /// #[derive(Default)]
    /// struct Journal(Mutex<Vec<(String, &'static str)>>);
    ///
    /// #[async_trait]
    /// impl HumanInputSource for Journal {
    ///     async fn ask(&self, _request: HumanInputRequest) -> Result<String, HumanInputError> {
    ///         Ok("yes".into())
    ///     }
    ///
    ///     fn settled(&self, question_id: &str, outcome: &ApprovedCallOutcome) {
    ///         if let Ok(mut journal) = self.0.lock() {
    ///             journal.push((question_id.to_owned(), outcome.as_str()));
    ///         }
    ///     }
    /// }
    ///
    /// let journal = Journal::default();
    /// journal.settled("q-1", &ApprovedCallOutcome::Ran);
    /// assert_eq!(journal.0.lock().unwrap()[0], ("q-1".to_owned(), "ran"));
    /// ```
    fn settled(&self, question_id: &str, outcome: &ApprovedCallOutcome) {
        let _ = (question_id, outcome);
    }

    /// Whether this source keeps the place in a tool call's PRE chain
    /// where a hook asks for an approval (see [`keep_gate`](Self::keep_gate)).
    /// `false` by default: a source that asks people need not care. A
    /// runtime that resumes calls in another process (a durable kickoff)
    /// wraps the crew's source in one that says `true`.
    ///
    /// ```
    /// use hooks_core::{HumanInputSource, ScriptedInput};
    /// assert!(!ScriptedInput::new(["yes"]).keeps_gates());
    /// ```
    fn keeps_gates(&self) -> bool {
        false
    }

    /// A hook of a tool call's PRE chain is about to ask for an approval
    /// of the call: `gate` says which hook, where in the chain, and the
    /// arguments as the hooks before it left them. A runtime that can
    /// resume the call elsewhere writes it down here and, resumed, starts
    /// the call's PRE chain again at that hook
    /// ([`ToolCallHookContext::resume_chain_at`](crate::ToolCallHookContext::resume_chain_at)),
    /// so that the hooks before it (a counter, a rate limit) are not run
    /// twice for one call. The question is asked once the returned future
    /// is done; an error refuses it, and so blocks the call.
    ///
    /// Called only for a source whose [`keeps_gates`](Self::keeps_gates)
    /// says `true`; not for the second round of an edited call, nor after
    /// an approver edited the call (a resumed call then runs its whole
    /// chain again, as an edited call must).
    ///
    /// ```
    /// use std::sync::Mutex;
    /// use hooks_core::{ChainGate, GateFuture, HumanInputError, HumanInputRequest, HumanInputSource, async_trait};
    ///
    /// #[derive(Default)]
    /// struct Remembers(Mutex<Vec<(usize, String)>>);
    ///
    /// #[async_trait]
    /// impl HumanInputSource for Remembers {
    ///     async fn ask(&self, _request: HumanInputRequest) -> Result<String, HumanInputError> {
    ///         Ok("yes".into())
    ///     }
    ///     fn keeps_gates(&self) -> bool {
    ///         true
    ///     }
    ///     fn keep_gate(&self, gate: ChainGate) -> GateFuture {
    ///         if let Ok(mut kept) = self.0.lock() {
    ///             kept.push((gate.position, gate.hook.clone()));
    ///         }
    ///         Box::pin(async { Ok(()) })
    ///     }
    /// }
    /// # let _ = Remembers::default();
    /// ```
    fn keep_gate(&self, gate: ChainGate) -> GateFuture {
        let _ = gate;
        Box::pin(std::future::ready(Ok(())))
    }
}

/// Where a tool call's PRE chain asks a person about it: which hook, in
/// which place of the chain, and the call's arguments as the hooks before
/// it left them (see [`HumanInputSource::keep_gate`]). Its `Debug` shows
/// the arguments' names, never their values (the arguments are not
/// redacted: a hook may have put a credential in them).
///
/// ```
/// use hooks_core::ChainGate;
/// use serde_json::{json, Map};
///
/// let mut input = Map::new();
/// input.insert("token".into(), json!("s3cret"));
/// let gate = ChainGate::new(2, "approve_refunds", input);
/// assert_eq!((gate.position, gate.hook.as_str()), (2, "approve_refunds"));
/// assert!(!format!("{gate:?}").contains("s3cret"));
/// ```
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChainGate {
    /// The hook's place among the hooks the call's PRE chain holds for its
    /// tool (0 first), whatever their filters decided.
    pub position: usize,
    /// The hook's name ([`HookInfo::name`](crate::HookInfo::name)).
    pub hook: String,
    /// The arguments the hook was given.
    pub input: Map<String, Value>,
}

impl ChainGate {
    /// The gate at `position`, named `hook`, with these arguments.
    ///
    /// ```
    /// let gate = hooks_core::ChainGate::new(0, "approve", Default::default());
    /// assert!(gate.input.is_empty());
    /// ```
    pub fn new(position: usize, hook: impl Into<String>, input: Map<String, Value>) -> Self {
        ChainGate {
            position,
            hook: hook.into(),
            input,
        }
    }
}

impl std::fmt::Debug for ChainGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChainGate")
            .field("position", &self.position)
            .field("hook", &self.hook)
            .field("input", &self.input.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// What [`HumanInputSource::keep_gate`] returns: done once the gate is
/// kept; an error refuses the question.
///
/// ```
/// let kept: hooks_core::GateFuture = Box::pin(async { Ok(()) });
/// # let _ = kept;
/// ```
pub type GateFuture = Pin<Box<dyn Future<Output = Result<(), HumanInputError>> + Send + 'static>>;

/// What became of a call a person answered, as the call's runtime tells
/// the source that asked ([`HumanInputSource::settled`]).
///
/// ```
/// use hooks_core::ApprovedCallOutcome;
///
/// let refused = ApprovedCallOutcome::Refused {
///     source: "budget".into(),
///     reason: "over the monthly limit".into(),
/// };
/// assert_eq!(refused.as_str(), "refused");
/// assert_eq!(ApprovedCallOutcome::Ran.as_str(), "ran");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ApprovedCallOutcome {
    /// The tool ran and returned a result.
    Ran,
    /// The tool ran and failed (an error, a panic, a timeout), or the
    /// agent has no such tool.
    Failed {
        /// The error, as the agent is told it.
        error: String,
    },
    /// A guard refused the call after the answer: a later hook, a policy,
    /// the second round of an edited call, or an edit that could not be
    /// applied.
    Refused {
        /// Who refused it (the abort's source).
        source: String,
        /// Why.
        reason: String,
    },
    /// The call's process went while the tool ran, and nothing could tell
    /// whether it acted (a durable kickoff's call in doubt, SPEC §13).
    InDoubt {
        /// Why nothing could tell.
        why: String,
    },
}

impl ApprovedCallOutcome {
    /// `ran`, `failed`, `refused` or `in_doubt`: how a store keeps it.
    ///
    /// ```
    /// let failed = hooks_core::ApprovedCallOutcome::Failed { error: "disk full".into() };
    /// assert_eq!(failed.as_str(), "failed");
    /// ```
    pub fn as_str(&self) -> &'static str {
        match self {
            ApprovedCallOutcome::Ran => "ran",
            ApprovedCallOutcome::Failed { .. } => "failed",
            ApprovedCallOutcome::Refused { .. } => "refused",
            ApprovedCallOutcome::InDoubt { .. } => "in_doubt",
        }
    }
}

/// A person's answer with what came with it: who gave it, a comment, and
/// the arguments they edited for the call to run with.
///
/// [`HumanInputSource::answer`] returns it; an approval
/// ([`ToolCallHookContext::request_approval`](crate::ToolCallHookContext::request_approval))
/// resolves to it. An approval hook that lets the call run with an edit
/// puts [`edited_input`](Self::edited_input) in the context's `tool_input`:
/// the tool receives the edit.
///
/// ```
/// use hooks_core::HumanAnswer;
/// use serde_json::{Map, json};
///
/// let mut edit = Map::new();
/// edit.insert("amount".into(), json!(40));
/// let answer = HumanAnswer::new(" yes ")
///     .with_edited_input(edit)
///     .with_answered_by("alice")
///     .with_comment("capped at 40");
/// assert_eq!(answer.text, " yes ");
/// assert_eq!(answer.answered_by.as_deref(), Some("alice"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct HumanAnswer {
    /// The answer (`yes`, `no`, …); trimmed once it reaches the hook.
    pub text: String,
    /// The arguments the person edited, to run the call with instead of
    /// the ones asked about.
    pub edited_input: Option<serde_json::Map<String, Value>>,
    /// Who answered, when the source knows.
    pub answered_by: Option<String>,
    /// What the person wrote beside the answer.
    pub comment: Option<String>,
    /// The source's own id of the question, when it keeps one (a store's
    /// row): the runtime tells the source what became of the call under
    /// this id ([`HumanInputSource::settled`]).
    pub question_id: Option<String>,
}

impl HumanAnswer {
    /// An answer of `text`, with nothing else.
    ///
    /// ```
    /// assert_eq!(hooks_core::HumanAnswer::new("no").text, "no");
    /// ```
    pub fn new(text: impl Into<String>) -> Self {
        HumanAnswer {
            text: text.into(),
            ..HumanAnswer::default()
        }
    }

    /// The call is to run with these arguments instead.
    ///
    /// ```
    /// let answer = hooks_core::HumanAnswer::new("yes").with_edited_input(Default::default());
    /// assert!(answer.edited_input.is_some());
    /// ```
    pub fn with_edited_input(mut self, input: serde_json::Map<String, Value>) -> Self {
        self.edited_input = Some(input);
        self
    }

    /// Names who answered.
    ///
    /// ```
    /// let answer = hooks_core::HumanAnswer::new("yes").with_answered_by("bob");
    /// assert_eq!(answer.answered_by.as_deref(), Some("bob"));
    /// ```
    pub fn with_answered_by(mut self, who: impl Into<String>) -> Self {
        self.answered_by = Some(who.into());
        self
    }

    /// Adds the person's comment.
    ///
    /// ```
    /// let answer = hooks_core::HumanAnswer::new("no").with_comment("wrong account");
    /// assert_eq!(answer.comment.as_deref(), Some("wrong account"));
    /// ```
    pub fn with_comment(mut self, comment: impl Into<String>) -> Self {
        self.comment = Some(comment.into());
        self
    }

    /// Names the question in the source's own terms, so that the source
    /// hears what became of the call ([`HumanInputSource::settled`]).
    ///
    /// ```
    /// let answer = hooks_core::HumanAnswer::new("yes").with_question_id("q-17");
    /// assert_eq!(answer.question_id.as_deref(), Some("q-17"));
    /// ```
    pub fn with_question_id(mut self, id: impl Into<String>) -> Self {
        self.question_id = Some(id.into());
        self
    }
}

/// The answer to a question asked with `request_human_input`: await it
/// (in an `async` hook).
///
/// Nothing is asked until it is awaited. It always ends: with the trimmed
/// answer, or with a [`HumanInputError`] when the source failed, panicked
/// (the panic is contained here and never reaches the hook), was closed,
/// or gave no answer within the context's timeout
/// ([`DEFAULT_HUMAN_INPUT_TIMEOUT`] unless set). Dropping it withdraws the
/// question: a channel's reply then finds nobody waiting.
///
/// ```
/// use std::sync::Arc;
/// use hooks_core::{HumanInputFuture, ScriptedInput, ToolCallHookContext};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let ctx = ToolCallHookContext::new("send_email", Default::default())
///     .with_human_input(Arc::new(ScriptedInput::new([" yes\n"])));
/// let question: HumanInputFuture = ctx.request_human_input("Send?", "yes/no");
/// assert_eq!(question.await.as_deref(), Ok("yes"));
/// # }
/// ```
#[must_use = "nobody is asked until this is awaited: write `ctx.request_human_input(..).await` \
              in an `async` hook (register it with `register_async_hook`)"]
pub struct HumanInputFuture<T = String> {
    answer: Pin<Box<dyn Future<Output = Result<T, HumanInputError>> + Send>>,
    /// The clock of the hook asking, while the question is open: the
    /// hook's time limit does not run meanwhile.
    open_on: Option<Arc<crate::hook_clock::HookClock>>,
    started: bool,
}

impl<T> HumanInputFuture<T> {
    /// The future of `answer`, not yet open on a hook's clock.
    pub(crate) fn new(
        answer: impl Future<Output = Result<T, HumanInputError>> + Send + 'static,
    ) -> Self {
        HumanInputFuture {
            answer: Box::pin(answer),
            open_on: None,
            started: false,
        }
    }
}

impl<T> Future for HumanInputFuture<T> {
    type Output = Result<T, HumanInputError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if !self.started {
            self.started = true;
            // Polled first inside the hook that asks (an awaiting dispatch
            // times it): its clock stops while the person thinks.
            self.open_on = crate::hook_clock::current();
            if let Some(clock) = &self.open_on {
                clock.question_opened();
            }
        }
        let answer = self.answer.as_mut().poll(cx);
        if answer.is_ready() {
            self.close();
        }
        answer
    }
}

impl<T> HumanInputFuture<T> {
    fn close(&mut self) {
        if let Some(clock) = self.open_on.take() {
            clock.question_closed();
        }
    }
}

impl<T> Drop for HumanInputFuture<T> {
    fn drop(&mut self) {
        self.close();
    }
}

impl<T> fmt::Debug for HumanInputFuture<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HumanInputFuture").finish_non_exhaustive()
    }
}

/// Asks `source` (refusing at once when there is none) within `timeout` and
/// trims the answer: what the contexts' `request_human_input` does.
///
/// Whatever the source does, no answer is an error: a panic of the source
/// is contained here and reported as [`HumanInputError::SourceFailed`], so
/// it never unwinds into the hook that asked, and `?` there refuses.
pub(crate) fn ask(
    source: Option<Arc<dyn HumanInputSource>>,
    request: HumanInputRequest,
    timeout: Duration,
) -> HumanInputFuture {
    // A person is an exit too: the crew's redaction in scope (the hook
    // asking runs in it) cleans what they are shown.
    let answer = answering(source, request.redacted_in_scope(), timeout);
    HumanInputFuture {
        answer: Box::pin(async move {
            let answer = answer.await?;
            // A text answer cannot carry an edit: running the call as asked
            // about would ignore what the person decided.
            if answer.edited_input.is_some() {
                return Err(HumanInputError::SourceFailed(
                    "the answer edits the call's arguments, which a text answer cannot carry \
                     (ask with `request_approval`)"
                        .into(),
                ));
            }
            Ok(answer.text)
        }),
        open_on: None,
        started: false,
    }
}

/// An answer given at once, without asking anybody: an approval already
/// given for exactly this call.
pub(crate) fn answered_already(answer: HumanAnswer) -> HumanInputFuture<HumanAnswer> {
    HumanInputFuture {
        answer: Box::pin(std::future::ready(Ok(answer))),
        open_on: None,
        started: false,
    }
}

/// The answer of `source` within `timeout`, its text trimmed. `request` is
/// already redacted. With no source nobody is asked and the answer is
/// [`HumanInputError::NoSource`]: the engine has no default person, and a
/// question nobody can answer refuses (approvals fail closed).
pub(crate) fn answering(
    source: Option<Arc<dyn HumanInputSource>>,
    mut request: HumanInputRequest,
    timeout: Duration,
) -> impl Future<Output = Result<HumanAnswer, HumanInputError>> + Send + 'static {
    request.timeout = Some(timeout);
    async move {
        // A timeout too large to be a deadline is no deadline.
        let deadline = std::time::Instant::now().checked_add(timeout);
        let source = source.ok_or(HumanInputError::NoSource)?;
        let never_blocks = source.never_blocks();
        // The source is only used through `&self`; one that a panic left in
        // a bad state fails its next question, which refuses as well. The
        // call itself is inside the contained future: a source whose `ask`
        // panics before returning its future is caught too.
        let asking = crate::contain::contain_panic_async(AssertUnwindSafe(async move {
            source.answer(request).await
        }));
        // A source that may block its thread (a synchronous read inside
        // `ask`) asks on a thread of its own: it holds no runtime worker,
        // and the timeout below fires on time whatever it does.
        let answered = if never_blocks {
            within(timeout, asking).await?.map(Some)
        } else {
            within(timeout, off_thread(asking)?).await?
        };
        // An answer is only taken before the deadline: one that comes
        // later (however it got here) never approves anything.
        if deadline.is_some_and(|deadline| std::time::Instant::now() >= deadline) {
            return Err(HumanInputError::TimedOut(timeout));
        }
        match answered {
            None => Err(HumanInputError::TimedOut(timeout)),
            Some(None) => Err(HumanInputError::SourceFailed(
                "it stopped without answering".into(),
            )),
            Some(Some(Ok(answer))) => {
                let mut answer = answer?;
                answer.text = answer.text.trim().to_owned();
                Ok(answer)
            }
            Some(Some(Err(panic))) => {
                let message = crate::panic::panic_message(&*panic);
                crate::panic::drop_payload(panic);
                Err(HumanInputError::SourceFailed(format!(
                    "it panicked: {message}"
                )))
            }
        }
    }
}

/// Runs `future` to its end on a new thread (in the context of the tokio
/// runtime the caller runs on, if any, so that tokio's timers and channels
/// work there) and returns a future of its output: `None` when the thread
/// ended without one.
///
/// Dropping the returned future withdraws the work: the thread drops
/// `future` at its next poll. Only a question of a source that may block
/// takes this path, at a person's pace: a thread each is cheap beside it.
fn off_thread<F>(
    future: F,
) -> Result<impl Future<Output = Option<F::Output>> + Send, HumanInputError>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let (reply, output) = oneshot::channel();
    let (withdraw, mut withdrawn) = oneshot::channel::<()>();
    let runtime = tokio::runtime::Handle::try_current().ok();
    let work = async move {
        let mut future = std::pin::pin!(future);
        let output = std::future::poll_fn(|cx| {
            if Pin::new(&mut withdrawn).poll(cx).is_ready() {
                return Poll::Ready(None);
            }
            future.as_mut().poll(cx).map(Some)
        })
        .await;
        if let Some(output) = output {
            let _ = reply.send(output);
        }
    };
    std::thread::Builder::new()
        .name("human-input".into())
        .spawn(move || {
            // A runtime shutting down under the thread panics in its
            // timers: nothing is left to answer then.
            let ran = crate::panic::catch_quietly(AssertUnwindSafe(move || match runtime {
                Some(runtime) => runtime.block_on(work),
                None => futures_executor::block_on(work),
            }));
            if let Err(payload) = ran {
                crate::panic::drop_payload(payload);
            }
        })
        .map_err(|error| {
            HumanInputError::Io(format!("could not start asking the question: {error}"))
        })?;
    Ok(async move {
        let _withdraw = withdraw;
        output.await.ok()
    })
}

/// `future`'s output, or `None` when `timeout` passed first.
async fn within<F: Future>(
    timeout: Duration,
    future: F,
) -> Result<Option<F::Output>, HumanInputError> {
    let mut deadline = Deadline::start(timeout)?;
    let mut future = std::pin::pin!(future);
    Ok(std::future::poll_fn(|cx| {
        if let Poll::Ready(output) = future.as_mut().poll(cx) {
            return Poll::Ready(Some(output));
        }
        deadline.poll_elapsed(cx).map(|()| None)
    })
    .await)
}

/// When a question gives up: on the tokio timer of the runtime the hook
/// runs on, or, with no runtime (a hook driven by a synchronous dispatch)
/// or one built without timers, on a thread of its own that ends as soon
/// as the question does.
enum Deadline {
    Timer(Pin<Box<tokio::time::Sleep>>),
    Thread {
        elapsed: oneshot::Receiver<()>,
        /// Dropped with the question: the timer thread then ends.
        _cancel: std::sync::mpsc::Sender<()>,
    },
}

impl Deadline {
    fn start(timeout: Duration) -> Result<Deadline, HumanInputError> {
        if tokio::runtime::Handle::try_current().is_ok() {
            // A runtime without timers panics here (nothing else can tell).
            match crate::panic::catch_quietly(|| tokio::time::sleep(timeout)) {
                Ok(sleep) => return Ok(Deadline::Timer(Box::pin(sleep))),
                Err(payload) => crate::panic::drop_payload(payload),
            }
        }
        let (cancel, cancelled) = std::sync::mpsc::channel::<()>();
        let (fire, elapsed) = oneshot::channel();
        std::thread::Builder::new()
            .name("human-input-timeout".into())
            .spawn(move || {
                if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    cancelled.recv_timeout(timeout)
                {
                    let _ = fire.send(());
                }
            })
            // Without a timer the question could wait forever: refuse.
            .map_err(|error| {
                HumanInputError::Io(format!("could not start the question's timer: {error}"))
            })?;
        Ok(Deadline::Thread {
            elapsed,
            _cancel: cancel,
        })
    }

    fn poll_elapsed(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        match self {
            Deadline::Timer(sleep) => sleep.as_mut().poll(cx),
            // A timer thread that is gone without firing cannot time the
            // question any more: give up rather than wait forever.
            Deadline::Thread { elapsed, .. } => Pin::new(elapsed).poll(cx).map(|_| ()),
        }
    }
}

/// Replays fixed answers in order, then fails with
/// [`HumanInputError::Exhausted`]. Records every request it was given,
/// with the call it was about.
///
/// ```
/// use hooks_core::{HumanInputError, HumanInputRequest, HumanInputSource, ScriptedInput};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let script = ScriptedInput::new(["yes"]);
/// let send = HumanInputRequest::new("Send?", "yes/no").with_call_id("call_1");
/// assert_eq!(script.ask(send).await.as_deref(), Ok("yes"));
/// let buy = HumanInputRequest::new("Buy?", "yes/no");
/// assert_eq!(script.ask(buy).await, Err(HumanInputError::Exhausted));
/// assert_eq!(script.requests()[0].call_id.as_deref(), Some("call_1"));
/// # }
/// ```
#[derive(Debug, Default)]
pub struct ScriptedInput {
    answers: Mutex<VecDeque<Result<String, HumanInputError>>>,
    requests: Mutex<Vec<HumanInputRequest>>,
}

impl ScriptedInput {
    /// A source that gives these answers, one per question.
    ///
    /// ```
    /// use hooks_core::{HumanInputRequest, HumanInputSource, ScriptedInput};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let script = ScriptedInput::new(["no", "yes"]);
    /// assert_eq!(script.ask(HumanInputRequest::new("first?", "")).await.as_deref(), Ok("no"));
    /// assert_eq!(script.ask(HumanInputRequest::new("second?", "")).await.as_deref(), Ok("yes"));
    /// # }
    /// ```
    pub fn new<I, S>(answers: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        ScriptedInput {
            answers: Mutex::new(answers.into_iter().map(|a| Ok(a.into())).collect()),
            requests: Mutex::new(Vec::new()),
        }
    }

    /// Queues a failure as the next answer.
    ///
    /// ```
    /// use hooks_core::{HumanInputError, HumanInputRequest, HumanInputSource, ScriptedInput};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let script = ScriptedInput::new(["yes"]).then_fail(HumanInputError::Closed);
    /// assert!(script.ask(HumanInputRequest::new("first?", "")).await.is_ok());
    /// let second = script.ask(HumanInputRequest::new("second?", "")).await;
    /// assert_eq!(second, Err(HumanInputError::Closed));
    /// # }
    /// ```
    pub fn then_fail(self, error: HumanInputError) -> Self {
        self.answers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push_back(Err(error));
        self
    }

    /// The requests asked so far, in order.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use hooks_core::{ScriptedInput, ToolCallHookContext};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let script = Arc::new(ScriptedInput::new(["yes"]));
    /// let ctx = ToolCallHookContext::new("send_email", Default::default())
    ///     .with_call_id("call_3")
    ///     .with_human_input(script.clone());
    /// let _ = ctx.request_human_input("Send?", "yes/no").await;
    /// let asked = script.requests();
    /// assert_eq!(asked[0].call_id.as_deref(), Some("call_3"));
    /// assert_eq!(asked[0].tool_name.as_deref(), Some("send_email"));
    /// # }
    /// ```
    pub fn requests(&self) -> Vec<HumanInputRequest> {
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The `(prompt, default_message)` pairs asked so far.
    ///
    /// ```
    /// use hooks_core::{HumanInputRequest, HumanInputSource, ScriptedInput};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let script = ScriptedInput::new(["yes"]);
    /// let _ = script.ask(HumanInputRequest::new("Send?", "yes/no")).await;
    /// assert_eq!(script.prompts(), [("Send?".to_owned(), "yes/no".to_owned())]);
    /// # }
    /// ```
    pub fn prompts(&self) -> Vec<(String, String)> {
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|request| (request.prompt.clone(), request.default_message.clone()))
            .collect()
    }
}

#[async_trait]
impl HumanInputSource for ScriptedInput {
    async fn ask(&self, request: HumanInputRequest) -> Result<String, HumanInputError> {
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(request);
        self.answers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front()
            .unwrap_or(Err(HumanInputError::Exhausted))
    }

    fn never_blocks(&self) -> bool {
        true
    }
}

/// The future of a [`CallbackInput`]'s function, boxed.
type CallbackFuture = Pin<Box<dyn Future<Output = Result<String, HumanInputError>> + Send>>;

/// Asks through an `async` function: a web UI, a chat message, a policy
/// service.
///
/// The function gets each [`HumanInputRequest`] and returns a future of the
/// answer, which is awaited like any other source (with the timeout of
/// `request_human_input`, its panics contained). It runs on the runtime's
/// threads, so it must not block: await an HTTP client or a channel in it,
/// and hand blocking work (a synchronous client, a blocking read) to
/// `tokio::task::spawn_blocking`.
///
/// ```
/// use hooks_core::{CallbackInput, HumanInputRequest, HumanInputSource};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// // A policy that approves only e-mails to the company's own domain.
/// let policy = CallbackInput::new(|request: HumanInputRequest| async move {
///     let to = request.tool_input.as_ref().and_then(|input| input["to"].as_str());
///     let internal = to.is_some_and(|to| to.ends_with("@example.com"));
///     Ok(if internal { "yes" } else { "no" }.to_owned())
/// });
///
/// let request = HumanInputRequest::new("Send?", "yes/no")
///     .with_tool("send_email", serde_json::json!({"to": "team@example.com"}));
/// assert_eq!(policy.ask(request).await.as_deref(), Ok("yes"));
/// # }
/// ```
pub struct CallbackInput {
    ask: Box<dyn Fn(HumanInputRequest) -> CallbackFuture + Send + Sync>,
}

impl CallbackInput {
    /// A source that awaits `ask(request)` for each question.
    ///
    /// ```
    /// use hooks_core::{CallbackInput, HumanInputError, HumanInputRequest, HumanInputSource};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let nobody = CallbackInput::new(|_: HumanInputRequest| async { Err(HumanInputError::Closed) });
    /// assert!(nobody.ask(HumanInputRequest::new("Send?", "")).await.is_err());
    /// # }
    /// ```
    pub fn new<F, Fut>(ask: F) -> Self
    where
        F: Fn(HumanInputRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<String, HumanInputError>> + Send + 'static,
    {
        CallbackInput {
            ask: Box::new(move |request| Box::pin(ask(request))),
        }
    }
}

#[async_trait]
impl HumanInputSource for CallbackInput {
    async fn ask(&self, request: HumanInputRequest) -> Result<String, HumanInputError> {
        (self.ask)(request).await
    }
}

impl fmt::Debug for CallbackInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallbackInput").finish_non_exhaustive()
    }
}

/// Where the answer to one [`PendingHumanInput`] goes: send it once.
///
/// Kept apart from the request (see [`PendingHumanInput::into_parts`]), it
/// lets a UI store the reply handles of open questions by call id and
/// answer each when the person clicks.
///
/// ```
/// use hooks_core::{ChannelInput, HumanInputRequest, HumanInputSource};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let (source, mut questions) = ChannelInput::new(8);
/// let asking = tokio::spawn(async move {
///     source.ask(HumanInputRequest::new("Send?", "").with_call_id("call_1")).await
/// });
/// let question = questions.recv().await.expect("a question");
/// let (request, reply) = question.into_parts();
/// assert_eq!(request.call_id.as_deref(), Some("call_1"));
/// assert!(!reply.is_closed());
/// assert!(reply.send("yes"));
/// assert_eq!(asking.await.expect("asked").as_deref(), Ok("yes"));
/// # }
/// ```
#[derive(Debug)]
pub struct HumanInputReply {
    reply: oneshot::Sender<String>,
}

impl HumanInputReply {
    /// Sends the answer back to the waiting question. Returns `false` if
    /// nobody waits for it any more (the question timed out, or its call
    /// was cancelled): the answer then approves nothing.
    ///
    /// ```
    /// use hooks_core::{ChannelInput, HumanInputRequest, HumanInputSource};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let (source, mut questions) = ChannelInput::new(1);
    /// let asking = tokio::spawn(async move { source.ask(HumanInputRequest::new("Send?", "")).await });
    /// let (_, reply) = questions.recv().await.expect("a question").into_parts();
    /// assert!(reply.send("no"));
    /// assert_eq!(asking.await.expect("asked").as_deref(), Ok("no"));
    /// # }
    /// ```
    pub fn send(self, answer: impl Into<String>) -> bool {
        self.reply.send(answer.into()).is_ok()
    }

    /// Whether the question stopped waiting: an answer would be dropped.
    ///
    /// ```
    /// use hooks_core::{ChannelInput, HumanInputRequest, HumanInputSource};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let (source, mut questions) = ChannelInput::new(1);
    /// let asking = tokio::spawn(async move { source.ask(HumanInputRequest::new("Send?", "")).await });
    /// let (_, reply) = questions.recv().await.expect("a question").into_parts();
    /// // The call is cancelled: its question is withdrawn.
    /// asking.abort();
    /// let _ = asking.await;
    /// assert!(reply.is_closed());
    /// assert!(!reply.send("yes"), "the answer approves nothing");
    /// # }
    /// ```
    pub fn is_closed(&self) -> bool {
        self.reply.is_closed()
    }
}

/// One question sent through a [`ChannelInput`]: the
/// [`request`](Self::request) and a way to [`reply`](Self::reply) to it.
/// Dropping it unanswered makes the question fail with
/// [`HumanInputError::Closed`].
///
/// ```
/// use hooks_core::{ChannelInput, HumanInputRequest, HumanInputSource};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let (source, mut questions) = ChannelInput::new(8);
/// let ui = tokio::spawn(async move {
///     let question = questions.recv().await.expect("a question");
///     assert_eq!(question.request().prompt, "Send?");
///     question.reply("yes")
/// });
/// let answer = source.ask(HumanInputRequest::new("Send?", "yes/no")).await;
/// assert_eq!(answer.as_deref(), Ok("yes"));
/// assert!(ui.await.expect("the UI task"));
/// # }
/// ```
#[derive(Debug)]
pub struct PendingHumanInput {
    request: HumanInputRequest,
    reply: HumanInputReply,
}

impl PendingHumanInput {
    /// The question, and the call it is about.
    ///
    /// ```
    /// # use hooks_core::PendingHumanInput;
    /// fn show(question: &PendingHumanInput) -> String {
    ///     let request = question.request();
    ///     format!("{} ({})", request.prompt, request.call_id.as_deref().unwrap_or("no call"))
    /// }
    /// # let _ = show;
    /// ```
    pub fn request(&self) -> &HumanInputRequest {
        &self.request
    }

    /// Sends the answer back to the waiting question. Returns `false` if
    /// nobody waits for it any more (the question timed out, or its call
    /// was cancelled).
    ///
    /// ```
    /// # use hooks_core::PendingHumanInput;
    /// fn approve(question: PendingHumanInput) -> bool {
    ///     question.reply("yes")
    /// }
    /// # let _ = approve;
    /// ```
    pub fn reply(self, answer: impl Into<String>) -> bool {
        self.reply.send(answer)
    }

    /// The request and its reply handle, apart (see [`HumanInputReply`]).
    ///
    /// ```
    /// # use std::collections::HashMap;
    /// # use hooks_core::{HumanInputReply, PendingHumanInput};
    /// fn keep(question: PendingHumanInput, open: &mut HashMap<String, HumanInputReply>) {
    ///     let (request, reply) = question.into_parts();
    ///     open.insert(request.call_id.unwrap_or_default(), reply);
    /// }
    /// # let _ = keep;
    /// ```
    pub fn into_parts(self) -> (HumanInputRequest, HumanInputReply) {
        (self.request, self.reply)
    }
}

/// Sends each question over a tokio channel to the application (a web UI,
/// a chat bot) and awaits its reply.
///
/// The application reads [`PendingHumanInput`]s from the receiver
/// [`new`](Self::new) returns, shows each request, and answers through its
/// reply handle, in any order: each reply goes to the very question it came
/// with. A receiver that is gone, or a question dropped unanswered, is
/// [`HumanInputError::Closed`]; no reply within the timeout of
/// `request_human_input` is [`HumanInputError::TimedOut`], and a reply that
/// comes later approves nothing. Cloning gives another sender on the same
/// channel.
///
/// ```
/// use std::sync::Arc;
/// use hooks_core::{ChannelInput, HumanInputError, ToolCallHookContext};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let (source, questions) = ChannelInput::new(8);
/// drop(questions); // the UI is gone
/// let ctx = ToolCallHookContext::new("send_email", Default::default())
///     .with_human_input(Arc::new(source));
/// assert_eq!(ctx.request_human_input("Send?", "").await, Err(HumanInputError::Closed));
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ChannelInput {
    requests: mpsc::Sender<PendingHumanInput>,
}

impl ChannelInput {
    /// A source and the receiving end of its questions. At most `capacity`
    /// questions (at least 1) wait in the channel unread; a question past
    /// that waits for room, within its timeout.
    ///
    /// ```
    /// use hooks_core::ChannelInput;
    ///
    /// let (source, questions) = ChannelInput::new(16);
    /// # let _ = (source, questions);
    /// ```
    pub fn new(capacity: usize) -> (Self, mpsc::Receiver<PendingHumanInput>) {
        let (requests, receiver) = mpsc::channel(capacity.max(1));
        (ChannelInput { requests }, receiver)
    }
}

#[async_trait]
impl HumanInputSource for ChannelInput {
    async fn ask(&self, request: HumanInputRequest) -> Result<String, HumanInputError> {
        let (reply, answer) = oneshot::channel();
        let question = PendingHumanInput {
            request,
            reply: HumanInputReply { reply },
        };
        self.requests
            .send(question)
            .await
            .map_err(|_| HumanInputError::Closed)?;
        answer.await.map_err(|_| HumanInputError::Closed)
    }

    fn never_blocks(&self) -> bool {
        true
    }
}

impl From<HumanInputError> for crate::HookAborted {
    fn from(error: HumanInputError) -> Self {
        crate::HookAborted::new(format!("no human approval: {error}"), "human-input")
    }
}
