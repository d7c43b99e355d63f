//! What hooks return, and what a dispatch of a chain comes to.

use std::fmt;

/// A hook's decision to stop: at `PRE_TOOL_CALL` it blocks the tool call, at
/// `POST_TOOL_CALL` it aborts the whole run.
///
/// `source` says who decided (a policy name such as `"safety-policy"`); when
/// it is left empty the dispatcher fills in the hook's name, so telemetry
/// always names someone.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HookAborted {
    /// Why the call was stopped, in words a person can act on.
    pub reason: String,
    /// Who stopped it: a policy or component name.
    pub source: String,
}

impl HookAborted {
    /// A stop with a reason and a source.
    pub fn new(reason: impl Into<String>, source: impl Into<String>) -> Self {
        HookAborted {
            reason: reason.into(),
            source: source.into(),
        }
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

/// The reason reported when a legacy before hook returns `false`.
pub const LEGACY_BLOCK_REASON: &str = "before_tool_call hook returned False";

/// What one `PRE_TOOL_CALL` hook decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreDecision {
    /// Let the call go on to the next hook and then the tool.
    Proceed,
    /// Block the call: later PRE hooks and the tool do not run.
    Block(HookAborted),
}

/// What one `POST_TOOL_CALL` hook decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PostDecision {
    /// Keep `tool_result` as it is.
    Keep,
    /// Replace `tool_result` with this text (an empty string is a valid
    /// replacement).
    Replace(String),
    /// Abort the whole run after the tool has run.
    Abort(HookAborted),
}

/// What a whole chain of hooks at one point came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DispatchOutcome {
    /// Every hook that ran let the call proceed unchanged (or no hook ran).
    Proceeded,
    /// A POST hook replaced the result (or a fail-closed POST hook withheld
    /// it). In-place edits of `tool_input` are not tracked: detecting them
    /// would cost a copy of the input on every call.
    Modified,
    /// A hook stopped the call (PRE) or the run (POST).
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

mod sealed {
    pub trait Sealed {}
    impl Sealed for () {}
    impl Sealed for bool {}
    impl Sealed for Option<bool> {}
    impl Sealed for Option<String> {}
    impl Sealed for Result<(), super::HookAborted> {}
    impl Sealed for Result<Option<String>, super::HookAborted> {}
}

/// Return types accepted from `#[on(PRE_TOOL_CALL)]` hooks: `()` or
/// `Result<(), HookAborted>`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a return type of a PRE_TOOL_CALL hook",
    label = "this return type is not accepted",
    note = "a #[on(PRE_TOOL_CALL)] hook returns `()` or `Result<(), HookAborted>`"
)]
pub trait PreHookReturn: sealed::Sealed {
    /// Converts the hook's return value into its decision.
    fn into_pre_decision(self) -> PreDecision;
}

impl PreHookReturn for () {
    fn into_pre_decision(self) -> PreDecision {
        PreDecision::Proceed
    }
}

impl PreHookReturn for Result<(), HookAborted> {
    fn into_pre_decision(self) -> PreDecision {
        match self {
            Ok(()) => PreDecision::Proceed,
            Err(abort) => PreDecision::Block(abort),
        }
    }
}

/// Return types accepted from legacy `#[before_tool_call]` hooks:
/// `Option<bool>`, `bool` or `()`; `false` blocks the call.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a return type of a before_tool_call hook",
    label = "this return type is not accepted",
    note = "a #[before_tool_call] hook returns `Option<bool>`, `bool` or `()`; `Some(false)`/`false` blocks"
)]
pub trait LegacyBeforeReturn: sealed::Sealed {
    /// Converts the hook's return value into its decision.
    fn into_pre_decision(self) -> PreDecision;
}

fn legacy_block() -> PreDecision {
    PreDecision::Block(HookAborted::with_reason(LEGACY_BLOCK_REASON))
}

impl LegacyBeforeReturn for () {
    fn into_pre_decision(self) -> PreDecision {
        PreDecision::Proceed
    }
}

