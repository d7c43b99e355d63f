//! Running the chains: the hot path of every call.
//!
//! A call with no hooks costs one relaxed atomic load per registry. With
//! hooks, a call loads each registry's snapshot once (lock-free) and keeps
//! it for all its points (PRE and POST of one tool call or model call see
//! the same hooks), looks the tool up in the snapshot's filter index, and
//! walks the candidate hooks of the global and the crew-scoped chain merged
//! by rank. Nothing on this path allocates or locks unless an event
//! listener or `tracing` subscriber wants an event.

use std::mem::ManuallyDrop;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use arc_swap::Guard;

use crate::chain::{Candidates, Chain, MergeByRank};
use crate::context::HookContext;
use crate::context::ToolCallHookContext;
use crate::events::{Event, EventMeta, HookDispatchedEvent, HookPanickedEvent};
use crate::hook::{FailureMode, HookEntry, Invocation};
use crate::outcome::{Decision, DispatchOutcome, HookAborted};
use crate::panic::drop_payload;
use crate::point::points::{PostToolCall, PreToolCall};
use crate::point::{InPlaceWatch, InterceptionPoint, Point};
use crate::registry::{ChainSet, HookRegistry, global_registry};

/// Runs calls through a global registry and, for a crew, the crew's own
/// hooks, merged into one order.
#[derive(Clone, Copy)]
pub struct Dispatcher<'a> {
    global: &'a HookRegistry,
    scoped: Option<&'a HookRegistry>,
    hook_timeout: std::time::Duration,
    /// The crew's redaction, which cleans every event at the bus's edge;
    /// without one, the redaction in scope does.
    redactor: Option<&'a dyn crate::Redact>,
}

impl std::fmt::Debug for Dispatcher<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatcher")
            .field("global", &self.global)
            .field("scoped", &self.scoped)
            .field("hook_timeout", &self.hook_timeout)
            .field("redaction", &self.redactor.is_some())
            .finish()
    }
}

impl Default for Dispatcher<'static> {
    fn default() -> Self {
        Dispatcher::new(global_registry())
    }
}

impl<'a> Dispatcher<'a> {
    /// Dispatches through `global` only.
    pub fn new(global: &'a HookRegistry) -> Self {
        Dispatcher {
            global,
            scoped: None,
            hook_timeout: crate::DEFAULT_HOOK_TIMEOUT,
            redactor: None,
        }
    }

