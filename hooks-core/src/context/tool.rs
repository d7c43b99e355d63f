//! The context every tool-call hook receives.

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use super::HookContext;
use super::{AgentInfo, CrewInfo, TaskInfo, ToolInfo};
use crate::extensions::Extensions;
use crate::human::{
    ApprovedCallOutcome, DEFAULT_HUMAN_INPUT_TIMEOUT, HumanInputFuture, HumanInputRequest,
    HumanInputSource,
};
use crate::name::normalize_tool_name;
use crate::outcome::HookAborted;

/// A tool's result as the tool produced it, before any rendering or hook
/// replacement: reachable as JSON and, when the tool returned a typed value,
/// by downcast.
///
/// ```
/// use hooks_core::RawToolResult;
/// use serde_json::json;
///
/// #[derive(Debug, PartialEq)]
/// struct Weather {
///     celsius: i32,
/// }
///
/// // A POST_TOOL_CALL hook can read the tool's own value, not just its text.
/// let raw = RawToolResult::typed(Weather { celsius: 21 }, json!({"celsius": 21}));
/// assert_eq!(raw.downcast_ref::<Weather>(), Some(&Weather { celsius: 21 }));
/// assert_eq!(raw.as_json()["celsius"], 21);
/// assert_eq!(RawToolResult::text("sunny").as_str(), Some("sunny"));
/// ```
#[derive(Clone)]
pub struct RawToolResult {
    json: Value,
    typed: Option<Arc<dyn Any + Send + Sync>>,
}

impl RawToolResult {
    /// A result that is only JSON (a dynamic tool's output).
    pub fn from_json(json: Value) -> Self {
        RawToolResult { json, typed: None }
    }

    /// A plain-text result (also used for blocked calls and tool errors).
    pub fn text(text: impl Into<String>) -> Self {
        RawToolResult::from_json(Value::String(text.into()))
    }

    /// A typed result, kept as the value and as its JSON form.
    pub fn typed<T: Any + Send + Sync>(value: T, json: Value) -> Self {
        RawToolResult {
            json,
            typed: Some(Arc::new(value)),
        }
    }

    /// The result as JSON.
    pub fn as_json(&self) -> &Value {
        &self.json
    }

    /// The result as text, when it is a JSON string.
    pub fn as_str(&self) -> Option<&str> {
        self.json.as_str()
    }

    /// The typed value, when the tool returned a `T`.
    pub fn downcast_ref<T: Any>(&self) -> Option<&T> {
        self.typed.as_deref()?.downcast_ref::<T>()
    }
}

impl fmt::Debug for RawToolResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawToolResult")
            .field("json", &self.json)
            .field("typed", &self.typed.is_some())
            .finish()
    }
}

/// What happened to a tool call, as `POST_TOOL_CALL` hooks see it: no need
/// to compare `tool_result` with a message.
///
/// ```
/// use hooks_core::{ToolCallHookContext, ToolCallStatus};
/// fn log_outcome(ctx: &mut ToolCallHookContext) {
///     match ctx.status() {
///         ToolCallStatus::Ran => {}
///         ToolCallStatus::Blocked(abort) => eprintln!("blocked by {}", abort.source),
///         ToolCallStatus::Failed { error } => eprintln!("failed: {error}"),
///         ToolCallStatus::NotFound => eprintln!("no tool {}", ctx.tool_name()),
///         ToolCallStatus::Pending => {}
///         _ => {}
///     }
/// }
/// # log_outcome(&mut ToolCallHookContext::new("t", Default::default()));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ToolCallStatus {
    /// The PRE chain is running: nothing has happened yet.
    #[default]
    Pending,
    /// The tool ran and returned a result.
    Ran,
    /// A PRE hook blocked the call; the tool did not run.
    Blocked(HookAborted),
    /// The tool ran and failed (an error, a panic, a timeout).
    Failed {
        /// The error, as the agent is told it (without the
        /// `Error executing tool: ` prefix).
        error: String,
    },
    /// The model named a tool the agent does not have.
    NotFound,
}

