//! Approvals that outlive the process (SPEC §11): questions and answers are
//! rows of a real SQLite file and a real PostgreSQL server (started by the
//! test run), and every scenario runs on both.
//!
//! Every wait is bounded: a regression fails an assertion, never hangs.

mod common;
mod support;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use common::*;
use crew_runtime::guards::ApprovalGate;
use crew_runtime::prelude::*;
use crew_runtime::store::{
    Answer, Decision, DecisionError, Question, QuestionStatus, SCHEMA_VERSION, Store,
    StoreApprovals, StoreError,
};
use crew_runtime::{Capabilities, HumanAnswer};
use crew_runtime::{HumanInputError, HumanInputRequest, HumanInputSource, ToolAnnotations};
use serde_json::{Map, Value};

/// How long a test waits for what must happen.
const PATIENCE: Duration = Duration::from_secs(30);

/// A store of the backend `kind` (`"sqlite"` or `"postgres"`), with what
/// keeps it alive, or `None` (after a loud message) when PostgreSQL is
/// missing on this machine.
async fn store(kind: &str) -> Option<(Store, Keep)> {
    match kind {
        "sqlite" => {
            let dir = tempfile::tempdir().expect("a temporary directory");
            let url = format!("sqlite://{}", dir.path().join("approvals.db").display());
            let store = Store::connect(&url).await.expect("SQLite opens");
            Some((store, Keep::Dir(dir)))
        }
        _ => {
            let url = support::postgres_database().await?;
            let store = Store::connect(&url).await.expect("PostgreSQL opens");
            Some((store, Keep::Url(url)))
        }
    }
}

/// What a store's test keeps alive: its directory, or its URL.
#[allow(dead_code)]
enum Keep {
    Dir(tempfile::TempDir),
    Url(String),
}

impl Keep {
    fn url(&self) -> String {
        match self {
            Keep::Dir(dir) => format!("sqlite://{}", dir.path().join("approvals.db").display()),
            Keep::Url(url) => url.clone(),
        }
    }
}

/// Runs `scenario` on SQLite and on PostgreSQL, as two tests.
macro_rules! on_both_stores {
    ($($scenario:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    let (store, keep) = super::store("sqlite").await.expect("SQLite is always there");
                    super::$scenario(store, keep).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    let Some((store, keep)) = super::store("postgres").await else { return };
                    super::$scenario(store, keep).await;
                }
            )*
        }
    };
}

on_both_stores!(
    an_approval_reaches_the_waiting_call_with_who_approved,
    a_question_is_a_row_with_the_call_and_an_unguessable_id,
    a_denial_reaches_the_waiting_call_with_its_comment,
    an_edit_is_checked_against_the_tools_schema_and_reaches_the_call,
    an_edit_too_large_is_refused_and_changes_nothing,
    the_requester_cannot_approve_their_own_request_and_the_attempt_is_recorded,
    the_requester_spelled_otherwise_cannot_approve_their_own_request,
    an_answer_after_the_deadline_is_refused_and_recorded,
    a_question_whose_process_is_gone_is_abandoned_and_refuses_answers,
    a_question_is_answered_once,
    an_unknown_id_is_refused,
    a_question_nobody_waits_for_is_withdrawn,
    a_wait_dropped_at_any_moment_withdraws_its_question,
    the_tool_runs_with_the_approved_edit_in_a_crew,
    a_denied_call_never_runs_in_a_crew,
    answers_from_another_store_handle_reach_the_right_waiting_calls,
    a_thousand_pending_questions_are_listed,
    a_schema_newer_than_the_program_is_refused,
    an_approved_edit_goes_through_the_guards_that_ran_before_the_question,
    an_ask_on_the_second_round_about_the_approved_arguments_is_not_asked_again,
    a_different_ask_on_the_second_round_goes_to_another_approver,
    a_guard_that_changes_the_approved_arguments_refuses_the_edit,
    a_redacted_value_left_as_shown_reaches_the_tool_as_it_was,
    an_edit_that_changes_a_redacted_value_is_refused,
    what_became_of_an_approved_call_is_kept_beside_its_answer,
    an_approval_its_process_never_takes_is_abandoned_not_approved,
    a_withdrawn_question_is_recorded_with_the_time_it_closed,
);

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

/// The schema of the `refund` tool the questions are about.
fn refund_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "order": {"type": "string"},
            "amount": {"type": "number", "maximum": 400}
        },
        "required": ["order", "amount"],
        "additionalProperties": false
    })
}

/// A question about a `refund` call, for `requester`, open for `timeout`.
fn refund_request(requester: &str, timeout: Duration) -> HumanInputRequest {
    let mut request = HumanInputRequest::new("Refund this order?", "yes/no")
        .with_call_id("call_1")
        .with_tool("refund", json!({"order": "A-17", "amount": 120}))
        .with_agent_role("Support");
    request.tool_schema = Some(refund_schema());
    request.tool_capabilities = Some(Capabilities::NONE.with(Capability::Destructive));
    request.task = Some("Handle the ticket".into());
    request.crew = Some("support-desk".into());
    request.kickoff_id = Some("kickoff-1".into());
    request.requester = Some(requester.into());
    request.timeout = Some(timeout);
    request
}

/// Asks `request` through `approvals` on a task of its own.
fn ask(
    approvals: &StoreApprovals,
    request: HumanInputRequest,
) -> tokio::task::JoinHandle<Result<HumanAnswer, HumanInputError>> {
    let approvals = approvals.clone();
    tokio::spawn(async move { approvals.answer(request).await })
}

