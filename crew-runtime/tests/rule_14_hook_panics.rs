//! Rule 14: a panicking hook is contained; fail-open by default,
//! fail-closed when it says so.

mod common;

use std::sync::Arc;

use common::*;
use crew_runtime::prelude::*;

fn one_search_model() -> Arc<ScriptedLlm> {
    Arc::new(
        ScriptedLlm::new()
            .call("web_search", json!({"query": "rust"}))
            .answer("done"),
    )
}

#[test]
fn panicking_hook_fails_open() {
    let global = fresh_registry();
    global
        .register_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("buggy"),
            |ctx: &mut ToolCallHookContext| -> Result<(), HookAborted> {
                if ctx.tool_name() == "web_search" {
                    panic!("bug in a hook");
                }
                Ok(())
            },
        )
        .expect("registers");
    global
        .register_hook(PRE_TOOL_CALL, |ctx: &mut ToolCallHookContext| {
            ctx.tool_input.insert("limit".into(), json!(7));
        })
        .expect("registers");
    let received = log();
    let llm = one_search_model();
    let crew = crew(
        &global,
        agent("Researcher", vec![search_tool(&received)], &llm),
    );
    let events = record_events(crew.events());

    let output = crew
        .kickoff_blocking(())
        .expect("a panicking hook does not end the run");

    assert_eq!(output.raw, "done");
    assert_eq!(
        take(&received),
        [SearchArgs {
            query: "rust".into(),
            limit: Some(7),
        }],
        "later hooks and the tool still run"
    );
    assert_eq!(llm.requests()[1].observations(), ["results for rust"]);
    assert!(take(&events).contains(&"panicked PRE_TOOL_CALL buggy fail_closed=false".to_owned()));
}

#[test]
fn fail_closed_hook_blocks() {
    let global = fresh_registry();
    global
        .register_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("strict-gate").fail_closed(),
            |_: &mut ToolCallHookContext| -> Result<(), HookAborted> { panic!("gate is broken") },
        )
        .expect("registers");
    let received = log();
    let llm = one_search_model();
    let crew = crew(
        &global,
        agent("Researcher", vec![search_tool(&received)], &llm),
    );
    let events = record_events(crew.events());

    let output = crew
        .kickoff_blocking(())
        .expect("a blocked call does not end the run");

    assert_eq!(output.raw, "done");
    assert!(take(&received).is_empty(), "the tool must not run");
    assert_eq!(
        llm.requests()[1].observations(),
        ["Tool execution blocked by hook. Tool: web_search"]
    );
    let events = take(&events);
    assert!(events.contains(&"panicked PRE_TOOL_CALL strict-gate fail_closed=true".to_owned()));
    assert!(
        events
            .iter()
            .any(|e| e.starts_with("finished tool=web_search blocked=true"))
    );
}

#[test]
fn fail_closed_post_hook_withholds_the_result() {
    let global = fresh_registry();
    global
        .register_hook_with(
            POST_TOOL_CALL,
            HookOptions::new().name("redactor").fail_closed(),
            |_: &mut ToolCallHookContext| -> Option<String> { panic!("redactor is broken") },
        )
        .expect("registers");
    let received = log();
    let llm = one_search_model();
    let crew = crew(
        &global,
        agent("Researcher", vec![search_tool(&received)], &llm),
    );

    crew.kickoff_blocking(()).expect("the run finishes");

    assert_eq!(take(&received).len(), 1);
    assert_eq!(
        llm.requests()[1].observations(),
        ["Tool result withheld: a fail-closed hook failed. Tool: web_search"]
    );
}