impl LegacyBeforeReturn for bool {
    fn into_pre_decision(self) -> PreDecision {
        if self {
            PreDecision::Proceed
        } else {
            legacy_block()
        }
    }
}

impl LegacyBeforeReturn for Option<bool> {
    fn into_pre_decision(self) -> PreDecision {
        match self {
            Some(false) => legacy_block(),
            Some(true) | None => PreDecision::Proceed,
        }
    }
}

/// Return types accepted from `POST_TOOL_CALL` hooks (both attribute styles):
/// `Option<String>`, `()` or `Result<Option<String>, HookAborted>`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a return type of a POST_TOOL_CALL hook",
    label = "this return type is not accepted",
    note = "a POST_TOOL_CALL hook returns `Option<String>`, `()` or `Result<Option<String>, HookAborted>`"
)]
pub trait PostHookReturn: sealed::Sealed {
    /// Converts the hook's return value into its decision.
    fn into_post_decision(self) -> PostDecision;
}

impl PostHookReturn for () {
    fn into_post_decision(self) -> PostDecision {
        PostDecision::Keep
    }
}

impl PostHookReturn for Option<String> {
    fn into_post_decision(self) -> PostDecision {
        match self {
            Some(text) => PostDecision::Replace(text),
            None => PostDecision::Keep,
        }
    }
}

impl PostHookReturn for Result<Option<String>, HookAborted> {
    fn into_post_decision(self) -> PostDecision {
        match self {
            Ok(replacement) => replacement.into_post_decision(),
            Err(abort) => PostDecision::Abort(abort),
        }
    }
}

/// Any return type a hook registered at run time may have, with the points
/// it fits. `register_hook` checks the fit and refuses a mismatch (an
/// `Option<String>` hook at `PRE_TOOL_CALL`, say) with an error.
pub trait HookReturn: sealed::Sealed + 'static {
    /// Whether this return type fits `PRE_TOOL_CALL`.
    const FITS_PRE: bool;
    /// Whether this return type fits `POST_TOOL_CALL`.
    const FITS_POST: bool;
    /// The decision at `PRE_TOOL_CALL` (only called when `FITS_PRE`).
    fn pre(self) -> PreDecision;
    /// The decision at `POST_TOOL_CALL` (only called when `FITS_POST`).
    fn post(self) -> PostDecision;
}

impl HookReturn for bool {
    const FITS_PRE: bool = true;
    const FITS_POST: bool = false;
    fn pre(self) -> PreDecision {
        LegacyBeforeReturn::into_pre_decision(self)
    }
    fn post(self) -> PostDecision {
        PostDecision::Keep
    }
}

impl HookReturn for Option<bool> {
    const FITS_PRE: bool = true;
    const FITS_POST: bool = false;
    fn pre(self) -> PreDecision {
        LegacyBeforeReturn::into_pre_decision(self)
    }
    fn post(self) -> PostDecision {
        PostDecision::Keep
    }
}

impl HookReturn for Option<String> {
    const FITS_PRE: bool = false;
    const FITS_POST: bool = true;
    fn pre(self) -> PreDecision {
        PreDecision::Proceed
    }
    fn post(self) -> PostDecision {
        self.into_post_decision()
    }
}

impl HookReturn for Result<Option<String>, HookAborted> {
    const FITS_PRE: bool = false;
    const FITS_POST: bool = true;
    fn pre(self) -> PreDecision {
        PreDecision::Proceed
    }
    fn post(self) -> PostDecision {
        self.into_post_decision()
    }
}

impl HookReturn for () {
    const FITS_PRE: bool = true;
    const FITS_POST: bool = true;
    fn pre(self) -> PreDecision {
        PreDecision::Proceed
    }
    fn post(self) -> PostDecision {
        PostDecision::Keep
    }
}

impl HookReturn for Result<(), HookAborted> {
    const FITS_PRE: bool = true;
    const FITS_POST: bool = true;
    fn pre(self) -> PreDecision {
        self.into_pre_decision()
    }
    fn post(self) -> PostDecision {
        match self {
            Ok(()) => PostDecision::Keep,
            Err(abort) => PostDecision::Abort(abort),
        }
    }
}
