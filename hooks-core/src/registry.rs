//! The hook registry: one ordered chain per point, all ten kept as one
//! immutable snapshot that dispatch reads without locks while writers swap
//! in new ones.

use std::any::type_name;
use std::fmt;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use arc_swap::ArcSwap;

use crate::chain::Chain;
use crate::events::EventBus;
use crate::extensions::RegistryExtensions;
use crate::hook::{
    AsyncHookFn, HookCall, HookEntry, HookHandle, HookId, HookInfo, HookKey, HookOptions,
    HookOrigin, HookStyle, function_key,
};
use crate::linked::{
    EXECUTION_END_HOOKS, EXECUTION_START_HOOKS, INPUT_HOOKS, OUTPUT_HOOKS, POST_MODEL_CALL_HOOKS,
    POST_STEP_HOOKS, POST_TOOL_CALL_HOOKS, PRE_MODEL_CALL_HOOKS, PRE_STEP_HOOKS,
    PRE_TOOL_CALL_HOOKS, static_chain,
};
use crate::point::{ByPoint, InterceptionPoint, Point, PointMap};
use crate::returns::{HookReturn, LegacyBeforePoint, LegacyBeforeReturn};

/// Why a hook could not be registered.
///
/// ```
/// use hooks_core::{HookOptions, HookRegistry, InterceptionPoint, RegisterError, StepContext, PRE_STEP};
///
/// // Steps have no tool, so a `tools` filter cannot apply there.
/// let registry = HookRegistry::new();
/// let result = registry.register_hook_with(PRE_STEP, HookOptions::new().tools(["search"]), |_: &mut StepContext| {});
/// match result {
///     Err(RegisterError::FilterDoesNotApply { point, filter }) => {
///         assert_eq!((point, filter), (InterceptionPoint::PRE_STEP, "tools"));
///     }
///     other => panic!("expected a refusal, got {other:?}"),
/// }
/// assert!(registry.is_empty());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegisterError {
    /// A filter was given at a point where it does not apply.
    #[error(
        "a `{filter}` filter does not apply at {point}: `tools` and `capabilities` filters apply at \
         PRE_TOOL_CALL and POST_TOOL_CALL; `agents` filters at the step, model-call and tool-call \
         points"
    )]
    FilterDoesNotApply {
        /// The point asked for.
        point: InterceptionPoint,
        /// `tools`, `agents` or `capabilities`.
        filter: &'static str,
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

/// A registry's chains: for each point `P`, a `Chain<P>`.
pub(crate) enum Chains {}

impl PointMap for Chains {
    type Of<P: Point> = Chain<P>;
}

/// The ten chains of a registry at one instant. Cloning one is cheap (each
/// chain is a handful of shared pointers), so a writer copies the set,
/// changes one chain and swaps the copy in.
pub(crate) type ChainSet = ByPoint<Chains>;

impl Clone for ChainSet {
    fn clone(&self) -> Self {
        ChainSet {
            execution_start: self.execution_start.clone(),
            input: self.input.clone(),
            pre_step: self.pre_step.clone(),
            pre_model_call: self.pre_model_call.clone(),
            post_model_call: self.post_model_call.clone(),
            pre_tool_call: self.pre_tool_call.clone(),
            post_tool_call: self.post_tool_call.clone(),
            post_step: self.post_step.clone(),
            output: self.output.clone(),
            execution_end: self.execution_end.clone(),
        }
    }
}

impl Default for ChainSet {
    fn default() -> Self {
        ChainSet {
            execution_start: Chain::default(),
            input: Chain::default(),
            pre_step: Chain::default(),
            pre_model_call: Chain::default(),
            post_model_call: Chain::default(),
            pre_tool_call: Chain::default(),
            post_tool_call: Chain::default(),
            post_step: Chain::default(),
            output: Chain::default(),
            execution_end: Chain::default(),
        }
    }
}

/// What registry-wide operations need of a chain, whatever its point.
pub(crate) trait ErasedChain {
    fn infos(&self) -> Vec<HookInfo>;
    fn len(&self) -> usize;
    /// Removes the entries `key` selects; returns how many.
    fn remove(&mut self, key: HookKey) -> usize;
    /// Removes every entry; returns how many.
    fn clear(&mut self) -> usize;
    /// Puts back the link-time entries of `statics` that are missing.
    fn restore_from(&mut self, statics: &ChainSet) -> usize;
    /// Every entry as `(rank, info, tool filter admits, agent filter admits)`.
    fn verdicts(&self, tool: Option<&str>, role: Option<&str>) -> Vec<(u64, HookInfo, bool, bool)>;
}

impl<P: Point> ErasedChain for Chain<P> {
    fn infos(&self) -> Vec<HookInfo> {
        self.iter().map(|entry| entry.info.clone()).collect()
    }

    fn len(&self) -> usize {
        Chain::len(self)
    }

    fn remove(&mut self, key: HookKey) -> usize {
        let entries = self.entries();
        let before = entries.len();
        let kept: Vec<_> = entries
            .into_iter()
            .filter(|entry| !key.selects(entry))
            .collect();
        let removed = before - kept.len();
        if removed > 0 {
            *self = Chain::from_entries(kept);
        }
        removed
    }

    fn clear(&mut self) -> usize {
        let removed = Chain::len(self);
        *self = Chain::default();
        removed
    }

    fn restore_from(&mut self, statics: &ChainSet) -> usize {
        let mut restored = 0;
        for entry in P::chain(statics).entries() {
            let present = self
                .iter()
                .any(|have| have.static_index == entry.static_index);
            if !present {
                self.insert(entry);
                restored += 1;
            }
        }
        restored
    }

    fn verdicts(&self, tool: Option<&str>, role: Option<&str>) -> Vec<(u64, HookInfo, bool, bool)> {
        self.iter()
            .map(|entry| {
                (
                    entry.rank,
                    entry.info.clone(),
                    entry.tool_matches(tool),
                    entry.agent_matches(role),
                )
            })
            .collect()
    }
}

impl ChainSet {
    /// Every link-time hook of the program, sorted.
    fn statics() -> ChainSet {
        ChainSet {
            execution_start: static_chain(&EXECUTION_START_HOOKS),
            input: static_chain(&INPUT_HOOKS),
            pre_step: static_chain(&PRE_STEP_HOOKS),
            pre_model_call: static_chain(&PRE_MODEL_CALL_HOOKS),
            post_model_call: static_chain(&POST_MODEL_CALL_HOOKS),
            pre_tool_call: static_chain(&PRE_TOOL_CALL_HOOKS),
            post_tool_call: static_chain(&POST_TOOL_CALL_HOOKS),
            post_step: static_chain(&POST_STEP_HOOKS),
            output: static_chain(&OUTPUT_HOOKS),
            execution_end: static_chain(&EXECUTION_END_HOOKS),
        }
    }

    pub(crate) fn erased(&self, point: InterceptionPoint) -> &dyn ErasedChain {
        match point {
            InterceptionPoint::EXECUTION_START => &self.execution_start,
            InterceptionPoint::INPUT => &self.input,
            InterceptionPoint::PRE_STEP => &self.pre_step,
            InterceptionPoint::PRE_MODEL_CALL => &self.pre_model_call,
            InterceptionPoint::POST_MODEL_CALL => &self.post_model_call,
            InterceptionPoint::PRE_TOOL_CALL => &self.pre_tool_call,
            InterceptionPoint::POST_TOOL_CALL => &self.post_tool_call,
            InterceptionPoint::POST_STEP => &self.post_step,
            InterceptionPoint::OUTPUT => &self.output,
            InterceptionPoint::EXECUTION_END => &self.execution_end,
        }
    }

    pub(crate) fn erased_mut(&mut self, point: InterceptionPoint) -> &mut dyn ErasedChain {
        match point {
            InterceptionPoint::EXECUTION_START => &mut self.execution_start,
            InterceptionPoint::INPUT => &mut self.input,
            InterceptionPoint::PRE_STEP => &mut self.pre_step,
            InterceptionPoint::PRE_MODEL_CALL => &mut self.pre_model_call,
            InterceptionPoint::POST_MODEL_CALL => &mut self.post_model_call,
            InterceptionPoint::PRE_TOOL_CALL => &mut self.pre_tool_call,
            InterceptionPoint::POST_TOOL_CALL => &mut self.post_tool_call,
            InterceptionPoint::POST_STEP => &mut self.post_step,
            InterceptionPoint::OUTPUT => &mut self.output,
            InterceptionPoint::EXECUTION_END => &mut self.execution_end,
        }
    }

    /// One bit per point (by index) that has a hook.
    fn nonempty_mask(&self) -> u32 {
        InterceptionPoint::ALL
            .iter()
            .filter(|point| self.erased(**point).len() > 0)
            .fold(0, |mask, point| mask | 1 << point.index())
    }
}

static STATIC_HOOKS: LazyLock<ChainSet> = LazyLock::new(ChainSet::statics);

/// The chains of every link-time hook (a cheap copy).
pub(crate) fn static_set() -> ChainSet {
    STATIC_HOOKS.clone()
}

/// A set of hook chains, one per [`InterceptionPoint`].
///
/// The process has one global registry (see [`global_registry`]), built on
/// first use from every link-time hook; crews and tests can create their own
/// with [`HookRegistry::new`] and need no global state at all.
///
/// Registering, unregistering and clearing work at any time and from any
/// thread, including from inside a running hook: writers build a new
/// snapshot and swap it in, while each call keeps the snapshot it started
/// with. A hook registered during a call runs from the next call on.
/// Registering one hook costs the same whatever the length of the chain.
///
/// ```
/// use hooks_core::{HookRegistry, LlmCallHookContext, PRE_MODEL_CALL, get_hooks};
///
/// let registry = HookRegistry::new();
/// registry.register_hook(PRE_MODEL_CALL, |ctx: &mut LlmCallHookContext| {
///     ctx.messages.retain(|m| !m.content.contains("ignore previous instructions"));
/// })?;
/// assert_eq!(registry.get_hooks(PRE_MODEL_CALL).len(), 1);
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
pub struct HookRegistry {
    state: ArcSwap<ChainSet>,
    /// One bit per point whose chain has a hook: a call with no hooks
    /// returns after one relaxed load.
    nonempty: AtomicU32,
    write: Mutex<()>,
    events: EventBus,
    /// What libraries built on the registry keep about it; dispatch never
    /// reads it.
    extensions: RegistryExtensions,
}

impl HookRegistry {
    /// An empty registry: no link-time hooks, no listeners.
    pub fn new() -> Self {
        HookRegistry::from_set(ChainSet::default())
    }

    /// A registry holding every link-time hook of the program, in order:
    /// the `#[on]` (and legacy attribute) hooks that [`HookRegistry::new`]
    /// leaves out. Give it to a crew that needs a registry of its own and
    /// must still run the program's attribute hooks (a redaction hook, a
    /// safety block).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use hooks_core::{HookRegistry, PRE_TOOL_CALL};
    ///
    /// let own = Arc::new(HookRegistry::with_static_hooks());
    /// // The program's attribute hooks, and room for hooks of its own.
    /// assert_eq!(
    ///     own.get_hooks(PRE_TOOL_CALL).len(),
    ///     hooks_core::global_registry().get_hooks(PRE_TOOL_CALL).len()
    /// );
    /// ```
    pub fn with_static_hooks() -> Self {
        HookRegistry::from_set(STATIC_HOOKS.clone())
    }

    /// Whether the program registered any hook at link time (with `#[on]`
    /// or a legacy attribute), whatever any registry holds now.
    ///
    /// ```
    /// // This doctest registers no attribute hook.
    /// assert!(!hooks_core::HookRegistry::program_has_static_hooks());
    /// ```
    pub fn program_has_static_hooks() -> bool {
        STATIC_HOOKS.nonempty_mask() != 0
    }

    /// Whether no point of this registry has a hook.
    ///
    /// ```
    /// use hooks_core::HookRegistry;
    /// assert!(HookRegistry::new().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.nonempty.load(Ordering::Relaxed) == 0
    }

    fn from_set(set: ChainSet) -> Self {
        let mask = set.nonempty_mask();
        HookRegistry {
            state: ArcSwap::from_pointee(set),
            nonempty: AtomicU32::new(mask),
            write: Mutex::new(()),
            events: EventBus::new(),
            extensions: RegistryExtensions::new(),
        }
    }

    /// The bus on which this registry's dispatches report.
    pub fn events(&self) -> &EventBus {
        &self.events
    }

    /// Values of any type, one per type, that live as long as this
    /// registry: what a library built on it keeps about it (see
    /// [`RegistryExtensions`]). Dispatch never reads them.
    ///
    /// ```
    /// use std::sync::Mutex;
    /// use hooks_core::HookRegistry;
    ///
    /// /// The crews a program built on a registry, by name.
    /// #[derive(Default)]
    /// struct Crews(Mutex<Vec<String>>);
    ///
    /// let registry = HookRegistry::new();
    /// let crews = registry.extensions().get_or_insert_with(Crews::default);
    /// crews.0.lock().unwrap().push("research".to_owned());
    /// let again = registry.extensions().get::<Crews>().expect("recorded");
    /// assert_eq!(*again.0.lock().unwrap(), ["research"]);
    /// ```
    pub fn extensions(&self) -> &RegistryExtensions {
        &self.extensions
    }

    /// The points that have hooks, one bit per point index.
    #[inline]
    pub(crate) fn nonempty_mask(&self) -> u32 {
        self.nonempty.load(Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn snapshot(&self) -> arc_swap::Guard<Arc<ChainSet>> {
        self.state.load()
    }

    pub(crate) fn snapshot_full(&self) -> Arc<ChainSet> {
        self.state.load_full()
    }

    /// Swaps `set` in and returns the set it replaces, which the caller
    /// drops once every lock is released (a hook's captured state may call
    /// back into the registry from its `Drop`).
    fn install(&self, set: Arc<ChainSet>) -> Arc<ChainSet> {
        let mask = set.nonempty_mask();
        let old = self.state.swap(set);
        // A call that reads a stale mask behaves as if it had started an
        // instant earlier (on the previous snapshot): never on a torn chain.
        self.nonempty.store(mask, Ordering::Release);
        old
    }

    /// Applies `change` to a copy of the chains and swaps the result in,
    /// unless `change` fails. The replaced snapshot is dropped after the
    /// write lock is released.
    fn modify<T, E>(&self, change: impl FnOnce(&mut ChainSet) -> Result<T, E>) -> Result<T, E> {
        let (result, old) = {
            // The lock only orders writers; no hook runs under it.
            let _write = self.write.lock().unwrap_or_else(PoisonError::into_inner);
            let mut set = ChainSet::clone(&self.state.load());
            let result = change(&mut set)?;
            (result, self.install(Arc::new(set)))
        };
        drop(old);
        Ok(result)
    }

    fn modify_infallible<T>(&self, change: impl FnOnce(&mut ChainSet) -> T) -> T {
        match self.modify(|set| Ok::<T, std::convert::Infallible>(change(set))) {
            Ok(value) => value,
            Err(never) => match never {},
        }
    }

    pub(crate) fn restore_snapshot(&self, saved: Arc<ChainSet>) -> Arc<ChainSet> {
        let _write = self.write.lock().unwrap_or_else(PoisonError::into_inner);
        self.install(saved)
    }

    /// Applies several changes at once: every call sees either none of
    /// them or all of them, never the registry half-way (clear a point and
    /// register a new policy, say, with no call running unguarded in
    /// between). Nothing is applied when `change` returns an error.
    ///
    /// Inside `change`, change the registry through the batch only.
    ///
    /// ```
    /// use hooks_core::{HookAborted, HookRegistry, ToolCallHookContext, PRE_TOOL_CALL};
    ///
    /// let registry = HookRegistry::new();
    /// registry.register_hook(PRE_TOOL_CALL, |_: &mut ToolCallHookContext| {})?;
    /// // Swap the whole PRE_TOOL_CALL policy in one step.
    /// registry.update(|batch| {
    ///     batch.clear_hooks(PRE_TOOL_CALL);
    ///     batch.register_hook(PRE_TOOL_CALL, |_: &mut ToolCallHookContext| -> Result<(), HookAborted> {
    ///         Err("maintenance: no tools right now".into())
    ///     })
    /// })?;
    /// assert_eq!(registry.get_hooks(PRE_TOOL_CALL).len(), 1);
    /// # Ok::<(), hooks_core::RegisterError>(())
    /// ```
    pub fn update<T, E>(
        &self,
        change: impl FnOnce(&mut HookBatch<'_>) -> Result<T, E>,
    ) -> Result<T, E> {
        self.modify(|set| change(&mut HookBatch { set }))
    }

    pub(crate) fn insert<P: Point>(&self, entry: HookEntry<P>) -> HookId {
        if entry.info.order != 0 && entry.info.origin == HookOrigin::Runtime {
            // Said, not silently ignored: run-time hooks outside a crew
            // follow in call order (SPEC rule 3).
            tracing::warn!(
                hook = %entry.info.name,
                order = entry.info.order,
                "`order` has no effect on a hook registered at run time outside a crew: such \
                 hooks run in registration order; register it on a crew (where a crew's own \
                 hooks run by `order`), or register it where it should run"
            );
        }
        let id = entry.info.id;
        let entry = Arc::new(entry);
        self.modify_infallible(|set| P::chain_mut(set).insert(entry));
        id
    }

    /// Registers `hook` at `point`, with no filters, after every hook
    /// registered so far. The hook's context and return type must fit the
    /// point: a mismatch is a compile error.
    ///
    /// ```
    /// use hooks_core::{HookRegistry, ToolCallHookContext, HookAborted, PRE_TOOL_CALL};
    /// let registry = HookRegistry::new();
    /// let id = registry.register_hook(PRE_TOOL_CALL, |ctx: &mut ToolCallHookContext| {
    ///     if ctx.tool_name() == "drop_table" {
    ///         return Err(HookAborted::new("no DDL", "safety-policy"));
    ///     }
    ///     Ok(())
    /// })?;
    /// assert!(registry.unregister_hook(PRE_TOOL_CALL, id));
    /// # Ok::<(), hooks_core::RegisterError>(())
    /// ```
    ///
    /// A return type that does not fit the point does not compile:
    ///
    /// ```compile_fail
    /// use hooks_core::{HookRegistry, ToolCallHookContext, PRE_TOOL_CALL};
    /// let registry = HookRegistry::new();
    /// // PRE_TOOL_CALL hooks cannot replace a result.
    /// registry.register_hook(PRE_TOOL_CALL, |_: &mut ToolCallHookContext| Some("text".to_owned()));
    /// ```
    pub fn register_hook<P, F, R>(&self, point: P, hook: F) -> Result<HookId, RegisterError>
    where
        P: Point,
        F: Fn(&mut P::Context) -> R + Send + Sync + 'static,
        R: HookReturn<P>,
    {
        self.register_hook_with(point, HookOptions::new(), hook)
    }

    /// Registers `hook` at `point` with filters, a name or fail-closed
    /// behavior. A filter the point does not take is refused.
    pub fn register_hook_with<P, F, R>(
        &self,
        point: P,
        options: HookOptions,
        hook: F,
    ) -> Result<HookId, RegisterError>
    where
        P: Point,
        F: Fn(&mut P::Context) -> R + Send + Sync + 'static,
        R: HookReturn<P>,
    {
        let _ = point;
        let entry = on_entry::<P, F, R>(options, HookStyle::On, HookOrigin::Runtime, hook)?;
        Ok(self.insert(entry))
    }

    /// Registers an `async` hook at `point`: an `async fn` taking the
    /// point's context, or a closure wrapped in [`async_hook`](crate::async_hook).
    /// It runs in its place in the same ordered chain as synchronous hooks;
    /// a runtime that dispatches with
    /// [`CallHooks::dispatch_async`](crate::runtime::CallHooks::dispatch_async)
    /// awaits it (a synchronous dispatch blocks on it). Its return type
    /// must fit the point as a synchronous hook's must.
    ///
    /// For approvals that wait on a chat or web reply, a rate limiter
    /// that waits for a permit, a policy that asks a service.
    ///
    /// ```
    /// use hooks_core::{HookAborted, HookRegistry, ToolCallHookContext, PRE_TOOL_CALL};
    ///
    /// async fn policy(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
    ///     // Ask a policy service, await a permit...
    ///     if ctx.tool_name() == "drop_table" {
    ///         return Err("no DDL".into());
    ///     }
    ///     Ok(())
    /// }
    ///
    /// let registry = HookRegistry::new();
    /// registry.register_async_hook(PRE_TOOL_CALL, policy)?;
    /// assert!(registry.unregister_hook(PRE_TOOL_CALL, policy));
    /// # Ok::<(), hooks_core::RegisterError>(())
    /// ```
    pub fn register_async_hook<P, F, R>(&self, point: P, hook: F) -> Result<HookId, RegisterError>
    where
        P: Point,
        F: for<'c> AsyncHookFn<'c, P::Context, R>,
        R: HookReturn<P> + 'static,
    {
        self.register_async_hook_with(point, HookOptions::new(), hook)
    }

    /// Registers an `async` hook at `point` with filters, a name or
    /// fail-closed behavior (see [`register_async_hook`](Self::register_async_hook)).
    pub fn register_async_hook_with<P, F, R>(
        &self,
        point: P,
        options: HookOptions,
        hook: F,
    ) -> Result<HookId, RegisterError>
    where
        P: Point,
        F: for<'c> AsyncHookFn<'c, P::Context, R>,
        R: HookReturn<P> + 'static,
    {
        let _ = point;
        let entry = async_entry::<P, F, R>(options, HookOrigin::Runtime, hook)?;
        Ok(self.insert(entry))
    }

    /// Removes the hooks `handle` names at `point` (a [`HookId`], or the hook
    /// function itself); returns whether anything was removed. Works for
    /// hooks of every style, filtered or not, link-time ones included.
    pub fn unregister_hook<M>(
        &self,
        point: impl Into<InterceptionPoint>,
        handle: impl HookHandle<M>,
    ) -> bool {
        let point = point.into();
        let key = handle.hook_key();
        self.modify_infallible(|set| set.erased_mut(point).remove(key) > 0)
    }

    /// The hooks registered at `point`, in the order they run.
    pub fn get_hooks(&self, point: impl Into<InterceptionPoint>) -> Vec<HookInfo> {
        self.snapshot().erased(point.into()).infos()
    }

    /// Removes every hook at `point`; returns how many were removed.
    pub fn clear_hooks(&self, point: impl Into<InterceptionPoint>) -> usize {
        let point = point.into();
        self.modify_infallible(|set| set.erased_mut(point).clear())
    }

    /// Removes every hook at every point; returns how many were removed.
    pub fn clear_all_hooks(&self) -> usize {
        self.modify_infallible(|set| {
            InterceptionPoint::ALL
                .iter()
                .map(|point| set.erased_mut(*point).clear())
                .sum()
        })
    }

    /// Puts back every link-time hook that was unregistered or cleared, in
    /// its place; returns how many were put back.
    pub fn restore_static_hooks(&self) -> usize {
        self.modify_infallible(|set| {
            InterceptionPoint::ALL
                .iter()
                .map(|point| set.erased_mut(*point).restore_from(&STATIC_HOOKS))
                .sum()
        })
    }

    /// Clears two chains in one swap (the legacy `clear_all_*` pairs).
    pub(crate) fn clear_pair(
        &self,
        first: InterceptionPoint,
        second: InterceptionPoint,
    ) -> (usize, usize) {
        self.modify_infallible(|set| {
            (
                set.erased_mut(first).clear(),
                set.erased_mut(second).clear(),
            )
        })
    }
}

/// Changes to a registry applied all at once by [`HookRegistry::update`].
///
/// ```
/// use hooks_core::{HookRegistry, ToolCallHookContext, POST_TOOL_CALL, PRE_TOOL_CALL};
///
/// let registry = HookRegistry::new();
/// let registered = registry.update(|batch| {
///     batch.register_hook(PRE_TOOL_CALL, |_: &mut ToolCallHookContext| {})?;
///     batch.register_hook(POST_TOOL_CALL, |_: &mut ToolCallHookContext| {})?;
///     // The batch sees its own changes; calls see them all at once, after.
///     Ok::<usize, hooks_core::RegisterError>(batch.get_hooks(PRE_TOOL_CALL).len() + batch.get_hooks(POST_TOOL_CALL).len())
/// })?;
/// assert_eq!(registered, 2);
/// assert!(!registry.is_empty());
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
pub struct HookBatch<'a> {
    set: &'a mut ChainSet,
}

impl HookBatch<'_> {
    /// Registers `hook` at `point` (see [`HookRegistry::register_hook`]).
    pub fn register_hook<P, F, R>(&mut self, point: P, hook: F) -> Result<HookId, RegisterError>
    where
        P: Point,
        F: Fn(&mut P::Context) -> R + Send + Sync + 'static,
        R: HookReturn<P>,
    {
        self.register_hook_with(point, HookOptions::new(), hook)
    }

    /// Registers `hook` at `point` with options (see
    /// [`HookRegistry::register_hook_with`]).
    pub fn register_hook_with<P, F, R>(
        &mut self,
        point: P,
        options: HookOptions,
        hook: F,
    ) -> Result<HookId, RegisterError>
    where
        P: Point,
        F: Fn(&mut P::Context) -> R + Send + Sync + 'static,
        R: HookReturn<P>,
    {
        let _ = point;
        let entry = on_entry::<P, F, R>(options, HookStyle::On, HookOrigin::Runtime, hook)?;
        let id = entry.info.id;
        P::chain_mut(self.set).insert(Arc::new(entry));
        Ok(id)
    }

    /// Registers an `async` hook at `point` (see
    /// [`HookRegistry::register_async_hook`]).
    pub fn register_async_hook<P, F, R>(
        &mut self,
        point: P,
        hook: F,
    ) -> Result<HookId, RegisterError>
    where
        P: Point,
        F: for<'c> AsyncHookFn<'c, P::Context, R>,
        R: HookReturn<P> + 'static,
    {
        self.register_async_hook_with(point, HookOptions::new(), hook)
    }

    /// Registers an `async` hook at `point` with options (see
    /// [`HookRegistry::register_async_hook_with`]).
    pub fn register_async_hook_with<P, F, R>(
        &mut self,
        point: P,
        options: HookOptions,
        hook: F,
    ) -> Result<HookId, RegisterError>
    where
        P: Point,
        F: for<'c> AsyncHookFn<'c, P::Context, R>,
        R: HookReturn<P> + 'static,
    {
        let _ = point;
        let entry = async_entry::<P, F, R>(options, HookOrigin::Runtime, hook)?;
        let id = entry.info.id;
        P::chain_mut(self.set).insert(Arc::new(entry));
        Ok(id)
    }

    /// Removes the hooks `handle` names at `point`; returns whether anything
    /// was removed.
    pub fn unregister_hook<M>(
        &mut self,
        point: impl Into<InterceptionPoint>,
        handle: impl HookHandle<M>,
    ) -> bool {
        self.set.erased_mut(point.into()).remove(handle.hook_key()) > 0
    }

    /// Removes every hook at `point`; returns how many.
    pub fn clear_hooks(&mut self, point: impl Into<InterceptionPoint>) -> usize {
        self.set.erased_mut(point.into()).clear()
    }

    /// Removes every hook at every point; returns how many.
    pub fn clear_all_hooks(&mut self) -> usize {
        InterceptionPoint::ALL
            .iter()
            .map(|point| self.set.erased_mut(*point).clear())
            .sum()
    }

    /// The hooks at `point` as the batch has left them so far.
    pub fn get_hooks(&self, point: impl Into<InterceptionPoint>) -> Vec<HookInfo> {
        self.set.erased(point.into()).infos()
    }
}

impl fmt::Debug for HookBatch<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HookBatch").finish_non_exhaustive()
    }
}

