//! What can go wrong building a crew or running one.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use hooks_core::{HookAborted, InterceptionPoint, RegisterError, ToolNameProblem};

use crate::check::FilterWarning;
use crate::llm::LlmError;
use crate::redaction::Redaction;

/// Gives error types a `Debug` that reads like their `Display`, as
/// anyhow's errors do: `main() -> Result<(), Box<dyn Error>>` prints an
/// error's `Debug`, and a person reading it wants the message (which
/// already names the source), not a dump of the enum's fields.
macro_rules! debug_as_display {
    ($($error:ty),+ $(,)?) => {$(
        impl ::std::fmt::Debug for $error {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                ::std::fmt::Display::fmt(self, f)
            }
        }
    )+};
}
#[cfg_attr(
    not(feature = "policy"),
    allow(
        unused_imports,
        reason = "the policy integration's error uses it too, when compiled in"
    )
)]
pub(crate) use debug_as_display;

debug_as_display!(BuildError, CrewError);

/// Why a crew could not be built.
///
/// ```
/// use crew_runtime::prelude::*;
///
/// assert_eq!(Crew::builder().build().unwrap_err(), BuildError::NoTasks);
///
/// let first = Agent::builder("Writer").build();
/// let second = Agent::builder("Writer").build();
/// let error = Crew::builder()
///     .agents([first.clone(), second])
///     .task(Task::builder("Write").agent(&first).build())
///     .build()
///     .unwrap_err();
/// assert_eq!(error, BuildError::DuplicateRole { role: "Writer".into() });
/// ```
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// The crew has no task.
    #[error("a crew needs at least one task: add one with Crew::builder().task(..)")]
    NoTasks,
    /// A task has no agent.
    #[error(
        "task {index} ({task:?}) has no agent: give it one with Task::builder(..).agent(&agent)"
    )]
    TaskWithoutAgent {
        /// The task's position (1-based).
        index: usize,
        /// The task's description.
        task: String,
    },
    /// Two agents share a role.
    #[error(
        "two agents of the crew have the role `{role}`: roles name agents in hook filters \
         and in tasks, so each agent of a crew needs its own"
    )]
    DuplicateRole {
        /// The role.
        role: String,
    },
    /// An agent has two tools with one (normalized) name.
    #[error(
        "agent `{role}` has two tools named `{tool}` (after normalization): the model could not \
         tell them apart; rename one"
    )]
    DuplicateTool {
        /// The agent's role.
        role: String,
        /// The tool name.
        tool: String,
    },
    /// A tool's name normalizes to nothing.
    #[error(
        "agent `{role}` has a tool whose name is empty after normalization (described as \
         {description:?}): name tools with letters or digits"
    )]
    EmptyToolName {
        /// The agent's role.
        role: String,
        /// The tool's description, to find it by.
        description: String,
    },
    /// An agent may take no model turn at all.
    #[error("agent `{role}` has max_iter 0, so it could never ask its model: use at least 1")]
    ZeroMaxIter {
        /// The agent's role.
        role: String,
    },
    /// A task takes context from a task that does not run before it.
    #[error(
        "task {index} ({task:?}) takes context from a task that does not run before it in this \
         crew: list that task earlier in the crew"
    )]
    ContextNotEarlier {
        /// The task's position (1-based).
        index: usize,
        /// The task's description.
        task: String,
    },
    /// A task's agent is not the crew's agent of that role, but another
    /// agent with the same role: the crew would run its own agent in its
    /// place.
    #[error(
        "task {index} ({task:?}) is given an agent `{role}` that is not the {}agent `{role}` \
         of this crew, only one with the same role (it was built separately and differs in \
         goal, backstory, tools, model or limits), so the crew would run its own in its place: \
         give the task the crew's agent (the same value or a clone of it), or give the two \
         agents different roles",
        if *.joined { "earlier tasks' " } else { "" }
    )]
    TaskAgentNotInCrew {
        /// The task's position (1-based).
        index: usize,
        /// The task's description.
        task: String,
        /// The role the two agents share.
        role: String,
        /// Whether the crew's agent of that role is not one given to the
        /// crew but one that joined through an earlier task.
        joined: bool,
    },
    /// A crew hook could not be registered.
    #[error("a crew hook could not be registered: {0}")]
    Register(#[from] RegisterError),
    /// An integration (a cargo feature such as `policy`) refused the
    /// crew: a policy set that does not fit the crew's tools, say. Read
    /// the integration's own error with
    /// [`IntegrationError::downcast_ref`].
    #[error(transparent)]
    Integration(#[from] IntegrationError),
    /// Strict mode: filter entries of the crew's own hooks name no tool or
    /// role of the crew.
    #[error(
        "strict mode: {} filter entr{} of this crew's hooks name{} no tool or role of the crew:\n{}",
        .0.len(),
        if .0.len() == 1 { "y" } else { "ies" },
        if .0.len() == 1 { "s" } else { "" },
        bullet_list(.0)
    )]
    UnmatchedHookFilters(Vec<FilterWarning>),
    /// A tool's name, as its source spelled it, hides what it is: an
    /// invisible, bidirectional-control or control character, or letters
    /// of mixed scripts (see [`check_tool_name`](crate::check_tool_name)). A hook
    /// filter could not be trusted to catch it.
    #[error(
        "agent `{role}` has a tool named \"{}\" (normalized `{normalized}`) that a hook filter \
         cannot be trusted to catch: {problem}; rename the tool (an MCP server's tool: leave it \
         out with McpServerBuilder::only, or fix the server)",
        spell_out(.tool)
    )]
    SuspiciousToolName {
        /// The agent's role.
        role: String,
        /// The tool's name as its source spelled it.
        tool: String,
        /// The tool's normalized name.
        normalized: String,
        /// What is wrong with it.
        problem: ToolNameProblem,
    },
    /// A tool's name looks like a name a hook filters on, or like another
    /// tool of the crew, without being it: `de1ete_file` next to a filter
    /// on `delete_file` (their UTS #39 skeletons match, see
    /// [`ToolNameSkeleton`](crate::ToolNameSkeleton)). The hook would not run for it.
    #[error(
        "agent `{role}` has a tool named \"{}\" (normalized `{normalized}`) that looks like \
         `{looks_like}`, {}, but is not it, so {}; rename the tool (an MCP server's tool: leave \
         it out with McpServerBuilder::only, or give the server a prefix)",
        spell_out(.tool),
        match .hook {
            Some(hook) => format!("which hook `{hook}` filters on"),
            None => "another tool of the crew".to_owned(),
        },
        if .hook.is_some() { "the hook would not run for it" } else { "the two cannot be told apart" }
    )]
    LookAlikeToolName {
        /// The agent's role.
        role: String,
        /// The tool's name as its source spelled it.
        tool: String,
        /// The tool's normalized name.
        normalized: String,
        /// The name it looks like (normalized): a filter entry or another
        /// tool's name.
        looks_like: String,
        /// The hook whose filter names `looks_like`; `None` when
        /// `looks_like` is another tool of the crew.
        hook: Option<String>,
    },
}

