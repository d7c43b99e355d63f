//! Where an agent works ([`RunContext`]): what its model calls and tool
//! calls need of the run, and how they report (events, and the
//! crew's redaction).

use std::sync::Arc;

use hooks_core::events::EventId;
use hooks_core::runtime::Dispatcher;
use hooks_core::{AgentInfo, CrewInfo, Event, StepContext, StepKind, TaskInfo};

use super::journal::JournalAt;
use super::{CrewAgent, CrewHooks, InCrew, Nesting, RunScope, RunSettings};
use crate::redaction::Redaction;
use crate::task::Task;

/// Where an agent works: the crew's settings and hooks, the agent, the
/// task, and the events its own link to. What a tool call needs of its run
/// ([`call`](super::call)); the loop of model turns around it is the
/// [`AgentRun`](super::agent_run::AgentRun).
pub(crate) struct RunContext {
    pub(crate) settings: Arc<RunSettings>,
    pub(crate) hooks: CrewHooks,
    pub(crate) agent: Arc<CrewAgent>,
    pub(crate) task: Arc<Task>,
    pub(crate) agent_info: Arc<dyn AgentInfo>,
    pub(crate) task_info: Arc<dyn TaskInfo>,
    /// The crew, absent for a standalone agent's run.
    pub(crate) crew_info: Option<Arc<dyn CrewInfo>>,
    /// The depth of the kickoff the run belongs to: the tasks and threads
    /// that run its calls take it, so a hook there that kicks off a crew
    /// counts toward the nesting limit.
    pub(crate) depth: Nesting,
    /// The ids its events link to: its kickoff's start and its task's.
    pub(crate) scope: RunScope,
    /// A durable kickoff's journal, at this task.
    pub(crate) journal: Option<JournalAt>,
}

impl RunContext {
    pub(crate) fn settings(&self) -> &RunSettings {
        &self.settings
    }

    pub(crate) fn agent(&self) -> &CrewAgent {
        &self.agent
    }

    pub(crate) fn dispatcher(&self) -> Dispatcher<'_> {
        self.hooks.dispatcher()
    }

    pub(crate) fn role(&self) -> &str {
        self.agent().agent.role()
    }

    /// The task's name as events carry it (cleaned where they leave).
    pub(super) fn task_name(&self) -> String {
        self.task.name().to_owned()
    }

    /// The crew's redaction.
    pub(crate) fn redaction(&self) -> &Redaction {
        &self.settings.redaction
    }

    /// A step context for this task with `payload`.
    pub(super) fn step_context(&self, payload: String) -> StepContext {
        StepContext::new(StepKind::Task, self.task.name(), payload)
            .with_agent(Arc::clone(&self.agent_info))
            .with_task(Arc::clone(&self.task_info))
            .in_crew(&self.crew_info)
    }

    /// The task's description as tool-usage events carry it (kickoff
    /// inputs filled in; cleaned where the events leave).
    pub(crate) fn task_for_events(&self) -> String {
        self.task.description().to_owned()
    }

    pub(crate) fn listening(&self) -> bool {
        self.hooks.listening()
    }

    /// Sends an event to the global registry's bus and the crew's, as
    /// dispatches do.
    pub(crate) fn emit(&self, event: Event) {
        self.hooks.emit(event);
    }

    /// The start of the agent's execution under way (its events' parent).
    pub(crate) fn execution_event(&self) -> Option<EventId> {
        self.scope
            .execution
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .last()
            .copied()
    }
}