/// The pending questions once there are `count` of them.
async fn pending(store: &Store, count: usize) -> Vec<Question> {
    let started = std::time::Instant::now();
    loop {
        let pending = store.pending().await.expect("the store lists");
        if pending.len() == count {
            return pending;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "{} questions pending, expected {count}",
            pending.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn finish<T>(task: tokio::task::JoinHandle<T>) -> T {
    tokio::time::timeout(PATIENCE, task)
        .await
        .expect("the waiting call hears of the answer")
        .expect("the waiting task does not panic")
}

async fn an_approval_reaches_the_waiting_call_with_who_approved(store: Store, _keep: Keep) {
    let approvals = StoreApprovals::new(store.clone());
    let waiting = ask(&approvals, refund_request("carol", PATIENCE));
    let question = pending(&store, 1).await.remove(0);

    let answered = store
        .decide(&question.id, Answer::new("alice", Decision::Approve))
        .await
        .expect("alice may approve");
    assert_eq!(answered.status, QuestionStatus::Approved);

    let answer = finish(waiting).await.expect("an answer");
    assert_eq!(answer.text, "yes");
    assert_eq!(answer.answered_by.as_deref(), Some("alice"));
    assert_eq!(answer.edited_input, None);
    assert!(store.pending().await.expect("lists").is_empty());
    let history = store.history(10).await.expect("history");
    assert_eq!(history.len(), 1);
    let recorded = history[0].answer.as_ref().expect("recorded");
    assert_eq!(
        (recorded.approver.as_str(), recorded.decision.as_str()),
        ("alice", "approve")
    );
}

async fn a_question_is_a_row_with_the_call_and_an_unguessable_id(store: Store, _keep: Keep) {
    let approvals = StoreApprovals::new(store.clone());
    let before = SystemTime::now();
    let first = ask(
        &approvals,
        refund_request("carol", Duration::from_secs(600)),
    );
    let second = ask(
        &approvals,
        refund_request("carol", Duration::from_secs(600)),
    );
    let questions = pending(&store, 2).await;
    let question = &questions[0];

    assert_eq!(question.tool, "refund");
    assert_eq!(question.call_id.as_deref(), Some("call_1"));
    assert_eq!(question.arguments, json!({"order": "A-17", "amount": 120}));
    assert_eq!(question.tool_schema, Some(refund_schema()));
    assert!(question.capabilities.contains(Capability::Destructive));
    assert_eq!(question.agent.as_deref(), Some("Support"));
    assert_eq!(question.task.as_deref(), Some("Handle the ticket"));
    assert_eq!(question.crew.as_deref(), Some("support-desk"));
    assert_eq!(question.kickoff_id.as_deref(), Some("kickoff-1"));
    assert_eq!(question.requester.as_deref(), Some("carol"));
    assert!(question.prompt.starts_with("Refund this order?"));
    assert!(question.created_at >= before - Duration::from_secs(1));
    let open_for = question
        .deadline
        .duration_since(question.created_at)
        .expect("the deadline is after the question");
    assert!(
        (Duration::from_secs(599)..=Duration::from_secs(601)).contains(&open_for),
        "{open_for:?}"
    );
    assert!(question.is_open(SystemTime::now()));
    // A UUID v4 each: 122 random bits, never sequential.
    for question in &questions {
        let id = uuid::Uuid::parse_str(&question.id).expect("a UUID");
        assert_eq!(id.get_version_num(), 4);
    }
    assert_ne!(questions[0].id, questions[1].id);
    first.abort();
    second.abort();
}

async fn a_denial_reaches_the_waiting_call_with_its_comment(store: Store, _keep: Keep) {
    let approvals = StoreApprovals::new(store.clone());
    let waiting = ask(&approvals, refund_request("carol", PATIENCE));
    let question = pending(&store, 1).await.remove(0);
    store
        .decide(
            &question.id,
            Answer::new("alice", Decision::Deny).with_comment("wrong order"),
        )
        .await
        .expect("alice may deny");
    let answer = finish(waiting).await.expect("an answer");
    assert_eq!(answer.text, "no");
    assert_eq!(answer.comment.as_deref(), Some("wrong order"));
    let question = store
        .question(&question.id)
        .await
        .expect("reads")
        .expect("kept");
    assert_eq!(question.status, QuestionStatus::Denied);
}

async fn an_edit_is_checked_against_the_tools_schema_and_reaches_the_call(
    store: Store,
    _keep: Keep,
) {
    let approvals = StoreApprovals::new(store.clone());
    let waiting = ask(&approvals, refund_request("carol", PATIENCE));
    let question = pending(&store, 1).await.remove(0);

    for (bad, why) in [
        (json!({"order": "A-17", "amount": "lots"}), "/amount"),
        (json!({"order": "A-17", "amount": 4000}), "/amount"),
        (json!({"order": "A-17"}), "amount"),
        (json!({"order": "A-17", "amount": 10, "to": "me"}), "to"),
    ] {
        let refused = store
            .decide(
                &question.id,
                Answer::new("alice", Decision::ApproveWithEdit(object(bad.clone()))),
            )
            .await;
        match refused {
            Err(DecisionError::InvalidEdit(problems)) => {
                assert!(problems.contains(why), "{bad}: {problems}")
            }
            other => panic!("{bad} was not refused: {other:?}"),
        }
    }
    // Nothing was approved by the refused edits.
    assert_eq!(pending(&store, 1).await[0].status, QuestionStatus::Pending);

    let edit = object(json!({"order": "A-17", "amount": 40}));
    store
        .decide(
            &question.id,
            Answer::new("alice", Decision::ApproveWithEdit(edit.clone())),
        )
        .await
        .expect("a valid edit");
    let answer = finish(waiting).await.expect("an answer");
    assert_eq!(answer.text, "yes");
    assert_eq!(answer.edited_input, Some(edit.clone()));
    // The trail keeps both: what was asked and what was approved.
    let question = store
        .question(&question.id)
        .await
        .expect("reads")
        .expect("kept");
    assert_eq!(question.arguments, json!({"order": "A-17", "amount": 120}));
    let recorded = question.answer.expect("recorded");
    assert_eq!(recorded.decision, "edit");
    assert_eq!(recorded.edited_arguments, Some(Value::Object(edit)));
}

async fn an_edit_too_large_is_refused_and_changes_nothing(store: Store, _keep: Keep) {
    let approvals = StoreApprovals::new(store.clone());
    let waiting = ask(&approvals, refund_request("carol", PATIENCE));
    let question = pending(&store, 1).await.remove(0);
    let huge = object(json!({"order": "x".repeat(10 * 1024 * 1024), "amount": 1}));
    let refused = store
        .decide(
            &question.id,
            Answer::new("alice", Decision::ApproveWithEdit(huge)),
        )
        .await;
    assert!(
        matches!(refused, Err(DecisionError::EditTooLarge { bytes, .. }) if bytes > 10 * 1024 * 1024),
        "{refused:?}"
    );
    assert_eq!(pending(&store, 1).await[0].status, QuestionStatus::Pending);
    waiting.abort();
}

async fn the_requester_cannot_approve_their_own_request_and_the_attempt_is_recorded(
    store: Store,
    _keep: Keep,
) {
    let approvals = StoreApprovals::new(store.clone());
    let waiting = ask(&approvals, refund_request("carol", PATIENCE));
    let question = pending(&store, 1).await.remove(0);
    let refused = store
        .decide(&question.id, Answer::new("carol", Decision::Approve))
        .await;
    assert!(
        matches!(&refused, Err(DecisionError::OwnRequest(who)) if who == "carol"),
        "{refused:?}"
    );
    assert_eq!(pending(&store, 1).await.len(), 1, "still waiting");
    let refusals = store.refusals(&question.id).await.expect("reads");
    assert_eq!(refusals.len(), 1);
    assert_eq!(refusals[0].approver, "carol");
    assert!(refusals[0].reason.contains("own request"), "{refusals:?}");

    store
        .decide(&question.id, Answer::new("alice", Decision::Deny))
        .await
        .expect("another approver may answer");
    assert_eq!(finish(waiting).await.expect("an answer").text, "no");
}

/// `Carol`, `Carol ` and a `José` in another Unicode form are the
/// requesters `carol` and `José`: their own requests, refused.
async fn the_requester_spelled_otherwise_cannot_approve_their_own_request(
    store: Store,
    _keep: Keep,
) {
    let approvals = StoreApprovals::new(store.clone());
    let nfc = "Jos\u{e9}";
    let nfd = "Jose\u{301}";
    for (requester, approver) in [("carol", "Carol"), ("Carol", "Carol "), (nfc, nfd)] {
        let waiting = ask(&approvals, refund_request(requester, PATIENCE));
        let question = pending(&store, 1).await.remove(0);
        let refused = store
            .decide(&question.id, Answer::new(approver, Decision::Approve))
            .await;
        assert!(
            matches!(&refused, Err(DecisionError::OwnRequest(_))),
            "{approver:?} answering {requester:?}'s request: {refused:?}"
        );
        store
            .decide(&question.id, Answer::new("alice", Decision::Deny))
            .await
            .expect("another approver may answer");
        assert_eq!(finish(waiting).await.expect("an answer").text, "no");
    }
}

async fn an_answer_after_the_deadline_is_refused_and_recorded(store: Store, _keep: Keep) {
    // Through the context, as a hook asks: the question gives up on time.
    let approvals: Arc<dyn HumanInputSource> = Arc::new(StoreApprovals::new(store.clone()));
    let ctx = ToolCallHookContext::new("refund", object(json!({"order": "A-17", "amount": 1})))
        .with_human_input(approvals)
        .with_human_input_timeout(Duration::from_millis(700));
    let waiting = tokio::spawn(async move { ctx.request_approval("Refund?", "yes/no").await });
    let question = pending(&store, 1).await.remove(0);
    let answer = finish(waiting).await;
    assert!(
        matches!(answer, Err(HumanInputError::TimedOut(_))),
        "{answer:?}"
    );
    tokio::time::sleep(Duration::from_millis(100)).await;

    let late = store
        .decide(&question.id, Answer::new("alice", Decision::Approve))
        .await;
    assert!(matches!(late, Err(DecisionError::Expired)), "{late:?}");
    let question = store
        .question(&question.id)
        .await
        .expect("reads")
        .expect("kept");
    assert_eq!(question.status, QuestionStatus::Expired);
    assert!(question.answer.is_none(), "nothing approved");
    let refusals = store.refusals(&question.id).await.expect("reads");
    assert_eq!(refusals.len(), 1);
    assert_eq!(
        (refusals[0].approver.as_str(), refusals[0].decision.as_str()),
        ("alice", "approve")
    );
    assert!(refusals[0].reason.contains("deadline"), "{refusals:?}");
}

/// The child process of
/// [`a_question_whose_process_is_gone_is_abandoned_and_refuses_answers`]:
/// asks one question on the store named by `CREW_STORE_CHILD_URL` and waits.
#[tokio::test]
#[ignore = "run by another test as a separate process"]
async fn child_asks_and_waits() {
    let Ok(url) = std::env::var("CREW_STORE_CHILD_URL") else {
        return;
    };
    let store = Store::connect(&url)
        .await
        .expect("the child opens the store");
    let approvals = StoreApprovals::new(store).lease(Duration::from_secs(1));
    let _ = approvals.answer(refund_request("carol", PATIENCE)).await;
}

async fn a_question_whose_process_is_gone_is_abandoned_and_refuses_answers(
    store: Store,
    keep: Keep,
) {
    let mut child = std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args([
            "--exact",
            "child_asks_and_waits",
            "--ignored",
            "--nocapture",
        ])
        .env("CREW_STORE_CHILD_URL", keep.url())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the child starts");
    let question = pending(&store, 1).await.remove(0);
    // The process is gone at once, without a chance to clean up.
    child.kill().expect("the child is killed");
    child.wait().expect("the child ends");
    // Its lease (1 s) runs out.
    tokio::time::sleep(Duration::from_millis(2500)).await;

    assert!(store.pending().await.expect("lists").is_empty());
    let refused = store
        .decide(&question.id, Answer::new("alice", Decision::Approve))
        .await;
    assert!(
        matches!(refused, Err(DecisionError::Abandoned)),
        "{refused:?}"
    );
    let question = store
        .question(&question.id)
        .await
        .expect("reads")
        .expect("kept");
    assert_eq!(question.status, QuestionStatus::Abandoned);
    assert_eq!(store.refusals(&question.id).await.expect("reads").len(), 1);
}

async fn a_question_is_answered_once(store: Store, _keep: Keep) {
    let approvals = StoreApprovals::new(store.clone());
    let waiting = ask(&approvals, refund_request("carol", PATIENCE));
    let question = pending(&store, 1).await.remove(0);
    store
        .decide(&question.id, Answer::new("alice", Decision::Deny))
        .await
        .expect("first answer");
    let second = store
        .decide(&question.id, Answer::new("bob", Decision::Approve))
        .await;
    assert!(
        matches!(second, Err(DecisionError::Closed(QuestionStatus::Denied))),
        "{second:?}"
    );
    assert_eq!(finish(waiting).await.expect("an answer").text, "no");
    let refusals = store.refusals(&question.id).await.expect("reads");
    assert_eq!(refusals.len(), 1);
    assert_eq!(refusals[0].approver, "bob");
}

async fn an_unknown_id_is_refused(store: Store, _keep: Keep) {
    for id in ["", "no-such-id", "'; DROP TABLE crew_approvals; --"] {
        let refused = store
            .decide(id, Answer::new("alice", Decision::Approve))
            .await;
        assert!(
            matches!(refused, Err(DecisionError::UnknownQuestion)),
            "{refused:?}"
        );
    }
    let nameless = store.decide("x", Answer::new(" ", Decision::Approve)).await;
    assert!(matches!(nameless, Err(DecisionError::NoApprover)));
    assert!(
        store
            .pending()
            .await
            .expect("the table is still there")
            .is_empty()
    );
}

async fn a_question_nobody_waits_for_is_withdrawn(store: Store, _keep: Keep) {
    let approvals = StoreApprovals::new(store.clone());
    let waiting = ask(&approvals, refund_request("carol", PATIENCE));
    let question = pending(&store, 1).await.remove(0);
    waiting.abort();
    pending(&store, 0).await;
    let question = store
        .question(&question.id)
        .await
        .expect("reads")
        .expect("kept");
    assert_eq!(question.status, QuestionStatus::Withdrawn);
    let refused = store
        .decide(&question.id, Answer::new("alice", Decision::Approve))
        .await;
    assert!(
        matches!(
            refused,
            Err(DecisionError::Closed(QuestionStatus::Withdrawn))
        ),
        "{refused:?}"
    );
}

/// A wait dropped at any moment, even while its question is being written
/// (the row already listed, the write not yet returned), withdraws the
/// question: none is left to its lease and closed as abandoned.
async fn a_wait_dropped_at_any_moment_withdraws_its_question(store: Store, _keep: Keep) {
    let lease = Duration::from_secs(1);
    let approvals = StoreApprovals::new(store.clone()).lease(lease);
    for moment in 0..40 {
        let waiting = ask(&approvals, refund_request("carol", PATIENCE));
        // A step of 100 µs, across the few milliseconds a write takes.
        std::thread::sleep(Duration::from_micros(moment * 100));
        waiting.abort();
    }
    // Whatever was left for its lease has lapsed by now.
    tokio::time::sleep(lease + Duration::from_millis(500)).await;
    pending(&store, 0).await;
    let closed = store.history(100).await.expect("reads");
    let abandoned: Vec<_> = closed
        .iter()
        .filter(|question| question.status != QuestionStatus::Withdrawn)
        .map(|question| question.status)
        .collect();
    assert!(
        abandoned.is_empty(),
        "closed otherwise than withdrawn: {abandoned:?}"
    );
}

/// A crew whose `refund` tool records the arguments it ran with, gated by
/// the approval gate asking through `store`, for `user`.
fn refund_crew(store: &Store, ran: &Log<Value>, llm: &Arc<ScriptedLlm>) -> Crew {
    let sink = ran.clone();
    let refund = Tool::dynamic("refund", "Refunds an order", refund_schema(), move |args| {
        push(&sink, args.clone());
        Ok::<_, String>(json!("refunded"))
    })
    .with_annotations(ToolAnnotations::new().destructive(true));
    let support = agent("Support", vec![refund], llm);
    Crew::builder()
        .name("support-desk")
        .agent(support.clone())
        .task(Task::builder("Handle the ticket").agent(&support).build())
        .global_registry(fresh_registry())
        .human_input(Arc::new(StoreApprovals::new(store.clone())))
        .human_input_timeout(PATIENCE)
        .async_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("approval-gate"),
            ApprovalGate::for_capabilities([Capability::Destructive]).pre_hook(),
        )
        .build()
        .expect("the crew builds")
}

async fn the_tool_runs_with_the_approved_edit_in_a_crew(store: Store, _keep: Keep) {
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("refund", json!({"order": "A-17", "amount": 350}))
            .answer("done"),
    );
    let ran = log();
    let crew = refund_crew(&store, &ran, &llm).for_user("carol");
    let run = tokio::spawn(async move { crew.kickoff(()).await });

    let question = pending(&store, 1).await.remove(0);
    assert_eq!(question.requester.as_deref(), Some("carol"));
    assert_eq!(question.crew.as_deref(), Some("support-desk"));
    assert_eq!(question.task.as_deref(), Some("Handle the ticket"));
    assert!(question.kickoff_id.is_some());
    assert_eq!(question.arguments, json!({"amount": 350, "order": "A-17"}));
    assert!(take(&ran).is_empty(), "nothing runs before the answer");

    let edit = object(json!({"order": "A-17", "amount": 35}));
    store
        .decide(
            &question.id,
            Answer::new("alice", Decision::ApproveWithEdit(edit)),
        )
        .await
        .expect("alice edits and approves");
    finish(run).await.expect("the kickoff ends");
    assert_eq!(take(&ran), vec![json!({"order": "A-17", "amount": 35})]);
}

async fn a_denied_call_never_runs_in_a_crew(store: Store, _keep: Keep) {
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("refund", json!({"order": "A-17", "amount": 350}))
            .answer("done"),
    );
    let ran = log();
    let crew = refund_crew(&store, &ran, &llm).for_user("carol");
    let run = tokio::spawn(async move { crew.kickoff(()).await });
    let question = pending(&store, 1).await.remove(0);
    store
        .decide(
            &question.id,
            Answer::new("alice", Decision::Deny).with_comment("not this one"),
        )
        .await
        .expect("alice denies");
    finish(run).await.expect("the kickoff ends");
    assert!(take(&ran).is_empty());
    assert_eq!(
        llm.requests()[1].observations(),
        ["Tool execution blocked by hook. Tool: refund"]
    );
}

