//! Rules 11 to 13: a blocked call, a replaced result, an aborted run.

mod common;

use std::sync::Arc;

use common::*;
use crew_runtime::prelude::*;

#[test]
fn blocked_call_still_runs_post_hooks_and_model_sees_blocked_message() {
    let global = fresh_registry();
    global
        .register_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().tools(["delete_file"]),
            |ctx: &mut ToolCallHookContext| -> Result<(), HookAborted> {
                Err(HookAborted::new(
                    format!("{} is not allowed", ctx.tool_name()),
                    "safety-policy",
                ))
            },
        )
        .expect("registers");
    let later_pre_ran = log();
    let sink = later_pre_ran.clone();
    global
        .register_hook(PRE_TOOL_CALL, move |ctx: &mut ToolCallHookContext| {
            push(&sink, ctx.tool_name().to_owned());
        })
        .expect("registers");
    let post_saw = log();
    let sink = post_saw.clone();
    global
        .register_hook(POST_TOOL_CALL, move |ctx: &mut ToolCallHookContext| {
            let raw = ctx
                .raw_tool_result
                .as_ref()
                .and_then(|r| r.as_str().map(str::to_owned));
            push(&sink, (ctx.tool_result.clone(), raw));
        })
        .expect("registers");
    let deleted = log();
    let sink = deleted.clone();
    let delete = Tool::dynamic(
        "delete_file",
        "Deletes a file",
        json!({"type": "object"}),
        move |args| {
            push(&sink, args);
            Ok::<_, String>(json!("deleted"))
        },
    );
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("delete_file", json!({"path": "/etc/passwd"}))
            .answer("I could not delete it"),
    );
    let events = log();
    let crew = crew(&global, agent("Admin", vec![delete], &llm));
    let sink = events.clone();
    crew.events().subscribe(move |event| {
        if !is_lifecycle(event) {
            push(&sink, describe(event));
        }
    });

    let output = crew
        .kickoff_blocking(())
        .expect("a blocked call does not end the run");

    let blocked = "Tool execution blocked by hook. Tool: delete_file".to_owned();
    assert!(take(&deleted).is_empty(), "the tool must not run");
    assert!(
        take(&later_pre_ran).is_empty(),
        "later PRE hooks must not run"
    );
    assert_eq!(
        take(&post_saw),
        [(Some(blocked.clone()), Some(blocked.clone()))]
    );
    assert_eq!(llm.requests()[1].observations(), [blocked.as_str()]);
    assert_eq!(output.raw, "I could not delete it");
    assert!(
        take(&events).contains(
            &"dispatched PRE_TOOL_CALL aborted hooks=1 tool=delete_file agent=Admin \
          abort=(safety-policy: delete_file is not allowed)"
                .to_owned()
        )
    );
}

#[test]
fn legacy_false_blocks_like_an_abort() {
    let global = fresh_registry();
    global.register_before_tool_call_hook(|_: &mut ToolCallHookContext| Some(false));
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

    assert!(take(&received).is_empty());
    assert_eq!(
        llm.requests()[1].observations(),
        ["Tool execution blocked by hook. Tool: web_search"]
    );
}

#[test]
fn post_abort_ends_kickoff_with_reason_and_source() {
    let global = fresh_registry();
    global
        .register_hook(
            POST_TOOL_CALL,
            |ctx: &mut ToolCallHookContext| -> Result<Option<String>, HookAborted> {
                if ctx
                    .tool_result
                    .as_deref()
                    .is_some_and(|r| r.contains("rust"))
                {
                    return Err(HookAborted::new("the result leaks a secret", "dlp"));
                }
                Ok(None)
            },
        )
        .expect("registers");
    let later_post_ran = log();
    let sink = later_post_ran.clone();
    global
        .register_hook(POST_TOOL_CALL, move |ctx: &mut ToolCallHookContext| {
            push(&sink, ctx.tool_name().to_owned());
        })
        .expect("registers");
    let received = log();
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("web_search", json!({"query": "rust"}))
            .answer("never asked"),
    );
    let researcher = agent("Researcher", vec![search_tool(&received)], &llm);
    let second_llm = Arc::new(ScriptedLlm::new().answer("never asked either"));
    let writer = agent("Writer", Vec::new(), &second_llm);
    let crew = Crew::builder()
        .agents([researcher.clone(), writer.clone()])
        .task(Task::builder("Research").agent(&researcher).build())
        .task(Task::builder("Write").agent(&writer).build())
        .global_registry(global.clone())
        .build()
        .expect("builds");

    let error = crew
        .kickoff_blocking(())
        .expect_err("the POST hook aborts the run");

    assert_eq!(take(&received).len(), 1, "the tool ran before the abort");
    assert!(
        take(&later_post_ran).is_empty(),
        "later POST hooks are skipped"
    );
    let CrewError::Aborted { tool, agent, abort } = &error else {
        panic!("expected an abort, got {error:?}");
    };
    assert_eq!(
        (tool.as_str(), agent.as_str()),
        ("web_search", "Researcher")
    );
    assert_eq!(abort, &HookAborted::new("the result leaks a secret", "dlp"));
    assert_eq!(error.abort(), Some(abort));
    assert_eq!(
        error.to_string(),
        "the run was aborted after `web_search` (agent `Researcher`) ran: \
         hook aborted by dlp: the result leaks a secret"
    );
    assert_eq!(llm.asked(), 1, "the model is not asked again");
    assert_eq!(second_llm.asked(), 0, "later tasks do not start");
}

