//! Agents: a role, a goal, a backstory, tools and a model.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use hooks_core::AgentInfo;

use crate::llm::Llm;
use crate::registry::SharedRegistry;
use crate::scripted::ScriptedLlm;
use crate::tool::Tool;

/// How many model turns an agent gets per task unless told otherwise
/// ([`AgentBuilder::max_iter`]).
///
/// ```
/// use crew_runtime::{Agent, DEFAULT_MAX_ITER};
///
/// assert_eq!(DEFAULT_MAX_ITER, 15);
/// assert_eq!(Agent::builder("Researcher").build().max_iter(), DEFAULT_MAX_ITER);
/// assert_eq!(Agent::builder("Researcher").max_iter(3).build().max_iter(), 3);
/// ```
pub const DEFAULT_MAX_ITER: usize = 15;

/// How many times an agent asks its model again, per task, after a model
/// call fails, unless told otherwise ([`AgentBuilder::max_retry_limit`]):
/// 2, as the reference.
///
/// ```
/// use crew_runtime::{Agent, DEFAULT_MAX_RETRY_LIMIT};
///
/// assert_eq!(DEFAULT_MAX_RETRY_LIMIT, 2);
/// assert_eq!(Agent::builder("Researcher").build().max_retry_limit(), DEFAULT_MAX_RETRY_LIMIT);
/// assert_eq!(Agent::builder("Researcher").max_retry_limit(0).build().max_retry_limit(), 0);
/// ```
pub const DEFAULT_MAX_RETRY_LIMIT: usize = 2;

/// Identifies an agent: given by [`AgentBuilder::build`], kept by clones,
/// so a crew can tell its own agent from another agent with the same role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct AgentId(u64);

static NEXT_AGENT: AtomicU64 = AtomicU64::new(1);

/// An agent: it works on tasks by asking its model, which may call the
/// agent's tools (every call through the hook chains) before answering.
///
/// The role names the agent: `agents = [...]` hook filters match it exactly,
/// and a crew's agents must have different roles. Each built agent is a
/// distinct agent, and its clones are the same one: a task given a clone of
/// a crew's agent runs that agent.
///
/// ```
/// use std::sync::Arc;
/// use crew_runtime::{Agent, ScriptedLlm};
///
/// let researcher = Agent::builder("Researcher")
///     .goal("Find facts")
///     .backstory("A careful analyst")
///     .llm(Arc::new(ScriptedLlm::new().answer("Rust is memory-safe.")))
///     .max_iter(5)
///     .build();
/// assert_eq!(researcher.role(), "Researcher");
/// ```
#[derive(Clone)]
pub struct Agent {
    id: AgentId,
    /// Shared, so that events name the role without copying it.
    role: Arc<str>,
    goal: String,
    backstory: String,
    tools: Vec<Tool>,
    llm: Arc<dyn Llm>,
    max_iter: usize,
    max_retry_limit: usize,
    verbose: bool,
    /// The registry a standalone run dispatches through.
    registry: Option<SharedRegistry>,
}

impl Agent {
    /// Starts an agent with this role.
    pub fn builder(role: impl Into<String>) -> AgentBuilder {
        AgentBuilder {
            agent: Agent {
                // Set by `build`: a builder cloned and built twice makes two
                // agents.
                id: AgentId(0),
                role: Arc::from(role.into()),
                goal: String::new(),
                backstory: String::new(),
                tools: Vec::new(),
                llm: Arc::new(ScriptedLlm::new()),
                max_iter: DEFAULT_MAX_ITER,
                max_retry_limit: DEFAULT_MAX_RETRY_LIMIT,
                verbose: false,
                registry: None,
            },
        }
    }

    /// The role.
    pub fn role(&self) -> &str {
        &self.role
    }

    /// The goal.
    pub fn goal(&self) -> &str {
        &self.goal
    }

    /// The backstory.
    pub fn backstory(&self) -> &str {
        &self.backstory
    }

    /// The tools the agent may call.
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// The model.
    pub fn llm(&self) -> &Arc<dyn Llm> {
        &self.llm
    }

    /// The most model turns the agent takes per task.
    pub fn max_iter(&self) -> usize {
        self.max_iter
    }