async fn answers_from_another_store_handle_reach_the_right_waiting_calls(store: Store, keep: Keep) {
    // Two asking "processes" and one answering, each with its own pool.
    let other = Store::connect(&keep.url()).await.expect("a second handle");
    let inbox = Store::connect(&keep.url()).await.expect("a third handle");
    let mut waiting = Vec::new();
    for (n, handle) in [&store, &other, &store, &other].into_iter().enumerate() {
        let mut request = refund_request("carol", PATIENCE);
        request.call_id = Some(format!("call_{n}"));
        waiting.push((n, ask(&StoreApprovals::new(handle.clone()), request)));
    }
    let questions = pending(&inbox, 4).await;
    for question in &questions {
        let n: usize = question
            .call_id
            .as_deref()
            .and_then(|id| id.strip_prefix("call_"))
            .and_then(|n| n.parse().ok())
            .expect("a call id");
        let decision = if n.is_multiple_of(2) {
            Decision::Approve
        } else {
            Decision::Deny
        };
        inbox
            .decide(&question.id, Answer::new(format!("approver-{n}"), decision))
            .await
            .expect("answered");
    }
    for (n, task) in waiting {
        let answer = finish(task).await.expect("an answer");
        assert_eq!(answer.answered_by, Some(format!("approver-{n}")));
        assert_eq!(answer.text, if n.is_multiple_of(2) { "yes" } else { "no" });
    }
}

