//! Crews: agents and tasks run together, with hooks of their own.

use std::collections::BTreeSet;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use hooks_core::__private::CrewScope;
use hooks_core::runtime::{Dispatcher, register_crew_hook};
use hooks_core::{
    CrewInfo, CrewOutput, EventBus, Explanation, HookId, HookOptions, HookRegistry, HookReturn,
    HookStyle, HumanInputSource, Inputs, LlmInfo, Point, RegisterError, TerminalInput,
    global_registry,
};

use crate::agent::Agent;
use crate::check::{FilterWarning, check_filters};
use crate::error::{BuildError, CrewError};
use crate::llm::{Llm, ToolDefinition};
use crate::task::Task;
use crate::tool::Tool;

/// How a crew runs its tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Process {
    /// One task after another, in the order given; each task's output is
    /// available as context to the later ones.
    #[default]
    Sequential,
}

/// The global registry a crew dispatches through: the process-wide one
/// (the default) or one injected (a test's `HookRegistry::new()`).
#[derive(Clone)]
pub struct SharedRegistry(RegistryKind);

#[derive(Clone)]
enum RegistryKind {
    Static(&'static HookRegistry),
    Shared(Arc<HookRegistry>),
}

impl Deref for SharedRegistry {
    type Target = HookRegistry;

    fn deref(&self) -> &HookRegistry {
        match &self.0 {
            RegistryKind::Static(registry) => registry,
            RegistryKind::Shared(registry) => registry,
        }
    }
}

impl From<&'static HookRegistry> for SharedRegistry {
    fn from(registry: &'static HookRegistry) -> Self {
        SharedRegistry(RegistryKind::Static(registry))
    }
}

impl From<Arc<HookRegistry>> for SharedRegistry {
    fn from(registry: Arc<HookRegistry>) -> Self {
        SharedRegistry(RegistryKind::Shared(registry))
    }
}

impl fmt::Debug for SharedRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

/// An agent as a built crew holds it: shared, with its tools ready to hand
/// to hooks and its tool definitions ready for the model.
pub(crate) struct CrewAgent {
    pub(crate) agent: Arc<Agent>,
    pub(crate) tools: Vec<Arc<Tool>>,
    pub(crate) definitions: Arc<[ToolDefinition]>,
    /// The agent's model as model-call hooks see it.
    pub(crate) llm_info: Arc<dyn LlmInfo>,
}

impl CrewAgent {
    pub(crate) fn find_tool(&self, name: &str) -> Option<&Arc<Tool>> {
        self.tools.iter().find(|tool| tool.name() == name)
    }

