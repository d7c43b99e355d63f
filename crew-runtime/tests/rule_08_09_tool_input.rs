//! Rules 8 and 9: the context hooks see, and the `tool_input` PRE and POST
//! hooks share with the tool.

mod common;

use std::sync::Arc;

use common::*;
use crew_runtime::prelude::*;

#[test]
fn in_place_input_edit_reaches_the_tool() {
    let global = fresh_registry();
    global
        .register_hook(PRE_TOOL_CALL, |ctx: &mut ToolCallHookContext| {
            let query = ctx.tool_input["query"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            ctx.tool_input
                .insert("query".into(), json!(format!("{query} language")));
            ctx.tool_input.insert("limit".into(), json!(3));
        })
        .expect("registers");
    let received = log();
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("web_search", json!({"query": "rust"}))
            .answer("done"),
    );
    let crew = crew(
        &global,
        agent("Researcher", vec![search_tool(&received)], &llm),
    );

    crew.kickoff_blocking(()).expect("the run finishes");

    assert_eq!(
        take(&received),
        [SearchArgs {
            query: "rust language".into(),
            limit: Some(3),
        }]
    );
    assert_eq!(
        llm.requests()[1].observations(),
        ["results for rust language"]
    );
}

#[test]
fn pre_and_post_share_tool_input() {
    let global = fresh_registry();
    global
        .register_hook(PRE_TOOL_CALL, |ctx: &mut ToolCallHookContext| {
            ctx.tool_input.insert("_stash".into(), json!("from PRE"));
        })
        .expect("registers");
    let seen_by_post = log();
    let sink = seen_by_post.clone();
    global
        .register_hook(POST_TOOL_CALL, move |ctx: &mut ToolCallHookContext| {
            let stash = ctx.tool_input.remove("_stash");
            push(&sink, stash.clone());
            let stash = stash.and_then(|s| s.as_str().map(str::to_owned))?;
            ctx.tool_result.as_deref().map(|r| format!("{r} ({stash})"))
        })
        .expect("registers");
    let received = log();
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("web_search", json!({"query": "rust"}))
            .answer("done"),
    );
    let crew = crew(
        &global,
        agent("Researcher", vec![search_tool(&received)], &llm),
    );

    crew.kickoff_blocking(()).expect("the run finishes");

    // The tool ignored the key it does not declare instead of failing.
    assert_eq!(take(&received).len(), 1);
    assert_eq!(take(&seen_by_post), [Some(json!("from PRE"))]);
    assert_eq!(
        llm.requests()[1].observations(),
        ["results for rust (from PRE)"]
    );
}

#[test]
fn hooks_see_tool_agent_task_and_crew() {
    let global = fresh_registry();
    let seen = log();
    let sink = seen.clone();
    global
        .register_hook(PRE_TOOL_CALL, move |ctx: &mut ToolCallHookContext| {
            let tool = ctx.tool_as::<Tool>().map(|t| t.description().to_owned());
            let agent = ctx.agent_as::<Agent>().map(|a| a.goal().to_owned());
            let task = ctx.task_as::<Task>().map(|t| t.description().to_owned());
            let crew = ctx.crew_as::<Crew>().map(|c| c.name().to_owned());
            push(&sink, (ctx.tool_name().to_owned(), tool, agent, task, crew));
        })
        .expect("registers");
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("Web Search", json!({"query": "rust"}))
            .answer("done"),
    );
    let researcher = agent("Researcher", vec![search_tool(&log())], &llm);
    let task = Task::builder("Research {topic}").agent(&researcher).build();
    let crew = Crew::builder()
        .name("research-crew")
        .agent(researcher)
        .task(task)
        .global_registry(global.clone())
        .build()
        .expect("builds");

    crew.kickoff_blocking([("topic", "Rust")])
        .expect("the run finishes");

    assert_eq!(
        take(&seen),
        [(
            "web_search".to_owned(),
            Some("Searches the web".to_owned()),
            Some("Get the task done".to_owned()),
            Some("Research Rust".to_owned()),
            Some("research-crew".to_owned()),
        )]
    );
}