/// A name with every character that is not printable ASCII written as
/// `\u{..}`, so that what an error shows is what the name holds.
fn spell_out(name: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if c.is_ascii_graphic() || c == ' ' {
            out.push(c);
        } else {
            // Writing to a String cannot fail.
            let _ = write!(out, "\\u{{{:04x}}}", u32::from(c));
        }
    }
    out
}

/// An error of an integration (a cargo feature such as `policy`), as
/// [`BuildError::Integration`] and [`CrewError::Integration`] carry it: which
/// integration, what it refused, and its own error, which
/// [`downcast_ref`](Self::downcast_ref) gives back. The core's errors carry
/// it without naming the integration's types. Its text is shown as it is,
/// unredacted: an integration puts in it what the program configured it
/// with (a policy text, tool names), never a run's text.
///
/// ```
/// use std::num::ParseIntError;
/// use crew_runtime::{BuildError, IntegrationError};
///
/// let refused = "ten".parse::<u32>().unwrap_err();
/// let error = BuildError::from(IntegrationError::new("limits", "the crew's limits were refused", refused.clone()));
/// assert_eq!(error.to_string(), "the crew's limits were refused:\ninvalid digit found in string");
/// let BuildError::Integration(integration) = &error else { panic!("an integration's error") };
/// assert_eq!(integration.integration(), "limits");
/// assert_eq!(integration.downcast_ref::<ParseIntError>(), Some(&refused));
/// assert_eq!(error.clone(), error, "clones are equal, as the integration's errors are");
/// ```
#[derive(Clone)]
pub struct IntegrationError {
    integration: &'static str,
    refused: &'static str,
    source: Arc<dyn std::error::Error + Send + Sync>,
    /// Whether two sources are equal errors of the integration's type.
    same: fn(&DynError, &DynError) -> bool,
}

