//! Tools: what an agent can call, with a name, a description and a JSON
//! schema of their arguments.
//!
//! A tool is only ever run by the executor, through the hook chains: there
//! is no public way to call one. Its call function is private to this crate.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use hooks_core::runtime::ToolOutput;
use hooks_core::{RawToolResult, ToolAnnotations, ToolCallStatus, ToolInfo, normalize_tool_name};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::llm::ToolDefinition;
use crate::placement::{Placement, SyncPlacement};

mod current_call;
mod effect;

pub use current_call::CurrentCall;
pub use effect::{IdempotencyKey, ReconcileError, Reconciled, Reconciler};

/// Why a tool produced no result. The executor turns it into the text
/// `Error executing tool: <message>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ToolFailure {
    /// The arguments did not deserialize into the tool's argument type.
    InvalidArguments(String),
    /// The tool returned an error.
    Failed(String),
    /// The tool's result could not be turned into JSON.
    Unrenderable(String),
    /// The tool reported an error in a result of its own (an MCP result
    /// flagged `isError`): POST hooks get that result as the raw result.
    #[cfg(feature = "mcp")]
    Reported {
        /// The error, as the agent is told it.
        message: String,
        /// The tool's whole result.
        result: Value,
    },
}

impl ToolFailure {
    /// The tool's own result, for a failure that came with one.
    pub(crate) fn into_result(self) -> Option<Value> {
        match self {
            #[cfg(feature = "mcp")]
            ToolFailure::Reported { result, .. } => Some(result),
            _ => None,
        }
    }
}

impl fmt::Display for ToolFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ToolFailure::InvalidArguments(message) => write!(f, "invalid arguments: {message}"),
            ToolFailure::Failed(message) => f.write_str(message),
            ToolFailure::Unrenderable(message) => {
                write!(f, "the result could not be rendered as JSON: {message}")
            }
            #[cfg(feature = "mcp")]
            ToolFailure::Reported { message, .. } => f.write_str(message),
        }
    }
}

/// What a tool's result comes to.
pub(crate) type ToolResult = Result<ToolOutput, ToolFailure>;

/// How one call of a tool runs, once its arguments are read.
pub(crate) enum ToolRun {
    /// Already decided (arguments that do not fit the tool).
    Ready(ToolResult),
    /// An async tool's future: awaited on the runtime.
    Async(Pin<Box<dyn Future<Output = ToolResult> + Send>>),
    /// A synchronous tool's body: run on a thread of the runtime's
    /// blocking pool, never on its workers.
    Blocking(Box<dyn FnOnce() -> ToolResult + Send>),
}

type Invoke = dyn Fn(&Map<String, Value>) -> ToolRun + Send + Sync;

#[derive(Clone)]
struct ToolInner {
    name: String,
    /// The name as given (by the program, or by an MCP server), before
    /// normalization: what look-alike checks read.
    spelled_name: String,
    description: String,
    parameters: Value,
    invoke: Arc<Invoke>,
    timeout: Option<Duration>,
    /// The annotations as given ([`Tool::with_annotations`], or by the MCP
    /// server).
    declared: ToolAnnotations,
    /// How the tool is read: [`read_as`] of `declared`.
    annotations: ToolAnnotations,
    mcp_server: Option<Arc<str>>,
    placement: Placement,
    /// Tells whether an interrupted call's effect happened
    /// ([`Tool::reconcile`]).
    reconciler: Option<Reconciler>,
}

/// How a tool's declared annotations are read. An MCP server's tool keeps
/// MCP's defaults (SPEC §9: what it does not say, it may do, the open
/// world included). A local tool is the program's own code, whose reach
/// its author knows: unless it says `open_world(true)`, it is
/// closed-world. Its other defaults stay MCP's (possibly destructive, not
/// idempotent), so a guard on `destructive` still fails closed.
fn read_as(declared: &ToolAnnotations, mcp_server: Option<&str>) -> ToolAnnotations {
    let mut annotations = declared.clone();
    if mcp_server.is_none() && annotations.open_world.is_none() {
        annotations.open_world = Some(false);
    }
    annotations
}

/// Marks a tool function's result (`Result<_, _>`): the function runs on
/// the runtime's blocking pool.
#[doc(hidden)]
pub struct Blocking<E>(PhantomData<fn() -> E>);

/// Marks an async tool function's future (of a `Result<_, _>`).
#[doc(hidden)]
pub struct Awaited<E>(PhantomData<fn() -> E>);