impl ToolCallStatus {
    /// The outcome a call's status says, once the tool ran or the PRE
    /// chain blocked it; `None` while it is pending.
    pub(crate) fn approved_outcome(&self) -> Option<ApprovedCallOutcome> {
        Some(match self {
            ToolCallStatus::Pending => return None,
            ToolCallStatus::Ran => ApprovedCallOutcome::Ran,
            ToolCallStatus::Blocked(abort) => ApprovedCallOutcome::Refused {
                source: abort.source.clone(),
                reason: abort.reason.clone(),
            },
            ToolCallStatus::Failed { error } => ApprovedCallOutcome::Failed {
                error: error.clone(),
            },
            ToolCallStatus::NotFound => ApprovedCallOutcome::Failed {
                error: "the agent has no such tool".into(),
            },
        })
    }
}

/// Everything a hook knows about one tool call.
///
/// `PRE_TOOL_CALL` and `POST_TOOL_CALL` hooks of one call receive the same
/// context, so a PRE hook can leave a value in [`extensions`](Self::extensions)
/// (a start time, say) for a POST hook.
///
/// Edit `tool_input` in place: what the PRE chain leaves there is exactly
/// what the tool receives. The tool's name is read-only
/// ([`tool_name`](Self::tool_name)): a hook cannot change which tool a call
/// is, and every chain of the call filters on the name it started with.
pub struct ToolCallHookContext {
    tool_name: Arc<str>,
    tool_key: u64,
    /// The tool's arguments, mutable by PRE hooks.
    pub tool_input: Map<String, Value>,
    /// The tool, absent when the model named a tool that does not exist.
    pub tool: Option<Arc<dyn ToolInfo>>,
    /// The agent making the call, absent for a call outside an agent.
    pub agent: Option<Arc<dyn AgentInfo>>,
    /// The task being worked on.
    pub task: Option<Arc<dyn TaskInfo>>,
    /// The crew running the call, absent outside a crew.
    pub crew: Option<Arc<dyn CrewInfo>>,
    /// POST only: the text the agent will see. POST hooks replace it by
    /// returning `Some(text)`.
    pub tool_result: Option<String>,
    /// POST only: the tool's own result, never changed by replacements.
    pub raw_tool_result: Option<RawToolResult>,
    /// Values the hooks of this call share (see [`Extensions`]).
    pub extensions: Extensions,
    status: ToolCallStatus,
    call_id: Option<Arc<str>>,
    iteration: usize,
    human_input: Option<Arc<dyn HumanInputSource>>,
    human_input_timeout: Duration,
    block_reasons_shown: bool,
    /// The answers this call got, from its first approval question on.
    approvals: std::sync::OnceLock<Arc<crate::approval::Ledger>>,
    /// Whether the second round of an approved edit is running.
    recheck: bool,
    /// The `async` hook an awaiting walk is running (its entry's address),
    /// so that a question knows which hook asked it.
    running_hook: usize,
    /// Where the PRE chain asks, for a source that keeps it (a durable
    /// runtime's); absent otherwise, so that other calls pay nothing.
    gates: Option<Box<Gates>>,
}

/// The PRE chain's gates, for a human-input source that keeps them (see
/// [`HumanInputSource::keep_gate`]).
#[derive(Default)]
struct Gates {
    /// The hook an awaiting walk is running: its place and name.
    running: Option<(usize, String)>,
    /// Where the PRE chain starts again, for a resumed call.
    resume_at: Option<crate::ChainGate>,
}

impl ToolCallHookContext {
    /// A context for a call of `tool_name` (normalized here) with these
    /// arguments, outside any agent, task or crew.
    #[inline]
    pub fn new(tool_name: &str, tool_input: Map<String, Value>) -> Self {
        let tool_name: Arc<str> = Arc::from(normalize_tool_name(tool_name));
        ToolCallHookContext {
            tool_key: crate::name::tool_key(&tool_name),
            tool_name,
            tool_input,
            tool: None,
            agent: None,
            task: None,
            crew: None,
            tool_result: None,
            raw_tool_result: None,
            extensions: Extensions::new(),
            status: ToolCallStatus::Pending,
            call_id: None,
            iteration: 0,
            human_input: None,
            human_input_timeout: DEFAULT_HUMAN_INPUT_TIMEOUT,
            block_reasons_shown: false,
            approvals: std::sync::OnceLock::new(),
            recheck: false,
            running_hook: 0,
            gates: None,
        }
    }

