//! One registered hook: its identity, filters, origin and callable.

use std::any::TypeId;
use std::fmt;
use std::sync::Arc;

use crate::capability::{Capabilities, Capability};
use crate::context::HookContext;
use crate::name::normalize_tool_name;
use crate::outcome::Decision;
use crate::point::{InterceptionPoint, Point};

/// Identifies one registration; returned by every `register_*` call and
/// accepted by every `unregister_*` call.
///
/// ```
/// use hooks_core::{HookRegistry, ToolCallHookContext, PRE_TOOL_CALL};
///
/// let registry = HookRegistry::new();
/// let id = registry.register_hook(PRE_TOOL_CALL, |_: &mut ToolCallHookContext| {})?;
/// assert_eq!(registry.get_hooks(PRE_TOOL_CALL)[0].id, id);
/// assert!(id.to_string().starts_with("hook#"));
/// assert!(registry.unregister_hook(PRE_TOOL_CALL, id));
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HookId(pub(crate) u64);

impl fmt::Display for HookId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "hook#{}", self.0)
    }
}

/// What happens when a hook panics.
///
/// ```
/// use hooks_core::{DispatchOutcome, FailureMode, HookOptions, HookRegistry, ToolCallHookContext, PRE_TOOL_CALL};
///
/// let registry = HookRegistry::new();
/// registry.register_hook_with(
///     PRE_TOOL_CALL,
///     HookOptions::new().name("approval").fail_closed(),
///     |_: &mut ToolCallHookContext| -> () { panic!("the approval service is down") },
/// )?;
/// let hook = &registry.get_hooks(PRE_TOOL_CALL)[0];
/// match hook.failure {
///     FailureMode::FailOpen => println!("{} is skipped if it panics", hook.name),
///     FailureMode::FailClosed => println!("{} blocks the call if it panics", hook.name),
/// }
/// // Its panic is contained and blocks the call.
/// let mut ctx = ToolCallHookContext::new("pay", Default::default());
/// assert!(matches!(registry.dispatch(PRE_TOOL_CALL, &mut ctx), DispatchOutcome::Aborted(_)));
/// assert_eq!(FailureMode::default(), FailureMode::FailOpen);
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum FailureMode {
    /// The panic is contained and the hook's decision dropped; later hooks
    /// run. The default.
    #[default]
    FailOpen,
    /// The panic is contained and treated as a refusal: at `PRE_TOOL_CALL`
    /// the call is blocked, at `POST_TOOL_CALL` the result is withheld, and
    /// at every other point the run is aborted (at `EXECUTION_END`, which
    /// cannot abort, the panic is only reported).
    FailClosed,
}

/// Which API or attribute registered a hook. All styles share one chain per
/// point; the style only decides how the hook's return value is read.
///
/// ```
/// use hooks_core::{HookRegistry, HookStyle, ToolCallHookContext, PRE_TOOL_CALL};
///
/// let registry = HookRegistry::new();
/// registry.register_hook(PRE_TOOL_CALL, |_: &mut ToolCallHookContext| {})?;
/// registry.register_before_tool_call_hook(|_: &mut ToolCallHookContext| true);
/// // One chain, two styles.
/// let styles: Vec<&str> = registry
///     .get_hooks(PRE_TOOL_CALL)
///     .iter()
///     .map(|hook| match hook.style {
///         HookStyle::On => "on",
///         HookStyle::BeforeToolCall => "before_tool_call",
///         _ => "other",
///     })
///     .collect();
/// assert_eq!(styles, ["on", "before_tool_call"]);
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HookStyle {
    /// `#[on(...)]` or `register_hook`.
    On,
    /// `#[before_tool_call]` or `register_before_tool_call_hook`.
    BeforeToolCall,
    /// `#[after_tool_call]` or `register_after_tool_call_hook`.
    AfterToolCall,
    /// `#[before_llm_call]` or `register_before_llm_call_hook`.
    BeforeLlmCall,
    /// `#[after_llm_call]` or `register_after_llm_call_hook`.
    AfterLlmCall,
}