    /// `a, b` (or `none`), for the model's "tool not found" observation.
    pub(crate) fn tool_names(&self) -> String {
        if self.tools.is_empty() {
            return "none".to_owned();
        }
        self.tools
            .iter()
            .map(|t| t.name())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// An agent's model as model-call hooks see it (`ctx.llm`).
struct ModelInfo(Arc<dyn Llm>);

impl LlmInfo for ModelInfo {
    fn name(&self) -> &str {
        self.0.name()
    }
}

/// A task as a built crew holds it: with its agent and context resolved.
pub(crate) struct CrewTask {
    pub(crate) task: Task,
    /// Index into the crew's agents.
    pub(crate) agent: usize,
    /// Indices of earlier tasks whose outputs are its context.
    pub(crate) context: Vec<usize>,
}

pub(crate) struct CrewInner {
    pub(crate) name: String,
    pub(crate) agents: Vec<CrewAgent>,
    pub(crate) tasks: Vec<CrewTask>,
    pub(crate) process: Process,
    pub(crate) scoped: HookRegistry,
    pub(crate) global: SharedRegistry,
    pub(crate) human_input: Arc<dyn HumanInputSource>,
    pub(crate) verbose: bool,
    pub(crate) max_concurrent_tool_calls: usize,
    strict: bool,
    warnings: Vec<FilterWarning>,
    /// Filter problems of hook methods attached after the build (by
    /// `#[crew_base]` code); in strict mode they fail every kickoff.
    attached_violations: std::sync::Mutex<Vec<FilterWarning>>,
}

impl CrewInner {
    fn filter_warnings(&self) -> Vec<FilterWarning> {
        let tools: BTreeSet<&str> = self
            .agents
            .iter()
            .flat_map(|a| a.tools.iter().map(|t| t.name()))
            .collect();
        let roles: BTreeSet<&str> = self.agents.iter().map(|a| a.agent.role()).collect();
        check_filters(&self.name, &[&self.global, &self.scoped], &tools, &roles)
    }
}

/// A crew: agents working through tasks, every tool call through the hook
/// chains. Cloning is cheap, and clones are the same crew (same hooks, same
/// event bus).
///
/// A crew has a registry of its own ([`Crew::hooks`]) next to the global
/// one. Hooks there fire only for this crew's calls, merged with the global
/// chain in registration order. `#[crew_base]` types register their hook
/// methods there; by hand, use [`CrewBuilder::hook`] or `crew.hooks()`.
///
/// ```
/// use std::sync::Arc;
/// use crew_runtime::prelude::*;
///
/// let researcher = Agent::builder("Researcher")
///     .llm(Arc::new(ScriptedLlm::new().answer("Rust is fast.")))
///     .build();
/// let crew = Crew::builder()
///     .name("research")
///     .agent(researcher.clone())
///     .task(Task::builder("Research {topic}").agent(&researcher).build())
///     .global_registry(Arc::new(HookRegistry::new()))
///     .build()?;
/// let output = crew.kickoff([("topic", "Rust")])?;
/// assert_eq!(output.raw, "Rust is fast.");
/// assert_eq!(output.tasks_output[0].description, "Research Rust");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Crew {
    inner: Arc<CrewInner>,
}

impl Crew {
    /// Starts a crew.
    pub fn builder() -> CrewBuilder {
        CrewBuilder::default()
    }

    /// The crew's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The agents, the crew's own first, then those that joined through a
    /// task.
    pub fn agents(&self) -> impl Iterator<Item = &Agent> {
        self.inner.agents.iter().map(|a| &*a.agent)
    }

    /// The tasks, in the order they run.
    pub fn tasks(&self) -> impl Iterator<Item = &Task> {
        self.inner.tasks.iter().map(|t| &t.task)
    }

    /// How the tasks run.
    pub fn process(&self) -> Process {
        self.inner.process
    }

    /// The crew's own hook registry: hooks registered here fire only for
    /// this crew's tool calls. Its event bus is [`Crew::events`].
    pub fn hooks(&self) -> &HookRegistry {
        &self.inner.scoped
    }

    /// The bus on which this crew reports: hook dispatches (`HookDispatched`,
    /// `HookPanicked`) and tool usage (`ToolUsageStarted`, `ToolUsageFinished`,
    /// `ToolUsageError`) of its own calls.
    pub fn events(&self) -> &EventBus {
        self.inner.scoped.events()
    }

    /// The global registry the crew dispatches through.
    pub fn global_registry(&self) -> &HookRegistry {
        &self.inner.global
    }

    /// The dispatcher of this crew's calls: global hooks and the crew's own,
    /// merged.
    pub(crate) fn dispatcher(&self) -> Dispatcher<'_> {
        Dispatcher::new(&self.inner.global).with_scope(&self.inner.scoped)
    }

