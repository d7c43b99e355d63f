//! Attributes that register hooks at the ten interception points.
//!
//! Use them through `crew-runtime` (or `hooks-core`), which re-export them;
//! this crate only parses, checks and emits data for the engine:
//!
//! - `#[on(PRE_TOOL_CALL | POST_TOOL_CALL, tools = [...], agents = [...], capabilities = [...], order = N, fail_closed, timeout_ms = N, crate = path)]`
//! - `#[before_tool_call(...)]` / `#[after_tool_call(...)]`: the legacy
//!   styles, with the same optional arguments but no point;
//! - `#[crew_base]` on an impl block, with `#[agent]`, `#[task]` and `#[crew]`
//!   methods and hook methods taking `&self`.
//!
//! On a free function a hook attribute leaves the function unchanged and
//! adds a record to `hooks-core`'s link-time list, so the hook is in the
//! global registry without any start-up call. Filters are checked and
//! normalized at compile time; the signature is checked by rustc against
//! the engine's traits, with errors on the user's own tokens.

mod crew_base;
mod emit;
mod errors;
mod parse;
mod paths;
mod validate;

use proc_macro::TokenStream;

use crate::parse::HookKind;

/// Registers a free function as a hook at an interception point:
/// `#[on(PRE_TOOL_CALL)]` or `#[on(POST_TOOL_CALL, tools = ["web_search"])]`.
///
/// The points: `EXECUTION_START`, `INPUT`, `PRE_STEP`, `PRE_MODEL_CALL`,
/// `POST_MODEL_CALL`, `PRE_TOOL_CALL`, `POST_TOOL_CALL`, `POST_STEP`,
/// `OUTPUT`, `EXECUTION_END`, each with its own context type.
///
/// Arguments after the point: `tools = ["..."]` (tool-call points only;
/// normalized like tool names), `agents = ["..."]` (step, model-call and
/// tool-call points; exact roles), `capabilities = [destructive, ...]`
/// (tool-call points only; bare names `read_only`, `destructive`,
/// `idempotent`, `open_world`: the hook runs for a call whose tool has any
/// of them, never for a call without a tool), `order = N` (link-time hooks run
/// sorted by it, default 0), `unchecked_filters` (filters that name tools
/// or roles of crews the program builds later: left out of the crews'
/// filter check), `fail_closed` (a panic blocks the call or
/// withholds the result), `timeout_ms = N` (an `async fn` hook's own time
/// limit, in milliseconds, instead of its crew's hook timeout; past it the
/// hook counts as panicked), `crate = path` (where `hooks_core` is).
///
/// A hook that blocks every `delete_file` call: the tool never runs, and
/// the model is told the call was blocked.
///
/// ```
/// use std::sync::Arc;
/// use crew_runtime::prelude::*;
///
/// #[on(PRE_TOOL_CALL, tools = ["delete_file"])]
/// fn no_deletes(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
///     Err(HookAborted::new(format!("{} is not allowed", ctx.tool_name()), "no-deletes"))
/// }
///
/// let delete = Tool::dynamic("delete_file", "Deletes a file", json!({"type": "object"}), |_| {
///     Ok::<_, String>(json!("deleted"))
/// });
/// let llm = Arc::new(
///     ScriptedLlm::new()
///         .call("delete_file", json!({"path": "notes.txt"}))
///         .answer("done"),
/// );
/// let cleaner = Agent::builder("Cleaner").tool(delete).llm(llm.clone()).build();
/// let task = Task::builder("Tidy up").agent(&cleaner).build();
/// let crew = Crew::builder().agent(cleaner).task(task).build()?;
/// crew.kickoff_blocking(Inputs::new())?;
/// assert_eq!(llm.observations(), ["Tool execution blocked by hook. Tool: delete_file"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[proc_macro_attribute]
pub fn on(args: TokenStream, item: TokenStream) -> TokenStream {
    emit::hook_attribute(HookKind::On, args.into(), item.into()).into()
}