impl Default for HookRegistry {
    fn default() -> Self {
        HookRegistry::new()
    }
}

impl fmt::Debug for HookRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let set = self.snapshot();
        let mut debug = f.debug_struct("HookRegistry");
        for point in InterceptionPoint::ALL {
            let len = set.erased(point).len();
            if len > 0 {
                debug.field(point.as_str(), &len);
            }
        }
        debug.field("events", &self.events).finish()
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
        capabilities: options.capabilities,
        origin,
        order: options.order,
        failure: options.failure,
        timeout: options.timeout,
        style,
        unchecked_filters: options.unchecked_filters,
    }
}

/// Checks that the options' filters apply at `point`.
pub(crate) fn check_filters(
    point: InterceptionPoint,
    options: &HookOptions,
) -> Result<(), RegisterError> {
    if !options.tools.is_empty() && !point.accepts_tool_filter() {
        return Err(RegisterError::FilterDoesNotApply {
            point,
            filter: "tools",
        });
    }
    if !options.agents.is_empty() && !point.accepts_agent_filter() {
        return Err(RegisterError::FilterDoesNotApply {
            point,
            filter: "agents",
        });
    }
    // Only a tool call has a tool whose capabilities a filter can read.
    if !options.capabilities.is_empty() && !point.accepts_tool_filter() {
        return Err(RegisterError::FilterDoesNotApply {
            point,
            filter: "capabilities",
        });
    }
    Ok(())
}

