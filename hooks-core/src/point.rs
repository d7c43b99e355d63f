//! The ten places in a crew's run where hooks run.
//!
//! A point is a type: each of [`points`]'s zero-sized types names its
//! context and what its hooks may replace, so the registry, dispatch,
//! filters and events are written once, and a hook that does not fit its
//! point is refused by the compiler. The constants [`PRE_TOOL_CALL`] & co.
//! are the values users pass (`register_hook(PRE_TOOL_CALL, f)`);
//! [`InterceptionPoint`] names a point at run time (in [`HookInfo`](crate::HookInfo),
//! events and `get_hooks`).

// The sealed trait that reaches a point's chain names the engine's private
// per-point set: users can neither name nor implement it.
#![allow(private_interfaces)]

use std::fmt;

use crate::context::{
    ExecutionEndContext, ExecutionStartContext, HookContext, InputContext, LlmCallHookContext,
    OutputContext, StepContext, ToolCallHookContext,
};
use crate::inputs::Inputs;
use crate::outcome::NoReplacement;
use crate::output::CrewOutput;

/// A point of a crew's run, named at run time.
///
/// The variants are listed in the order they fire during a kickoff:
/// `EXECUTION_START`, `INPUT`, then per task `PRE_STEP`, its model calls
/// (`PRE_MODEL_CALL`, `POST_MODEL_CALL`) and tool calls (`PRE_TOOL_CALL`,
/// `POST_TOOL_CALL`), `POST_STEP`, and last `OUTPUT` and `EXECUTION_END`.
///
/// To register a hook, pass the typed constant of the same name
/// ([`PRE_TOOL_CALL`], …), which tells the compiler the point's context:
///
/// ```
/// use hooks_core::{get_hooks, InterceptionPoint, PRE_TOOL_CALL};
/// // Both name the same chain when listing, clearing or unregistering.
/// assert_eq!(get_hooks(PRE_TOOL_CALL), get_hooks(InterceptionPoint::PRE_TOOL_CALL));
/// assert_eq!(InterceptionPoint::from(PRE_TOOL_CALL), InterceptionPoint::PRE_TOOL_CALL);
/// ```
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum InterceptionPoint {
    /// A kickoff is about to begin.
    EXECUTION_START,
    /// The inputs are resolved, before tasks interpolate them.
    INPUT,
    /// Before each task.
    PRE_STEP,
    /// Before every model call.
    PRE_MODEL_CALL,
    /// After every model call.
    POST_MODEL_CALL,
    /// Before every tool execution.
    PRE_TOOL_CALL,
    /// After every tool execution (and after a blocked call).
    POST_TOOL_CALL,
    /// After each task, before its output is stored.
    POST_STEP,
    /// The crew's final output is ready.
    OUTPUT,
    /// A kickoff ended, successfully or not.
    EXECUTION_END,
}

impl InterceptionPoint {
    /// Every point, in the order they fire.
    pub const ALL: [InterceptionPoint; 10] = [
        InterceptionPoint::EXECUTION_START,
        InterceptionPoint::INPUT,
        InterceptionPoint::PRE_STEP,
        InterceptionPoint::PRE_MODEL_CALL,
        InterceptionPoint::POST_MODEL_CALL,
        InterceptionPoint::PRE_TOOL_CALL,
        InterceptionPoint::POST_TOOL_CALL,
        InterceptionPoint::POST_STEP,
        InterceptionPoint::OUTPUT,
        InterceptionPoint::EXECUTION_END,
    ];