    /// How many times, per task, the agent asks its model again after a
    /// model call fails (see [`AgentBuilder::max_retry_limit`]).
    ///
    /// ```
    /// use crew_runtime::Agent;
    ///
    /// assert_eq!(Agent::builder("Writer").max_retry_limit(5).build().max_retry_limit(), 5);
    /// ```
    pub fn max_retry_limit(&self) -> usize {
        self.max_retry_limit
    }

    /// Whether the agent prints its turns, tool calls and hook decisions.
    pub fn verbose(&self) -> bool {
        self.verbose
    }

    /// The registry the agent's standalone runs ([`Agent::kickoff`])
    /// dispatch through, when one was given
    /// ([`AgentBuilder::global_registry`]); else they use the process-wide
    /// one.
    pub(crate) fn registry(&self) -> Option<&SharedRegistry> {
        self.registry.as_ref()
    }

    /// Whether `other` is this agent: a clone of it, or an identical
    /// definition of it (same role, goal, backstory, limits and
    /// verbosity, the same model instance, and tools of the same names,
    /// descriptions and schemas in the same order). The second case is
    /// what a `#[crew_base]` `#[agent]` method returns each time it is
    /// called, and the two can only differ in what their tools' code
    /// captured.
    pub(crate) fn is_same_agent(&self, other: &Agent) -> bool {
        self.id == other.id
            || (self.role == other.role
                && self.goal == other.goal
                && self.backstory == other.backstory
                && self.max_iter == other.max_iter
                && self.max_retry_limit == other.max_retry_limit
                && self.verbose == other.verbose
                && std::ptr::addr_eq(Arc::as_ptr(&self.llm), Arc::as_ptr(&other.llm))
                && self.tools.len() == other.tools.len()
                && self
                    .tools
                    .iter()
                    .zip(&other.tools)
                    .all(|(a, b)| a.definition() == b.definition()))
    }
}

impl AgentInfo for Agent {
    fn role(&self) -> &str {
        &self.role
    }

    fn shared_role(&self) -> Arc<str> {
        Arc::clone(&self.role)
    }
}

impl fmt::Debug for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Agent")
            .field("role", &self.role)
            .field("goal", &self.goal)
            .field(
                "tools",
                &self.tools.iter().map(Tool::name).collect::<Vec<_>>(),
            )
            .field("llm", &self.llm.name())
            .field("max_iter", &self.max_iter)
            .field("max_retry_limit", &self.max_retry_limit)
            .field("verbose", &self.verbose)
            .finish_non_exhaustive()
    }
}

/// Builds an [`Agent`]; start with [`Agent::builder`].
#[derive(Debug, Clone)]
#[must_use = "call .build() to get the agent"]
pub struct AgentBuilder {
    agent: Agent,
}

impl AgentBuilder {
    /// What the agent tries to achieve.
    pub fn goal(mut self, goal: impl Into<String>) -> Self {
        self.agent.goal = goal.into();
        self
    }

    /// Who the agent is.
    pub fn backstory(mut self, backstory: impl Into<String>) -> Self {
        self.agent.backstory = backstory.into();
        self
    }

    /// Adds a tool: a [`Tool`], or what [`Tool::typed`] returns as is
    /// (no `.build()` needed).
    pub fn tool(mut self, tool: impl Into<Tool>) -> Self {
        self.agent.tools.push(tool.into());
        self
    }

    /// Adds several tools: [`Tool`]s (an MCP server's, say), or typed
    /// tools as [`Tool::typed`] returns them.
    ///
    /// ```
    /// use crew_runtime::prelude::*;
    /// use crew_runtime::schemars::JsonSchema;
    /// use serde::Deserialize;
    ///
    /// #[derive(Deserialize, JsonSchema)]
    /// #[schemars(crate = "crew_runtime::schemars")]
    /// struct Ticket {
    ///     id: String,
    /// }
    ///
    /// let status = Tool::typed("ticket_status", "A ticket's status", |t: Ticket| {
    ///     Ok::<_, String>(format!("{}: open", t.id))
    /// });
    /// let close = Tool::typed("close_ticket", "Closes a ticket", |t: Ticket| {
    ///     Ok::<_, String>(format!("{} closed", t.id))
    /// });
    /// let desk = Agent::builder("Support").tools([status, close]).build();
    /// assert_eq!(desk.tools().len(), 2);
    /// ```
    pub fn tools<T: Into<Tool>>(mut self, tools: impl IntoIterator<Item = T>) -> Self {
        self.agent.tools.extend(tools.into_iter().map(Into::into));
        self
    }