    /// Which hooks (global and the crew's own, in order) a call of `tool`
    /// by an agent with `role` would meet, and which filter skips the
    /// others.
    pub fn explain<'r>(&self, tool: &str, role: impl Into<Option<&'r str>>) -> Explanation {
        self.dispatcher().explain(tool, role.into())
    }

    /// Checks every hook (global and the crew's own) against the crew's
    /// tools and roles, as building the crew did. Run it again after
    /// registering more hooks.
    pub fn check_hook_filters(&self) -> Vec<FilterWarning> {
        self.inner.filter_warnings()
    }

    /// The warnings building the crew produced (see
    /// [`Crew::check_hook_filters`]).
    pub fn build_warnings(&self) -> &[FilterWarning] {
        &self.inner.warnings
    }

    /// Whether the crew was built in strict mode.
    pub fn is_strict(&self) -> bool {
        self.inner.strict
    }

    /// Runs the tasks with these inputs filling their `{placeholder}`s.
    ///
    /// Every placeholder of every task is checked before any task runs. A
    /// POST hook that aborts ends the run with [`CrewError::Aborted`]; a
    /// blocked or failing tool call does not (the agent sees why and goes
    /// on).
    pub fn kickoff(&self, inputs: impl Into<Inputs>) -> Result<CrewOutput, CrewError> {
        let violations = self
            .inner
            .attached_violations
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        if !violations.is_empty() {
            return Err(CrewError::UnmatchedHookFilters(violations));
        }
        crate::executor::kickoff(self, inputs.into())
    }

    pub(crate) fn inner(&self) -> &CrewInner {
        &self.inner
    }
}

impl CrewInfo for Crew {
    fn name(&self) -> &str {
        &self.inner.name
    }
}

impl CrewScope for Crew {
    fn crew_hooks(&self) -> &HookRegistry {
        &self.inner.scoped
    }

    /// Checks the filters of hook methods attached after the build, as the
    /// build checked the others: a warning each, and in strict mode every
    /// kickoff of this crew fails with them.
    fn scoped_hooks_attached(&self) {
        let inner = &self.inner;
        let warnings: Vec<FilterWarning> = inner
            .filter_warnings()
            .into_iter()
            .filter(|w| !inner.warnings.contains(w))
            .collect();
        for warning in &warnings {
            tracing::warn!(target: "crew_runtime::crew", crew = %inner.name, "{warning}");
        }
        if inner.strict {
            *inner
                .attached_violations
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = warnings;
        }
    }
}

impl fmt::Debug for Crew {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Crew")
            .field("name", &self.inner.name)
            .field(
                "agents",
                &self.agents().map(Agent::role).collect::<Vec<_>>(),
            )
            .field("tasks", &self.inner.tasks.len())
            .field("process", &self.inner.process)
            .field("hooks", &self.inner.scoped)
            .field("strict", &self.inner.strict)
            .finish_non_exhaustive()
    }
}

type PendingHook =
    Box<dyn FnOnce(&HookRegistry, &str) -> Result<HookId, RegisterError> + Send + Sync>;

/// The most tool calls of one model turn that run at the same time, unless
/// told otherwise.
pub const DEFAULT_MAX_CONCURRENT_TOOL_CALLS: usize = 16;

/// Builds a [`Crew`]; start with [`Crew::builder`].
#[must_use = "call .build() to get the crew"]
pub struct CrewBuilder {
    name: String,
    agents: Vec<Agent>,
    tasks: Vec<Task>,
    process: Process,
    global: Option<SharedRegistry>,
    human_input: Option<Arc<dyn HumanInputSource>>,
    strict: bool,
    verbose: bool,
    max_concurrent_tool_calls: usize,
    hooks: Vec<PendingHook>,
}

impl Default for CrewBuilder {
    fn default() -> Self {
        CrewBuilder {
            name: "crew".to_owned(),
            agents: Vec::new(),
            tasks: Vec::new(),
            process: Process::Sequential,
            global: None,
            human_input: None,
            strict: false,
            verbose: false,
            max_concurrent_tool_calls: DEFAULT_MAX_CONCURRENT_TOOL_CALLS,
            hooks: Vec::new(),
        }
    }
}

impl CrewBuilder {
    /// The crew's name (default `crew`): what hooks see as
    /// `ctx.crew.name()` and what warnings name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Adds an agent.
    pub fn agent(mut self, agent: Agent) -> Self {
        self.agents.push(agent);
        self
    }

