//! Rule 22 (and §8: "a misspelled filter is caught before the first call in
//! a program with several crews, without a log subscriber, with a did you
//! mean"): a crew's own hooks are checked against its tools and roles when
//! it is built; global hooks against every crew built on their registry,
//! at the first kickoff. `explain` shows what a call would meet.

mod common;

use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};

use common::*;
use crew_runtime::PRE_MODEL_CALL;
use crew_runtime::prelude::*;
use crew_runtime::{FilterKind, FilterScope, Verdict};

fn registry_with_typos() -> Arc<HookRegistry> {
    let global = fresh_registry();
    // Names a tool no agent has (a typo of web_search).
    global
        .register_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("typo-tool").tools(["web_serch"]),
            |_: &mut ToolCallHookContext| {},
        )
        .expect("registers");
    // Names a role no agent has.
    global
        .register_hook_with(
            POST_TOOL_CALL,
            HookOptions::new().name("typo-role").agents(["Reseacher"]),
            |_: &mut ToolCallHookContext| {},
        )
        .expect("registers");
    // Names one present tool among absent ones, and the present role: fine.
    global
        .register_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new()
                .name("fine")
                .tools(["delete_file", "Web Search"])
                .agents(["Researcher"]),
            |_: &mut ToolCallHookContext| {},
        )
        .expect("registers");
    global
}

fn builder(global: &Arc<HookRegistry>) -> crew_runtime::CrewBuilder {
    let researcher = agent(
        "Researcher",
        vec![search_tool(&log())],
        &Arc::new(ScriptedLlm::new().answer("done")),
    );
    Crew::builder()
        .name("research")
        .agent(researcher.clone())
        .task(Task::builder("Research").agent(&researcher).build())
        .global_registry(global.clone())
}

/// A `fetch_page` tool.
fn fetch_tool() -> Tool {
    Tool::dynamic(
        "fetch_page",
        "Fetches a page",
        json!({"type": "object"}),
        |_| Ok::<_, String>(json!("<html>")),
    )
}

/// A crew named `reading`, whose `Reader` has only `fetch_page`.
fn reading_crew(global: &Arc<HookRegistry>, strict: bool) -> Crew {
    let reader = agent(
        "Reader",
        vec![fetch_tool()],
        &Arc::new(ScriptedLlm::new().answer("read")),
    );
    Crew::builder()
        .name("reading")
        .agent(reader.clone())
        .task(Task::builder("Read").agent(&reader).build())
        .global_registry(global.clone())
        .strict(strict)
        .build()
        .expect("the reading crew builds")
}

fn summary(
    warnings: &[crew_runtime::FilterWarning],
) -> Vec<(&str, FilterKind, &str, Option<&str>)> {
    warnings
        .iter()
        .map(|w| {
            (
                w.hook.name.as_str(),
                w.filter,
                w.name.as_str(),
                w.suggestion.as_deref(),
            )
        })
        .collect()
}

#[test]
fn crew_build_warns_on_its_own_hooks_filters_naming_absent_tools() {
    let global = registry_with_typos();
    let crew = builder(&global)
        .hook_with(
            POST_TOOL_CALL,
            HookOptions::new().name("crew-typo").tools(["fetch_page"]),
            |_: &mut ToolCallHookContext| {},
        )
        .build()
        .expect("outside strict mode the crew builds");

    assert_eq!(
        summary(crew.build_warnings()),
        [("crew-typo", FilterKind::Tools, "fetch_page", None)]
    );
    assert_eq!(crew.build_warnings()[0].scope, FilterScope::Crew);
    assert_eq!(
        crew.build_warnings()[0].to_string(),
        "hook `crew-typo` (POST_TOOL_CALL, crew research) filters on tool `fetch_page`, which \
         crew `research` does not have, so the hook never runs for it (the crew's tools: \
         web_search)"
    );
}

