//! The one door generated code goes through. Not public API: the macros of
//! `hooks-macros` emit paths into this module only, so users never need
//! `linkme` (or anything else) in their own `Cargo.toml`.

use std::any::TypeId;
use std::sync::Arc;

pub use ::core::option::Option;
pub use ::core::result::Result;
pub use ::linkme;
pub use ::std::sync::Arc as SharedArc;

pub use crate::capability::{Capabilities, Capability};
pub use crate::hook::{FailureMode, HookOptions, HookStyle};
pub use crate::outcome::{Decision, HookReturn, LegacyBeforeReturn};
pub use crate::point::{InterceptionPoint, Point, points};
pub use crate::registry::{HookRegistry, RegisterError};

use crate::chain::Chain;
use crate::hook::{HookCall, HookEntry, HookId, HookInfo, HookOrigin};
use crate::point::points::{
    ExecutionEnd, ExecutionStart, Input, Output, PostModelCall, PostStep, PostToolCall,
    PreModelCall, PreStep, PreToolCall,
};

/// A hook registered at link time by an attribute on a free function, at
/// point `P`.
pub struct StaticHook<P: Point> {
    /// Which attribute registered it.
    pub style: HookStyle,
    /// The function's name.
    pub name: &'static str,
    /// `module_path!()` at the attribute.
    pub module_path: &'static str,
    /// `file!()` at the attribute.
    pub file: &'static str,
    /// `line!()` at the attribute.
    pub line: u32,
    /// `column!()` at the attribute.
    pub column: u32,
    /// Normalized tool filter.
    pub tools: &'static [&'static str],
    /// Agent role filter.
    pub agents: &'static [&'static str],
    /// Capability filter (empty: none).
    pub capabilities: Capabilities,
    /// `order = N`.
    pub order: i32,
    /// Fail-open or fail-closed.
    pub failure: FailureMode,
    /// `timeout_ms = N`: the hook's own time limit (`None`: the crew's).
    pub timeout: Option<std::time::Duration>,
    /// `unchecked_filters`: left out of the crews' filter check.
    pub unchecked_filters: bool,
    /// The adapted function.
    pub call: StaticCall<P>,
    /// The type of the user's function, for unregistering by function.
    pub type_id: fn() -> TypeId,
}

impl<P: Point> std::fmt::Debug for StaticHook<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticHook")
            .field("point", &P::ID)
            .field("name", &self.name)
            .field("module_path", &self.module_path)
            .field("line", &self.line)
            .finish_non_exhaustive()
    }
}

macro_rules! static_slices {
    ($($slice:ident: $point:ty),* $(,)?) => {$(
        /// The link-time hooks of one point, in link order (unspecified:
        /// sorted before use).
        #[linkme::distributed_slice]
        pub static $slice: [StaticHook<$point>];
    )*};
}

static_slices! {
    EXECUTION_START_HOOKS: ExecutionStart,
    INPUT_HOOKS: Input,
    PRE_STEP_HOOKS: PreStep,
    PRE_MODEL_CALL_HOOKS: PreModelCall,
    POST_MODEL_CALL_HOOKS: PostModelCall,
    PRE_TOOL_CALL_HOOKS: PreToolCall,
    POST_TOOL_CALL_HOOKS: PostToolCall,
    POST_STEP_HOOKS: PostStep,
    OUTPUT_HOOKS: Output,
    EXECUTION_END_HOOKS: ExecutionEnd,
}

/// Reads an `#[on]` (or legacy after) hook's return value at point `P`.
/// A link-time hook's function: synchronous, or an `async fn` behind a
/// wrapper that boxes its future.
pub enum StaticCall<P: Point> {
    Sync(fn(&mut P::Context) -> Decision<P::Replacement>),
    Async(for<'c> fn(&'c mut P::Context) -> HookFuture<'c, Decision<P::Replacement>>),
}

pub use crate::hook::HookFuture;
pub use ::std::boxed::Box as HookBox;

#[inline(always)]
pub fn on<P: Point, R: HookReturn<P>>(value: R) -> Decision<P::Replacement> {
    value.into_decision()
}

/// Reads a legacy before hook's return value at point `P`.
#[inline(always)]
pub fn legacy_before<P, R>(value: R) -> Decision<crate::outcome::NoReplacement>
where
    P: crate::outcome::LegacyBeforePoint,
    R: LegacyBeforeReturn<P>,
{
    value.into_decision()
}

/// The type of a value, for naming a function by its fn-item type.
pub fn type_id_of<T: 'static>(_: &T) -> TypeId {
    TypeId::of::<T>()
}

/// The copy of a `#[crew_base]` instance its hook methods keep. The bounds
/// are checked here, with the type named by the caller, so that rustc
/// reports a missing `Clone`, `Send` or `Sync` on the impl's self type.
pub fn share_crew_instance<T: Clone + Send + Sync + 'static>(instance: &T) -> Arc<T> {
    Arc::new(instance.clone())
}

/// Registers a crew-scoped hook method, already adapted to its point, on a
/// crew's own registry. The attribute checked its filters at compile time.
pub fn register_scoped<P: Point>(
    _point: P,
    registry: &HookRegistry,
    crew: &str,
    style: HookStyle,
    options: HookOptions,
    call: impl Fn(&mut P::Context) -> Decision<P::Replacement> + Send + Sync + 'static,
) -> Result<HookId, RegisterError> {
    let entry = crate::registry::crew_entry::<P>(
        crew,
        style,
        options,
        HookCall::Shared(std::sync::Arc::new(call)),
    )?;
    Ok(registry.insert(entry))
}

