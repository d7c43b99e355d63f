//! Helpers shared by the behavior tests: a fresh registry per test, tools
//! that record what they received, an event recorder.
#![allow(dead_code)] // each test file uses a different part

use std::fmt::Write as _;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use crew_runtime::EventBus;
use crew_runtime::events::{
    HookDispatchedEvent, ToolUsageErrorEvent, ToolUsageFinishedEvent, ToolUsageStartedEvent,
};
use crew_runtime::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A shared, lockable log.
pub(crate) type Log<T> = Arc<Mutex<Vec<T>>>;

pub(crate) fn log<T>() -> Log<T> {
    Arc::new(Mutex::new(Vec::new()))
}

pub(crate) fn push<T>(log: &Log<T>, item: T) {
    log.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(item);
}

pub(crate) fn take<T: Clone>(log: &Log<T>) -> Vec<T> {
    log.lock().unwrap_or_else(PoisonError::into_inner).clone()
}

/// A global registry of the test's own: no test depends on global state.
pub(crate) fn fresh_registry() -> Arc<HookRegistry> {
    Arc::new(HookRegistry::new())
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
pub(crate) struct SearchArgs {
    pub(crate) query: String,
    #[serde(default)]
    pub(crate) limit: Option<u32>,
}

/// A typed `web_search` tool recording the arguments it received and
/// answering `results for <query>`.
pub(crate) fn search_tool(received: &Log<SearchArgs>) -> Tool {
    let received = received.clone();
    Tool::typed("web_search", "Searches the web", move |args: SearchArgs| {
        let answer = format!("results for {}", args.query);
        push(&received, args);
        Ok::<_, String>(answer)
    })
    .into()
}

/// An agent with these tools and this model.
/// A `send_email` tool that records every address it sends to.
pub(crate) fn send_email_tool(sent: &Log<String>) -> Tool {
    let sink = sent.clone();
    Tool::dynamic(
        "send_email",
        "Sends an email",
        json!({"type": "object", "properties": {"to": {"type": "string"}}}),
        move |args| {
            let to = args["to"].as_str().unwrap_or("").to_owned();
            push(&sink, to.clone());
            Ok::<_, String>(json!(format!("sent to {to}")))
        },
    )
}

pub(crate) fn agent(role: &str, tools: Vec<Tool>, llm: &Arc<ScriptedLlm>) -> Agent {
    Agent::builder(role)
        .goal("Get the task done")
        .backstory("A test agent")
        .tools(tools)
        .llm(llm.clone())
        .build()
}

/// A crew named `test-crew` with one agent and one task, on `global`.
pub(crate) fn crew(global: &Arc<HookRegistry>, agent: Agent) -> Crew {
    let task = Task::builder("Do the work")
        .expected_output("A short answer")
        .agent(&agent)
        .build();
    Crew::builder()
        .name("test-crew")
        .agent(agent)
        .task(task)
        .global_registry(global.clone())
        .build()
        .expect("the test crew builds")
}

/// Records every event of `bus` as a short line, in order.
pub(crate) fn record_events(bus: &EventBus) -> Log<String> {
    let lines = log();
    let sink = lines.clone();
    bus.subscribe(move |event| {
        if !is_lifecycle(event) {
            push(&sink, describe(event));
        }
    });
    lines
}

/// A kickoff, task, agent-execution or model-call event (checked by
/// `spec12_lifecycle_events.rs`; left out where the hook and tool events
/// are what a test checks).
pub(crate) fn is_lifecycle(event: &Event) -> bool {
    event.is_lifecycle()
}

/// One line per event, with the fields the tests check.
pub(crate) fn describe(event: &Event) -> String {
    match event {
        Event::HookDispatched(HookDispatchedEvent {
            point,
            outcome,
            hooks_run,
            tool_name,
            agent_role,
            abort_reason,
            abort_source,
            ..
        }) => {
            let mut line = format!(
                "dispatched {point} {outcome} hooks={hooks_run} tool={} agent={}",
                tool_name.as_deref().unwrap_or("-"),
                agent_role.as_deref().unwrap_or("-")
            );
            if let (Some(reason), Some(source)) = (abort_reason, abort_source) {
                line.push_str(&format!(" abort=({source}: {reason})"));
            }
            line
        }
        Event::HookPanicked(panicked) => {
            format!(
                "panicked {} {} fail_closed={}",
                panicked.point, panicked.hook, panicked.fail_closed
            )
        }
        Event::ToolUsageStarted(ToolUsageStartedEvent {
            tool_name,
            tool_input,
            agent_role,
            ..
        }) => format!(
            "started tool={tool_name} input={tool_input} agent={}",
            agent_role.as_deref().unwrap_or("-")
        ),
        Event::ToolUsageFinished(ToolUsageFinishedEvent {
            tool_name,
            result,
            blocked,
            agent_role,
            ..
        }) => format!(
            "finished tool={tool_name} blocked={blocked} result={result} agent={}",
            agent_role.as_deref().unwrap_or("-")
        ),
        Event::ToolUsageError(ToolUsageErrorEvent {
            tool_name, error, ..
        }) => format!("error tool={tool_name} error={error}"),
        Event::ToolExecutionStarted(started) => {
            format!(
                "runs tool={} input={}",
                started.tool_name, started.tool_input
            )
        }
        Event::ToolFailureDetected(failure) => format!(
            "failure tool={} type={} retryable={}",
            failure.tool_name, failure.error_type, failure.retryable
        ),
        other => format!("{other:?}"),
    }
}

/// How much larger long-running tests run: `HOOKS_TEST_SCALE` (default 1;
/// CI runs 20).
pub(crate) fn test_scale() -> usize {
    std::env::var("HOOKS_TEST_SCALE")
        .ok()
        .and_then(|scale| scale.parse().ok())
        .filter(|&scale| scale >= 1)
        .unwrap_or(1)
}

/// Whether this process is the child that [`run_in_child`] started with
/// `marker` set.
pub(crate) fn is_child(marker: &str) -> bool {
    std::env::var_os(marker).is_some()
}

/// Runs the test `test` of this same test binary again in a child process
/// with `marker` set, standard input from `/dev/null` (not a terminal,
/// closed), and returns what it printed on standard output. The test's own
/// body checks [`is_child`] to know which side it is on.
pub(crate) fn run_in_child(test: &str, marker: &str) -> String {
    let exe = std::env::current_exe().expect("the test binary knows its path");
    let output = std::process::Command::new(exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(marker, "1")
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("the test binary runs again as a child");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "the child failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// Every `tracing` line of this test binary, from every thread (a turn's
/// calls run as tasks of the runtime and synchronous tools on its blocking
/// pool, so a thread-local subscriber would miss theirs). Installed once,
/// before any crew runs.
pub(crate) fn tracing_lines() -> &'static Mutex<Vec<String>> {
    static LINES: OnceLock<&'static Mutex<Vec<String>>> = OnceLock::new();
    LINES.get_or_init(|| {
        let lines: &'static Mutex<Vec<String>> = Box::leak(Box::new(Mutex::new(Vec::new())));
        tracing::subscriber::set_global_default(CaptureSubscriber { lines })
            .expect("no other subscriber is installed in this test binary");
        lines
    })
}

/// A minimal subscriber that records each event and span as one line of
/// its formatted fields.
struct CaptureSubscriber {
    lines: &'static Mutex<Vec<String>>,
}

struct FieldText(String);

impl tracing::field::Visit for FieldText {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        let _ = write!(self.0, " {}={value}", field.name());
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, " {}={value:?}", field.name());
    }
}

impl CaptureSubscriber {
    fn push(&self, line: String) {
        self.lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(line);
    }
}

impl tracing::Subscriber for CaptureSubscriber {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        let mut text = FieldText(format!("span {}", span.metadata().name()));
        span.record(&mut text);
        self.push(text.0);
        tracing::span::Id::from_u64(1)
    }

    fn record(&self, _: &tracing::span::Id, values: &tracing::span::Record<'_>) {
        let mut text = FieldText("span record".to_owned());
        values.record(&mut text);
        self.push(text.0);
    }

    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}

    fn event(&self, event: &tracing::Event<'_>) {
        let metadata = event.metadata();
        let mut text = FieldText(format!("{} {}:", metadata.level(), metadata.target()));
        event.record(&mut text);
        self.push(text.0);
    }

    fn enter(&self, _: &tracing::span::Id) {}

    fn exit(&self, _: &tracing::span::Id) {}
}