    /// Tells the agent the reason of any block of this call, as if every
    /// hook's abort were [`HookAborted::tell_model`](crate::HookAborted::tell_model)
    /// (a crew sets it for its calls when built with
    /// `tell_model_why_blocked(true)`).
    ///
    /// ```
    /// let ctx = hooks_core::ToolCallHookContext::new("send_email", Default::default())
    ///     .with_block_reasons_shown(true);
    /// assert!(ctx.block_reasons_shown());
    /// ```
    #[inline]
    pub fn with_block_reasons_shown(mut self, shown: bool) -> Self {
        self.block_reasons_shown = shown;
        self
    }

    /// Whether the agent is told why this call was blocked, whatever hook
    /// blocked it.
    ///
    /// ```
    /// let ctx = hooks_core::ToolCallHookContext::new("send_email", Default::default());
    /// assert!(!ctx.block_reasons_shown());
    /// ```
    pub fn block_reasons_shown(&self) -> bool {
        self.block_reasons_shown
    }

    /// The tool's normalized name (see [`crate::normalize_tool_name`]).
    #[inline]
    pub fn tool_name(&self) -> &str {
        &self.tool_name
    }

    /// What happened to the call so far (see [`ToolCallStatus`]).
    pub fn status(&self) -> &ToolCallStatus {
        &self.status
    }

    pub(crate) fn set_status(&mut self, status: ToolCallStatus) {
        self.status = status;
    }

    /// Sets the tool.
    #[inline]
    pub fn with_tool(mut self, tool: Arc<dyn ToolInfo>) -> Self {
        self.tool = Some(tool);
        self
    }

    /// Sets the agent.
    #[inline]
    pub fn with_agent(mut self, agent: Arc<dyn AgentInfo>) -> Self {
        self.agent = Some(agent);
        self
    }

    /// Sets the task.
    #[inline]
    pub fn with_task(mut self, task: Arc<dyn TaskInfo>) -> Self {
        self.task = Some(task);
        self
    }

    /// Sets the crew.
    #[inline]
    pub fn with_crew(mut self, crew: Arc<dyn CrewInfo>) -> Self {
        self.crew = Some(crew);
        self
    }

    /// Sets the id of the call, as the model gave it (unique within a
    /// turn): what [`request_human_input`](Self::request_human_input) tells
    /// the person's UI, so that an answer approves this call only.
    ///
    /// ```
    /// let ctx = hooks_core::ToolCallHookContext::new("send_email", Default::default())
    ///     .with_call_id("call_1");
    /// assert_eq!(ctx.call_id(), Some("call_1"));
    /// ```
    #[inline]
    pub fn with_call_id(mut self, call_id: impl Into<Arc<str>>) -> Self {
        self.call_id = Some(call_id.into());
        self
    }

    /// The id of the call, when the runtime gave it one.
    ///
    /// ```
    /// let ctx = hooks_core::ToolCallHookContext::new("send_email", Default::default());
    /// assert_eq!(ctx.call_id(), None);
    /// ```
    pub fn call_id(&self) -> Option<&str> {
        self.call_id.as_deref()
    }

    /// The call's id and the tool's normalized name, shared rather than
    /// copied: for a runtime that hands them to the tool's run (one
    /// reference count each).
    ///
    /// ```
    /// let ctx = hooks_core::ToolCallHookContext::new("Send Email", Default::default())
    ///     .with_call_id("call_1");
    /// let (call_id, tool_name) = ctx.shared_ids();
    /// assert_eq!((call_id.as_deref(), &*tool_name), (Some("call_1"), "send_email"));
    /// ```
    pub fn shared_ids(&self) -> (Option<Arc<str>>, Arc<str>) {
        (self.call_id.clone(), Arc::clone(&self.tool_name))
    }

    /// Sets the agent's model turn that asked for this call (from 1).
    ///
    /// ```
    /// use hooks_core::ToolCallHookContext;
    ///
    /// let ctx = ToolCallHookContext::new("web_search", Default::default()).with_iteration(3);
    /// assert_eq!(ctx.iteration(), 3);
    /// ```
    #[inline]
    pub fn with_iteration(mut self, iteration: usize) -> Self {
        self.iteration = iteration;
        self
    }

