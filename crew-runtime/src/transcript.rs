//! A transcript of a crew run: what the model asked, what each hook decided
//! and what the agent saw, as readable lines in the order it happened.
//!
//! A [`Transcript`] is a listener: attach one to a crew and run the crew as
//! usual. Nothing in it is written by hand; its lines come from
//!
//! - the model, wrapped by [`Transcript::model`]: each task the agent is
//!   given, each tool call the model asks for, what the agent saw as the
//!   result of each call (the observation handed back to the model), and
//!   the final answer;
//! - the crew's event bus, listened to by [`Transcript::attach`]: every hook
//!   dispatch with its outcome (and the reason and source of a block), every
//!   tool that really ran with the arguments it received, tool failures and
//!   contained hook panics;
//! - hooks that have something to report, through [`note`], at any of the
//!   ten points.
//!
//! The model's turns start at the left, with the agent's role in brackets;
//! what hooks and tools did during a turn is indented under it. Print the
//! lines once the run is over ([`Transcript::lines`]) or as they come
//! ([`Transcript::echo`]), or keep them in a test to check what a run did.
//! Lines hold text the model and the tools chose: print them through
//! [`console::print_line`](crate::console::print_line), which escapes
//! control characters.
//!
//! ```
//! use std::sync::Arc;
//! use crew_runtime::prelude::*;
//! use crew_runtime::transcript::Transcript;
//! use crew_runtime::transcript::note;
//!
//! let path = json!({"type": "object", "properties": {"path": {"type": "string"}}});
//! let read_file = Tool::dynamic("read_file", "Reads a file", path.clone(), |_| {
//!     Ok::<_, String>(json!("the db password is hunter2"))
//! });
//! let delete_file = Tool::dynamic("delete_file", "Deletes a file", path, |_| {
//!     Ok::<_, String>(json!("deleted"))
//! });
//! // The model follows a script: read the file, try to delete it, answer.
//! let model = ScriptedLlm::new()
//!     .call("read_file", json!({"path": "notes.txt"}))
//!     .call("delete_file", json!({"path": "notes.txt"}))
//!     .answer("I was not allowed to delete notes.txt.");
//!
//! let transcript = Transcript::new();
//! let assistant = Agent::builder("Assistant")
//!     .tool(read_file)
//!     .tool(delete_file)
//!     // Wrapped, so that the transcript reads each turn of the model.
//!     .llm(transcript.model("Assistant", Arc::new(model)))
//!     .build();
//! let crew = Crew::builder()
//!     .agent(assistant.clone())
//!     .task(Task::builder("Tidy up notes.txt").agent(&assistant).build())
//!     .global_registry(Arc::new(HookRegistry::new()))
//!     .hook(PRE_TOOL_CALL, |ctx: &mut ToolCallHookContext| {
//!         if ctx.tool_name() != "delete_file" {
//!             return Ok(());
//!         }
//!         note(ctx, "policy: files are never deleted");
//!         Err(HookAborted::new("delete_file is not allowed", "policy"))
//!     })
//!     .build()?;
//! // Listens to the crew's events: hook decisions, tools that ran.
//! transcript.attach(&crew);
//!
//! crew.kickoff_blocking(())?;
//! for line in transcript.lines() {
//!     crew_runtime::console::print_line(&line);
//! }
//! assert_eq!(
//!     transcript.lines(),
//!     [
//!         "[Assistant] task: Tidy up notes.txt",
//!         r#"[Assistant] model asks: read_file {"path":"notes.txt"}"#,
//!         "    PRE_TOOL_CALL  let the call through (1 hook ran)",
//!         r#"    tool read_file runs with {"path":"notes.txt"}"#,
//!         "[Assistant] agent saw: the db password is hunter2",
//!         r#"[Assistant] model asks: delete_file {"path":"notes.txt"}"#,
//!         "    policy: files are never deleted",
//!         "    PRE_TOOL_CALL  blocked the call: delete_file is not allowed [source: policy] (1 hook ran)",
//!         "[Assistant] agent saw: Tool execution blocked by hook. Tool: delete_file",
//!         "[Assistant] model answers: I was not allowed to delete notes.txt.",
//!     ]
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::any::Any;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use hooks_core::events::{
    HookDispatchedEvent, HookPanickedEvent, ToolUsageErrorEvent, ToolUsageStartedEvent,
};
use hooks_core::{
    CrewInfo, Event, ExecutionEndContext, ExecutionStartContext, HookInfo, HookOrigin, HookStyle,
    InputContext, InterceptionPoint, LlmCallHookContext, OutputContext, StepContext,
    ToolCallHookContext,
};
use serde_json::{Map, Value};

use crate::crew::Crew;
use crate::llm::{ChatMessage, Llm, LlmError, LlmRequest, ModelTurn, Role};