/// Registers a legacy before hook: it runs at `PRE_TOOL_CALL` and returns
/// `Option<bool>`, `bool` or `()`, where `false` blocks the call.
///
/// A hook that lets no email out: the model is told the call was blocked.
///
/// ```
/// use std::sync::Arc;
/// use crew_runtime::prelude::*;
///
/// #[before_tool_call(tools = ["send_email"])]
/// fn no_email(_ctx: &mut ToolCallHookContext) -> bool {
///     false
/// }
///
/// let send = Tool::dynamic("send_email", "Sends an email", json!({"type": "object"}), |_| {
///     Ok::<_, String>(json!("sent"))
/// });
/// let llm = Arc::new(
///     ScriptedLlm::new()
///         .call("send_email", json!({"to": "all@example.com"}))
///         .answer("done"),
/// );
/// let mailer = Agent::builder("Mailer").tool(send).llm(llm.clone()).build();
/// let task = Task::builder("Announce the release").agent(&mailer).build();
/// let crew = Crew::builder().agent(mailer).task(task).build()?;
/// crew.kickoff_blocking(Inputs::new())?;
/// assert_eq!(llm.observations(), ["Tool execution blocked by hook. Tool: send_email"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[proc_macro_attribute]
pub fn before_tool_call(args: TokenStream, item: TokenStream) -> TokenStream {
    emit::hook_attribute(HookKind::BeforeToolCall, args.into(), item.into()).into()
}

/// Registers a legacy after hook: it runs at `POST_TOOL_CALL` and returns
/// `Option<String>` (a replacement result), `()` or
/// `Result<Option<String>, HookAborted>`.
///
/// A hook that hides a password before the model sees the tool's result:
///
/// ```
/// use std::sync::Arc;
/// use crew_runtime::prelude::*;
///
/// #[after_tool_call(tools = ["read_config"])]
/// fn hide_password(ctx: &mut ToolCallHookContext) -> Option<String> {
///     ctx.tool_result.as_deref().map(|r| r.replace("hunter2", "[REDACTED]"))
/// }
///
/// let read = Tool::dynamic("read_config", "Reads the configuration", json!({"type": "object"}), |_| {
///     Ok::<_, String>(json!("user: admin, password: hunter2"))
/// });
/// let llm = Arc::new(ScriptedLlm::new().call("read_config", json!({})).answer("done"));
/// let admin = Agent::builder("Admin").tool(read).llm(llm.clone()).build();
/// let task = Task::builder("Check the configuration").agent(&admin).build();
/// let crew = Crew::builder().agent(admin).task(task).build()?;
/// crew.kickoff_blocking(Inputs::new())?;
/// assert_eq!(llm.observations(), ["user: admin, password: [REDACTED]"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[proc_macro_attribute]
pub fn after_tool_call(args: TokenStream, item: TokenStream) -> TokenStream {
    emit::hook_attribute(HookKind::AfterToolCall, args.into(), item.into()).into()
}

/// Registers a legacy `before_llm_call` hook: it runs at `PRE_MODEL_CALL`
/// with `&mut LlmCallHookContext` and returns `Option<bool>`, `bool` or
/// `()`, where `false` blocks the model call (which ends the run).
///
/// A hook that keeps the `Intern` agent from sending its model anything
/// that mentions a salary: the model is never asked, and the kickoff fails.
///
/// ```
/// use std::sync::Arc;
/// use crew_runtime::prelude::*;
/// use crew_runtime::PRE_MODEL_CALL;
///
/// #[before_llm_call(agents = ["Intern"])]
/// fn no_salaries(ctx: &mut LlmCallHookContext) -> bool {
///     !ctx.messages.iter().any(|m| m.content.contains("salary"))
/// }
///
/// let llm = Arc::new(ScriptedLlm::new().answer("the salaries are..."));
/// let intern = Agent::builder("Intern").llm(llm.clone()).build();
/// let task = Task::builder("Summarize the salary table").agent(&intern).build();
/// let crew = Crew::builder().agent(intern).task(task).build()?;
/// let error = crew.kickoff_blocking(Inputs::new()).unwrap_err();
/// assert!(matches!(error, CrewError::AbortedAt { point, .. } if point == PRE_MODEL_CALL));
/// assert_eq!(llm.asked(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[proc_macro_attribute]
pub fn before_llm_call(args: TokenStream, item: TokenStream) -> TokenStream {
    emit::hook_attribute(HookKind::BeforeLlmCall, args.into(), item.into()).into()
}

