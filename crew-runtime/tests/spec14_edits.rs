//! Edits stay safe (SPEC §14): a question keeps the policy set it was
//! asked under, and an approver's edit, from the inbox's page, its JSON
//! API or the store, is checked by that set before it is taken: a refused
//! edit is refused in the approver's face, recorded, and changes nothing.
//! Each scenario runs on a real SQLite file and a real PostgreSQL.

#[path = "support/channels.rs"]
mod channels;
mod common;
#[path = "support/stores.rs"]
mod stores;
mod support;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use crew_runtime::guards::ApprovalGate;
use crew_runtime::inbox::Inbox;
use crew_runtime::policy::Policies;
use crew_runtime::prelude::*;
use crew_runtime::store::{
    Answer, ApproverScope, Decision, DecisionError, QuestionStatus, Store, StoreApprovals,
};
use serde_json::{Map, Value};
use stores::{Keep, on_both_stores};

const PATIENCE: Duration = Duration::from_secs(30);

/// Refunds are asked about; above 500 they are forbidden, whoever
/// approves.
const POLICIES: &str = r#"
@id("refunds-ask")
@ask("refunds need a person")
permit(principal, action == Action::"refund", resource);

@id("refund-cap")
@reason("refunds above 500 go to finance")
forbid(principal, action == Action::"refund", resource)
when { context.args.amount > 500 };
"#;

/// Every refund is allowed, above 500 forbidden; a gate asks.
const CAP_ONLY: &str = r#"
@id("refunds")
permit(principal, action == Action::"refund", resource);

@id("refund-cap")
@reason("refunds above 500 go to finance")
forbid(principal, action == Action::"refund", resource)
when { context.args.amount > 500 };
"#;

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

fn refund_tool(ran: &Log<Value>) -> Tool {
    let ran = ran.clone();
    let schema = json!({
        "type": "object",
        "properties": {"order": {"type": "string"}, "amount": {"type": "integer"}},
        "required": ["order", "amount"],
        "additionalProperties": false
    });
    Tool::dynamic("refund", "Refunds an order", schema, move |args| {
        push(&ran, args);
        Ok::<_, String>(json!("refunded"))
    })
}

/// A support crew for carol whose agent refunds A-17 by 120, under
/// `policies`, with `more` on its builder; its questions go to `store`.
fn refund_crew(
    store: &Store,
    ran: &Log<Value>,
    policies: &str,
    more: impl FnOnce(crew_runtime::CrewBuilder) -> crew_runtime::CrewBuilder,
) -> Crew {
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("refund", json!({"order": "A-17", "amount": 120}))
            .answer("done"),
    );
    let support = agent("Support", vec![refund_tool(ran)], &llm);
    let builder = Crew::builder()
        .name("support-desk")
        .agent(support.clone())
        .task(Task::builder("Handle the ticket").agent(&support).build())
        .global_registry(fresh_registry())
        .human_input(Arc::new(StoreApprovals::new(store.clone())))
        .human_input_timeout(PATIENCE)
        .policies(Policies::from_text(policies).expect("the policies parse"));
    more(builder)
        .build()
        .expect("the crew builds")
        .for_user("carol")
}

/// alice approves `question` with the arguments `edited`, through the
/// store.
async fn alice_edits(
    store: &Store,
    question: &str,
    edited: Value,
) -> Result<crew_runtime::store::Question, DecisionError> {
    let edit = Decision::ApproveWithEdit(object(edited));
    store.decide(question, Answer::new("alice", edit)).await
}

async fn add_alice(store: &Store) {
    store
        .add_approver("alice", None, ApproverScope::everything())
        .await
        .expect("an approver");
}

async fn finish<T>(task: tokio::task::JoinHandle<T>) -> T {
    tokio::time::timeout(PATIENCE, task)
        .await
        .expect("the kickoff ends")
        .expect("no panic")
}