type DynError = dyn std::error::Error + Send + Sync;

impl IntegrationError {
    /// The error `source` of the integration `integration` (its feature's
    /// name), shown as `refused`, a colon, and `source` on the next line.
    ///
    /// ```
    /// use crew_runtime::IntegrationError;
    ///
    /// let error = IntegrationError::new("limits", "the crew's limits were refused", std::fmt::Error);
    /// assert_eq!(error.to_string(), "the crew's limits were refused:\nan error occurred when formatting an argument");
    /// ```
    pub fn new<E>(integration: &'static str, refused: &'static str, source: E) -> IntegrationError
    where
        E: std::error::Error + Eq + Send + Sync + 'static,
    {
        fn same<E: std::error::Error + Eq + 'static>(a: &DynError, b: &DynError) -> bool {
            matches!((a.downcast_ref::<E>(), b.downcast_ref::<E>()), (Some(a), Some(b)) if a == b)
        }
        IntegrationError {
            integration,
            refused,
            source: Arc::new(source),
            same: same::<E>,
        }
    }

    /// The integration's name: its cargo feature's (`policy`).
    ///
    /// ```
    /// use crew_runtime::IntegrationError;
    ///
    /// assert_eq!(IntegrationError::new("limits", "refused", std::fmt::Error).integration(), "limits");
    /// ```
    pub fn integration(&self) -> &'static str {
        self.integration
    }

    /// The integration's own error, if it is an `E` (for the `policy`
    /// feature: a `crew_runtime::policy::PolicyError`).
    ///
    /// ```
    /// use crew_runtime::IntegrationError;
    ///
    /// let error = IntegrationError::new("limits", "refused", std::fmt::Error);
    /// assert_eq!(error.downcast_ref::<std::fmt::Error>(), Some(&std::fmt::Error));
    /// assert!(error.downcast_ref::<std::num::ParseIntError>().is_none());
    /// ```
    pub fn downcast_ref<E: std::error::Error + 'static>(&self) -> Option<&E> {
        self.source.downcast_ref::<E>()
    }
}

impl PartialEq for IntegrationError {
    fn eq(&self, other: &Self) -> bool {
        self.integration == other.integration
            && self.refused == other.refused
            && (self.same)(&*self.source, &*other.source)
    }
}

impl Eq for IntegrationError {}

impl fmt::Debug for IntegrationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IntegrationError")
            .field("integration", &self.integration)
            .field("refused", &self.refused)
            .field("source", &self.source)
            .finish()
    }
}

impl fmt::Display for IntegrationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:\n{}", self.refused, self.source)
    }
}

impl std::error::Error for IntegrationError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.source)
    }
}