/// What a tool function returns: its result (a synchronous function, run
/// on the runtime's blocking pool so that it never stalls the runtime), or
/// a future of it (an async function, awaited). [`Tool::typed`] and
/// [`Tool::dynamic`] take either:
///
/// ```
/// use crew_runtime::Tool;
/// use serde_json::json;
///
/// let blocking = Tool::dynamic("read", "Reads a file", json!({"type": "object"}), |args| {
///     std::fs::read_to_string(args["path"].as_str().unwrap_or_default()).map(Into::into)
/// });
/// let awaited = Tool::dynamic("fetch", "Fetches a page", json!({"type": "object"}), |args| async move {
///     Ok::<_, String>(json!({"url": args["url"]}))
/// });
/// # let _ = (blocking, awaited);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not what a tool function returns",
    label = "a tool function returns `Result<Out, E>`, or a future of one",
    note = "write `|args: MyArgs| Ok::<_, String>(...)` or `|args: MyArgs| async move {{ Ok::<_, String>(...) }}`"
)]
pub trait ToolOutcome<Out, Marker>: Sized {
    /// The call, deferred: where and how it runs.
    #[doc(hidden)]
    fn prepare(call: impl FnOnce() -> Self + Send + 'static) -> Prepared<Out>;
}

/// A tool function's call, ready to run.
#[doc(hidden)]
pub enum Prepared<Out> {
    /// Runs on the blocking pool.
    Blocking(Box<dyn FnOnce() -> Result<Out, String> + Send>),
    /// Awaited.
    Async(Pin<Box<dyn Future<Output = Result<Out, String>> + Send>>),
}

impl<Out, E> ToolOutcome<Out, Blocking<E>> for Result<Out, E>
where
    E: fmt::Display,
{
    fn prepare(call: impl FnOnce() -> Self + Send + 'static) -> Prepared<Out> {
        Prepared::Blocking(Box::new(move || call().map_err(|error| error.to_string())))
    }
}

impl<Fut, Out, E> ToolOutcome<Out, Awaited<E>> for Fut
where
    Fut: Future<Output = Result<Out, E>> + Send + 'static,
    E: fmt::Display,
{
    fn prepare(call: impl FnOnce() -> Self + Send + 'static) -> Prepared<Out> {
        Prepared::Async(Box::pin(async move {
            call().await.map_err(|error| error.to_string())
        }))
    }
}

/// Defers `function(args)` as its result type says.
fn prepare<F, Args, R, Out, M>(function: &Arc<F>, args: Args) -> Prepared<Out>
where
    F: Fn(Args) -> R + Send + Sync + 'static,
    Args: Send + 'static,
    R: ToolOutcome<Out, M>,
{
    let function = Arc::clone(function);
    R::prepare(move || function(args))
}

/// A tool an agent can call. Cloning is cheap (the tool is shared).
///
/// Make one from a function over a typed argument struct with
/// [`Tool::typed`], or from a JSON function with [`Tool::dynamic`] for tools
/// discovered at run time.
///
/// The name is normalized the way hook filters are (`"Web Search"` becomes
/// `web_search`), so `tools = ["Web Search"]` and the tool always agree.
///
/// Hooks reach the tool as `ctx.tool_as::<Tool>()`.
///
/// A tool only runs inside a crew, each call through the hook chains: there
/// is no method to call one directly.
///
/// ```compile_fail,E0624
/// use crew_runtime::Tool;
/// let tool = Tool::dynamic("t", "", serde_json::json!({}), |v| Ok::<_, String>(v));
/// tool.invoke(&Default::default()); // private: only the executor runs tools
/// ```
#[derive(Clone)]
pub struct Tool {
    inner: Arc<ToolInner>,
}

impl Tool {
    /// A tool from a function over typed arguments.
    ///
    /// The arguments' JSON schema (what the model is told) is derived from
    /// `Args` with `schemars`. The model's arguments are checked by
    /// deserializing them into `Args`: when that fails the tool does not
    /// run and the agent sees `Error executing tool: invalid arguments: …`.
    /// Keys `Args` does not declare are ignored, so a PRE hook can stash a
    /// value in `tool_input` for a POST hook.
    ///
    /// The result is shown to the agent as text when its JSON form is a
    /// string (a `String`, say), and as compact JSON otherwise; see
    /// [`TypedTool::with_formatter`] for a formatter of your own. POST hooks
    /// also get the typed value through `raw_tool_result.downcast_ref::<Out>()`.
    ///
    /// An `Err(e)` from the function reaches the agent as
    /// `Error executing tool: <e>`, and the run goes on.
    ///
    /// What it returns goes as is wherever a tool goes
    /// (`Agent::builder(..).tool(..)`, `.tools([..])`), as
    /// [`Tool::dynamic`]'s does: no `.build()` needed. `.into()` (or
    /// `.build()`) gives the [`Tool`] itself, to read its name or to put it
    /// in one list with dynamic tools.
    ///
    /// ```
    /// use crew_runtime::Tool;
    /// use crew_runtime::schemars::JsonSchema;
    /// use serde::Deserialize;
    ///
    /// #[derive(Deserialize, JsonSchema)]
    /// #[schemars(crate = "crew_runtime::schemars")]
    /// struct SearchArgs {
    ///     /// What to look for.
    ///     query: String,
    /// }
    ///
    /// let search: Tool = Tool::typed("Web Search", "Searches the web", |args: SearchArgs| {
    ///     Ok::<_, std::convert::Infallible>(format!("results for {}", args.query))
    /// })
    /// .into();
    /// assert_eq!(search.name(), "web_search");
    /// assert_eq!(search.parameters()["required"][0], "query");
    /// ```
    pub fn typed<Args, Out, R, M>(
        name: impl AsRef<str>,
        description: impl Into<String>,
        function: impl Fn(Args) -> R + Send + Sync + 'static,
    ) -> TypedTool<Args, Out>
    where
        Args: DeserializeOwned + schemars::JsonSchema + Send + 'static,
        Out: Serialize + Send + Sync + 'static,
        R: ToolOutcome<Out, M>,
    {
        let function = Arc::new(function);
        TypedTool {
            spelled_name: name.as_ref().to_owned(),
            description: description.into(),
            body: Arc::new(move |args| prepare(&function, args)),
            formatter: None,
            timeout: None,
            annotations: ToolAnnotations::new(),
            placement: SyncPlacement::default(),
            reconciler: None,
            args: PhantomData,
        }
    }

    /// A tool whose arguments and result are plain JSON: for tools
    /// discovered at run time (an MCP server, a plugin).
    ///
    /// `parameters` is the JSON schema the model is told (an object
    /// schema). The function receives the arguments as a JSON object, after
    /// the PRE hooks, and may be synchronous or async (see [`ToolOutcome`]). Its
    /// result is shown as text when it is a JSON string, and as compact
    /// JSON otherwise.
    ///
    /// ```
    /// use crew_runtime::Tool;
    /// use serde_json::json;
    ///
    /// let lookup = Tool::dynamic("lookup", "Looks a key up", json!({"type": "object"}), |args| async move {
    ///     // An HTTP call, a database query...
    ///     Ok::<_, String>(json!({"found": args["key"]}))
    /// });
    /// assert_eq!(lookup.name(), "lookup");
    /// ```
    pub fn dynamic<R, M>(
        name: impl AsRef<str>,
        description: impl Into<String>,
        parameters: Value,
        function: impl Fn(Value) -> R + Send + Sync + 'static,
    ) -> Tool
    where
        R: ToolOutcome<Value, M>,
    {
        let function = Arc::new(function);
        let invoke = move |input: &Map<String, Value>| {
            let finish = |json: Result<Value, String>| {
                let mut json = json.map_err(ToolFailure::Failed)?;
                json.sort_all_objects();
                Ok(ToolOutput {
                    rendered: render_json(&json),
                    raw: RawToolResult::from_json(json),
                    status: ToolCallStatus::Ran,
                })
            };
            match prepare(&function, Value::Object(input.clone())) {
                Prepared::Blocking(run) => ToolRun::Blocking(Box::new(move || finish(run()))),
                Prepared::Async(running) => {
                    ToolRun::Async(Box::pin(async move { finish(running.await) }))
                }
            }
        };
        Tool::from_parts(
            name.as_ref().to_owned(),
            description.into(),
            parameters,
            Arc::new(invoke),
        )
    }