#[test]
fn check_hook_filters_lists_global_typos_with_a_suggestion() {
    let global = registry_with_typos();
    let crew = builder(&global).build().expect("builds");

    let warnings = crew.check_hook_filters();

    // `fine` names `delete_file`, which no crew has, but its filter matches
    // `web_search` and `delete_file` resembles nothing: deliberate.
    assert_eq!(
        summary(&warnings),
        [
            (
                "typo-tool",
                FilterKind::Tools,
                "web_serch",
                Some("web_search")
            ),
            (
                "typo-role",
                FilterKind::Agents,
                "Reseacher",
                Some("Researcher")
            ),
        ]
    );
    assert!(warnings.iter().all(|w| w.scope == FilterScope::AllCrews));
    assert_eq!(
        warnings[0].to_string(),
        "hook `typo-tool` (PRE_TOOL_CALL, registered at run time) filters on tool `web_serch`, \
         which no crew built so far has, so the hook never runs for it; did you mean \
         `web_search`? (the crews' tools: web_search). If a crew built later has it, register \
         the hook with HookOptions::new().unchecked_filters()"
    );
    assert!(
        crew.build_warnings().is_empty(),
        "global hooks are not checked at build"
    );
}

#[test]
fn a_typo_next_to_correct_entries_is_caught_and_a_deliberate_extra_name_is_not() {
    let global = fresh_registry();
    global
        .register_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new()
                .name("guard")
                .tools(["web_search", "fetch_pgae", "drop_table"]),
            |_: &mut ToolCallHookContext| {},
        )
        .expect("registers");
    let research = builder(&global).build().expect("builds");
    reading_crew(&global, false);

    assert_eq!(
        summary(&research.check_hook_filters()),
        [("guard", FilterKind::Tools, "fetch_pgae", Some("fetch_page"))]
    );
}

#[test]
fn strict_mode_fails_the_build_on_the_crews_own_filters() {
    let global = fresh_registry();

    let error = builder(&global)
        .strict(true)
        .hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("crew-typo").tools(["web_serch"]),
            |_: &mut ToolCallHookContext| {},
        )
        .build()
        .expect_err("strict mode refuses a crew hook filter that names nothing");

    let BuildError::UnmatchedHookFilters(warnings) = &error else {
        panic!("expected unmatched filters, got {error:?}");
    };
    assert_eq!(
        summary(warnings),
        [(
            "crew-typo",
            FilterKind::Tools,
            "web_serch",
            Some("web_search")
        )]
    );
    let message = error.to_string();
    assert!(
        message.starts_with("strict mode: 1 filter entry of this crew's hooks names no tool"),
        "{message}"
    );
    assert!(message.contains("did you mean `web_search`?"), "{message}");
}

#[test]
fn strict_mode_fails_the_kickoff_on_global_filters_naming_no_crews_tool() {
    let global = registry_with_typos();
    let llm = Arc::new(ScriptedLlm::new().answer("done"));
    let researcher = agent("Researcher", vec![search_tool(&log())], &llm);
    let crew = Crew::builder()
        .agent(researcher.clone())
        .task(Task::builder("Research").agent(&researcher).build())
        .global_registry(global.clone())
        .strict(true)
        .build()
        .expect("strict mode builds: another crew may still have the names");

    let error = crew
        .kickoff_blocking(())
        .expect_err("the first kickoff checks");

    let CrewError::UnmatchedHookFilters(warnings) = &error else {
        panic!("expected unmatched filters, got {error:?}");
    };
    let names: Vec<&str> = warnings.iter().map(|w| w.name.as_str()).collect();
    assert_eq!(names, ["web_serch", "Reseacher"]);
    let message = error.to_string();
    assert!(
        message.starts_with("strict mode: 2 hook filter entries name nothing the hook can"),
        "{message}"
    );
    assert!(llm.requests().is_empty(), "the model was never asked");
}

#[test]
fn strict_mode_builds_when_every_filter_matches() {
    let global = fresh_registry();
    global
        .register_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new()
                .tools(["WebSearch"])
                .agents(["Researcher"]),
            |_: &mut ToolCallHookContext| {},
        )
        .expect("registers");

    let crew = builder(&global).strict(true).build().expect("builds");

    assert!(crew.build_warnings().is_empty());
    assert!(crew.check_hook_filters().is_empty());
    assert!(crew.is_strict());
    assert_eq!(crew.kickoff_blocking(()).expect("runs").raw, "done");
}