fn bullet_list(warnings: &[FilterWarning]) -> String {
    warnings
        .iter()
        .map(|w| format!("  - {w}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Why a kickoff did not finish.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CrewError {
    /// A task uses `{placeholder}`s (in its description, expected output
    /// or output file) that the kickoff inputs do not give. Checked for
    /// every task before any runs.
    #[error(
        "task {index} ({task:?}) uses {} that kickoff was not given; inputs given: {}",
        names(.missing),
        names_or_none(.provided)
    )]
    MissingInputs {
        /// The task's position (1-based).
        index: usize,
        /// The task's description, as written.
        task: String,
        /// The placeholders without a value.
        missing: Vec<String>,
        /// The names of the inputs given.
        provided: Vec<String>,
    },
    /// A `POST_TOOL_CALL` hook aborted the run (after the tool ran).
    #[error("the run was aborted after `{tool}` (agent `{agent}`) ran: {abort}")]
    Aborted {
        /// The normalized tool name of the call whose POST chain aborted.
        tool: String,
        /// The role of the agent that made the call.
        agent: String,
        /// The hook's reason and source.
        #[source]
        abort: HookAborted,
    },
    /// A hook at a point other than `POST_TOOL_CALL` stopped the run: an
    /// abort at `EXECUTION_START`, `INPUT`, `PRE_STEP`, `POST_STEP`,
    /// `POST_MODEL_CALL` or `OUTPUT`, or a block at `PRE_MODEL_CALL`.
    /// (`EXECUTION_END` hooks observe: their aborts are reported and
    /// ignored.)
    #[error("the run was stopped at {point}{}: {abort}", agent_suffix(.agent))]
    AbortedAt {
        /// Where the hook ran.
        point: InterceptionPoint,
        /// The agent concerned, at the step and model-call points.
        agent: Option<String>,
        /// The hook's reason and source.
        #[source]
        abort: HookAborted,
    },
    /// An agent's model failed.
    #[error("agent `{agent}`: the model failed: {source}")]
    Model {
        /// The agent's role.
        agent: String,
        /// What the model said.
        #[source]
        source: LlmError,
    },
    /// Strict mode: hook filter entries name nothing the hooks can meet:
    /// global hooks' entries that no crew built on the registry has
    /// (checked at kickoff, until it passes), or entries of hook methods
    /// that `#[crew_base]` attached to the crew that the crew lacks.
    #[error(
        "strict mode: {} hook filter entr{} name{} nothing the hook can ever meet:\n{}",
        .0.len(),
        if .0.len() == 1 { "y" } else { "ies" },
        if .0.len() == 1 { "s" } else { "" },
        bullet_list(.0)
    )]
    UnmatchedHookFilters(Vec<FilterWarning>),
    /// An integration (a cargo feature such as `policy`) stopped the
    /// kickoff: in strict mode, policies registered for every crew that
    /// name tools no crew built on the registry has, say. Read the
    /// integration's own error with [`IntegrationError::downcast_ref`].
    #[error(transparent)]
    Integration(#[from] IntegrationError),
    /// A kickoff started from a hook (of a kickoff started from a hook, …)
    /// would nest past the crew's limit.
    #[error(
        "crew `{crew}` was kicked off from inside {limit} nested kickoff(s), its limit \
         (CrewBuilder::max_kickoff_depth): a hook that kicks off a crew for every call it sees \
         recurses without end; kick off from a narrower hook, or raise the limit"
    )]
    KickoffTooDeep {
        /// The crew that was kicked off.
        crew: String,
        /// The most kickoffs that may be nested, the outermost included.
        limit: usize,
    },
    /// A budget (feature `budget`) refused a model call before it started
    /// (or a tool call, when the budget ends the kickoff then): the call
    /// would have taken the budget past its limit (or its counters could
    /// not be reached, with `used` the limit). Nothing of the call was
    /// reserved in any budget.
    #[error("budget `{budget}` ({key}) refused a call: {used} of {limit} used")]
    BudgetExceeded {
        /// The budget's name.
        budget: String,
        /// What it counts per (`user:carol`, `kickoff:…`).
        key: String,
        /// Its limit.
        limit: u64,
        /// What its window held.
        used: u64,
    },
    /// [`Crew::kickoff_blocking`](crate::Crew::kickoff_blocking) could not
    /// get a runtime or a thread to run the kickoff on (the system refused
    /// one).
    #[error("no runtime to run the kickoff on: {0}")]
    RuntimeUnavailable(String),
    /// A task's output could not be written to its
    /// [`output_file`](crate::TaskBuilder::output_file): a folder or file
    /// that cannot be created or written, or inputs that would take the
    /// path out of its folder. The task fails, and the kickoff with it.
    #[error("task `{task}` could not write its output to {}: {message}", .path.display())]
    OutputFile {
        /// The task's name.
        task: String,
        /// The file, inputs filled in.
        path: PathBuf,
        /// What kind of failure it was.
        kind: std::io::ErrorKind,
        /// What went wrong.
        message: String,
    },
    /// A standalone agent ([`Agent::kickoff`](crate::Agent::kickoff)) was
    /// given no message.
    #[error("agent `{agent}` was kicked off with no message: give it a prompt or a conversation")]
    NoMessages {
        /// The agent's role.
        agent: String,
    },
    /// A standalone agent ([`Agent::kickoff`](crate::Agent::kickoff)) cannot
    /// run as it is: what would fail a crew's build with it (two tools of
    /// one name, `max_iter` 0, a tool name that cannot be trusted).
    #[error("agent `{agent}` cannot run: {source}")]
    InvalidAgent {
        /// The agent's role.
        agent: String,
        /// What is wrong with it.
        #[source]
        source: Box<BuildError>,
    },
    /// A hook registered after the crew was built filters on a name one of
    /// the crew's tools only looks like (or a tool's name hides what it
    /// is): [`BuildError::LookAlikeToolName`] or
    /// [`BuildError::SuspiciousToolName`], found at the first kickoff.
    #[error("{0}")]
    UntrustedToolName(BuildError),
    /// A kickoff callback ([`CrewBuilder::before_kickoff`](crate::CrewBuilder::before_kickoff),
    /// [`CrewBuilder::after_kickoff`](crate::CrewBuilder::after_kickoff))
    /// panicked. The panic was contained and the kickoff stopped there: a
    /// `before_kickoff` panic before anything of the kickoff ran, an
    /// `after_kickoff` panic after its tasks (`EXECUTION_END` then sees the
    /// kickoff failed with this error, and `CrewKickoffFailed` reports it).
    #[error(
        "{which} callback #{position} (in the order added to the crew) panicked: {message}; \
         the kickoff was stopped. Fix the callback, or have it return what it was given when \
         it cannot do its work"
    )]
    CallbackPanicked {
        /// Which list it is in: `before_kickoff` or `after_kickoff`.
        which: &'static str,
        /// Its place in that list, from 1, in the order added.
        position: usize,
        /// The panic's message.
        message: String,
    },
    /// A durable kickoff found a tool call that began before its process
    /// went and whose result was never recorded, and nothing could tell
    /// whether its effect happened: the tool is neither read-only nor
    /// idempotent, and has no reconciler that could say (SPEC §13). The
    /// kickoff ended `in_doubt` without running it again; a person checks
    /// the effect (with the call's idempotency key, which the tool got).
    #[error(
        "kickoff {kickoff} is in doubt: the call {call_id} of `{tool}` began before its process \
         stopped and its result was never recorded; {why}. Nothing was run again: check by \
         hand whether its effect happened (idempotency key {key})"
    )]
    InDoubt {
        /// The kickoff's id.
        kickoff: Arc<str>,
        /// The tool.
        tool: String,
        /// The call's id, as the model gave it (made unique in its turn).
        call_id: String,
        /// The call's idempotency key, as the tool got it.
        key: String,
        /// Why it could not be settled.
        why: Box<str>,
    },
    /// A durable kickoff waited for a person longer than its crew parks
    /// after (`Durable::park_after`), and was parked (SPEC §13): its
    /// question stays open, no process holds it, and once the question is
    /// answered (or its deadline passes) a resumer in any process takes it
    /// up and runs it on. Nothing failed: the kickoff's end is reported by
    /// the run that finishes it.
    #[error(
        "kickoff {kickoff_id} is parked: it waits for a person's answer, held by no process; \
         a resumer takes it up once the question is answered (or its deadline passes)"
    )]
    Parked {
        /// The kickoff's id.
        kickoff_id: Arc<str>,
    },
}