    /// A tool named `spelled_name` (normalized here).
    pub(crate) fn from_parts(
        spelled_name: String,
        description: String,
        parameters: Value,
        invoke: Arc<Invoke>,
    ) -> Tool {
        Tool {
            inner: Arc::new(ToolInner {
                name: normalize_tool_name(&spelled_name),
                spelled_name,
                description,
                parameters,
                invoke,
                timeout: None,
                declared: ToolAnnotations::new(),
                annotations: read_as(&ToolAnnotations::new(), None),
                mcp_server: None,
                placement: Placement::default(),
                reconciler: None,
            }),
        }
    }

    /// Gives up on a call of this tool after `timeout`: the agent sees
    /// `Error executing tool: timed out after …` and the run goes on. An
    /// async tool is cancelled (its future dropped); a synchronous one
    /// cannot be stopped, so it finishes on its thread and its result is
    /// dropped. Without it, the crew's
    /// [`tool_timeout`](crate::CrewBuilder::tool_timeout) applies.
    ///
    /// ```
    /// use std::time::Duration;
    /// use crew_runtime::Tool;
    /// use serde_json::json;
    ///
    /// let slow = Tool::dynamic("slow", "Takes its time", json!({"type": "object"}), |_| async {
    ///     Ok::<_, String>(json!("done"))
    /// })
    /// .with_timeout(Duration::from_secs(5));
    /// assert_eq!(slow.timeout(), Some(Duration::from_secs(5)));
    /// ```
    pub fn with_timeout(mut self, timeout: Duration) -> Tool {
        Arc::make_mut(&mut self.inner).timeout = Some(timeout);
        self
    }

    /// Declares what the tool does to its environment, as MCP tools do:
    /// hooks see it through `ctx.tool`, and filters, guards, policies
    /// (`resource.capabilities`), `explain`, the approval inbox and the
    /// audit trail read it. What a tool does not declare is read with MCP's
    /// defaults (possibly destructive, not idempotent; see
    /// [`ToolAnnotations`]), but for one: a local tool (made with
    /// [`Tool::dynamic`] or [`Tool::typed`]) is closed-world unless it
    /// declares `open_world(true)`. An MCP server's tool keeps MCP's
    /// open-world default.
    ///
    /// ```
    /// use crew_runtime::Tool;
    /// use hooks_core::{Capability, ToolAnnotations};
    /// use serde_json::json;
    ///
    /// let lookup = Tool::dynamic("lookup", "Looks a key up", json!({"type": "object"}), |args| async move {
    ///     Ok::<_, String>(json!({"found": args["key"]}))
    /// })
    /// .with_annotations(ToolAnnotations::new().read_only(true));
    /// let capabilities = lookup.annotations().capabilities();
    /// assert!(capabilities.contains(Capability::ReadOnly));
    /// // A local tool that does not say it reaches the open world does not.
    /// assert!(!capabilities.contains(Capability::OpenWorld));
    ///
    /// let fetch = Tool::dynamic("fetch", "Fetches a web page", json!({"type": "object"}), |_| async {
    ///     Ok::<_, String>(json!("<html>"))
    /// })
    /// .with_annotations(ToolAnnotations::new().read_only(true).open_world(true));
    /// assert!(fetch.annotations().capabilities().contains(Capability::OpenWorld));
    /// ```
    pub fn with_annotations(mut self, annotations: ToolAnnotations) -> Tool {
        let inner = Arc::make_mut(&mut self.inner);
        inner.annotations = read_as(&annotations, inner.mcp_server.as_deref());
        inner.declared = annotations;
        self
    }

    /// Declares the tool idempotent (a repeated call with the same
    /// arguments has no further effect): a shorthand for the `idempotent`
    /// annotation, the others kept as declared. Give it after
    /// [`Tool::with_annotations`], which replaces every annotation. A
    /// durable kickoff runs an idempotent tool's interrupted call again
    /// with the same idempotency key (see [`Tool::may_run_again`]).
    ///
    /// ```
    /// use crew_runtime::Tool;
    /// use serde_json::json;
    ///
    /// let set_flag = Tool::dynamic("set_flag", "Sets a flag", json!({"type": "object"}), |_| {
    ///     Ok::<_, String>(json!("set"))
    /// })
    /// .idempotent();
    /// assert!(set_flag.annotations().is_idempotent());
    /// assert!(set_flag.may_run_again());
    /// ```
    pub fn idempotent(self) -> Tool {
        let mut declared = self.inner.declared.clone();
        declared.idempotent = Some(true);
        self.with_annotations(declared)
    }

    /// Whether a call of this tool whose result was never recorded may
    /// simply run again (SPEC §13): the tool is read-only, or declared
    /// idempotent ([`Tool::idempotent`], MCP `idempotentHint: true`)
    /// without declaring itself destructive (`destructiveHint: true`
    /// contradicts it, and the call is not run again blind). A read-only
    /// tool that also says it is destructive is not read-only.
    ///
    /// ```
    /// use crew_runtime::Tool;
    /// use hooks_core::ToolAnnotations;
    /// use serde_json::json;
    ///
    /// let tool = Tool::dynamic("t", "", json!({"type": "object"}), |_| Ok::<_, String>(json!("ok")));
    /// assert!(!tool.may_run_again(), "nothing declared: it may have an effect each time");
    /// assert!(tool.clone().with_annotations(ToolAnnotations::new().read_only(true)).may_run_again());
    /// let overwrite = ToolAnnotations::new().idempotent(true).destructive(true);
    /// assert!(!tool.with_annotations(overwrite).may_run_again());
    /// ```
    pub fn may_run_again(&self) -> bool {
        let annotations = &self.inner.annotations;
        annotations.is_read_only()
            || (annotations.idempotent == Some(true) && annotations.destructive != Some(true))
    }