/// Where a hook came from.
///
/// ```
/// use hooks_core::runtime::register_crew_hook;
/// use hooks_core::{HookOptions, HookOrigin, HookRegistry, HookStyle, StepContext, POST_STEP};
///
/// let registry = HookRegistry::new();
/// registry.register_hook(POST_STEP, |_: &mut StepContext| {})?;
/// register_crew_hook(&registry, POST_STEP, "research", HookStyle::On, HookOptions::new(), |_: &mut StepContext| {})?;
/// for hook in registry.get_hooks(POST_STEP) {
///     match &hook.origin {
///         HookOrigin::LinkTime { file, line, .. } => println!("#[on] at {file}:{line}"),
///         HookOrigin::Runtime => println!("registered by a call"),
///         HookOrigin::Crew { crew } => println!("belongs to crew {crew}"),
///     }
/// }
/// let origins: Vec<String> = registry.get_hooks(POST_STEP).iter().map(|h| h.origin.to_string()).collect();
/// assert_eq!(origins, ["registered at run time", "crew research"]);
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HookOrigin {
    /// An attribute on a free function, registered at link time.
    LinkTime {
        /// The module the function is in.
        module_path: &'static str,
        /// The source file.
        file: &'static str,
        /// The line of the attribute.
        line: u32,
        /// The column of the attribute.
        column: u32,
    },
    /// A `register_*` call at run time.
    Runtime,
    /// A hook of one crew (a `#[crew_base]` hook method, or a hook given
    /// to the crew's builder): it belongs to that crew only. Shown as
    /// `crew <name>`, or `crew` alone for a crew named `crew` (a runtime's
    /// crew given no name).
    Crew {
        /// The crew's name.
        crew: String,
    },
}

impl fmt::Display for HookOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HookOrigin::LinkTime { file, line, .. } => write!(f, "{file}:{line}"),
            HookOrigin::Runtime => f.write_str("registered at run time"),
            // A crew with no name of its own is called `crew`: said once.
            HookOrigin::Crew { crew } if crew == "crew" => f.write_str("crew"),
            HookOrigin::Crew { crew } => write!(f, "crew {crew}"),
        }
    }
}

/// A description of a registered hook, as `get_hooks` lists it.
///
/// ```
/// use hooks_core::{FailureMode, HookOptions, HookRegistry, InterceptionPoint, ToolCallHookContext, PRE_TOOL_CALL};
///
/// let registry = HookRegistry::new();
/// registry.register_hook_with(
///     PRE_TOOL_CALL,
///     HookOptions::new().name("mail-guard").tools(["Send Email"]).agents(["Assistant"]),
///     |_: &mut ToolCallHookContext| {},
/// )?;
/// let info = &registry.get_hooks(PRE_TOOL_CALL)[0];
/// assert_eq!(info.name, "mail-guard");
/// assert_eq!(info.point, InterceptionPoint::PRE_TOOL_CALL);
/// assert_eq!(info.tools, ["send_email"]);
/// assert_eq!(info.agents, ["Assistant"]);
/// assert_eq!((info.order, info.failure, info.timeout), (0, FailureMode::FailOpen, None));
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookInfo {
    /// The registration's id.
    pub id: HookId,
    /// The point the hook runs at.
    pub point: InterceptionPoint,
    /// The hook's name: the function's name for attributes
    /// (`Type::method` for crew hook methods), the name given in
    /// [`HookOptions`], a function's own name for the legacy `register_*`
    /// calls (`block_ping`, as the reference names it), or else the
    /// function's or closure's type name.
    pub name: String,
    /// Normalized tool names the hook is limited to (empty: every tool).
    pub tools: Vec<String>,
    /// Agent roles the hook is limited to (empty: every agent).
    pub agents: Vec<String>,
    /// Capabilities the hook is limited to (empty: every call): it runs
    /// for a call whose tool has any of them, as the tool's
    /// [`ToolAnnotations`](crate::ToolAnnotations) read, and never for a
    /// call without a tool.
    pub capabilities: Capabilities,
    /// Where the hook came from.
    pub origin: HookOrigin,
    /// The `order = N` argument of a link-time hook (0 otherwise).
    pub order: i32,
    /// What a panic of this hook means.
    pub failure: FailureMode,
    /// How long this hook may run when it is `async` (`None`: its crew's
    /// hook timeout, [`DEFAULT_HOOK_TIMEOUT`](crate::DEFAULT_HOOK_TIMEOUT)
    /// outside a crew). Running out of time counts as a panic of the hook.
    pub timeout: Option<std::time::Duration>,
    /// How it was registered.
    pub style: HookStyle,
    /// Whether crews leave this hook's filters unchecked: set with
    /// [`HookOptions::unchecked_filters`] for filters that name tools or
    /// roles of crews built later on purpose. Link-time hooks are checked.
    pub unchecked_filters: bool,
}

