//! Tasks: what an agent is asked to do.

use std::sync::atomic::{AtomicU64, Ordering};

use hooks_core::TaskInfo;

use crate::agent::Agent;

/// Identifies a task across clones, so a later task can name an earlier
/// one as its context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct TaskId(u64);

static NEXT_TASK: AtomicU64 = AtomicU64::new(1);

/// A task: a description (with `{placeholder}` inputs filled in at kickoff),
/// the expected output, the agent that does it, and earlier tasks whose
/// outputs it gets as context.
///
/// ```
/// use crew_runtime::{Agent, Task};
///
/// let researcher = Agent::builder("Researcher").build();
/// let research = Task::builder("Research {topic}")
///     .expected_output("Five facts about {topic}")
///     .agent(&researcher)
///     .build();
/// let report = Task::builder("Write a report")
///     .agent(&researcher)
///     .context([&research])
///     .build();
/// assert_eq!(report.agent().map(Agent::role), Some("Researcher"));
/// ```
#[derive(Debug, Clone)]
pub struct Task {
    id: TaskId,
    description: String,
    expected_output: String,
    agent: Option<Agent>,
    context: Vec<TaskId>,
}

impl Task {
    /// Starts a task with this description.
    pub fn builder(description: impl Into<String>) -> TaskBuilder {
        TaskBuilder {
            task: Task {
                id: TaskId(NEXT_TASK.fetch_add(1, Ordering::Relaxed)),
                description: description.into(),
                expected_output: String::new(),
                agent: None,
                context: Vec::new(),
            },
        }
    }

    /// The description: as written before kickoff, with its inputs filled
    /// in when a hook sees the task during a run.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// What the final answer should look like.
    pub fn expected_output(&self) -> &str {
        &self.expected_output
    }

    /// The agent assigned to the task.
    pub fn agent(&self) -> Option<&Agent> {
        self.agent.as_ref()
    }

    pub(crate) fn id(&self) -> TaskId {
        self.id
    }

    pub(crate) fn context_ids(&self) -> &[TaskId] {
        &self.context
    }

    /// This task with its texts replaced (inputs filled in), same identity.
    pub(crate) fn with_texts(&self, description: String, expected_output: String) -> Task {
        Task {
            id: self.id,
            description,
            expected_output,
            agent: self.agent.clone(),
            context: self.context.clone(),
        }
    }
}

impl TaskInfo for Task {
    fn description(&self) -> &str {
        &self.description
    }
}

/// Builds a [`Task`]; start with [`Task::builder`].
#[derive(Debug, Clone)]
#[must_use = "call .build() to get the task"]
pub struct TaskBuilder {
    task: Task,
}

impl TaskBuilder {
    /// What the final answer should look like (`{placeholder}`s allowed).
    pub fn expected_output(mut self, expected_output: impl Into<String>) -> Self {
        self.task.expected_output = expected_output.into();
        self
    }

    /// The agent that does the task. In a crew it must be the crew's agent
    /// of that role (a clone of it), or an agent whose role no crew agent
    /// has, which then joins the crew; another agent with a crew agent's
    /// role fails the build (see [`CrewBuilder::build`](crate::CrewBuilder::build)).
    pub fn agent(mut self, agent: &Agent) -> Self {
        self.task.agent = Some(agent.clone());
        self
    }

    /// Earlier tasks whose outputs this task receives as context. They must
    /// run before it in the crew.
    pub fn context<'t>(mut self, tasks: impl IntoIterator<Item = &'t Task>) -> Self {
        self.task.context.extend(tasks.into_iter().map(Task::id));
        self
    }

    /// The task.
    pub fn build(self) -> Task {
        self.task
    }
}
