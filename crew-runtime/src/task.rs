//! Tasks: what an agent is asked to do.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use hooks_core::{ChatMessage, TaskInfo};

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
    name: Option<String>,
    description: String,
    expected_output: String,
    agent: Option<Agent>,
    /// `None`: every earlier task of the crew (the sequential default).
    context: Option<Vec<TaskId>>,
    /// Where the task's output is written when it finishes.
    output_file: Option<PathBuf>,
    /// The messages a standalone agent's run opens with, in place of the
    /// task message (see [`Agent::kickoff`]).
    opening: Option<Vec<ChatMessage>>,
}

impl Task {
    /// Starts a task with this description.
    pub fn builder(description: impl Into<String>) -> TaskBuilder {
        TaskBuilder {
            task: Task {
                id: TaskId(NEXT_TASK.fetch_add(1, Ordering::Relaxed)),
                name: None,
                description: description.into(),
                expected_output: String::new(),
                agent: None,
                context: None,
                output_file: None,
                opening: None,
            },
        }
    }

    /// The task's name: the one given with [`TaskBuilder::name`], else
    /// the name of the `#[task]` method that made it (for the tasks a
    /// `#[crew_base]` type's `tasks()` lists), else its description. Step
    /// contexts, events and policies carry it.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::prelude::*;
    ///
    /// assert_eq!(Task::builder("Research Rust").name("research").build().name(), "research");
    /// assert_eq!(Task::builder("Research Rust").build().name(), "Research Rust");
    ///
    /// #[derive(Clone)]
    /// struct Newsroom;
    ///
    /// #[crew_base]
    /// impl Newsroom {
    ///     #[agent]
    ///     fn writer(&self) -> Agent {
    ///         Agent::builder("Writer").build()
    ///     }
    ///
    ///     #[task]
    ///     fn draft(&self) -> Task {
    ///         Task::builder("Draft a story").agent(&self.writer()).build()
    ///     }
    ///
    ///     #[task]
    ///     fn review(&self) -> Task {
    ///         Task::builder("Review the draft").name("final review").agent(&self.writer()).build()
    ///     }
    /// }
    ///
    /// let names: Vec<String> = Newsroom.tasks().iter().map(|t| t.name().to_owned()).collect();
    /// assert_eq!(names, ["draft", "final review"]);
    /// ```
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.description)
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

    /// The file the task's output is written to when it finishes (see
    /// [`TaskBuilder::output_file`]): as given before kickoff, with its
    /// inputs filled in when a hook sees the task during a run.
    ///
    /// ```
    /// use std::path::Path;
    /// use crew_runtime::Task;
    /// let task = Task::builder("Write").output_file("out/report.md").build();
    /// assert_eq!(task.output_file(), Some(Path::new("out/report.md")));
    /// ```
    pub fn output_file(&self) -> Option<&Path> {
        self.output_file.as_deref()
    }

    pub(crate) fn id(&self) -> TaskId {
        self.id
    }

    /// The earlier tasks named as context; `None` when none were named,
    /// which means all earlier tasks.
    pub(crate) fn context_ids(&self) -> Option<&[TaskId]> {
        self.context.as_deref()
    }

    /// This task with its texts and output file replaced (inputs filled
    /// in), same identity.
    pub(crate) fn with_texts(
        &self,
        description: String,
        expected_output: String,
        output_file: Option<PathBuf>,
    ) -> Task {
        Task {
            id: self.id,
            name: self.name.clone(),
            description,
            expected_output,
            agent: self.agent.clone(),
            context: self.context.clone(),
            output_file,
            opening: self.opening.clone(),
        }
    }

    /// The task of a standalone agent's run: `messages` open the
    /// conversation (after the agent's system message); `description`
    /// names it in step contexts and events. Its texts hold no
    /// placeholders: a run without a crew has no inputs.
    pub(crate) fn opening_with(
        description: String,
        agent: &Agent,
        messages: Vec<ChatMessage>,
    ) -> Task {
        let mut task = Task::builder(description).agent(agent).build();
        task.opening = Some(messages);
        task
    }

    /// The messages a standalone agent's run opens with.
    pub(crate) fn opening(&self) -> Option<&[ChatMessage]> {
        self.opening.as_deref()
    }
}

impl TaskInfo for Task {
    fn description(&self) -> &str {
        &self.description
    }

    fn name(&self) -> &str {
        Task::name(self)
    }
}

/// Names a task collected by `#[crew_base]`'s `tasks()` after its `#[task]`
/// method, unless [`TaskBuilder::name`] gave it a name.
impl hooks_core::__private::DefaultTaskName for Task {
    fn named_by_default(mut self, name: &'static str) -> Task {
        if self.name.is_none() {
            self.name = Some(name.to_owned());
        }
        self
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

    /// Names the task (see [`Task::name`]).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.task.name = Some(name.into());
        self
    }

    /// Writes the task's output to this file when the task finishes, as
    /// CrewAI's `output_file` does: the output as the `POST_STEP` hooks
    /// left it (the last point that can change a task's output), cleaned
    /// by the crew's redaction when it has one. Missing parent folders are
    /// created; an existing file is replaced. `{placeholder}`s are filled
    /// from the kickoff's inputs and checked like the description's (an
    /// input may not take the path out of its folder with `..` or a root). A file that
    /// cannot be written fails the task, and the kickoff, with
    /// [`CrewError::OutputFile`](crate::CrewError::OutputFile) naming the
    /// path.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::prelude::*;
    /// use crew_runtime::{POST_STEP, StepContext};
    ///
    /// let folder = std::env::temp_dir().join(format!("crew-doc-{}", std::process::id()));
    /// let writer = Agent::builder("Writer").llm(Arc::new(ScriptedLlm::new().answer("# Rust"))).build();
    /// let task = Task::builder("Write about {topic}")
    ///     .agent(&writer)
    ///     .output_file(folder.join("reports/{topic}.md"))
    ///     .build();
    /// let crew = Crew::builder()
    ///     .agent(writer)
    ///     .task(task)
    ///     .global_registry(Arc::new(HookRegistry::new()))
    ///     .hook(POST_STEP, |ctx: &mut StepContext| Some(format!("{}\n\n(reviewed)", ctx.payload)))
    ///     .build()?;
    /// crew.kickoff_blocking([("topic", "rust")])?;
    /// let written = std::fs::read_to_string(folder.join("reports/rust.md"))?;
    /// assert_eq!(written, "# Rust\n\n(reviewed)");
    /// # std::fs::remove_dir_all(&folder)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn output_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.task.output_file = Some(path.into());
        self
    }

    /// Earlier tasks whose outputs this task receives as context. They must
    /// run before it in the crew. Without it, a task receives the outputs
    /// of every task before it (the sequential process's default); with
    /// it, only these.
    pub fn context<'t>(mut self, tasks: impl IntoIterator<Item = &'t Task>) -> Self {
        self.task
            .context
            .get_or_insert_with(Vec::new)
            .extend(tasks.into_iter().map(Task::id));
        self
    }

    /// The task receives no earlier output: an explicit, empty context.
    ///
    /// ```
    /// use crew_runtime::Task;
    /// let fresh_start = Task::builder("Brainstorm from scratch").without_context().build();
    /// # let _ = fresh_start;
    /// ```
    pub fn without_context(mut self) -> Self {
        self.task.context = Some(Vec::new());
        self
    }

    /// The task.
    pub fn build(self) -> Task {
        self.task
    }
}