impl HookInfo {
    /// Whether the hook's capability filter lets it run for a call whose
    /// tool has `tool` (`None`: the call has no tool, which a capability
    /// filter never admits). The one reading of the filter, for dispatch
    /// and `explain` alike.
    #[inline]
    pub(crate) fn admits_capabilities(&self, tool: Option<Capabilities>) -> bool {
        self.capabilities.is_empty() || tool.is_some_and(|tool| tool.intersects(self.capabilities))
    }
}

/// Options for a hook registered at run time.
///
/// ```
/// use hooks_core::{HookOptions, FailureMode};
/// let options = HookOptions::new()
///     .name("approval-gate")
///     .tools(["send_email", "Make Purchase"])
///     .agents(["Assistant"])
///     .fail_closed();
/// # let _ = options;
/// ```
#[derive(Debug, Clone, Default)]
pub struct HookOptions {
    pub(crate) name: Option<String>,
    pub(crate) tools: Vec<String>,
    pub(crate) agents: Vec<String>,
    pub(crate) capabilities: Capabilities,
    pub(crate) failure: FailureMode,
    pub(crate) timeout: Option<std::time::Duration>,
    pub(crate) order: i32,
    pub(crate) unchecked_filters: bool,
}

impl HookOptions {
    /// No filters, fail-open, named after the function's type.
    pub fn new() -> Self {
        HookOptions::default()
    }

    /// The name `get_hooks`, `explain` and telemetry show.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Limits the hook to these tools (normalized like tool names). Only
    /// the tool-call points take a tool filter: registering such a hook
    /// elsewhere is refused with [`RegisterError::FilterDoesNotApply`](crate::RegisterError::FilterDoesNotApply).
    pub fn tools<I, S>(mut self, tools: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.tools = tools
            .into_iter()
            .map(|t| normalize_tool_name(t.as_ref()))
            .collect();
        self
    }

    /// Limits the hook to agents with these roles (matched exactly). The
    /// step, model-call and tool-call points take an agent filter.
    pub fn agents<I, S>(mut self, agents: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.agents = agents.into_iter().map(Into::into).collect();
        self
    }

