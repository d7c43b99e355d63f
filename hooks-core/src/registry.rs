//! The hook registry: one ordered chain per point, kept as an immutable
//! snapshot that dispatch reads without locks while writers swap in new ones.

use std::any::type_name;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use arc_swap::ArcSwap;
use rustc_hash::FxHashMap;

use crate::context::ToolCallHookContext;
use crate::events::EventBus;
use crate::hook::{
    HookEntry, HookFn, HookHandle, HookId, HookInfo, HookOptions, HookOrigin, HookStyle,
    function_key,
};
use crate::outcome::{HookReturn, LegacyBeforeReturn, PostHookReturn};
use crate::point::{InterceptionPoint, POST_TOOL_CALL, PRE_TOOL_CALL};

/// Why a hook could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegisterError {
    /// The hook's return type does not fit the point.
    #[error(
        "a hook returning `{return_type}` cannot run at {point}: PRE_TOOL_CALL hooks return (), \
         Result<(), HookAborted>, bool or Option<bool>; POST_TOOL_CALL hooks return (), \
         Option<String>, Result<Option<String>, HookAborted> or Result<(), HookAborted>"
    )]
    ReturnTypeDoesNotFit {
        /// The point asked for.
        point: InterceptionPoint,
        /// The hook's return type.
        return_type: &'static str,
    },
}

/// Run-time registrations are ranked after every link-time hook.
const RUNTIME_RANK_BASE: u64 = 1 << 32;
/// One sequence for every registry, so that a crew's own hooks and global
/// hooks registered at run time interleave in call order.
static NEXT_RANK: AtomicU64 = AtomicU64::new(RUNTIME_RANK_BASE);

pub(crate) fn next_rank() -> u64 {
    NEXT_RANK.fetch_add(1, Ordering::Relaxed)
}

/// One point's chain, with an index from tool name to the hooks that can
/// match it, so dispatch cost does not grow with hooks filtered to other
/// tools.
pub(crate) struct Chain {
    pub(crate) entries: Box<[Arc<HookEntry>]>,
    /// Positions (in rank order) of hooks with no tool filter.
    unfiltered: Box<[u32]>,
    /// For each tool some filter names: positions of the unfiltered hooks
    /// and the hooks filtered to that tool, merged in rank order.
    by_tool: FxHashMap<Box<str>, Box<[u32]>>,
}

impl Chain {
    fn build(mut entries: Vec<Arc<HookEntry>>) -> Chain {
        entries.sort_by_key(|e| e.rank);
        let mut by_tool: FxHashMap<Box<str>, Vec<u32>> = FxHashMap::default();
        for entry in &entries {
            for tool in &entry.info.tools {
                by_tool.entry(tool.as_str().into()).or_default();
            }
        }
        let mut unfiltered = Vec::new();
        for (position, entry) in entries.iter().enumerate() {
            // A chain longer than u32::MAX hooks cannot be built in memory.
            let position = u32::try_from(position).unwrap_or(u32::MAX);
            if entry.info.tools.is_empty() {
                unfiltered.push(position);
                for list in by_tool.values_mut() {
                    list.push(position);
                }
            } else {
                for tool in &entry.info.tools {
                    if let Some(list) = by_tool.get_mut(tool.as_str())
                        && list.last() != Some(&position)
                    {
                        list.push(position);
                    }
                }
            }
        }
        Chain {
            entries: entries.into_boxed_slice(),
            unfiltered: unfiltered.into_boxed_slice(),
            by_tool: by_tool
                .into_iter()
                .map(|(k, v)| (k, v.into_boxed_slice()))
                .collect(),
        }
    }