#[test]
fn two_crews_with_disjoint_tools_and_a_correct_global_filter_warn_nothing() {
    let global = fresh_registry();
    for (name, tool, role) in [
        ("search-audit", "web_search", "Researcher"),
        ("fetch-audit", "Fetch Page", "Reader"),
    ] {
        global
            .register_hook_with(
                PRE_TOOL_CALL,
                HookOptions::new().name(name).tools([tool]).agents([role]),
                |_: &mut ToolCallHookContext| {},
            )
            .expect("registers");
    }

    let research = builder(&global).strict(true).build().expect("builds");
    let reading = reading_crew(&global, true);

    assert!(research.check_hook_filters().is_empty());
    assert!(reading.check_hook_filters().is_empty());
    assert_eq!(
        research.kickoff_blocking(()).expect("strict, and runs").raw,
        "done"
    );
    assert_eq!(
        reading.kickoff_blocking(()).expect("strict, and runs").raw,
        "read"
    );
}

#[test]
fn strict_mode_in_a_program_with_two_crews_errors_on_the_typo_only() {
    let global = fresh_registry();
    global
        .register_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("fetch-audit").tools(["fetch_page"]),
            |_: &mut ToolCallHookContext| {},
        )
        .expect("registers");
    let typo = global
        .register_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("search-audit").tools(["web_serch"]),
            |_: &mut ToolCallHookContext| {},
        )
        .expect("registers");
    let research = builder(&global).strict(true).build().expect("builds");
    reading_crew(&global, true);

    let error = research
        .kickoff_blocking(())
        .expect_err("the typo fails the kickoff");

    let CrewError::UnmatchedHookFilters(warnings) = &error else {
        panic!("expected unmatched filters, got {error:?}");
    };
    // `fetch_page` is the other crew's tool: not an error.
    assert_eq!(
        summary(warnings),
        [(
            "search-audit",
            FilterKind::Tools,
            "web_serch",
            Some("web_search")
        )]
    );
    // Fixed, the next kickoff checks again and runs.
    assert!(global.unregister_hook(PRE_TOOL_CALL, typo));
    assert_eq!(research.kickoff_blocking(()).expect("runs").raw, "done");
}

#[test]
fn a_filter_that_opts_out_is_not_checked() {
    let global = fresh_registry();
    global
        .register_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new()
                .name("later-crew-guard")
                .tools(["deploy"])
                .unchecked_filters(),
            |_: &mut ToolCallHookContext| {},
        )
        .expect("registers");

    let crew = builder(&global)
        .strict(true)
        .hook_with(
            PRE_MODEL_CALL,
            HookOptions::new().agents(["Deployer"]).unchecked_filters(),
            |_: &mut LlmCallHookContext| {},
        )
        .build()
        .expect("unchecked crew filters do not fail the build");

    assert!(crew.check_hook_filters().is_empty());
    assert_eq!(crew.kickoff_blocking(()).expect("runs").raw, "done");
}

#[test]
fn explain_merges_global_and_crew_hooks() {
    let global = registry_with_typos();
    let crew = builder(&global)
        .hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("crew-gate"),
            |_: &mut ToolCallHookContext| {},
        )
        .build()
        .expect("builds");

    let explanation = crew.explain("Web Search", "Researcher");

    assert_eq!(explanation.tool_name.as_deref(), Some("web_search"));
    assert_eq!(explanation.running(PRE_TOOL_CALL), ["fine", "crew-gate"]);
    let verdicts: Vec<(&str, &Verdict)> = explanation
        .hooks
        .iter()
        .map(|h| (h.hook.name.as_str(), &h.verdict))
        .collect();
    assert_eq!(
        verdicts,
        [
            ("typo-tool", &Verdict::SkippedByTools),
            ("fine", &Verdict::Runs),
            ("crew-gate", &Verdict::Runs),
            ("typo-role", &Verdict::SkippedByAgents),
        ]
    );
}

// ---- what a program without (and with) a log subscriber sees ----

const STDERR_CHILD: &str = "RULE_22_STDERR_CHILD";
const TRACING_CHILD: &str = "RULE_22_TRACING_CHILD";

const TYPO_WARNING: &str = "warning: hook `audit` (PRE_TOOL_CALL, registered at run time) \
                            filters on tool `web_serch`, which no crew built so far has, so the \
                            hook never runs for it; did you mean `web_search`? (the crews' \
                            tools: fetch_page, web_search)";