    /// Limits the hook to calls whose tool has any of these capabilities,
    /// as its [`ToolAnnotations`](crate::ToolAnnotations) read (a tool
    /// that declares nothing counts as destructive and open-world, the
    /// MCP defaults). A call without a tool (the model named a tool the
    /// agent does not have) never matches. Combined with the other
    /// filters, all must match. Only the tool-call points take a
    /// capability filter: registering such a hook elsewhere is refused
    /// with [`RegisterError::FilterDoesNotApply`](crate::RegisterError::FilterDoesNotApply).
    /// An empty list means no filter.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use hooks_core::{
    ///     Capability, HookAborted, HookOptions, HookRegistry, ToolAnnotations, ToolCallHookContext,
    ///     ToolInfo, PRE_TOOL_CALL,
    /// };
    /// use serde_json::Value;
    ///
    /// struct Declared(&'static str, ToolAnnotations, Value);
    /// impl ToolInfo for Declared {
    ///     fn name(&self) -> &str { self.0 }
    ///     fn description(&self) -> &str { "" }
    ///     fn args_schema(&self) -> &Value { &self.2 }
    ///     fn annotations(&self) -> &ToolAnnotations { &self.1 }
    /// }
    ///
    /// let registry = HookRegistry::new();
    /// registry.register_hook_with(
    ///     PRE_TOOL_CALL,
    ///     HookOptions::new().name("no-destruction").capabilities([Capability::Destructive]),
    ///     |_: &mut ToolCallHookContext| -> Result<(), HookAborted> { Err("not today".into()) },
    /// )?;
    ///
    /// let reader = Declared("read_file", ToolAnnotations::new().read_only(true), Value::Null);
    /// let mut read = ToolCallHookContext::new("read_file", Default::default()).with_tool(Arc::new(reader));
    /// assert!(registry.dispatch_pre(&mut read).aborted().is_none());
    ///
    /// // Declares nothing: may be destructive.
    /// let shell = Declared("run_shell", ToolAnnotations::new(), Value::Null);
    /// let mut run = ToolCallHookContext::new("run_shell", Default::default()).with_tool(Arc::new(shell));
    /// assert!(registry.dispatch_pre(&mut run).aborted().is_some());
    /// # Ok::<(), hooks_core::RegisterError>(())
    /// ```
    pub fn capabilities(mut self, capabilities: impl IntoIterator<Item = Capability>) -> Self {
        self.capabilities = capabilities.into_iter().collect();
        self
    }

    /// Makes a panic of this hook a refusal (see [`FailureMode::FailClosed`]).
    pub fn fail_closed(mut self) -> Self {
        self.failure = FailureMode::FailClosed;
        self
    }

