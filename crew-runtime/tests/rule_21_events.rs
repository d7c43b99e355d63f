//! Rule 21 and the runtime's tool-usage events: what fires, in which order,
//! on which bus.

mod common;

use std::sync::Arc;

use common::*;
use crew_runtime::events::ToolUsageFinishedEvent;
use crew_runtime::prelude::*;

fn registry_with_policy() -> Arc<HookRegistry> {
    let global = fresh_registry();
    global
        .register_hook(PRE_TOOL_CALL, |_: &mut ToolCallHookContext| {})
        .expect("registers");
    global
        .register_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("no-deletes").tools(["delete_file"]),
            |_: &mut ToolCallHookContext| -> Result<(), HookAborted> {
                Err(HookAborted::with_reason("deleting is off"))
            },
        )
        .expect("registers");
    global
        .register_hook(POST_TOOL_CALL, |ctx: &mut ToolCallHookContext| {
            ctx.tool_result.as_deref().map(str::to_uppercase)
        })
        .expect("registers");
    global
}

#[test]
fn events_fire_in_order() {
    let global = registry_with_policy();
    let delete = Tool::dynamic("delete_file", "Deletes", json!({"type": "object"}), |_| {
        Ok::<_, String>(json!("deleted"))
    });
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("web_search", json!({"query": "rust"}))
            .call("delete_file", json!({"path": "x"}))
            .answer("done"),
    );
    let crew = crew(
        &global,
        agent("Researcher", vec![search_tool(&log()), delete], &llm),
    );
    let on_crew = record_events(crew.events());
    let on_global = record_events(global.events());

    crew.kickoff_blocking(()).expect("runs");

    // As the reference: a call begins before its PRE chain, a blocked one
    // too; the tool itself starts after it.
    let expected = [
        r#"started tool=web_search input={"query":"rust"} agent=Researcher"#,
        "dispatched PRE_TOOL_CALL proceeded hooks=1 tool=web_search agent=Researcher",
        r#"runs tool=web_search input={"query":"rust"}"#,
        "dispatched POST_TOOL_CALL modified hooks=1 tool=web_search agent=Researcher",
        "finished tool=web_search blocked=false result=RESULTS FOR RUST agent=Researcher",
        r#"started tool=delete_file input={"path":"x"} agent=Researcher"#,
        "dispatched PRE_TOOL_CALL aborted hooks=2 tool=delete_file agent=Researcher \
         abort=(no-deletes: deleting is off)",
        "dispatched POST_TOOL_CALL modified hooks=1 tool=delete_file agent=Researcher",
        "finished tool=delete_file blocked=true \
         result=TOOL EXECUTION BLOCKED BY HOOK. TOOL: DELETE_FILE agent=Researcher",
    ];
    assert_eq!(take(&on_crew), expected);
    assert_eq!(take(&on_global), expected, "the global bus hears the same");
}

#[test]
fn tool_usage_events_name_task_and_crew() {
    let global = fresh_registry();
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("web_search", json!({"query": "rust"}))
            .answer("done"),
    );
    let crew = crew(
        &global,
        agent("Researcher", vec![search_tool(&log())], &llm),
    );
    let finished = log();
    let sink = finished.clone();
    crew.events().subscribe(move |event| {
        if let Event::ToolUsageFinished(finished) = event {
            push(&sink, finished.clone());
        }
    });

    crew.kickoff_blocking(()).expect("runs");

    let finished = take(&finished);
    assert_eq!(finished.len(), 1);
    let ToolUsageFinishedEvent {
        tool_name,
        result,
        blocked,
        agent_role,
        task,
        crew,
        ..
    } = &finished[0];
    assert_eq!(tool_name, "web_search");
    assert_eq!(result, "results for rust");
    assert!(!blocked);
    assert_eq!(agent_role.as_deref(), Some("Researcher"));
    assert_eq!(task.as_deref(), Some("Do the work"));
    assert_eq!(crew.as_deref(), Some("test-crew"));
}

#[test]
fn another_crews_calls_do_not_reach_this_crews_bus() {
    let global = fresh_registry();
    let model = || {
        Arc::new(
            ScriptedLlm::new()
                .call("web_search", json!({"query": "rust"}))
                .answer("done"),
        )
    };
    let mine = crew(
        &global,
        agent("Researcher", vec![search_tool(&log())], &model()),
    );
    let other = crew(
        &global,
        agent("Researcher", vec![search_tool(&log())], &model()),
    );
    let on_mine = record_events(mine.events());
    let on_global = record_events(global.events());

    other.kickoff_blocking(()).expect("runs");

    assert!(take(&on_mine).is_empty());
    assert_eq!(
        take(&on_global).len(),
        3,
        "the other crew's call: begun, run and finished"
    );
}
