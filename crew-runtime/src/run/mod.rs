//! The run of a kickoff: what it needs of its crew, handed over as a
//! [`Plan`], and nothing of the crew's builder.
//!
//! The layers, each depending only on those below it:
//! - [`executor`]: a kickoff through every point, a task after another;
//! - [`agent_run`]: one agent on one task ([`AgentRun`](agent_run::AgentRun)):
//!   `PRE_STEP`, the loop of model turns, a turn's calls one at a time or
//!   at once, `POST_STEP`;
//! - [`call`]: one tool call, the only way any tool runs, as a stack of
//!   layers;
//! - [`context`]: where an agent works ([`RunContext`](context::RunContext)):
//!   what its calls need of the run, and how they report;
//! - this module: the plan (settings, hooks, agents, tasks), the events a
//!   run links to, and the kickoff depth that nested kickoffs count.
//!
//! The crew ([`Crew`](crate::Crew)) builds the plan once, checks what a
//! kickoff needs checked (its depth, its filters), and hands the plan and
//! the kickoff's crew (what hooks see as `ctx.crew`) to
//! [`executor::kickoff`].

use std::cell::Cell;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hooks_core::events::EventId;
use hooks_core::runtime::Dispatcher;
use hooks_core::{
    CrewInfo, CrewOutput, DispatchOutcome, ExecutionEndContext, ExecutionStartContext, HookAborted,
    HookRegistry, HumanInputSource, InputContext, Inputs, InterceptionPoint, LlmCallHookContext,
    LlmInfo, OutputContext, StepContext, ToolCallHookContext,
};

use crate::agent::Agent;
use crate::error::CrewError;
use crate::extension::CrewExtension;
use crate::llm::ToolDefinition;
use crate::redaction::Redaction;
use crate::registry::SharedRegistry;
use crate::task::Task;
use crate::tool::Tool;

pub(crate) mod agent_run;
pub(crate) mod call;
pub(crate) mod context;
pub(crate) mod executor;
pub(crate) mod journal;

/// What a kickoff runs, as the crew's build left it: the settings, the
/// hooks, the agents and the tasks (and, for a standalone agent's run,
/// where its conversation goes). The run needs nothing else of its crew.
pub(crate) struct Plan {
    pub(crate) settings: Arc<RunSettings>,
    pub(crate) hooks: CrewHooks,
    pub(crate) agents: Vec<Arc<CrewAgent>>,
    pub(crate) tasks: Vec<CrewTask>,
    /// A standalone agent's run: where it leaves its conversation.
    pub(crate) conversation: Option<Conversation>,
    /// The crew's kickoff callbacks, each list in the order added.
    pub(crate) callbacks: KickoffCallbacks,
}

/// A `before_kickoff` callback ([`CrewBuilder::before_kickoff`](crate::CrewBuilder::before_kickoff)).
pub(crate) type BeforeKickoff = Box<dyn Fn(Inputs) -> Inputs + Send + Sync>;

/// An `after_kickoff` callback ([`CrewBuilder::after_kickoff`](crate::CrewBuilder::after_kickoff)).
pub(crate) type AfterKickoff = Box<dyn Fn(CrewOutput) -> CrewOutput + Send + Sync>;

/// The reference's kickoff callbacks: the `before` ones run on the inputs
/// before anything else of a kickoff, the `after` ones on its output
/// between `OUTPUT` and `EXECUTION_END`.
#[derive(Default)]
pub(crate) struct KickoffCallbacks {
    pub(crate) before: Vec<BeforeKickoff>,
    pub(crate) after: Vec<AfterKickoff>,
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

/// A task as a built crew holds it: with its agent and context resolved.
pub(crate) struct CrewTask {
    pub(crate) task: Task,
    /// Index into the crew's agents.
    pub(crate) agent: usize,
    /// Indices of earlier tasks whose outputs are its context.
    pub(crate) context: Vec<usize>,
}

/// What the runs of a crew need of it: shared by every agent run of a
/// kickoff and by the tasks that run their calls, without the crew.
pub(crate) struct RunSettings {
    pub(crate) name: String,
    pub(crate) human_input: Arc<dyn HumanInputSource>,
    pub(crate) human_input_timeout: Duration,
    /// Whether a blocked call's observation carries the block's reason.
    pub(crate) tell_model_why_blocked: bool,
    pub(crate) max_concurrent_tool_calls: usize,
    pub(crate) max_tool_calls_per_turn: usize,
    pub(crate) max_observation_bytes: usize,
    pub(crate) tool_timeout: Duration,
    pub(crate) model_timeout: Duration,
    /// Applied at every exit of the crew (see
    /// [`CrewBuilder::redact_with`](crate::CrewBuilder::redact_with)).
    pub(crate) redaction: Redaction,
    /// What the integrations add to the crew (see [`crate::extension`]):
    /// empty for a crew that uses none.
    pub(crate) extensions: Vec<Arc<dyn CrewExtension>>,
    /// Whether the crew only carries a standalone agent's run
    /// ([`Agent::kickoff`]): its hooks see no crew, its events name none.
    pub(crate) standalone: bool,
}

impl RunSettings {
    /// The tools the agent `role`'s model is offered: its agent's, less
    /// those an extension leaves out (under an enforcing policy set with
    /// default deny, those no policy could ever permit to that agent).
    pub(crate) fn offered_tools(
        &self,
        role: &str,
        definitions: &Arc<[ToolDefinition]>,
    ) -> Arc<[ToolDefinition]> {
        let mut offered = Arc::clone(definitions);
        for extension in &self.extensions {
            if let Some(fewer) = extension.offered_tools(role, &offered) {
                offered = fewer;
            }
        }
        offered
    }