/// Registers a legacy `after_llm_call` hook: it runs at `POST_MODEL_CALL`
/// and returns `Option<String>` (replacing the answer's text), `()` or
/// `Result<Option<String>, HookAborted>`.
///
/// A hook that signs every answer of the `Copywriter` agent:
///
/// ```
/// use std::sync::Arc;
/// use crew_runtime::prelude::*;
///
/// #[after_llm_call(agents = ["Copywriter"])]
/// fn sign(ctx: &mut LlmCallHookContext) -> Option<String> {
///     ctx.response.as_ref().map(|r| format!("{}\n-- the writers' room", r.content))
/// }
///
/// let llm = Arc::new(ScriptedLlm::new().answer("Release notes: faster builds."));
/// let copywriter = Agent::builder("Copywriter").llm(llm).build();
/// let task = Task::builder("Write the release notes").agent(&copywriter).build();
/// let crew = Crew::builder().agent(copywriter).task(task).build()?;
/// let output = crew.kickoff_blocking(Inputs::new())?;
/// assert_eq!(output.raw, "Release notes: faster builds.\n-- the writers' room");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[proc_macro_attribute]
pub fn after_llm_call(args: TokenStream, item: TokenStream) -> TokenStream {
    emit::hook_attribute(HookKind::AfterLlmCall, args.into(), item.into()).into()
}

/// Makes an impl block a crew definition: collects its `#[agent]` and
/// `#[task]` methods into `agents()` and `tasks()` (naming each task that
/// has no name after its method), and attaches its hook
/// methods (taking `&self`) to every crew its `#[crew]` method builds.
///
/// Hook methods take every hook attribute (`#[on]`, `#[before_tool_call]`,
/// ...) with the same arguments as on a free function. They run only for
/// the calls of the crews the instance builds, on each crew's own
/// registry, and read the instance's state through `&self` (the type is
/// then `Clone`, `Send` and `Sync`: each crew keeps a copy of the instance).
///
/// ```
/// use std::sync::Arc;
/// use crew_runtime::prelude::*;
///
/// #[derive(Clone)]
/// struct SupportCrew {
///     blocked_customer: &'static str,
///     llm: Arc<ScriptedLlm>,
/// }
///
/// #[crew_base]
/// impl SupportCrew {
///     #[agent]
///     fn agent(&self) -> Agent {
///         let refund = Tool::dynamic("refund", "Refunds an order", json!({"type": "object"}), |_| {
///             Ok::<_, String>(json!("refunded"))
///         });
///         Agent::builder("Support").tool(refund).llm(self.llm.clone()).build()
///     }
///
///     #[task]
///     fn handle_ticket(&self) -> Task {
///         Task::builder("Handle the ticket").agent(&self.agent()).build()
///     }
///
///     // Only for this instance's crews, with this instance's state.
///     #[on(PRE_TOOL_CALL, tools = ["refund"])]
///     fn screen_refunds(&self, ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
///         if ctx.tool_input["customer"] == self.blocked_customer {
///             return Err(HookAborted::new("no refunds for this customer", "support-crew"));
///         }
///         Ok(())
///     }
///
///     #[crew]
///     fn crew(&self) -> Result<Crew, BuildError> {
///         Crew::builder().agents(self.agents()).tasks(self.tasks()).build()
///     }
/// }
///
/// let llm = Arc::new(
///     ScriptedLlm::new()
///         .call("refund", json!({"customer": "mallory"}))
///         .answer("done"),
/// );
/// let support = SupportCrew { blocked_customer: "mallory", llm: llm.clone() };
/// support.crew()?.kickoff_blocking(Inputs::new())?;
/// assert_eq!(llm.observations(), ["Tool execution blocked by hook. Tool: refund"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[proc_macro_attribute]
pub fn crew_base(args: TokenStream, item: TokenStream) -> TokenStream {
    crew_base::expand(args.into(), item.into()).into()
}

/// Marks an agent method (`fn researcher(&self) -> Agent`) of a
/// `#[crew_base]` impl. The impl's `agents()` calls every `#[agent]` method,
/// in the order they are written.
///
/// ```
/// use std::sync::Arc;
/// use crew_runtime::prelude::*;
///
/// struct ResearchCrew {
///     llm: Arc<ScriptedLlm>,
/// }
///
/// #[crew_base]
/// impl ResearchCrew {
///     #[agent]
///     fn researcher(&self) -> Agent {
///         Agent::builder("Researcher").llm(self.llm.clone()).build()
///     }
///
///     #[agent]
///     fn writer(&self) -> Agent {
///         Agent::builder("Writer").llm(self.llm.clone()).build()
///     }
///
///     #[task]
///     fn research(&self) -> Task {
///         Task::builder("Research the topic").agent(&self.researcher()).build()
///     }
///
///     #[task]
///     fn write(&self) -> Task {
///         Task::builder("Write it up").agent(&self.writer()).build()
///     }
///
///     #[crew]
///     fn crew(&self) -> Result<Crew, BuildError> {
///         Crew::builder().agents(self.agents()).tasks(self.tasks()).build()
///     }
/// }
///
/// let research = ResearchCrew { llm: Arc::new(ScriptedLlm::new().answer("notes").answer("report")) };
/// let roles: Vec<_> = research.agents().iter().map(|a| a.role().to_owned()).collect();
/// assert_eq!(roles, ["Researcher", "Writer"]);
/// assert_eq!(research.crew()?.kickoff_blocking(Inputs::new())?.raw, "report");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[proc_macro_attribute]
pub fn agent(args: TokenStream, item: TokenStream) -> TokenStream {
    crew_base::marker("agent", args.into(), item.into()).into()
}

