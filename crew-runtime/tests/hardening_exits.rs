//! SPEC §8, every exit: with a crew's redaction set
//! (`CrewBuilder::redact_with`), no secret leaves the crew by the model's
//! next request, an event, a `tracing` line, the verbose console, an
//! error text, the kickoff output, or a contained panic's message; and
//! the panic hook never prints a contained tool or hook panic on stderr.
//!
//! Every test runs the same crew, which leaks two secrets every way it
//! can unless the redaction stops them: one planted by a tool's result
//! ([`TOOL_SECRET`]), one injected by a `PRE_TOOL_CALL` hook into
//! `tool_input` ([`INJECTED_SECRET`], which the tools echo back). Each
//! exit must show neither, and must show both redaction markers: a test
//! cannot pass because nothing came out.

mod common;

use std::borrow::Cow;
use std::sync::{Arc, Mutex, PoisonError};

use common::*;
use crew_runtime::events::{
    HookDispatchedEvent, HookPanickedEvent, ToolUsageErrorEvent, ToolUsageFinishedEvent,
    ToolUsageStartedEvent,
};
use crew_runtime::guards::SecretRedactor;
use crew_runtime::prelude::*;
use crew_runtime::{
    ChatMessage, EventBus, InterceptionPoint, POST_STEP, PRE_MODEL_CALL, ScriptedInput,
    StepContext, ToolCallStatus,
};
use crew_runtime::{Redact, Role};

/// A GitHub token a tool's result carries.
const TOOL_SECRET: &str = "ghp_R2d2C3poBb8Kx9Lm4Np7Qr1St5Uv6Wx0YzAa";
const TOOL_MARKER: &str = "[GITHUB-TOKEN-REDACTED]";
/// An API key a PRE hook injects into every call's input.
const INJECTED_SECRET: &str = "sk-proj-Zq9_xY8-wV7uT6sR5qP4oN3mL2kJ";
const INJECTED_MARKER: &str = "[OPENAI-KEY-REDACTED]";

/// Distinctive parts of the secrets: not even a part may be seen.
const NEEDLES: [&str; 2] = ["R2d2C3poBb8Kx9Lm4Np7", "Zq9_xY8-wV7uT6sR5qP4"];

/// Panics naming the exit where a secret was seen, or where a marker is
/// missing (the secret did not even come this way).
fn assert_clean(exit: &str, text: &str) {
    for needle in NEEDLES {
        assert!(
            !text.contains(needle),
            "{exit} shows the secret {needle:?}:\n{text}"
        );
    }
    for marker in [TOOL_MARKER, INJECTED_MARKER] {
        assert!(
            text.contains(marker),
            "{exit} lacks {marker} (did the secret take this exit?):\n{text}"
        );
    }
}

fn assert_no_secret(exit: &str, text: &str) {
    for needle in NEEDLES {
        assert!(
            !text.contains(needle),
            "{exit} shows the secret {needle:?}:\n{text}"
        );
    }
}

/// The last raw `tool_result` a POST hook saw, before the crew's
/// redaction: what a "memory" or "audit trail" hook would keep.
type Stash = Arc<Mutex<String>>;

fn read(stash: &Stash) -> String {
    stash.lock().unwrap_or_else(PoisonError::into_inner).clone()
}

/// Tools that echo their input (and so the injected key) next to the
/// tool's own secret: in a result, in an error, in a panic.
fn tools() -> Vec<Tool> {
    let schema = json!({"type": "object"});
    vec![
        Tool::dynamic(
            "fetch_account",
            "Reads the account",
            schema.clone(),
            |input| {
                Ok::<_, String>(json!(format!(
                    "deploy token {TOOL_SECRET}; request {input}"
                )))
            },
        ),
        Tool::dynamic("fetch_failing", "Fails", schema.clone(), |input| {
            Err::<Value, _>(format!(
                "vault refused token {TOOL_SECRET} for request {input}"
            ))
        }),
        Tool::dynamic(
            "fetch_panicking",
            "Panics",
            schema,
            |input| -> Result<Value, String> {
                panic!("vault crashed on token {TOOL_SECRET} for request {input}")
            },
        ),
    ]
}