/// What a POST hook saw: the result and the raw result, as text.
type PostSaw = (Option<String>, Option<String>);

/// A crew whose one `delete_file` call is blocked by `hook`, built with
/// `tell` for `tell_model_why_blocked` and an optional redaction: what
/// the model was told, and what the POST hook saw (result, raw result).
fn blocked_observation(
    hook: impl Fn(&mut ToolCallHookContext) -> Result<(), HookAborted> + Send + Sync + 'static,
    tell: bool,
    redact: Option<crew_runtime::guards::SecretRedactor>,
) -> (Vec<String>, Vec<PostSaw>) {
    let global = fresh_registry();
    global
        .register_hook(PRE_TOOL_CALL, hook)
        .expect("registers");
    let post_saw = log();
    let sink = post_saw.clone();
    global
        .register_hook(POST_TOOL_CALL, move |ctx: &mut ToolCallHookContext| {
            let raw = ctx
                .raw_tool_result
                .as_ref()
                .and_then(|r| r.as_str().map(str::to_owned));
            push(&sink, (ctx.tool_result.clone(), raw));
        })
        .expect("registers");
    let delete = Tool::dynamic(
        "delete_file",
        "Deletes a file",
        json!({"type": "object"}),
        |_| Ok::<_, String>(json!("deleted")),
    );
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("delete_file", json!({"path": "/etc/passwd"}))
            .answer("done"),
    );
    let admin = agent("Admin", vec![delete], &llm);
    let mut builder = Crew::builder()
        .agent(admin.clone())
        .task(Task::builder("Tidy up").agent(&admin).build())
        .global_registry(global)
        .tell_model_why_blocked(tell);
    if let Some(redactor) = redact {
        builder = builder.redact_with(redactor);
    }
    builder
        .build()
        .expect("builds")
        .kickoff_blocking(())
        .expect("a blocked call does not end the run");
    let told = llm.requests()[1]
        .observations()
        .into_iter()
        .map(str::to_owned)
        .collect();
    (told, take(&post_saw))
}

#[test]
fn rule_11_the_model_is_told_the_reason_only_when_the_block_or_the_crew_asks() {
    let refuse = |_: &mut ToolCallHookContext| -> Result<(), HookAborted> {
        Err(HookAborted::new("system files stay", "safety-policy"))
    };
    let told_why = "Tool execution blocked by hook. Tool: delete_file. Reason: system files stay";
    let plain = "Tool execution blocked by hook. Tool: delete_file";

    // Off by default: the guide's message, exactly.
    let (told, post) = blocked_observation(refuse, false, None);
    assert_eq!(told, [plain]);
    assert_eq!(post, [(Some(plain.to_owned()), Some(plain.to_owned()))]);

    // One hook's block asks for it.
    let (told, post) = blocked_observation(
        |_: &mut ToolCallHookContext| -> Result<(), HookAborted> {
            Err(HookAborted::new("system files stay", "safety-policy").tell_model())
        },
        false,
        None,
    );
    assert_eq!(told, [told_why]);
    assert_eq!(
        post,
        [(Some(told_why.to_owned()), Some(told_why.to_owned()))]
    );

    // The crew asks for every block.
    let (told, _) = blocked_observation(refuse, true, None);
    assert_eq!(told, [told_why]);
}

#[test]
fn rule_11_a_reason_told_to_the_model_passes_the_crews_redaction() {
    let key = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7cDe0fGh3iJk6l";
    let (told, _) = blocked_observation(
        move |_: &mut ToolCallHookContext| -> Result<(), HookAborted> {
            Err(HookAborted::new(
                format!("the key {key} is revoked"),
                "keys",
            ))
        },
        true,
        Some(crew_runtime::guards::SecretRedactor::new()),
    );
    assert_eq!(told.len(), 1);
    assert!(!told[0].contains(key), "{told:?}");
    assert!(
        told[0].starts_with("Tool execution blocked by hook. Tool: delete_file. Reason: the key "),
        "{told:?}"
    );
}