    /// The model the agent asks. Without one the agent has an empty
    /// [`ScriptedLlm`], so its first turn fails with
    /// `LlmError::ScriptExhausted`: give every agent a model.
    pub fn llm(mut self, llm: Arc<dyn Llm>) -> Self {
        self.agent.llm = llm;
        self
    }

    /// The most model turns per task (default [`DEFAULT_MAX_ITER`]). An
    /// agent that reaches it without a final answer stops with a note as
    /// its output (see [`TaskOutput::iteration_limit_reached`](crate::TaskOutput::iteration_limit_reached)).
    pub fn max_iter(mut self, max_iter: usize) -> Self {
        self.agent.max_iter = max_iter;
        self
    }

    /// How many times, per task, the agent asks its model again after a
    /// model call fails (default [`DEFAULT_MAX_RETRY_LIMIT`]); `0` never
    /// retries.
    ///
    /// A retry asks the failed call again on the conversation exactly as it
    /// stood (the same messages and tools, its `PRE_MODEL_CALL` hooks not run
    /// again), so no tool runs twice because of it. Each retry is announced
    /// by a new `AgentExecutionStarted` event, as the reference announces
    /// it; when the last attempt fails too, `AgentExecutionError` is sent and
    /// the task fails. A refusal by a hook, a policy or a budget is never
    /// retried, and neither is a cancelled kickoff.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::prelude::*;
    /// use crew_runtime::llm::LlmError;
    ///
    /// // The model fails once, then answers: one retry is enough.
    /// let model = Arc::new(
    ///     ScriptedLlm::new()
    ///         .fail(LlmError::Transport("connection reset".into()))
    ///         .answer("Rust is fast."),
    /// );
    /// let writer = Agent::builder("Writer").llm(model.clone()).max_retry_limit(1).build();
    /// let crew = Crew::builder()
    ///     .agent(writer.clone())
    ///     .task(Task::builder("Write about Rust").agent(&writer).build())
    ///     .global_registry(Arc::new(HookRegistry::new()))
    ///     .build()?;
    /// assert_eq!(crew.kickoff_blocking(())?.raw, "Rust is fast.");
    /// assert_eq!(model.asked(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn max_retry_limit(mut self, max_retry_limit: usize) -> Self {
        self.agent.max_retry_limit = max_retry_limit;
        self
    }

    /// Prints the agent's turns, tool calls, hook decisions and
    /// observations on the console (a
    /// [`VerboseConsole`](crate::console::VerboseConsole) for this agent on
    /// its crew's bus).
    pub fn verbose(mut self, verbose: bool) -> Self {
        self.agent.verbose = verbose;
        self
    }

    /// The registry the agent's standalone runs ([`Agent::kickoff`])
    /// dispatch through, instead of the process-wide
    /// [`global_registry`](crate::global_registry), as
    /// [`CrewBuilder::global_registry`](crate::CrewBuilder::global_registry)
    /// chooses a crew's: an `Arc<HookRegistry>` (a test's own) or a
    /// `&'static HookRegistry`. In a crew, the agent's calls go through the
    /// crew's registries, not this one.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::prelude::*;
    /// use crew_runtime::{POST_STEP, StepContext};
    ///
    /// let hooks = Arc::new(HookRegistry::new());
    /// hooks.register_hook(POST_STEP, |ctx: &mut StepContext| Some(ctx.payload.to_uppercase()))?;
    /// let agent = Agent::builder("Shouter")
    ///     .llm(Arc::new(ScriptedLlm::new().answer("hello")))
    ///     .global_registry(hooks)
    ///     .build();
    /// assert_eq!(agent.kickoff_blocking("Greet me")?.raw, "HELLO");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn global_registry(mut self, registry: impl Into<SharedRegistry>) -> Self {
        self.agent.registry = Some(registry.into());
        self
    }

    /// The agent: a new one, distinct from every agent built before
    /// (clones of it are the same agent).
    pub fn build(mut self) -> Agent {
        self.agent.id = AgentId(NEXT_AGENT.fetch_add(1, Ordering::Relaxed));
        self.agent
    }
}