/// The model: one call; then four at once (run concurrently, so helper
/// threads report too: one succeeds, one fails, one panics, one is
/// blocked); then an answer echoing what it saw. The second task answers
/// with its own task message (which holds the first task's output as
/// context).
fn model() -> Arc<ScriptedLlm> {
    Arc::new(
        ScriptedLlm::new()
            .call("fetch_account", json!({"query": "ada"}))
            .calls([
                ("fetch_account", json!({"query": "bob"})),
                ("fetch_failing", json!({"query": "eve"})),
                ("fetch_panicking", json!({"query": "mallory"})),
                ("fetch_account", json!({"query": "blocked"})),
            ])
            .answer_with(|request| {
                request
                    .messages
                    .iter()
                    .filter(|m| m.role == Role::Tool)
                    .map(|m| m.content.clone())
                    .collect::<Vec<_>>()
                    .join("\n---\n")
            })
            .answer_with(|request| {
                request
                    .messages
                    .iter()
                    .find(|m| m.role == Role::User)
                    .map(|m| m.content.clone())
                    .unwrap_or_default()
            }),
    )
}

/// The hooks that leak: credentials and the previous raw result injected
/// into every call's input, a gate that blocks quoting the input, a stash
/// of raw results, an auditor that panics quoting a result, and a step
/// hook that appends the raw stash to each task's output.
fn leaky_hooks(global: &HookRegistry, stash: &Stash) {
    let previous = stash.clone();
    global
        .register_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("credentials"),
            move |ctx: &mut ToolCallHookContext| {
                ctx.tool_input
                    .insert("api_key".into(), json!(INJECTED_SECRET));
                let previous = read(&previous);
                if !previous.is_empty() {
                    ctx.tool_input.insert("previous".into(), json!(previous));
                }
            },
        )
        .expect("registers");
    global
        .register_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("gate"),
            |ctx: &mut ToolCallHookContext| -> Result<(), HookAborted> {
                if ctx.tool_input.get("query") == Some(&json!("blocked")) {
                    let input = Value::Object(ctx.tool_input.clone());
                    return Err(HookAborted::new(format!("refused with {input}"), "gate"));
                }
                Ok(())
            },
        )
        .expect("registers");
    let sink = stash.clone();
    global
        .register_hook_with(
            POST_TOOL_CALL,
            HookOptions::new().name("stash"),
            move |ctx: &mut ToolCallHookContext| {
                if *ctx.status() == ToolCallStatus::Ran {
                    *sink.lock().unwrap_or_else(PoisonError::into_inner) =
                        ctx.tool_result.clone().unwrap_or_default();
                }
            },
        )
        .expect("registers");
    global
        .register_hook_with(
            POST_TOOL_CALL,
            HookOptions::new().name("auditor").tools(["fetch_failing"]),
            |ctx: &mut ToolCallHookContext| -> Option<String> {
                panic!(
                    "audit failed on {}",
                    ctx.tool_result.as_deref().unwrap_or("")
                )
            },
        )
        .expect("registers");
    let trail = stash.clone();
    global
        .register_hook_with(
            POST_STEP,
            HookOptions::new().name("audit-trail"),
            move |ctx: &mut StepContext| {
                Some(format!("{}\n(audit trail: {})", ctx.payload, read(&trail)))
            },
        )
        .expect("registers");
}

struct Scenario {
    global: Arc<HookRegistry>,
    llm: Arc<ScriptedLlm>,
    crew: Crew,
    stash: Stash,
}

/// The leaky crew, redacting with `redactor`, on a registry of its own.
fn leaky_crew_with(redactor: impl Redact + 'static, verbose: bool) -> Scenario {
    let global = fresh_registry();
    let stash: Stash = Arc::default();
    leaky_hooks(&global, &stash);
    let llm = model();
    let analyst = agent("Analyst", tools(), &llm);
    let audit = Task::builder("Audit account {account}")
        .agent(&analyst)
        .build();
    let summary = Task::builder("Summarize the audit")
        .agent(&analyst)
        .context([&audit])
        .build();
    let crew = Crew::builder()
        .name("exits")
        .agent(analyst)
        .tasks([audit, summary])
        .global_registry(global.clone())
        .max_concurrent_tool_calls(4)
        .verbose(verbose)
        .redact_with(redactor)
        .build()
        .expect("builds");
    Scenario {
        global,
        llm,
        crew,
        stash,
    }
}