    /// Gives the tool a reconciler: for a call interrupted before its
    /// result was recorded, a durable kickoff asks it, with the call's
    /// idempotency key and arguments, whether the effect happened
    /// ([`Reconciled::Happened`], with the result if it can find it) or
    /// not ([`Reconciled::DidNotHappen`]: the call runs again), instead of
    /// asking a person. See [`Reconciler::new`] for what it may return.
    ///
    /// ```
    /// use crew_runtime::{Reconciled, Tool};
    /// use serde_json::json;
    ///
    /// let charge = Tool::dynamic("charge", "Charges a card", json!({"type": "object"}), |_| async {
    ///     Ok::<_, String>(json!({"charge": "ch_1"}))
    /// })
    /// .reconcile(|key, _args| async move {
    ///     // Ask the payments API for a charge made with `key`.
    ///     let found: Option<serde_json::Value> = None;
    ///     let _ = key;
    ///     Ok::<_, String>(match found {
    ///         Some(charge) => Reconciled::Happened { result: Some(charge) },
    ///         None => Reconciled::DidNotHappen,
    ///     })
    /// });
    /// assert!(charge.reconciler().is_some());
    /// ```
    pub fn reconcile<F, Fut, E>(self, reconcile: F) -> Tool
    where
        F: Fn(IdempotencyKey, Map<String, Value>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Reconciled, E>> + Send + 'static,
        E: fmt::Display,
    {
        self.with_reconciler(Reconciler::new(reconcile))
    }

    /// Gives the tool a reconciler already made (see [`Tool::reconcile`]).
    ///
    /// ```
    /// use crew_runtime::{Reconciled, Reconciler, Tool};
    /// use serde_json::json;
    ///
    /// let never = Reconciler::new(|_key, _args| async { Ok::<_, String>(Reconciled::DidNotHappen) });
    /// let tool = Tool::dynamic("t", "", json!({"type": "object"}), |_| Ok::<_, String>(json!("ok")))
    ///     .with_reconciler(never);
    /// assert!(tool.reconciler().is_some());
    /// ```
    pub fn with_reconciler(mut self, reconciler: Reconciler) -> Tool {
        Arc::make_mut(&mut self.inner).reconciler = Some(reconciler);
        self
    }

    /// The tool's reconciler, if it has one ([`Tool::reconcile`]).
    ///
    /// ```
    /// use crew_runtime::Tool;
    /// use serde_json::json;
    ///
    /// let tool = Tool::dynamic("t", "", json!({"type": "object"}), |_| Ok::<_, String>(json!("ok")));
    /// assert!(tool.reconciler().is_none());
    /// ```
    pub fn reconciler(&self) -> Option<&Reconciler> {
        self.inner.reconciler.as_ref()
    }

    /// Asks the tool's reconciler whether the effect of the call with
    /// `key` and `args` happened; `None` when the tool has no reconciler.
    /// A panic of the reconciler is contained and reported as
    /// [`ReconcileError::Panicked`].
    ///
    /// ```
    /// # #[cfg(feature = "durable")] {
    /// use crew_runtime::{IdempotencyKey, Reconciled, Tool};
    /// use serde_json::json;
    ///
    /// let tool = Tool::dynamic("t", "", json!({"type": "object"}), |_| Ok::<_, String>(json!("ok")))
    ///     .reconcile(|_key, args| async move {
    ///         Ok::<_, String>(Reconciled::Happened { result: args.get("id").cloned() })
    ///     });
    /// let key = IdempotencyKey::derive(b"kickoff", "call 1", 0);
    /// let args = json!({"id": 7}).as_object().cloned().unwrap_or_default();
    /// let answer = futures_executor::block_on(tool.reconciled(&key, &args));
    /// assert_eq!(answer, Some(Ok(Reconciled::Happened { result: Some(json!(7)) })));
    /// # }
    /// ```
    pub async fn reconciled(
        &self,
        key: &IdempotencyKey,
        args: &Map<String, Value>,
    ) -> Option<Result<Reconciled, ReconcileError>> {
        match &self.inner.reconciler {
            Some(reconciler) => Some(reconciler.ask(key, args).await),
            None => None,
        }
    }

    /// Says where the body of a synchronous tool runs: by default
    /// ([`SyncPlacement::Adaptive`]) on tokio's blocking pool until its
    /// calls prove quick, then in place; [`SyncPlacement::InPlace`] and
    /// [`SyncPlacement::BlockingPool`] fix it for those who know. Ignored
    /// for an async tool, which is always awaited where the call runs.
    ///
    /// ```
    /// use crew_runtime::{SyncPlacement, Tool};
    /// use serde_json::json;
    ///
    /// // Reads a file: may block on the disk, so never in place.
    /// let read = Tool::dynamic("read_file", "Reads a file", json!({"type": "object"}), |args| {
    ///     let path = args["path"].as_str().unwrap_or_default().to_owned();
    ///     std::fs::read_to_string(path).map(|text| json!(text)).map_err(|error| error.to_string())
    /// })
    /// .with_sync_placement(SyncPlacement::BlockingPool);
    /// assert_eq!(read.sync_placement(), SyncPlacement::BlockingPool);
    /// ```
    pub fn with_sync_placement(mut self, placement: SyncPlacement) -> Tool {
        Arc::make_mut(&mut self.inner).placement.setting = placement;
        self
    }

    /// Where the body of a synchronous tool runs ([`Tool::with_sync_placement`]).
    pub fn sync_placement(&self) -> SyncPlacement {
        self.inner.placement.setting
    }

    /// The placement and what the adaptive one learned of this tool.
    pub(crate) fn placement(&self) -> &Placement {
        &self.inner.placement
    }

    /// What the tool declares about its effects ([`Tool::with_annotations`]),
    /// as it is read: a local tool that does not say whether it reaches
    /// the open world shows `open_world: Some(false)`.
    ///
    /// ```
    /// use crew_runtime::Tool;
    /// use serde_json::json;
    ///
    /// let tool = Tool::dynamic("reply", "Drafts a reply", json!({"type": "object"}), |_| {
    ///     Ok::<_, String>(json!("draft"))
    /// });
    /// assert_eq!(tool.annotations().open_world, Some(false));
    /// assert!(tool.annotations().is_destructive(), "it does not say it only reads");
    /// ```
    pub fn annotations(&self) -> &ToolAnnotations {
        &self.inner.annotations
    }

    /// The MCP server the tool comes from, for a tool of one.
    pub fn mcp_server(&self) -> Option<&str> {
        self.inner.mcp_server.as_deref()
    }

    /// Marks the tool as one of the MCP server `server`.
    #[cfg(feature = "mcp")]
    pub(crate) fn of_mcp_server(mut self, server: Arc<str>) -> Tool {
        let inner = Arc::make_mut(&mut self.inner);
        inner.annotations = read_as(&inner.declared, Some(&server));
        inner.mcp_server = Some(server);
        self
    }

    /// The tool's own timeout, if it has one ([`Tool::with_timeout`]).
    pub fn timeout(&self) -> Option<Duration> {
        self.inner.timeout
    }

    /// The normalized name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The name as it was given, before normalization: what a crew's
    /// look-alike checks read (see [`BuildError::SuspiciousToolName`] and
    /// [`BuildError::LookAlikeToolName`]). For an MCP tool, the server's
    /// spelling behind the prefix.
    ///
    /// ```
    /// use crew_runtime::Tool;
    /// use serde_json::json;
    ///
    /// let tool = Tool::dynamic("Web Search", "Searches", json!({"type": "object"}), |_| {
    ///     Ok::<_, String>(json!("results"))
    /// });
    /// assert_eq!(tool.name(), "web_search");
    /// assert_eq!(tool.spelled_name(), "Web Search");
    /// ```
    ///
    /// [`BuildError::SuspiciousToolName`]: crate::BuildError::SuspiciousToolName
    /// [`BuildError::LookAlikeToolName`]: crate::BuildError::LookAlikeToolName
    pub fn spelled_name(&self) -> &str {
        &self.inner.spelled_name
    }

    /// What the tool does, as the model is told.
    pub fn description(&self) -> &str {
        &self.inner.description
    }

    /// The JSON schema of the tool's arguments.
    pub fn parameters(&self) -> &Value {
        &self.inner.parameters
    }

    /// The tool as the model is told about it.
    pub fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: self.inner.name.clone(),
            description: self.inner.description.clone(),
            parameters: self.inner.parameters.clone(),
        }
    }

