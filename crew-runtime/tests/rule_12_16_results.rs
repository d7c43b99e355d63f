//! Rules 12 and 16: what the agent sees of a result, and what stays typed.

mod common;

use std::sync::Arc;

use common::*;
use crew_runtime::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize)]
struct Hits {
    titles: Vec<String>,
    total: u32,
    secret: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct Query {
    query: String,
}

fn hits_tool() -> crew_runtime::TypedTool<Query, Hits> {
    Tool::typed("search", "Finds pages", |args: Query| {
        Ok::<_, String>(Hits {
            titles: vec![format!("{} book", args.query), "the guide".into()],
            total: 2,
            secret: "hunter2".into(),
        })
    })
}

fn one_call_crew(global: &Arc<HookRegistry>, tool: Tool, llm: &Arc<ScriptedLlm>) -> Crew {
    crew(global, agent("Researcher", vec![tool], llm))
}

fn one_call_model() -> Arc<ScriptedLlm> {
    Arc::new(
        ScriptedLlm::new()
            .call("search", json!({"query": "rust"}))
            .answer("done"),
    )
}

#[test]
fn replacement_reaches_model_while_raw_stays_typed() {
    let global = fresh_registry();
    global
        .register_hook(POST_TOOL_CALL, |ctx: &mut ToolCallHookContext| {
            ctx.tool_result
                .as_deref()
                .map(|r| r.replace("hunter2", "[REDACTED]"))
        })
        .expect("registers");
    let second_saw = log();
    let sink = second_saw.clone();
    global
        .register_hook(POST_TOOL_CALL, move |ctx: &mut ToolCallHookContext| {
            let raw = ctx.raw_tool_result.as_ref();
            let typed = raw.and_then(|r| r.downcast_ref::<Hits>()).cloned();
            let json_secret = raw.map(|r| r.as_json()["secret"].clone());
            push(&sink, (ctx.tool_result.clone(), typed, json_secret));
            None::<String>
        })
        .expect("registers");
    let llm = one_call_model();
    let crew = one_call_crew(&global, hits_tool().into(), &llm);

    crew.kickoff_blocking(()).expect("the run finishes");

    let redacted = r#"{"secret":"[REDACTED]","titles":["rust book","the guide"],"total":2}"#;
    let seen = take(&second_saw);
    assert_eq!(seen.len(), 1);
    let (result, typed, json_secret) = &seen[0];
    assert_eq!(
        result.as_deref(),
        Some(redacted),
        "the next POST hook sees the replacement"
    );
    assert_eq!(typed.as_ref().map(|h| h.secret.as_str()), Some("hunter2"));
    assert_eq!(json_secret, &Some(json!("hunter2")));
    assert_eq!(llm.requests()[1].observations(), [redacted]);
}

#[test]
fn empty_replacement_is_a_valid_replacement() {
    let global = fresh_registry();
    global
        .register_hook(POST_TOOL_CALL, |_: &mut ToolCallHookContext| {
            Some(String::new())
        })
        .expect("registers");
    let llm = one_call_model();
    let crew = one_call_crew(&global, hits_tool().into(), &llm);

    crew.kickoff_blocking(()).expect("the run finishes");

    assert_eq!(llm.requests()[1].observations(), [""]);
}

#[test]
fn serialize_results_render_as_compact_json() {
    let global = fresh_registry();
    let llm = one_call_model();
    let crew = one_call_crew(&global, hits_tool().into(), &llm);

    crew.kickoff_blocking(()).expect("the run finishes");

    assert_eq!(
        llm.requests()[1].observations(),
        [r#"{"secret":"hunter2","titles":["rust book","the guide"],"total":2}"#]
    );
}

#[test]
fn custom_formatter() {
    let global = fresh_registry();
    let raw_seen = log();
    let sink = raw_seen.clone();
    global
        .register_hook(POST_TOOL_CALL, move |ctx: &mut ToolCallHookContext| {
            let raw = ctx.raw_tool_result.as_ref();
            push(&sink, raw.map(|r| r.as_json()["total"].clone()));
        })
        .expect("registers");
    let tool = hits_tool().with_formatter(|hits: &Hits| {
        let mut text = format!("**{} hits**", hits.total);
        for title in &hits.titles {
            text.push_str(&format!("\n- {title}"));
        }
        text
    });
    let llm = one_call_model();
    let crew = one_call_crew(&global, tool.into(), &llm);

    crew.kickoff_blocking(()).expect("the run finishes");

    assert_eq!(
        llm.requests()[1].observations(),
        ["**2 hits**\n- rust book\n- the guide"]
    );
    assert_eq!(
        take(&raw_seen),
        [Some(json!(2))],
        "raw_tool_result stays JSON-reachable"
    );
}

#[test]
fn dynamic_tool_results_render_like_typed_ones() {
    let global = fresh_registry();
    let tool = Tool::dynamic("search", "Finds pages", json!({"type": "object"}), |args| {
        Ok::<_, String>(json!({"query": args["query"], "pages": [1, 2]}))
    });
    let text = Tool::dynamic("echo", "Echoes", json!({"type": "object"}), |args| {
        Ok::<_, String>(args["query"].clone())
    });
    let llm = Arc::new(
        ScriptedLlm::new()
            .calls([
                ("search", json!({"query": "rust"})),
                ("echo", json!({"query": "plain text"})),
            ])
            .answer("done"),
    );
    let crew = crew(&global, agent("Researcher", vec![tool, text], &llm));

    crew.kickoff_blocking(()).expect("the run finishes");

    assert_eq!(
        llm.requests()[1].observations(),
        [r#"{"pages":[1,2],"query":"rust"}"#, "plain text"]
    );
}