    /// The agent's model turn in its task that asked for this call, from
    /// 1; 0 for a call made outside a crew's model turns.
    ///
    /// ```
    /// use hooks_core::ToolCallHookContext;
    ///
    /// assert_eq!(ToolCallHookContext::new("web_search", Default::default()).iteration(), 0);
    /// ```
    pub fn iteration(&self) -> usize {
        self.iteration
    }

    /// Sets where [`request_human_input`](Self::request_human_input) gets
    /// its answers. With none set, every question is refused with
    /// [`HumanInputError::NoSource`](crate::HumanInputError::NoSource): the
    /// engine has no default person (a crew sets the terminal unless told
    /// otherwise).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use hooks_core::{ScriptedInput, ToolCallHookContext};
    ///
    /// let ctx = ToolCallHookContext::new("send_email", Default::default())
    ///     .with_human_input(Arc::new(ScriptedInput::new(["yes"])));
    /// # let _ = ctx;
    /// ```
    #[inline]
    pub fn with_human_input(mut self, source: Arc<dyn HumanInputSource>) -> Self {
        if source.keeps_gates() {
            self.gates.get_or_insert_default();
        }
        self.human_input = Some(source);
        self
    }

    /// Starts this call's PRE chain at `gate`: at the hook in its place
    /// (see [`ChainGate::position`](crate::ChainGate::position)), on the
    /// arguments it keeps, when that hook has its name; from the first
    /// hook, on the call's own arguments, otherwise. For a runtime that
    /// resumes a call whose hooks before that one ran in an earlier process
    /// (kept with [`HumanInputSource::keep_gate`]). Only the PRE chain's
    /// first round starts there; the POST chain, and the second round of
    /// an edited call, run whole.
    ///
    /// ```
    /// use hooks_core::{ChainGate, HookOptions, HookRegistry, ToolCallHookContext, PRE_TOOL_CALL};
    /// use hooks_core::runtime::ToolOutput;
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    ///
    /// static COUNTED: AtomicUsize = AtomicUsize::new(0);
    /// let registry = HookRegistry::new();
    /// registry.register_hook_with(PRE_TOOL_CALL, HookOptions::new().name("count"), |_: &mut ToolCallHookContext| {
    ///     COUNTED.fetch_add(1, Ordering::Relaxed);
    /// })?;
    /// registry.register_hook_with(PRE_TOOL_CALL, HookOptions::new().name("gate"), |_: &mut ToolCallHookContext| {})?;
    ///
    /// let mut ctx = ToolCallHookContext::new("refund", Default::default());
    /// ctx.resume_chain_at(ChainGate::new(1, "gate", Default::default()));
    /// registry.run_tool_call(&mut ctx, |_| ToolOutput::text("refunded"))?;
    /// assert_eq!(COUNTED.load(Ordering::Relaxed), 0);
    ///
    /// // Not the chain the place was taken in: the whole chain runs.
    /// let mut ctx = ToolCallHookContext::new("refund", Default::default());
    /// ctx.resume_chain_at(ChainGate::new(1, "another_gate", Default::default()));
    /// registry.run_tool_call(&mut ctx, |_| ToolOutput::text("refunded"))?;
    /// assert_eq!(COUNTED.load(Ordering::Relaxed), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn resume_chain_at(&mut self, gate: crate::ChainGate) {
        self.gates.get_or_insert_default().resume_at = Some(gate);
    }

    /// Where this call's PRE chain starts, once (see
    /// [`resume_chain_at`](Self::resume_chain_at)).
    #[inline]
    pub(crate) fn take_chain_start(&mut self) -> Option<crate::ChainGate> {
        self.gates.as_mut()?.resume_at.take()
    }

    /// Sets how long [`request_human_input`](Self::request_human_input)
    /// waits for an answer (default [`DEFAULT_HUMAN_INPUT_TIMEOUT`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// let ctx = hooks_core::ToolCallHookContext::new("send_email", Default::default())
    ///     .with_human_input_timeout(Duration::from_secs(30));
    /// assert_eq!(ctx.human_input_timeout(), Duration::from_secs(30));
    /// ```
    #[inline]
    pub fn with_human_input_timeout(mut self, timeout: Duration) -> Self {
        self.human_input_timeout = timeout;
        self
    }

    /// How long [`request_human_input`](Self::request_human_input) waits
    /// for an answer.
    ///
    /// ```
    /// let ctx = hooks_core::ToolCallHookContext::new("send_email", Default::default());
    /// assert_eq!(ctx.human_input_timeout(), hooks_core::DEFAULT_HUMAN_INPUT_TIMEOUT);
    /// ```
    pub fn human_input_timeout(&self) -> Duration {
        self.human_input_timeout
    }

    /// The agent's role, if the call has an agent.
    pub fn agent_role(&self) -> Option<&str> {
        self.agent.as_deref().map(AgentInfo::role)
    }

    /// The concrete tool type, e.g. `ctx.tool_as::<Tool>()`.
    pub fn tool_as<T: Any>(&self) -> Option<&T> {
        let tool: &dyn Any = self.tool.as_deref()?;
        tool.downcast_ref()
    }

    /// The concrete agent type, e.g. `ctx.agent_as::<Agent>()`.
    pub fn agent_as<T: Any>(&self) -> Option<&T> {
        let agent: &dyn Any = self.agent.as_deref()?;
        agent.downcast_ref()
    }

    /// The concrete task type.
    pub fn task_as<T: Any>(&self) -> Option<&T> {
        let task: &dyn Any = self.task.as_deref()?;
        task.downcast_ref()
    }

    /// The concrete crew type.
    pub fn crew_as<T: Any>(&self) -> Option<&T> {
        let crew: &dyn Any = self.crew.as_deref()?;
        crew.downcast_ref()
    }

    /// Asks a person about this call: shows `prompt` and
    /// `default_message`, and resolves to their answer, trimmed. Await it,
    /// in an `async` hook.
    ///
    /// The question goes to the context's human-input source (a crew's is
    /// the terminal by default, with the crew's live output held while
    /// asking) as a
    /// [`HumanInputRequest`] that also carries the call's id, tool name,
    /// input and agent role, so that the answer approves this call and no
    /// other. Waiting never blocks a runtime thread.
    ///
    /// When no answer can be had this is an error, and `?` in a PRE hook
    /// turns it into a block, so an approval gate fails closed: the source
    /// failed, panicked (the panic is contained and never reaches the
    /// hook), was closed, standard input is not a terminal, the context
    /// has no source at all, or no answer
    /// came within [`human_input_timeout`](Self::human_input_timeout)
    /// ([`DEFAULT_HUMAN_INPUT_TIMEOUT`] unless the crew sets another).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use hooks_core::{HookAborted, ScriptedInput, ToolCallHookContext};
    ///
    /// async fn approve(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
    ///     let question = format!("Run {}?", ctx.tool_name());
    ///     let answer = ctx.request_human_input(&question, "yes/no").await?;
    ///     if answer != "yes" {
    ///         return Err(HookAborted::new("not approved", "approval"));
    ///     }
    ///     Ok(())
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let mut ctx = ToolCallHookContext::new("send_email", Default::default())
    ///     .with_human_input(Arc::new(ScriptedInput::new(["no"])));
    /// let refused = approve(&mut ctx).await.map_err(|a| a.reason);
    /// assert_eq!(refused, Err("not approved".to_owned()));
    /// // No answer left: the error becomes a block through `?`.
    /// assert!(approve(&mut ctx).await.is_err());
    /// # }
    /// ```
    ///
    /// Register such a hook with `register_async_hook` (or write it as an
    /// `async fn` under an attribute). A synchronous hook cannot wait for
    /// a person: the answer is a future, and using it as a `Result` does
    /// not compile:
    ///
    /// ```compile_fail,E0277
    /// use hooks_core::{HookAborted, ToolCallHookContext};
    ///
    /// fn approve(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
    ///     // error: the `?` operator can only be applied to values that
    ///     // implement `Try` (help: consider `.await`ing on the `Future`)
    ///     let answer = ctx.request_human_input("Run it?", "yes/no")?;
    ///     Ok(())
    /// }
    /// ```
    ///
    /// and a question left unawaited asks nobody, which the `unused_must_use`
    /// lint reports (an error here):
    ///
    /// ```compile_fail
    /// #![deny(unused_must_use)]
    /// use hooks_core::ToolCallHookContext;
    ///
    /// fn approve(ctx: &mut ToolCallHookContext) {
    ///     // error: unused `HumanInputFuture` that must be used: nobody is
    ///     // asked until this is awaited
    ///     ctx.request_human_input("Run it?", "yes/no");
    /// }
    /// ```
    pub fn request_human_input(&self, prompt: &str, default_message: &str) -> HumanInputFuture {
        crate::human::ask(
            self.human_input.clone(),
            self.human_request(prompt, default_message),
            self.human_input_timeout,
        )
    }

    /// Asks a person to approve this call, like
    /// [`request_human_input`](Self::request_human_input), and resolves to
    /// the whole [`HumanAnswer`](crate::HumanAnswer): its text, who gave it,
    /// their comment, and arguments they edited (a web inbox lets an
    /// approver change them). A hook that approves on the answer puts an
    /// edit in [`tool_input`](Self::tool_input): the tool gets the edit.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use hooks_core::{HookAborted, ScriptedInput, ToolCallHookContext};
    ///
    /// async fn approve(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
    ///     let answer = ctx.request_approval("Send it?", "yes/no").await?;
    ///     if !answer.text.eq_ignore_ascii_case("yes") {
    ///         return Err(HookAborted::new("refused by a person", "approval"));
    ///     }
    ///     if let Some(edit) = answer.edited_input {
    ///         ctx.tool_input = edit;
    ///     }
    ///     Ok(())
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let mut ctx = ToolCallHookContext::new("send_email", Default::default())
    ///     .with_human_input(Arc::new(ScriptedInput::new(["yes"])));
    /// assert!(approve(&mut ctx).await.is_ok());
    /// # }
    /// ```
    pub fn request_approval(
        &self,
        prompt: &str,
        default_message: &str,
    ) -> HumanInputFuture<crate::HumanAnswer> {
        self.approval_question(self.human_request(prompt, default_message))
    }

    /// Asks `request` as an approval of this call: answered at once on the
    /// second round of an approved edit when this hook asked about exactly
    /// these arguments, else asked of a person (with the approver who
    /// edited the call as its requester), the answer kept in the call's
    /// ledger.
    fn approval_question(
        &self,
        mut request: HumanInputRequest,
    ) -> HumanInputFuture<crate::HumanAnswer> {
        let ledger = Arc::clone(self.approvals.get_or_init(Default::default));
        if self.recheck
            && let Some(answer) = ledger.answered(self.running_hook, &self.tool_input)
        {
            // The second round of an approved edit: this hook asked about
            // exactly these arguments a moment ago, and has its answer.
            return crate::human::answered_already(answer);
        }
        // Any other question about an edited call goes to a person, and the
        // approver who edited counts as its requester: nobody approves
        // their own edit twice (a second guard's question included).
        let edited = ledger.editor();
        // Where the chain asks, for a source that keeps it (a resumed call
        // starts there): not on the second round, nor after an edit, whose
        // call must run its whole chain again.
        let gate = match (&self.gates, &self.human_input) {
            (Some(gates), Some(source)) if !self.recheck && edited.is_none() => {
                gates.running.as_ref().map(|(position, hook)| {
                    source.keep_gate(crate::ChainGate::new(
                        *position,
                        hook.clone(),
                        self.tool_input.clone(),
                    ))
                })
            }
            _ => None,
        };
        if let Some(editor) = edited {
            request.requester = Some(editor);
        }
        crate::approval::ask_for_answer(
            self.human_input.clone(),
            request,
            self.human_input_timeout,
            Some((ledger, self.running_hook)),
            gate,
        )
    }

    /// The arguments of the last approved edit not yet checked again, if
    /// a person edited this call's arguments.
    pub(crate) fn approved_edit_to_recheck(&self) -> Option<Map<String, Value>> {
        self.approvals.get()?.edit_to_recheck()
    }

    /// Starts or ends the second round of an approved edit.
    pub(crate) fn set_recheck(&mut self, recheck: bool) {
        self.recheck = recheck;
    }

    /// Tells the sources that answered questions about this call what
    /// became of it, once its status says.
    pub(crate) fn settle_approvals(&self) {
        if let Some(ledger) = self.approvals.get()
            && let Some(outcome) = self.status.approved_outcome()
        {
            ledger.settle(&outcome);
        }
    }

    /// [`request_approval`](Self::request_approval), saying why in plain
    /// words beside the terminal wording of `prompt`: a web page or a chat
    /// shows the reason and the call (tool, agent, task, input).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use hooks_core::{HookAborted, ScriptedInput, ToolCallHookContext};
    ///
    /// async fn approve(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
    ///     let answer = ctx
    ///         .request_approval_with_reason("Send `it`? (yes/no)", "yes/no", "mail leaves the company")
    ///         .await?;
    ///     if !answer.text.eq_ignore_ascii_case("yes") {
    ///         return Err(HookAborted::new("refused by a person", "approval"));
    ///     }
    ///     Ok(())
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let mut ctx = ToolCallHookContext::new("send_email", Default::default())
    ///     .with_human_input(Arc::new(ScriptedInput::new(["yes"])));
    /// assert!(approve(&mut ctx).await.is_ok());
    /// # }
    /// ```
    pub fn request_approval_with_reason(
        &self,
        prompt: &str,
        default_message: &str,
        reason: &str,
    ) -> HumanInputFuture<crate::HumanAnswer> {
        self.approval_question(
            self.human_request(prompt, default_message)
                .with_reason(reason),
        )
    }

    /// The question about this call: the call, its tool (schema and
    /// capabilities), agent, task, crew, kickoff and requester.
    fn human_request(&self, prompt: &str, default_message: &str) -> HumanInputRequest {
        let mut request = HumanInputRequest::new(prompt, default_message)
            .with_tool(&*self.tool_name, Value::Object(self.tool_input.clone()));
        request.call_id = self.call_id.as_deref().map(str::to_owned);
        request.agent_role = self.agent_role().map(str::to_owned);
        request.tool_schema = self.tool.as_ref().map(|tool| tool.args_schema().clone());
        request.tool_capabilities = Some(match &self.tool {
            Some(tool) => tool.annotations().capabilities(),
            None => crate::ToolAnnotations::new().capabilities(),
        });
        request.task = self.task.as_ref().map(|task| task.name().to_owned());
        if let Some(crew) = &self.crew {
            request.crew = Some(crew.name().to_owned());
            request.kickoff_id = crew.kickoff_id().map(str::to_owned);
            request.requester = crew.user().map(str::to_owned);
        }
        request.asked_under = self
            .extensions
            .get::<Arc<crate::AskedUnder>>()
            .map(Arc::clone);
        request
    }
}

