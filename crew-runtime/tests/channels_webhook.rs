//! Questions announced on a webhook (SPEC §14, "Announcing"): each pending
//! question and each change of it, delivered by an announcer to a receiver on
//! loopback that checks the Standard Webhooks signature; a failing or slow
//! receiver never blocks or answers the question. Every scenario runs on a
//! real SQLite file and a real PostgreSQL.

#[path = "support/channels.rs"]
mod channels;
#[path = "support/stores.rs"]
mod stores;
mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use channels::{PATIENCE, Waiting, answered, ask, pending};
use crew_runtime::audit::{self, AuditTrail};
use crew_runtime::channels::{Announcer, Webhook};
use crew_runtime::store::{
    Answer, ApproverScope, Decision, Question, QuestionStatus, Store, StoreApprovals,
};
use hooks_core::{Event, EventBus};
use serde_json::{Value, json};
use stores::{Keep, on_both_stores};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// What the receiver answers.
#[derive(Clone, Copy)]
enum Answering {
    Ok,
    Status(u16),
    /// 429 with `Retry-After: 1`.
    TooMany,
    /// Waits this long before answering 200.
    Slow(Duration),
}

/// A request received: its headers and body.
type Request = (axum::http::HeaderMap, Vec<u8>);

/// A webhook receiver on loopback: records each request (its headers and
/// body), and answers as told.
struct Receiver {
    url: String,
    received: Arc<Mutex<Vec<Request>>>,
    answering: Arc<Mutex<Answering>>,
}

impl Receiver {
    /// An axum server on loopback, on the test's runtime.
    async fn start() -> Receiver {
        let received = Arc::new(Mutex::new(Vec::new()));
        let answering = Arc::new(Mutex::new(Answering::Ok));
        let (log, how) = (Arc::clone(&received), Arc::clone(&answering));
        let receive = move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
            let (log, how) = (Arc::clone(&log), Arc::clone(&how));
            async move {
                log.lock().expect("log").push((headers, body.to_vec()));
                let answering = *how.lock().expect("how");
                use axum::http::StatusCode;
                use axum::response::IntoResponse;
                match answering {
                    Answering::Ok => StatusCode::OK.into_response(),
                    Answering::Status(code) => StatusCode::from_u16(code)
                        .expect("a status")
                        .into_response(),
                    Answering::TooMany => {
                        (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "1")]).into_response()
                    }
                    Answering::Slow(delay) => {
                        tokio::time::sleep(delay).await;
                        StatusCode::OK.into_response()
                    }
                }
            }
        };
        let router = axum::Router::new().route("/hooks", axum::routing::post(receive));
        let url = format!("{}/hooks", channels::serve(router).await);
        Receiver {
            url,
            received,
            answering,
        }
    }

    fn answer(&self, answering: Answering) {
        *self.answering.lock().expect("how") = answering;
    }

    /// The bodies received, each checked against its signature.
    fn messages(&self) -> Vec<Value> {
        let verifier = standardwebhooks::Webhook::new(SECRET).expect("the secret");
        self.received
            .lock()
            .expect("log")
            .iter()
            .map(|(headers, body)| {
                verifier
                    .verify(body, headers)
                    .expect("signed the Standard Webhooks way with the channel's secret");
                let mut message: Value = serde_json::from_slice(body).expect("JSON");
                message["id"] = json!(headers["webhook-id"].to_str().expect("an id"));
                message
            })
            .collect()
    }
}

/// Names `announcer`'s channels, then asks a question: the call waiting
/// for it, and the question.
async fn asked(store: &Store, announcer: &Announcer) -> (Waiting, Question) {
    announcer.register().await.expect("the channel is named");
    let waiting = ask(&StoreApprovals::new(store.clone()));
    (waiting, pending(store, 1).await.remove(0))
}

fn announcer(store: &Store, receiver: &Receiver) -> Announcer {
    let webhook = Webhook::new("pager", &receiver.url, SECRET).expect("a webhook");
    Announcer::new(store.clone()).channel(webhook).retry(
        Duration::from_millis(100),
        Duration::from_millis(400),
        3,
    )
}