pub fn register_scoped_async<P: Point>(
    _point: P,
    registry: &HookRegistry,
    crew: &str,
    style: HookStyle,
    options: HookOptions,
    call: impl for<'c> Fn(&'c mut P::Context) -> HookFuture<'c, Decision<P::Replacement>>
    + Send
    + Sync
    + 'static,
) -> Result<HookId, RegisterError> {
    let entry = crate::registry::crew_entry::<P>(
        crew,
        style,
        options,
        HookCall::SharedAsync(std::sync::Arc::new(call)),
    )?;
    Ok(registry.insert(entry))
}

/// The link-time hooks of point `P` as a chain, sorted by `order`, module
/// path and source position (the physical order of the slice is
/// unspecified and changes with the linker, so it is never used).
pub(crate) fn static_chain<P: Point>() -> Chain<P> {
    let mut records: Vec<(usize, &'static StaticHook<P>)> =
        P::static_hooks().iter().enumerate().collect();
    records.sort_by(|(_, a), (_, b)| {
        (a.order, a.module_path, a.file, a.line, a.column, a.name).cmp(&(
            b.order,
            b.module_path,
            b.file,
            b.line,
            b.column,
            b.name,
        ))
    });
    let entries = records
        .into_iter()
        .enumerate()
        .map(|(position, (_, record))| {
            // Ranks of link-time hooks sort below every run-time rank; the
            // point's index keeps ids distinct across points.
            let rank = ((P::ID.index() as u64) << 24) | (position as u64 + 1);
            Arc::new(HookEntry::new(
                HookInfo {
                    id: HookId(rank),
                    point: P::ID,
                    name: record.name.to_owned(),
                    tools: record.tools.iter().map(|t| (*t).to_owned()).collect(),
                    agents: record.agents.iter().map(|a| (*a).to_owned()).collect(),
                    capabilities: record.capabilities,
                    origin: HookOrigin::LinkTime {
                        module_path: record.module_path,
                        file: record.file,
                        line: record.line,
                        column: record.column,
                    },
                    order: record.order,
                    failure: record.failure,
                    timeout: record.timeout,
                    style: record.style,
                    // The attributes have no opt-out: a link-time filter
                    // is always checked.
                    unchecked_filters: record.unchecked_filters,
                },
                rank,
                Some((record.type_id)()),
                Some(position),
                match record.call {
                    StaticCall::Sync(call) => HookCall::Static(call),
                    StaticCall::Async(call) => HookCall::StaticAsync(call),
                },
            ))
        })
        .collect();
    Chain::from_entries(entries)
}

/// Implemented by the runtime's crew type so that `#[crew_base]` code can
/// attach a crew instance's hook methods to the crew it builds.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a crew that `#[crew_base]` can attach hook methods to",
    label = "the `#[crew]` method returns this type",
    note = "the `#[crew]` method of a `#[crew_base]` impl returns the runtime's `Crew` or `Result<Crew, _>` (any type implementing `CrewScope`)"
)]
pub trait CrewScope {
    /// The crew's own registry: hooks there fire for this crew's calls only.
    fn crew_hooks(&self) -> &HookRegistry;

    /// Called once the instance's hook methods are attached, so the crew can
    /// check their filters as it checked the others when it was built.
    fn scoped_hooks_attached(&self) {}
}

/// What a `#[crew]` method may return: a crew, or a `Result` holding one
/// (so the method can use `?` on the runtime's builder). Hook methods are
/// attached only to a crew that was built.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a crew that `#[crew_base]` can attach hook methods to",
    label = "the `#[crew]` method returns this type",
    note = "the `#[crew]` method of a `#[crew_base]` impl returns the runtime's `Crew` or `Result<Crew, _>` (any type implementing `CrewScope`)"
)]
pub trait BuiltCrew {
    /// The built crew's own registry, if a crew was built.
    fn built_crew_hooks(&self) -> Option<&HookRegistry>;

    /// Tells the built crew (if any) that its hook methods are attached.
    fn built_crew_hooks_attached(&self);
}

impl<C: CrewScope> BuiltCrew for C {
    fn built_crew_hooks(&self) -> Option<&HookRegistry> {
        Some(self.crew_hooks())
    }

    fn built_crew_hooks_attached(&self) {
        self.scoped_hooks_attached();
    }
}

impl<C: CrewScope, E> BuiltCrew for Result<C, E> {
    fn built_crew_hooks(&self) -> Option<&HookRegistry> {
        self.as_ref().ok().map(CrewScope::crew_hooks)
    }

    fn built_crew_hooks_attached(&self) {
        if let Ok(crew) = self {
            crew.scoped_hooks_attached();
        }
    }
}

/// What a `#[task]` method may return, so that `#[crew_base]`'s `tasks()`
/// can name each task after its method when the task was given no name
/// (SPEC §10: `TaskBuilder::name(..)`, else the method's name, else the
/// description): the runtime's task, or a `Result` holding one.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a task that `#[crew_base]` can name after its `#[task]` method",
    label = "the `#[task]` method returns this type",
    note = "the `#[task]` methods of a `#[crew_base]` impl return the runtime's `Task` or `Result<Task, _>` (any type implementing `DefaultTaskName`)"
)]
pub trait DefaultTaskName {
    /// The task, named `name` unless it already has a name of its own.
    fn named_by_default(self, name: &'static str) -> Self;
}

impl<T: DefaultTaskName, E> DefaultTaskName for Result<T, E> {
    fn named_by_default(self, name: &'static str) -> Self {
        self.map(|task| task.named_by_default(name))
    }
}