    /// Sets how long an `async` hook may run in an awaiting dispatch
    /// unless it has a limit of its own ([`HookOptions::timeout`](crate::HookOptions::timeout));
    /// [`DEFAULT_HOOK_TIMEOUT`](crate::DEFAULT_HOOK_TIMEOUT) by default.
    /// A crew sets its own.
    ///
    /// ```
    /// use std::time::Duration;
    /// use hooks_core::HookRegistry;
    ///
    /// let registry = HookRegistry::new();
    /// let dispatcher = registry.dispatcher().with_hook_timeout(Duration::from_secs(5));
    /// assert_eq!(dispatcher.hook_timeout(), Duration::from_secs(5));
    /// ```
    pub fn with_hook_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.hook_timeout = timeout;
        self
    }

    /// How long an `async` hook without a limit of its own may run.
    pub fn hook_timeout(&self) -> std::time::Duration {
        self.hook_timeout
    }

    /// Adds a crew's own hooks: they run merged with the global chain by
    /// registration order, and only for calls dispatched here.
    pub fn with_scope(mut self, scoped: &'a HookRegistry) -> Self {
        self.scoped = Some(scoped);
        self
    }

    /// Cleans every event this dispatcher emits with `redactor` (a crew's
    /// redaction), at the one place events leave: [`emit`](Self::emit).
    /// Without one, the redaction in scope (see
    /// [`RedactionScope`](crate::runtime::RedactionScope)) cleans them.
    ///
    /// ```
    /// use std::borrow::Cow;
    /// use std::sync::{Arc, Mutex};
    /// use hooks_core::events::TaskFailedEvent;
    /// use hooks_core::runtime::Dispatcher;
    /// use hooks_core::{Event, HookRegistry, Redact};
    ///
    /// struct HideKey;
    /// impl Redact for HideKey {
    ///     fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
    ///         if text.contains("sk-123") { Cow::Owned(text.replace("sk-123", "[KEY]")) } else { Cow::Borrowed(text) }
    ///     }
    /// }
    ///
    /// let registry = HookRegistry::new();
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let sink = Arc::clone(&seen);
    /// registry.events().subscribe(move |event| {
    ///     if let Event::TaskFailed(failed) = event {
    ///         sink.lock().unwrap().push(failed.error.clone());
    ///     }
    /// });
    /// Dispatcher::new(&registry).with_redaction(&HideKey).emit(Event::TaskFailed(TaskFailedEvent {
    ///     meta: Default::default(),
    ///     task_name: "fetch".into(),
    ///     agent_role: "Analyst".into(),
    ///     crew: "ops".into(),
    ///     error: "the key sk-123 was refused".into(),
    /// }));
    /// assert_eq!(seen.lock().unwrap()[0], "the key [KEY] was refused");
    /// ```
    pub fn with_redaction(mut self, redactor: &'a dyn crate::Redact) -> Self {
        self.redactor = Some(redactor);
        self
    }

    /// The global registry.
    pub fn global(&self) -> &'a HookRegistry {
        self.global
    }

    /// The crew-scoped registry, if any.
    pub fn scoped(&self) -> Option<&'a HookRegistry> {
        self.scoped
    }

    /// Takes the snapshot one call works on, for the points in `points`:
    /// every dispatch through it sees the hooks registered when the call
    /// started, whatever is registered or removed meanwhile.
    ///
    /// Loads nothing when no registry has a hook at those points.
    #[inline(always)]
    pub fn begin_call(&self, points: &[InterceptionPoint]) -> CallHooks<'a> {
        let wanted = points.iter().fold(0u32, |mask, p| mask | 1 << p.index());
        let global_mask = self.global.nonempty_mask() & wanted;
        let scoped_mask = self.scoped.map_or(0, |s| s.nonempty_mask()) & wanted;
        let mask = global_mask | scoped_mask;
        if mask == 0 {
            return CallHooks {
                dispatcher: *self,
                mask,
                listening: false,
                loaded: None,
            };
        }
        self.load_call(mask, global_mask, scoped_mask)
    }

    #[inline(never)]
    fn load_call(&self, mask: u32, global_mask: u32, scoped_mask: u32) -> CallHooks<'a> {
        CallHooks {
            dispatcher: *self,
            mask,
            listening: self.listening()
                || tracing::enabled!(target: "hooks_core::dispatch", tracing::Level::DEBUG),
            loaded: Some(Loaded {
                global: ManuallyDrop::new((global_mask != 0).then(|| self.global.snapshot())),
                scoped: ManuallyDrop::new(
                    self.scoped
                        .filter(|_| scoped_mask != 0)
                        .map(HookRegistry::snapshot),
                ),
            }),
        }
    }

    /// Whether either registry has a hook at `point` (one relaxed load
    /// each): a runtime can skip building a context nobody will see.
    #[inline]
    pub fn has_hooks(&self, point: impl Into<InterceptionPoint>) -> bool {
        let bit = 1 << point.into().index();
        self.global.nonempty_mask() & bit != 0
            || self.scoped.is_some_and(|s| s.nonempty_mask() & bit != 0)
    }

    /// Runs `point`'s chain once, on a snapshot of its own.
    #[inline]
    pub fn dispatch<P: Point>(&self, point: P, ctx: &mut P::Context) -> DispatchOutcome {
        // The common case, no hook at this point: one relaxed load per
        // registry, no snapshot.
        if !self.has_hooks(P::ID) {
            return DispatchOutcome::Proceeded;
        }
        self.dispatch_slow(point, ctx)
    }

    #[inline(never)]
    fn dispatch_slow<P: Point>(&self, point: P, ctx: &mut P::Context) -> DispatchOutcome {
        self.begin_call(&[P::ID]).dispatch(point, ctx)
    }

    /// Runs the `PRE_TOOL_CALL` chain. On [`DispatchOutcome::Aborted`] the
    /// caller must not run the tool.
    #[inline]
    pub fn dispatch_pre(&self, ctx: &mut ToolCallHookContext) -> DispatchOutcome {
        self.dispatch(PreToolCall, ctx)
    }

    /// Runs the `POST_TOOL_CALL` chain. On [`DispatchOutcome::Aborted`] the
    /// caller must end the run with the abort.
    #[inline]
    pub fn dispatch_post(&self, ctx: &mut ToolCallHookContext) -> DispatchOutcome {
        self.dispatch(PostToolCall, ctx)
    }

    /// Delivers an event to the global bus and, for a crew's dispatcher, to
    /// the crew's bus (also when the crew has no hooks of its own), cleaned
    /// first by the dispatcher's redaction (see
    /// [`with_redaction`](Self::with_redaction)): the edge every event of a
    /// crew passes.
    pub fn emit(&self, mut event: Event) {
        self.clean(&mut event);
        self.deliver(&event);
    }

    /// Cleans `event` as [`emit`](Self::emit) does.
    fn clean(&self, event: &mut Event) {
        match self.redactor {
            Some(redactor) => event.redact(redactor),
            None if crate::redaction::redaction_in_scope() => {
                event.redact(&crate::redaction::InScope);
            }
            None => {}
        }
    }

    /// Delivers an already cleaned event.
    fn deliver(&self, event: &Event) {
        self.global.events().emit(event);
        if let Some(scoped) = self.scoped {
            scoped.events().emit(event);
        }
    }

    /// Whether anyone listens on the buses this dispatcher reports to.
    #[inline]
    pub fn listening(&self) -> bool {
        self.global.events().has_listeners()
            // The crew's bus hears every dispatch of its calls, also when
            // the crew has no hooks of its own at this point.
            || self.scoped.is_some_and(|s| s.events().has_listeners())
    }
}

