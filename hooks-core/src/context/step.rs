//! The context of step hooks (`PRE_STEP`, `POST_STEP`).

use std::fmt;
use std::sync::Arc;

use super::HookContext;
use super::{AgentInfo, CrewInfo, TaskInfo};

/// What kind of step a [`StepContext`] is about.
///
/// ```
/// use hooks_core::{StepContext, StepKind};
///
/// let ctx = StepContext::new(StepKind::Task, "research", "");
/// let what = match ctx.kind {
///     StepKind::Task => format!("task {}", ctx.step_name),
///     _ => "another kind of step".to_owned(),
/// };
/// assert_eq!(what, "task research");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StepKind {
    /// A task of a crew.
    Task,
}

/// Everything a hook knows about one step (a task).
///
/// At `PRE_STEP`, [`payload`](Self::payload) is the context text the agent
/// is given (the outputs of earlier tasks it depends on); at `POST_STEP` it
/// is the task's output. What the hooks leave there is what is used: the
/// agent's context, or the output that later tasks, callbacks and the
/// crew's output see.
///
/// ```
/// use hooks_core::{StepContext, StepKind};
///
/// // A POST_STEP hook that strips a signature line from every task output.
/// fn strip_signature(ctx: &mut StepContext) -> Option<String> {
///     ctx.payload.strip_suffix("\n-- the agent").map(str::to_owned)
/// }
///
/// let mut ctx = StepContext::new(StepKind::Task, "research", "Rust is fast.\n-- the agent");
/// assert_eq!(strip_signature(&mut ctx).as_deref(), Some("Rust is fast."));
/// ```
pub struct StepContext {
    /// The kind of step.
    pub kind: StepKind,
    /// The step's name (a task's name, else its description).
    pub step_name: String,
    /// PRE: the context text the agent is given; POST: the task's output.
    pub payload: String,
    /// The agent doing the step.
    pub agent: Option<Arc<dyn AgentInfo>>,
    /// The task.
    pub task: Option<Arc<dyn TaskInfo>>,
    /// The crew, absent outside a crew.
    pub crew: Option<Arc<dyn CrewInfo>>,
}

impl StepContext {
    /// A step outside any agent, task or crew.
    pub fn new(kind: StepKind, step_name: impl Into<String>, payload: impl Into<String>) -> Self {
        StepContext {
            kind,
            step_name: step_name.into(),
            payload: payload.into(),
            agent: None,
            task: None,
            crew: None,
        }
    }

    /// Sets the agent.
    pub fn with_agent(mut self, agent: Arc<dyn AgentInfo>) -> Self {
        self.agent = Some(agent);
        self
    }

    /// Sets the task.
    pub fn with_task(mut self, task: Arc<dyn TaskInfo>) -> Self {
        self.task = Some(task);
        self
    }

    /// Sets the crew.
    pub fn with_crew(mut self, crew: Arc<dyn CrewInfo>) -> Self {
        self.crew = Some(crew);
        self
    }

    /// The agent's role, if the step has an agent.
    pub fn agent_role(&self) -> Option<&str> {
        self.agent.as_deref().map(AgentInfo::role)
    }
}

impl HookContext for StepContext {
    #[inline]
    fn call_agent_role(&self) -> Option<&str> {
        self.agent_role()
    }

    fn event_agent_role(&self) -> Option<Arc<str>> {
        self.agent.as_deref().map(AgentInfo::shared_role)
    }
}

impl fmt::Debug for StepContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StepContext")
            .field("kind", &self.kind)
            .field("step_name", &self.step_name)
            .field("payload", &self.payload)
            .field("agent", &self.agent_role())
            .field("crew", &self.crew.as_deref().map(CrewInfo::name))
            .finish_non_exhaustive()
    }
}