/// Marks a task method (`fn research(&self) -> Task`, or `-> Result<Task, _>`)
/// of a `#[crew_base]` impl. The task `tasks()` lists is named after the
/// method (`research`) unless it was given a name.
///
/// ```
/// use std::sync::Arc;
/// use crew_runtime::prelude::*;
///
/// struct NewsCrew;
///
/// #[crew_base]
/// impl NewsCrew {
///     #[agent]
///     fn reporter(&self) -> Agent {
///         Agent::builder("Reporter").llm(Arc::new(ScriptedLlm::new())).build()
///     }
///
///     #[task]
///     fn research(&self) -> Task {
///         Task::builder("Find today's news").agent(&self.reporter()).build()
///     }
///
///     #[task]
///     fn publish(&self) -> Task {
///         Task::builder("Publish a summary").name("front_page").agent(&self.reporter()).build()
///     }
///
///     #[crew]
///     fn crew(&self) -> Result<Crew, BuildError> {
///         Crew::builder().agents(self.agents()).tasks(self.tasks()).build()
///     }
/// }
///
/// let names: Vec<_> = NewsCrew.tasks().iter().map(|t| t.name().to_owned()).collect();
/// assert_eq!(names, ["research", "front_page"]);
/// ```
#[proc_macro_attribute]
pub fn task(args: TokenStream, item: TokenStream) -> TokenStream {
    crew_base::marker("task", args.into(), item.into()).into()
}

/// Marks the method that builds the crew of a `#[crew_base]` impl.
///
/// The method takes only `&self` and returns either the crew or a
/// `Result` holding it:
///
/// - `fn crew(&self) -> Result<Crew, BuildError>`: the usual form, since
///   `CrewBuilder::build` returns a `Result`; `?` works in the body, and an
///   `Err` is returned as it is;
/// - `fn crew(&self) -> Crew`: for a body that builds the crew without
///   failing (or unwraps it).
///
/// Either way the crew it returns gets the instance's hook methods, on the
/// crew's own registry, once per crew built. An impl has one `#[crew]`
/// method, and `agents()` and `tasks()` get its visibility.
///
/// ```
/// use std::sync::Arc;
/// use crew_runtime::prelude::*;
///
/// #[derive(Clone)]
/// struct OpsCrew {
///     llm: Arc<ScriptedLlm>,
/// }
///
/// #[crew_base]
/// impl OpsCrew {
///     #[agent]
///     fn operator(&self) -> Agent {
///         let restart = Tool::dynamic("restart", "Restarts a service", json!({"type": "object"}), |_| {
///             Ok::<_, String>(json!("restarted"))
///         });
///         Agent::builder("Operator").tool(restart).llm(self.llm.clone()).build()
///     }
///
///     #[task]
///     fn fix_outage(&self) -> Task {
///         Task::builder("Fix the outage").agent(&self.operator()).build()
///     }
///
///     #[before_tool_call(tools = ["restart"])]
///     fn ask_first(&self, _ctx: &mut ToolCallHookContext) -> bool {
///         false
///     }
///
///     #[crew]
///     fn crew(&self) -> Result<Crew, BuildError> {
///         Crew::builder().agents(self.agents()).tasks(self.tasks()).build()
///     }
/// }
///
/// let llm = Arc::new(ScriptedLlm::new().call("restart", json!({})).answer("done"));
/// let crew = OpsCrew { llm: llm.clone() }.crew()?;
/// // The hook method is on the crew's own registry.
/// assert_eq!(crew.hooks().get_hooks(PRE_TOOL_CALL).len(), 1);
/// crew.kickoff_blocking(Inputs::new())?;
/// assert_eq!(llm.observations(), ["Tool execution blocked by hook. Tool: restart"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[proc_macro_attribute]
pub fn crew(args: TokenStream, item: TokenStream) -> TokenStream {
    crew_base::marker("crew", args.into(), item.into()).into()
}