/// Runs `test` of this binary again in a child process with `marker` set;
/// returns its standard output and standard error.
fn run_child(test: &str, marker: &str) -> (String, String) {
    let exe = std::env::current_exe().expect("the test binary knows its path");
    let output = Command::new(exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(marker, "1")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
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

/// Two crews on one registry with a misspelled global filter, each kicked
/// off twice.
fn two_crews_with_a_typo() {
    let global = fresh_registry();
    global
        .register_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("audit").tools(["web_serch"]),
            |_: &mut ToolCallHookContext| {},
        )
        .expect("registers");
    let llm = Arc::new(ScriptedLlm::new().answer("one").answer("two"));
    let researcher = agent("Researcher", vec![search_tool(&log())], &llm);
    let research = Crew::builder()
        .agent(researcher.clone())
        .task(Task::builder("Research").agent(&researcher).build())
        .global_registry(global.clone())
        .build()
        .expect("builds");
    let reader_llm = Arc::new(ScriptedLlm::new().answer("one").answer("two"));
    let reader = agent("Reader", vec![fetch_tool()], &reader_llm);
    let reading = Crew::builder()
        .agent(reader.clone())
        .task(Task::builder("Read").agent(&reader).build())
        .global_registry(global)
        .build()
        .expect("builds");
    for _ in 0..2 {
        research.kickoff_blocking(()).expect("runs");
        reading.kickoff_blocking(()).expect("runs");
    }
}

#[test]
fn a_misspelled_filter_is_printed_once_on_stderr_without_a_subscriber() {
    if is_child(STDERR_CHILD) {
        two_crews_with_a_typo();
        return;
    }

    let (_, stderr) = run_child(
        "a_misspelled_filter_is_printed_once_on_stderr_without_a_subscriber",
        STDERR_CHILD,
    );

    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("warning:"))
        .collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(warnings[0].starts_with(TYPO_WARNING), "{stderr}");
}

/// Keeps the message of every `tracing` event of level WARN or above.
struct Capture(Arc<Mutex<Vec<String>>>);

struct Message<'a>(&'a mut String);

impl tracing::field::Visit for Message<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            *self.0 = format!("{value:?}");
        }
    }
}

impl tracing::Subscriber for Capture {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        *metadata.level() <= tracing::Level::WARN
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut message = String::new();
        event.record(&mut Message(&mut message));
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(message);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[test]
fn a_misspelled_filter_goes_to_a_tracing_subscriber_instead_of_stderr() {
    if is_child(TRACING_CHILD) {
        let messages = Arc::new(Mutex::new(Vec::new()));
        tracing::subscriber::with_default(Capture(messages.clone()), two_crews_with_a_typo);
        for message in messages
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            // On a line of its own: the test harness leaves its own line
            // open while the test runs.
            println!("\ncaptured: {message}");
        }
        return;
    }

    let (stdout, stderr) = run_child(
        "a_misspelled_filter_goes_to_a_tracing_subscriber_instead_of_stderr",
        TRACING_CHILD,
    );

    let captured: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("captured: "))
        .collect();
    let expected = TYPO_WARNING.trim_start_matches("warning: ");
    assert_eq!(captured.len(), 1, "{stdout}");
    assert!(captured[0].starts_with(expected), "{stdout}");
    assert!(!stderr.contains("warning:"), "{stderr}");
}

/// A tool named `name` that answers `ran`.
fn named_tool(name: &str) -> Tool {
    Tool::dynamic(name, "Deletes", json!({"type": "object"}), |_| {
        Ok::<_, String>(json!("ran"))
    })
}

#[test]
fn rule_22_a_tool_that_only_looks_like_a_filtered_name_is_refused_at_build() {
    let global = fresh_registry();
    global
        .register_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("guard").tools(["delete_file"]),
            |_: &mut ToolCallHookContext| {},
        )
        .expect("registers");
    let model = Arc::new(ScriptedLlm::new().answer("done"));
    let deleter = agent("Deleter", vec![named_tool("de1ete_file")], &model);
    let error = Crew::builder()
        .agent(deleter.clone())
        .task(Task::builder("Delete").agent(&deleter).build())
        .global_registry(global)
        .build()
        .expect_err("de1ete_file imitates delete_file");
    assert_eq!(
        error,
        BuildError::LookAlikeToolName {
            role: "Deleter".to_owned(),
            tool: "de1ete_file".to_owned(),
            normalized: "de1ete_file".to_owned(),
            looks_like: "delete_file".to_owned(),
            hook: Some("guard".to_owned()),
        }
    );
    let message = error.to_string();
    assert!(
        message.contains("\"de1ete_file\"")
            && message.contains("looks like `delete_file`, which hook `guard` filters on"),
        "{message}"
    );
}

