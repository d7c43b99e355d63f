//! Crews: agents and tasks run together, with hooks of their own.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hooks_core::__private::CrewScope;
use hooks_core::runtime::{Dispatcher, register_crew_async_hook, register_crew_hook};
use hooks_core::{
    AsyncHookFn, CrewInfo, CrewOutput, DEFAULT_HOOK_TIMEOUT, DEFAULT_HUMAN_INPUT_TIMEOUT, EventBus,
    Explanation, HookOptions, HookRegistry, HookReturn, HookStyle, HumanInputSource, Inputs,
    InterceptionPoint, LlmInfo, Point, Redact, ToolNameSkeleton, check_tool_name, global_registry,
};

use crate::agent::Agent;
use crate::check::{
    FilterScope, FilterWarning, KnownNames, check_filters, first_reports, known_on, record_crew,
    report,
};
use crate::error::{BuildError, CrewError};
use crate::extension::{BuildScope, CrewExtension, PendingHook};
use crate::llm::Llm;
use crate::redaction::Redaction;
use crate::registry::SharedRegistry;
use crate::run::journal::KickoffJournal;
use crate::run::{
    Conversation, CrewAgent, CrewHooks, CrewTask, KickoffCallbacks, KickoffDepth, Nesting, Plan,
    RunSettings,
};
use crate::task::Task;
use crate::tool::Tool;

/// How a crew runs its tasks.
///
/// ```
/// use std::sync::Arc;
/// use crew_runtime::prelude::*;
/// use crew_runtime::Process;
///
/// let llm = Arc::new(ScriptedLlm::new().answer("three facts").answer("a summary"));
/// let writer = Agent::builder("Writer").llm(llm.clone()).build();
/// let research = Task::builder("Find facts").agent(&writer).build();
/// let summary = Task::builder("Summarize them").agent(&writer).build();
/// let crew = Crew::builder()
///     .agent(writer)
///     .tasks([research, summary])
///     .process(Process::Sequential)
///     .global_registry(Arc::new(HookRegistry::new()))
///     .build()?;
/// assert_eq!(crew.process(), Process::default());
///
/// let output = crew.kickoff_blocking(())?;
/// assert_eq!(output.raw, "a summary");
/// // The second task was given the first one's output.
/// assert!(llm.requests()[1].task_prompt().unwrap().contains("three facts"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Process {
    /// One task after another, in the order given; each task's output is
    /// available as context to the later ones.
    #[default]
    Sequential,
}

/// An agent's model as model-call hooks see it (`ctx.llm`).
struct ModelInfo(Arc<dyn Llm>);

impl LlmInfo for ModelInfo {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn max_output_tokens(&self) -> Option<u64> {
        self.0.max_output_tokens()
    }
}

/// A built crew: the plan its kickoffs run, and what the crew checks
/// before it hands a kickoff the plan.
pub(crate) struct CrewInner {
    pub(crate) plan: Arc<Plan>,
    pub(crate) process: Process,
    max_kickoff_depth: usize,
    strict: bool,
    /// The crew's tool names and roles.
    known: KnownNames,
    warnings: Vec<FilterWarning>,
    /// Whether a kickoff has checked the global hooks' filters (in strict
    /// mode: and found nothing wrong).
    global_filters_checked: AtomicBool,
    /// Filter problems of hook methods attached after the build (by
    /// `#[crew_base]` code); in strict mode they fail every kickoff.
    attached_violations: std::sync::Mutex<Vec<FilterWarning>>,
}

impl CrewInner {
    /// The crew's own hooks against the crew's tools and roles.
    fn scoped_filter_warnings(&self) -> Vec<FilterWarning> {
        check_filters(
            &self.plan.settings.name,
            &self.plan.hooks.scoped,
            FilterScope::Crew,
            &self.known,
        )
    }

    /// The global registry's hooks against every crew built on it so far.
    fn global_filter_warnings(&self) -> Vec<FilterWarning> {
        let known = known_on(&self.plan.hooks.global);
        check_filters(
            &self.plan.settings.name,
            &self.plan.hooks.global,
            FilterScope::AllCrews,
            &known,
        )
    }

    /// At the first kickoff: reports the global hooks' filter entries that
    /// name nothing any crew built so far has (each entry once per
    /// registry, whichever crew finds it). In strict mode they fail the
    /// kickoff, and every later one until they are fixed (or the crew that
    /// has the names is built).
    fn check_global_filters_once(&self) -> Result<(), CrewError> {
        if self.global_filters_checked.load(Ordering::Acquire) {
            return Ok(());
        }
        // Hooks registered since the build may filter on a name one of
        // the crew's tools only looks like.
        check_tool_names(
            &self.plan.agents,
            &[&self.plan.hooks.scoped, &self.plan.hooks.global],
        )
        .map_err(CrewError::UntrustedToolName)?;
        let warnings = self.global_filter_warnings();
        report(&first_reports(&self.plan.hooks.global, &warnings));
        if self.strict && !warnings.is_empty() {
            return Err(CrewError::UnmatchedHookFilters(warnings));
        }
        if !self.plan.settings.extensions.is_empty() {
            let known = known_on(&self.plan.hooks.global);
            for extension in &self.plan.settings.extensions {
                extension.check_names(&self.plan.hooks.global, &known, self.strict)?;
            }
        }
        self.global_filters_checked.store(true, Ordering::Release);
        Ok(())
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
/// let output = crew.kickoff_blocking([("topic", "Rust")])?;
/// assert_eq!(output.raw, "Rust is fast.");
/// assert_eq!(output.tasks_output[0].description, "Research Rust");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Crew {
    inner: Arc<CrewInner>,
    /// Who the kickoffs of this value run for ([`Crew::for_user`]).
    user: Option<Arc<str>>,
    /// The tenant they run for ([`Crew::for_tenant`]).
    tenant: Option<Arc<str>>,
    /// The running kickoff's id, on the value a kickoff hands its hooks.
    kickoff_id: Option<Arc<str>>,
}

impl Crew {
    /// Starts a crew.
    pub fn builder() -> CrewBuilder {
        CrewBuilder::default()
    }

    /// The same crew, whose kickoffs run for `user`: the person or
    /// account a service runs the crew on behalf of. Hooks read it as
    /// [`CrewInfo::user`], policies as the principal's `user` attribute,
    /// and an approval asked during the kickoff names it as the requester.
    /// The crew is shared, not copied: this costs a reference count.
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
    ///     .build()?;
    /// let for_alice = crew.for_user("alice");
    /// assert_eq!(for_alice.user(), Some("alice"));
    /// assert_eq!(crew.user(), None);
    /// assert_eq!(for_alice.kickoff_blocking(())?.raw, "draft");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn for_user(&self, user: impl Into<String>) -> Crew {
        Crew {
            inner: Arc::clone(&self.inner),
            user: Some(Arc::from(user.into())),
            tenant: self.tenant.clone(),
            kickoff_id: None,
        }
    }

    /// The same crew, as one kickoff's hooks see it: with a fresh,
    /// unguessable kickoff id (a UUID v4).
    pub(crate) fn for_kickoff(&self) -> Crew {
        Crew {
            inner: Arc::clone(&self.inner),
            user: self.user.clone(),
            tenant: self.tenant.clone(),
            kickoff_id: Some(Arc::from(uuid::Uuid::new_v4().to_string())),
        }
    }

    /// The same crew, as the hooks of the kickoff `kickoff_id` (a durable
    /// one, in whichever process runs it) see it.
    pub(crate) fn with_kickoff_id(&self, kickoff_id: String) -> Crew {
        Crew {
            inner: Arc::clone(&self.inner),
            user: self.user.clone(),
            tenant: self.tenant.clone(),
            kickoff_id: Some(Arc::from(kickoff_id)),
        }
    }