async fn a_thousand_pending_questions_are_listed(store: Store, _keep: Keep) {
    let approvals = StoreApprovals::new(store.clone());
    let mut waiting = Vec::new();
    for n in 0..1000 {
        let mut request = refund_request("carol", Duration::from_secs(600));
        request.call_id = Some(format!("call_{n}"));
        waiting.push(ask(&approvals, request));
    }
    let questions = pending(&store, 1000).await;
    let last = questions.last().expect("a question").id.clone();
    store
        .decide(&last, Answer::new("alice", Decision::Approve))
        .await
        .expect("answered among a thousand");
    assert_eq!(pending(&store, 999).await.len(), 999);
    for task in waiting {
        task.abort();
    }
}

async fn a_schema_newer_than_the_program_is_refused(store: Store, keep: Keep) {
    let newer = SCHEMA_VERSION + 1;
    let sql = format!(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES ({newer}, 'from the future', TRUE, X'00', 0)"
    );
    let pg_sql = sql.replace("X'00'", "'\\x00'::bytea");
    let url = keep.url();
    if url.starts_with("sqlite:") {
        let pool = sqlx::SqlitePool::connect(&url).await.expect("opens");
        sqlx::query(&sql).execute(&pool).await.expect("inserts");
        pool.close().await;
    } else {
        let pool = sqlx::PgPool::connect(&url).await.expect("opens");
        sqlx::query(&pg_sql).execute(&pool).await.expect("inserts");
        pool.close().await;
    }
    drop(store);
    let refused = Store::connect(&url).await;
    match refused {
        Err(error @ StoreError::SchemaTooNew { found, known }) => {
            assert_eq!((found, known), (newer, SCHEMA_VERSION));
            assert!(error.to_string().contains("upgrade the program"), "{error}");
        }
        other => panic!("a newer schema was accepted: {other:?}"),
    }
}