    /// Positions of the hooks whose tool filter admits `tool`, in order.
    #[inline]
    pub(crate) fn candidates(&self, tool: &str) -> &[u32] {
        if self.by_tool.is_empty() {
            return &self.unfiltered;
        }
        self.by_tool.get(tool).unwrap_or(&self.unfiltered)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Both chains of a registry at one instant.
pub(crate) struct Snapshot {
    pub(crate) chains: [Chain; 2],
}

impl Snapshot {
    fn build(lists: [Vec<Arc<HookEntry>>; 2]) -> Snapshot {
        let [pre, post] = lists;
        Snapshot {
            chains: [Chain::build(pre), Chain::build(post)],
        }
    }

    fn lists(&self) -> [Vec<Arc<HookEntry>>; 2] {
        [
            self.chains[0].entries.to_vec(),
            self.chains[1].entries.to_vec(),
        ]
    }
}

/// A set of hook chains, one per [`InterceptionPoint`].
///
/// The process has one global registry (see [`global_registry`]), built on
/// first use from every link-time hook; crews and tests can create their own
/// with [`HookRegistry::new`] and need no global state at all.
///
/// Registering, unregistering and clearing work at any time and from any
/// thread, including from inside a running hook: writers build a new
/// snapshot and swap it in, while each dispatch keeps the snapshot it
/// started with. A hook registered during a dispatch runs from the next
/// dispatch on.
pub struct HookRegistry {
    state: ArcSwap<Snapshot>,
    /// Per point: whether the chain has any hook. Lets a dispatch with no
    /// hooks return after one relaxed load.
    nonempty: [AtomicBool; 2],
    write: Mutex<()>,
    events: EventBus,
}

impl HookRegistry {
    /// An empty registry: no link-time hooks, no listeners.
    pub fn new() -> Self {
        HookRegistry::from_lists([Vec::new(), Vec::new()])
    }

    /// A registry holding every link-time hook of the program, in order.
    pub fn with_static_hooks() -> Self {
        HookRegistry::from_lists(crate::__private::static_entries())
    }

    fn from_lists(lists: [Vec<Arc<HookEntry>>; 2]) -> Self {
        let registry = HookRegistry {
            state: ArcSwap::from_pointee(Snapshot::build([Vec::new(), Vec::new()])),
            nonempty: [AtomicBool::new(false), AtomicBool::new(false)],
            write: Mutex::new(()),
            events: EventBus::new(),
        };
        registry.install(Snapshot::build(lists));
        registry
    }

    /// The bus on which this registry's dispatches report.
    pub fn events(&self) -> &EventBus {
        &self.events
    }

    #[inline]
    pub(crate) fn has_hooks(&self, point: InterceptionPoint) -> bool {
        self.nonempty[point.index()].load(Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn snapshot(&self) -> arc_swap::Guard<Arc<Snapshot>> {
        self.state.load()
    }

    pub(crate) fn snapshot_full(&self) -> Arc<Snapshot> {
        self.state.load_full()
    }

    fn install(&self, snapshot: Snapshot) {
        self.install_arc(Arc::new(snapshot));
    }

    fn install_arc(&self, snapshot: Arc<Snapshot>) {
        let flags = [
            !snapshot.chains[0].is_empty(),
            !snapshot.chains[1].is_empty(),
        ];
        self.state.store(snapshot);
        // A dispatch that reads a stale flag behaves as if it had run an
        // instant earlier (on the previous snapshot): never on a torn chain.
        for (flag, has) in self.nonempty.iter().zip(flags) {
            flag.store(has, Ordering::Release);
        }
    }

    /// Applies `change` to copies of both chains and swaps the result in.
    fn modify<T>(&self, change: impl FnOnce(&mut [Vec<Arc<HookEntry>>; 2]) -> T) -> T {
        // The lock only orders writers; no user code runs under it.
        let _write = self.write.lock().unwrap_or_else(PoisonError::into_inner);
        let mut lists = self.state.load().lists();
        let result = change(&mut lists);
        self.install(Snapshot::build(lists));
        result
    }

    pub(crate) fn restore_snapshot(&self, saved: Arc<Snapshot>) {
        let _write = self.write.lock().unwrap_or_else(PoisonError::into_inner);
        self.install_arc(saved);
    }

    pub(crate) fn insert(&self, point: InterceptionPoint, entry: HookEntry) -> HookId {
        let id = entry.info.id;
        self.modify(|lists| lists[point.index()].push(Arc::new(entry)));
        id
    }

    /// Registers `hook` at `point`, with no filters, after every hook
    /// registered so far. Any return type of the guide's signatures is
    /// accepted where it fits the point.
    ///
    /// ```
    /// use hooks_core::{HookRegistry, ToolCallHookContext, HookAborted, PRE_TOOL_CALL};
    /// let registry = HookRegistry::new();
    /// let id = registry.register_hook(PRE_TOOL_CALL, |ctx: &mut ToolCallHookContext| {
    ///     if ctx.tool_name == "drop_table" {
    ///         return Err(HookAborted::new("no DDL", "safety-policy"));
    ///     }
    ///     Ok(())
    /// })?;
    /// assert!(registry.unregister_hook(PRE_TOOL_CALL, id));
    /// # Ok::<(), hooks_core::RegisterError>(())
    /// ```
    pub fn register_hook<F, R>(
        &self,
        point: InterceptionPoint,
        hook: F,
    ) -> Result<HookId, RegisterError>
    where
        F: Fn(&mut ToolCallHookContext) -> R + Send + Sync + 'static,
        R: HookReturn,
    {
        self.register_hook_with(point, HookOptions::new(), hook)
    }

    /// Registers `hook` at `point` with filters, a name or fail-closed
    /// behavior.
    pub fn register_hook_with<F, R>(
        &self,
        point: InterceptionPoint,
        options: HookOptions,
        hook: F,
    ) -> Result<HookId, RegisterError>
    where
        F: Fn(&mut ToolCallHookContext) -> R + Send + Sync + 'static,
        R: HookReturn,
    {
        let entry = runtime_entry(point, options, HookStyle::On, HookOrigin::Runtime, hook)?;
        Ok(self.insert(point, entry))
    }

    /// Registers a crew-scoped hook (used by crews built from `#[crew_base]`
    /// types): listed with [`HookOrigin::Crew`].
    pub fn register_scoped_hook<F, R>(
        &self,
        point: InterceptionPoint,
        crew: &str,
        style: HookStyle,
        options: HookOptions,
        hook: F,
    ) -> Result<HookId, RegisterError>
    where
        F: Fn(&mut ToolCallHookContext) -> R + Send + Sync + 'static,
        R: HookReturn,
    {
        let origin = HookOrigin::Crew {
            crew: crew.to_owned(),
        };
        let entry = runtime_entry(point, options, style, origin, hook)?;
        Ok(self.insert(point, entry))
    }

    /// Inserts an already adapted crew-scoped hook (the door generated
    /// `#[crew_base]` code uses).
    pub(crate) fn insert_scoped(
        &self,
        point: InterceptionPoint,
        crew: &str,
        style: HookStyle,
        options: HookOptions,
        call: HookFn,
    ) -> HookId {
        let rank = next_rank();
        let origin = HookOrigin::Crew {
            crew: crew.to_owned(),
        };
        let info = base_info(point, options, style, origin, "crew hook", rank);
        self.insert(
            point,
            HookEntry {
                info,
                rank,
                type_id: None,
                static_index: None,
                call,
            },
        )
    }

    /// Removes the hooks `handle` names at `point` (a [`HookId`], or the hook
    /// function itself); returns whether anything was removed. Works for
    /// hooks of every style, filtered or not, link-time ones included.
    pub fn unregister_hook<M>(&self, point: InterceptionPoint, handle: impl HookHandle<M>) -> bool {
        let key = handle.hook_key();
        self.modify(|lists| {
            let list = &mut lists[point.index()];
            let before = list.len();
            list.retain(|entry| !key.selects(entry));
            before != list.len()
        })
    }

    /// The hooks registered at `point`, in the order they run.
    pub fn get_hooks(&self, point: InterceptionPoint) -> Vec<HookInfo> {
        self.snapshot().chains[point.index()]
            .entries
            .iter()
            .map(|entry| entry.info.clone())
            .collect()
    }

    /// Removes every hook at `point`; returns how many were removed.
    pub fn clear_hooks(&self, point: InterceptionPoint) -> usize {
        self.modify(|lists| std::mem::take(&mut lists[point.index()]).len())
    }

    /// Removes every hook at every point; returns how many were removed.
    pub fn clear_all_hooks(&self) -> usize {
        self.modify(|lists| {
            lists
                .iter_mut()
                .map(|list| std::mem::take(list).len())
                .sum()
        })
    }

    /// Puts back every link-time hook that was unregistered or cleared, in
    /// its place; returns how many were put back.
    pub fn restore_static_hooks(&self) -> usize {
        let statics = crate::__private::static_entries();
        self.modify(|lists| {
            let mut restored = 0;
            for (list, wanted) in lists.iter_mut().zip(statics) {
                for entry in wanted {
                    let present = list
                        .iter()
                        .any(|have| have.static_index == entry.static_index);
                    if !present {
                        list.push(entry);
                        restored += 1;
                    }
                }
            }
            restored
        })
    }

    /// Legacy name: registers a before hook (`Some(false)`/`false` blocks).
    pub fn register_before_tool_call_hook<F, R>(&self, hook: F) -> HookId
    where
        F: Fn(&mut ToolCallHookContext) -> R + Send + Sync + 'static,
        R: LegacyBeforeReturn + HookReturn,
    {
        self.register_before_tool_call_hook_with(HookOptions::new(), hook)
    }

    /// Legacy name: registers a before hook with filters or options.
    pub fn register_before_tool_call_hook_with<F, R>(&self, options: HookOptions, hook: F) -> HookId
    where
        F: Fn(&mut ToolCallHookContext) -> R + Send + Sync + 'static,
        R: LegacyBeforeReturn + HookReturn,
    {
        let entry = typed_entry(
            PRE_TOOL_CALL,
            options,
            HookStyle::BeforeToolCall,
            HookOrigin::Runtime,
            hook,
        );
        self.insert(PRE_TOOL_CALL, entry)
    }

    /// Legacy name: registers an after hook (`Some(text)` replaces the
    /// result).
    pub fn register_after_tool_call_hook<F, R>(&self, hook: F) -> HookId
    where
        F: Fn(&mut ToolCallHookContext) -> R + Send + Sync + 'static,
        R: PostHookReturn + HookReturn,
    {
        self.register_after_tool_call_hook_with(HookOptions::new(), hook)
    }

    /// Legacy name: registers an after hook with filters or options.
    pub fn register_after_tool_call_hook_with<F, R>(&self, options: HookOptions, hook: F) -> HookId
    where
        F: Fn(&mut ToolCallHookContext) -> R + Send + Sync + 'static,
        R: PostHookReturn + HookReturn,
    {
        let entry = typed_entry(
            POST_TOOL_CALL,
            options,
            HookStyle::AfterToolCall,
            HookOrigin::Runtime,
            hook,
        );
        self.insert(POST_TOOL_CALL, entry)
    }

    /// Legacy name for `unregister_hook(PRE_TOOL_CALL, handle)`.
    pub fn unregister_before_tool_call_hook<M>(&self, handle: impl HookHandle<M>) -> bool {
        self.unregister_hook(PRE_TOOL_CALL, handle)
    }

    /// Legacy name for `unregister_hook(POST_TOOL_CALL, handle)`.
    pub fn unregister_after_tool_call_hook<M>(&self, handle: impl HookHandle<M>) -> bool {
        self.unregister_hook(POST_TOOL_CALL, handle)
    }

    /// Legacy name for `get_hooks(PRE_TOOL_CALL)`.
    pub fn get_before_tool_call_hooks(&self) -> Vec<HookInfo> {
        self.get_hooks(PRE_TOOL_CALL)
    }

    /// Legacy name for `get_hooks(POST_TOOL_CALL)`.
    pub fn get_after_tool_call_hooks(&self) -> Vec<HookInfo> {
        self.get_hooks(POST_TOOL_CALL)
    }

    /// Legacy name for `clear_hooks(PRE_TOOL_CALL)`.
    pub fn clear_before_tool_call_hooks(&self) -> usize {
        self.clear_hooks(PRE_TOOL_CALL)
    }

    /// Legacy name for `clear_hooks(POST_TOOL_CALL)`.
    pub fn clear_after_tool_call_hooks(&self) -> usize {
        self.clear_hooks(POST_TOOL_CALL)
    }

    /// Legacy name: clears both chains; returns `(before, after)` counts.
    pub fn clear_all_tool_call_hooks(&self) -> (usize, usize) {
        self.modify(|lists| {
            let [pre, post] = lists;
            (std::mem::take(pre).len(), std::mem::take(post).len())
        })
    }
}

impl Default for HookRegistry {
    fn default() -> Self {
        HookRegistry::new()
    }
}

impl fmt::Debug for HookRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let snapshot = self.snapshot();
        f.debug_struct("HookRegistry")
            .field("pre_tool_call", &snapshot.chains[0].entries.len())
            .field("post_tool_call", &snapshot.chains[1].entries.len())
            .field("events", &self.events)
            .finish()
    }
}

fn base_info(
    point: InterceptionPoint,
    options: HookOptions,
    style: HookStyle,
    origin: HookOrigin,
    default_name: &str,
    rank: u64,
) -> HookInfo {
    HookInfo {
        id: HookId(rank),
        point,
        name: options.name.unwrap_or_else(|| default_name.to_owned()),
        tools: options.tools,
        agents: options.agents,
        origin,
        order: options.order,
        failure: options.failure,
        style,
    }
}

fn runtime_entry<F, R>(
    point: InterceptionPoint,
    options: HookOptions,
    style: HookStyle,
    origin: HookOrigin,
    hook: F,
) -> Result<HookEntry, RegisterError>
where
    F: Fn(&mut ToolCallHookContext) -> R + Send + Sync + 'static,
    R: HookReturn,
{
    let fits = match point {
        PRE_TOOL_CALL => R::FITS_PRE,
        POST_TOOL_CALL => R::FITS_POST,
    };
    if !fits {
        return Err(RegisterError::ReturnTypeDoesNotFit {
            point,
            return_type: type_name::<R>(),
        });
    }
    Ok(typed_entry(point, options, style, origin, hook))
}

/// Builds an entry for a hook whose return type is known to fit `point`.
fn typed_entry<F, R>(
    point: InterceptionPoint,
    options: HookOptions,
    style: HookStyle,
    origin: HookOrigin,
    hook: F,
) -> HookEntry
where
    F: Fn(&mut ToolCallHookContext) -> R + Send + Sync + 'static,
    R: HookReturn,
{
    let rank = next_rank();
    let type_id = function_key::<F>();
    let info = base_info(point, options, style, origin, type_name::<F>(), rank);
    let call = match point {
        PRE_TOOL_CALL => HookFn::Pre(Arc::new(move |ctx| hook(ctx).pre())),
        POST_TOOL_CALL => HookFn::Post(Arc::new(move |ctx| hook(ctx).post())),
    };
    HookEntry {
        info,
        rank,
        type_id,
        static_index: None,
        call,
    }
}

static GLOBAL: LazyLock<HookRegistry> = LazyLock::new(HookRegistry::with_static_hooks);

/// The process-wide registry, built on first use from every link-time hook.
pub fn global_registry() -> &'static HookRegistry {
    &GLOBAL
}