    /// The same crew, whose kickoffs run for `user` of `tenant` (or for
    /// nobody, of no tenant): a resumed kickoff's, as it started.
    #[allow(
        dead_code,
        reason = "used by the integration compiled in, if any (`durable`)"
    )]
    pub(crate) fn as_started_for(&self, user: Option<&str>, tenant: Option<&str>) -> Crew {
        Crew {
            inner: Arc::clone(&self.inner),
            user: user.map(Arc::from),
            tenant: tenant.map(Arc::from),
            kickoff_id: None,
        }
    }

    /// Who this value's kickoffs run for (see [`Crew::for_user`]).
    pub fn user(&self) -> Option<&str> {
        self.user.as_deref()
    }

    /// The same crew, whose kickoffs run for the tenant `tenant` (the
    /// customer account of a service that runs crews for several): hooks
    /// read it as [`CrewInfo::tenant`], and budgets counted per tenant
    /// count it.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::prelude::*;
    ///
    /// let agent = Agent::builder("Writer").llm(Arc::new(ScriptedLlm::new().answer("draft"))).build();
    /// let crew = Crew::builder()
    ///     .agent(agent.clone())
    ///     .task(Task::builder("Draft").agent(&agent).build())
    ///     .global_registry(Arc::new(HookRegistry::new()))
    ///     .build()?;
    /// let for_acme = crew.for_tenant("acme").for_user("alice");
    /// assert_eq!((for_acme.tenant(), for_acme.user()), (Some("acme"), Some("alice")));
    /// assert_eq!(crew.tenant(), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn for_tenant(&self, tenant: impl Into<String>) -> Crew {
        Crew {
            inner: Arc::clone(&self.inner),
            user: self.user.clone(),
            tenant: Some(Arc::from(tenant.into())),
            kickoff_id: self.kickoff_id.clone(),
        }
    }

    /// The tenant this value's kickoffs run for (see [`Crew::for_tenant`]).
    pub fn tenant(&self) -> Option<&str> {
        self.tenant.as_deref()
    }

    /// The crew's name.
    pub fn name(&self) -> &str {
        &self.inner.plan.settings.name
    }

    /// The agents, the crew's own first, then those that joined through a
    /// task (an agent given to a task whose role no agent of the crew has
    /// joins the crew; see [`CrewBuilder::build`]).
    pub fn agents(&self) -> impl Iterator<Item = &Agent> {
        self.inner.plan.agents.iter().map(|a| &*a.agent)
    }

    /// The tasks, in the order they run.
    pub fn tasks(&self) -> impl Iterator<Item = &Task> {
        self.inner.plan.tasks.iter().map(|t| &t.task)
    }

    /// How the tasks run.
    pub fn process(&self) -> Process {
        self.inner.process
    }

    /// The crew's own hook registry: hooks registered here fire only for
    /// this crew's tool calls. Its event bus is [`Crew::events`].
    pub fn hooks(&self) -> &HookRegistry {
        &self.inner.plan.hooks.scoped
    }

    /// The crew's own registry, shared (what [`Crew::hooks`] borrows).
    #[cfg_attr(not(feature = "audit"), allow(dead_code))]
    pub(crate) fn scoped_registry(&self) -> &Arc<HookRegistry> {
        &self.inner.plan.hooks.scoped
    }

    /// The bus on which this crew reports: hook dispatches (`HookDispatched`,
    /// `HookPanicked`) and tool usage (`ToolUsageStarted`,
    /// `ToolExecutionStarted`, `ToolUsageFinished`, `ToolUsageError`,
    /// `ToolFailureDetected`) of its own calls.
    pub fn events(&self) -> &EventBus {
        self.inner.plan.hooks.scoped.events()
    }

    /// The global registry the crew dispatches through.
    pub fn global_registry(&self) -> &HookRegistry {
        &self.inner.plan.hooks.global
    }

    /// The dispatcher of this crew's calls: global hooks and the crew's own,
    /// merged.
    pub(crate) fn dispatcher(&self) -> Dispatcher<'_> {
        self.inner.plan.hooks.dispatcher()
    }

    /// Which hooks (global and the crew's own, in order) a call of `tool`
    /// by an agent with `role` would meet, and which filter skips the
    /// others.
    pub fn explain<'r>(&self, tool: &str, role: impl Into<Option<&'r str>>) -> Explanation {
        let role = role.into();
        let mut explanation = self.dispatcher().explain(tool, role);
        for extension in &self.inner.plan.settings.extensions {
            extension.explain(tool, role, &mut explanation.notes);
        }
        explanation
    }

    /// What the integrations added to the crew at its build (see
    /// [`crate::extension`]).
    pub(crate) fn extensions(&self) -> &[Arc<dyn CrewExtension>] {
        &self.inner.plan.settings.extensions
    }

    /// The crew's extension of type `T`, if its build added one.
    #[allow(dead_code, reason = "used by the integrations compiled in, if any")]
    pub(crate) fn extension<T: CrewExtension>(&self) -> Option<&T> {
        crate::extension::find(self.extensions())
    }

    /// Checks every hook filter now: the global registry's hooks against
    /// the tools and roles of every crew built on that registry so far,
    /// then the crew's own hooks against the crew's. Hooks registered with
    /// [`HookOptions::unchecked_filters`] are left out. It only returns the
    /// warnings; run it after registering more hooks, or after building
    /// every crew, to see what the first kickoff will report.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::prelude::*;
    /// use crew_runtime::PRE_MODEL_CALL;
    ///
    /// let hooks = Arc::new(HookRegistry::new());
    /// let writer = Agent::builder("Writer").build();
    /// let crew = Crew::builder()
    ///     .agent(writer.clone())
    ///     .task(Task::builder("Write").agent(&writer).build())
    ///     .global_registry(hooks.clone())
    ///     .build()?;
    /// hooks.register_hook_with(
    ///     PRE_MODEL_CALL,
    ///     HookOptions::new().agents(["writer"]),
    ///     |_: &mut LlmCallHookContext| {},
    /// )?;
    /// let warnings = crew.check_hook_filters();
    /// assert_eq!(warnings.len(), 1);
    /// assert_eq!(warnings[0].suggestion.as_deref(), Some("Writer"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn check_hook_filters(&self) -> Vec<FilterWarning> {
        let mut warnings = self.inner.global_filter_warnings();
        warnings.extend(self.inner.scoped_filter_warnings());
        warnings
    }

    /// The warnings building the crew reported: its own hooks' filter
    /// entries that name no tool or role of the crew. (Global hooks are
    /// checked at the first kickoff, against every crew built by then: see
    /// [`Crew::check_hook_filters`].)
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::prelude::*;
    ///
    /// let writer = Agent::builder("Writer").build();
    /// let crew = Crew::builder()
    ///     .agent(writer.clone())
    ///     .task(Task::builder("Write").agent(&writer).build())
    ///     .global_registry(Arc::new(HookRegistry::new()))
    ///     .hook_with(POST_TOOL_CALL, HookOptions::new().tools(["fetch_page"]), |_: &mut ToolCallHookContext| {})
    ///     .build()?;
    /// assert_eq!(crew.build_warnings()[0].name, "fetch_page");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn build_warnings(&self) -> &[FilterWarning] {
        &self.inner.warnings
    }

    /// Whether the crew was built in strict mode.
    pub fn is_strict(&self) -> bool {
        self.inner.strict
    }

    /// Whether the crew has a redaction ([`CrewBuilder::redact_with`]).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::guards::SecretRedactor;
    /// use crew_runtime::prelude::*;
    ///
    /// let writer = Agent::builder("Writer").llm(Arc::new(ScriptedLlm::new().answer("done"))).build();
    /// let builder = || {
    ///     Crew::builder()
    ///         .agent(writer.clone())
    ///         .task(Task::builder("Write").agent(&writer).build())
    ///         .global_registry(Arc::new(HookRegistry::new()))
    /// };
    /// assert!(!builder().build()?.redacts());
    /// assert!(builder().redact_with(SecretRedactor::new()).build()?.redacts());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn redacts(&self) -> bool {
        self.inner.plan.settings.redaction.is_set()
    }

    /// `text` as this crew lets texts out: cleaned by its redaction
    /// ([`CrewBuilder::redact_with`]), or as it is when it has none. For
    /// exits of your own, such as an event listener that writes a log.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::guards::SecretRedactor;
    /// use crew_runtime::prelude::*;
    ///
    /// let writer = Agent::builder("Writer").llm(Arc::new(ScriptedLlm::new().answer("done"))).build();
    /// let crew = Crew::builder()
    ///     .agent(writer.clone())
    ///     .task(Task::builder("Write").agent(&writer).build())
    ///     .global_registry(Arc::new(HookRegistry::new()))
    ///     .redact_with(SecretRedactor::new())
    ///     .build()?;
    /// assert_eq!(crew.redact("token=abc123"), "token=[REDACTED]");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
        self.inner.plan.settings.redaction.text(text)
    }

    /// Runs the tasks with these inputs filling their `{placeholder}`s.
    ///
    /// Every placeholder of every task is checked before any task runs. A
    /// POST hook that aborts ends the run with [`CrewError::Aborted`]; a
    /// blocked or failing tool call does not (the agent sees why and goes
    /// on).
    ///
    /// The first kickoff checks the global hooks' filters against every
    /// crew built so far (see [`Crew::check_hook_filters`]): a warning each,
    /// or in strict mode [`CrewError::UnmatchedHookFilters`]. A kickoff
    /// started from a hook nests inside the running one; past
    /// [`CrewBuilder::max_kickoff_depth`] nested kickoffs it fails with
    /// [`CrewError::KickoffTooDeep`].
    ///
    /// The future is `Send`: spawn it, or await it in a request handler.
    /// Dropping it cancels the kickoff: the model's answer it awaits, async
    /// tools and the tasks running a turn's calls are dropped (a
    /// synchronous tool already running finishes on its thread, its result
    /// dropped, and `Event::ToolUsageAbandoned` then says what it did).
    /// Once `EXECUTION_START` has passed, the drop runs the synchronous
    /// `EXECUTION_END` hooks with `ExecutionStatus::Cancelled` and spawns
    /// the `async` ones on the runtime (they are skipped when the kickoff
    /// is dropped outside any runtime). It needs a tokio
    /// runtime (for timers and tasks); from synchronous code, use
    /// [`Crew::kickoff_blocking`].
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::prelude::*;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let writer = Agent::builder("Writer").llm(Arc::new(ScriptedLlm::new().answer("draft"))).build();
    /// let crew = Crew::builder()
    ///     .agent(writer.clone())
    ///     .task(Task::builder("Write about {topic}").agent(&writer).build())
    ///     .global_registry(Arc::new(HookRegistry::new()))
    ///     .build()?;
    /// let output = crew.kickoff([("topic", "Rust")]).await?;
    /// assert_eq!(output.raw, "draft");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn kickoff(&self, inputs: impl Into<Inputs>) -> Result<CrewOutput, CrewError> {
        let inputs = inputs.into();
        // A durable crew journals its kickoffs (feature `durable`).
        let extensions = &self.inner.plan.settings.extensions;
        if let Some(runner) = extensions
            .iter()
            .find(|extension| extension.runs_kickoffs())
        {
            return runner.kickoff(self, inputs).await;
        }
        self.kickoff_with(inputs, None).await
    }

    /// A kickoff, journaled in `journal` when it is a durable one (whose
    /// id its hooks then see).
    pub(crate) async fn kickoff_with(
        &self,
        inputs: Inputs,
        journal: Option<Arc<dyn KickoffJournal>>,
    ) -> Result<CrewOutput, CrewError> {
        // The work this kickoff starts in: a tool call of another kickoff,
        // whose events it names as its parent.
        let outer = KickoffDepth::current();
        let depth = outer.depth + 1;
        if depth > self.inner.max_kickoff_depth {
            return Err(CrewError::KickoffTooDeep {
                crew: self.inner.plan.settings.name.clone(),
                limit: self.inner.max_kickoff_depth,
            });
        }
        let nesting = Nesting {
            depth,
            tool_call: None,
        };
        KickoffDepth::scope(nesting, async {
            self.inner.check_global_filters_once()?;
            let violations = self
                .inner
                .attached_violations
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone();
            if !violations.is_empty() {
                return Err(CrewError::UnmatchedHookFilters(violations));
            }
            // A standalone agent's run is outside any crew: hooks see none.
            let crew = (!self.inner.plan.settings.standalone).then(|| {
                let crew = match &journal {
                    Some(journal) => self.with_kickoff_id(journal.kickoff_id()),
                    None => self.for_kickoff(),
                };
                Arc::new(crew) as Arc<dyn CrewInfo>
            });
            crate::run::executor::kickoff(&self.inner.plan, crew, inputs, outer.tool_call, journal)
                .await
        })
        .await
    }

    /// [`Crew::kickoff`] for synchronous code: runs the kickoff to its end
    /// and returns what it returns.
    ///
    /// Outside a tokio runtime it runs on a runtime of this thread's own
    /// (built at the first call, kept for the next). Inside one (a hook or
    /// a tool of a running kickoff, a `#[tokio::main]` program) it runs the
    /// kickoff on a thread of its own and waits for it there, so it never
    /// fails with "cannot start a runtime from within a runtime"; it does
    /// block the thread it is called on, so async code should `.await`
    /// [`Crew::kickoff`] instead.
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
    ///     .build()?;
    /// assert_eq!(crew.kickoff_blocking(())?.raw, "draft");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn kickoff_blocking(&self, inputs: impl Into<Inputs>) -> Result<CrewOutput, CrewError> {
        let inputs = inputs.into();
        // The depth of the kickoff this one nests in, if any: the new
        // thread does not see this task's or thread's.
        let depth = KickoffDepth::current();
        let kickoff = || {
            let kickoff = KickoffDepth::scope(depth, self.kickoff(inputs));
            on_thread_runtime(kickoff)
        };
        if tokio::runtime::Handle::try_current().is_err() {
            return kickoff();
        }
        std::thread::scope(|scope| {
            let thread = std::thread::Builder::new()
                .name(format!("kickoff-{}", self.inner.plan.settings.name))
                .spawn_scoped(scope, kickoff)
                .map_err(|error| CrewError::RuntimeUnavailable(error.to_string()))?;
            thread
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    }
}