    /// The guide's spelling of the point, e.g. `PRE_TOOL_CALL`.
    pub const fn as_str(self) -> &'static str {
        match self {
            InterceptionPoint::EXECUTION_START => "EXECUTION_START",
            InterceptionPoint::INPUT => "INPUT",
            InterceptionPoint::PRE_STEP => "PRE_STEP",
            InterceptionPoint::PRE_MODEL_CALL => "PRE_MODEL_CALL",
            InterceptionPoint::POST_MODEL_CALL => "POST_MODEL_CALL",
            InterceptionPoint::PRE_TOOL_CALL => "PRE_TOOL_CALL",
            InterceptionPoint::POST_TOOL_CALL => "POST_TOOL_CALL",
            InterceptionPoint::POST_STEP => "POST_STEP",
            InterceptionPoint::OUTPUT => "OUTPUT",
            InterceptionPoint::EXECUTION_END => "EXECUTION_END",
        }
    }

    /// Whether `tools = [...]` filters apply here (the tool-call points).
    pub const fn accepts_tool_filter(self) -> bool {
        matches!(
            self,
            InterceptionPoint::PRE_TOOL_CALL | InterceptionPoint::POST_TOOL_CALL
        )
    }

    /// Whether `agents = [...]` filters apply here (the step, model-call and
    /// tool-call points).
    pub const fn accepts_agent_filter(self) -> bool {
        matches!(
            self,
            InterceptionPoint::PRE_STEP
                | InterceptionPoint::POST_STEP
                | InterceptionPoint::PRE_MODEL_CALL
                | InterceptionPoint::POST_MODEL_CALL
                | InterceptionPoint::PRE_TOOL_CALL
                | InterceptionPoint::POST_TOOL_CALL
        )
    }

    /// The index of this point in per-point arrays.
    pub(crate) const fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for InterceptionPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A point as a type: its context, what its hooks may put in place of the
/// point's value, and its chain in a registry.
///
/// Implemented by the ten types of [`points`] only. Users pass the
/// constants ([`PRE_TOOL_CALL`], …), never name this trait.
///
/// ```
/// use hooks_core::{HookRegistry, InterceptionPoint, Point, POST_STEP, PRE_TOOL_CALL};
///
/// // Code generic over points: how many hooks would run where.
/// fn hook_count<P: Point>(registry: &HookRegistry, _point: P) -> (InterceptionPoint, usize) {
///     (P::ID, registry.get_hooks(P::ID).len())
/// }
/// let registry = HookRegistry::new();
/// assert_eq!(hook_count(&registry, PRE_TOOL_CALL), (InterceptionPoint::PRE_TOOL_CALL, 0));
/// assert_eq!(hook_count(&registry, POST_STEP).0.as_str(), "POST_STEP");
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a typed interception point",
    label = "expected a point constant such as `PRE_TOOL_CALL`",
    note = "register hooks with the typed constants (`PRE_TOOL_CALL`, `POST_MODEL_CALL`, ...); \
            `InterceptionPoint::PRE_TOOL_CALL` names a point only at run time \
            (for `get_hooks`, `clear_hooks`, `unregister_hook`)"
)]
pub trait Point: Copy + Send + Sync + fmt::Debug + 'static + sealed::PointChains {
    /// The context this point's hooks receive.
    type Context: HookContext;
    /// What a hook may return in place of the point's value (`String` for a
    /// result or payload, [`Inputs`] for inputs, [`NoReplacement`] where
    /// nothing can be replaced).
    type Replacement: Send + 'static;
    /// The run-time name of the point.
    const ID: InterceptionPoint;

    /// Puts a hook's replacement in place.
    #[doc(hidden)]
    fn replace(ctx: &mut Self::Context, replacement: Self::Replacement);

    /// What a fail-closed hook's panic does here: `true` stops the chain
    /// like an abort; `false` means [`Point::withhold`] was applied and the
    /// chain goes on.
    #[doc(hidden)]
    fn fail_closed_stops() -> bool {
        true
    }

    /// For points whose fail-closed panic withholds rather than stops:
    /// withholds the value (`POST_TOOL_CALL`: the result).
    #[doc(hidden)]
    fn withhold(_ctx: &mut Self::Context) {}

    /// What the point's hooks may change only by editing the context in
    /// place, watched across the chain so that a change is reported
    /// [`DispatchOutcome::Modified`](crate::DispatchOutcome::Modified):
    /// `EXECUTION_END`'s output, once per kickoff; `()` (nothing, no copy,
    /// nothing kept on the walk) at every other point, where a copy on
    /// every call would cost more than the report is worth.
    #[doc(hidden)]
    type Watched: InPlaceWatch<Self::Context>;
}

/// A copy of what a point's hooks may edit in place, taken before the
/// chain (see [`Point::Watched`]).
#[doc(hidden)]
pub trait InPlaceWatch<C>: Sized {
    /// The copy, or `None` when nothing is watched for this context.
    fn copy(ctx: &C) -> Option<Self>;
    /// Whether the chain changed it.
    fn changed(&self, ctx: &C) -> bool;
}

