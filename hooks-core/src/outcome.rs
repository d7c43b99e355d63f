//! What a hook decides, and what a dispatch of a chain comes to, whatever
//! the point. Which return types a hook may have at which point, and the
//! decision each comes to, is the next floor up (`returns.rs`).

use std::fmt;

/// A hook's decision to stop: at `PRE_TOOL_CALL` it blocks the tool call;
/// at `PRE_MODEL_CALL` it blocks the model call, which ends the run; at
/// every other point it aborts the run.
///
/// `source` says who decided (a policy name such as `"safety-policy"`); when
/// it is left empty the dispatcher fills in the hook's name, so telemetry
/// always names someone.
///
/// `?` turns text and the runtime's errors into an abort whose source is
/// the hook's name:
///
/// ```
/// use hooks_core::{HookAborted, ToolCallHookContext};
///
/// fn needs_query(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
///     let query = ctx.tool_input.get("query").and_then(|q| q.as_str()).ok_or("a query is required")?;
///     if query.len() < 3 {
///         return Err(format!("query {query:?} is too short").into());
///     }
///     Ok(())
/// }
/// let mut ctx = ToolCallHookContext::new("web_search", Default::default());
/// assert_eq!(needs_query(&mut ctx).map_err(|a| a.reason), Err("a query is required".to_owned()));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HookAborted {
    /// Why the call was stopped, in words a person can act on.
    pub reason: String,
    /// Who stopped it: a policy or component name.
    pub source: String,
    /// Whether the agent is told the reason (see [`HookAborted::tell_model`]).
    tells_model: bool,
}

impl HookAborted {
    /// A stop with a reason and a source.
    pub fn new(reason: impl Into<String>, source: impl Into<String>) -> Self {
        HookAborted {
            reason: reason.into(),
            source: source.into(),
            tells_model: false,
        }
    }

    /// Also tells the agent why: a blocked tool call's observation becomes
    /// `Tool execution blocked by hook. Tool: NAME. Reason: REASON`, so
    /// that the model can choose another way. Without it (the default) the
    /// agent gets the guide's message alone, and the reason stays with the
    /// program (events, the call's status, logs). A crew can turn it on for
    /// every block (`CrewBuilder::tell_model_why_blocked` in
    /// `crew-runtime`). The reason passes the crew's redaction like every
    /// message the model receives.
    ///
    /// ```
    /// use hooks_core::{HookAborted, ToolCallHookContext};
    ///
    /// fn small_refunds(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
    ///     match ctx.tool_input.get("amount").and_then(|a| a.as_u64()) {
    ///         Some(amount) if amount > 100 => Err(HookAborted::new(
    ///             "refunds above 100 need a manager: offer a voucher instead",
    ///             "refund-policy",
    ///         )
    ///         .tell_model()),
    ///         _ => Ok(()),
    ///     }
    /// }
    /// let mut ctx = ToolCallHookContext::new("refund", Default::default());
    /// ctx.tool_input.insert("amount".into(), 250.into());
    /// assert!(small_refunds(&mut ctx).is_err_and(|abort| abort.tells_model()));
    /// ```
    pub fn tell_model(mut self) -> Self {
        self.tells_model = true;
        self
    }

    /// Whether the agent is told the reason ([`HookAborted::tell_model`]).
    ///
    /// ```
    /// assert!(!hooks_core::HookAborted::new("no", "policy").tells_model());
    /// ```
    pub fn tells_model(&self) -> bool {
        self.tells_model
    }

    /// A stop with a reason only; the dispatcher reports the hook's name as
    /// the source.
    pub fn with_reason(reason: impl Into<String>) -> Self {
        HookAborted::new(reason, String::new())
    }
}

impl fmt::Display for HookAborted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.source.is_empty() {
            write!(f, "hook aborted: {}", self.reason)
        } else {
            write!(f, "hook aborted by {}: {}", self.source, self.reason)
        }
    }
}

impl std::error::Error for HookAborted {}

impl From<&str> for HookAborted {
    /// An abort with this reason; the source is the hook's name.
    fn from(reason: &str) -> Self {
        HookAborted::with_reason(reason)
    }
}

impl From<String> for HookAborted {
    /// An abort with this reason; the source is the hook's name.
    fn from(reason: String) -> Self {
        HookAborted::with_reason(reason)
    }
}

/// The reason reported when a legacy before hook returns `false`.
///
/// ```
/// use hooks_core::{HookRegistry, ToolCallHookContext, LEGACY_BLOCK_REASON};
///
/// let registry = HookRegistry::new();
/// registry.register_before_tool_call_hook(|ctx: &mut ToolCallHookContext| ctx.tool_name() != "shell");
/// let mut ctx = ToolCallHookContext::new("shell", Default::default());
/// let outcome = registry.dispatch_pre(&mut ctx);
/// assert_eq!(outcome.aborted().map(|a| a.reason.as_str()), Some(LEGACY_BLOCK_REASON));
/// ```
pub const LEGACY_BLOCK_REASON: &str = "before_tool_call hook returned False";

