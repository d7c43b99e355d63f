//! What hooks return, and what a dispatch of a chain comes to.

use std::fmt;

use crate::inputs::Inputs;
use crate::point::Point;
use crate::point::points::{PreModelCall, PreToolCall};

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

/// The return types a hook may have at point `P`, for `#[on]`, the legacy
/// after attributes and `register_hook` alike. A return type that does not
/// fit its point is a compile error, with the table below.
///
/// ```
/// use hooks_core::{Decision, HookReturn, Inputs, points::{Input, PostStep}};
///
/// // `Option<String>` replaces a text where a point has one...
/// let decision = <Option<String> as HookReturn<PostStep>>::into_decision(Some("short".into()));
/// assert_eq!(decision, Decision::Replace("short".to_owned()));
/// // ...`Option<Inputs>` replaces the inputs, and `()` goes on.
/// let inputs = Inputs::new().with("topic", "Rust");
/// assert!(matches!(<Option<Inputs> as HookReturn<Input>>::into_decision(Some(inputs)), Decision::Replace(_)));
/// assert_eq!(<() as HookReturn<PostStep>>::into_decision(()), Decision::Continue);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a return type of a hook at this point ({P})",
    label = "this return type is not accepted here",
    note = "accepted return types, per point:\n\
            EXECUTION_START, INPUT: `()`, `Result<(), HookAborted>`, `Option<Inputs>`, `Result<Option<Inputs>, HookAborted>`\n\
            PRE_STEP, POST_STEP, POST_MODEL_CALL, POST_TOOL_CALL, OUTPUT: `()`, `Result<(), HookAborted>`, `Option<String>`, `Result<Option<String>, HookAborted>`\n\
            PRE_MODEL_CALL, PRE_TOOL_CALL, EXECUTION_END: `()`, `Result<(), HookAborted>`\n\
            (legacy #[before_tool_call] / #[before_llm_call] hooks: `Option<bool>`, `bool`, `()`)"
)]
pub trait HookReturn<P: Point>: 'static {
    /// The hook's decision.
    fn into_decision(self) -> Decision<P::Replacement>;
}

impl<P: Point> HookReturn<P> for () {
    #[inline(always)]
    fn into_decision(self) -> Decision<P::Replacement> {
        Decision::Continue
    }
}

impl<P: Point> HookReturn<P> for Result<(), HookAborted> {
    #[inline(always)]
    fn into_decision(self) -> Decision<P::Replacement> {
        match self {
            Ok(()) => Decision::Continue,
            Err(abort) => Decision::Abort(abort),
        }
    }
}

/// The points whose hooks may replace a text by returning it: `PRE_STEP`,
/// `POST_STEP`, `POST_MODEL_CALL`, `POST_TOOL_CALL` and `OUTPUT`.
///
/// ```
/// use hooks_core::{HookRegistry, OutputContext, ReplacesText, CrewOutput, OUTPUT, POST_TOOL_CALL};
///
/// // One helper for every point whose hooks may replace a text.
/// fn cap_length<P: ReplacesText>(registry: &HookRegistry, point: P, text_of: fn(&P::Context) -> &str)
///     -> Result<(), hooks_core::RegisterError>
/// {
///     registry.register_hook(point, move |ctx: &mut P::Context| {
///         let text = text_of(ctx);
///         (text.len() > 10).then(|| text[..10].to_owned())
///     })?;
///     Ok(())
/// }
/// let registry = HookRegistry::new();
/// cap_length(&registry, OUTPUT, |ctx: &OutputContext| &ctx.output.raw)?;
/// cap_length(&registry, POST_TOOL_CALL, |ctx| ctx.tool_result.as_deref().unwrap_or(""))?;
///
/// let mut ctx = OutputContext::new(CrewOutput { raw: "a very long report".into(), ..CrewOutput::default() });
/// registry.dispatch(OUTPUT, &mut ctx);
/// assert_eq!(ctx.output.raw, "a very lon");
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
#[diagnostic::on_unimplemented(
    message = "hooks at this point ({Self}) cannot replace a text: `Option<String>` is not accepted here",
    label = "this return type is not accepted here",
    note = "accepted return types, per point:\n\
            EXECUTION_START, INPUT: `()`, `Result<(), HookAborted>`, `Option<Inputs>`, `Result<Option<Inputs>, HookAborted>`\n\
            PRE_STEP, POST_STEP, POST_MODEL_CALL, POST_TOOL_CALL, OUTPUT: `()`, `Result<(), HookAborted>`, `Option<String>`, `Result<Option<String>, HookAborted>`\n\
            PRE_MODEL_CALL, PRE_TOOL_CALL, EXECUTION_END: `()`, `Result<(), HookAborted>`"
)]
pub trait ReplacesText: Point<Replacement = String> {}

/// The points whose hooks may replace the inputs by returning them:
/// `EXECUTION_START` and `INPUT`.
///
/// ```
/// use hooks_core::{ExecutionStartContext, HookRegistry, Inputs, ReplacesInputs, EXECUTION_START, INPUT};
///
/// // One helper for both points whose hooks may replace the inputs.
/// fn defaults<P: ReplacesInputs>(registry: &HookRegistry, point: P, get: fn(&P::Context) -> &Inputs)
///     -> Result<(), hooks_core::RegisterError>
/// {
///     registry.register_hook(point, move |ctx: &mut P::Context| {
///         let inputs = get(ctx);
///         inputs.get("language").is_none().then(|| inputs.clone().with("language", "English"))
///     })?;
///     Ok(())
/// }
/// let registry = HookRegistry::new();
/// defaults(&registry, EXECUTION_START, |ctx| &ctx.inputs)?;
/// defaults(&registry, INPUT, |ctx| &ctx.inputs)?;
///
/// let mut ctx = ExecutionStartContext::new([("topic", "Rust")]);
/// registry.dispatch(EXECUTION_START, &mut ctx);
/// assert_eq!(ctx.inputs.get("language"), Some("English"));
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
#[diagnostic::on_unimplemented(
    message = "hooks at this point ({Self}) cannot replace the inputs: `Option<Inputs>` is not accepted here",
    label = "this return type is not accepted here",
    note = "only EXECUTION_START and INPUT hooks return `Option<Inputs>`"
)]
pub trait ReplacesInputs: Point<Replacement = Inputs> {}