/// An entry for a `#[on]`-style hook, its filters checked.
pub(crate) fn on_entry<P, F, R>(
    options: HookOptions,
    style: HookStyle,
    origin: HookOrigin,
    hook: F,
) -> Result<HookEntry<P>, RegisterError>
where
    P: Point,
    F: Fn(&mut P::Context) -> R + Send + Sync + 'static,
    R: HookReturn<P>,
{
    check_filters(P::ID, &options)?;
    Ok(unchecked_entry::<P, F, R>(options, style, origin, hook))
}

/// An entry for a hook whose filters are known to fit (the legacy tool and
/// model points take both filters).
pub(crate) fn unchecked_entry<P, F, R>(
    options: HookOptions,
    style: HookStyle,
    origin: HookOrigin,
    hook: F,
) -> HookEntry<P>
where
    P: Point,
    F: Fn(&mut P::Context) -> R + Send + Sync + 'static,
    R: HookReturn<P>,
{
    let call: std::sync::Arc<crate::hook::SyncHookFn<P>> =
        std::sync::Arc::new(move |ctx| hook(ctx).into_decision());
    entry::<P, F>(options, style, origin, HookCall::Shared(call))
}

/// An entry for an `async` hook, its filters checked.
pub(crate) fn async_entry<P, F, R>(
    options: HookOptions,
    origin: HookOrigin,
    hook: F,
) -> Result<HookEntry<P>, RegisterError>
where
    P: Point,
    F: for<'c> AsyncHookFn<'c, P::Context, R>,
    R: HookReturn<P> + 'static,
{
    check_filters(P::ID, &options)?;
    Ok(entry::<P, F>(
        options,
        HookStyle::On,
        origin,
        async_call(hook),
    ))
}