/// The points of one tool call.
///
/// ```
/// use hooks_core::runtime::{ToolOutput, TOOL_CALL_POINTS};
/// use hooks_core::{HookRegistry, ToolCallHookContext, POST_TOOL_CALL};
///
/// let registry = HookRegistry::new();
/// registry.register_hook(POST_TOOL_CALL, |ctx: &mut ToolCallHookContext| ctx.tool_result.as_deref().map(str::to_uppercase))?;
///
/// // One snapshot of the hooks for both chains of the call.
/// let call = registry.dispatcher().begin_call(&TOOL_CALL_POINTS);
/// let mut ctx = ToolCallHookContext::new("greet", Default::default());
/// let report = call.run_tool_call(&mut ctx, |_| ToolOutput::text("hello"))?;
/// assert_eq!(report.observation, "HELLO");
/// assert!(TOOL_CALL_POINTS.iter().all(|point| point.accepts_tool_filter()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub const TOOL_CALL_POINTS: [InterceptionPoint; 2] = [
    InterceptionPoint::PRE_TOOL_CALL,
    InterceptionPoint::POST_TOOL_CALL,
];

/// The points of one model call.
///
/// ```
/// use hooks_core::runtime::MODEL_CALL_POINTS;
/// use hooks_core::{ChatMessage, HookRegistry, LlmCallHookContext, ModelResponse, POST_MODEL_CALL, PRE_MODEL_CALL};
///
/// let registry = HookRegistry::new();
/// registry.register_hook(POST_MODEL_CALL, |ctx: &mut LlmCallHookContext| {
///     ctx.response.as_ref().map(|r| r.content.trim().to_owned())
/// })?;
///
/// // Both chains of one model call run on the hooks the call started with.
/// let call = registry.dispatcher().begin_call(&MODEL_CALL_POINTS);
/// let mut ctx = LlmCallHookContext::new(vec![ChatMessage::user("hi")]);
/// call.dispatch(PRE_MODEL_CALL, &mut ctx);
/// ctx.response = Some(ModelResponse { content: " hello \n".into(), tool_calls: Vec::new() });
/// call.dispatch(POST_MODEL_CALL, &mut ctx);
/// assert_eq!(ctx.response.map(|r| r.content).as_deref(), Some("hello"));
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
pub const MODEL_CALL_POINTS: [InterceptionPoint; 2] = [
    InterceptionPoint::PRE_MODEL_CALL,
    InterceptionPoint::POST_MODEL_CALL,
];

/// The hooks one call works on: a snapshot of each registry taken when the
/// call started (see [`Dispatcher::begin_call`]).
pub struct CallHooks<'a> {
    dispatcher: Dispatcher<'a>,
    /// The points (one bit each) at which some snapshot has hooks.
    mask: u32,
    /// Whether a listener or `tracing` wants events, read once per call.
    listening: bool,
    /// The snapshots, absent when no registry has hooks at the call's
    /// points (so that a call without hooks has almost nothing to drop).
    loaded: Option<Loaded>,
}

/// The snapshots one call loaded.
///
/// The guards are released out of line, in [`release`]: the end of a call
/// without hooks is then a single check the compiler keeps inline.
struct Loaded {
    global: ManuallyDrop<Option<Guard<Arc<ChainSet>>>>,
    scoped: ManuallyDrop<Option<Guard<Arc<ChainSet>>>>,
}