async fn a_question_is_announced_on_a_signed_webhook_and_updated_once_answered(
    store: Store,
    _keep: Keep,
) {
    let receiver = Receiver::start().await;
    let announcer = announcer(&store, &receiver);
    let (waiting, question) = asked(&store, &announcer).await;

    assert_eq!(announcer.deliver_due().await.expect("a pass"), 1);
    let messages = receiver.messages();
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0]["type"], "approval.requested");
    let data = &messages[0]["data"];
    assert_eq!(data["question"], question.id.as_str());
    assert_eq!(data["status"], "pending");
    assert_eq!(data["tool"], "refund");
    assert_eq!(data["arguments"], json!({"order": "A-17", "amount": 120}));
    assert_eq!(data["requester"], "carol");
    let told = store.announcements(&question.id).await.expect("reads");
    assert_eq!(told.len(), 1);
    assert_eq!(
        (told[0].told, told[0].attempts),
        (Some(QuestionStatus::Pending), 0)
    );
    // Nothing new: nothing sent.
    assert_eq!(announcer.deliver_due().await.expect("a pass"), 0);
    assert_eq!(receiver.messages().len(), 1);

    store
        .decide(&question.id, Answer::new("alice", Decision::Approve))
        .await
        .expect("alice approves");
    assert_eq!(announcer.deliver_due().await.expect("a pass"), 1);
    let messages = receiver.messages();
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[1]["type"], "approval.updated");
    assert_eq!(messages[1]["data"]["status"], "approved");
    assert_eq!(messages[1]["data"]["decided_by"], "alice");
    assert_ne!(messages[0]["id"], messages[1]["id"]);
    let answer = answered(waiting).await;
    assert_eq!(answer.answered_by.as_deref(), Some("alice"));
}

async fn a_failing_webhook_never_blocks_or_answers_and_its_failure_is_recorded(
    store: Store,
    _keep: Keep,
) {
    let receiver = Receiver::start().await;
    receiver.answer(Answering::Status(500));
    let (bus, failures) = channels::failure_bus();
    let backoff = Duration::from_millis(800);
    let announcer = announcer(&store, &receiver)
        .events(bus)
        .retry(backoff, backoff, 3);
    announcer.register().await.expect("the channel is named");
    let trail = AuditTrail::open_with(store.clone(), "default", 8).expect("a trail");
    let approvals = StoreApprovals::new(store.clone()).audit(trail.clone());
    let waiting = ask(&approvals);
    let question = pending(&store, 1).await.remove(0);

    assert_eq!(announcer.deliver_due().await.expect("a pass"), 0);
    let failed_at = Instant::now();
    // Back up at once, but the next attempt waits for its backoff.
    receiver.answer(Answering::Ok);
    assert_eq!(
        announcer.deliver_due().await.expect("a pass"),
        0,
        "too soon"
    );
    assert_eq!(receiver.messages().len(), 1);
    // The question waits, unanswered; the call waits for it.
    let now = store.question(&question.id).await.expect("reads");
    assert_eq!(
        now.map(|question| question.status),
        Some(QuestionStatus::Pending)
    );
    assert!(!waiting.is_finished());
    let told = store.announcements(&question.id).await.expect("reads");
    assert_eq!((told[0].told, told[0].attempts), (None, 1));
    let error = told[0].last_error.clone().expect("why");
    assert!(error.contains("500"), "{error}");
    assert!(!error.contains("MfKQ9r8"), "{error}");
    {
        let failures = failures.lock().expect("seen");
        assert_eq!(failures.len(), 1);
        assert_eq!(
            (
                failures[0].attempt,
                failures[0].gave_up,
                failures[0].channel.as_str()
            ),
            (1, false, "pager")
        );
    }
    trail.flush().await.expect("written");
    let records = audit::tail(&store, "default", 100).await.expect("reads");
    let recorded = records
        .iter()
        .find(|record| record.kind == "announcement_failed")
        .expect("the failure is on the question's trail");
    assert_eq!(recorded.data["question"], question.id.as_str());
    assert_eq!(recorded.data["channel"], "pager");
    audit::verify(&store, "default", None)
        .await
        .expect("the trail is intact");

    // Tried again once its backoff has passed, and delivered.
    tokio::time::sleep((backoff + Duration::from_millis(50)).saturating_sub(failed_at.elapsed()))
        .await;
    assert_eq!(announcer.deliver_due().await.expect("a pass"), 1);
    let told = store.announcements(&question.id).await.expect("reads");
    assert_eq!(
        (told[0].told, told[0].attempts, told[0].last_error.clone()),
        (Some(QuestionStatus::Pending), 0, None)
    );
    store
        .decide(
            &question.id,
            Answer::new("alice", Decision::Deny).via("pager-bot"),
        )
        .await
        .expect("alice denies");
    let answer = answered(waiting).await;
    assert_eq!(answer.answered_by.as_deref(), Some("alice"));
    // The decision is on the trail with where it came from.
    trail.flush().await.expect("written");
    let records = audit::tail(&store, "default", 100).await.expect("reads");
    let recorded = records
        .iter()
        .find(|record| record.kind == "approval_answered")
        .expect("the answer is on the trail");
    assert_eq!(
        (
            recorded.data["approver"].clone(),
            recorded.data["channel"].clone()
        ),
        (json!("alice"), json!("pager-bot"))
    );
}