/// An `async` hook adapted to its point's decision.
pub(crate) fn async_call<P, F, R>(hook: F) -> HookCall<P>
where
    P: Point,
    F: for<'c> AsyncHookFn<'c, P::Context, R>,
    R: HookReturn<P> + 'static,
{
    HookCall::SharedAsync(std::sync::Arc::new(move |ctx| {
        let running = hook.start(ctx);
        // One allocation per run: the hook's own future lives inside.
        Box::pin(async move { running.await.into_decision() })
    }))
}

/// An entry for a legacy before hook (`false` blocks).
pub(crate) fn legacy_before_entry<P, F, R>(
    options: HookOptions,
    style: HookStyle,
    hook: F,
) -> HookEntry<P>
where
    P: LegacyBeforePoint,
    F: Fn(&mut P::Context) -> R + Send + Sync + 'static,
    R: LegacyBeforeReturn<P>,
{
    let call: std::sync::Arc<crate::hook::SyncHookFn<P>> =
        std::sync::Arc::new(move |ctx| hook(ctx).into_decision());
    entry::<P, F>(options, style, HookOrigin::Runtime, HookCall::Shared(call))
}

fn entry<P: Point, F: 'static>(
    options: HookOptions,
    style: HookStyle,
    origin: HookOrigin,
    call: HookCall<P>,
) -> HookEntry<P> {
    let rank = next_rank();
    // A legacy hook is named as the reference names it: a function by its
    // own name (`block_ping`, not `my_crate::hooks::block_ping`).
    let name = match style {
        HookStyle::On => type_name::<F>(),
        _ => function_name(type_name::<F>()),
    };
    HookEntry::new(
        base_info(P::ID, options, style, origin, name, rank),
        rank,
        function_key::<F>(),
        None,
        call,
    )
}

