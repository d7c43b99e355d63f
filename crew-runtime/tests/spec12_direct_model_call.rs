//! SPEC §12: model-call hooks around a direct model call, outside any
//! crew, as CrewAI runs them around `llm.call()`.

mod common;

use std::sync::Arc;

use common::*;
use crew_runtime::prelude::*;
use crew_runtime::{ChatMessage, POST_MODEL_CALL, PRE_MODEL_CALL, llm::LlmError};
use crew_runtime::{ModelCallError, call_model};

#[tokio::test]
async fn a_pre_model_call_block_keeps_the_model_from_being_asked() {
    let registry = fresh_registry();
    registry
        .register_hook(
            PRE_MODEL_CALL,
            |ctx: &mut LlmCallHookContext| -> Result<(), HookAborted> {
                if ctx.messages.iter().any(|m| m.content.contains("password")) {
                    return Err(HookAborted::new("no credentials to the model", "guard"));
                }
                Ok(())
            },
        )
        .expect("registers");
    let model = Arc::new(ScriptedLlm::new().answer("sure"));

    let refused = call_model(
        &registry,
        model.clone(),
        vec![ChatMessage::user("my password is hunter2")],
        &[],
    )
    .await;

    match refused {
        Err(ModelCallError::Blocked(abort)) => {
            assert_eq!(
                (abort.reason.as_str(), abort.source.as_str()),
                ("no credentials to the model", "guard")
            );
        }
        other => panic!("expected a block, got {other:?}"),
    }
    assert!(model.requests().is_empty(), "the model was not asked");

    let answer = call_model(
        &registry,
        model.clone(),
        vec![ChatMessage::user("hello")],
        &[],
    )
    .await
    .expect("answers");
    assert_eq!(answer.content, "sure");
}

#[tokio::test]
async fn post_model_call_hooks_see_and_shape_the_answer_and_may_abort() {
    let registry = fresh_registry();
    let seen = log();
    let sink = seen.clone();
    // An `agents` filter: a call without an agent passes it (rule 7).
    registry
        .register_hook_with(
            POST_MODEL_CALL,
            HookOptions::new().agents(["Researcher"]),
            move |ctx: &mut LlmCallHookContext| {
                let answer = ctx.response.as_ref().map(|r| r.content.clone());
                push(
                    &sink,
                    (ctx.llm.as_ref().map(|l| l.name().to_owned()), answer),
                );
                // Drop every tool call the model asked for.
                if let Some(response) = &mut ctx.response {
                    response.tool_calls.clear();
                }
            },
        )
        .expect("registers");
    let model = Arc::new(
        ScriptedLlm::new()
            .call("delete_file", json!({"path": "/"}))
            .answer("fine"),
    );

    let answer = call_model(
        &registry,
        model.clone(),
        vec![ChatMessage::user("clean up")],
        &[],
    )
    .await
    .expect("answers");

    assert!(answer.tool_calls.is_empty(), "the hook dropped the call");
    assert_eq!(
        take(&seen),
        [(Some("scripted".to_owned()), Some(String::new()))]
    );

    registry
        .register_hook(
            POST_MODEL_CALL,
            |_: &mut LlmCallHookContext| -> Result<Option<String>, HookAborted> {
                Err("not this answer".into())
            },
        )
        .expect("registers");
    let aborted = call_model(&registry, model, vec![ChatMessage::user("again")], &[]).await;
    assert!(
        matches!(aborted, Err(ModelCallError::Aborted(_))),
        "{aborted:?}"
    );
}

#[tokio::test]
async fn a_model_that_fails_or_panics_is_an_error() {
    let registry = fresh_registry();
    let exhausted = Arc::new(ScriptedLlm::new());
    let failed = call_model(&registry, exhausted, vec![ChatMessage::user("hi")], &[]).await;
    assert!(
        matches!(
            failed,
            Err(ModelCallError::Model(LlmError::ScriptExhausted { .. }))
        ),
        "{failed:?}"
    );

    let panicking = Arc::new(ScriptedLlm::new().answer_with(|_| panic!("the client broke")));
    let failed = call_model(&registry, panicking, vec![ChatMessage::user("hi")], &[]).await;
    assert!(
        matches!(failed, Err(ModelCallError::Model(LlmError::Panicked(_)))),
        "{failed:?}"
    );
}