fn leaky_crew(verbose: bool) -> Scenario {
    leaky_crew_with(SecretRedactor::new(), verbose)
}

fn kickoff(scenario: &Scenario) -> Result<CrewOutput, CrewError> {
    scenario.crew.kickoff_blocking([("account", "acct-7")])
}

fn record_all_events(bus: &EventBus) -> Log<Event> {
    let events = log();
    let sink = events.clone();
    bus.subscribe(move |event| push(&sink, event.clone()));
    events
}

/// The texts an event carries, field by field.
fn event_texts(event: &Event) -> String {
    match event {
        Event::HookDispatched(HookDispatchedEvent {
            abort_reason,
            abort_source,
            tool_name,
            ..
        }) => format!("{abort_reason:?} {abort_source:?} {tool_name:?}"),
        Event::HookPanicked(HookPanickedEvent {
            message, tool_name, ..
        }) => format!("{message} {tool_name:?}"),
        Event::ToolUsageStarted(ToolUsageStartedEvent {
            tool_name,
            tool_input,
            task,
            ..
        })
        | Event::ToolExecutionStarted(ToolUsageStartedEvent {
            tool_name,
            tool_input,
            task,
            ..
        }) => format!("{tool_name} {tool_input} {task:?}"),
        Event::ToolUsageFinished(ToolUsageFinishedEvent {
            tool_name,
            result,
            task,
            ..
        }) => format!("{tool_name} {result} {task:?}"),
        Event::ToolUsageError(ToolUsageErrorEvent {
            tool_name,
            error,
            task,
            ..
        }) => format!("{tool_name} {error} {task:?}"),
        other => format!("{other:?}"),
    }
}

fn kind_of(event: &Event) -> &'static str {
    match event {
        Event::HookDispatched(_) => "HookDispatched",
        Event::HookPanicked(_) => "HookPanicked",
        Event::ToolUsageStarted(_) => "ToolUsageStarted",
        Event::ToolExecutionStarted(_) => "ToolExecutionStarted",
        Event::ToolUsageFinished(_) => "ToolUsageFinished",
        Event::ToolUsageError(_) => "ToolUsageError",
        _ => "another kind",
    }
}

