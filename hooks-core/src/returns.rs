//! The return types a hook may have at each point, and the decision each
//! comes to.

use crate::inputs::Inputs;
use crate::outcome::{
    Decision, HookAborted, LEGACY_BLOCK_REASON, LEGACY_LLM_BLOCK_REASON, NoReplacement,
};
use crate::point::Point;
use crate::point::points::{PreModelCall, PreToolCall};

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