impl CrewInfo for Crew {
    fn name(&self) -> &str {
        &self.inner.plan.settings.name
    }

    fn user(&self) -> Option<&str> {
        self.user.as_deref()
    }

    fn tenant(&self) -> Option<&str> {
        self.tenant.as_deref()
    }

    fn kickoff_id(&self) -> Option<&str> {
        self.kickoff_id.as_deref()
    }
}

impl CrewScope for Crew {
    fn crew_hooks(&self) -> &HookRegistry {
        &self.inner.plan.hooks.scoped
    }

    /// Its hook methods carry the crew's one name: the builder's, else the
    /// `#[crew_base]` type's (which the build took already), else `crew`.
    fn crew_name(&self) -> Option<&str> {
        Some(&self.inner.plan.settings.name)
    }

    /// Checks the filters of hook methods attached after the build, as the
    /// build checked the crew's other hooks: a warning each, and in strict
    /// mode every kickoff of this crew fails with them.
    fn scoped_hooks_attached(&self) {
        let inner = &self.inner;
        let warnings: Vec<FilterWarning> = inner
            .scoped_filter_warnings()
            .into_iter()
            .filter(|w| !inner.warnings.contains(w))
            .collect();
        report(&warnings);
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
            .field("name", &self.inner.plan.settings.name)
            .field(
                "agents",
                &self.agents().map(Agent::role).collect::<Vec<_>>(),
            )
            .field("tasks", &self.inner.plan.tasks.len())
            .field("process", &self.inner.process)
            .field("hooks", &self.inner.plan.hooks.scoped)
            .field("strict", &self.inner.strict)
            .field("redaction", &self.inner.plan.settings.redaction)
            .finish_non_exhaustive()
    }
}

/// The name of a crew given none (and built outside a `#[crew_base]`
/// type's `#[crew]` method).
pub(crate) const DEFAULT_CREW_NAME: &str = "crew";

/// The most tool calls of one model turn that run at the same time, unless
/// told otherwise ([`CrewBuilder::max_concurrent_tool_calls`]).
///
/// ```
/// assert_eq!(crew_runtime::DEFAULT_MAX_CONCURRENT_TOOL_CALLS, 16);
/// ```
pub const DEFAULT_MAX_CONCURRENT_TOOL_CALLS: usize = 16;

/// The most tool calls one model turn may ask for, unless told otherwise
/// ([`CrewBuilder::max_tool_calls_per_turn`]).
///
/// ```
/// assert_eq!(crew_runtime::DEFAULT_MAX_TOOL_CALLS_PER_TURN, 64);
/// ```
pub const DEFAULT_MAX_TOOL_CALLS_PER_TURN: usize = 64;