/// Runs `test` of this binary again in a child process with `marker`
/// set; returns its standard output and standard error.
fn run_child(test: &str, marker: &str) -> (String, String) {
    let exe = std::env::current_exe().expect("the test binary knows its path");
    let output = std::process::Command::new(exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(marker, "1")
        .env_remove("RUST_LOG")
        .env_remove("RUST_BACKTRACE")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("the test binary runs again as a child");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "the child failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    (stdout, stderr)
}

#[test]
fn the_model_sees_tool_results_and_injected_credentials_redacted() {
    let _lines = tracing_lines();
    let scenario = leaky_crew(false);

    kickoff(&scenario).expect("the run finishes");

    // The previous raw result really holds both secrets: the stash is what
    // leaks everywhere below.
    let raw = read(&scenario.stash);
    assert!(
        raw.contains(TOOL_SECRET) && raw.contains(INJECTED_SECRET),
        "{raw}"
    );
    let requests = scenario.llm.requests();
    assert_eq!(requests.len(), 4, "three turns of the audit, one summary");
    for (n, request) in requests.iter().enumerate() {
        for message in &request.messages {
            assert_no_secret(&format!("request {n} to the model"), &message.content);
        }
    }
    // Tool observations, after the POST chain: the result's token and the
    // key the tool echoed.
    assert_clean("the first observation", requests[1].observations()[0]);
    let second = requests[2].observations();
    assert_eq!(second.len(), 4);
    assert_clean("an observation of a concurrent call", second[0]);
    assert_clean("a failed call's observation", second[1]);
    assert_clean("a panicked call's observation", second[2]);
    // Task context: the first task's output with the raw audit trail a
    // step hook appended.
    let summary_prompt = requests[3].task_prompt().unwrap_or_default();
    assert!(
        summary_prompt.contains("(audit trail: "),
        "{summary_prompt}"
    );
    assert_clean("the second task's context", summary_prompt);
}

#[test]
fn what_model_call_hooks_add_is_redacted_before_the_model_sees_it() {
    let _lines = tracing_lines();
    let scenario = leaky_crew(false);
    let memory = scenario.stash.clone();
    scenario
        .global
        .register_hook(PRE_MODEL_CALL, move |ctx: &mut LlmCallHookContext| {
            let remembered = read(&memory);
            if !remembered.is_empty() {
                ctx.messages
                    .push(ChatMessage::system(format!("Remember: {remembered}")));
            }
        })
        .expect("registers");

    kickoff(&scenario).expect("the run finishes");

    let requests = scenario.llm.requests();
    let remembered: Vec<&str> = requests
        .iter()
        .flat_map(|r| &r.messages)
        .map(|m| m.content.as_str())
        .filter(|content| content.starts_with("Remember: "))
        .collect();
    assert!(!remembered.is_empty(), "the hook added messages");
    for text in remembered {
        assert_clean("a message a PRE_MODEL_CALL hook added", text);
    }
    for request in &requests {
        for message in &request.messages {
            assert_no_secret("a request to the model", &message.content);
        }
    }
}

#[test]
fn every_event_kind_on_both_buses_is_redacted() {
    let _lines = tracing_lines();
    let scenario = leaky_crew(false);
    let on_crew_bus = record_all_events(scenario.crew.events());
    let on_global_bus = record_all_events(scenario.global.events());

    kickoff(&scenario).expect("the run finishes");

    for (bus, events) in [("crew bus", on_crew_bus), ("global bus", on_global_bus)] {
        let events = take(&events);
        for event in &events {
            assert_no_secret(bus, &event_texts(event));
        }
        for kind in [
            "ToolExecutionStarted",
            "ToolUsageFinished",
            "ToolUsageError",
            "HookDispatched",
            "HookPanicked",
        ] {
            let texts: Vec<String> = events
                .iter()
                .filter(|e| kind_of(e) == kind)
                .map(event_texts)
                .collect();
            // At least one event of the kind carried both secrets (the
            // second turn's input holds the previous raw result; the
            // gate's abort reason and the auditor's panic quote them).
            assert!(
                texts
                    .iter()
                    .any(|t| t.contains(TOOL_MARKER) && t.contains(INJECTED_MARKER)),
                "{bus}: no {kind} event carried both markers: {texts:#?}"
            );
        }
    }
}

#[test]
fn tool_execution_started_carries_the_input_as_the_pre_chain_left_it_redacted() {
    let _lines = tracing_lines();
    let scenario = leaky_crew(false);
    let events = record_all_events(scenario.crew.events());

    kickoff(&scenario).expect("the run finishes");

    let events = take(&events);
    let inputs: Vec<Value> = events
        .iter()
        .filter_map(|event| match event {
            Event::ToolExecutionStarted(started) => Some(started.tool_input.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(inputs.len(), 4, "four tools ran (one call was blocked)");
    for input in &inputs {
        // Still JSON, with the injected key's value replaced in place.
        assert_eq!(input["api_key"], INJECTED_MARKER, "{input}");
    }
    let with_previous: Vec<&Value> = inputs
        .iter()
        .filter(|input| input.get("previous").is_some())
        .collect();
    assert_eq!(with_previous.len(), 3, "the second turn's calls");
    for input in with_previous {
        assert_clean("ToolExecutionStarted.tool_input", &input.to_string());
    }
    // Every call began before its hooks, the blocked one too, with the
    // arguments as the model sent them: no key a hook injected yet.
    let asked: Vec<&Value> = events
        .iter()
        .filter_map(|event| match event {
            Event::ToolUsageStarted(started) => Some(&started.tool_input),
            _ => None,
        })
        .collect();
    assert_eq!(asked.len(), 5, "five calls began: {asked:?}");
    assert!(
        asked.iter().all(|input| input.get("api_key").is_none()),
        "{asked:?}"
    );
}

#[test]
fn tracing_output_is_redacted() {
    let lines = tracing_lines();
    let scenario = leaky_crew(false);

    kickoff(&scenario).expect("the run finishes");

    let lines = lines.lock().unwrap_or_else(PoisonError::into_inner).clone();
    for line in &lines {
        assert_no_secret("a tracing line", line);
    }
    let with = |needle: &str| -> Vec<&String> {
        lines
            .iter()
            .filter(|l| l.contains(needle) && l.contains(TOOL_MARKER))
            .collect()
    };
    // The dispatcher's line for the gate's abort, the auditor's panic, and
    // the tool's panic, each with both secrets redacted.
    for (what, needle) in [
        (
            "the dispatch of the gate's abort",
            "abort_reason=refused with",
        ),
        ("the auditor's panic", "hook panicked: audit failed"),
        ("the tool's panic", "the tool panicked: vault crashed"),
    ] {
        let found = with(needle);
        assert!(!found.is_empty(), "no tracing line for {what}: {lines:#?}");
        for line in found {
            assert_clean(what, line);
        }
    }
}

const VERBOSE_CHILD: &str = "HARDENING_EXITS_VERBOSE_CHILD";

#[test]
fn the_verbose_console_is_redacted() {
    if is_child(VERBOSE_CHILD) {
        let _lines = tracing_lines();
        kickoff(&leaky_crew(true)).expect("the run finishes");
        return;
    }
    let (stdout, stderr) = run_child("the_verbose_console_is_redacted", VERBOSE_CHILD);
    assert_no_secret("the verbose console", &stdout);
    assert_no_secret("stderr", &stderr);
    for (what, start) in [
        ("the first observation", "← fetch_account: deploy token"),
        ("the gate's block", "blocked by gate: refused with"),
        ("the first task's answer", "final answer: deploy token"),
    ] {
        let line = stdout
            .lines()
            .find(|line| line.contains(start))
            .unwrap_or_else(|| panic!("no console line for {what}:\n{stdout}"));
        assert_clean(what, line);
    }
}

#[test]
fn error_texts_a_kickoff_returns_are_redacted() {
    let _lines = tracing_lines();
    // A POST hook that stops the run quoting the raw result.
    let scenario = leaky_crew(false);
    scenario
        .global
        .register_hook_with(
            POST_TOOL_CALL,
            HookOptions::new().name("compliance"),
            |ctx: &mut ToolCallHookContext| -> Result<(), HookAborted> {
                Err(HookAborted::new(
                    format!("leak found in {}", ctx.tool_result.as_deref().unwrap_or("")),
                    "compliance",
                ))
            },
        )
        .expect("registers");
    let error = kickoff(&scenario).expect_err("the hook stops the run");
    assert!(matches!(error, CrewError::Aborted { .. }), "{error:?}");
    assert_clean("the error's message", &error.to_string());
    assert_clean("the error's debug form", &format!("{error:?}"));
    assert_clean(
        "the abort's reason",
        &error.abort().map(|a| a.reason.clone()).unwrap_or_default(),
    );

    // A step hook that stops the run quoting the raw stash.
    let stopped = leaky_crew(false);
    let stash = stopped.stash.clone();
    stopped
        .global
        .register_hook(
            POST_STEP,
            move |_: &mut StepContext| -> Result<Option<String>, HookAborted> {
                Err(HookAborted::new(
                    format!("trail rejected: {}", read(&stash)),
                    "review",
                ))
            },
        )
        .expect("registers");
    let error = kickoff(&stopped).expect_err("the step hook stops the run");
    assert_eq!(error.aborted_at(), Some(InterceptionPoint::POST_STEP));
    assert_clean("a step abort's message", &error.to_string());
}

#[test]
fn the_kickoff_output_is_redacted() {
    let _lines = tracing_lines();
    let scenario = leaky_crew(false);

    let output = kickoff(&scenario).expect("the run finishes");

    assert_eq!(output.tasks_output.len(), 2);
    assert_clean("CrewOutput.raw", &output.raw);
    for task in &output.tasks_output {
        assert_clean("a task's raw output", &task.raw);
    }
    assert_clean("the output's display", &output.to_string());
}

#[test]
fn a_redactor_of_your_own_cleans_every_exit_too() {
    /// Hides exactly the two secrets, with the markers the built-in rules
    /// use, so the same checks apply.
    struct KnownSecrets;

    impl Redact for KnownSecrets {
        fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
            if !text.contains(TOOL_SECRET) && !text.contains(INJECTED_SECRET) {
                return Cow::Borrowed(text);
            }
            Cow::Owned(
                text.replace(TOOL_SECRET, TOOL_MARKER)
                    .replace(INJECTED_SECRET, INJECTED_MARKER),
            )
        }
    }

    let _lines = tracing_lines();
    let scenario = leaky_crew_with(KnownSecrets, false);
    let events = record_all_events(scenario.global.events());

    let output = kickoff(&scenario).expect("the run finishes");

    assert!(scenario.crew.redacts());
    assert_clean("the output", &output.raw);
    assert_clean(
        "the first observation",
        scenario.llm.requests()[1].observations()[0],
    );
    let events = take(&events);
    assert!(!events.is_empty());
    for event in &events {
        assert_no_secret("an event", &event_texts(event));
    }
}

const PANIC_CHILD: &str = "HARDENING_EXITS_PANIC_CHILD";

#[test]
fn contained_panics_are_reported_redacted_and_never_printed_raw() {
    if is_child(PANIC_CHILD) {
        let lines = tracing_lines();
        let scenario = leaky_crew(false);
        let events = record_all_events(scenario.crew.events());
        kickoff(&scenario).expect("the run finishes");
        // What the runtime reported, printed for the parent to check.
        let told = scenario.llm.requests()[2].observations()[2].to_owned();
        println!("observation: {told}");
        for event in take(&events) {
            if let Event::HookPanicked(panicked) = &event {
                println!("hook panicked event: {}", panicked.message);
            }
            if let Event::ToolUsageError(error) = &event
                && error.tool_name == "fetch_panicking"
            {
                println!("tool error event: {}", error.error);
            }
        }
        for line in lines.lock().unwrap_or_else(PoisonError::into_inner).iter() {
            if line.contains("panicked") {
                println!("tracing: {line}");
            }
        }
        return;
    }
    let (stdout, stderr) = run_child(
        "contained_panics_are_reported_redacted_and_never_printed_raw",
        PANIC_CHILD,
    );
    // Nothing of either panic reached stderr, redacted or not.
    assert_no_secret("stderr", &stderr);
    for raw in ["vault crashed", "audit failed", "panicked at"] {
        assert!(!stderr.contains(raw), "stderr shows {raw:?}:\n{stderr}");
    }
    // The runtime reported both, redacted.
    for (what, start, phrase) in [
        (
            "the agent's observation",
            "observation: ",
            "the tool panicked: vault crashed",
        ),
        (
            "the HookPanicked event",
            "hook panicked event: ",
            "audit failed",
        ),
        (
            "the ToolUsageError event",
            "tool error event: ",
            "the tool panicked: vault crashed",
        ),
        (
            "the tool panic's tracing line",
            "tracing: WARN crew_runtime::executor:",
            "the tool panicked: vault crashed",
        ),
        (
            "the hook panic's tracing line",
            "tracing: WARN hooks_core::dispatch:",
            "hook panicked: audit failed",
        ),
    ] {
        let line = stdout
            .lines()
            .find(|line| line.contains(start) && line.contains(phrase))
            .unwrap_or_else(|| panic!("no report of {what}:\n{stdout}"));
        assert_clean(what, line);
    }
}

const OUTSIDE_CHILD: &str = "HARDENING_EXITS_OUTSIDE_CHILD";

#[test]
fn panics_outside_hooks_and_tools_still_reach_the_previous_hook() {
    if is_child(OUTSIDE_CHILD) {
        let _lines = tracing_lines();
        // The program's own hook, installed before the first kickoff: the
        // runtime's hook chains to it for every panic it does not contain.
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            eprintln!(
                "program hook: {}",
                info.payload_as_str().unwrap_or("a non-text payload")
            );
            default(info);
        }));
        kickoff(&leaky_crew(false)).expect("the run finishes");
        let outside = std::thread::Builder::new()
            .name("outside".into())
            .spawn(|| panic!("an ordinary panic on another thread"))
            .expect("spawns")
            .join();
        assert!(outside.is_err());
        let here = std::panic::catch_unwind(|| panic!("an ordinary panic on the agent's thread"));
        assert!(here.is_err());
        return;
    }
    let (_, stderr) = run_child(
        "panics_outside_hooks_and_tools_still_reach_the_previous_hook",
        OUTSIDE_CHILD,
    );
    for printed in [
        "program hook: an ordinary panic on another thread",
        "program hook: an ordinary panic on the agent's thread",
    ] {
        assert!(stderr.contains(printed), "{printed:?} not in:\n{stderr}");
    }
    // Rust's default hook, which the program's own chains to, printed it.
    assert!(
        stderr
            .lines()
            .any(|line| line.starts_with("thread 'outside'") && line.contains("panicked at")),
        "{stderr}"
    );
    // The contained ones reached neither hook.
    assert!(!stderr.contains("vault crashed"), "{stderr}");
    assert!(!stderr.contains("audit failed"), "{stderr}");
}