macro_rules! replaces {
    ($tr:ident: $($point:ident),*) => {$(
        impl $tr for crate::point::points::$point {}
    )*};
}

replaces!(ReplacesText: PreStep, PostStep, PostModelCall, PostToolCall, Output);
replaces!(ReplacesInputs: ExecutionStart, Input);

impl<P: ReplacesText> HookReturn<P> for Option<String> {
    #[inline(always)]
    fn into_decision(self) -> Decision<String> {
        match self {
            Some(text) => Decision::Replace(text),
            None => Decision::Continue,
        }
    }
}

impl<P: ReplacesText> HookReturn<P> for Result<Option<String>, HookAborted> {
    #[inline(always)]
    fn into_decision(self) -> Decision<String> {
        match self {
            Ok(Some(text)) => Decision::Replace(text),
            Ok(None) => Decision::Continue,
            Err(abort) => Decision::Abort(abort),
        }
    }
}

impl<P: ReplacesInputs> HookReturn<P> for Option<Inputs> {
    #[inline(always)]
    fn into_decision(self) -> Decision<Inputs> {
        match self {
            Some(inputs) => Decision::Replace(inputs),
            None => Decision::Continue,
        }
    }
}

impl<P: ReplacesInputs> HookReturn<P> for Result<Option<Inputs>, HookAborted> {
    #[inline(always)]
    fn into_decision(self) -> Decision<Inputs> {
        match self {
            Ok(Some(inputs)) => Decision::Replace(inputs),
            Ok(None) => Decision::Continue,
            Err(abort) => Decision::Abort(abort),
        }
    }
}

/// The points with a legacy "before" style where `false` blocks:
/// `PRE_TOOL_CALL` (`#[before_tool_call]`) and `PRE_MODEL_CALL`
/// (`#[before_llm_call]`).
///
/// ```
/// use hooks_core::{LegacyBeforePoint, LEGACY_BLOCK_REASON, LEGACY_LLM_BLOCK_REASON};
/// use hooks_core::points::{PreModelCall, PreToolCall};
///
/// assert_eq!(PreToolCall::BLOCK_REASON, LEGACY_BLOCK_REASON);
/// assert_eq!(PreModelCall::BLOCK_REASON, LEGACY_LLM_BLOCK_REASON);
/// ```
pub trait LegacyBeforePoint: Point<Replacement = NoReplacement> {
    /// The reason reported when such a hook returns `false`.
    const BLOCK_REASON: &'static str;
}

impl LegacyBeforePoint for PreToolCall {
    const BLOCK_REASON: &'static str = LEGACY_BLOCK_REASON;
}

impl LegacyBeforePoint for PreModelCall {
    const BLOCK_REASON: &'static str = LEGACY_LLM_BLOCK_REASON;
}

/// Return types of legacy before hooks (`#[before_tool_call]`,
/// `#[before_llm_call]`, `register_before_*_hook`): `Option<bool>`, `bool`
/// or `()`; `false` blocks.
///
/// ```
/// use hooks_core::{Decision, LegacyBeforeReturn, LEGACY_BLOCK_REASON, points::PreToolCall};
///
/// // `false` and `Some(false)` block; `true`, `None` and `()` let the call run.
/// let blocked = <bool as LegacyBeforeReturn<PreToolCall>>::into_decision(false);
/// assert!(matches!(blocked, Decision::Abort(abort) if abort.reason == LEGACY_BLOCK_REASON));
/// let allowed = <Option<bool> as LegacyBeforeReturn<PreToolCall>>::into_decision(None);
/// assert_eq!(allowed, Decision::Continue);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a return type of a legacy before hook",
    label = "this return type is not accepted",
    note = "a #[before_tool_call] or #[before_llm_call] hook returns `Option<bool>`, `bool` or `()`; `Some(false)`/`false` blocks"
)]
pub trait LegacyBeforeReturn<P: LegacyBeforePoint>: 'static {
    /// The hook's decision.
    fn into_decision(self) -> Decision<NoReplacement>;
}

fn legacy_block<P: LegacyBeforePoint>() -> Decision<NoReplacement> {
    Decision::Abort(HookAborted::with_reason(P::BLOCK_REASON))
}

impl<P: LegacyBeforePoint> LegacyBeforeReturn<P> for () {
    #[inline(always)]
    fn into_decision(self) -> Decision<NoReplacement> {
        Decision::Continue
    }
}

impl<P: LegacyBeforePoint> LegacyBeforeReturn<P> for bool {
    #[inline(always)]
    fn into_decision(self) -> Decision<NoReplacement> {
        if self {
            Decision::Continue
        } else {
            legacy_block::<P>()
        }
    }
}

impl<P: LegacyBeforePoint> LegacyBeforeReturn<P> for Option<bool> {
    #[inline(always)]
    fn into_decision(self) -> Decision<NoReplacement> {
        match self {
            Some(false) => legacy_block::<P>(),
            Some(true) | None => Decision::Continue,
        }
    }
}