/// The longest tool observation the model gets, in bytes, unless told
/// otherwise ([`CrewBuilder::max_observation_bytes`]): 64 KiB.
///
/// ```
/// assert_eq!(crew_runtime::DEFAULT_MAX_OBSERVATION_BYTES, 64 * 1024);
/// ```
pub const DEFAULT_MAX_OBSERVATION_BYTES: usize = 64 * 1024;

/// How long a tool call may run, unless told otherwise
/// ([`CrewBuilder::tool_timeout`], [`Tool::with_timeout`](crate::Tool::with_timeout)).
///
/// ```
/// assert_eq!(crew_runtime::DEFAULT_TOOL_TIMEOUT.as_secs(), 120);
/// ```
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(120);

/// How long one model call may take, unless told otherwise
/// ([`CrewBuilder::model_timeout`]).
///
/// ```
/// assert_eq!(crew_runtime::DEFAULT_MODEL_TIMEOUT.as_secs(), 300);
/// ```
pub const DEFAULT_MODEL_TIMEOUT: Duration = Duration::from_secs(300);

/// How many kickoffs may be nested (a hook kicking off a crew, whose hook
/// kicks off a crew, …), the outermost one included, unless told otherwise
/// ([`CrewBuilder::max_kickoff_depth`]).
///
/// ```
/// assert_eq!(crew_runtime::DEFAULT_MAX_KICKOFF_DEPTH, 8);
/// ```
pub const DEFAULT_MAX_KICKOFF_DEPTH: usize = 8;

thread_local! {
    /// This thread's runtime for [`Crew::kickoff_blocking`].
    static THREAD_RUNTIME: std::cell::RefCell<Option<tokio::runtime::Runtime>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs `future` to its end on this thread's runtime (built on first use).
fn on_thread_runtime<F: std::future::Future<Output = Result<CrewOutput, CrewError>>>(
    future: F,
) -> Result<CrewOutput, CrewError> {
    THREAD_RUNTIME.with(|cell| {
        if cell.borrow().is_none() {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|error| CrewError::RuntimeUnavailable(error.to_string()))?;
            *cell.borrow_mut() = Some(runtime);
        }
        match &*cell.borrow() {
            Some(runtime) => runtime.block_on(future),
            None => Err(CrewError::RuntimeUnavailable(
                "the thread's runtime is gone".to_owned(),
            )),
        }
    })
}

/// Builds a [`Crew`]; start with [`Crew::builder`].
#[must_use = "call .build() to get the crew"]
pub struct CrewBuilder {
    /// The name given ([`CrewBuilder::name`]), if any.
    name: Option<String>,
    agents: Vec<Agent>,
    tasks: Vec<Task>,
    process: Process,
    global: Option<SharedRegistry>,
    human_input: Option<Arc<dyn HumanInputSource>>,
    human_input_timeout: Duration,
    tell_model_why_blocked: bool,
    strict: bool,
    verbose: bool,
    max_concurrent_tool_calls: usize,
    max_tool_calls_per_turn: usize,
    max_observation_bytes: usize,
    max_kickoff_depth: usize,
    tool_timeout: Duration,
    model_timeout: Duration,
    hook_timeout: Duration,
    redaction: Redaction,
    hooks: Vec<PendingHook>,
    callbacks: KickoffCallbacks,
    conversation: Option<Conversation>,
}

impl Default for CrewBuilder {
    fn default() -> Self {
        CrewBuilder {
            name: None,
            agents: Vec::new(),
            tasks: Vec::new(),
            process: Process::Sequential,
            global: None,
            human_input: None,
            human_input_timeout: DEFAULT_HUMAN_INPUT_TIMEOUT,
            tell_model_why_blocked: false,
            strict: false,
            verbose: false,
            max_concurrent_tool_calls: DEFAULT_MAX_CONCURRENT_TOOL_CALLS,
            max_tool_calls_per_turn: DEFAULT_MAX_TOOL_CALLS_PER_TURN,
            max_observation_bytes: DEFAULT_MAX_OBSERVATION_BYTES,
            max_kickoff_depth: DEFAULT_MAX_KICKOFF_DEPTH,
            tool_timeout: DEFAULT_TOOL_TIMEOUT,
            model_timeout: DEFAULT_MODEL_TIMEOUT,
            hook_timeout: DEFAULT_HOOK_TIMEOUT,
            redaction: Redaction::default(),
            hooks: Vec::new(),
            callbacks: KickoffCallbacks::default(),
            conversation: None,
        }
    }
}

impl CrewBuilder {
    /// The crew's name: what hooks see as `ctx.crew.name()`, what events,
    /// policies (`principal.crew`), warnings and
    /// [`explain`](Crew::explain) name it by. Without one, a crew built in
    /// a `#[crew_base]` type's `#[crew]` method is named after the type
    /// (`SupportDesk`), and any other crew is `crew`.
    ///
    /// ```
    /// use crew_runtime::prelude::*;
    ///
    /// let writer = Agent::builder("Writer").build();
    /// let task = Task::builder("Write").agent(&writer).build();
    /// let unnamed = Crew::builder().agent(writer.clone()).task(task.clone()).build()?;
    /// assert_eq!(unnamed.name(), "crew");
    /// let named = Crew::builder().name("newsroom").agent(writer).task(task).build()?;
    /// assert_eq!(named.name(), "newsroom");
    /// # Ok::<(), BuildError>(())
    /// ```
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
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