impl Drop for Loaded {
    #[inline]
    fn drop(&mut self) {
        release(self.global.take(), self.scoped.take());
    }
}

#[inline(never)]
fn release(global: Option<Guard<Arc<ChainSet>>>, scoped: Option<Guard<Arc<ChainSet>>>) {
    drop(global);
    drop(scoped);
}

impl<'a> CallHooks<'a> {
    /// Runs `point`'s chain of this call's snapshot.
    #[inline(always)]
    pub fn dispatch<P: Point>(&self, point: P, ctx: &mut P::Context) -> DispatchOutcome {
        let _ = point;
        match self.chains::<P>() {
            None | Some((None, None)) => DispatchOutcome::Proceeded,
            // Most calls have hooks in one registry only: walk it directly.
            Some((Some(chain), None) | (None, Some(chain))) => {
                let hooks = chain.candidates(ctx.call_tool_name(), ctx.call_tool_key());
                self.run_chain::<P, _>(hooks, ctx)
            }
            Some((Some(global), Some(scoped))) => {
                let (tool, key) = (ctx.call_tool_name(), ctx.call_tool_key());
                let hooks: MergeByRank<Candidates<'_, P>, Candidates<'_, P>> =
                    MergeByRank::new(global.candidates(tool, key), scoped.candidates(tool, key));
                self.run_chain::<P, _>(hooks, ctx)
            }
        }
    }

    /// Runs `point`'s chain of this call's snapshot, awaiting its `async`
    /// hooks. A chain of synchronous hooks only runs exactly as
    /// [`dispatch`](Self::dispatch) does: inline, without allocating.
    pub async fn dispatch_async<P: Point>(
        &self,
        point: P,
        ctx: &mut P::Context,
    ) -> DispatchOutcome {
        let (global, scoped) = match self.chains::<P>() {
            Some(chains)
                if chains.0.is_some_and(Chain::has_async)
                    || chains.1.is_some_and(Chain::has_async) =>
            {
                chains
            }
            _ => return self.dispatch(point, ctx),
        };
        // The awaiting walk is boxed: it is large, and only a chain with
        // `async` hooks takes it, so every future that awaits this one
        // (a whole tool call's, a crew's turn) stays small, and moving it
        // is cheap on the usual path.
        match (global, scoped) {
            (None, None) => DispatchOutcome::Proceeded,
            (Some(chain), None) | (None, Some(chain)) => {
                let hooks = chain.candidates(ctx.call_tool_name(), ctx.call_tool_key());
                Box::pin(self.run_chain_async::<P, _>(hooks.enumerate(), ctx)).await
            }
            (Some(global), Some(scoped)) => {
                let (tool, key) = (ctx.call_tool_name(), ctx.call_tool_key());
                let hooks: MergeByRank<Candidates<'_, P>, Candidates<'_, P>> =
                    MergeByRank::new(global.candidates(tool, key), scoped.candidates(tool, key));
                Box::pin(self.run_chain_async::<P, _>(hooks.enumerate(), ctx)).await
            }
        }
    }

    /// The PRE chain of a tool call from the hook of `gate` on, on the
    /// arguments it keeps, when the chain's hook at its place has its name;
    /// the whole chain on the call's own arguments otherwise (the chain is
    /// not the one the place was taken in). For a resumed call whose hooks
    /// before that one ran in an earlier process (see
    /// [`ToolCallHookContext::resume_chain_at`](crate::ToolCallHookContext::resume_chain_at)).
    pub(crate) async fn dispatch_pre_from(
        &self,
        ctx: &mut crate::ToolCallHookContext,
        gate: crate::ChainGate,
    ) -> DispatchOutcome {
        type P = crate::point::points::PreToolCall;
        let Some((global, scoped)) = self.chains::<P>() else {
            return DispatchOutcome::Proceeded;
        };
        let (tool, key) = (ctx.call_tool_name(), ctx.call_tool_key());
        // A resumed call only: gathered, so that the place can be checked
        // before the walk.
        let hooks: Vec<&Arc<HookEntry<P>>> = match (global, scoped) {
            (None, None) => Vec::new(),
            (Some(chain), None) | (None, Some(chain)) => chain.candidates(tool, key).collect(),
            (Some(global), Some(scoped)) => {
                MergeByRank::new(global.candidates(tool, key), scoped.candidates(tool, key))
                    .collect()
            }
        };
        let first = match hooks.get(gate.position) {
            Some(entry) if entry.info.name == gate.hook => {
                ctx.tool_input = gate.input;
                gate.position
            }
            _ => 0,
        };
        let walk = hooks.into_iter().enumerate().skip(first);
        Box::pin(self.run_chain_async::<P, _>(walk, ctx)).await
    }