impl<C> InPlaceWatch<C> for () {
    #[inline(always)]
    fn copy(_: &C) -> Option<()> {
        None
    }

    #[inline(always)]
    fn changed(&self, _: &C) -> bool {
        false
    }
}

/// `EXECUTION_END`'s output as its chain found it. A completed kickoff
/// returns the output as its END hooks leave it; a failed one's error
/// stands whatever they write, so only a completed kickoff's output is
/// watched.
#[doc(hidden)]
#[derive(Debug)]
pub struct OutputBefore(CrewOutput);

impl InPlaceWatch<ExecutionEndContext> for OutputBefore {
    fn copy(ctx: &ExecutionEndContext) -> Option<Self> {
        ctx.output.clone().map(OutputBefore)
    }

    fn changed(&self, ctx: &ExecutionEndContext) -> bool {
        ctx.output.as_ref() != Some(&self.0)
    }
}

/// A type for each point: what a [`ByPoint`] holds for point `P` (a
/// registry holds a chain of `P`'s hooks).
#[doc(hidden)]
#[allow(unreachable_pub)] // named by the sealed `PointChains` trait only
pub trait PointMap {
    /// What is held for point `P`.
    type Of<P: Point>;
}

/// One value for each of the ten points, each of the type `M` gives its
/// point: a registry's set of chains is a `ByPoint` of chains. A point
/// reaches its own value through the sealed `PointChains` trait, resolved
/// at compile time.
#[doc(hidden)]
#[allow(unreachable_pub)] // named by the sealed `PointChains` trait only
pub struct ByPoint<M: PointMap> {
    pub(crate) execution_start: M::Of<points::ExecutionStart>,
    pub(crate) input: M::Of<points::Input>,
    pub(crate) pre_step: M::Of<points::PreStep>,
    pub(crate) pre_model_call: M::Of<points::PreModelCall>,
    pub(crate) post_model_call: M::Of<points::PostModelCall>,
    pub(crate) pre_tool_call: M::Of<points::PreToolCall>,
    pub(crate) post_tool_call: M::Of<points::PostToolCall>,
    pub(crate) post_step: M::Of<points::PostStep>,
    pub(crate) output: M::Of<points::Output>,
    pub(crate) execution_end: M::Of<points::ExecutionEnd>,
}

pub(crate) mod sealed {
    use super::{ByPoint, Point, PointMap};

    /// Reaches a point's own value in a [`ByPoint`] (its chain in a set of
    /// chains); also seals [`Point`].
    pub trait PointChains: Sized {
        fn chain<M: PointMap>(set: &ByPoint<M>) -> &M::Of<Self>
        where
            Self: Point;
        fn chain_mut<M: PointMap>(set: &mut ByPoint<M>) -> &mut M::Of<Self>
        where
            Self: Point;
    }
}

/// The point types, one per [`InterceptionPoint`]. Each names its context
/// and what its hooks may replace; the constants [`PRE_TOOL_CALL`] & co. are
/// their values.
///
/// ```
/// use hooks_core::{points, HookRegistry, InterceptionPoint, Point, ReplacesText, StepContext, POST_STEP};
///
/// // A helper that works at any point whose context is a step.
/// fn tag_steps<P: ReplacesText<Context = StepContext>>(
///     registry: &HookRegistry,
///     point: P,
/// ) -> Result<(), hooks_core::RegisterError> {
///     registry.register_hook(point, |ctx: &mut StepContext| Some(format!("[{}] {}", P::ID, ctx.payload)))?;
///     Ok(())
/// }
/// let registry = HookRegistry::new();
/// tag_steps(&registry, POST_STEP)?;
/// assert_eq!(<points::PostStep as Point>::ID, InterceptionPoint::POST_STEP);
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
pub mod points {
    use super::*;