    /// How long `ctx.request_human_input` waits for an answer before it
    /// gives up with [`HumanInputError::TimedOut`](crate::HumanInputError::TimedOut)
    /// (and a gate written with `?` refuses the call), whatever the source
    /// (default [`DEFAULT_HUMAN_INPUT_TIMEOUT`](crate::DEFAULT_HUMAN_INPUT_TIMEOUT),
    /// five minutes). Every context the crew's calls get carries it.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use crew_runtime::prelude::*;
    ///
    /// let writer = Agent::builder("Writer").llm(Arc::new(ScriptedLlm::new().answer("draft"))).build();
    /// let crew = Crew::builder()
    ///     .agent(writer.clone())
    ///     .task(Task::builder("Write").agent(&writer).build())
    ///     .global_registry(Arc::new(HookRegistry::new()))
    ///     .human_input_timeout(Duration::from_secs(60))
    ///     .build()?;
    /// # let _ = crew;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn human_input_timeout(mut self, timeout: Duration) -> Self {
        self.human_input_timeout = timeout;
        self
    }

    /// Tells the agent why each of its blocked tool calls was blocked: the
    /// observation becomes `Tool execution blocked by hook. Tool: NAME.
    /// Reason: REASON` (the first blocking hook's reason, through the
    /// crew's redaction), so that the model can choose another way. Off by
    /// default: the agent then gets the guide's message alone, unless a
    /// hook's own abort asks for it ([`HookAborted::tell_model`](crate::HookAborted::tell_model)).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::prelude::*;
    ///
    /// let hooks = Arc::new(HookRegistry::new());
    /// hooks.register_hook(PRE_TOOL_CALL, |_: &mut ToolCallHookContext| -> Result<(), HookAborted> {
    ///     Err(HookAborted::new("the archive is read-only: search it instead", "archive-policy"))
    /// })?;
    /// let model = Arc::new(ScriptedLlm::new().call("delete_file", json!({"path": "a"})).answer("ok"));
    /// let delete = Tool::dynamic("delete_file", "Deletes", json!({"type": "object"}), |_| Ok::<_, String>(json!("gone")));
    /// let clerk = Agent::builder("Clerk").tool(delete).llm(model.clone()).build();
    /// let crew = Crew::builder()
    ///     .agent(clerk.clone())
    ///     .task(Task::builder("Tidy up").agent(&clerk).build())
    ///     .global_registry(hooks)
    ///     .tell_model_why_blocked(true)
    ///     .build()?;
    /// crew.kickoff_blocking(())?;
    /// assert_eq!(
    ///     model.requests()[1].observations(),
    ///     ["Tool execution blocked by hook. Tool: delete_file. Reason: the archive is read-only: search it instead"]
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn tell_model_why_blocked(mut self, tell: bool) -> Self {
        self.tell_model_why_blocked = tell;
        self
    }

    /// In strict mode, a misspelled hook filter is an error instead of a
    /// warning: a filter entry of the crew's own hooks that names no tool or
    /// role of the crew fails the build, and one of a global hook that names
    /// no tool or role of any crew built on that registry fails the
    /// kickoff ([`CrewError::UnmatchedHookFilters`]; checked at each
    /// kickoff until it passes). Several crews can be strict in one
    /// program: a global filter naming another crew's tool is fine once
    /// that crew is built.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::prelude::*;
    ///
    /// let hooks = Arc::new(HookRegistry::new());
    /// hooks.register_hook_with(
    ///     PRE_TOOL_CALL,
    ///     HookOptions::new().tools(["send_email"]),
    ///     |_: &mut ToolCallHookContext| {},
    /// )?;
    /// let writer = Agent::builder("Writer").llm(Arc::new(ScriptedLlm::new().answer("draft"))).build();
    /// let crew = Crew::builder()
    ///     .agent(writer.clone())
    ///     .task(Task::builder("Write").agent(&writer).build())
    ///     .global_registry(hooks.clone())
    ///     .strict(true)
    ///     .build()?;
    /// // No crew built on `hooks` has a `send_email` tool.
    /// assert!(matches!(crew.kickoff_blocking(()), Err(CrewError::UnmatchedHookFilters(_))));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// Prints every agent's turns, tool calls and hook decisions: a
    /// [`VerboseConsole`](crate::console::VerboseConsole) listens on the
    /// crew's bus ([`Crew::events`]), so it prints what the events carry,
    /// cleaned by the crew's redaction.
    ///
    /// ```
    /// use crew_runtime::prelude::*;
    ///
    /// let writer = Agent::builder("Writer").llm(std::sync::Arc::new(ScriptedLlm::new().answer("done"))).build();
    /// let crew = Crew::builder()
    ///     .agent(writer.clone())
    ///     .task(Task::builder("Write").agent(&writer).build())
    ///     .verbose(true)
    ///     .build()?;
    /// // The console is a listener like any other.
    /// assert!(crew.events().has_listeners());
    /// # Ok::<(), BuildError>(())
    /// ```
    pub fn verbose(mut self, verbose: bool) -> Self {
        self.verbose = verbose;
        self
    }

    /// The most tool calls of one model turn that run at the same time,
    /// each a task of the runtime (default
    /// [`DEFAULT_MAX_CONCURRENT_TOOL_CALLS`]; 1 runs them one after another
    /// in the kickoff's own task).
    pub fn max_concurrent_tool_calls(mut self, limit: usize) -> Self {
        self.max_concurrent_tool_calls = limit.max(1);
        self
    }

    /// The most tool calls one model turn may ask for (default
    /// [`DEFAULT_MAX_TOOL_CALLS_PER_TURN`]; at least 1). The calls past it
    /// are refused: each gets an observation telling the model so, and no
    /// hook and no tool runs for it.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::prelude::*;
    ///
    /// let llm = Arc::new(
    ///     ScriptedLlm::new()
    ///         .calls([("lookup", json!({})), ("lookup", json!({}))])
    ///         .answer("done"),
    /// );
    /// let lookup = Tool::dynamic("lookup", "Looks up", json!({"type": "object"}), |_| {
    ///     Ok::<_, String>(json!("found"))
    /// });
    /// let agent = Agent::builder("Clerk").tool(lookup).llm(llm.clone()).build();
    /// let crew = Crew::builder()
    ///     .agent(agent.clone())
    ///     .task(Task::builder("Look up").agent(&agent).build())
    ///     .global_registry(Arc::new(HookRegistry::new()))
    ///     .max_tool_calls_per_turn(1)
    ///     .build()?;
    /// crew.kickoff_blocking(())?;
    /// let observations = llm.requests()[1].observations().join("\n");
    /// assert!(observations.starts_with("found\nTool call refused"), "{observations}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn max_tool_calls_per_turn(mut self, limit: usize) -> Self {
        self.max_tool_calls_per_turn = limit.max(1);
        self
    }

    /// The longest tool observation the model gets, in bytes (default
    /// [`DEFAULT_MAX_OBSERVATION_BYTES`]). A longer one is cut on a
    /// character boundary, and a line saying how much was cut is added.
    /// The cut happens after the `POST_TOOL_CALL` chain: hooks see (and
    /// can redact) the whole result; the model, the verbose console and
    /// the `ToolUsageFinished` event get the cut one.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::prelude::*;
    ///
    /// let llm = Arc::new(ScriptedLlm::new().call("dump", json!({})).answer("done"));
    /// let dump = Tool::dynamic("dump", "Dumps", json!({"type": "object"}), |_| {
    ///     Ok::<_, String>(json!("x".repeat(100)))
    /// });
    /// let agent = Agent::builder("Clerk").tool(dump).llm(llm.clone()).build();
    /// let crew = Crew::builder()
    ///     .agent(agent.clone())
    ///     .task(Task::builder("Dump").agent(&agent).build())
    ///     .global_registry(Arc::new(HookRegistry::new()))
    ///     .max_observation_bytes(10)
    ///     .build()?;
    /// crew.kickoff_blocking(())?;
    /// let observation = llm.requests()[1].observations()[0].to_owned();
    /// assert!(observation.starts_with("xxxxxxxxxx\n[observation truncated: 90 of 100 bytes cut"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn max_observation_bytes(mut self, limit: usize) -> Self {
        self.max_observation_bytes = limit;
        self
    }

    /// How many kickoffs may be nested, the outermost one included
    /// (default [`DEFAULT_MAX_KICKOFF_DEPTH`]; at least 1): a hook that
    /// kicks off a crew from inside a run nests a kickoff, and a kickoff
    /// of this crew past the limit fails with
    /// [`CrewError::KickoffTooDeep`] instead of recursing until the stack
    /// overflows. Each level takes stack: keep the limit small.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::prelude::*;
    /// use crew_runtime::{EXECUTION_START, ExecutionStartContext};
    ///
    /// let writer = Agent::builder("Writer").llm(Arc::new(ScriptedLlm::new().answer("draft"))).build();
    /// let crew = Crew::builder()
    ///     .agent(writer.clone())
    ///     .task(Task::builder("Write").agent(&writer).build())
    ///     .global_registry(Arc::new(HookRegistry::new()))
    ///     .max_kickoff_depth(1)
    ///     .build()?;
    /// let inner = crew.clone();
    /// crew.hooks().register_hook(EXECUTION_START, move |_: &mut ExecutionStartContext| {
    ///     // A kickoff from a hook of a running kickoff: depth 2.
    ///     match inner.kickoff_blocking(()) {
    ///         Err(CrewError::KickoffTooDeep { limit: 1, .. }) => Ok(()),
    ///         other => Err(HookAborted::with_reason(format!("{other:?}"))),
    ///     }
    /// })?;
    /// assert_eq!(crew.kickoff_blocking(())?.raw, "draft");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn max_kickoff_depth(mut self, limit: usize) -> Self {
        self.max_kickoff_depth = limit.max(1);
        self
    }

    /// How long a tool call may run before the agent is told
    /// `Error executing tool: timed out after …` (default
    /// [`DEFAULT_TOOL_TIMEOUT`]); a tool's own
    /// [`Tool::with_timeout`](crate::Tool::with_timeout) comes first. The
    /// run goes on: the model decides what to do without the result.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use crew_runtime::prelude::*;
    ///
    /// let hang = Tool::dynamic("hang", "Never answers", json!({"type": "object"}), |_| async {
    ///     std::future::pending::<()>().await;
    ///     Ok::<_, String>(json!("unreachable"))
    /// });
    /// let llm = Arc::new(ScriptedLlm::new().call("hang", json!({})).answer("gave up"));
    /// let agent = Agent::builder("Clerk").tool(hang).llm(llm.clone()).build();
    /// let crew = Crew::builder()
    ///     .agent(agent.clone())
    ///     .task(Task::builder("Try").agent(&agent).build())
    ///     .global_registry(Arc::new(HookRegistry::new()))
    ///     .tool_timeout(Duration::from_millis(20))
    ///     .build()?;
    /// crew.kickoff_blocking(())?;
    /// assert_eq!(
    ///     llm.requests()[1].observations(),
    ///     ["Error executing tool: timed out after 20ms"]
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn tool_timeout(mut self, timeout: Duration) -> Self {
        self.tool_timeout = timeout;
        self
    }

    /// How long one model call may take before the kickoff fails with
    /// [`LlmError::Timeout`](crate::llm::LlmError::Timeout) (default
    /// [`DEFAULT_MODEL_TIMEOUT`]), whatever the model client's own
    /// timeout is.
    pub fn model_timeout(mut self, timeout: Duration) -> Self {
        self.model_timeout = timeout;
        self
    }

    /// How long an `async` hook may run before it is cut short (default
    /// [`DEFAULT_HOOK_TIMEOUT`], 30 s); a hook's own limit
    /// ([`HookOptions::timeout`], `timeout_ms = N` in the attributes) comes
    /// first. A hook cut short counts as a panic of that hook: a fail-open
    /// hook's effect is dropped and the call goes on, a fail-closed one
    /// refuses. Time spent waiting for a person in `request_human_input`
    /// does not count (the question has its own deadline,
    /// [`human_input_timeout`](Self::human_input_timeout)), and a hook cut
    /// short after it asked a person refuses whatever its failure mode.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use crew_runtime::prelude::*;
    ///
    /// async fn stuck(_: &mut ToolCallHookContext) -> Result<(), HookAborted> {
    ///     std::future::pending().await
    /// }
    ///
    /// let registry = Arc::new(HookRegistry::new());
    /// registry.register_async_hook_with(PRE_TOOL_CALL, HookOptions::new().fail_closed(), stuck)?;
    /// let send = Tool::dynamic("send", "Sends", json!({"type": "object"}), |_| Ok::<_, String>(json!("sent")));
    /// let llm = Arc::new(ScriptedLlm::new().call("send", json!({})).answer("done"));
    /// let agent = Agent::builder("Clerk").tool(send).llm(llm.clone()).build();
    /// let crew = Crew::builder()
    ///     .agent(agent.clone())
    ///     .task(Task::builder("Send").agent(&agent).build())
    ///     .global_registry(registry)
    ///     .hook_timeout(Duration::from_millis(20))
    ///     .build()?;
    /// crew.kickoff_blocking(())?;
    /// assert_eq!(llm.requests()[1].observations(), ["Tool execution blocked by hook. Tool: send"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn hook_timeout(mut self, timeout: Duration) -> Self {
        self.hook_timeout = timeout;
        self
    }

    /// Cleans everything that leaves the crew with `redactor`: a
    /// [`SecretRedactor`](crate::guards::SecretRedactor), or a [`Redact`]
    /// of your own.
    ///
    /// Where a `POST_TOOL_CALL` redaction hook cleans tool results only,
    /// the crew's redaction applies at every exit of its runs:
    ///
    /// - the model's requests: the system and task messages (task context
    ///   and kickoff inputs included), the model's own text, each tool
    ///   observation after the POST chain, and, when model-call hooks are
    ///   registered, every message as the hooks left it;
    /// - the events of the crew's calls, on its bus and the global one:
    ///   `ToolUsageStarted`, `ToolExecutionStarted` (the input a PRE hook
    ///   left, credentials it injected included), `ToolUsageFinished`,
    ///   `ToolUsageError`, `ToolFailureDetected`,
    ///   `HookDispatched` (abort reasons) and `HookPanicked` (messages);
    /// - the `tracing` lines of the crew's calls, and the verbose console;
    /// - the [`CrewError`](crate::CrewError) a kickoff returns, and its
    ///   output (`raw`, each task's `raw` and texts);
    /// - the messages of contained tool and hook panics (never printed on
    ///   stderr by the panic hook, with or without a redaction).
    ///
    /// Hooks still see the crew's texts as they are (a `POST_TOOL_CALL`
    /// hook sees the tool's result before the redaction), and so does the
    /// tool (its input, credentials included). A redactor that panics
    /// withholds the text it was cleaning.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::guards::SecretRedactor;
    /// use crew_runtime::prelude::*;
    ///
    /// let lookup = Tool::dynamic("lookup", "Looks a user up", json!({"type": "object"}), |_| {
    ///     Ok::<_, String>(json!("user ada, password: hunter2"))
    /// });
    /// let llm = Arc::new(
    ///     ScriptedLlm::new()
    ///         .call("lookup", json!({"user": "ada"}))
    ///         .answer_with(|request| {
    ///             request.messages.last().map(|m| m.content.clone()).unwrap_or_default()
    ///         }),
    /// );
    /// let analyst = Agent::builder("Analyst").tool(lookup).llm(llm.clone()).build();
    /// let crew = Crew::builder()
    ///     .agent(analyst.clone())
    ///     .task(Task::builder("Check ada").agent(&analyst).build())
    ///     .global_registry(Arc::new(HookRegistry::new()))
    ///     .redact_with(SecretRedactor::new())
    ///     .build()?;
    /// let output = crew.kickoff_blocking(())?;
    /// assert_eq!(llm.requests()[1].observations(), ["user ada, password: [REDACTED]"]);
    /// assert_eq!(output.raw, "user ada, password: [REDACTED]");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn redact_with(mut self, redactor: impl Redact + 'static) -> Self {
        self.redaction = Redaction::new(Arc::new(redactor));
        self
    }

    /// Adds a callback that runs on the inputs of every kickoff before
    /// anything else of it (CrewAI's `before_kickoff_callbacks`): before
    /// `EXECUTION_START`, and so before any hook or event. What it returns
    /// is what the kickoff goes on with, the `EXECUTION_START` and `INPUT`
    /// hooks and the tasks' `{placeholders}` included. Several run in the
    /// order added, each given what the one before returned.
    ///
    /// It runs on the kickoff's task: keep it quick (a hook at
    /// `EXECUTION_START` can be `async`). A callback that panics stops the
    /// kickoff with [`CrewError::CallbackPanicked`] before it has begun
    /// (no hook runs and no event is reported); the panic is contained.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::prelude::*;
    ///
    /// let llm = Arc::new(ScriptedLlm::new().answer("Rust is fast."));
    /// let writer = Agent::builder("Writer").llm(llm.clone()).build();
    /// let crew = Crew::builder()
    ///     .agent(writer.clone())
    ///     .task(Task::builder("Write about {topic}").agent(&writer).build())
    ///     .global_registry(Arc::new(HookRegistry::new()))
    ///     .before_kickoff(|inputs| {
    ///         let topic = inputs.get("topic").unwrap_or("Rust").trim().to_lowercase();
    ///         inputs.with("topic", topic)
    ///     })
    ///     .build()?;
    /// crew.kickoff_blocking([("topic", "  RUST ")])?;
    /// assert!(llm.requests()[0].task_prompt().unwrap().contains("Write about rust"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn before_kickoff<F>(mut self, callback: F) -> Self
    where
        F: Fn(Inputs) -> Inputs + Send + Sync + 'static,
    {
        self.callbacks.before.push(Box::new(callback));
        self
    }

    /// Adds a callback that runs on the output of every kickoff whose
    /// tasks completed (CrewAI's `after_kickoff_callbacks`): after the
    /// `OUTPUT` hooks, before `EXECUTION_END`. What it returns is what the
    /// `EXECUTION_END` hooks see and, through the crew's redaction
    /// ([`redact_with`](Self::redact_with)), what `kickoff` returns and
    /// `CrewKickoffCompleted` carries. Several run in the order added,
    /// each given what the one before returned.
    ///
    /// It runs on the kickoff's task: keep it quick. A callback that
    /// panics fails the kickoff with [`CrewError::CallbackPanicked`] (the
    /// panic is contained): `EXECUTION_END` sees the kickoff failed, and
    /// `CrewKickoffFailed` is reported.
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
    ///     .after_kickoff(|mut output| {
    ///         output.raw = format!("{} (checked)", output.raw);
    ///         output
    ///     })
    ///     .build()?;
    /// assert_eq!(crew.kickoff_blocking(())?.raw, "draft (checked)");
    ///
    /// let writer = Agent::builder("Writer").llm(Arc::new(ScriptedLlm::new().answer("draft"))).build();
    /// let failing = Crew::builder()
    ///     .agent(writer.clone())
    ///     .task(Task::builder("Write").agent(&writer).build())
    ///     .global_registry(Arc::new(HookRegistry::new()))
    ///     .after_kickoff(|_| panic!("the archive is offline"))
    ///     .build()?;
    /// let error = failing.kickoff_blocking(()).unwrap_err();
    /// assert!(matches!(error, CrewError::CallbackPanicked { which: "after_kickoff", position: 1, .. }));
    /// assert!(error.to_string().contains("the archive is offline"), "{error}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn after_kickoff<F>(mut self, callback: F) -> Self
    where
        F: Fn(CrewOutput) -> CrewOutput + Send + Sync + 'static,
    {
        self.callbacks.after.push(Box::new(callback));
        self
    }

    /// Makes the crew the carrier of a standalone agent's run, which
    /// leaves its conversation in `conversation`.
    pub(crate) fn standalone(mut self, conversation: Conversation) -> Self {
        self.conversation = Some(conversation);
        self
    }

    /// Registers a hook of this crew only (on its own registry, when the
    /// crew is built), at any point.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::prelude::*;
    /// use crew_runtime::{POST_STEP, StepContext};
    ///
    /// let writer = Agent::builder("Writer").llm(Arc::new(ScriptedLlm::new().answer("draft"))).build();
    /// let crew = Crew::builder()
    ///     .agent(writer.clone())
    ///     .task(Task::builder("Write").agent(&writer).build())
    ///     .global_registry(Arc::new(HookRegistry::new()))
    ///     .hook(POST_STEP, |ctx: &mut StepContext| Some(format!("{} (reviewed)", ctx.payload)))
    ///     .build()?;
    /// assert_eq!(crew.kickoff_blocking(())?.raw, "draft (reviewed)");
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
        self.hooks.push(Box::new(move |scope| {
            register_crew_hook(
                scope.registry,
                point,
                scope.crew,
                HookStyle::On,
                options,
                hook,
            )?;
            Ok(())
        }));
        self
    }

    /// Registers `register`'s hooks on the crew at its build, in order
    /// among the crew's own hooks: how an integration's builder method
    /// (`policies`, say) adds its hook.
    #[allow(dead_code, reason = "used by the integrations compiled in, if any")]
    pub(crate) fn pending_hook(mut self, register: PendingHook) -> Self {
        self.hooks.push(register);
        self
    }

    /// Registers an `async` hook of this crew only (for approvals that wait
    /// on a person, a chat or a web reply): an `async fn`, or a closure
    /// wrapped in [`async_hook`](crate::async_hook).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::prelude::*;
    /// use crew_runtime::{POST_STEP, StepContext};
    ///
    /// async fn review(ctx: &mut StepContext) -> Option<String> {
    ///     Some(format!("{} (reviewed)", ctx.payload))
    /// }
    /// let writer = Agent::builder("Writer").llm(Arc::new(ScriptedLlm::new().answer("draft"))).build();
    /// let crew = Crew::builder()
    ///     .agent(writer.clone())
    ///     .task(Task::builder("Write").agent(&writer).build())
    ///     .global_registry(Arc::new(HookRegistry::new()))
    ///     .async_hook(POST_STEP, review)
    ///     .build()?;
    /// assert_eq!(crew.kickoff_blocking(())?.raw, "draft (reviewed)");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn async_hook<P, F, R>(self, point: P, hook: F) -> Self
    where
        P: Point,
        F: for<'c> AsyncHookFn<'c, P::Context, R>,
        R: HookReturn<P> + 'static,
    {
        self.async_hook_with(point, HookOptions::new(), hook)
    }

    /// Registers an `async` hook of this crew only, with filters, a name or
    /// fail-closed behavior (see [`async_hook`](Self::async_hook)). A
    /// filter the point does not take fails the build.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::prelude::*;
    ///
    /// async fn mail_policy(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
    ///     // Ask a policy service, await a permit...
    ///     if ctx.tool_input.contains_key("bcc") {
    ///         return Err(HookAborted::new("no blind copies", "mail-policy"));
    ///     }
    ///     Ok(())
    /// }
    /// let writer = Agent::builder("Writer").llm(Arc::new(ScriptedLlm::new().answer("draft"))).build();
    /// let crew = Crew::builder()
    ///     .agent(writer.clone())
    ///     .task(Task::builder("Write").agent(&writer).build())
    ///     .global_registry(Arc::new(HookRegistry::new()))
    ///     .async_hook_with(PRE_TOOL_CALL, HookOptions::new().name("mail-policy"), mail_policy)
    ///     .build()?;
    /// # let _ = crew;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn async_hook_with<P, F, R>(mut self, point: P, options: HookOptions, hook: F) -> Self
    where
        P: Point,
        F: for<'c> AsyncHookFn<'c, P::Context, R>,
        R: HookReturn<P> + 'static,
    {
        self.hooks.push(Box::new(move |scope| {
            register_crew_async_hook(scope.registry, point, scope.crew, options, hook)?;
            Ok(())
        }));
        self
    }

    /// Builds the crew: resolves each task's agent and context, checks
    /// tool names, registers the crew's hooks on a fresh registry, and
    /// checks the filters of those hooks against the crew's tools and roles
    /// (a warning each, or an error in strict mode). The global hooks'
    /// filters are checked at the first kickoff, once every crew of the
    /// program is likely built (see [`Crew::kickoff`]).
    ///
    /// A task's agent must be the crew's agent of that role: the same
    /// value (a clone of the one given to the crew), or an identical
    /// definition of it (same role, goal, backstory, limits and verbosity,
    /// the same model instance, tools of the same names, descriptions and
    /// schemas), which is what a `#[crew_base]` `#[agent]` method returns
    /// each time it is called. Any other agent with a crew agent's role is
    /// [`BuildError::TaskAgentNotInCrew`]: the crew would otherwise run its
    /// own agent in its place. An agent whose role no crew agent has joins
    /// the crew, after the crew's own: it is the very agent the task was
    /// given, so nothing is substituted (the reference runs such a task
    /// with its own agent too).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::prelude::*;
    ///
    /// let writer = Agent::builder("Writer").build();
    /// let impostor = Agent::builder("Writer").goal("Something else").build();
    /// let error = Crew::builder()
    ///     .agent(writer)
    ///     .task(Task::builder("Write").agent(&impostor).build())
    ///     .build()
    ///     .expect_err("the task's agent is not the crew's Writer");
    /// assert!(matches!(error, BuildError::TaskAgentNotInCrew { index: 1, .. }));
    /// ```
    pub fn build(self) -> Result<Crew, BuildError> {
        if self.tasks.is_empty() {
            return Err(BuildError::NoTasks);
        }
        let (agents, tasks) = resolve_agents(self.agents, self.tasks)?;
        let agents = agents
            .into_iter()
            .map(prepare_agent)
            .collect::<Result<Vec<_>, _>>()?;
        let known = KnownNames {
            tools: agents
                .iter()
                .flat_map(|a| a.tools.iter().map(|t| t.name().to_owned()))
                .collect(),
            roles: agents.iter().map(|a| a.agent.role().to_owned()).collect(),
        };
        let name = self
            .name
            .or_else(|| hooks_core::__private::crew_base_being_built().map(str::to_owned))
            .unwrap_or_else(|| DEFAULT_CREW_NAME.to_owned());
        let scoped = Arc::new(HookRegistry::new());
        // The verbose console listens on the crew's bus, like any listener.
        if self.verbose {
            crate::console::VerboseConsole::new().attach(scoped.events());
        } else if agents.iter().any(|a| a.agent.verbose()) {
            let verbose = agents.iter().filter(|a| a.agent.verbose());
            crate::console::VerboseConsole::new()
                .agents(verbose.map(|a| a.agent.role().to_owned()))
                .attach(scoped.events());
        }
        let global = match self.global {
            Some(given) => {
                crate::registry::warn_if_attribute_hooks_left_out(&given);
                given
            }
            None => global_registry().into(),
        };
        let extensions = {
            let mut tools: Vec<&Tool> = Vec::new();
            for tool in agents.iter().flat_map(|a| a.tools.iter().map(|t| &**t)) {
                if !tools.iter().any(|known| known.name() == tool.name()) {
                    tools.push(tool);
                }
            }
            let scope = BuildScope::new(&scoped, &name, tools, &global);
            for register in self.hooks {
                register(&scope)?;
            }
            let mut extensions: Vec<Arc<dyn CrewExtension>> = Vec::new();
            for at_build in crate::AT_BUILD {
                extensions.extend(at_build(&scope)?);
            }
            extensions
        };
        let settings = RunSettings {
            name,
            human_input: self
                .human_input
                .unwrap_or_else(|| Arc::new(crate::TerminalInput::new())),
            human_input_timeout: self.human_input_timeout,
            tell_model_why_blocked: self.tell_model_why_blocked,
            max_concurrent_tool_calls: self.max_concurrent_tool_calls,
            max_tool_calls_per_turn: self.max_tool_calls_per_turn,
            max_observation_bytes: self.max_observation_bytes,
            tool_timeout: self.tool_timeout,
            model_timeout: self.model_timeout,
            redaction: self.redaction.clone(),
            extensions,
            standalone: self.conversation.is_some(),
        };
        let mut inner = CrewInner {
            plan: Arc::new(Plan {
                settings: Arc::new(settings),
                conversation: self.conversation,
                hooks: CrewHooks {
                    global,
                    scoped,
                    hook_timeout: self.hook_timeout,
                    redaction: self.redaction,
                },
                agents: agents.into_iter().map(Arc::new).collect(),
                tasks,
                callbacks: self.callbacks,
            }),
            process: self.process,
            max_kickoff_depth: self.max_kickoff_depth,
            strict: self.strict,
            known,
            warnings: Vec::new(),
            global_filters_checked: AtomicBool::new(false),
            attached_violations: std::sync::Mutex::new(Vec::new()),
        };
        check_tool_names(
            &inner.plan.agents,
            &[&inner.plan.hooks.scoped, &inner.plan.hooks.global],
        )?;
        let warnings = inner.scoped_filter_warnings();
        report(&warnings);
        if inner.strict && !warnings.is_empty() {
            return Err(BuildError::UnmatchedHookFilters(warnings));
        }
        inner.warnings = warnings;
        // Only a crew that was built counts: its tools and roles are what
        // the global hooks' filters may name.
        record_crew(&inner.plan.hooks.global, &inner.known);
        Ok(Crew {
            inner: Arc::new(inner),
            user: None,
            tenant: None,
            kickoff_id: None,
        })
    }
}