#[test]
fn rule_22_two_tools_of_a_crew_that_look_alike_are_refused_at_build() {
    let model = Arc::new(ScriptedLlm::new().answer("done"));
    let one = agent("One", vec![named_tool("drop_table")], &model);
    let two = agent("Two", vec![named_tool("dr0p_table")], &model);
    let error = Crew::builder()
        .agent(one.clone())
        .agent(two)
        .task(Task::builder("Drop").agent(&one).build())
        .global_registry(fresh_registry())
        .build()
        .expect_err("dr0p_table imitates drop_table");
    assert!(
        matches!(&error, BuildError::LookAlikeToolName { tool, looks_like, hook: None, .. }
            if tool == "dr0p_table" && looks_like == "drop_table"),
        "{error}"
    );
}

#[test]
fn rule_22_an_invisible_character_in_a_tool_name_is_refused_at_build_shown_escaped() {
    let model = Arc::new(ScriptedLlm::new().answer("done"));
    let deleter = agent("Deleter", vec![named_tool("\u{202E}elif_eteled")], &model);
    let error = Crew::builder()
        .agent(deleter.clone())
        .task(Task::builder("Delete").agent(&deleter).build())
        .global_registry(fresh_registry())
        .build()
        .expect_err("a right-to-left override");
    assert!(
        matches!(&error, BuildError::SuspiciousToolName { tool, .. } if tool == "\u{202E}elif_eteled"),
        "{error}"
    );
    let message = error.to_string();
    assert!(
        message.contains("\"\\u{202e}elif_eteled\"")
            && message.contains("U+202E, a bidirectional control")
            && !message.contains('\u{202E}'),
        "{message}"
    );
}

#[tokio::test]
async fn rule_22_a_look_alike_of_a_hook_registered_after_the_build_fails_the_first_kickoff() {
    let global = fresh_registry();
    let ran = Arc::new(Mutex::new(0));
    let counter = Arc::clone(&ran);
    let tool = Tool::dynamic(
        "delete_fiIe",
        "Deletes",
        json!({"type": "object"}),
        move |_| {
            *counter.lock().unwrap_or_else(PoisonError::into_inner) += 1;
            Ok::<_, String>(json!("ran"))
        },
    );
    let model = Arc::new(
        ScriptedLlm::new()
            .call("delete_fi_ie", json!({}))
            .answer("done"),
    );
    let deleter = agent("Deleter", vec![tool], &model);
    let crew = Crew::builder()
        .agent(deleter.clone())
        .task(Task::builder("Delete").agent(&deleter).build())
        .global_registry(global.clone())
        .build()
        .expect("no filter yet");
    global
        .register_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("guard").tools(["delete_file"]),
            |_: &mut ToolCallHookContext| -> Result<(), HookAborted> {
                Err(HookAborted::new("no deleting", "guard"))
            },
        )
        .expect("registers");
    let error = crew
        .kickoff(Inputs::new())
        .await
        .expect_err("delete_fiIe imitates delete_file");
    assert!(
        matches!(&error, CrewError::UntrustedToolName(BuildError::LookAlikeToolName { tool, .. })
            if tool == "delete_fiIe"),
        "{error}"
    );
    assert_eq!(*ran.lock().unwrap_or_else(PoisonError::into_inner), 0);
}

#[test]
fn rule_22_a_near_name_of_a_filter_gets_a_did_you_mean() {
    for near in ["x_delete_file", "delete_files"] {
        let global = fresh_registry();
        global
            .register_hook_with(
                PRE_TOOL_CALL,
                HookOptions::new().name("guard").tools(["delete_file"]),
                |_: &mut ToolCallHookContext| {},
            )
            .expect("registers");
        let model = Arc::new(ScriptedLlm::new().answer("done"));
        let deleter = agent("Deleter", vec![named_tool(near)], &model);
        let crew = Crew::builder()
            .agent(deleter.clone())
            .task(Task::builder("Delete").agent(&deleter).build())
            .global_registry(global)
            .build()
            .expect("a near name is a different name");
        let warnings = crew.check_hook_filters();
        assert_eq!(warnings.len(), 1, "{near}: {warnings:?}");
        assert_eq!(warnings[0].suggestion.as_deref(), Some(near));
    }
}