    /// Adds several agents.
    pub fn agents(mut self, agents: impl IntoIterator<Item = Agent>) -> Self {
        self.agents.extend(agents);
        self
    }

    /// Adds a task; tasks run in the order added.
    pub fn task(mut self, task: Task) -> Self {
        self.tasks.push(task);
        self
    }

    /// Adds several tasks.
    pub fn tasks(mut self, tasks: impl IntoIterator<Item = Task>) -> Self {
        self.tasks.extend(tasks);
        self
    }

    /// How the tasks run (only [`Process::Sequential`] for now).
    pub fn process(mut self, process: Process) -> Self {
        self.process = process;
        self
    }

    /// The global registry to dispatch through, instead of the process-wide
    /// [`global_registry`]: an `Arc<HookRegistry>` (a test's own) or a
    /// `&'static HookRegistry`.
    pub fn global_registry(mut self, registry: impl Into<SharedRegistry>) -> Self {
        self.global = Some(registry.into());
        self
    }

    /// Where `ctx.request_human_input` gets its answers (the terminal by
    /// default): a `ScriptedInput` in tests, a `ChannelInput` or
    /// `CallbackInput` for a UI.
    pub fn human_input(mut self, source: Arc<dyn HumanInputSource>) -> Self {
        self.human_input = Some(source);
        self
    }

    /// In strict mode, a hook filter that names no tool or role of the crew
    /// fails the build instead of logging a warning.
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// Prints every agent's turns, tool calls and hook decisions.
    pub fn verbose(mut self, verbose: bool) -> Self {
        self.verbose = verbose;
        self
    }

    /// The most tool calls of one model turn that run at the same time
    /// (default [`DEFAULT_MAX_CONCURRENT_TOOL_CALLS`]; 1 runs them one after
    /// another on the agent's thread).
    pub fn max_concurrent_tool_calls(mut self, limit: usize) -> Self {
        self.max_concurrent_tool_calls = limit.max(1);
        self
    }

    /// Registers a hook of this crew only (on its own registry, when the
    /// crew is built), at any point.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::prelude::*;
    ///
    /// let writer = Agent::builder("Writer").llm(Arc::new(ScriptedLlm::new().answer("draft"))).build();
    /// let crew = Crew::builder()
    ///     .agent(writer.clone())
    ///     .task(Task::builder("Write").agent(&writer).build())
    ///     .global_registry(Arc::new(HookRegistry::new()))
    ///     .hook(POST_STEP, |ctx: &mut StepContext| Some(format!("{} (reviewed)", ctx.payload)))
    ///     .build()?;
    /// assert_eq!(crew.kickoff(())?.raw, "draft (reviewed)");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn hook<P, F, R>(self, point: P, hook: F) -> Self
    where
        P: Point,
        F: Fn(&mut P::Context) -> R + Send + Sync + 'static,
        R: HookReturn<P>,
    {
        self.hook_with(point, HookOptions::new(), hook)
    }

    /// Registers a hook of this crew only, with filters, a name or
    /// fail-closed behavior. A filter the point does not take fails the
    /// build.
    pub fn hook_with<P, F, R>(mut self, point: P, options: HookOptions, hook: F) -> Self
    where
        P: Point,
        F: Fn(&mut P::Context) -> R + Send + Sync + 'static,
        R: HookReturn<P>,
    {
        self.hooks.push(Box::new(move |registry, crew| {
            register_crew_hook(registry, point, crew, HookStyle::On, options, hook)
        }));
        self
    }