/// A function's own name from its type's name (`my_crate::hooks::block_ping`
/// → `block_ping`, generic arguments dropped); a type with no name of its
/// own (a closure's `…::{{closure}}`, a function pointer) keeps its type's
/// name, which at least says where it was written.
fn function_name(type_name: &str) -> &str {
    // The last path segment outside any `<…>` (generic arguments and
    // qualified paths hold `::` of their own).
    let mut depth = 0usize;
    let mut start = 0;
    let mut end = type_name.len();
    let bytes = type_name.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'<' => {
                if depth == 0 && i > start {
                    end = i;
                }
                depth += 1;
            }
            b'>' => depth = depth.saturating_sub(1),
            b':' if depth == 0 && bytes.get(i + 1) == Some(&b':') => {
                start = i + 2;
                end = type_name.len();
            }
            b'(' | b' ' if depth == 0 => return type_name,
            _ => {}
        }
    }
    let name = &type_name[start.min(end)..end];
    let is_identifier = name
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_alphanumeric() || c == '_');
    if is_identifier { name } else { type_name }
}

/// An entry for a hook already adapted to its point (the door generated
/// `#[crew_base]` code and runtimes use), labeled with a crew.
pub(crate) fn crew_entry<P: Point>(
    crew: &str,
    style: HookStyle,
    options: HookOptions,
    call: HookCall<P>,
) -> Result<HookEntry<P>, RegisterError> {
    check_filters(P::ID, &options)?;
    let rank = next_rank();
    let origin = HookOrigin::Crew {
        crew: crew.to_owned(),
    };
    Ok(HookEntry::new(
        base_info(P::ID, options, style, origin, "crew hook", rank),
        rank,
        None,
        None,
        call,
    ))
}