    /// The error a kickoff ends with when a hook blocked the model call in
    /// `call` at `PRE_MODEL_CALL`: an extension's own (a budget's), or
    /// the runtime's `AbortedAt`.
    pub(crate) fn model_call_refused(
        &self,
        call: &LlmCallHookContext,
        outcome: DispatchOutcome,
        agent: &str,
    ) -> Result<(), CrewError> {
        if let DispatchOutcome::Aborted(aborted) = &outcome
            && let Some(error) = self
                .extensions
                .iter()
                .find_map(|extension| extension.model_call_refused(call, aborted))
        {
            return Err(error);
        }
        go_on(outcome, InterceptionPoint::PRE_MODEL_CALL, Some(agent))
    }

    /// The error a kickoff ends with when a hook blocked the tool call in
    /// `ctx` (`blocked`) and an extension says its block ends the kickoff.
    pub(crate) fn tool_call_refused(
        &self,
        ctx: &ToolCallHookContext,
        blocked: &HookAborted,
    ) -> Option<CrewError> {
        self.extensions
            .iter()
            .find_map(|extension| extension.tool_call_refused(ctx, blocked))
    }

    /// The crew's name as the lifecycle events carry it: empty for a
    /// standalone agent's run.
    pub(crate) fn crew_name(&self) -> String {
        if self.standalone {
            String::new()
        } else {
            self.name.clone()
        }
    }

    /// The crew's name as the tool and stream events carry it: none for a
    /// standalone agent's run.
    pub(crate) fn crew_label(&self) -> Option<String> {
        (!self.standalone).then(|| self.name.clone())
    }
}

/// A crew's hooks: the global registry it dispatches through and its own.
#[derive(Clone)]
pub(crate) struct CrewHooks {
    pub(crate) global: SharedRegistry,
    pub(crate) scoped: Arc<HookRegistry>,
    /// How long an `async` hook without a limit of its own may run.
    pub(crate) hook_timeout: Duration,
    /// The crew's redaction, which cleans every event where it leaves.
    pub(crate) redaction: Redaction,
}

impl CrewHooks {
    /// The dispatcher of the crew's calls: global hooks and the crew's
    /// own, merged.
    pub(crate) fn dispatcher(&self) -> Dispatcher<'_> {
        let dispatcher = Dispatcher::new(&self.global)
            .with_scope(&self.scoped)
            .with_hook_timeout(self.hook_timeout);
        match self.redaction.redactor_ref() {
            Some(redactor) => dispatcher.with_redaction(redactor),
            None => dispatcher,
        }
    }

    /// Whether anyone listens on the global bus or the crew's.
    pub(crate) fn listening(&self) -> bool {
        self.global.events().has_listeners() || self.scoped.events().has_listeners()
    }

    /// Sends an event to the global bus and the crew's, through the
    /// dispatcher's edge, where the crew's redaction cleans it: the one
    /// road every event of the crew takes (the dispatches' own included).
    pub(crate) fn emit(&self, event: hooks_core::Event) {
        self.dispatcher().emit(event);
    }
}

/// Where a standalone agent's run leaves its conversation (see
/// [`Agent::kickoff`]).
pub(crate) type Conversation = Arc<std::sync::Mutex<Vec<hooks_core::ChatMessage>>>;

/// The events a run's events link to.
#[derive(Debug)]
pub(crate) struct RunScope {
    /// The kickoff's start (none for a standalone agent's run).
    pub(crate) kickoff: Option<EventId>,
    /// The task's start.
    pub(crate) task: EventId,
    /// The starts of the agent's executions under way: the first attempt,
    /// then each retry inside the one before.
    pub(crate) execution: Mutex<Vec<EventId>>,
}