#[tokio::test]
async fn a_malformed_or_unknown_store_url_is_a_clear_error() {
    for url in [
        "mysql://db/approvals",
        "approvals.db",
        "",
        "http://example.com",
    ] {
        let error = Store::connect(url).await.expect_err(url);
        assert!(
            matches!(error, StoreError::UnsupportedUrl(_)),
            "{url}: {error}"
        );
        assert!(error.to_string().contains("sqlite://"), "{error}");
    }
    let error = Store::connect("postgres://user:pw@host:notaport/db")
        .await
        .expect_err("a bad port");
    assert!(matches!(error, StoreError::MalformedUrl { .. }), "{error}");
    assert!(
        !error.to_string().contains("pw@"),
        "the password never shows: {error}"
    );
}

#[tokio::test]
async fn an_unreachable_store_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("a directory");
    let url = format!(
        "postgres://postgres:secret@localhost/approvals?host={}&connect_timeout=2",
        dir.path().display()
    );
    let error = Store::connect(&url)
        .await
        .expect_err("nobody listens there");
    assert!(matches!(error, StoreError::Unreachable { .. }), "{error}");
    assert!(error.to_string().contains("cannot connect"), "{error}");
    assert!(!error.to_string().contains("secret"), "{error}");

    let missing = format!("sqlite://{}", dir.path().join("no/such/dir/a.db").display());
    let error = Store::connect(&missing)
        .await
        .expect_err("no such directory");
    assert!(matches!(error, StoreError::Unreachable { .. }), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_store_refuses_answers_clearly_and_approves_nothing() {
    let (store, keep) = store("sqlite").await.expect("SQLite");
    let approvals = StoreApprovals::new(store.clone());
    let waiting = ask(&approvals, refund_request("carol", PATIENCE));
    let question = pending(&store, 1).await.remove(0);
    let read_only = Store::connect(&format!("{}?mode=ro", keep.url()))
        .await
        .expect("a read-only handle opens an up-to-date store");
    let refused = read_only
        .decide(&question.id, Answer::new("alice", Decision::Approve))
        .await;
    match refused {
        Err(DecisionError::Store(StoreError::Query(message))) => {
            assert!(message.contains("readonly"), "{message}")
        }
        other => panic!("a read-only store took an answer: {other:?}"),
    }
    assert_eq!(pending(&store, 1).await[0].status, QuestionStatus::Pending);
    waiting.abort();
}

// SPEC §11 "Under attack": an approver's edit is bound to the call's
// guards, and what became of an approved call is told back.

/// The schema of the `write_file` tool.
fn write_file_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "content": {"type": "string"},
            "token": {"type": "string"}
        },
        "required": ["path"],
        "additionalProperties": false
    })
}