/// How far lines about hooks and tools are indented under the model's turn
/// they belong to.
const DETAIL: &str = "    ";

/// What a transcript has gathered so far.
#[derive(Default)]
struct State {
    lines: Vec<String>,
    events: Vec<Event>,
    quiet_events: bool,
    echo: bool,
    masked_keys: Vec<String>,
}

/// The lines of a crew run, gathered from the model, the crew's events and
/// the hooks, in the order things happened (see the [module](self) for what
/// the lines say).
///
/// Cloning is cheap: clones write to the same transcript, from any thread.
///
/// ```
/// use std::sync::Arc;
/// use crew_runtime::prelude::*;
/// use crew_runtime::transcript::Transcript;
///
/// let transcript = Transcript::new();
/// let llm = transcript.model("Writer", Arc::new(ScriptedLlm::new().answer("Done.")));
/// let writer = Agent::builder("Writer").llm(llm).build();
/// let crew = Crew::builder()
///     .agent(writer.clone())
///     .task(Task::builder("Write a haiku").agent(&writer).build())
///     .global_registry(Arc::new(HookRegistry::new()))
///     .build()?;
/// transcript.attach(&crew);
/// crew.kickoff_blocking(())?;
/// assert_eq!(
///     transcript.lines(),
///     ["[Writer] task: Write a haiku", "[Writer] model answers: Done."]
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Default)]
pub struct Transcript {
    state: Arc<Mutex<State>>,
}

impl Transcript {
    /// An empty transcript, which writes one line per event it receives and
    /// prints nothing by itself.
    ///
    /// ```
    /// use crew_runtime::prelude::*;
    /// use crew_runtime::transcript::Transcript;
    ///
    /// let transcript = Transcript::new();
    /// assert!(transcript.lines().is_empty());
    /// ```
    pub fn new() -> Self {
        Transcript::default()
    }