    /// Prepares a call of the tool on arguments that already went through
    /// the PRE chain. Crate-private on purpose: only the executor calls it,
    /// inside `CallHooks::run_tool_call_async`, so no tool runs without its
    /// hooks.
    pub(crate) fn invoke(&self, input: &Map<String, Value>) -> ToolRun {
        (self.inner.invoke)(input)
    }
}

impl ToolInfo for Tool {
    fn name(&self) -> &str {
        &self.inner.name
    }

    fn description(&self) -> &str {
        &self.inner.description
    }

    fn args_schema(&self) -> &Value {
        &self.inner.parameters
    }

    fn annotations(&self) -> &ToolAnnotations {
        &self.inner.annotations
    }

    fn mcp_server(&self) -> Option<&str> {
        self.inner.mcp_server.as_deref()
    }
}

impl fmt::Debug for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.inner.name)
            .field("description", &self.inner.description)
            .field("annotations", &self.inner.annotations)
            .field("mcp_server", &self.inner.mcp_server)
            .field("reconciler", &self.inner.reconciler.is_some())
            .finish_non_exhaustive()
    }
}

type Body<Args, Out> = dyn Fn(Args) -> Prepared<Out> + Send + Sync;
type Formatter<Out> = dyn Fn(&Out) -> String + Send + Sync;

/// A tool made by [`Tool::typed`], before it becomes a [`Tool`]: the place
/// to add a formatter that knows the result type. Every API that takes a
/// tool takes `impl Into<Tool>`, so it can be passed as is.
///
/// ```
/// use std::sync::Arc;
/// use crew_runtime::prelude::*;
/// use crew_runtime::schemars::JsonSchema;
/// use serde::Deserialize;
///
/// #[derive(Deserialize, JsonSchema)]
/// #[schemars(crate = "crew_runtime::schemars")]
/// struct ListArgs {
///     folder: String,
/// }
///
/// let list = Tool::typed("list_files", "Lists a folder", |args: ListArgs| {
///     Ok::<_, String>(vec![format!("{}/a.txt", args.folder), format!("{}/b.txt", args.folder)])
/// })
/// // One file a line, instead of a JSON array.
/// .with_formatter(|files: &Vec<String>| files.join("\n"));
///
/// let llm = Arc::new(ScriptedLlm::new().call("list_files", json!({"folder": "docs"})).answer("done"));
/// let clerk = Agent::builder("Clerk").tool(list).llm(llm.clone()).build();
/// let crew = Crew::builder()
///     .agent(clerk.clone())
///     .task(Task::builder("List the docs").agent(&clerk).build())
///     .global_registry(Arc::new(HookRegistry::new()))
///     .build()?;
/// crew.kickoff_blocking(())?;
/// assert_eq!(llm.observations(), ["docs/a.txt\ndocs/b.txt"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct TypedTool<Args, Out> {
    spelled_name: String,
    description: String,
    body: Arc<Body<Args, Out>>,
    formatter: Option<Arc<Formatter<Out>>>,
    timeout: Option<Duration>,
    annotations: ToolAnnotations,
    placement: SyncPlacement,
    reconciler: Option<Reconciler>,
    args: PhantomData<fn(Args)>,
}