    /// Runs the synchronous hooks of `point`'s chain only, in their order,
    /// skipping its `async` ones; says how many it skipped. For a runtime
    /// that must report something where it cannot await (a kickoff dropped
    /// mid-run runs its `EXECUTION_END` hooks while it is dropped), and
    /// then hands the rest to [`dispatch_async_only`](Self::dispatch_async_only)
    /// where it can.
    ///
    /// ```
    /// use hooks_core::{ExecutionEndContext, HookRegistry, EXECUTION_END};
    ///
    /// async fn later(_: &mut ExecutionEndContext) {}
    /// let registry = HookRegistry::new();
    /// registry.register_hook(EXECUTION_END, |_: &mut ExecutionEndContext| {})?;
    /// registry.register_async_hook(EXECUTION_END, later)?;
    /// let call = registry.dispatcher().begin_call(&[EXECUTION_END.into()]);
    /// let mut ctx = ExecutionEndContext::cancelled();
    /// let (_, skipped) = call.dispatch_skipping_async(EXECUTION_END, &mut ctx);
    /// assert_eq!(skipped, 1);
    /// # Ok::<(), hooks_core::RegisterError>(())
    /// ```
    pub fn dispatch_skipping_async<P: Point>(
        &self,
        point: P,
        ctx: &mut P::Context,
    ) -> (DispatchOutcome, usize) {
        let _ = point;
        let (global, scoped) = match self.chains::<P>() {
            None => return (DispatchOutcome::Proceeded, 0),
            Some(chains) => chains,
        };
        let (tool, key) = (ctx.call_tool_name(), ctx.call_tool_key());
        let all = global
            .into_iter()
            .flat_map(move |chain| chain.candidates(tool, key))
            .chain(
                scoped
                    .into_iter()
                    .flat_map(move |chain| chain.candidates(tool, key)),
            );
        let skipped = all.filter(|entry| entry.call.is_async()).count();
        let outcome = match (global, scoped) {
            (None, None) => DispatchOutcome::Proceeded,
            (Some(chain), None) | (None, Some(chain)) => {
                let hooks = chain.candidates(tool, key).filter(|e| !e.call.is_async());
                self.run_chain::<P, _>(hooks, ctx)
            }
            (Some(global), Some(scoped)) => {
                let hooks: MergeByRank<Candidates<'_, P>, Candidates<'_, P>> =
                    MergeByRank::new(global.candidates(tool, key), scoped.candidates(tool, key));
                self.run_chain::<P, _>(hooks.filter(|e| !e.call.is_async()), ctx)
            }
        };
        (outcome, skipped)
    }

    /// Runs the `async` hooks of `point`'s chain only, in their order,
    /// each awaited (see [`dispatch_skipping_async`](Self::dispatch_skipping_async)).
    pub async fn dispatch_async_only<P: Point>(
        &self,
        point: P,
        ctx: &mut P::Context,
    ) -> DispatchOutcome {
        let _ = point;
        let (global, scoped) = match self.chains::<P>() {
            None => return DispatchOutcome::Proceeded,
            Some(chains) => chains,
        };
        let (tool, key) = (ctx.call_tool_name(), ctx.call_tool_key());
        match (global, scoped) {
            (None, None) => DispatchOutcome::Proceeded,
            (Some(chain), None) | (None, Some(chain)) => {
                let hooks = chain.candidates(tool, key).enumerate();
                let hooks = hooks.filter(|(_, e)| e.call.is_async());
                self.run_chain_async::<P, _>(hooks, ctx).await
            }
            (Some(global), Some(scoped)) => {
                let hooks: MergeByRank<Candidates<'_, P>, Candidates<'_, P>> =
                    MergeByRank::new(global.candidates(tool, key), scoped.candidates(tool, key));
                let hooks = hooks.enumerate().filter(|(_, e)| e.call.is_async());
                self.run_chain_async::<P, _>(hooks, ctx).await
            }
        }
    }

    /// This call's non-empty chains at `P`, global and crew-scoped (`None`
    /// when neither snapshot has hooks there).
    #[inline(always)]
    #[allow(clippy::type_complexity)]
    fn chains<P: Point>(&self) -> Option<(Option<&Chain<P>>, Option<&Chain<P>>)> {
        let loaded = match &self.loaded {
            Some(loaded) if self.mask & (1 << P::ID.index()) != 0 => loaded,
            _ => return None,
        };
        let global = loaded
            .global
            .as_ref()
            .map(|set| P::chain(set))
            .filter(|c| !c.is_empty());
        let scoped = loaded
            .scoped
            .as_ref()
            .map(|set| P::chain(set))
            .filter(|c| !c.is_empty());
        Some((global, scoped))
    }