/// The reason reported when a legacy `before_llm_call` hook returns `false`.
///
/// ```
/// use hooks_core::{HookRegistry, LlmCallHookContext, LEGACY_LLM_BLOCK_REASON, PRE_MODEL_CALL};
///
/// let registry = HookRegistry::new();
/// registry.register_before_llm_call_hook(|ctx: &mut LlmCallHookContext| ctx.iterations < 3);
/// let mut ctx = LlmCallHookContext::new(Vec::new()).with_iterations(3);
/// let outcome = registry.dispatch(PRE_MODEL_CALL, &mut ctx);
/// assert_eq!(outcome.aborted().map(|a| a.reason.as_str()), Some(LEGACY_LLM_BLOCK_REASON));
/// ```
pub const LEGACY_LLM_BLOCK_REASON: &str = "before_llm_call hook returned False";

/// The replacement type of points where hooks cannot replace anything
/// (`PRE_TOOL_CALL`, `PRE_MODEL_CALL`, `EXECUTION_END`): it has no value.
///
/// ```
/// use hooks_core::{Decision, HookReturn, NoReplacement, points::PreToolCall};
///
/// // A PRE_TOOL_CALL hook edits in place or blocks: it never replaces a value,
/// // so its decision can only continue or stop.
/// let decision: Decision<NoReplacement> = <() as HookReturn<PreToolCall>>::into_decision(());
/// match decision {
///     Decision::Continue => {}
///     Decision::Abort(abort) => panic!("blocked: {abort}"),
///     Decision::Replace(never) => match never {},
/// }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoReplacement {}

/// What one hook decided, at a point whose hooks may replace a `R`.
///
/// ```
/// use hooks_core::{Decision, HookAborted, HookReturn, points::PostToolCall};
///
/// // What a hook returns becomes a decision (the dispatcher does this).
/// fn decide(returned: Result<Option<String>, HookAborted>) -> Decision<String> {
///     <_ as HookReturn<PostToolCall>>::into_decision(returned)
/// }
/// for (returned, expected) in [
///     (Ok(None), "continue"),
///     (Ok(Some("[redacted]".to_owned())), "replace"),
///     (Err(HookAborted::new("leak", "dlp")), "abort"),
/// ] {
///     let what = match decide(returned) {
///         Decision::Continue => "continue",
///         Decision::Replace(_) => "replace",
///         Decision::Abort(_) => "abort",
///     };
///     assert_eq!(what, expected);
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision<R> {
    /// Go on with the next hook (in-place edits stay).
    Continue,
    /// Put this value in place of the point's value (a result, a payload,
    /// the inputs) and go on with the next hook.
    Replace(R),
    /// Stop: block the call, or abort the run.
    Abort(HookAborted),
}

/// What a whole chain of hooks at one point came to.
///
/// ```
/// use hooks_core::{DispatchOutcome, HookRegistry, StepContext, StepKind, POST_STEP};
///
/// let registry = HookRegistry::new();
/// registry.register_hook(POST_STEP, |ctx: &mut StepContext| {
///     (ctx.payload.contains("TODO")).then(|| ctx.payload.replace("TODO", ""))
/// })?;
///
/// // Each dispatch of a chain says what it came to.
/// let mut ctx = StepContext::new(StepKind::Task, "draft", "Done. TODO");
/// match registry.dispatch(POST_STEP, &mut ctx) {
///     DispatchOutcome::Proceeded => println!("unchanged"),
///     DispatchOutcome::Modified => println!("now: {}", ctx.payload),
///     DispatchOutcome::Aborted(abort) => println!("stopped: {abort}"),
/// }
/// assert_eq!(ctx.payload, "Done. ");
/// let mut clean = StepContext::new(StepKind::Task, "draft", "Done.");
/// assert_eq!(registry.dispatch(POST_STEP, &mut clean).as_str(), "proceeded");
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DispatchOutcome {
    /// Every hook that ran let the call proceed unchanged (or no hook ran).
    Proceeded,
    /// A hook replaced the point's value (or a fail-closed POST hook
    /// withheld the result), or, at `EXECUTION_END`, edited a completed
    /// kickoff's output in place. Other in-place edits are not tracked:
    /// detecting them would cost a copy on every call.
    Modified,
    /// A hook stopped the call (PRE) or the run.
    Aborted(HookAborted),
}

impl DispatchOutcome {
    /// The outcome's name as telemetry reports it: `proceeded`, `modified`
    /// or `aborted`.
    pub fn as_str(&self) -> &'static str {
        match self {
            DispatchOutcome::Proceeded => "proceeded",
            DispatchOutcome::Modified => "modified",
            DispatchOutcome::Aborted(_) => "aborted",
        }
    }

    /// The abort, if the chain was stopped.
    pub fn aborted(&self) -> Option<&HookAborted> {
        match self {
            DispatchOutcome::Aborted(abort) => Some(abort),
            _ => None,
        }
    }
}