/// The crew's agents (its own, then those that join through a task) and
/// its tasks with their agent and context resolved to indices.
fn resolve_agents(
    own: Vec<Agent>,
    given: Vec<Task>,
) -> Result<(Vec<Agent>, Vec<CrewTask>), BuildError> {
    let mut agents: Vec<Agent> = Vec::with_capacity(own.len());
    for agent in own {
        if agents.iter().any(|a| a.role() == agent.role()) {
            return Err(BuildError::DuplicateRole {
                role: agent.role().to_owned(),
            });
        }
        agents.push(agent);
    }
    let own_agents = agents.len();
    let mut tasks = Vec::with_capacity(given.len());
    for (position, task) in given.into_iter().enumerate() {
        let agent = task_agent(&mut agents, own_agents, position, &task)?;
        let context = task_context(&tasks, position, &task)?;
        tasks.push(CrewTask {
            task,
            agent,
            context,
        });
    }
    Ok((agents, tasks))
}

/// The index of the task's agent among the crew's: the crew's agent of
/// that role when it is the same agent, or the task's own agent, which
/// joins the crew, when no crew agent has its role.
fn task_agent(
    agents: &mut Vec<Agent>,
    own_agents: usize,
    position: usize,
    task: &Task,
) -> Result<usize, BuildError> {
    let Some(task_agent) = task.agent() else {
        return Err(BuildError::TaskWithoutAgent {
            index: position + 1,
            task: task.description().to_owned(),
        });
    };
    match agents.iter().position(|a| a.role() == task_agent.role()) {
        Some(index) if agents[index].is_same_agent(task_agent) => Ok(index),
        Some(index) => Err(BuildError::TaskAgentNotInCrew {
            index: position + 1,
            task: task.description().to_owned(),
            role: task_agent.role().to_owned(),
            joined: index >= own_agents,
        }),
        None => {
            agents.push(task_agent.clone());
            Ok(agents.len() - 1)
        }
    }
}