    /// Keeps this call's snapshots as counted references instead of the
    /// registry's borrowed guards: for a call that awaits between its
    /// points (a model or a tool that takes seconds), so that it holds
    /// none of the per-thread slots the guards borrow. The hooks stay the
    /// same.
    pub fn hold(&mut self) {
        if let Some(loaded) = &mut self.loaded {
            for guard in [&mut *loaded.global, &mut *loaded.scoped] {
                if let Some(held) = guard.take() {
                    *guard = Some(Guard::from_inner(Guard::into_inner(held)));
                }
            }
        }
    }

    /// Runs `hooks` (the candidates for this call, in order) and reports the
    /// dispatch to whoever listens. An `async` hook met here is driven to
    /// completion on this thread (see [`CallHooks::dispatch_async`] for the
    /// way that does not block).
    #[inline(always)]
    fn run_chain<'c, P: Point, I>(&self, hooks: I, ctx: &mut P::Context) -> DispatchOutcome
    where
        I: Iterator<Item = &'c Arc<HookEntry<P>>>,
    {
        // A TSC-based clock: reading it costs a few nanoseconds, where the
        // system clock costs tens, twice per observed dispatch.
        let started = self.listening.then(quanta::Instant::now);
        let mut walk = Walk::default();
        // `None` but at EXECUTION_END, and then compiled away.
        let before = <P::Watched as InPlaceWatch<P::Context>>::copy(ctx);
        // Panics of the hooks below are contained: the panic hook stays
        // silent for them, and the dispatcher reports them (redacted).
        let quiet = crate::panic::QuietScope::enter();
        for entry in hooks {
            // The role and the tool's capabilities are virtual calls: ask
            // for them only when a filter needs them (an unfiltered hook
            // costs one flag test).
            if entry.call_filtered && !entry.call_matches(ctx) {
                continue;
            }
            walk.hooks_run += 1;
            // A panic of an `async` hook driven here unwinds to this
            // `catch_unwind` too.
            let result = catch_unwind(AssertUnwindSafe(|| entry.call.call(ctx)));
            if result.is_err() {
                quiet.panicked();
            }
            if self.settle(&mut walk, entry, false, result, ctx) {
                break;
            }
        }
        drop(quiet);
        walk.edited_in_place::<P>(before.as_ref(), ctx);
        self.conclude::<P>(walk, started, ctx)
    }

