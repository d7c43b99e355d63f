//! Hooks registered at link time: each attribute on a free function puts
//! one record in its point's slice (`linkme`), and a registry built with
//! the link-time hooks reads every slice once, sorted. The attributes reach
//! these through `__private`.

use std::any::TypeId;
use std::sync::Arc;

use crate::capability::Capabilities;
use crate::chain::Chain;
use crate::hook::{
    FailureMode, HookCall, HookEntry, HookFuture, HookId, HookInfo, HookOrigin, HookStyle,
};
use crate::outcome::Decision;
use crate::point::Point;
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

/// A link-time hook's function: synchronous, or an `async fn` behind a
/// wrapper that boxes its future.
pub enum StaticCall<P: Point> {
    /// A synchronous function, adapted to its point's decision.
    Sync(fn(&mut P::Context) -> Decision<P::Replacement>),
    /// An `async fn`, behind a wrapper that boxes its future.
    Async(for<'c> fn(&'c mut P::Context) -> HookFuture<'c, Decision<P::Replacement>>),
}

/// The link-time `hooks` of point `P` as a chain, sorted by `order`, module
/// path and source position (the physical order of the slice is
/// unspecified and changes with the linker, so it is never used).
pub(crate) fn static_chain<P: Point>(hooks: &'static [StaticHook<P>]) -> Chain<P> {
    let mut records: Vec<(usize, &'static StaticHook<P>)> = hooks.iter().enumerate().collect();
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
