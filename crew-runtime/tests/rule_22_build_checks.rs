//! Rule 22: building a crew checks hook filters against its tools and
//! roles; `explain` shows what a call would meet.

mod common;

use std::sync::Arc;

use common::*;
use crew_runtime::prelude::*;
use crew_runtime::{FilterKind, Verdict};

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
        &Arc::new(ScriptedLlm::new()),
    );
    Crew::builder()
        .name("research")
        .agent(researcher.clone())
        .task(Task::builder("Research").agent(&researcher).build())
        .global_registry(global.clone())
}

#[test]
fn crew_build_warns_on_filters_naming_absent_tools() {
    let global = registry_with_typos();
    let crew = builder(&global)
        .hook_with(
            POST_TOOL_CALL,
            HookOptions::new().name("crew-typo").tools(["fetch_page"]),
            |_: &mut ToolCallHookContext| {},
        )
        .build()
        .expect("outside strict mode the crew builds");

    let warnings: Vec<(&str, FilterKind)> = crew
        .build_warnings()
        .iter()
        .map(|w| (w.hook.name.as_str(), w.filter))
        .collect();
    assert_eq!(
        warnings,
        [
            ("typo-tool", FilterKind::Tools),
            ("typo-role", FilterKind::Agents),
            ("crew-typo", FilterKind::Tools),
        ]
    );
    assert_eq!(
        crew.build_warnings()[0].to_string(),
        "hook `typo-tool` (PRE_TOOL_CALL, registered at run time) has tools = [\"web_serch\"], \
         but crew `research` has none of them, so it never runs here (the crew's tools: \
         web_search)"
    );
    assert_eq!(crew.check_hook_filters(), crew.build_warnings());
}

#[test]
fn strict_mode_fails() {
    let global = registry_with_typos();

    let error = builder(&global)
        .strict(true)
        .build()
        .expect_err("strict mode refuses filters that name nothing");

    let BuildError::UnmatchedHookFilters(warnings) = &error else {
        panic!("expected unmatched filters, got {error:?}");
    };
    assert_eq!(warnings.len(), 2);
    let message = error.to_string();
    assert!(
        message.starts_with("strict mode: 2 hook filter(s) name no tool or role"),
        "{message}"
    );
    assert!(message.contains("hook `typo-tool`"), "{message}");
    assert!(message.contains("hook `typo-role`"), "{message}");
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
    assert!(crew.is_strict());
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