    /// Builds the crew: resolves each task's agent (by role) and context,
    /// checks tool names, registers the crew's hooks on a fresh registry,
    /// and checks every hook filter against the crew's tools and roles
    /// (a `tracing` warning each, or an error in strict mode).
    pub fn build(self) -> Result<Crew, BuildError> {
        if self.tasks.is_empty() {
            return Err(BuildError::NoTasks);
        }
        let mut agents: Vec<Agent> = Vec::with_capacity(self.agents.len());
        for agent in self.agents {
            if agents.iter().any(|a| a.role() == agent.role()) {
                return Err(BuildError::DuplicateRole {
                    role: agent.role().to_owned(),
                });
            }
            agents.push(agent);
        }
        let mut tasks = Vec::with_capacity(self.tasks.len());
        for (position, task) in self.tasks.into_iter().enumerate() {
            let Some(task_agent) = task.agent() else {
                return Err(BuildError::TaskWithoutAgent {
                    index: position + 1,
                    task: task.description().to_owned(),
                });
            };
            let agent = match agents.iter().position(|a| a.role() == task_agent.role()) {
                Some(index) => index,
                None => {
                    agents.push(task_agent.clone());
                    agents.len() - 1
                }
            };
            let mut context = Vec::with_capacity(task.context_ids().len());
            for id in task.context_ids() {
                let earlier = tasks.iter().position(|t: &CrewTask| t.task.id() == *id);
                let Some(earlier) = earlier else {
                    return Err(BuildError::ContextNotEarlier {
                        index: position + 1,
                        task: task.description().to_owned(),
                    });
                };
                context.push(earlier);
            }
            tasks.push(CrewTask {
                task,
                agent,
                context,
            });
        }
        let agents = agents
            .into_iter()
            .map(prepare_agent)
            .collect::<Result<Vec<_>, _>>()?;

        let scoped = HookRegistry::new();
        for register in self.hooks {
            register(&scoped, &self.name)?;
        }
        let mut inner = CrewInner {
            name: self.name,
            agents,
            tasks,
            process: self.process,
            scoped,
            global: self.global.unwrap_or_else(|| global_registry().into()),
            human_input: self
                .human_input
                .unwrap_or_else(|| Arc::new(TerminalInput::new())),
            verbose: self.verbose,
            max_concurrent_tool_calls: self.max_concurrent_tool_calls,
            strict: self.strict,
            warnings: Vec::new(),
            attached_violations: std::sync::Mutex::new(Vec::new()),
        };
        let warnings = inner.filter_warnings();
        for warning in &warnings {
            tracing::warn!(target: "crew_runtime::crew", crew = %inner.name, "{warning}");
        }
        if inner.strict && !warnings.is_empty() {
            return Err(BuildError::UnmatchedHookFilters(warnings));
        }
        inner.warnings = warnings;
        Ok(Crew {
            inner: Arc::new(inner),
        })
    }
}

fn prepare_agent(agent: Agent) -> Result<CrewAgent, BuildError> {
    if agent.max_iter() == 0 {
        return Err(BuildError::ZeroMaxIter {
            role: agent.role().to_owned(),
        });
    }
    let mut names = BTreeSet::new();
    for tool in agent.tools() {
        if tool.name().is_empty() {
            return Err(BuildError::EmptyToolName {
                role: agent.role().to_owned(),
                description: tool.description().to_owned(),
            });
        }
        if !names.insert(tool.name()) {
            return Err(BuildError::DuplicateTool {
                role: agent.role().to_owned(),
                tool: tool.name().to_owned(),
            });
        }
    }
    let tools: Vec<Arc<Tool>> = agent.tools().iter().cloned().map(Arc::new).collect();
    let definitions = agent.tools().iter().map(Tool::definition).collect();
    let llm_info: Arc<dyn LlmInfo> = Arc::new(ModelInfo(agent.llm().clone()));
    Ok(CrewAgent {
        agent: Arc::new(agent),
        tools,
        definitions,
        llm_info,
    })
}

impl fmt::Debug for CrewBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CrewBuilder")
            .field("name", &self.name)
            .field(
                "agents",
                &self.agents.iter().map(Agent::role).collect::<Vec<_>>(),
            )
            .field("tasks", &self.tasks.len())
            .field("hooks", &self.hooks.len())
            .field("strict", &self.strict)
            .finish_non_exhaustive()
    }
}