    /// Gives this hook, when it is `async`, its own time limit instead of
    /// the crew's hook timeout ([`DEFAULT_HOOK_TIMEOUT`](crate::DEFAULT_HOOK_TIMEOUT)
    /// unless the crew sets one). A hook still running after it is cut
    /// short and counts as a panic of the hook: fail-open, its effect is
    /// dropped; fail-closed, it refuses. Time spent waiting for a person's
    /// answer in `request_human_input` does not count, and a hook cut short
    /// after it asked a person refuses whatever its failure mode.
    ///
    /// The limit is kept by an awaiting dispatch on a tokio runtime (as in
    /// every crew); a synchronous dispatch that drives an `async` hook on
    /// its own thread waits for it.
    ///
    /// ```
    /// use std::time::Duration;
    /// use hooks_core::{HookAborted, HookOptions, HookRegistry, PRE_TOOL_CALL, ToolCallHookContext};
    ///
    /// async fn never_answers(_: &mut ToolCallHookContext) -> Result<(), HookAborted> {
    ///     std::future::pending().await
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), hooks_core::RegisterError> {
    /// let registry = HookRegistry::new();
    /// let options = HookOptions::new().timeout(Duration::from_millis(20)).fail_closed();
    /// registry.register_async_hook_with(PRE_TOOL_CALL, options, never_answers)?;
    ///
    /// let mut ctx = ToolCallHookContext::new("send_email", Default::default());
    /// let call = registry.dispatcher().begin_call(&[PRE_TOOL_CALL.into()]);
    /// let outcome = call.dispatch_async(PRE_TOOL_CALL, &mut ctx).await;
    /// assert!(outcome.aborted().is_some_and(|abort| abort.reason.contains("timed out")));
    /// # Ok(())
    /// # }
    /// ```
    pub fn timeout(mut self, timeout: std::time::Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Places the hook among its crew's own hooks: a crew's hooks run by
    /// `order` (default 0), then in registration order, whether given to
    /// its builder (`hook_with`, `async_hook_with`; `policies` take 0) or
    /// written as `#[crew_base]` methods. Link-time hooks are sorted by it
    /// too (`#[on(.., order = N)]`). A hook registered at run time outside
    /// a crew runs in registration order, and a warning says that the
    /// `order` given to it has no effect.
    ///
    /// ```
    /// use hooks_core::runtime::register_crew_hook;
    /// use hooks_core::{HookOptions, HookRegistry, HookStyle, ToolCallHookContext, PRE_TOOL_CALL};
    ///
    /// let crew = HookRegistry::new();
    /// let noop = |_: &mut ToolCallHookContext| {};
    /// register_crew_hook(&crew, PRE_TOOL_CALL, "desk", HookStyle::On, HookOptions::new().name("log"), noop)?;
    /// register_crew_hook(&crew, PRE_TOOL_CALL, "desk", HookStyle::On, HookOptions::new().name("budget").order(-1), noop)?;
    /// let names: Vec<String> = crew.get_hooks(PRE_TOOL_CALL).into_iter().map(|h| h.name).collect();
    /// assert_eq!(names, ["budget", "log"]);
    /// # Ok::<(), hooks_core::RegisterError>(())
    /// ```
    pub fn order(mut self, order: i32) -> Self {
        self.order = order;
        self
    }

    /// Leaves this hook's `tools`/`agents` filters out of the crews'
    /// misspelled-filter check: for a filter that names, on purpose, tools
    /// or roles of a crew built only after another crew's first kickoff
    /// (or of no crew at all). Filters are checked by default.
    ///
    /// ```
    /// use hooks_core::{HookOptions, HookRegistry, PRE_TOOL_CALL, ToolCallHookContext};
    ///
    /// let registry = HookRegistry::new();
    /// registry.register_hook_with(
    ///     PRE_TOOL_CALL,
    ///     HookOptions::new().tools(["deploy_to_production"]).unchecked_filters(),
    ///     |_: &mut ToolCallHookContext| {},
    /// )?;
    /// assert!(registry.get_hooks(PRE_TOOL_CALL)[0].unchecked_filters);
    /// # Ok::<(), hooks_core::RegisterError>(())
    /// ```
    pub fn unchecked_filters(mut self) -> Self {
        self.unchecked_filters = true;
        self
    }
}

/// A synchronous hook, adapted to its point's decision.
pub(crate) type SyncHookFn<P> =
    dyn Fn(&mut <P as Point>::Context) -> Decision<<P as Point>::Replacement> + Send + Sync;

/// The future of an `async` hook: boxed, `Send`, borrowing the context
/// for as long as it runs.
///
/// Closures registered with
/// [`register_async_hook`](crate::HookRegistry::register_async_hook)
/// return one (see [`async_hook`](crate::async_hook)).
///
/// ```
/// use hooks_core::{HookFuture, HookRegistry, StepContext, StepKind, POST_STEP};
///
/// // A hook whose boxed future borrows the context for as long as it runs.
/// fn review(ctx: &mut StepContext) -> HookFuture<'_, Option<String>> {
///     Box::pin(async move { Some(format!("{} (reviewed)", ctx.payload)) })
/// }
/// let registry = HookRegistry::new();
/// registry.register_async_hook(POST_STEP, review)?;
/// let mut ctx = StepContext::new(StepKind::Task, "draft", "text");
/// registry.dispatch(POST_STEP, &mut ctx);
/// assert_eq!(ctx.payload, "text (reviewed)");
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
pub type HookFuture<'c, R> = std::pin::Pin<Box<dyn std::future::Future<Output = R> + Send + 'c>>;

/// An asynchronous hook, adapted to its point's decision.
pub(crate) type AsyncHookCall<P> = dyn for<'c> Fn(&'c mut <P as Point>::Context) -> HookFuture<'c, Decision<<P as Point>::Replacement>>
    + Send
    + Sync;

/// The callable of a link-time `async fn` hook.
pub(crate) type StaticAsyncFn<P> =
    for<'c> fn(
        &'c mut <P as Point>::Context,
    ) -> HookFuture<'c, Decision<<P as Point>::Replacement>>;

/// The callable of a hook. Link-time hooks are plain function pointers (no
/// allocation, one indirect call); run-time hooks are boxed closures (the
/// entry itself is shared, so a `Box` saves the `Arc`'s offset arithmetic
/// on every call). An `async` hook returns a boxed future: its one
/// allocation per run, paid only when it runs.
pub(crate) enum HookCall<P: Point> {
    Static(fn(&mut P::Context) -> Decision<P::Replacement>),
    Shared(Arc<SyncHookFn<P>>),
    StaticAsync(StaticAsyncFn<P>),
    SharedAsync(Arc<AsyncHookCall<P>>),
}