impl RunScope {
    pub(crate) fn new(kickoff: Option<EventId>) -> RunScope {
        RunScope {
            kickoff,
            task: EventId::new(),
            execution: Mutex::new(Vec::new()),
        }
    }
}

/// Gives a hook context its crew, when the run has one (a standalone
/// agent's run has none: hooks see `crew` absent, as outside any crew).
pub(crate) trait InCrew: Sized {
    fn in_crew(self, crew: &Option<Arc<dyn CrewInfo>>) -> Self;
}

macro_rules! in_crew {
    ($($context:ty),* $(,)?) => {$(
        impl InCrew for $context {
            fn in_crew(self, crew: &Option<Arc<dyn CrewInfo>>) -> Self {
                match crew {
                    Some(crew) => self.with_crew(Arc::clone(crew)),
                    None => self,
                }
            }
        }
    )*};
}

in_crew!(
    ExecutionStartContext,
    InputContext,
    StepContext,
    LlmCallHookContext,
    hooks_core::ToolCallHookContext,
    OutputContext,
    ExecutionEndContext,
);

/// Where work stands among nested kickoffs: how many it works inside, and
/// the tool call (its `ToolUsageStarted`) it runs in, which a kickoff
/// started there names as its parent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Nesting {
    pub(crate) depth: usize,
    pub(crate) tool_call: Option<EventId>,
}

impl Nesting {
    /// The same depth, inside the tool call `event`.
    pub(crate) fn in_call(self, event: Option<EventId>) -> Nesting {
        Nesting {
            depth: self.depth,
            tool_call: event,
        }
    }
}

thread_local! {
    /// Where a synchronous tool's thread works (the kickoff whose call it
    /// runs).
    static KICKOFF_DEPTH: Cell<Nesting> = const { Cell::new(Nesting { depth: 0, tool_call: None }) };
}

tokio::task_local! {
    /// Where the polled task works.
    static TASK_KICKOFF_DEPTH: Nesting;
}

/// Holds this thread's kickoff depth while a kickoff (or a turn's tool
/// calls) runs; puts the previous depth back when dropped.
pub(crate) struct KickoffDepth {
    previous: Nesting,
}

impl KickoffDepth {
    /// Where the current work stands: the polled task's place, or else
    /// this thread's.
    pub(crate) fn current() -> Nesting {
        TASK_KICKOFF_DEPTH
            .try_with(|depth| *depth)
            .unwrap_or_else(|_| KICKOFF_DEPTH.with(Cell::get))
    }

    /// `future`, polled at `depth`.
    pub(crate) fn scope<F: std::future::Future>(
        depth: Nesting,
        future: F,
    ) -> impl std::future::Future<Output = F::Output> {
        TASK_KICKOFF_DEPTH.scope(depth, future)
    }

    /// This thread at `depth`: a blocking-pool thread running a
    /// synchronous tool of a kickoff takes that kickoff's depth, so a
    /// kickoff started from the tool is counted too.
    pub(crate) fn at(depth: Nesting) -> KickoffDepth {
        KickoffDepth {
            previous: KICKOFF_DEPTH.with(|current| current.replace(depth)),
        }
    }
}

impl Drop for KickoffDepth {
    fn drop(&mut self) {
        KICKOFF_DEPTH.with(|current| current.set(self.previous));
    }
}

/// One point's chain, on a snapshot of its own, `async` hooks awaited.
pub(crate) async fn dispatch<P: hooks_core::Point>(
    dispatcher: &Dispatcher<'_>,
    point: P,
    ctx: &mut P::Context,
) -> DispatchOutcome {
    if !dispatcher.has_hooks(P::ID) {
        return DispatchOutcome::Proceeded;
    }
    dispatcher
        .begin_call(&[P::ID])
        .dispatch_async(point, ctx)
        .await
}

/// Goes on unless a hook at `point` aborted the run; then the run ends
/// with the abort, naming the agent whose step or model call it stopped.
pub(crate) fn go_on(
    outcome: DispatchOutcome,
    point: InterceptionPoint,
    agent: Option<&str>,
) -> Result<(), CrewError> {
    match outcome {
        DispatchOutcome::Aborted(abort) => Err(CrewError::AbortedAt {
            point,
            agent: agent.map(str::to_owned),
            abort,
        }),
        DispatchOutcome::Proceeded | DispatchOutcome::Modified => Ok(()),
    }
}