impl<Args, Out> TypedTool<Args, Out>
where
    Args: DeserializeOwned + schemars::JsonSchema + Send + 'static,
    Out: Serialize + Send + Sync + 'static,
{
    /// Shows the result to the agent as `formatter` renders it (Markdown,
    /// say) instead of as JSON. `raw_tool_result` still holds the typed
    /// value and its JSON form.
    pub fn with_formatter(
        mut self,
        formatter: impl Fn(&Out) -> String + Send + Sync + 'static,
    ) -> Self {
        self.formatter = Some(Arc::new(formatter));
        self
    }

    /// Gives up on a call after `timeout` (see [`Tool::with_timeout`]).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Declares what the tool does to its environment (see
    /// [`Tool::with_annotations`]).
    pub fn with_annotations(mut self, annotations: ToolAnnotations) -> Self {
        self.annotations = annotations;
        self
    }

    /// Says where a synchronous body runs (see [`Tool::with_sync_placement`]).
    pub fn with_sync_placement(mut self, placement: SyncPlacement) -> Self {
        self.placement = placement;
        self
    }

    /// Declares the tool idempotent, the other annotations kept (see
    /// [`Tool::idempotent`]).
    ///
    /// ```
    /// use crew_runtime::Tool;
    /// use crew_runtime::schemars::JsonSchema;
    /// use serde::Deserialize;
    ///
    /// #[derive(Deserialize, JsonSchema)]
    /// #[schemars(crate = "crew_runtime::schemars")]
    /// struct Flag {
    ///     name: String,
    /// }
    ///
    /// let set_flag: Tool = Tool::typed("set_flag", "Sets a flag", |flag: Flag| {
    ///     Ok::<_, String>(format!("{} set", flag.name))
    /// })
    /// .idempotent()
    /// .into();
    /// assert!(set_flag.may_run_again());
    /// ```
    pub fn idempotent(mut self) -> Self {
        self.annotations.idempotent = Some(true);
        self
    }

    /// Gives the tool a reconciler (see [`Tool::reconcile`]).
    ///
    /// ```
    /// use crew_runtime::{Reconciled, Tool};
    /// use crew_runtime::schemars::JsonSchema;
    /// use serde::Deserialize;
    ///
    /// #[derive(Deserialize, JsonSchema)]
    /// #[schemars(crate = "crew_runtime::schemars")]
    /// struct Payment {
    ///     cents: u64,
    /// }
    ///
    /// let pay: Tool = Tool::typed("pay", "Pays", |payment: Payment| {
    ///     Ok::<_, String>(format!("paid {}", payment.cents))
    /// })
    /// // Asks the payments API whether a payment with the call's key exists.
    /// .reconcile(|_key, _args| async { Ok::<_, String>(Reconciled::DidNotHappen) })
    /// .into();
    /// assert!(pay.reconciler().is_some());
    /// ```
    pub fn reconcile<F, Fut, E>(mut self, reconcile: F) -> Self
    where
        F: Fn(IdempotencyKey, Map<String, Value>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Reconciled, E>> + Send + 'static,
        E: fmt::Display,
    {
        self.reconciler = Some(Reconciler::new(reconcile));
        self
    }

    /// The finished tool.
    pub fn build(self) -> Tool {
        let TypedTool {
            spelled_name,
            description,
            body,
            formatter,
            timeout,
            annotations,
            placement,
            reconciler,
            args: _,
        } = self;
        let invoke = move |input: &Map<String, Value>| {
            let args = match Args::deserialize(input) {
                Ok(args) => args,
                Err(error) => {
                    return ToolRun::Ready(Err(ToolFailure::InvalidArguments(error.to_string())));
                }
            };
            let formatter = formatter.clone();
            let finish = move |out: Result<Out, String>| {
                let out = out.map_err(ToolFailure::Failed)?;
                let mut json = serde_json::to_value(&out)
                    .map_err(|error| ToolFailure::Unrenderable(error.to_string()))?;
                // Rendered the same with or without serde_json's
                // `preserve_order`.
                json.sort_all_objects();
                let rendered = match &formatter {
                    Some(formatter) => formatter(&out),
                    None => render_json(&json),
                };
                Ok(ToolOutput {
                    rendered,
                    raw: RawToolResult::typed(out, json),
                    status: ToolCallStatus::Ran,
                })
            };
            match body(args) {
                Prepared::Blocking(run) => ToolRun::Blocking(Box::new(move || finish(run()))),
                Prepared::Async(running) => {
                    ToolRun::Async(Box::pin(async move { finish(running.await) }))
                }
            }
        };
        let tool = Tool::from_parts(
            spelled_name,
            description,
            schema_of::<Args>(),
            Arc::new(invoke),
        )
        .with_annotations(annotations)
        .with_sync_placement(placement);
        let tool = match reconciler {
            Some(reconciler) => tool.with_reconciler(reconciler),
            None => tool,
        };
        match timeout {
            Some(timeout) => tool.with_timeout(timeout),
            None => tool,
        }
    }
}

impl<Args, Out> From<TypedTool<Args, Out>> for Tool
where
    Args: DeserializeOwned + schemars::JsonSchema + Send + 'static,
    Out: Serialize + Send + Sync + 'static,
{
    fn from(tool: TypedTool<Args, Out>) -> Tool {
        tool.build()
    }
}

impl<Args, Out> fmt::Debug for TypedTool<Args, Out> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypedTool")
            .field("name", &normalize_tool_name(&self.spelled_name))
            .field("args", &std::any::type_name::<Args>())
            .field("out", &std::any::type_name::<Out>())
            .field("formatter", &self.formatter.is_some())
            .finish()
    }
}