#[test]
fn a_secret_at_the_observation_cut_is_redacted_before_the_cut() {
    let _lines = tracing_lines();
    let global = fresh_registry();
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("fetch_account", json!({"query": "ada"}))
            .answer("done"),
    );
    let analyst = agent("Analyst", tools(), &llm);
    // "deploy token " is 13 bytes: a cut at 24 falls inside the token, and
    // what is left of it ("ghp_R2d2C3p") no longer looks like a token.
    let crew = Crew::builder()
        .agent(analyst.clone())
        .task(Task::builder("Audit").agent(&analyst).build())
        .global_registry(global)
        .max_observation_bytes(24)
        .redact_with(SecretRedactor::new())
        .build()
        .expect("builds");

    crew.kickoff_blocking(()).expect("the run finishes");

    let observation = llm.requests()[1].observations()[0].to_owned();
    assert!(
        observation.contains("[observation truncated:"),
        "{observation}"
    );
    assert!(
        observation.starts_with("deploy token [GITHUB-TO"),
        "{observation}"
    );
    assert!(!observation.contains("ghp_R2d2"), "{observation}");
}

#[test]
fn an_approval_prompt_shows_the_input_redacted() {
    let global = fresh_registry();
    global
        .register_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("credentials"),
            |ctx: &mut ToolCallHookContext| {
                ctx.tool_input
                    .insert("api_key".into(), json!(INJECTED_SECRET));
            },
        )
        .expect("registers");
    async fn approval(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
        let input = Value::Object(ctx.tool_input.clone());
        let answer = ctx
            .request_human_input(&format!("Run with {input}?"), "yes/no")
            .await?;
        if answer == "yes" {
            Ok(())
        } else {
            Err("not approved".into())
        }
    }
    global
        .register_async_hook_with(PRE_TOOL_CALL, HookOptions::new().name("approval"), approval)
        .expect("registers");
    let answers = Arc::new(ScriptedInput::new(["yes"]));
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("fetch_account", json!({"query": "ada"}))
            .answer("done"),
    );
    let analyst = agent("Analyst", tools(), &llm);
    let crew = Crew::builder()
        .agent(analyst.clone())
        .task(Task::builder("Audit").agent(&analyst).build())
        .global_registry(global)
        .human_input(answers.clone())
        .redact_with(SecretRedactor::new())
        .build()
        .expect("builds");
    crew.kickoff_blocking(()).expect("runs");

    let prompts = answers.prompts();
    assert_eq!(prompts.len(), 1, "one approval asked");
    assert_no_secret("the approval prompt", &prompts[0].0);
    assert!(
        prompts[0].0.contains(INJECTED_MARKER),
        "the prompt shows where the key was: {}",
        prompts[0].0
    );
    // The input the request carries for the approval UI is cleaned too.
    let input = answers.requests()[0]
        .tool_input
        .as_ref()
        .map(Value::to_string)
        .unwrap_or_default();
    assert_no_secret("the approval request's input", &input);
    assert!(input.contains(INJECTED_MARKER), "{input}");
}
