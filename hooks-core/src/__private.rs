//! The one door generated code goes through. Not public API: the macros of
//! `hooks-macros` emit paths into this module only, so users never need
//! `linkme` (or anything else) in their own `Cargo.toml`.

use std::any::TypeId;
use std::sync::{Arc, LazyLock};

pub use ::core::option::Option;
pub use ::core::result::Result;
pub use ::linkme;
pub use ::std::sync::Arc as SharedArc;

pub use crate::context::ToolCallHookContext;
pub use crate::hook::{FailureMode, HookOptions, HookStyle};
pub use crate::outcome::{
    HookAborted, LegacyBeforeReturn, PostDecision, PostHookReturn, PreDecision, PreHookReturn,
};
pub use crate::point::InterceptionPoint;
pub use crate::registry::{HookRegistry, RegisterError};

use crate::hook::{HookEntry, HookFn, HookId, HookInfo, HookOrigin};

/// A hook registered at link time by `#[on]`, `#[before_tool_call]` or
/// `#[after_tool_call]` on a free function.
#[derive(Debug)]
pub struct StaticHook {
    /// The point it runs at.
    pub point: InterceptionPoint,
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
    /// `order = N`.
    pub order: i32,
    /// Fail-open or fail-closed.
    pub failure: FailureMode,
    /// The adapted function.
    pub call: StaticCall,
    /// The type of the user's function, for unregistering by function.
    pub type_id: fn() -> TypeId,
}

/// The adapted function of a [`StaticHook`].
#[derive(Debug, Clone, Copy)]
pub enum StaticCall {
    /// A PRE hook.
    Pre(fn(&mut ToolCallHookContext) -> PreDecision),
    /// A POST hook.
    Post(fn(&mut ToolCallHookContext) -> PostDecision),
}

/// Every link-time hook of the program, in link order (unspecified: sorted
/// before use).
#[linkme::distributed_slice]
pub static STATIC_HOOKS: [StaticHook];

/// Reads a `#[on(PRE_TOOL_CALL)]` hook's return value.
#[inline(always)]
pub fn on_pre<R: PreHookReturn>(value: R) -> PreDecision {
    value.into_pre_decision()
}

/// Reads a `#[before_tool_call]` hook's return value.
#[inline(always)]
pub fn legacy_before<R: LegacyBeforeReturn>(value: R) -> PreDecision {
    value.into_pre_decision()
}

/// Reads a POST hook's return value (both styles).
#[inline(always)]
pub fn post<R: PostHookReturn>(value: R) -> PostDecision {
    value.into_post_decision()
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

/// Registers a crew-scoped hook method on a crew's own registry.
pub fn register_scoped_pre(
    registry: &HookRegistry,
    crew: &str,
    style: HookStyle,
    options: HookOptions,
    call: impl Fn(&mut ToolCallHookContext) -> PreDecision + Send + Sync + 'static,
) -> HookId {
    registry.insert_scoped(
        InterceptionPoint::PRE_TOOL_CALL,
        crew,
        style,
        options,
        HookFn::Pre(Arc::new(call)),
    )
}

/// Registers a crew-scoped POST hook method on a crew's own registry.
pub fn register_scoped_post(
    registry: &HookRegistry,
    crew: &str,
    style: HookStyle,
    options: HookOptions,
    call: impl Fn(&mut ToolCallHookContext) -> PostDecision + Send + Sync + 'static,
) -> HookId {
    registry.insert_scoped(
        InterceptionPoint::POST_TOOL_CALL,
        crew,
        style,
        options,
        HookFn::Post(Arc::new(call)),
    )
}

/// The link-time hooks as chain entries, sorted by `order`, module path and
/// source position (the physical order of the slice is unspecified and
/// changes with the linker, so it is never used).
pub(crate) fn static_entries() -> [Vec<Arc<HookEntry>>; 2] {
    static ENTRIES: LazyLock<[Vec<Arc<HookEntry>>; 2]> = LazyLock::new(|| {
        let mut records: Vec<&'static StaticHook> = STATIC_HOOKS.iter().collect();
        records.sort_by(|a, b| {
            (a.order, a.module_path, a.file, a.line, a.column, a.name).cmp(&(
                b.order,
                b.module_path,
                b.file,
                b.line,
                b.column,
                b.name,
            ))
        });
        let mut lists: [Vec<Arc<HookEntry>>; 2] = [Vec::new(), Vec::new()];
        for (index, record) in records.into_iter().enumerate() {
            let rank = index as u64 + 1;
            let call = match record.call {
                StaticCall::Pre(f) => HookFn::Pre(Arc::new(f)),
                StaticCall::Post(f) => HookFn::Post(Arc::new(f)),
            };
            let info = HookInfo {
                id: HookId(rank),
                point: record.point,
                name: record.name.to_owned(),
                tools: record.tools.iter().map(|t| (*t).to_owned()).collect(),
                agents: record.agents.iter().map(|a| (*a).to_owned()).collect(),
                origin: HookOrigin::LinkTime {
                    module_path: record.module_path,
                    file: record.file,
                    line: record.line,
                    column: record.column,
                },
                order: record.order,
                failure: record.failure,
                style: record.style,
            };
            lists[record.point.index()].push(Arc::new(HookEntry {
                info,
                rank,
                type_id: Some((record.type_id)()),
                static_index: Some(index),
                call,
            }));
        }
        lists
    });
    ENTRIES.clone()
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