// By hand: a derive would ask `P: Clone`.
impl<P: Point> Clone for HookCall<P> {
    fn clone(&self) -> Self {
        match self {
            HookCall::Static(call) => HookCall::Static(*call),
            HookCall::Shared(call) => HookCall::Shared(Arc::clone(call)),
            HookCall::StaticAsync(call) => HookCall::StaticAsync(*call),
            HookCall::SharedAsync(call) => HookCall::SharedAsync(Arc::clone(call)),
        }
    }
}

/// A hook's callable, as a chain walk meets it.
pub(crate) enum Invocation<'c, R> {
    /// A synchronous hook ran: its decision.
    Done(Decision<R>),
    /// An `async` hook started: its future.
    Pending(HookFuture<'c, Decision<R>>),
}

impl<P: Point> HookCall<P> {
    /// Whether the hook is `async`.
    #[inline]
    pub(crate) fn is_async(&self) -> bool {
        matches!(self, HookCall::StaticAsync(_) | HookCall::SharedAsync(_))
    }

    /// Runs the hook to its decision on this thread: a synchronous hook
    /// inline, an `async` one driven to completion here (the synchronous
    /// dispatch's way; the awaiting dispatch uses [`invoke`](Self::invoke)).
    #[inline(always)]
    pub(crate) fn call(&self, ctx: &mut P::Context) -> Decision<P::Replacement> {
        match self {
            HookCall::Static(call) => call(ctx),
            HookCall::Shared(call) => call(ctx),
            HookCall::StaticAsync(_) | HookCall::SharedAsync(_) => self.call_blocking(ctx),
        }
    }

    #[cold]
    #[inline(never)]
    fn call_blocking(&self, ctx: &mut P::Context) -> Decision<P::Replacement> {
        match self.invoke(ctx) {
            Invocation::Done(decision) => decision,
            Invocation::Pending(future) => futures_executor::block_on(future),
        }
    }

    /// Runs a synchronous hook, or starts an `async` one.
    #[inline(always)]
    pub(crate) fn invoke<'c>(&self, ctx: &'c mut P::Context) -> Invocation<'c, P::Replacement> {
        match self {
            HookCall::Static(call) => Invocation::Done(call(ctx)),
            HookCall::Shared(call) => Invocation::Done(call(ctx)),
            HookCall::StaticAsync(call) => Invocation::Pending(call(ctx)),
            HookCall::SharedAsync(call) => Invocation::Pending(call(ctx)),
        }
    }
}

/// An `async` hook function: what
/// [`register_async_hook`](crate::HookRegistry::register_async_hook)
/// takes. Implemented by every `async fn(&mut Context) -> R` and every
/// closure that returns a [`HookFuture`] (see [`async_hook`](crate::async_hook)).
///
/// ```
/// use hooks_core::{AsyncHookFn, HookAborted, ToolCallHookContext};
///
/// async fn gate(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
///     if ctx.tool_name() == "drop_table" {
///         return Err("no DDL".into());
///     }
///     Ok(())
/// }
/// fn takes<F: for<'c> AsyncHookFn<'c, ToolCallHookContext, Result<(), HookAborted>>>(_: F) {}
/// takes(gate);
/// ```
pub trait AsyncHookFn<'c, C: 'c, R>: Send + Sync + 'static {
    /// The hook's future on one context.
    type Future: std::future::Future<Output = R> + Send + 'c;

    /// Starts the hook on `ctx`.
    fn start(&self, ctx: &'c mut C) -> Self::Future;
}