/// A result as the agent sees it: a JSON string as its text, anything else
/// as compact JSON.
fn render_json(json: &Value) -> String {
    match json {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// The JSON schema of `Args`, without the `$schema` marker (models are told
/// the schema itself, not which draft it follows).
fn schema_of<Args: schemars::JsonSchema>() -> Value {
    let mut schema = schemars::SchemaGenerator::default().into_root_schema_for::<Args>();
    schema.remove("$schema");
    schema.to_value()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Debug, Deserialize, schemars::JsonSchema)]
    struct Args {
        query: String,
        #[serde(default)]
        limit: Option<u32>,
    }

    #[derive(Debug, PartialEq, Serialize)]
    struct Hits {
        titles: Vec<String>,
        total: u32,
    }

    #[test]
    fn typed_tools_go_in_a_list_of_tools_without_build() {
        let search = Tool::typed("search", "", |args: Args| Ok::<_, String>(args.query));
        let count = Tool::typed("count", "", |args: Args| {
            Ok::<_, String>(args.limit.unwrap_or_default().to_string())
        });
        let agent = crate::Agent::builder("Clerk")
            .tools([search, count])
            .tools(vec![Tool::typed("echo", "", |args: Args| {
                Ok::<_, String>(args.query)
            })])
            .tools([Tool::dynamic("d", "", json!({"type": "object"}), |v| {
                Ok::<_, String>(v)
            })])
            .build();
        let names: Vec<&str> = agent.tools().iter().map(Tool::name).collect();
        assert_eq!(names, ["search", "count", "echo", "d"]);
        // `.build()` still gives the tool itself.
        let built: Tool = Tool::typed("kept", "", |args: Args| Ok::<_, String>(args.query)).build();
        assert_eq!(built.name(), "kept");
    }

    #[test]
    fn local_tools_are_closed_world_unless_they_say_so() {
        let dynamic = Tool::dynamic("d", "", json!({"type": "object"}), |_| {
            Ok::<_, String>(json!("ok"))
        });
        let typed: Tool = Tool::typed("t", "", |args: Args| Ok::<_, String>(args.query))
            .with_annotations(ToolAnnotations::new().read_only(true))
            .into();
        let open = dynamic
            .clone()
            .with_annotations(ToolAnnotations::new().open_world(true));
        assert!(!dynamic.annotations().is_open_world());
        assert!(dynamic.annotations().is_destructive());
        assert!(!typed.annotations().is_open_world());
        assert!(typed.annotations().is_read_only());
        assert!(open.annotations().is_open_world());
    }

    #[cfg(feature = "mcp")]
    #[test]
    fn an_mcp_servers_tool_keeps_mcps_open_world_default() {
        let local = Tool::dynamic("d", "", json!({"type": "object"}), |_| {
            Ok::<_, String>(json!("ok"))
        });
        // Annotated before or after it is marked as the server's: the same.
        let before = local
            .clone()
            .with_annotations(ToolAnnotations::new().read_only(true))
            .of_mcp_server(Arc::from("files"));
        let after = local
            .of_mcp_server(Arc::from("files"))
            .with_annotations(ToolAnnotations::new().read_only(true));
        for tool in [before, after] {
            assert!(tool.annotations().is_open_world(), "{tool:?}");
            assert!(tool.annotations().is_read_only());
        }
    }

    impl Tool {
        /// Runs a call to its end on this thread.
        fn run_now(&self, input: &Map<String, Value>) -> ToolResult {
            match self.invoke(input) {
                ToolRun::Ready(result) => result,
                ToolRun::Blocking(run) => run(),
                ToolRun::Async(running) => futures_executor::block_on(running),
            }
        }
    }

    #[test]
    fn async_tool_functions_are_awaited() {
        let tool: Tool = Tool::typed("t", "", |args: Args| async move {
            Ok::<_, String>(args.query.len())
        })
        .into();
        assert!(matches!(
            tool.invoke(&object(json!({"query": "four"}))),
            ToolRun::Async(_)
        ));
        let output = tool.run_now(&object(json!({"query": "four"})));
        assert_eq!(output.map(|o| o.rendered), Ok("4".to_owned()));
    }

    #[test]
    fn synchronous_tool_functions_run_on_the_blocking_pool() {
        let tool = search();
        assert!(matches!(
            tool.invoke(&object(json!({"query": "rust"}))),
            ToolRun::Blocking(_)
        ));
        assert!(matches!(
            tool.invoke(&object(json!({"limit": 1}))),
            ToolRun::Ready(Err(ToolFailure::InvalidArguments(_)))
        ));
    }

    fn object(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    fn search() -> Tool {
        Tool::typed("Web Search", "Searches", |args: Args| {
            Ok::<_, String>(Hits {
                titles: vec![args.query],
                total: args.limit.unwrap_or(1),
            })
        })
        .into()
    }

    #[test]
    fn typed_tool_has_normalized_name_and_derived_schema() {
        let tool = search();
        assert_eq!(tool.name(), "web_search");
        assert_eq!(tool.parameters()["type"], "object");
        assert_eq!(tool.parameters()["required"], json!(["query"]));
        assert!(tool.parameters().get("$schema").is_none());
    }

    #[test]
    fn serialize_result_renders_as_compact_json_and_stays_typed() {
        let output = search()
            .run_now(&object(json!({"query": "rust", "limit": 3, "stash": 1})))
            .map_err(|f| f.to_string());
        let output = output.expect("the call succeeds");
        assert_eq!(output.rendered, r#"{"titles":["rust"],"total":3}"#);
        assert_eq!(output.raw.downcast_ref::<Hits>().map(|h| h.total), Some(3));
        assert_eq!(output.raw.as_json()["total"], 3);
    }

    #[test]
    fn typed_accepts_explicit_argument_and_output_types() {
        let tool: Tool = Tool::typed::<Args, usize, _, _>("len", "", |args| {
            Ok::<_, std::convert::Infallible>(args.query.len())
        })
        .build();
        let output = tool.run_now(&object(json!({"query": "four"})));
        assert_eq!(output.map(|o| o.rendered), Ok("4".to_owned()));
    }

    #[test]
    fn string_result_renders_as_is() {
        let tool: Tool = Tool::typed("echo", "", |args: Args| Ok::<_, String>(args.query)).into();
        let output = tool.run_now(&object(json!({"query": "a \"quoted\" text"})));
        assert_eq!(
            output.map(|o| o.rendered),
            Ok("a \"quoted\" text".to_owned())
        );
    }

    #[test]
    fn invalid_arguments_never_reach_the_body() {
        let tool: Tool = Tool::typed("t", "", |_: Args| -> Result<String, String> {
            panic!("the body must not run")
        })
        .into();
        let failure = tool
            .run_now(&object(json!({"limit": 2})))
            .map(|o| o.rendered);
        assert_eq!(
            failure.map_err(|f| f.to_string()),
            Err("invalid arguments: missing field `query`".to_owned())
        );
    }

    #[test]
    fn formatter_replaces_rendering_only() {
        let tool: Tool = Tool::typed("t", "", |args: Args| {
            Ok::<_, String>(Hits {
                titles: vec![args.query],
                total: 1,
            })
        })
        .with_formatter(|hits: &Hits| format!("- {}", hits.titles.join("\n- ")))
        .into();
        let output = tool
            .run_now(&object(json!({"query": "x"})))
            .map_err(|f| f.to_string());
        let output = output.expect("the call succeeds");
        assert_eq!(output.rendered, "- x");
        assert_eq!(output.raw.as_json()["titles"], json!(["x"]));
    }

    fn with(annotations: ToolAnnotations) -> Tool {
        Tool::dynamic("t", "", json!({"type": "object"}), |_| {
            Ok::<_, String>(json!("ok"))
        })
        .with_annotations(annotations)
    }

    #[test]
    fn may_run_again_when_read_only_or_idempotent_and_not_said_destructive() {
        let a = ToolAnnotations::new;
        let cases = [
            ("nothing declared", a(), false),
            ("read-only", a().read_only(true), true),
            (
                "read-only, not destructive",
                a().read_only(true).destructive(false),
                true,
            ),
            // Contradictory: read as destructive, not read-only.
            (
                "read-only but destructive",
                a().read_only(true).destructive(true),
                false,
            ),
            ("idempotent", a().idempotent(true), true),
            (
                "idempotent, not destructive",
                a().idempotent(true).destructive(false),
                true,
            ),
            (
                "idempotent but destructive",
                a().idempotent(true).destructive(true),
                false,
            ),
            ("not idempotent", a().idempotent(false), false),
            (
                "not read-only, not idempotent",
                a().read_only(false).idempotent(false),
                false,
            ),
            (
                "read-only, not idempotent",
                a().read_only(true).idempotent(false),
                true,
            ),
            ("only not destructive", a().destructive(false), false),
            (
                "open world, idempotent",
                a().open_world(true).idempotent(true),
                true,
            ),
        ];
        for (case, annotations, expected) in cases {
            assert_eq!(with(annotations).may_run_again(), expected, "{case}");
        }
    }

    #[cfg(feature = "mcp")]
    #[test]
    fn an_mcp_tools_hints_decide_whether_it_may_run_again_the_same_way() {
        let of_server = |annotations| with(annotations).of_mcp_server(Arc::from("files"));
        let a = ToolAnnotations::new;
        assert!(of_server(a().idempotent(true)).may_run_again());
        assert!(!of_server(a().idempotent(true).destructive(true)).may_run_again());
        assert!(!of_server(a()).may_run_again());
        assert!(of_server(a().read_only(true)).may_run_again());
    }

    #[test]
    fn idempotent_is_a_shorthand_that_keeps_the_other_annotations() {
        let declared = ToolAnnotations::new()
            .destructive(false)
            .open_world(true)
            .title("Set a flag");
        let tool = with(declared.clone()).idempotent();
        assert_eq!(tool.annotations(), &declared.clone().idempotent(true));
        assert!(tool.may_run_again());
        // On the typed tool's builder too, before or after its annotations.
        let typed: Tool = Tool::typed("t", "", |args: Args| Ok::<_, String>(args.query))
            .with_annotations(declared.clone())
            .idempotent()
            .into();
        assert_eq!(typed.annotations(), &declared.idempotent(true));
        let bare: Tool = Tool::typed("t", "", |args: Args| Ok::<_, String>(args.query)).into();
        assert!(!bare.may_run_again());
    }

    #[cfg(feature = "durable")]
    mod reconcile {
        use super::*;

        fn key() -> IdempotencyKey {
            IdempotencyKey::derive(b"kickoff", "call 1", 0)
        }

        fn ask(tool: &Tool) -> Option<Result<Reconciled, ReconcileError>> {
            futures_executor::block_on(tool.reconciled(&key(), &object(json!({"id": "7"}))))
        }

        #[test]
        fn a_tool_without_a_reconciler_answers_none() {
            assert_eq!(ask(&with(ToolAnnotations::new())), None);
        }

        #[test]
        fn the_reconciler_gets_the_calls_key_and_arguments() {
            let tool = with(ToolAnnotations::new()).reconcile(|key, args| async move {
                Ok::<_, String>(Reconciled::Happened {
                    result: Some(json!({"key": key.as_str(), "id": args["id"]})),
                })
            });
            let expected = json!({"key": key().as_str(), "id": "7"});
            assert_eq!(
                ask(&tool),
                Some(Ok(Reconciled::Happened {
                    result: Some(expected)
                }))
            );
            // The typed tool's builder keeps it.
            let typed: Tool = Tool::typed("t", "", |args: Args| Ok::<_, String>(args.query))
                .reconcile(|_, _| async { Ok::<_, String>(Reconciled::DidNotHappen) })
                .into();
            assert_eq!(ask(&typed), Some(Ok(Reconciled::DidNotHappen)));
        }

        #[test]
        fn a_reconcilers_error_is_reported_as_failed() {
            let tool = with(ToolAnnotations::new())
                .reconcile(|_, _| async { Err::<Reconciled, _>("the payments API is down") });
            assert_eq!(
                ask(&tool),
                Some(Err(ReconcileError::Failed(
                    "the payments API is down".to_owned()
                )))
            );
        }

        #[test]
        fn a_reconciler_that_panics_is_contained_and_reported() {
            // Before its future exists, and while it is polled.
            let at_call = with(ToolAnnotations::new()).reconcile(
                |_, _| -> std::future::Ready<Result<Reconciled, String>> {
                    panic!("no ledger configured")
                },
            );
            let in_future = with(ToolAnnotations::new()).reconcile(|_, _| async {
                tokio::task::yield_now().await;
                if true {
                    panic!("the ledger is corrupt");
                }
                Ok::<_, String>(Reconciled::DidNotHappen)
            });
            for (tool, message) in [
                (at_call, "no ledger configured"),
                (in_future, "the ledger is corrupt"),
            ] {
                match ask(&tool) {
                    Some(Err(ReconcileError::Panicked(said))) => {
                        assert!(said.contains(message), "{said}")
                    }
                    other => panic!("expected a contained panic, got {other:?}"),
                }
            }
        }

        #[test]
        fn keys_are_deterministic_and_change_with_every_input() {
            let base = IdempotencyKey::derive(b"kickoff-a", "task 0/turn 1/call_1", 0);
            assert_eq!(
                base,
                IdempotencyKey::derive(b"kickoff-a", "task 0/turn 1/call_1", 0)
            );
            let others = [
                IdempotencyKey::derive(b"kickoff-b", "task 0/turn 1/call_1", 0),
                IdempotencyKey::derive(b"kickoff-a", "task 0/turn 1/call_2", 0),
                IdempotencyKey::derive(b"kickoff-a", "task 0/turn 1/call_1", 1),
                // The place's end cannot pass for the attempt.
                IdempotencyKey::derive(b"kickoff-a", "task 0/turn 1/call_1\0\0\0\0", 0),
                IdempotencyKey::derive(b"", "task 0/turn 1/call_1", 0),
            ];
            for other in &others {
                assert_ne!(&base, other);
            }
            let text = base.as_str();
            assert_eq!(text.len(), 64);
            assert!(
                text.bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
            );
            assert_eq!(base.to_string(), text);
            assert!(!text.contains("kickoff-a"), "the secret does not show");
            assert!(
                !text.contains(&hex(b"kickoff-a")),
                "not even in hexadecimal"
            );
        }

        #[test]
        fn a_key_is_an_hmac_sha256_keyed_by_the_secret() {
            // Not a plain hash of the inputs: someone who knows the place
            // and the attempt, but not the secret, cannot compute it.
            use sha2::{Digest, Sha256};
            let key = IdempotencyKey::derive(b"secret", "call", 0);
            let mut unkeyed = Sha256::new();
            unkeyed.update(b"call");
            unkeyed.update(0u32.to_be_bytes());
            assert_ne!(key.as_str(), hex(&unkeyed.finalize()));
            // A recorded key reads back as the same key.
            let recorded = serde_json::to_value(&key).map_err(|e| e.to_string());
            let read: Result<IdempotencyKey, String> =
                recorded.and_then(|v| serde_json::from_value(v).map_err(|e| e.to_string()));
            assert_eq!(read, Ok(key));
        }

        fn hex(bytes: &[u8]) -> String {
            bytes.iter().map(|b| format!("{b:02x}")).collect()
        }
    }

    #[test]
    fn dynamic_tool_takes_and_gives_json() {
        let tool = Tool::dynamic("Lookup", "", json!({"type": "object"}), |args: Value| {
            Ok::<_, String>(json!({"echo": args["key"]}))
        });
        let output = tool
            .run_now(&object(json!({"key": "v"})))
            .map_err(|f| f.to_string());
        let output = output.expect("the call succeeds");
        assert_eq!(tool.name(), "lookup");
        assert_eq!(output.rendered, r#"{"echo":"v"}"#);
        assert!(output.raw.downcast_ref::<Value>().is_none());
    }
}