    /// Keeps events (see [`Transcript::events`]) without writing a line for
    /// each: for turns whose calls run concurrently, where events arrive in
    /// whatever order the threads finish and a line per event would read as
    /// noise. The model's lines are still written.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::prelude::*;
    /// use crew_runtime::transcript::Transcript;
    ///
    /// let transcript = Transcript::new().quiet_events();
    /// let echo = Tool::dynamic("echo", "Echoes", json!({"type": "object"}), |args| {
    ///     Ok::<_, String>(args)
    /// });
    /// let model = ScriptedLlm::new().call("echo", json!({"text": "hi"})).answer("done");
    /// let agent = Agent::builder("Echoer")
    ///     .tool(echo)
    ///     .llm(transcript.model("Echoer", Arc::new(model)))
    ///     .build();
    /// let crew = Crew::builder()
    ///     .agent(agent.clone())
    ///     .task(Task::builder("Echo").agent(&agent).build())
    ///     .global_registry(Arc::new(HookRegistry::new()))
    ///     .build()?;
    /// transcript.attach(&crew);
    /// crew.kickoff_blocking(())?;
    /// // No indented lines: the events were kept, not written.
    /// assert!(transcript.lines().iter().all(|line| line.starts_with('[')));
    /// assert!(!transcript.events().is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn quiet_events(self) -> Self {
        self.lock().quiet_events = true;
        self
    }

    /// Also prints each line as it is added, through the runtime's
    /// [`console`](crate::console) (which a terminal prompt pauses, and
    /// which escapes control characters): for runs a person follows live,
    /// such as runs that ask a person to approve calls.
    ///
    /// ```
    /// use crew_runtime::prelude::*;
    /// use crew_runtime::transcript::Transcript;
    ///
    /// let transcript = Transcript::new().echo();
    /// transcript.line("printed now, and kept");
    /// assert_eq!(transcript.lines(), ["printed now, and kept"]);
    /// ```
    pub fn echo(self) -> Self {
        self.lock().echo = true;
        self
    }

    /// Shows `key` of tool arguments as `"…"`: for values that change on
    /// every run (a start time a hook stashed), so that a transcript stays
    /// the same from run to run.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::prelude::*;
    /// use crew_runtime::transcript::Transcript;
    ///
    /// let transcript = Transcript::new().mask_input("started_at");
    /// let echo = Tool::dynamic("echo", "Echoes", json!({"type": "object"}), |args| {
    ///     Ok::<_, String>(args)
    /// });
    /// let model = ScriptedLlm::new()
    ///     .call("echo", json!({"text": "hi", "started_at": 1234}))
    ///     .answer("done");
    /// let agent = Agent::builder("Echoer").tool(echo).llm(Arc::new(model)).build();
    /// let crew = Crew::builder()
    ///     .agent(agent.clone())
    ///     .task(Task::builder("Echo").agent(&agent).build())
    ///     .global_registry(Arc::new(HookRegistry::new()))
    ///     .build()?;
    /// transcript.attach(&crew);
    /// crew.kickoff_blocking(())?;
    /// assert_eq!(
    ///     transcript.lines(),
    ///     [r#"    tool echo runs with {"started_at":"…","text":"hi"}"#]
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn mask_input(self, key: impl Into<String>) -> Self {
        self.lock().masked_keys.push(key.into());
        self
    }

    /// Wraps `llm` so that each request and answer of the agent with this
    /// `role` is written down: the task, what the agent saw from its last
    /// tool calls, the calls the model asks for, and its final answer. Give
    /// the agent the model this returns.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::prelude::*;
    /// use crew_runtime::transcript::Transcript;
    ///
    /// let transcript = Transcript::new();
    /// let clock = Tool::dynamic("clock", "Tells the time", json!({"type": "object"}), |_| {
    ///     Ok::<_, String>(json!("noon"))
    /// });
    /// let model = ScriptedLlm::new().call("clock", json!({})).answer("It is noon.");
    /// let agent = Agent::builder("Clerk")
    ///     .tool(clock)
    ///     .llm(transcript.model("Clerk", Arc::new(model)))
    ///     .build();
    /// let crew = Crew::builder()
    ///     .agent(agent.clone())
    ///     .task(Task::builder("Tell the time").agent(&agent).build())
    ///     .global_registry(Arc::new(HookRegistry::new()))
    ///     .build()?;
    /// // Not attached: the model's side only.
    /// crew.kickoff_blocking(())?;
    /// assert_eq!(
    ///     transcript.lines(),
    ///     [
    ///         "[Clerk] task: Tell the time",
    ///         "[Clerk] model asks: clock {}",
    ///         "[Clerk] agent saw: noon",
    ///         "[Clerk] model answers: It is noon.",
    ///     ]
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn model(&self, role: impl Into<String>, llm: Arc<dyn Llm>) -> Arc<dyn Llm> {
        Arc::new(NarratedModel {
            role: role.into(),
            inner: llm,
            transcript: self.clone(),
            failed: Mutex::new(None),
        })
    }

    /// Listens to `crew`'s event bus (hook dispatches, tool usage), and
    /// receives the [`note`]s of hooks running for this crew's calls, steps
    /// and kickoffs. Attach once per crew: each call adds a listener. The
    /// attachment goes with the crew.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::prelude::*;
    /// use crew_runtime::transcript::Transcript;
    ///
    /// let transcript = Transcript::new();
    /// let wipe = Tool::dynamic("wipe", "Wipes the disk", json!({"type": "object"}), |_| {
    ///     Ok::<_, String>(json!("wiped"))
    /// });
    /// let model = ScriptedLlm::new().call("wipe", json!({})).answer("I could not.");
    /// let agent = Agent::builder("Janitor").tool(wipe).llm(Arc::new(model)).build();
    /// let crew = Crew::builder()
    ///     .agent(agent.clone())
    ///     .task(Task::builder("Clean up").agent(&agent).build())
    ///     .global_registry(Arc::new(HookRegistry::new()))
    ///     .hook(PRE_TOOL_CALL, |_: &mut ToolCallHookContext| {
    ///         Err::<(), _>(HookAborted::new("never", "safety"))
    ///     })
    ///     .build()?;
    /// transcript.attach(&crew);
    /// crew.kickoff_blocking(())?;
    /// assert_eq!(
    ///     transcript.lines(),
    ///     ["    PRE_TOOL_CALL  blocked the call: never [source: safety] (1 hook ran)"]
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn attach(&self, crew: &Crew) {
        Attached::of(crew).add(&self.state);
        // The listener holds the transcript, and goes with the crew.
        let sink = self.clone();
        crew.events().subscribe(move |event| sink.record(event));
    }

    /// Adds a line of the program's own: a heading, a result, a blank line
    /// between two runs.
    ///
    /// ```
    /// use crew_runtime::prelude::*;
    /// use crew_runtime::transcript::Transcript;
    ///
    /// let transcript = Transcript::new();
    /// transcript.line("First run:");
    /// assert_eq!(transcript.lines(), ["First run:"]);
    /// ```
    pub fn line(&self, line: impl Into<String>) {
        let line = line.into();
        let echo = {
            let mut state = self.lock();
            state.lines.push(line.clone());
            state.echo
        };
        if echo {
            crate::console::print_line(&line);
        }
    }

    /// The lines so far, of this transcript and all its clones.
    ///
    /// ```
    /// use crew_runtime::prelude::*;
    /// use crew_runtime::transcript::Transcript;
    ///
    /// let transcript = Transcript::new();
    /// transcript.clone().line("written by a clone");
    /// assert_eq!(transcript.lines(), ["written by a clone"]);
    /// ```
    pub fn lines(&self) -> Vec<String> {
        self.lock().lines.clone()
    }

    /// Every event received so far from the crews it is attached to, in the
    /// order they arrived.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::prelude::*;
    /// use crew_runtime::transcript::Transcript;
    ///
    /// let transcript = Transcript::new();
    /// let echo = Tool::dynamic("echo", "Echoes", json!({"type": "object"}), |args| {
    ///     Ok::<_, String>(args)
    /// });
    /// let model = ScriptedLlm::new().call("echo", json!({"text": "hi"})).answer("done");
    /// let agent = Agent::builder("Echoer").tool(echo).llm(Arc::new(model)).build();
    /// let crew = Crew::builder()
    ///     .agent(agent.clone())
    ///     .task(Task::builder("Echo").agent(&agent).build())
    ///     .global_registry(Arc::new(HookRegistry::new()))
    ///     .build()?;
    /// transcript.attach(&crew);
    /// crew.kickoff_blocking(())?;
    /// let tools_run = transcript
    ///     .events()
    ///     .iter()
    ///     .filter(|event| matches!(event, Event::ToolExecutionStarted(_)))
    ///     .count();
    /// assert_eq!(tools_run, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn events(&self) -> Vec<Event> {
        self.lock().events.clone()
    }

    /// The [`HookDispatched`](Event::HookDispatched) events received so far:
    /// what each point's chain decided, with the reason and source of a
    /// block.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use crew_runtime::prelude::*;
    /// use crew_runtime::transcript::Transcript;
    ///
    /// let transcript = Transcript::new();
    /// let wipe = Tool::dynamic("wipe", "Wipes the disk", json!({"type": "object"}), |_| {
    ///     Ok::<_, String>(json!("wiped"))
    /// });
    /// let model = ScriptedLlm::new().call("wipe", json!({})).answer("I could not.");
    /// let agent = Agent::builder("Janitor").tool(wipe).llm(Arc::new(model)).build();
    /// let crew = Crew::builder()
    ///     .agent(agent.clone())
    ///     .task(Task::builder("Clean up").agent(&agent).build())
    ///     .global_registry(Arc::new(HookRegistry::new()))
    ///     .hook(PRE_TOOL_CALL, |_: &mut ToolCallHookContext| {
    ///         Err::<(), _>(HookAborted::new("never", "safety"))
    ///     })
    ///     .build()?;
    /// transcript.attach(&crew);
    /// crew.kickoff_blocking(())?;
    /// let dispatches = transcript.dispatches();
    /// assert_eq!(dispatches.len(), 1);
    /// assert_eq!(dispatches[0].outcome, "aborted");
    /// assert_eq!(dispatches[0].abort_source.as_deref(), Some("safety"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn dispatches(&self) -> Vec<HookDispatchedEvent> {
        self.lock()
            .events
            .iter()
            .filter_map(|event| match event {
                Event::HookDispatched(dispatched) => Some(dispatched.clone()),
                _ => None,
            })
            .collect()
    }

    fn record(&self, event: &Event) {
        let line = {
            let mut state = self.lock();
            state.events.push(event.clone());
            if state.quiet_events {
                return;
            }
            describe_event(event, &state.masked_keys)
        };
        if let Some(line) = line {
            self.line(line);
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A listener that panicked mid-push leaves at worst a missing line.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl std::fmt::Debug for Transcript {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.lock();
        f.debug_struct("Transcript")
            .field("lines", &state.lines.len())
            .field("events", &state.events.len())
            .finish_non_exhaustive()
    }
}

/// Lets a hook add a line to the transcript of the crew whose call, step or
/// kickoff it is looking at, the way it would write to a log. Outside a
/// crew, or for a crew no transcript is [attached](Transcript::attach) to,
/// the line is dropped.
///
/// The line appears indented, before the dispatch line of the hook's point
/// (a point's event is emitted once its whole chain has run).
///
/// ```
/// use std::sync::Arc;
/// use crew_runtime::prelude::*;
/// use crew_runtime::{transcript::Transcript, OUTPUT, OutputContext};
/// use crew_runtime::transcript::note;
///
/// let transcript = Transcript::new();
/// let writer = Agent::builder("Writer")
///     .llm(Arc::new(ScriptedLlm::new().answer("A haiku.")))
///     .build();
/// let crew = Crew::builder()
///     .agent(writer.clone())
///     .task(Task::builder("Write a haiku").agent(&writer).build())
///     .global_registry(Arc::new(HookRegistry::new()))
///     .hook(OUTPUT, |ctx: &mut OutputContext| {
///         note(ctx, format!("output hook: {} characters", ctx.output.raw.len()));
///     })
///     .build()?;
/// transcript.attach(&crew);
/// crew.kickoff_blocking(())?;
/// assert_eq!(
///     transcript.lines(),
///     [
///         "    output hook: 8 characters",
///         "    OUTPUT         went on (1 hook ran)",
///     ]
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn note(ctx: &impl HookCrew, line: impl AsRef<str>) {
    let Some(crew) = ctx.hook_crew() else {
        return;
    };
    let state = crew
        .hooks()
        .extensions()
        .get::<Attached>()
        .and_then(|attached| attached.last());
    if let Some(state) = state {
        Transcript { state }.line(format!("{DETAIL}{}", line.as_ref()));
    }
}

/// The context of a hook at any of the ten points, as [`note`] reads it:
/// the crew the hook runs for. Implemented by every point's context; a
/// helper that takes `&impl HookCrew` works at all of them.
///
/// ```
/// use std::sync::Arc;
/// use crew_runtime::prelude::*;
/// use crew_runtime::{transcript::Transcript, EXECUTION_END, ExecutionEndContext, INPUT, InputContext};
/// use crew_runtime::transcript::{HookCrew, note};
///
/// /// Notes where a hook ran, for any point.
/// fn ran_at(ctx: &impl HookCrew, point: &str) {
///     if ctx.hook_crew().is_some() {
///         note(ctx, format!("ran at {point}"));
///     }
/// }
///
/// let transcript = Transcript::new();
/// let writer = Agent::builder("Writer")
///     .llm(Arc::new(ScriptedLlm::new().answer("Done.")))
///     .build();
/// let crew = Crew::builder()
///     .agent(writer.clone())
///     .task(Task::builder("Write").agent(&writer).build())
///     .global_registry(Arc::new(HookRegistry::new()))
///     .hook(INPUT, |ctx: &mut InputContext| ran_at(ctx, "INPUT"))
///     .hook(EXECUTION_END, |ctx: &mut ExecutionEndContext| {
///         ran_at(ctx, "EXECUTION_END")
///     })
///     .build()?;
/// transcript.attach(&crew);
/// crew.kickoff_blocking(())?;
/// let notes: Vec<String> =
///     transcript.lines().into_iter().filter(|line| line.contains("ran at")).collect();
/// assert_eq!(notes, ["    ran at INPUT", "    ran at EXECUTION_END"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait HookCrew {
    /// The crew running the call, step or kickoff, if it is a [`Crew`].
    ///
    /// ```
    /// use crew_runtime::prelude::*;
    /// use crew_runtime::transcript::HookCrew;
    ///
    /// // A context built outside any crew (as a unit test of a hook does).
    /// let ctx = ToolCallHookContext::new("search", Default::default());
    /// assert!(ctx.hook_crew().is_none());
    /// ```
    fn hook_crew(&self) -> Option<&Crew>;
}