impl<'c, C, R, F, Fut> AsyncHookFn<'c, C, R> for F
where
    C: 'c,
    F: Fn(&'c mut C) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = R> + Send + 'c,
{
    type Future = Fut;

    #[inline]
    fn start(&self, ctx: &'c mut C) -> Fut {
        self(ctx)
    }
}

/// Gives a closure the signature of an `async` hook, so that the borrow
/// of its context can last as long as its future: wrap a closure in it to
/// register it with
/// [`register_async_hook`](crate::HookRegistry::register_async_hook).
/// (An `async fn` needs no wrapping.)
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use hooks_core::{async_hook, HookRegistry, ToolCallHookContext, PRE_TOOL_CALL};
///
/// let registry = HookRegistry::new();
/// let seen = Arc::new(AtomicUsize::new(0));
/// let counter = Arc::clone(&seen);
/// registry.register_async_hook(
///     PRE_TOOL_CALL,
///     async_hook(move |ctx: &mut ToolCallHookContext| {
///         let counter = Arc::clone(&counter);
///         Box::pin(async move {
///             // Await a chat reply, a rate-limit permit, a database...
///             counter.fetch_add(1, Ordering::Relaxed);
///             ctx.tool_input.insert("checked".into(), true.into());
///         })
///     }),
/// )?;
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
pub fn async_hook<C, R, F>(hook: F) -> F
where
    F: for<'c> Fn(&'c mut C) -> HookFuture<'c, R>,
{
    hook
}

/// One hook as a chain holds it.
pub(crate) struct HookEntry<P: Point> {
    pub(crate) info: HookInfo,
    /// Position in the global order: link-time hooks by their sorted index,
    /// run-time hooks by a process-wide sequence above every index.
    pub(crate) rank: u64,
    /// The function's type, for unregistering by function (only for
    /// zero-sized callables, whose type names exactly one function).
    pub(crate) type_id: Option<TypeId>,
    /// The link-time record this entry came from, for `restore_static_hooks`.
    pub(crate) static_index: Option<usize>,
    pub(crate) call: HookCall<P>,
    /// Whether an `agents` or `capabilities` filter must be read for each
    /// call (the `tools` filter is settled by the chain's index): one
    /// flag, so that an unfiltered hook costs one test on the hot path.
    pub(crate) call_filtered: bool,
}

impl<P: Point> HookEntry<P> {
    /// The same hook in another place of its chain (see
    /// [`Chain::insert`](crate::chain::Chain)): its id and everything else
    /// kept.
    pub(crate) fn with_rank(&self, rank: u64) -> Self {
        HookEntry {
            info: self.info.clone(),
            rank,
            type_id: self.type_id,
            static_index: self.static_index,
            call: self.call.clone(),
            call_filtered: self.call_filtered,
        }
    }

    /// An entry for `info`, with its per-call filter flag derived.
    pub(crate) fn new(
        info: HookInfo,
        rank: u64,
        type_id: Option<TypeId>,
        static_index: Option<usize>,
        call: HookCall<P>,
    ) -> Self {
        let call_filtered = !info.agents.is_empty() || !info.capabilities.is_empty();
        HookEntry {
            info,
            rank,
            type_id,
            static_index,
            call,
            call_filtered,
        }
    }

    /// Whether the hook's `agents` and `capabilities` filters let it run
    /// for this call (virtual calls on the context, made only for a hook
    /// with such a filter: see [`call_filtered`](Self::call_filtered)).
    #[inline]
    pub(crate) fn call_matches<C: HookContext>(&self, ctx: &C) -> bool {
        (self.info.agents.is_empty() || self.agent_matches(ctx.call_agent_role()))
            && (self.info.capabilities.is_empty()
                || self.capabilities_match(ctx.call_tool_capabilities()))
    }

    /// Whether the hook's agent filter lets it run for this role.
    #[inline]
    pub(crate) fn agent_matches(&self, role: Option<&str>) -> bool {
        match role {
            Some(role) => self.info.agents.is_empty() || self.info.agents.iter().any(|a| a == role),
            // A call without an agent passes an agents filter.
            None => true,
        }
    }

    /// Whether the hook's capability filter lets it run for a call whose
    /// tool has `tool` (`None`: the call has no tool, which a capability
    /// filter never admits).
    #[inline]
    pub(crate) fn capabilities_match(&self, tool: Option<Capabilities>) -> bool {
        self.info.admits_capabilities(tool)
    }