async fn an_edit_the_crews_policies_refuse_is_refused_in_the_approvers_face(
    store: Store,
    _keep: Keep,
) {
    for (name, password) in [("alice", Some("correct horse battery")), ("pagerbot", None)] {
        store
            .add_approver(name, password, ApproverScope::everything())
            .await
            .expect("an approver");
    }
    let ran = log();
    let crew = refund_crew(&store, &ran, POLICIES, |builder| builder);
    let run = tokio::spawn(async move { crew.kickoff(()).await });
    let question = channels::pending(&store, 1).await.remove(0);
    let hash = question
        .policy_hash
        .clone()
        .expect("asked under the policies");
    assert_eq!(hash.len(), 64, "{hash}");

    let origin = channels::serve(Inbox::new(store.clone()).router()).await;
    let too_much = json!({"order": "A-17", "amount": 900});

    // A bot, through the JSON API.
    let token = store.issue_api_token("pagerbot").await.expect("a token");
    let response = reqwest::Client::new()
        .post(format!("{origin}/api/approvals/{}/decision", question.id))
        .bearer_auth(&token)
        .json(&json!({"decision": "edit", "arguments": too_much}))
        .send()
        .await
        .expect("the inbox answers");
    assert_eq!(response.status().as_u16(), 422);
    let said = response.text().await.expect("a body");
    assert!(
        said.contains("refund-cap") && said.contains("go to finance"),
        "{said}"
    );

    // A person, on the question's page.
    let (cookie, csrf) = store
        .create_session("alice", Duration::from_secs(3600))
        .await
        .expect("a session");
    let response = reqwest::Client::new()
        .post(format!("{origin}/questions/{}/decision", question.id))
        .header("origin", &origin)
        .header("cookie", format!("crew_inbox_session={cookie}"))
        .form(&[
            ("csrf", csrf.as_str()),
            ("decision", "edit"),
            ("arguments", &too_much.to_string()),
        ])
        .send()
        .await
        .expect("the inbox answers");
    assert_eq!(response.status().as_u16(), 422);
    let page = response.text().await.expect("a page");
    assert!(page.contains("go to finance"), "{page}");

    // Through the store: refused, recorded, and nothing changed.
    let refused = store
        .decide(
            &question.id,
            Answer::new("alice", Decision::ApproveWithEdit(object(too_much))),
        )
        .await;
    match refused {
        Err(DecisionError::EditRefused(why)) => assert!(why.contains("refund-cap"), "{why}"),
        other => panic!("not refused by the policies: {other:?}"),
    }
    let refusals = store.refusals(&question.id).await.expect("reads");
    assert_eq!(refusals.len(), 3, "{refusals:?}");
    assert!(
        refusals
            .iter()
            .all(|refusal| refusal.reason.contains("refund-cap"))
    );
    let now = store
        .question(&question.id)
        .await
        .expect("reads")
        .expect("kept");
    assert_eq!(now.status, QuestionStatus::Pending);
    assert!(take(&ran).is_empty());

    // An edit the policies allow is taken, and the tool runs with it.
    alice_edits(
        &store,
        &question.id,
        json!({"order": "A-17", "amount": 300}),
    )
    .await
    .expect("within the cap");
    finish(run).await.expect("the kickoff runs");
    assert_eq!(take(&ran), vec![json!({"order": "A-17", "amount": 300})]);
}

async fn a_gate_after_the_policies_asks_under_them_too(store: Store, _keep: Keep) {
    add_alice(&store).await;
    let ran = log();
    let crew = refund_crew(&store, &ran, CAP_ONLY, |builder| {
        builder.async_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("refund-gate"),
            ApprovalGate::for_tools(["refund"]).pre_hook(),
        )
    });
    let run = tokio::spawn(async move { crew.kickoff(()).await });
    let question = channels::pending(&store, 1).await.remove(0);
    assert!(question.policy_hash.is_some(), "{question:?}");
    let refused = alice_edits(
        &store,
        &question.id,
        json!({"order": "A-17", "amount": 501}),
    )
    .await;
    assert!(
        matches!(refused, Err(DecisionError::EditRefused(_))),
        "{refused:?}"
    );
    store
        .decide(&question.id, Answer::new("alice", Decision::Approve))
        .await
        .expect("approved as asked");
    finish(run).await.expect("the kickoff runs");
    assert_eq!(take(&ran), vec![json!({"order": "A-17", "amount": 120})]);
}

async fn a_question_asked_without_policies_keeps_none(store: Store, _keep: Keep) {
    add_alice(&store).await;
    let approvals = StoreApprovals::new(store.clone());
    let waiting = channels::ask(&approvals);
    let question = channels::pending(&store, 1).await.remove(0);
    assert_eq!(question.policy_hash, None);
    alice_edits(
        &store,
        &question.id,
        json!({"order": "A-17", "amount": 900}),
    )
    .await
    .expect("no policy to refuse it");
    let answer = channels::answered(waiting).await;
    assert_eq!(
        answer.edited_input.map(Value::Object),
        Some(json!({"order": "A-17", "amount": 900}))
    );
}

on_both_stores!(
    an_edit_the_crews_policies_refuse_is_refused_in_the_approvers_face,
    a_gate_after_the_policies_asks_under_them_too,
    a_question_asked_without_policies_keeps_none,
);