impl HookCrew for ToolCallHookContext {
    fn hook_crew(&self) -> Option<&Crew> {
        self.crew_as::<Crew>()
    }
}

/// The other points' contexts hold their crew as `crew: Option<Arc<dyn CrewInfo>>`.
macro_rules! hook_crew_field {
    ($($context:ty),*) => {$(
        impl HookCrew for $context {
            fn hook_crew(&self) -> Option<&Crew> {
                crew_of(self.crew.as_deref())
            }
        }
    )*};
}

hook_crew_field!(
    ExecutionStartContext,
    InputContext,
    StepContext,
    LlmCallHookContext,
    OutputContext,
    ExecutionEndContext
);

fn crew_of(crew: Option<&dyn CrewInfo>) -> Option<&Crew> {
    let crew: &dyn Any = crew?;
    crew.downcast_ref()
}

/// The transcripts attached to a crew, for [`note`] to find: kept on the
/// crew's own hook registry (its extensions), which every clone of the
/// crew shares and which goes with the crew. The crew's listeners hold
/// the transcripts; this only points at them.
#[derive(Default)]
struct Attached(Mutex<Vec<Weak<Mutex<State>>>>);

impl Attached {
    /// The record of `crew`, created if needed.
    fn of(crew: &Crew) -> Arc<Attached> {
        crew.hooks()
            .extensions()
            .get_or_insert_with(Attached::default)
    }

