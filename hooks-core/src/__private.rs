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
pub use crate::outcome::Decision;
pub use crate::point::{InterceptionPoint, Point, points};
pub use crate::registry::{HookRegistry, RegisterError};
pub use crate::returns::{HookReturn, LegacyBeforeReturn};

pub use crate::linked::{
    EXECUTION_END_HOOKS, EXECUTION_START_HOOKS, INPUT_HOOKS, OUTPUT_HOOKS, POST_MODEL_CALL_HOOKS,
    POST_STEP_HOOKS, POST_TOOL_CALL_HOOKS, PRE_MODEL_CALL_HOOKS, PRE_STEP_HOOKS,
    PRE_TOOL_CALL_HOOKS, StaticCall, StaticHook,
};

use crate::hook::{HookCall, HookId};

pub use crate::hook::HookFuture;
pub use ::std::boxed::Box as HookBox;

/// Reads an `#[on]` (or legacy after) hook's return value at point `P`.
#[inline(always)]
pub fn on<P: Point, R: HookReturn<P>>(value: R) -> Decision<P::Replacement> {
    value.into_decision()
}

/// Reads a legacy before hook's return value at point `P`.
#[inline(always)]
pub fn legacy_before<P, R>(value: R) -> Decision<crate::outcome::NoReplacement>
where
    P: crate::returns::LegacyBeforePoint,
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

std::thread_local! {
    /// The `#[crew_base]` type whose `#[crew]` method runs on this thread.
    static CREW_BASE: std::cell::Cell<Option<&'static str>> = const { std::cell::Cell::new(None) };
}

/// Runs a `#[crew]` method's body with `type_name` as the name of the
/// `#[crew_base]` type being built, so that a crew built there without a
/// name of its own is named after the type ([`crew_base_being_built`]).
pub fn building_crew_base<R>(type_name: &'static str, build: impl FnOnce() -> R) -> R {
    struct Restore(Option<&'static str>);
    impl Drop for Restore {
        fn drop(&mut self) {
            CREW_BASE.with(|cell| cell.set(self.0));
        }
    }
    let _restore = Restore(CREW_BASE.with(|cell| cell.replace(Some(type_name))));
    build()
}

/// The `#[crew_base]` type whose `#[crew]` method runs on this thread, if
/// any: the name a crew built there takes when its builder was given none.
///
/// ```
/// use hooks_core::__private::{building_crew_base, crew_base_being_built};
///
/// assert_eq!(crew_base_being_built(), None);
/// assert_eq!(building_crew_base("SupportDesk", crew_base_being_built), Some("SupportDesk"));
/// assert_eq!(crew_base_being_built(), None);
/// ```
pub fn crew_base_being_built() -> Option<&'static str> {
    CREW_BASE.with(std::cell::Cell::get)
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

    /// The crew's name, which its hook methods' origin carries (`None`:
    /// the `#[crew_base]` type's name).
    fn crew_name(&self) -> Option<&str> {
        None
    }

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

    /// The built crew's name, if a crew was built and it tells it.
    fn built_crew_name(&self) -> Option<&str>;

    /// Tells the built crew (if any) that its hook methods are attached.
    fn built_crew_hooks_attached(&self);
}

impl<C: CrewScope> BuiltCrew for C {
    fn built_crew_hooks(&self) -> Option<&HookRegistry> {
        Some(self.crew_hooks())
    }

    fn built_crew_name(&self) -> Option<&str> {
        self.crew_name()
    }

    fn built_crew_hooks_attached(&self) {
        self.scoped_hooks_attached();
    }
}

impl<C: CrewScope, E> BuiltCrew for Result<C, E> {
    fn built_crew_hooks(&self) -> Option<&HookRegistry> {
        self.as_ref().ok().map(CrewScope::crew_hooks)
    }

    fn built_crew_name(&self) -> Option<&str> {
        self.as_ref().ok().and_then(CrewScope::crew_name)
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