    /// Whether the hook's tool filter lets it run for this tool.
    #[inline]
    pub(crate) fn tool_matches(&self, tool: Option<&str>) -> bool {
        match tool {
            Some(tool) => self.info.tools.is_empty() || self.info.tools.iter().any(|t| t == tool),
            None => true,
        }
    }
}

/// Something that names registered hooks for `unregister_*`: a [`HookId`],
/// or the hook function itself.
///
/// A function (or a closure that captures nothing) names every registration
/// of that function at the point. A closure that captures state has no
/// identity beyond its registration: unregister it by its id.
///
/// ```
/// use hooks_core::{HookRegistry, ToolCallHookContext, PRE_TOOL_CALL};
///
/// fn audit(ctx: &mut ToolCallHookContext) {
///     eprintln!("tool call: {}", ctx.tool_name());
/// }
/// let registry = HookRegistry::new();
/// let limit = 3;
/// let id = registry.register_hook(PRE_TOOL_CALL, move |ctx: &mut ToolCallHookContext| {
///     ctx.tool_input.insert("limit".into(), limit.into());
/// })?;
/// registry.register_hook(PRE_TOOL_CALL, audit)?;
///
/// // A capturing closure is named by its id; a function by itself.
/// assert!(registry.unregister_hook(PRE_TOOL_CALL, id));
/// assert!(registry.unregister_hook(PRE_TOOL_CALL, audit));
/// assert!(registry.is_empty());
/// # Ok::<(), hooks_core::RegisterError>(())
/// ```
pub trait HookHandle<Marker> {
    /// The key the registry matches against.
    #[doc(hidden)]
    fn hook_key(&self) -> HookKey;
}

#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookKey {
    Id(HookId),
    Function(TypeId),
    Unnamed,
}

impl HookKey {
    pub(crate) fn selects<P: Point>(&self, entry: &HookEntry<P>) -> bool {
        match *self {
            HookKey::Id(id) => entry.info.id == id,
            HookKey::Function(type_id) => entry.type_id == Some(type_id),
            HookKey::Unnamed => false,
        }
    }
}

/// Marker for [`HookHandle`] on a [`HookId`].
#[doc(hidden)]
pub enum ById {}
/// Marker for [`HookHandle`] on a function taking `&mut Context`.
#[doc(hidden)]
pub struct ByMutFn<C, R>(std::marker::PhantomData<(C, R)>);
/// Marker for [`HookHandle`] on a function taking `&Context`.
#[doc(hidden)]
pub struct ByRefFn<C, R>(std::marker::PhantomData<(C, R)>);

impl HookHandle<ById> for HookId {
    fn hook_key(&self) -> HookKey {
        HookKey::Id(*self)
    }
}

pub(crate) fn function_key<F: 'static>() -> Option<TypeId> {
    // Only a zero-sized callable (a fn item, a capture-less closure) is
    // fully named by its type; a fn pointer or a capturing closure is not.
    (std::mem::size_of::<F>() == 0).then(TypeId::of::<F>)
}

impl<F, C, R> HookHandle<ByMutFn<C, R>> for F
where
    F: Fn(&mut C) -> R + 'static,
{
    fn hook_key(&self) -> HookKey {
        function_key::<F>().map_or(HookKey::Unnamed, HookKey::Function)
    }
}

/// Marker for [`HookHandle`] on an `async fn` taking `&mut Context`.
#[doc(hidden)]
pub struct ByAsyncFn<C, R>(std::marker::PhantomData<(C, R)>);

impl<F, C, R> HookHandle<ByAsyncFn<C, R>> for F
where
    F: for<'c> AsyncHookFn<'c, C, R>,
    C: 'static,
{
    fn hook_key(&self) -> HookKey {
        function_key::<F>().map_or(HookKey::Unnamed, HookKey::Function)
    }
}

impl<F, C, R> HookHandle<ByRefFn<C, R>> for F
where
    F: Fn(&C) -> R + 'static,
{
    fn hook_key(&self) -> HookKey {
        function_key::<F>().map_or(HookKey::Unnamed, HookKey::Function)
    }
}