    /// [`run_chain`](Self::run_chain) for a chain with `async` hooks: each
    /// one's future is awaited in its turn, the synchronous hooks around it
    /// run inline. A panic while a hook's future is polled is contained
    /// like a synchronous hook's.
    async fn run_chain_async<'c, P: Point, I>(
        &self,
        hooks: I,
        ctx: &mut P::Context,
    ) -> DispatchOutcome
    where
        I: Iterator<Item = (usize, &'c Arc<HookEntry<P>>)>,
    {
        let started = self.listening.then(quanta::Instant::now);
        let mut walk = Walk::default();
        let before = <P::Watched as InPlaceWatch<P::Context>>::copy(ctx);
        // Each hook with its place among the chain's candidates for the
        // call (filtered or not), where a resumed call may start again.
        for (position, entry) in hooks {
            if entry.call_filtered && !entry.call_matches(ctx) {
                continue;
            }
            walk.hooks_run += 1;
            let limit = entry.info.timeout.unwrap_or(self.dispatcher.hook_timeout);
            ctx.running_hook(Arc::as_ptr(entry).addr(), position, &entry.info.name);
            let (result, asked) = run_one(&entry.call, limit, ctx).await;
            if self.settle(&mut walk, entry, asked, result, ctx) {
                break;
            }
        }
        walk.edited_in_place::<P>(before.as_ref(), ctx);
        self.conclude::<P>(walk, started, ctx)
    }

    /// Applies one hook's decision (or panic) to the walk; returns whether
    /// the chain stops here.
    #[inline(always)]
    fn settle<P: Point>(
        &self,
        walk: &mut Walk,
        entry: &HookEntry<P>,
        asked: bool,
        result: std::thread::Result<Decision<P::Replacement>>,
        ctx: &mut P::Context,
    ) -> bool {
        match result {
            Ok(Decision::Continue) => false,
            Ok(Decision::Replace(value)) => {
                P::replace(ctx, value);
                walk.modified = true;
                false
            }
            Ok(Decision::Abort(mut abort)) => {
                if abort.source.is_empty() {
                    abort.source = entry.info.name.clone();
                }
                walk.aborted = Some(abort);
                true
            }
            Err(panic) => {
                // A hook that asked a person and did not finish never lets
                // the call through: an approval does not fail open.
                let fail_closed = asked || entry.info.failure == FailureMode::FailClosed;
                let message = self.report_panic(entry, fail_closed, &*ctx, &*panic);
                let timed_out = panic.is::<HookTimedOut>();
                drop_payload(panic);
                if !fail_closed {
                    return false;
                }
                if P::fail_closed_stops() {
                    let reason = if timed_out {
                        format!("fail-closed hook {message}")
                    } else {
                        format!("fail-closed hook panicked: {message}")
                    };
                    walk.aborted = Some(HookAborted::new(reason, entry.info.name.clone()));
                    return true;
                }
                P::withhold(ctx);
                walk.modified = true;
                false
            }
        }
    }

    /// The outcome of a walk, reported to whoever listens.
    #[inline(always)]
    fn conclude<P: Point>(
        &self,
        walk: Walk,
        started: Option<quanta::Instant>,
        ctx: &P::Context,
    ) -> DispatchOutcome {
        let outcome = match walk.aborted {
            Some(abort) => DispatchOutcome::Aborted(abort),
            None if walk.modified => DispatchOutcome::Modified,
            None => DispatchOutcome::Proceeded,
        };
        if let Some(started) = started.filter(|_| walk.hooks_run > 0) {
            self.report_dispatch::<P>(&outcome, walk.hooks_run, started, ctx);
        }
        outcome
    }

    /// Emits the [`HookDispatchedEvent`] of a dispatch someone listens to.
    /// Kept out of line so that the unobserved path keeps a small frame.
    #[cold]
    #[inline(never)]
    fn report_dispatch<P: Point>(
        &self,
        outcome: &DispatchOutcome,
        hooks_run: usize,
        started: quanta::Instant,
        ctx: &P::Context,
    ) {
        let mut event = Event::HookDispatched(HookDispatchedEvent::new(
            P::ID,
            outcome,
            hooks_run,
            started,
            ctx.event_tool_name(),
            ctx.event_agent_role(),
        ));
        // Cleaned once, for the log line and the buses.
        self.dispatcher.clean(&mut event);
        let Event::HookDispatched(dispatched) = &event else {
            return;
        };
        tracing::debug!(
            target: "hooks_core::dispatch",
            point = %P::ID,
            outcome = dispatched.outcome,
            hooks_run = dispatched.hooks_run,
            duration_ns = dispatched.duration.as_nanos() as u64,
            tool = dispatched.tool_name.as_deref().unwrap_or(""),
            agent = dispatched.agent_role.as_deref().unwrap_or(""),
            abort_reason = dispatched.abort_reason.as_deref().unwrap_or(""),
            abort_source = dispatched.abort_source.as_deref().unwrap_or(""),
            "hook chain dispatched"
        );
        self.dispatcher.deliver(&event);
    }

    #[cold]
    #[inline(never)]
    fn report_panic<P: Point>(
        &self,
        entry: &HookEntry<P>,
        fail_closed: bool,
        ctx: &P::Context,
        panic: &(dyn std::any::Any + Send),
    ) -> String {
        let message = match panic.downcast_ref::<HookTimedOut>() {
            Some(timed_out) => timed_out.to_string(),
            None => crate::contain::redacted_message(panic),
        };
        // The model chose the tool's name: it leaves through the redaction
        // in scope, like the message.
        let tool = ctx
            .call_tool_name()
            .map(|name| crate::redaction::redact_in_scope(name).into_owned());
        tracing::warn!(
            target: "hooks_core::dispatch",
            hook = %entry.info.name,
            point = %P::ID,
            tool = tool.as_deref().unwrap_or(""),
            fail_closed,
            "hook panicked: {message}; {}",
            if fail_closed {
                "fail-closed, so it counts as a refusal"
            } else {
                "fail-open, so its effect is dropped"
            }
        );
        self.dispatcher.emit(Event::HookPanicked(HookPanickedEvent {
            meta: EventMeta::new(),
            point: P::ID,
            hook: entry.info.name.clone(),
            message: message.clone(),
            fail_closed,
            tool_name: tool,
        }));
        message
    }
}