/// A `write_file` tool that records the arguments it ran with; it fails
/// on a path under `full/`.
fn write_file_tool(ran: &Log<Value>) -> Tool {
    let sink = ran.clone();
    Tool::dynamic(
        "write_file",
        "Writes a file",
        write_file_schema(),
        move |args| {
            push(&sink, args.clone());
            if args["path"]
                .as_str()
                .is_some_and(|p| p.starts_with("full/"))
            {
                return Err("the disk is full".to_owned());
            }
            Ok::<_, String>(json!("written"))
        },
    )
    .with_annotations(ToolAnnotations::new().destructive(true))
}

/// The guard of a crew that writes only under `drafts/` (or `shared/`).
fn drafts_only(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
    let path = ctx.tool_input["path"].as_str().unwrap_or_default();
    if path.starts_with("drafts/") || path.starts_with("shared/") || path.starts_with("full/") {
        Ok(())
    } else {
        Err(HookAborted::new(
            format!("{path} is outside drafts/"),
            "drafts-only",
        ))
    }
}

/// A crew whose model writes `args` once: the `drafts-only` guard, then
/// the approval gate on every `write_file` call, asking through `store`
/// for `carol`; `more` adds hooks after the gate.
fn write_crew(
    store: &Store,
    ran: &Log<Value>,
    args: Value,
    more: impl FnOnce(crew_runtime::CrewBuilder) -> crew_runtime::CrewBuilder,
) -> (Crew, Arc<ScriptedLlm>) {
    let llm = Arc::new(ScriptedLlm::new().call("write_file", args).answer("done"));
    let writer = agent("Writer", vec![write_file_tool(ran)], &llm);
    let builder = Crew::builder()
        .name("writers")
        .agent(writer.clone())
        .task(Task::builder("Write the notes").agent(&writer).build())
        .global_registry(fresh_registry())
        .human_input(Arc::new(StoreApprovals::new(store.clone())))
        .human_input_timeout(PATIENCE)
        .hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("drafts-only"),
            drafts_only,
        )
        .async_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("approval-gate"),
            ApprovalGate::for_tools(["write_file"]).pre_hook(),
        );
    let crew = more(builder).build().expect("the crew builds");
    (crew.for_user("carol"), llm)
}