impl CrewError {
    /// The hook's abort, when a hook ended the run.
    pub fn abort(&self) -> Option<&HookAborted> {
        match self {
            CrewError::Aborted { abort, .. } | CrewError::AbortedAt { abort, .. } => Some(abort),
            _ => None,
        }
    }

    /// The point whose hook ended the run, if a hook did.
    ///
    /// ```
    /// use crew_runtime::{CrewError, HookAborted, InterceptionPoint};
    /// let error = CrewError::AbortedAt {
    ///     point: InterceptionPoint::EXECUTION_START,
    ///     agent: None,
    ///     abort: HookAborted::new("no topic", "input-check"),
    /// };
    /// assert_eq!(error.aborted_at(), Some(InterceptionPoint::EXECUTION_START));
    /// assert_eq!(error.abort().map(|a| a.source.as_str()), Some("input-check"));
    /// ```
    pub fn aborted_at(&self) -> Option<InterceptionPoint> {
        match self {
            CrewError::Aborted { .. } => Some(InterceptionPoint::POST_TOOL_CALL),
            CrewError::AbortedAt { point, .. } => Some(*point),
            _ => None,
        }
    }
}

impl CrewError {
    /// The error as it may leave a crew: every text that can quote a
    /// secret (abort reasons and sources, tool names, task descriptions, a
    /// model server's answer) cleaned by the crew's redaction.
    pub(crate) fn redacted(self, redaction: &Redaction) -> CrewError {
        if !redaction.is_set() {
            return self;
        }
        match self {
            CrewError::MissingInputs {
                index,
                task,
                missing,
                provided,
            } => CrewError::MissingInputs {
                index,
                task: redaction.owned(task),
                missing,
                provided,
            },
            CrewError::Aborted { tool, agent, abort } => CrewError::Aborted {
                tool: redaction.owned(tool),
                agent,
                abort: redaction.abort(abort),
            },
            CrewError::AbortedAt {
                point,
                agent,
                abort,
            } => CrewError::AbortedAt {
                point,
                agent,
                abort: redaction.abort(abort),
            },
            CrewError::Model { agent, source } => CrewError::Model {
                agent,
                source: redacted_llm_error(source, redaction),
            },
            CrewError::UntrustedToolName(error) => CrewError::UntrustedToolName(match error {
                BuildError::SuspiciousToolName {
                    role,
                    tool,
                    normalized,
                    problem,
                } => BuildError::SuspiciousToolName {
                    role,
                    tool: redaction.owned(tool),
                    normalized: redaction.owned(normalized),
                    problem,
                },
                BuildError::LookAlikeToolName {
                    role,
                    tool,
                    normalized,
                    looks_like,
                    hook,
                } => BuildError::LookAlikeToolName {
                    role,
                    tool: redaction.owned(tool),
                    normalized: redaction.owned(normalized),
                    looks_like: redaction.owned(looks_like),
                    hook,
                },
                other => other,
            }),
            CrewError::OutputFile {
                task,
                path,
                kind,
                message,
            } => CrewError::OutputFile {
                task: redaction.owned(task),
                path: PathBuf::from(redaction.owned(path.to_string_lossy().into_owned())),
                kind,
                message: redaction.owned(message),
            },
            CrewError::CallbackPanicked {
                which,
                position,
                message,
            } => CrewError::CallbackPanicked {
                which,
                position,
                message: redaction.owned(message),
            },
            CrewError::InDoubt {
                kickoff,
                tool,
                call_id,
                key,
                why,
            } => CrewError::InDoubt {
                kickoff,
                tool: redaction.owned(tool),
                call_id: redaction.owned(call_id),
                key,
                why: redaction.owned(why.into_string()).into_boxed_str(),
            },
            CrewError::BudgetExceeded {
                budget,
                key,
                limit,
                used,
            } => CrewError::BudgetExceeded {
                budget,
                key: redaction.owned(key),
                limit,
                used,
            },
            // Names and numbers the program chose, no text of a run.
            other @ (CrewError::UnmatchedHookFilters(_)
            | CrewError::NoMessages { .. }
            | CrewError::InvalidAgent { .. }
            | CrewError::KickoffTooDeep { .. }
            | CrewError::RuntimeUnavailable(_)
            | CrewError::Parked { .. }) => other,
            // What the program configured the integration with (its
            // policy text and tool names, say), no text of a run.
            other @ CrewError::Integration(_) => other,
        }
    }
}