/// The indices of the earlier tasks whose outputs are the task's context.
fn task_context(
    earlier: &[CrewTask],
    position: usize,
    task: &Task,
) -> Result<Vec<usize>, BuildError> {
    let Some(ids) = task.context_ids() else {
        // No context named: every earlier task, as the sequential process
        // passes them.
        return Ok((0..position).collect());
    };
    ids.iter()
        .map(|id| {
            earlier
                .iter()
                .position(|t| t.task.id() == *id)
                .ok_or_else(|| BuildError::ContextNotEarlier {
                    index: position + 1,
                    task: task.description().to_owned(),
                })
        })
        .collect()
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

/// Refuses a crew whose tool names a hook filter cannot be trusted with
/// (SPEC rule 22), reading each name as its source spelled it:
/// - a name with a control, invisible or bidirectional-control character,
///   or with letters of mixed scripts that normalization cannot read as
///   ASCII: [`BuildError::SuspiciousToolName`];
/// - a name that looks like an entry of a `tools` filter of `registries`
///   (the same UTS #39 skeleton) without being it, or like the name of
///   another tool of the crew: [`BuildError::LookAlikeToolName`].
///
/// Look-alike letters of other scripts need no refusal: normalization
/// already reads `dеlete_file` (Cyrillic `е`) as `delete_file`, so the
/// filter on `delete_file` matches it. An ASCII look-alike (`de1ete_file`,
/// `delete_fiIe`) is a name of its own that only resembles the filtered
/// one, which only a refusal makes safe.
pub(crate) fn check_tool_names(
    agents: &[Arc<CrewAgent>],
    registries: &[&HookRegistry],
) -> Result<(), BuildError> {
    struct Named<'a> {
        role: &'a str,
        spelled: &'a str,
        normalized: &'a str,
        skeleton: ToolNameSkeleton,
    }
    let mut tools: Vec<Named<'_>> = Vec::new();
    for agent in agents {
        for tool in &agent.tools {
            if let Err(problem) = check_tool_name(tool.spelled_name()) {
                return Err(BuildError::SuspiciousToolName {
                    role: agent.agent.role().to_owned(),
                    tool: tool.spelled_name().to_owned(),
                    normalized: tool.name().to_owned(),
                    problem,
                });
            }
            tools.push(Named {
                role: agent.agent.role(),
                spelled: tool.spelled_name(),
                normalized: tool.name(),
                skeleton: ToolNameSkeleton::of(tool.spelled_name()),
            });
        }
    }
    let look_alike =
        |tool: &Named<'_>, looks_like: &str, hook: Option<&str>| BuildError::LookAlikeToolName {
            role: tool.role.to_owned(),
            tool: tool.spelled.to_owned(),
            normalized: tool.normalized.to_owned(),
            looks_like: looks_like.to_owned(),
            hook: hook.map(str::to_owned),
        };
    for (position, tool) in tools.iter().enumerate() {
        for other in &tools[..position] {
            if other.normalized != tool.normalized && other.skeleton.looks_like(&tool.skeleton) {
                return Err(look_alike(tool, other.normalized, None));
            }
        }
    }
    if tools.is_empty() {
        return Ok(());
    }
    for registry in registries {
        for point in InterceptionPoint::ALL {
            for hook in registry.get_hooks(point) {
                for entry in &hook.tools {
                    let skeleton = ToolNameSkeleton::of(entry);
                    let spoof = tools.iter().find(|tool| {
                        tool.normalized != entry.as_str() && tool.skeleton.looks_like(&skeleton)
                    });
                    if let Some(tool) = spoof {
                        return Err(look_alike(tool, entry, Some(&hook.name)));
                    }
                }
            }
        }
    }
    Ok(())
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
            .field("before_kickoff", &self.callbacks.before.len())
            .field("after_kickoff", &self.callbacks.after.len())
            .field("strict", &self.strict)
            .field("redaction", &self.redaction)
            .finish_non_exhaustive()
    }
}