impl HookContext for ToolCallHookContext {
    #[inline]
    fn call_tool_name(&self) -> Option<&str> {
        Some(&self.tool_name)
    }

    #[inline]
    fn call_tool_key(&self) -> u64 {
        self.tool_key
    }

    #[inline]
    fn call_agent_role(&self) -> Option<&str> {
        self.agent_role()
    }

    // A virtual call and a few branches: only made for a hook with a
    // capability filter.
    fn call_tool_capabilities(&self) -> Option<crate::Capabilities> {
        self.tool
            .as_deref()
            .map(|tool| tool.annotations().capabilities())
    }

    fn event_tool_name(&self) -> Option<Arc<str>> {
        Some(Arc::clone(&self.tool_name))
    }

    fn event_agent_role(&self) -> Option<Arc<str>> {
        self.agent.as_deref().map(AgentInfo::shared_role)
    }

    #[inline]
    fn running_hook(&mut self, hook: usize, position: usize, name: &str) {
        self.running_hook = hook;
        if let Some(gates) = &mut self.gates {
            gates.running = Some((position, name.to_owned()));
        }
    }
}

impl fmt::Debug for ToolCallHookContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolCallHookContext")
            .field("tool_name", &self.tool_name)
            .field("call_id", &self.call_id)
            .field("iteration", &self.iteration)
            .field("tool_input", &self.tool_input)
            .field("tool", &self.tool.as_deref().map(ToolInfo::name))
            .field("agent", &self.agent_role())
            .field("task", &self.task.as_deref().map(TaskInfo::description))
            .field("crew", &self.crew.as_deref().map(CrewInfo::name))
            .field("tool_result", &self.tool_result)
            .field("raw_tool_result", &self.raw_tool_result)
            .field("status", &self.status)
            .field("extensions", &self.extensions)
            .finish_non_exhaustive()
    }
}