fn redacted_llm_error(error: LlmError, redaction: &Redaction) -> LlmError {
    match error {
        LlmError::Http { status, body } => LlmError::Http {
            status,
            body: redaction.owned(body),
        },
        LlmError::Transport(text) => LlmError::Transport(redaction.owned(text)),
        LlmError::InvalidResponse(text) => LlmError::InvalidResponse(redaction.owned(text)),
        LlmError::Config(text) => LlmError::Config(redaction.owned(text)),
        LlmError::Panicked(text) => LlmError::Panicked(redaction.owned(text)),
        other @ (LlmError::Timeout(_) | LlmError::ScriptExhausted { .. }) => other,
    }
}

impl From<CrewError> for HookAborted {
    /// Lets `?` in a hook stop on a runtime error (a kickoff started from
    /// the hook, say); the source is the hook's name.
    fn from(error: CrewError) -> Self {
        HookAborted::with_reason(error.to_string())
    }
}

impl From<LlmError> for HookAborted {
    /// Lets `?` in a hook stop on a model error; the source is the hook's
    /// name.
    fn from(error: LlmError) -> Self {
        HookAborted::with_reason(error.to_string())
    }
}

fn agent_suffix(agent: &Option<String>) -> String {
    agent
        .as_deref()
        .map(|role| format!(" (agent `{role}`)"))
        .unwrap_or_default()
}

fn names(list: &[String]) -> String {
    list.iter()
        .map(|name| format!("{{{name}}}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn names_or_none(list: &[String]) -> String {
    if list.is_empty() {
        "none".to_owned()
    } else {
        list.join(", ")
    }
}