static GLOBAL: LazyLock<HookRegistry> = LazyLock::new(HookRegistry::with_static_hooks);

/// The process-wide registry, built on first use from every link-time hook.
///
/// ```
/// use hooks_core::{get_hooks, global_registry, ToolCallHookContext, PRE_TOOL_CALL};
/// # let _fixture = hooks_core::testing::GlobalHooksFixture::new();
///
/// // The free functions (`register_hook`, `get_hooks`, ...) act on this registry.
/// let id = global_registry().register_hook(PRE_TOOL_CALL, |_: &mut ToolCallHookContext| {})?;
/// assert!(get_hooks(PRE_TOOL_CALL).iter().any(|hook| hook.id == id));
/// assert!(std::ptr::eq(global_registry(), global_registry()));
///
/// assert!(global_registry().unregister_hook(PRE_TOOL_CALL, id));
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
pub fn global_registry() -> &'static HookRegistry {
    &GLOBAL
}

#[cfg(test)]
mod tests {
    use super::function_name;

    #[test]
    fn a_function_is_named_by_its_last_segment_and_anything_else_by_its_type() {
        for (type_name, expected) in [
            ("my_crate::hooks::block_ping", "block_ping"),
            ("block_ping", "block_ping"),
            ("my_crate::block<alloc::string::String>", "block"),
            ("my_crate::Guard<u8>::check", "check"),
            ("<my_crate::Guard as my_crate::Check>::check", "check"),
            (
                "my_crate::tests::t::{{closure}}",
                "my_crate::tests::t::{{closure}}",
            ),
            (
                "my_crate::f<alloc::string::String>::{{closure}}",
                "my_crate::f<alloc::string::String>::{{closure}}",
            ),
            (
                "for<'a> fn(&'a mut hooks_core::ToolCallHookContext) -> bool",
                "for<'a> fn(&'a mut hooks_core::ToolCallHookContext) -> bool",
            ),
            ("fn(&mut u8)", "fn(&mut u8)"),
        ] {
            assert_eq!(function_name(type_name), expected, "{type_name}");
        }
    }
}