/// The question once its call has said what became of it.
async fn settled(store: &Store, id: &str) -> Question {
    let started = std::time::Instant::now();
    loop {
        let question = store.question(id).await.expect("reads").expect("kept");
        if question.outcome.is_some() {
            return question;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "no outcome recorded: {question:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs `crew`'s kickoff, answers its one question as `alice` with
/// `decision`, and waits for the kickoff to end; returns the question as
/// it was asked.
async fn answer_the_call(store: &Store, crew: Crew, decision: Decision) -> Question {
    let run = tokio::spawn(async move { crew.kickoff(()).await });
    let question = pending(store, 1).await.remove(0);
    store
        .decide(&question.id, Answer::new("alice", decision))
        .await
        .expect("the store takes the answer");
    finish(run).await.expect("the kickoff ends");
    question
}

async fn an_approved_edit_goes_through_the_guards_that_ran_before_the_question(
    store: Store,
    _keep: Keep,
) {
    let ran = log();
    let (crew, llm) = write_crew(
        &store,
        &ran,
        json!({"path": "drafts/a.md", "content": "notes"}),
        |builder| builder,
    );
    // Valid for the tool's schema, and past the guard that let the
    // question be asked.
    let edit = object(json!({"path": "/etc/cron.d/evil", "content": "* * * * * root sh"}));
    let question = answer_the_call(&store, crew, Decision::ApproveWithEdit(edit)).await;

    assert!(take(&ran).is_empty(), "the edited call must not run");
    assert_eq!(
        llm.requests()[1].observations(),
        ["Tool execution blocked by hook. Tool: write_file"]
    );
    let question = settled(&store, &question.id).await;
    let outcome = question.outcome.expect("settled");
    assert_eq!(outcome.outcome, "refused");
    assert_eq!(outcome.source.as_deref(), Some("drafts-only"));
    assert_eq!(
        outcome.detail.as_deref(),
        Some("/etc/cron.d/evil is outside drafts/")
    );
}

async fn an_ask_on_the_second_round_about_the_approved_arguments_is_not_asked_again(
    store: Store,
    _keep: Keep,
) {
    let ran = log();
    let (crew, _llm) = write_crew(
        &store,
        &ran,
        json!({"path": "drafts/a.md", "content": "notes"}),
        |builder| builder,
    );
    let edit = object(json!({"path": "drafts/b.md", "content": "better notes"}));
    let question = answer_the_call(&store, crew, Decision::ApproveWithEdit(edit)).await;

    assert_eq!(
        take(&ran),
        vec![json!({"path": "drafts/b.md", "content": "better notes"})]
    );
    // The gate met the approved arguments again on the second round and
    // took the approval just given: one question in all.
    assert_eq!(store.history(10).await.expect("lists").len(), 1);
    assert!(store.pending().await.expect("lists").is_empty());
    let outcome = settled(&store, &question.id)
        .await
        .outcome
        .expect("settled");
    assert_eq!(outcome.outcome, "ran");
}

async fn a_different_ask_on_the_second_round_goes_to_another_approver(store: Store, _keep: Keep) {
    let ran = log();
    let shared_gate = ApprovalGate::when(|ctx| {
        ctx.tool_input["path"]
            .as_str()
            .is_some_and(|path| path.starts_with("shared/"))
    });
    let (crew, _llm) = write_crew(
        &store,
        &ran,
        json!({"path": "drafts/a.md", "content": "notes"}),
        |builder| {
            builder.async_hook_with(
                PRE_TOOL_CALL,
                HookOptions::new().name("shared-gate"),
                shared_gate.pre_hook(),
            )
        },
    );
    let run = tokio::spawn(async move { crew.kickoff(()).await });
    let first = pending(&store, 1).await.remove(0);
    let edit = object(json!({"path": "shared/notes.md", "content": "notes"}));
    store
        .decide(
            &first.id,
            Answer::new("alice", Decision::ApproveWithEdit(edit)),
        )
        .await
        .expect("alice edits and approves");

    // The shared gate asks about the edit: alice is its requester now.
    let second = pending(&store, 1).await.remove(0);
    assert_ne!(second.id, first.id);
    assert_eq!(
        second.arguments,
        json!({"path": "shared/notes.md", "content": "notes"})
    );
    assert_eq!(second.requester.as_deref(), Some("alice"));
    let own = store
        .decide(&second.id, Answer::new("alice", Decision::Approve))
        .await;
    assert!(matches!(own, Err(DecisionError::OwnRequest(_))), "{own:?}");
    assert!(take(&ran).is_empty());
    store
        .decide(&second.id, Answer::new("bob", Decision::Approve))
        .await
        .expect("bob approves");
    finish(run).await.expect("the kickoff ends");
    assert_eq!(
        take(&ran),
        vec![json!({"path": "shared/notes.md", "content": "notes"})]
    );
}

async fn a_guard_that_changes_the_approved_arguments_refuses_the_edit(store: Store, _keep: Keep) {
    let ran = log();
    let (crew, _llm) = write_crew(
        &store,
        &ran,
        json!({"path": "drafts/a.md", "content": "notes"}),
        |builder| {
            builder.hook_with(
                PRE_TOOL_CALL,
                HookOptions::new().name("lowercase-paths"),
                |ctx: &mut ToolCallHookContext| {
                    if let Some(path) = ctx.tool_input["path"].as_str() {
                        let lower = path.to_lowercase();
                        ctx.tool_input.insert("path".into(), json!(lower));
                    }
                },
            )
        },
    );
    let edit = object(json!({"path": "drafts/B.md", "content": "notes"}));
    let question = answer_the_call(&store, crew, Decision::ApproveWithEdit(edit)).await;
    assert!(take(&ran).is_empty(), "{:?}", take(&ran));
    let outcome = settled(&store, &question.id)
        .await
        .outcome
        .expect("settled");
    assert_eq!(outcome.outcome, "refused");
    assert_eq!(outcome.source.as_deref(), Some("approval-recheck"));
}

/// A GitHub token of the documented shape (not a real one).
const TOKEN: &str = "ghp_0123456789abcdefghijABCDEFGHIJ012345";

async fn a_redacted_value_left_as_shown_reaches_the_tool_as_it_was(store: Store, _keep: Keep) {
    let ran = log();
    let (crew, _llm) = write_crew(
        &store,
        &ran,
        json!({"path": "drafts/a.md", "token": TOKEN}),
        |builder| builder.redact_with(crew_runtime::guards::SecretRedactor::new()),
    );
    let run = tokio::spawn(async move { crew.kickoff(()).await });
    let question = pending(&store, 1).await.remove(0);
    // The approver never sees the secret.
    let shown = question.arguments.to_string();
    assert!(!shown.contains(TOKEN), "{shown}");
    let placeholder = question.arguments["token"].clone();
    assert!(
        placeholder.as_str().is_some_and(|t| t.contains("REDACTED")),
        "{placeholder}"
    );
    // They fix the path only, leaving the placeholder as shown.
    let edit = object(json!({"path": "drafts/b.md", "token": placeholder}));
    store
        .decide(
            &question.id,
            Answer::new("alice", Decision::ApproveWithEdit(edit)),
        )
        .await
        .expect("alice edits and approves");
    finish(run).await.expect("the kickoff ends");
    assert_eq!(
        take(&ran),
        vec![json!({"path": "drafts/b.md", "token": TOKEN})]
    );
}

async fn an_edit_that_changes_a_redacted_value_is_refused(store: Store, _keep: Keep) {
    for tampered in [
        json!({"path": "drafts/a.md", "token": "[GITHUB-TOKEN-REDACTED]0"}),
        json!({"path": "drafts/a.md", "token": "mine", "content": "[REDACTED]"}),
    ] {
        let ran = log();
        let (crew, _llm) = write_crew(
            &store,
            &ran,
            json!({"path": "drafts/a.md", "token": TOKEN}),
            |builder| builder.redact_with(crew_runtime::guards::SecretRedactor::new()),
        );
        let question =
            answer_the_call(&store, crew, Decision::ApproveWithEdit(object(tampered))).await;
        assert!(take(&ran).is_empty(), "{:?}", take(&ran));
        let outcome = settled(&store, &question.id)
            .await
            .outcome
            .expect("settled");
        assert_eq!(outcome.outcome, "refused");
        assert_eq!(outcome.source.as_deref(), Some("approval-recheck"));
        assert!(
            outcome
                .detail
                .as_deref()
                .is_some_and(|d| d.contains("redact")),
            "{outcome:?}"
        );
    }
}

async fn what_became_of_an_approved_call_is_kept_beside_its_answer(store: Store, _keep: Keep) {
    // Refused afterwards: a budget hook after the approval.
    let ran = log();
    let (crew, _llm) = write_crew(
        &store,
        &ran,
        json!({"path": "drafts/a.md", "content": "800 EUR"}),
        |builder| {
            builder.hook_with(
                PRE_TOOL_CALL,
                HookOptions::new().name("budget"),
                |_: &mut ToolCallHookContext| -> Result<(), HookAborted> {
                    Err(HookAborted::new("over the monthly budget", "budget"))
                },
            )
        },
    );
    let question = answer_the_call(&store, crew, Decision::Approve).await;
    assert!(take(&ran).is_empty());
    let refused = settled(&store, &question.id).await;
    let outcome = refused.outcome.expect("settled");
    assert_eq!(
        (
            outcome.outcome.as_str(),
            outcome.source.as_deref(),
            outcome.detail.as_deref()
        ),
        ("refused", Some("budget"), Some("over the monthly budget"))
    );
    assert_eq!(refused.status, QuestionStatus::Approved);
    assert!(refused.taken_at.is_some());

    // Failed: the tool ran and failed.
    let (crew, _llm) = write_crew(
        &store,
        &ran,
        json!({"path": "full/a.md", "content": "x"}),
        |builder| builder,
    );
    let question = answer_the_call(&store, crew, Decision::Approve).await;
    let outcome = settled(&store, &question.id)
        .await
        .outcome
        .expect("settled");
    assert_eq!(
        (outcome.outcome.as_str(), outcome.detail.as_deref()),
        ("failed", Some("the disk is full"))
    );
}

/// The child process of
/// [`an_approval_its_process_never_takes_is_abandoned_not_approved`]:
/// asks one question with a lease of 3 s, recording on the trail `trail`
/// when the audit trail is built in, and waits.
#[tokio::test]
#[ignore = "run by another test as a separate process"]
async fn child_asks_with_a_trail_and_waits() {
    let Ok(url) = std::env::var("CREW_STORE_CHILD_URL") else {
        return;
    };
    let store = Store::connect(&url)
        .await
        .expect("the child opens the store");
    #[allow(unused_mut)]
    let mut approvals = StoreApprovals::new(store.clone()).lease(Duration::from_secs(3));
    #[cfg(feature = "audit")]
    {
        let trail = crew_runtime::audit::AuditTrail::open_with(store, "approvals", 64)
            .expect("the trail opens");
        approvals = approvals.audit(trail);
    }
    let _ = approvals.answer(refund_request("carol", PATIENCE)).await;
}

async fn an_approval_its_process_never_takes_is_abandoned_not_approved(store: Store, keep: Keep) {
    let mut child = std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args([
            "--exact",
            "child_asks_with_a_trail_and_waits",
            "--ignored",
            "--nocapture",
        ])
        .env("CREW_STORE_CHILD_URL", keep.url())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the child starts");
    let question = pending(&store, 1).await.remove(0);
    child.kill().expect("the child is killed");
    child.wait().expect("the child ends");

    // Within the lease the store cannot know the process is gone: the
    // approval is taken, but reads as not taken by its process.
    let approved = store
        .decide(&question.id, Answer::new("alice", Decision::Approve))
        .await
        .expect("taken within the lease");
    assert_eq!(approved.status, QuestionStatus::Approved);
    assert_eq!(approved.taken_at, None);

    // Once the lease has run out, it approved nothing: abandoned, with the
    // time it was found so.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let before = SystemTime::now();
    let history = store.history(10).await.expect("lists");
    let closed = history
        .iter()
        .find(|q| q.id == question.id)
        .expect("in the history");
    assert_eq!(closed.status, QuestionStatus::Abandoned);
    let closed_at = closed.closed_at.expect("the time it was found abandoned");
    assert!(
        closed_at + Duration::from_secs(1) >= before,
        "{closed_at:?}"
    );
    assert!(closed.outcome.is_none());

    #[cfg(feature = "audit")]
    {
        let records = crew_runtime::audit::tail(&store, "approvals", 50)
            .await
            .expect("the trail reads");
        // The killed process's own buffered records may be lost with it;
        // the closing is written by the process that found it.
        let kinds: Vec<&str> = records.iter().map(|r| r.kind.as_str()).collect();
        let closed = records
            .iter()
            .find(|r| r.kind == "approval_closed")
            .unwrap_or_else(|| panic!("no approval_closed record: {kinds:?}"));
        assert_eq!(closed.data["question"], json!(question.id));
        assert_eq!(closed.data["status"], json!("abandoned"));
        assert_eq!(closed.data["answered_by"], json!("alice"));
    }
}

async fn a_withdrawn_question_is_recorded_with_the_time_it_closed(store: Store, _keep: Keep) {
    #[allow(unused_mut)]
    let mut approvals = StoreApprovals::new(store.clone());
    #[cfg(feature = "audit")]
    let trail = crew_runtime::audit::AuditTrail::open_with(store.clone(), "approvals", 64)
        .expect("the trail opens");
    #[cfg(feature = "audit")]
    {
        approvals = approvals.audit(trail.clone());
    }
    let waiting = ask(&approvals, refund_request("carol", PATIENCE));
    let question = pending(&store, 1).await.remove(0);
    let before = SystemTime::now();
    waiting.abort();
    pending(&store, 0).await;
    let started = std::time::Instant::now();
    let closed = loop {
        let question = store
            .question(&question.id)
            .await
            .expect("reads")
            .expect("kept");
        if question.closed_at.is_some() {
            break question;
        }
        assert!(started.elapsed() < PATIENCE);
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(closed.status, QuestionStatus::Withdrawn);
    assert!(closed.closed_at.expect("closed") + Duration::from_secs(1) >= before);
    #[cfg(feature = "audit")]
    {
        trail.flush().await.expect("the trail flushes");
        let started = std::time::Instant::now();
        loop {
            let records = crew_runtime::audit::tail(&store, "approvals", 50)
                .await
                .expect("the trail reads");
            if let Some(record) = records.iter().find(|r| r.kind == "approval_closed") {
                assert_eq!(record.data["status"], json!("withdrawn"));
                assert_eq!(record.data["question"], json!(question.id));
                break;
            }
            assert!(started.elapsed() < PATIENCE, "no approval_closed record");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