    fn add(&self, state: &Arc<Mutex<State>>) {
        let mut attached = self.lock();
        attached.retain(|state| state.strong_count() > 0);
        attached.push(Arc::downgrade(state));
    }

    /// The transcript attached last that still exists.
    fn last(&self) -> Option<Arc<Mutex<State>>> {
        self.lock().iter().rev().find_map(Weak::upgrade)
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Weak<Mutex<State>>>> {
        // Changed by one push at a time: a poisoned lock is taken over.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One line for an event, or `None` for events the model's lines already
/// cover (a finished call: its result is what the agent saw next; a piece
/// of a streamed answer: the whole answer is the model's next line).
fn describe_event(event: &Event, masked_keys: &[String]) -> Option<String> {
    let line = match event {
        Event::HookDispatched(dispatched) => describe_dispatch(dispatched),
        Event::ToolExecutionStarted(ToolUsageStartedEvent {
            tool_name,
            tool_input,
            ..
        }) => format!(
            "tool {tool_name} runs with {}",
            masked(tool_input, masked_keys)
        ),
        Event::ToolUsageError(ToolUsageErrorEvent {
            tool_name, error, ..
        }) => format!("tool {tool_name} failed: {error}"),
        Event::HookPanicked(HookPanickedEvent {
            point,
            hook,
            message,
            fail_closed,
            ..
        }) => {
            let effect = if *fail_closed {
                "fail-closed: treated as a refusal"
            } else {
                "fail-open: its effect was dropped"
            };
            format!("hook {hook} panicked at {point}: {message} ({effect})")
        }
        // The transcript tells the model's side itself; the lifecycle
        // events would only repeat it.
        // A call's start before its hooks decide (the dispatch lines tell
        // that), and a failure's kind (its error line tells it).
        Event::ToolUsageFinished(_)
        | Event::ToolUsageStarted(_)
        | Event::ToolFailureDetected(_)
        | Event::LlmStreamChunk(_) => return None,
        lifecycle if lifecycle.is_lifecycle() => return None,
        other => format!("{other:?}"),
    };
    Some(format!("{DETAIL}{line}"))
}

/// `PRE_TOOL_CALL  blocked the call: <reason> [source: <source>] (1 hook ran)`
/// and the like, for any of the ten points.
///
/// In-place edits (of messages, tool calls, inputs) are not reported by
/// dispatch events, only replacements: a chain that edited in place and
/// replaced nothing "went on".
fn describe_dispatch(dispatched: &HookDispatchedEvent) -> String {
    use InterceptionPoint as P;
    let point = dispatched.point;
    let what = match (point, dispatched.outcome) {
        (_, "aborted") => {
            let reason = dispatched.abort_reason.as_deref().unwrap_or("no reason");
            let source = dispatched.abort_source.as_deref().unwrap_or("unknown");
            let verb = match point {
                P::PRE_TOOL_CALL | P::PRE_MODEL_CALL => "blocked the call",
                _ => "aborted the run",
            };
            format!("{verb}: {reason} [source: {source}]")
        }
        (P::PRE_TOOL_CALL | P::PRE_MODEL_CALL, _) => "let the call through".to_owned(),
        (P::EXECUTION_START, "proceeded") => "let the kickoff start".to_owned(),
        (P::POST_TOOL_CALL, "modified") => "replaced the result".to_owned(),
        (P::POST_TOOL_CALL, _) => "kept the result".to_owned(),
        (P::POST_MODEL_CALL, "modified") => "replaced the answer's text".to_owned(),
        (P::EXECUTION_START | P::INPUT, "modified") => "replaced the inputs".to_owned(),
        (P::PRE_STEP, "modified") => "replaced the context".to_owned(),
        (P::POST_STEP | P::OUTPUT, "modified") => "replaced the output".to_owned(),
        (_, "modified") => "replaced the value".to_owned(),
        (_, _) => "went on".to_owned(),
    };
    let hooks = match dispatched.hooks_run {
        1 => "1 hook ran".to_owned(),
        n => format!("{n} hooks ran"),
    };
    // The longest names (`EXECUTION_START`, `POST_MODEL_CALL`) still get a
    // space; the tool points line up as they always have.
    format!("{:<14} {what} ({hooks})", point.as_str())
}

/// Tool arguments as compact JSON, with masked keys shown as `"…"`.
fn masked(input: &Value, masked_keys: &[String]) -> String {
    match input {
        Value::Object(map) if masked_keys.iter().any(|key| map.contains_key(key)) => {
            let shown: Map<String, Value> = map
                .iter()
                .map(|(key, value)| {
                    let value = if masked_keys.contains(key) {
                        Value::from("…")
                    } else {
                        value.clone()
                    };
                    (key.clone(), value)
                })
                .collect();
            Value::Object(shown).to_string()
        }
        other => other.to_string(),
    }
}

/// A model whose requests and answers are written to a transcript.
struct NarratedModel {
    role: String,
    inner: Arc<dyn Llm>,
    transcript: Transcript,
    /// The messages of the last request when it failed: the same request
    /// again is a retry (see `AgentBuilder::max_retry_limit`), told as one.
    failed: Mutex<Option<Vec<ChatMessage>>>,
}

impl NarratedModel {
    /// Writes a line for the agent; a text of several lines (an answer
    /// in paragraphs or a list) goes on indented lines of the agent's own,
    /// without its blank lines, so each transcript line stays one line.
    fn say(&self, text: impl std::fmt::Display) {
        let text = text.to_string();
        let mut lines = text.lines();
        let first = lines.next().unwrap_or_default();
        self.transcript.line(format!("[{}] {first}", self.role));
        for line in lines.filter(|line| !line.trim().is_empty()) {
            self.transcript.line(format!("[{}]   {line}", self.role));
        }
    }

    /// Writes what the request tells the model: a new task, or the
    /// observations of the calls the model asked for last.
    fn narrate_request(&self, request: &LlmRequest<'_>) {
        let messages = request.messages;
        let first_turn = !messages.iter().any(|m| m.role == Role::Assistant);
        if first_turn {
            if let Some(task) = messages.iter().find(|m| m.role == Role::User) {
                // The task message starts with `Current Task: <description>`.
                let first_line = task.content.lines().next().unwrap_or_default();
                let description = first_line
                    .strip_prefix("Current Task: ")
                    .unwrap_or(first_line);
                self.say(format_args!("task: {description}"));
            }
            return;
        }
        let trailing = messages
            .iter()
            .rev()
            .take_while(|m| m.role == Role::Tool)
            .count();
        let observations = &messages[messages.len() - trailing..];
        for message in observations {
            match (&message.tool_call_id, observations.len()) {
                (Some(id), 2..) => self.say(format_args!("agent saw ({id}): {}", message.content)),
                _ => self.say(format_args!("agent saw: {}", message.content)),
            }
        }
    }

    fn narrate_answer(&self, answer: &Result<ModelTurn, LlmError>) {
        match answer {
            Ok(ModelTurn::FinalAnswer(text)) => self.say(format_args!("model answers: {text}")),
            Ok(ModelTurn::ToolCalls { content, calls }) => {
                if !content.is_empty() {
                    self.say(format_args!("model says: {content}"));
                }
                if calls.len() > 1 {
                    self.say(format_args!(
                        "model asks for {} tool calls in one turn (they run concurrently):",
                        calls.len()
                    ));
                    for call in calls {
                        self.say(format_args!(
                            "  {}: {} {}",
                            call.id, call.name, call.arguments
                        ));
                    }
                } else {
                    for call in calls {
                        self.say(format_args!("model asks: {} {}", call.name, call.arguments));
                    }
                }
            }
            Err(error) => self.say(format_args!("model failed: {error}")),
        }
    }
}

#[async_trait::async_trait]
impl Llm for NarratedModel {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn max_output_tokens(&self) -> Option<u64> {
        self.inner.max_output_tokens()
    }

    async fn complete(&self, request: &LlmRequest<'_>) -> Result<ModelTurn, LlmError> {
        let retried = self
            .failed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .is_some_and(|failed| failed == request.messages);
        if retried {
            self.say("model asked again");
        } else {
            self.narrate_request(request);
        }
        let answer = self.inner.complete(request).await;
        if answer.is_err() {
            *self.failed.lock().unwrap_or_else(PoisonError::into_inner) =
                Some(request.messages.to_vec());
        }
        self.narrate_answer(&answer);
        answer
    }
}

/// One line for a registered hook: its name, its style of attribute, its
/// filters, its order (when not 0) and where it came from (without source lines, which
/// move as files are edited). For listing the hooks a program has, as
/// [`get_hooks`](crate::get_hooks) and
/// [`HookRegistry::get_hooks`](crate::HookRegistry::get_hooks) return them.
///
/// ```
/// use crew_runtime::prelude::*;
/// use crew_runtime::transcript::describe_hook;
///
/// let registry = HookRegistry::new();
/// registry.register_hook_with(
///     PRE_TOOL_CALL,
///     HookOptions::new().name("no_deletes").tools(["delete_file"]),
///     |_: &mut ToolCallHookContext| {},
/// )?;
/// let hooks = registry.get_hooks(PRE_TOOL_CALL);
/// assert_eq!(
///     describe_hook(&hooks[0]),
///     r#"no_deletes #[on] tools=["delete_file"] (run time)"#
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn describe_hook(hook: &HookInfo) -> String {
    let style = match hook.style {
        HookStyle::On => "#[on]",
        HookStyle::BeforeToolCall => "#[before_tool_call]",
        HookStyle::AfterToolCall => "#[after_tool_call]",
        HookStyle::BeforeLlmCall => "#[before_llm_call]",
        HookStyle::AfterLlmCall => "#[after_llm_call]",
    };
    let origin = match &hook.origin {
        HookOrigin::LinkTime { .. } => "link time".to_owned(),
        HookOrigin::Runtime => "run time".to_owned(),
        HookOrigin::Crew { .. } => hook.origin.to_string(),
    };
    let mut line = format!("{} {style}", hook.name);
    if !hook.tools.is_empty() {
        line.push_str(&format!(" tools={:?}", hook.tools));
    }
    if !hook.agents.is_empty() {
        line.push_str(&format!(" agents={:?}", hook.agents));
    }
    if hook.order != 0 {
        line.push_str(&format!(" order={}", hook.order));
    }
    line.push_str(&format!(" ({origin})"));
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Agent, HookRegistry, PRE_TOOL_CALL, ScriptedLlm, Task, Tool};
    use serde_json::json;

    /// A crew of one agent calling `echo` once, with a crew hook that notes
    /// `label`, on a registry of its own (no global state).
    fn noting_crew(label: &'static str, transcript: &Transcript) -> Crew {
        let echo = Tool::dynamic("echo", "Echoes", json!({"type": "object"}), |args| {
            Ok::<_, String>(args)
        });
        let model = ScriptedLlm::new()
            .call("echo", json!({"text": label}))
            .answer(label);
        let agent = Agent::builder("Echoer")
            .tool(echo)
            .llm(transcript.model("Echoer", Arc::new(model)))
            .build();
        Crew::builder()
            .agent(agent.clone())
            .task(Task::builder("Echo").agent(&agent).build())
            .global_registry(Arc::new(HookRegistry::new()))
            .hook(PRE_TOOL_CALL, move |ctx: &mut ToolCallHookContext| {
                note(ctx, format!("note from {label}"));
            })
            .build()
            .expect("the crew builds")
    }

    #[test]
    fn a_transcript_reads_the_model_the_events_and_the_notes() {
        let transcript = Transcript::new();
        let crew = noting_crew("a", &transcript);
        transcript.attach(&crew);
        crew.kickoff_blocking(()).expect("the crew runs");
        assert_eq!(
            transcript.lines(),
            [
                "[Echoer] task: Echo",
                "[Echoer] model asks: echo {\"text\":\"a\"}",
                "    note from a",
                "    PRE_TOOL_CALL  let the call through (1 hook ran)",
                "    tool echo runs with {\"text\":\"a\"}",
                "[Echoer] agent saw: {\"text\":\"a\"}",
                "[Echoer] model answers: a",
            ]
        );
    }

    #[test]
    fn notes_reach_only_their_own_crews_transcript() {
        let (first, second) = (Transcript::new().quiet_events(), Transcript::new());
        let crew_a = noting_crew("a", &first);
        let crew_b = noting_crew("b", &second);
        first.attach(&crew_a);
        second.attach(&crew_b);
        crew_a.kickoff_blocking(()).expect("a runs");
        crew_b.kickoff_blocking(()).expect("b runs");
        let notes = |t: &Transcript| -> Vec<String> {
            t.lines()
                .into_iter()
                .filter(|l| l.contains("note"))
                .collect()
        };
        assert_eq!(notes(&first), ["    note from a"]);
        assert_eq!(notes(&second), ["    note from b"]);
        assert_eq!(first.dispatches().len(), 1, "quiet, but events kept");
    }

    #[test]
    fn an_attachment_goes_with_its_crew() {
        let transcript = Transcript::new();
        let crew = noting_crew("gone", &transcript);
        transcript.attach(&crew);
        let attached = {
            let attached = crew
                .hooks()
                .extensions()
                .get::<Attached>()
                .expect("the crew keeps its transcripts");
            let last = attached.last().expect("one is attached");
            assert!(Arc::ptr_eq(&last, &transcript.state));
            Arc::downgrade(&attached)
        };
        drop(crew);
        assert!(
            attached.upgrade().is_none(),
            "the record went with the crew"
        );
    }

    #[test]
    fn streamed_pieces_are_kept_as_events_without_lines() {
        let transcript = Transcript::new();
        let model = ScriptedLlm::new().streaming().answer("two words");
        let writer = Agent::builder("Writer")
            .llm(transcript.model("Writer", Arc::new(model)))
            .build();
        let crew = Crew::builder()
            .agent(writer.clone())
            .task(Task::builder("Write").agent(&writer).build())
            .global_registry(Arc::new(HookRegistry::new()))
            .build()
            .expect("the crew builds");
        transcript.attach(&crew);
        crew.kickoff_blocking(()).expect("the crew runs");
        assert_eq!(
            transcript.lines(),
            ["[Writer] task: Write", "[Writer] model answers: two words"]
        );
        let pieces = transcript
            .events()
            .iter()
            .filter(|event| matches!(event, Event::LlmStreamChunk(_)))
            .count();
        assert_eq!(pieces, 2);
    }

    #[test]
    fn masked_keys_hide_their_values_only() {
        let input = json!({"_start_ns": 123, "query": "rust"});
        assert_eq!(
            masked(&input, &["_start_ns".to_owned()]),
            r#"{"_start_ns":"…","query":"rust"}"#
        );
        assert_eq!(masked(&input, &[]), r#"{"_start_ns":123,"query":"rust"}"#);
    }
}