async fn a_webhook_that_keeps_failing_is_given_up_and_the_question_still_waits(
    store: Store,
    _keep: Keep,
) {
    let receiver = Receiver::start().await;
    receiver.answer(Answering::Status(502));
    let announcer = announcer(&store, &receiver);
    let (_waiting, question) = asked(&store, &announcer).await;
    let started = Instant::now();
    loop {
        announcer.deliver_due().await.expect("a pass");
        let told = store.announcements(&question.id).await.expect("reads");
        if told[0].gave_up {
            assert_eq!(told[0].attempts, 3, "the announcer's limit");
            break;
        }
        assert!(started.elapsed() < PATIENCE, "never gave up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(receiver.messages().len(), 3);
    receiver.answer(Answering::Ok);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(announcer.deliver_due().await.expect("a pass"), 0);
    assert_eq!(pending(&store, 1).await[0].id, question.id);
}

async fn a_429_is_tried_again_after_its_retry_after_not_before(store: Store, _keep: Keep) {
    let receiver = Receiver::start().await;
    receiver.answer(Answering::TooMany);
    // A backoff of 100 ms: only Retry-After (1 s) keeps it from the next
    // pass at 300 ms.
    let announcer = announcer(&store, &receiver);
    let (_waiting, question) = asked(&store, &announcer).await;
    assert_eq!(announcer.deliver_due().await.expect("a pass"), 0);
    receiver.answer(Answering::Ok);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(announcer.deliver_due().await.expect("a pass"), 0);
    assert_eq!(receiver.messages().len(), 1);
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert_eq!(announcer.deliver_due().await.expect("a pass"), 1);
    let told = store.announcements(&question.id).await.expect("reads");
    assert_eq!(told[0].told, Some(QuestionStatus::Pending));
}

async fn a_webhook_timing_out_leaves_the_question_waiting(store: Store, _keep: Keep) {
    let receiver = Receiver::start().await;
    receiver.answer(Answering::Slow(Duration::from_secs(120)));
    let webhook = Webhook::new("pager", &receiver.url, SECRET)
        .expect("a webhook")
        .timeout(Duration::from_millis(200))
        .expect("a timeout");
    let announcer = Announcer::new(store.clone()).channel(webhook).retry(
        Duration::from_millis(100),
        Duration::from_millis(400),
        3,
    );
    let (_waiting, question) = asked(&store, &announcer).await;
    // The pass ends without the receiver's answer (two minutes away).
    let pass = tokio::time::timeout(PATIENCE, announcer.deliver_due())
        .await
        .expect("the pass does not wait for the receiver");
    assert_eq!(pass.expect("a pass"), 0);
    let told = store.announcements(&question.id).await.expect("reads");
    assert_eq!((told[0].told, told[0].attempts), (None, 1));
    assert_eq!(pending(&store, 1).await[0].id, question.id);
}

async fn two_replicas_announce_each_question_once(store: Store, keep: Keep) {
    let receiver = Receiver::start().await;
    let other = Store::connect(&keep.url).await.expect("a second handle");
    // Failed attempts (a connection the receiver dropped) are tried again,
    // and may have reached it: counted, to tell a repeat from a race.
    let failures = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let bus = Arc::new(EventBus::new());
    let counted = Arc::clone(&failures);
    bus.subscribe(move |_: &Event| {
        counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    });
    let first = announcer(&store, &receiver).events(Arc::clone(&bus));
    let second = announcer(&other, &receiver).events(bus);
    first.register().await.expect("named");
    second.register().await.expect("named");
    let approvals = StoreApprovals::new(store.clone());
    let waiting: Vec<_> = (0..12).map(|_| ask(&approvals)).collect();
    let mut asked: Vec<String> = pending(&store, 12)
        .await
        .into_iter()
        .map(|question| question.id)
        .collect();
    asked.sort();
    let started = Instant::now();
    loop {
        let (a, b) = tokio::join!(first.deliver_due(), second.deliver_due());
        a.expect("a pass");
        b.expect("a pass");
        let mut told = 0;
        for id in &asked {
            let announcements = store.announcements(id).await.expect("reads");
            if announcements[0].told == Some(QuestionStatus::Pending) {
                told += 1;
            }
        }
        if told == asked.len() {
            break;
        }
        assert!(started.elapsed() < PATIENCE, "{told} of 12 announced");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let messages = receiver.messages();
    let mut announced: Vec<String> = messages
        .iter()
        .map(|message| {
            assert_eq!(message["type"], "approval.requested");
            message["data"]["question"]
                .as_str()
                .expect("an id")
                .to_owned()
        })
        .collect();
    announced.sort();
    announced.dedup();
    assert_eq!(announced, asked, "each question announced");
    let failed = failures.load(std::sync::atomic::Ordering::SeqCst);
    assert!(
        messages.len() <= 12 + failed,
        "{} messages for 12 questions with {failed} failed attempts: two replicas delivered one announcement",
        messages.len()
    );
    for task in waiting {
        task.abort();
    }
}

async fn a_change_made_while_its_question_is_being_announced_is_told_next(
    store: Store,
    _keep: Keep,
) {
    let receiver = Receiver::start().await;
    receiver.answer(Answering::Slow(Duration::from_millis(400)));
    let announcer = announcer(&store, &receiver);
    let other = self::announcer(&store, &receiver);
    let (waiting, question) = asked(&store, &announcer).await;
    // Approved while the receiver is still taking the announcement of it
    // pending, and the change taken from the outbox by another replica
    // meanwhile, which finds the announcement held by the first.
    let approve = async {
        let started = Instant::now();
        while receiver.received.lock().expect("log").is_empty() {
            assert!(started.elapsed() < PATIENCE, "the announcement is sent");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        store
            .decide(&question.id, Answer::new("alice", Decision::Approve))
            .await
            .expect("alice approves");
        assert_eq!(other.deliver_due().await.expect("a pass"), 0, "held");
    };
    let (delivered, ()) = tokio::join!(announcer.deliver_due(), approve);
    assert_eq!(delivered.expect("a pass"), 1);
    // What was told is already old: it does not rest, the next pass tells
    // the approval, and then there is nothing more to tell.
    receiver.answer(Answering::Ok);
    assert_eq!(announcer.deliver_due().await.expect("a pass"), 1);
    let messages = receiver.messages();
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[1]["type"], "approval.updated");
    assert_eq!(messages[1]["data"]["status"], "approved");
    assert_eq!(announcer.deliver_due().await.expect("a pass"), 0);
    assert_eq!(receiver.messages().len(), 2);
    answered(waiting).await;
}

async fn a_channel_named_later_announces_what_is_still_pending_and_nothing_closed(
    store: Store,
    _keep: Keep,
) {
    let receiver = Receiver::start().await;
    let approvals = StoreApprovals::new(store.clone());
    let withdrawn = ask(&approvals);
    let closed = pending(&store, 1).await.remove(0);
    withdrawn.abort();
    let started = Instant::now();
    while store
        .question(&closed.id)
        .await
        .expect("reads")
        .is_some_and(|question| question.status == QuestionStatus::Pending)
    {
        assert!(
            started.elapsed() < PATIENCE,
            "the dropped call's question is withdrawn"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let _waiting = ask(&approvals);
    let open = pending(&store, 1).await.remove(0);
    // Nothing is announced while no channel is named…
    let announcer = announcer(&store, &receiver);
    assert_eq!(announcer.deliver_due().await.expect("a pass"), 0);
    assert!(receiver.messages().is_empty());
    // …and once one is, the question still waiting is, the closed one not.
    announcer.register().await.expect("named");
    assert_eq!(announcer.deliver_due().await.expect("a pass"), 1);
    let messages = receiver.messages();
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0]["data"]["question"], open.id.as_str());
    assert!(
        store
            .announcements(&closed.id)
            .await
            .expect("reads")
            .is_empty()
    );
    let told = store.announcements(&open.id).await.expect("reads");
    assert_eq!(told.len(), 1);
    assert_eq!(told[0].told, Some(QuestionStatus::Pending));
    // Told, it rests: the next passes send nothing more.
    assert_eq!(announcer.deliver_due().await.expect("a pass"), 0);
    assert_eq!(announcer.deliver_due().await.expect("a pass"), 0);
    assert_eq!(receiver.messages().len(), 1);
}

async fn messages(receiver: &Receiver, count: usize) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let messages = receiver.messages();
        if messages.len() >= count {
            return messages;
        }
        assert!(started.elapsed() < PATIENCE, "{} messages", messages.len());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn a_bot_told_by_the_inboxs_webhook_answers_through_its_api_and_hears_the_outcome(
    store: Store,
    keep: Keep,
) {
    let receiver = Receiver::start().await;
    let dir = tempfile::tempdir().expect("a directory");
    let secret = dir.path().join("pager.secret");
    std::fs::write(&secret, format!("{SECRET}\n")).expect("the secret's file");
    let inbox = support::serve_inbox(
        env!("CARGO_BIN_EXE_crew-inbox"),
        &keep.url,
        &[
            "--public-origin",
            "https://approvals.example.com",
            "--webhook",
            &format!("pager={}", receiver.url),
            "--webhook-secret-file",
            &format!("pager={}", secret.display()),
        ],
    );
    let origin = inbox.origin.clone();
    store
        .add_approver("pagerbot", None, ApproverScope::everything())
        .await
        .expect("the bot's approver");
    let token = store.issue_api_token("pagerbot").await.expect("a token");
    // The inbox names its channel in the store before it says where it
    // serves: this question is announced.
    let waiting = ask(&StoreApprovals::new(store.clone()));
    let question = pending(&store, 1).await.remove(0);

    let told = messages(&receiver, 1).await;
    assert_eq!(told[0]["type"], "approval.requested");
    assert_eq!(told[0]["data"]["question"], question.id.as_str());
    assert_eq!(
        told[0]["data"]["inbox"],
        format!("https://approvals.example.com/questions/{}", question.id)
    );
    let decided = reqwest::Client::new()
        .post(format!("{origin}/api/approvals/{}/decision", question.id))
        .bearer_auth(&token)
        .json(&json!({"decision": "approve", "comment": "paged and checked"}))
        .send()
        .await
        .expect("the API answers");
    assert!(decided.status().is_success(), "{}", decided.status());
    let answer = answered(waiting).await;
    assert_eq!(answer.answered_by.as_deref(), Some("pagerbot"));
    let decided = store
        .question(&question.id)
        .await
        .expect("reads")
        .expect("there");
    assert_eq!(
        decided.answer.expect("recorded").via.as_deref(),
        Some("api")
    );
    let told = messages(&receiver, 2).await;
    assert_eq!(told[1]["type"], "approval.updated");
    assert_eq!(told[1]["data"]["status"], "approved");
    assert_eq!(told[1]["data"]["decided_by"], "pagerbot");
    drop(inbox);
}

#[test]
fn the_inbox_refuses_a_webhook_without_its_secret_and_never_shows_one() {
    let dir = tempfile::tempdir().expect("a directory");
    let url = format!("sqlite://{}", dir.path().join("store.db").display());
    let run = |args: &[&str]| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_crew-inbox"))
            .args(["serve", "--listen", "127.0.0.1:0", "--store", &url])
            .args(args)
            .output()
            .expect("crew-inbox runs");
        assert!(!output.status.success(), "refused");
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let said = run(&["--webhook", "pager=http://127.0.0.1:9/hooks"]);
    assert!(said.contains("--webhook-secret-file pager=PATH"), "{said}");
    let secret = dir.path().join("bad.secret");
    std::fs::write(&secret, "whsec_c2hvcnQ=").expect("a file");
    let said = run(&[
        "--webhook",
        "pager=http://127.0.0.1:9/hooks",
        "--webhook-secret-file",
        &format!("pager={}", secret.display()),
    ]);
    assert!(said.contains("at least 24"), "{said}");
    assert!(!said.contains("c2hvcnQ"), "{said}");
    let said = run(&["--webhook", "no name"]);
    assert!(said.contains("NAME=VALUE"), "{said}");
}

async fn a_bots_token_decides_nothing_outside_its_scope_and_no_edit_changes_the_tool(
    store: Store,
    _keep: Keep,
) {
    for (name, scope) in [
        ("refundbot", ApproverScope::everything().tools(["refund"])),
        ("mailbot", ApproverScope::everything().tools(["send_email"])),
    ] {
        store
            .add_approver(name, None, scope)
            .await
            .expect("a bot's approver");
    }
    let origin = channels::serve(crew_runtime::inbox::Inbox::new(store.clone()).router()).await;
    let waiting = ask(&StoreApprovals::new(store.clone()));
    let question = pending(&store, 1).await.remove(0);
    let post = |bot: &str, body: Value| {
        let (origin, id, store) = (origin.clone(), question.id.clone(), store.clone());
        let bot = bot.to_owned();
        async move {
            let token = store.issue_api_token(&bot).await.expect("a token");
            let response = reqwest::Client::new()
                .post(format!("{origin}/api/approvals/{id}/decision"))
                .bearer_auth(token)
                .json(&body)
                .send()
                .await
                .expect("the inbox answers");
            (
                response.status().as_u16(),
                response.text().await.unwrap_or_default(),
            )
        }
    };
    // The mail bot's token, on a refund: nothing of it is told.
    let (status, said) = post("mailbot", json!({"decision": "approve"})).await;
    assert_eq!(status, 404, "{said}");
    // An edit that names another tool is refused whole.
    let (status, said) = post(
        "refundbot",
        json!({"decision": "edit", "tool": "delete_order", "arguments": {"order": "A-17", "amount": 1}}),
    )
    .await;
    assert_eq!(status, 422, "{said}");
    assert!(said.contains("tool"), "{said}");
    let now = store
        .question(&question.id)
        .await
        .expect("reads")
        .expect("kept");
    assert_eq!(now.status, QuestionStatus::Pending);
    // The refund bot's own edit, of the arguments only, is taken.
    let edit = json!({"decision": "edit", "arguments": {"order": "A-17", "amount": 60}});
    let (status, said) = post("refundbot", edit).await;
    assert_eq!(status, 200, "{said}");
    let answer = answered(waiting).await;
    assert_eq!(answer.answered_by.as_deref(), Some("refundbot"));
    assert_eq!(
        answer.edited_input.map(Value::Object),
        Some(json!({"order": "A-17", "amount": 60}))
    );
}

on_both_stores!(
    a_bots_token_decides_nothing_outside_its_scope_and_no_edit_changes_the_tool,
    a_bot_told_by_the_inboxs_webhook_answers_through_its_api_and_hears_the_outcome,
    a_question_is_announced_on_a_signed_webhook_and_updated_once_answered,
    a_failing_webhook_never_blocks_or_answers_and_its_failure_is_recorded,
    a_webhook_that_keeps_failing_is_given_up_and_the_question_still_waits,
    a_429_is_tried_again_after_its_retry_after_not_before,
    a_webhook_timing_out_leaves_the_question_waiting,
    two_replicas_announce_each_question_once,
    a_channel_named_later_announces_what_is_still_pending_and_nothing_closed,
    a_change_made_while_its_question_is_being_announced_is_told_next,
);

#[test]
fn a_webhooks_secret_never_shows_in_debug_or_errors() {
    let webhook = Webhook::new("pager", "http://127.0.0.1:9/hooks", SECRET).expect("a webhook");
    let shown = format!("{webhook:?}");
    assert!(
        shown.contains("pager") && !shown.contains("MfKQ9r8"),
        "{shown}"
    );
    for bad in ["whsec_short", "whsec_***not base64***"] {
        let error = Webhook::new("pager", "http://127.0.0.1:9/hooks", bad).expect_err("refused");
        assert!(!error.to_string().contains(&bad[6..]), "{error}");
    }
    let error = Webhook::new("pager", "ftp://127.0.0.1/hooks", SECRET).expect_err("refused");
    assert!(error.to_string().contains("http or https"), "{error}");
}