impl std::fmt::Debug for CallHooks<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallHooks")
            .field("mask", &self.mask)
            .field("loaded", &self.loaded.is_some())
            .finish()
    }
}

/// The payload standing for a panic of an `async` hook that ran out of
/// time: it is reported, and counts, as a panic of that hook.
#[derive(Debug)]
struct HookTimedOut(std::time::Duration);

impl std::fmt::Display for HookTimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "timed out: still running after {:?}", self.0)
    }
}

/// Runs one hook of an awaiting walk to its decision, containing a panic;
/// an `async` hook gets `limit` of its own time (see
/// [`hook_clock`](crate::hook_clock)) and is cut short past it, as if it
/// had panicked. Also says whether the hook asked a person anything.
///
/// The quiet scope is per thread: it is entered around each step that runs
/// hook code, never held across an await.
async fn run_one<P: Point>(
    call: &crate::hook::HookCall<P>,
    limit: std::time::Duration,
    ctx: &mut P::Context,
) -> (std::thread::Result<Decision<P::Replacement>>, bool) {
    let invoked = {
        let quiet = crate::panic::QuietScope::enter();
        let invoked = start(call, ctx);
        if invoked.is_err() {
            quiet.panicked();
        }
        invoked
    };
    match invoked {
        Ok(Invocation::Done(decision)) => (Ok(decision), false),
        // Polled quietly, its panic contained (and its message cleaned) as
        // the tools' are.
        Ok(Invocation::Pending(future)) => {
            let contained = crate::contain::contain_panic_async(AssertUnwindSafe(future));
            let run = crate::hook_clock::timed(limit, contained).await;
            let result = match run.output {
                Some(result) => result,
                None => Err(Box::new(HookTimedOut(limit)) as Box<dyn std::any::Any + Send>),
            };
            (result, run.asked)
        }
        Err(panic) => (Err(panic), false),
    }
}

/// Runs a synchronous hook, or starts an `async` one, containing a panic.
#[inline(always)]
fn start<'c, P: Point>(
    call: &crate::hook::HookCall<P>,
    ctx: &'c mut P::Context,
) -> std::thread::Result<Invocation<'c, P::Replacement>> {
    catch_unwind(AssertUnwindSafe(once(move || call.invoke(ctx))))
}

/// `f` as an `FnOnce` closure, so that what it returns may borrow what it
/// captured by value.
#[inline(always)]
fn once<R>(f: impl FnOnce() -> R) -> impl FnOnce() -> R {
    f
}

/// How far a walk through a chain got.
#[derive(Default)]
struct Walk {
    hooks_run: usize,
    modified: bool,
    aborted: Option<HookAborted>,
}

impl Walk {
    /// Counts an edit in place of what the point watches (see
    /// [`Point::Watched`]) as a modification.
    #[inline(always)]
    fn edited_in_place<P: Point>(&mut self, before: Option<&P::Watched>, ctx: &P::Context) {
        if let Some(before) = before
            && before.changed(ctx)
        {
            self.modified = true;
        }
    }
}

impl HookRegistry {
    /// A dispatcher over this registry alone.
    pub fn dispatcher(&self) -> Dispatcher<'_> {
        Dispatcher::new(self)
    }

    /// Runs this registry's chain at `point`.
    ///
    /// ```
    /// use hooks_core::{HookRegistry, StepContext, StepKind, POST_STEP};
    /// let registry = HookRegistry::new();
    /// registry.register_hook(POST_STEP, |ctx: &mut StepContext| Some(ctx.payload.to_uppercase()))?;
    /// let mut ctx = StepContext::new(StepKind::Task, "research", "done");
    /// registry.dispatch(POST_STEP, &mut ctx);
    /// assert_eq!(ctx.payload, "DONE");
    /// # Ok::<(), hooks_core::RegisterError>(())
    /// ```
    pub fn dispatch<P: Point>(&self, point: P, ctx: &mut P::Context) -> DispatchOutcome {
        self.dispatcher().dispatch(point, ctx)
    }

    /// Runs this registry's `PRE_TOOL_CALL` chain.
    pub fn dispatch_pre(&self, ctx: &mut ToolCallHookContext) -> DispatchOutcome {
        self.dispatcher().dispatch_pre(ctx)
    }

    /// Runs this registry's `POST_TOOL_CALL` chain.
    pub fn dispatch_post(&self, ctx: &mut ToolCallHookContext) -> DispatchOutcome {
        self.dispatcher().dispatch_post(ctx)
    }
}