    macro_rules! point_types {
        ($(
            $(#[$doc:meta])*
            $ty:ident = $id:ident, $field:ident, $ctx:ty, $replacement:ty;
        )*) => {$(
            $(#[$doc])*
            #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
            pub struct $ty;

            impl sealed::PointChains for $ty {
                #[inline(always)]
                fn chain<M: PointMap>(set: &ByPoint<M>) -> &M::Of<Self> {
                    &set.$field
                }
                fn chain_mut<M: PointMap>(set: &mut ByPoint<M>) -> &mut M::Of<Self> {
                    &mut set.$field
                }
            }

            impl From<$ty> for InterceptionPoint {
                fn from(_: $ty) -> InterceptionPoint {
                    InterceptionPoint::$id
                }
            }

            impl PartialEq<InterceptionPoint> for $ty {
                fn eq(&self, other: &InterceptionPoint) -> bool {
                    *other == InterceptionPoint::$id
                }
            }

            impl PartialEq<$ty> for InterceptionPoint {
                fn eq(&self, _: &$ty) -> bool {
                    *self == InterceptionPoint::$id
                }
            }

            impl fmt::Display for $ty {
                fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str(InterceptionPoint::$id.as_str())
                }
            }
        )*};
    }

    point_types! {
        /// `EXECUTION_START`: a kickoff is about to begin. Hooks may edit
        /// [`ExecutionStartContext::inputs`], replace them (`Some(inputs)`)
        /// or abort the run.
        ///
        /// ```
        /// use hooks_core::{points, InterceptionPoint, Point, EXECUTION_START};
        ///
        /// // The type behind the constant `EXECUTION_START`; generic code names it.
        /// assert_eq!(<points::ExecutionStart as Point>::ID, InterceptionPoint::EXECUTION_START);
        /// assert_eq!(EXECUTION_START, InterceptionPoint::EXECUTION_START);
        /// assert_eq!(points::ExecutionStart.to_string(), "EXECUTION_START");
        /// ```
        ExecutionStart = EXECUTION_START, execution_start, ExecutionStartContext, Inputs;
        /// `INPUT`: inputs resolved, before tasks interpolate them. What the
        /// hooks leave is what `{placeholders}` are filled from.
        ///
        /// ```
        /// use hooks_core::{points, InterceptionPoint, Point, INPUT};
        ///
        /// // The type behind the constant `INPUT`; generic code names it.
        /// assert_eq!(<points::Input as Point>::ID, InterceptionPoint::INPUT);
        /// assert_eq!(INPUT, InterceptionPoint::INPUT);
        /// assert_eq!(points::Input.to_string(), "INPUT");
        /// ```
        Input = INPUT, input, InputContext, Inputs;
        /// `PRE_STEP`: before each task. Hooks may edit or replace the
        /// payload (the context text the agent is given) or abort the run.
        ///
        /// ```
        /// use hooks_core::{points, InterceptionPoint, Point, PRE_STEP};
        ///
        /// // The type behind the constant `PRE_STEP`; generic code names it.
        /// assert_eq!(<points::PreStep as Point>::ID, InterceptionPoint::PRE_STEP);
        /// assert_eq!(PRE_STEP, InterceptionPoint::PRE_STEP);
        /// assert_eq!(points::PreStep.to_string(), "PRE_STEP");
        /// ```
        PreStep = PRE_STEP, pre_step, StepContext, String;
        /// `PRE_MODEL_CALL`: before every model call. Hooks may edit the
        /// messages in place (what they leave is what the model receives) or
        /// block the call, which ends the run.
        ///
        /// ```
        /// use hooks_core::{points, InterceptionPoint, Point, PRE_MODEL_CALL};
        ///
        /// // The type behind the constant `PRE_MODEL_CALL`; generic code names it.
        /// assert_eq!(<points::PreModelCall as Point>::ID, InterceptionPoint::PRE_MODEL_CALL);
        /// assert_eq!(PRE_MODEL_CALL, InterceptionPoint::PRE_MODEL_CALL);
        /// assert_eq!(points::PreModelCall.to_string(), "PRE_MODEL_CALL");
        /// ```
        PreModelCall = PRE_MODEL_CALL, pre_model_call, LlmCallHookContext, NoReplacement;
        /// `POST_MODEL_CALL`: after every model call. Hooks may replace the
        /// answer's text (`Some(text)`), edit or drop its tool calls in place
        /// before they are dispatched, or abort the run.
        ///
        /// ```
        /// use hooks_core::{points, InterceptionPoint, Point, POST_MODEL_CALL};
        ///
        /// // The type behind the constant `POST_MODEL_CALL`; generic code names it.
        /// assert_eq!(<points::PostModelCall as Point>::ID, InterceptionPoint::POST_MODEL_CALL);
        /// assert_eq!(POST_MODEL_CALL, InterceptionPoint::POST_MODEL_CALL);
        /// assert_eq!(points::PostModelCall.to_string(), "POST_MODEL_CALL");
        /// ```
        PostModelCall = POST_MODEL_CALL, post_model_call, LlmCallHookContext, String;
        /// `PRE_TOOL_CALL`: before every tool execution. Hooks may edit
        /// `tool_input` in place or block the call.
        ///
        /// ```
        /// use hooks_core::{points, InterceptionPoint, Point, PRE_TOOL_CALL};
        ///
        /// // The type behind the constant `PRE_TOOL_CALL`; generic code names it.
        /// assert_eq!(<points::PreToolCall as Point>::ID, InterceptionPoint::PRE_TOOL_CALL);
        /// assert_eq!(PRE_TOOL_CALL, InterceptionPoint::PRE_TOOL_CALL);
        /// assert_eq!(points::PreToolCall.to_string(), "PRE_TOOL_CALL");
        /// ```
        PreToolCall = PRE_TOOL_CALL, pre_tool_call, ToolCallHookContext, NoReplacement;
        /// `POST_TOOL_CALL`: after every tool execution. Hooks may replace
        /// `tool_result` (`Some(text)`) or abort the run.
        ///
        /// ```
        /// use hooks_core::{points, InterceptionPoint, Point, POST_TOOL_CALL};
        ///
        /// // The type behind the constant `POST_TOOL_CALL`; generic code names it.
        /// assert_eq!(<points::PostToolCall as Point>::ID, InterceptionPoint::POST_TOOL_CALL);
        /// assert_eq!(POST_TOOL_CALL, InterceptionPoint::POST_TOOL_CALL);
        /// assert_eq!(points::PostToolCall.to_string(), "POST_TOOL_CALL");
        /// ```
        PostToolCall = POST_TOOL_CALL, post_tool_call, ToolCallHookContext, String;
        /// `POST_STEP`: after each task, before its output is stored. Hooks
        /// may edit or replace the output or abort the run.
        ///
        /// ```
        /// use hooks_core::{points, InterceptionPoint, Point, POST_STEP};
        ///
        /// // The type behind the constant `POST_STEP`; generic code names it.
        /// assert_eq!(<points::PostStep as Point>::ID, InterceptionPoint::POST_STEP);
        /// assert_eq!(POST_STEP, InterceptionPoint::POST_STEP);
        /// assert_eq!(points::PostStep.to_string(), "POST_STEP");
        /// ```
        PostStep = POST_STEP, post_step, StepContext, String;
        /// `OUTPUT`: the crew's final output is ready. Hooks may edit it or
        /// replace its text (`Some(text)`).
        ///
        /// ```
        /// use hooks_core::{points, InterceptionPoint, Point, OUTPUT};
        ///
        /// // The type behind the constant `OUTPUT`; generic code names it.
        /// assert_eq!(<points::Output as Point>::ID, InterceptionPoint::OUTPUT);
        /// assert_eq!(OUTPUT, InterceptionPoint::OUTPUT);
        /// assert_eq!(points::Output.to_string(), "OUTPUT");
        /// ```
        Output = OUTPUT, output, OutputContext, String;
        /// `EXECUTION_END`: once per kickoff that passed `EXECUTION_START`,
        /// on success and on failure. Hooks observe.
        ///
        /// ```
        /// use hooks_core::{points, InterceptionPoint, Point, EXECUTION_END};
        ///
        /// // The type behind the constant `EXECUTION_END`; generic code names it.
        /// assert_eq!(<points::ExecutionEnd as Point>::ID, InterceptionPoint::EXECUTION_END);
        /// assert_eq!(EXECUTION_END, InterceptionPoint::EXECUTION_END);
        /// assert_eq!(points::ExecutionEnd.to_string(), "EXECUTION_END");
        /// ```
        ExecutionEnd = EXECUTION_END, execution_end, ExecutionEndContext, NoReplacement;
    }

    impl Point for ExecutionStart {
        type Context = ExecutionStartContext;
        type Replacement = Inputs;
        type Watched = ();
        const ID: InterceptionPoint = InterceptionPoint::EXECUTION_START;
        fn replace(ctx: &mut ExecutionStartContext, inputs: Inputs) {
            ctx.inputs = inputs;
        }
    }

    impl Point for Input {
        type Context = InputContext;
        type Replacement = Inputs;
        type Watched = ();
        const ID: InterceptionPoint = InterceptionPoint::INPUT;
        fn replace(ctx: &mut InputContext, inputs: Inputs) {
            ctx.inputs = inputs;
        }
    }

    impl Point for PreStep {
        type Context = StepContext;
        type Replacement = String;
        type Watched = ();
        const ID: InterceptionPoint = InterceptionPoint::PRE_STEP;
        fn replace(ctx: &mut StepContext, payload: String) {
            ctx.payload = payload;
        }
    }

    impl Point for PreModelCall {
        type Context = LlmCallHookContext;
        type Replacement = NoReplacement;
        type Watched = ();
        const ID: InterceptionPoint = InterceptionPoint::PRE_MODEL_CALL;
        fn replace(_: &mut LlmCallHookContext, never: NoReplacement) {
            match never {}
        }
    }

    impl Point for PostModelCall {
        type Context = LlmCallHookContext;
        type Replacement = String;
        type Watched = ();
        const ID: InterceptionPoint = InterceptionPoint::POST_MODEL_CALL;
        fn replace(ctx: &mut LlmCallHookContext, text: String) {
            if let Some(response) = &mut ctx.response {
                response.content = text;
            }
        }
    }

    impl Point for PreToolCall {
        type Context = ToolCallHookContext;
        type Replacement = NoReplacement;
        type Watched = ();
        const ID: InterceptionPoint = InterceptionPoint::PRE_TOOL_CALL;
        fn replace(_: &mut ToolCallHookContext, never: NoReplacement) {
            match never {}
        }
    }

    impl Point for PostToolCall {
        type Context = ToolCallHookContext;
        type Replacement = String;
        type Watched = ();
        const ID: InterceptionPoint = InterceptionPoint::POST_TOOL_CALL;
        fn replace(ctx: &mut ToolCallHookContext, text: String) {
            ctx.tool_result = Some(text);
        }
        fn fail_closed_stops() -> bool {
            false
        }
        fn withhold(ctx: &mut ToolCallHookContext) {
            ctx.tool_result = Some(crate::observation::withheld_message(ctx.tool_name()));
        }
    }

    impl Point for PostStep {
        type Context = StepContext;
        type Replacement = String;
        type Watched = ();
        const ID: InterceptionPoint = InterceptionPoint::POST_STEP;
        fn replace(ctx: &mut StepContext, payload: String) {
            ctx.payload = payload;
        }
    }

    impl Point for Output {
        type Context = OutputContext;
        type Replacement = String;
        type Watched = ();
        const ID: InterceptionPoint = InterceptionPoint::OUTPUT;
        fn replace(ctx: &mut OutputContext, text: String) {
            ctx.output.raw = text;
        }
    }

    impl Point for ExecutionEnd {
        type Context = ExecutionEndContext;
        type Replacement = NoReplacement;
        type Watched = super::OutputBefore;
        const ID: InterceptionPoint = InterceptionPoint::EXECUTION_END;
        fn replace(_: &mut ExecutionEndContext, never: NoReplacement) {
            match never {}
        }
    }
}

/// `EXECUTION_START`, as a value to register hooks with.
///
/// ```
/// use hooks_core::{ExecutionStartContext, HookRegistry, EXECUTION_START};
///
/// // Hooks receive the kickoff's inputs and may fill in what is missing.
/// let registry = HookRegistry::new();
/// registry.register_hook(EXECUTION_START, |ctx: &mut ExecutionStartContext| {
///     if ctx.inputs.get("language").is_none() {
///         ctx.inputs.insert("language", "English");
///     }
/// })?;
/// let mut ctx = ExecutionStartContext::new([("topic", "Rust")]);
/// registry.dispatch(EXECUTION_START, &mut ctx);
/// assert_eq!(ctx.inputs.get("language"), Some("English"));
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
pub const EXECUTION_START: points::ExecutionStart = points::ExecutionStart;
/// `INPUT`, as a value to register hooks with.
///
/// ```
/// use hooks_core::{HookRegistry, InputContext, Inputs, INPUT};
///
/// // Hooks receive the resolved inputs; what they return fills `{placeholders}`.
/// let registry = HookRegistry::new();
/// registry.register_hook(INPUT, |ctx: &mut InputContext| -> Option<Inputs> {
///     Some(ctx.inputs.iter().map(|(name, value)| (name.to_owned(), value.to_lowercase())).collect())
/// })?;
/// let mut ctx = InputContext::new([("topic", "RUST")]);
/// registry.dispatch(INPUT, &mut ctx);
/// assert_eq!(ctx.inputs.get("topic"), Some("rust"));
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
pub const INPUT: points::Input = points::Input;
/// `PRE_STEP`, as a value to register hooks with.
///
/// ```
/// use hooks_core::{HookRegistry, StepContext, StepKind, PRE_STEP};
///
/// // Hooks receive the task and the context text its agent is given.
/// let registry = HookRegistry::new();
/// registry.register_hook(PRE_STEP, |ctx: &mut StepContext| {
///     Some(format!("{}\nAnswer in one paragraph.", ctx.payload))
/// })?;
/// let mut ctx = StepContext::new(StepKind::Task, "summary", "Notes from the research task.");
/// registry.dispatch(PRE_STEP, &mut ctx);
/// assert_eq!(ctx.payload, "Notes from the research task.\nAnswer in one paragraph.");
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
pub const PRE_STEP: points::PreStep = points::PreStep;
/// `PRE_MODEL_CALL`, as a value to register hooks with.
///
/// ```
/// use hooks_core::{ChatMessage, HookRegistry, LlmCallHookContext, PRE_MODEL_CALL};
///
/// // Hooks receive the messages the model is about to get, and edit them.
/// let registry = HookRegistry::new();
/// registry.register_hook(PRE_MODEL_CALL, |ctx: &mut LlmCallHookContext| {
///     ctx.messages.insert(0, ChatMessage::system("Cite your sources."));
/// })?;
/// let mut ctx = LlmCallHookContext::new(vec![ChatMessage::user("Who wrote Dune?")]);
/// registry.dispatch(PRE_MODEL_CALL, &mut ctx);
/// assert_eq!(ctx.messages[0].content, "Cite your sources.");
/// assert_eq!(ctx.messages.len(), 2);
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
pub const PRE_MODEL_CALL: points::PreModelCall = points::PreModelCall;
/// `POST_MODEL_CALL`, as a value to register hooks with.
///
/// ```
/// use hooks_core::{ChatMessage, HookRegistry, LlmCallHookContext, ModelResponse, POST_MODEL_CALL};
///
/// // Hooks receive the call with the model's answer, and may replace its text.
/// let registry = HookRegistry::new();
/// registry.register_hook(POST_MODEL_CALL, |ctx: &mut LlmCallHookContext| {
///     ctx.response.as_ref().map(|r| r.content.replace("Paris", "PARIS"))
/// })?;
/// let mut ctx = LlmCallHookContext::new(vec![ChatMessage::user("Capital of France?")]);
/// ctx.response = Some(ModelResponse { content: "Paris".into(), tool_calls: Vec::new() });
/// registry.dispatch(POST_MODEL_CALL, &mut ctx);
/// assert_eq!(ctx.response.map(|r| r.content).as_deref(), Some("PARIS"));
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
pub const POST_MODEL_CALL: points::PostModelCall = points::PostModelCall;
/// `PRE_TOOL_CALL`, as a value to register hooks with.
///
/// ```
/// use hooks_core::{HookAborted, HookRegistry, ToolCallHookContext, PRE_TOOL_CALL};
///
/// // Hooks receive the tool's name and arguments, and may block the call.
/// let registry = HookRegistry::new();
/// registry.register_hook(PRE_TOOL_CALL, |ctx: &mut ToolCallHookContext| -> Result<(), HookAborted> {
///     match ctx.tool_input.get("path").and_then(|p| p.as_str()) {
///         Some(path) if path.starts_with("/etc") => Err("system files are off limits".into()),
///         _ => Ok(()),
///     }
/// })?;
/// let mut ctx = ToolCallHookContext::new("Read File", Default::default());
/// ctx.tool_input.insert("path".into(), "/etc/passwd".into());
/// let outcome = registry.dispatch(PRE_TOOL_CALL, &mut ctx);
/// assert_eq!(ctx.tool_name(), "read_file");
/// assert_eq!(outcome.aborted().map(|a| a.reason.as_str()), Some("system files are off limits"));
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
pub const PRE_TOOL_CALL: points::PreToolCall = points::PreToolCall;
/// `POST_TOOL_CALL`, as a value to register hooks with.
///
/// ```
/// use hooks_core::runtime::ToolOutput;
/// use hooks_core::{HookRegistry, ToolCallHookContext, POST_TOOL_CALL};
///
/// // Hooks receive the call with its result, and may replace what the agent sees.
/// let registry = HookRegistry::new();
/// registry.register_hook(POST_TOOL_CALL, |ctx: &mut ToolCallHookContext| {
///     let result = ctx.tool_result.as_deref()?;
///     (result.len() > 20).then(|| format!("{}…", &result[..20]))
/// })?;
/// let mut ctx = ToolCallHookContext::new("fetch_page", Default::default());
/// let report = registry.run_tool_call(&mut ctx, |_| ToolOutput::text("a".repeat(1_000)))?;
/// assert_eq!(report.observation, format!("{}…", "a".repeat(20)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub const POST_TOOL_CALL: points::PostToolCall = points::PostToolCall;
/// `POST_STEP`, as a value to register hooks with.
///
/// ```
/// use hooks_core::{HookRegistry, StepContext, StepKind, POST_STEP};
///
/// // Hooks receive the task's output before later tasks see it.
/// let registry = HookRegistry::new();
/// registry.register_hook(POST_STEP, |ctx: &mut StepContext| {
///     Some(format!("[{}] {}", ctx.step_name, ctx.payload))
/// })?;
/// let mut ctx = StepContext::new(StepKind::Task, "research", "Rust 1.0 shipped in 2015.");
/// registry.dispatch(POST_STEP, &mut ctx);
/// assert_eq!(ctx.payload, "[research] Rust 1.0 shipped in 2015.");
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
pub const POST_STEP: points::PostStep = points::PostStep;
/// `OUTPUT`, as a value to register hooks with.
///
/// ```
/// use hooks_core::{CrewOutput, HookRegistry, OutputContext, OUTPUT};
///
/// // Hooks receive the crew's final output before `kickoff` returns it.
/// let registry = HookRegistry::new();
/// registry.register_hook(OUTPUT, |ctx: &mut OutputContext| Some(ctx.output.raw.trim().to_owned()))?;
/// let mut ctx = OutputContext::new(CrewOutput { raw: "  The report.\n".into(), ..CrewOutput::default() });
/// registry.dispatch(OUTPUT, &mut ctx);
/// assert_eq!(ctx.output.raw, "The report.");
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
pub const OUTPUT: points::Output = points::Output;
/// `EXECUTION_END`, as a value to register hooks with.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use hooks_core::{ExecutionEndContext, ExecutionStatus, HookRegistry, EXECUTION_END};
///
/// // Hooks receive how the kickoff ended, and observe.
/// let registry = HookRegistry::new();
/// let ends = Arc::new(Mutex::new(Vec::new()));
/// let seen = Arc::clone(&ends);
/// registry.register_hook(EXECUTION_END, move |ctx: &mut ExecutionEndContext| {
///     seen.lock().unwrap().push((ctx.status, ctx.error.clone()));
/// })?;
/// registry.dispatch(EXECUTION_END, &mut ExecutionEndContext::failed("the model server is down"));
/// assert_eq!(
///     *ends.lock().unwrap(),
///     [(ExecutionStatus::Failed, Some("the model server is down".to_owned()))]
/// );
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
pub const EXECUTION_END: points::ExecutionEnd = points::ExecutionEnd;
