//! Approvals in Slack (SPEC §14): questions sent by direct message to the
//! linked approvers whose scope covers them, through a local server
//! speaking Slack's Web API (`chat.postMessage`, `chat.update`, 429 with
//! `Retry-After` when told to); clicks posted to the inbox's Slack endpoint
//! signed as Slack signs them. Every attack decides nothing. Each scenario
//! runs on a real SQLite file and a real PostgreSQL.

#[path = "support/channels.rs"]
mod channels;
#[path = "support/stores.rs"]
mod stores;
mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use channels::{PATIENCE, Waiting, answered};
use crew_runtime::channels::{Announcer, Slack};
use crew_runtime::inbox::Inbox;
use crew_runtime::store::{
    ApproverScope, Question, QuestionStatus, SlackIdentity, Store, StoreApprovals,
};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use stores::{Keep, on_both_stores};

const TOKEN: &str = "xoxb-17-42-standin";
const SIGNING_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const TEAM: &str = "T024BE7LD";

/// A call the stand-in received: the method, its JSON body, and its
/// `Authorization` header.
type Call = (String, Value, String);

/// What the stand-in does besides answering `ok`.
#[derive(Default)]
struct Trouble {
    /// Answers the next call 429 with `Retry-After: 1`.
    rate_limit_once: bool,
    /// Answers 500 to the posts to this channel (a user's id).
    fail_channel: Option<String>,
}

/// A local server speaking Slack's Web API: records each call.
struct SlackStandIn {
    api: String,
    /// Its origin, where its response URLs are (`/responses/…`).
    origin: String,
    calls: Arc<Mutex<Vec<Call>>>,
    trouble: Arc<Mutex<Trouble>>,
    /// What was posted to a response URL (any path): the path and body.
    responses: Arc<Mutex<Vec<(String, Value)>>>,
}

impl SlackStandIn {
    async fn start() -> SlackStandIn {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let trouble = Arc::new(Mutex::new(Trouble::default()));
        let (log, how) = (Arc::clone(&calls), Arc::clone(&trouble));
        let api = move |axum::extract::Path(method): axum::extract::Path<String>,
                        headers: axum::http::HeaderMap,
                        body: axum::body::Bytes| {
            let (log, how) = (Arc::clone(&log), Arc::clone(&how));
            async move {
                use axum::http::StatusCode;
                use axum::response::IntoResponse;
                let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let auth = headers
                    .get("authorization")
                    .and_then(|value| value.to_str().ok())
                    .unwrap_or_default()
                    .to_owned();
                let mut trouble = how.lock().expect("trouble");
                if trouble.rate_limit_once {
                    trouble.rate_limit_once = false;
                    return (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "1")]).into_response();
                }
                let channel = body["channel"].as_str().unwrap_or_default().to_owned();
                if method == "chat.postMessage"
                    && trouble.fail_channel.as_deref() == Some(channel.as_str())
                {
                    return StatusCode::INTERNAL_SERVER_ERROR.into_response();
                }
                drop(trouble);
                let mut log = log.lock().expect("log");
                log.push((method.clone(), body.clone(), auth));
                let ts = format!("1712.{:06}", log.len());
                let dm = format!("D{channel}");
                let answer = match method.as_str() {
                    "chat.postMessage" => json!({"ok": true, "channel": dm, "ts": ts}),
                    "chat.update" => {
                        json!({"ok": true, "channel": body["channel"], "ts": body["ts"]})
                    }
                    _ => json!({"ok": false, "error": "unknown_method"}),
                };
                axum::Json(answer).into_response()
            }
        };
        let responses = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&responses);
        let respond = move |uri: axum::http::Uri, body: axum::body::Bytes| {
            let kept = Arc::clone(&kept);
            async move {
                let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                kept.lock()
                    .expect("responses")
                    .push((uri.path().to_owned(), body));
                axum::http::StatusCode::OK
            }
        };
        let router = axum::Router::new()
            .route("/api/{method}", axum::routing::post(api))
            .route("/responses/{*rest}", axum::routing::post(respond.clone()))
            .route("/elsewhere/{*rest}", axum::routing::post(respond));
        let origin = channels::serve(router).await;
        SlackStandIn {
            api: format!("{origin}/api/"),
            origin,
            calls,
            trouble,
            responses,
        }
    }

    fn calls(&self, method: &str) -> Vec<Value> {
        self.calls
            .lock()
            .expect("log")
            .iter()
            .filter(|(called, _, auth)| {
                assert_eq!(auth, &format!("Bearer {TOKEN}"), "the bot token");
                called == method
            })
            .map(|(_, body, _)| body.clone())
            .collect()
    }
}

/// The inbox with its Slack endpoint, served on loopback: its origin.
async fn serve_inbox(store: &Store) -> String {
    let router = Inbox::new(store.clone())
        .slack_signing_secret(SIGNING_SECRET)
        .router();
    channels::serve(router).await
}

/// A click's form body, as Slack posts it.
fn click_body(team: &str, user: &str, action: &str, value: &str) -> String {
    click_body_answering(team, user, action, value, None)
}

/// A click's form body with its `response_url`.
fn click_body_answering(
    team: &str,
    user: &str,
    action: &str,
    value: &str,
    response_url: Option<&str>,
) -> String {
    let mut payload = json!({
        "type": "block_actions",
        "team": {"id": team},
        "user": {"id": user, "team_id": team},
        "actions": [{"action_id": action, "value": value, "block_id": "crew-approval"}],
    });
    if let Some(url) = response_url {
        payload["response_url"] = json!(url);
    }
    form_urlencoded::Serializer::new(String::new())
        .append_pair("payload", &payload.to_string())
        .finish()
}

fn now_secs() -> i64 {
    i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("after 1970")
            .as_secs(),
    )
    .expect("in range")
}

/// `body` signed as Slack signs it, with `secret`, at `timestamp`.
fn signature(secret: &str, timestamp: i64, body: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("a key");
    mac.update(format!("v0:{timestamp}:{body}").as_bytes());
    format!("v0={}", hex::encode(mac.finalize().into_bytes()))
}

/// Posts `body` to the inbox's Slack endpoint with these headers: the
/// status and the JSON answer (null when not JSON).
async fn post_signed(origin: &str, body: &str, timestamp: i64, signature: &str) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{origin}/slack/interactions"))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("x-slack-request-timestamp", timestamp.to_string())
        .header("x-slack-signature", signature)
        .body(body.to_owned())
        .send()
        .await
        .expect("the inbox answers");
    let status = response.status().as_u16();
    let text = response.text().await.expect("a body");
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// alice clicks Approve on the button of `value`, and it decides.
async fn alice_approves(origin: &str, value: &str) {
    let (status, said) = click(origin, TEAM, "UALICE", "approve", value).await;
    assert_eq!(
        (status, said["decided"].clone()),
        (200, json!(true)),
        "{said}"
    );
}

/// A click of `user` signed now with the app's secret.
async fn click(origin: &str, team: &str, user: &str, action: &str, value: &str) -> (u16, Value) {
    click_answering(origin, team, user, action, value, None).await
}

/// [`click`], with the `response_url` Slack gives it.
async fn click_answering(
    origin: &str,
    team: &str,
    user: &str,
    action: &str,
    value: &str,
    response_url: Option<&str>,
) -> (u16, Value) {
    let body = click_body_answering(team, user, action, value, response_url);
    let now = now_secs();
    post_signed(origin, &body, now, &signature(SIGNING_SECRET, now, &body)).await
}

fn ask(store: &Store) -> Waiting {
    channels::ask(&StoreApprovals::new(store.clone()))
}

async fn pending(store: &Store) -> Question {
    channels::pending(store, 1).await.remove(0)
}

/// alice may answer everything, bob only `other_tool`, carol (the
/// requester) everything: each linked to a Slack user of the workspace.
async fn approvers(store: &Store) {
    for (name, scope, user) in [
        ("alice", ApproverScope::everything(), "UALICE"),
        (
            "bob",
            ApproverScope::everything().tools(["other_tool"]),
            "UBOB",
        ),
        ("carol", ApproverScope::everything(), "UCAROL"),
    ] {
        store
            .add_approver(name, None, scope)
            .await
            .expect("an approver");
        store
            .link_slack(name, &SlackIdentity::new(TEAM, user))
            .await
            .expect("linked");
    }
}

fn slack(store: &Store, stand_in: &SlackStandIn) -> Announcer {
    let slack = Slack::new(store.clone(), "ops-slack", TEAM, TOKEN)
        .expect("a Slack channel")
        .api_base(&stand_in.api)
        .expect("the stand-in")
        .inbox("https://approvals.example.com");
    Announcer::new(store.clone()).channel(slack).retry(
        Duration::from_millis(100),
        Duration::from_millis(400),
        5,
    )
}

/// The Approve button's value in a posted message.
fn approve_value(message: &Value) -> String {
    message["blocks"]
        .as_array()
        .expect("blocks")
        .iter()
        .find(|block| block["type"] == "actions")
        .and_then(|block| {
            block["elements"]
                .as_array()?
                .iter()
                .find(|element| element["action_id"] == "approve")
        })
        .and_then(|button| button["value"].as_str())
        .expect("an Approve button")
        .to_owned()
}

async fn a_question_goes_to_linked_approvers_in_scope_and_a_signed_click_decides_it(
    store: Store,
    _keep: Keep,
) {
    let stand_in = SlackStandIn::start().await;
    approvers(&store).await;
    let announcer = slack(&store, &stand_in);
    announcer.register().await.expect("named");
    let origin = serve_inbox(&store).await;
    let waiting = ask(&store);
    let question = pending(&store).await;

    assert_eq!(announcer.deliver_due().await.expect("a pass"), 1);
    let posted = stand_in.calls("chat.postMessage");
    // Only alice: bob's scope does not cover `refund`, carol asked.
    assert_eq!(posted.len(), 1, "{posted:?}");
    assert_eq!(posted[0]["channel"], "UALICE");
    let shown = posted[0]["blocks"].to_string();
    assert!(
        shown.contains("refund") && shown.contains("A-17"),
        "{shown}"
    );
    assert!(
        shown.contains("https://approvals.example.com/questions/"),
        "{shown}"
    );
    let value = approve_value(&posted[0]);
    assert_eq!(value, format!("{}:{}", question.id, question.revision()));

    alice_approves(&origin, &value).await;
    let answer = answered(waiting).await;
    assert_eq!(answer.answered_by.as_deref(), Some("alice"));
    let decided = store
        .question(&question.id)
        .await
        .expect("reads")
        .expect("there");
    let recorded = decided.answer.expect("recorded");
    assert_eq!(
        (recorded.approver.as_str(), recorded.via.as_deref()),
        ("alice", Some("slack"))
    );

    // The message now says who decided, without buttons.
    assert_eq!(announcer.deliver_due().await.expect("a pass"), 1);
    let updated = stand_in.calls("chat.update");
    assert_eq!(updated.len(), 1);
    assert_eq!(updated[0]["channel"], "DUALICE");
    let shown = updated[0]["blocks"].to_string();
    assert!(shown.contains("Approved by alice"), "{shown}");
    assert!(!shown.contains("\"approve\""), "{shown}");
}

async fn no_forged_stale_replayed_or_misdirected_click_decides_anything(store: Store, keep: Keep) {
    let stand_in = SlackStandIn::start().await;
    approvers(&store).await;
    let announcer = slack(&store, &stand_in);
    announcer.register().await.expect("named");
    // The inbox on a handle of its own, as another process would be.
    let inbox_store = Store::connect(&keep.url).await.expect("another handle");
    let origin = serve_inbox(&inbox_store).await;
    let waiting = ask(&store);
    let question = pending(&store).await;
    announcer.deliver_due().await.expect("a pass");
    let value = approve_value(&stand_in.calls("chat.postMessage")[0]);
    let now = now_secs();
    let body = click_body(TEAM, "UALICE", "approve", &value);

    // A wrong signature; the right one over another body; a stale
    // timestamp (correctly signed); no signature at all.
    let forged = signature("not the app's secret", now, &body);
    assert_eq!(post_signed(&origin, &body, now, &forged).await.0, 401);
    let other = click_body(TEAM, "UALICE", "approve", "x:y");
    let theirs = signature(SIGNING_SECRET, now, &other);
    assert_eq!(post_signed(&origin, &body, now, &theirs).await.0, 401);
    let stale = now - 5 * 60 - 30;
    let signed_stale = signature(SIGNING_SECRET, stale, &body);
    assert_eq!(
        post_signed(&origin, &body, stale, &signed_stale).await.0,
        401
    );
    assert_eq!(post_signed(&origin, &body, now, "").await.0, 401);

    // Authenticated, but nobody who may decide it.
    for (team, user, why) in [
        (TEAM, "UNOBODY", "an unlinked user"),
        (
            "T0OTHERWS",
            "UALICE",
            "alice's user id in another workspace",
        ),
        (TEAM, "UCAROL", "the requester's own account"),
        (TEAM, "UBOB", "an approver outside the question's scope"),
    ] {
        let (status, said) = click(&origin, team, user, "approve", &value).await;
        assert_eq!(
            (status, said["decided"].clone()),
            (200, json!(false)),
            "{why}: {said}"
        );
    }
    // A button of another revision of the question.
    let (_, said) = click(
        &origin,
        TEAM,
        "UALICE",
        "approve",
        &format!("{}:0123456789abcdef", question.id),
    )
    .await;
    assert_eq!(said["decided"], json!(false), "{said}");
    assert!(
        said["text"]
            .as_str()
            .unwrap_or_default()
            .contains("changed"),
        "{said}"
    );
    let now_question = store
        .question(&question.id)
        .await
        .expect("reads")
        .expect("there");
    assert_eq!(
        now_question.status,
        QuestionStatus::Pending,
        "nothing decided it"
    );
    assert!(!waiting.is_finished());

    // alice's click decides; the very same request again is a replay.
    let now = now_secs();
    let signed = signature(SIGNING_SECRET, now, &body);
    let (status, said) = post_signed(&origin, &body, now, &signed).await;
    assert_eq!(
        (status, said["decided"].clone()),
        (200, json!(true)),
        "{said}"
    );
    assert_eq!(
        post_signed(&origin, &body, now, &signed).await.0,
        401,
        "a replay"
    );
    // A click on the old message once decided: its revision is gone.
    let (_, said) = click(&origin, TEAM, "UALICE", "deny", &value).await;
    assert_eq!(said["decided"], json!(false), "{said}");
    let answer = answered(waiting).await;
    assert_eq!(answer.text, "yes");
}

async fn slacks_rate_limit_is_honored_and_nobody_is_messaged_twice(store: Store, _keep: Keep) {
    let stand_in = SlackStandIn::start().await;
    approvers(&store).await;
    // dave may answer everything too: two recipients.
    store
        .add_approver("dave", None, ApproverScope::everything())
        .await
        .expect("an approver");
    store
        .link_slack("dave", &SlackIdentity::new(TEAM, "UDAVE"))
        .await
        .expect("linked");
    let announcer = slack(&store, &stand_in);
    announcer.register().await.expect("named");
    let _waiting = ask(&store);
    let question = pending(&store).await;

    // Rate limited: nothing sent, tried again after Retry-After (1 s),
    // not after the backoff (100 ms).
    stand_in.trouble.lock().expect("trouble").rate_limit_once = true;
    assert_eq!(announcer.deliver_due().await.expect("a pass"), 0);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(announcer.deliver_due().await.expect("a pass"), 0);
    assert!(stand_in.calls("chat.postMessage").is_empty());
    tokio::time::sleep(Duration::from_millis(900)).await;

    // dave's message fails; alice's went out and is not sent again.
    stand_in.trouble.lock().expect("trouble").fail_channel = Some("UDAVE".into());
    assert_eq!(announcer.deliver_due().await.expect("a pass"), 0);
    let posted: Vec<Value> = stand_in.calls("chat.postMessage");
    assert_eq!(posted.len(), 1);
    assert_eq!(posted[0]["channel"], "UALICE");
    stand_in.trouble.lock().expect("trouble").fail_channel = None;
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(announcer.deliver_due().await.expect("a pass"), 1);
    let channels: Vec<String> = stand_in
        .calls("chat.postMessage")
        .iter()
        .map(|call| call["channel"].as_str().expect("a channel").to_owned())
        .collect();
    assert_eq!(channels, ["UALICE", "UDAVE"]);
    let told = store.announcements(&question.id).await.expect("reads");
    assert_eq!(told[0].told, Some(QuestionStatus::Pending));
}

async fn slack_down_leaves_the_question_waiting_in_the_inbox(store: Store, _keep: Keep) {
    approvers(&store).await;
    // Nothing listens on port 9 of the loopback.
    let slack = Slack::new(store.clone(), "ops-slack", TEAM, TOKEN)
        .expect("a Slack channel")
        .api_base("http://127.0.0.1:9/api/")
        .expect("a base");
    let announcer = Announcer::new(store.clone()).channel(slack);
    announcer.register().await.expect("named");
    let waiting = ask(&store);
    let question = pending(&store).await;
    assert_eq!(announcer.deliver_due().await.expect("a pass"), 0);
    let told = store.announcements(&question.id).await.expect("reads");
    assert_eq!((told[0].told, told[0].attempts), (None, 1));
    let error = told[0].last_error.clone().expect("why");
    assert!(error.contains("chat.postMessage"), "{error}");
    assert!(!error.contains(TOKEN), "{error}");
    let still = store
        .question(&question.id)
        .await
        .expect("reads")
        .expect("there");
    assert_eq!(still.status, QuestionStatus::Pending);
    assert!(!waiting.is_finished());
}

async fn crew_inbox_serve_sends_to_slack_and_takes_its_clicks(store: Store, keep: Keep) {
    let stand_in = SlackStandIn::start().await;
    approvers(&store).await;
    let dir = tempfile::tempdir().expect("a directory");
    let token = dir.path().join("slack.token");
    let secret = dir.path().join("slack.secret");
    std::fs::write(&token, format!("{TOKEN}\n")).expect("the token's file");
    std::fs::write(&secret, SIGNING_SECRET).expect("the secret's file");
    let inbox = support::serve_inbox(
        env!("CARGO_BIN_EXE_crew-inbox"),
        &keep.url,
        &[
            "--slack",
            &format!("ops={TEAM}"),
            "--slack-token-file",
            &format!("ops={}", token.display()),
            "--slack-signing-secret-file",
            &secret.display().to_string(),
            "--slack-api-base",
            &stand_in.api,
        ],
    );
    let waiting = ask(&store);
    let question = pending(&store).await;
    let started = Instant::now();
    let posted = loop {
        let posted = stand_in.calls("chat.postMessage");
        if !posted.is_empty() {
            break posted;
        }
        assert!(started.elapsed() < PATIENCE, "never sent to Slack");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(posted[0]["channel"], "UALICE");
    let value = approve_value(&posted[0]);
    assert!(value.starts_with(&question.id));
    alice_approves(&inbox.origin, &value).await;
    let answer = answered(waiting).await;
    assert_eq!(answer.answered_by.as_deref(), Some("alice"));
    let started = Instant::now();
    while stand_in.calls("chat.update").is_empty() {
        assert!(
            started.elapsed() < PATIENCE,
            "the message was never updated"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn the_slack_message_says_what_became_of_the_approved_call(store: Store, _keep: Keep) {
    use crew_runtime::ToolAnnotations;
    use crew_runtime::guards::ApprovalGate;
    use crew_runtime::prelude::*;
    let stand_in = SlackStandIn::start().await;
    approvers(&store).await;
    let announcer = slack(&store, &stand_in);
    announcer.register().await.expect("named");
    let origin = serve_inbox(&store).await;
    let llm: Arc<dyn Llm> = Arc::new(
        ScriptedLlm::new()
            .call("refund", json!({"order": "A-17", "amount": 120}))
            .answer("done"),
    );
    let refund = Tool::dynamic(
        "refund",
        "Refunds an order",
        json!({"type": "object"}),
        |_| Ok::<_, String>(json!("refunded")),
    )
    .with_annotations(ToolAnnotations::new().destructive(true));
    let support = Agent::builder("Support").llm(llm).tool(refund).build();
    let crew = Crew::builder()
        .agent(support.clone())
        .task(Task::builder("Handle the ticket").agent(&support).build())
        .global_registry(Arc::new(HookRegistry::new()))
        .human_input(Arc::new(StoreApprovals::new(store.clone())))
        .human_input_timeout(PATIENCE)
        .async_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("approval-gate"),
            ApprovalGate::for_capabilities([Capability::Destructive]).pre_hook(),
        )
        .build()
        .expect("builds")
        .for_user("carol");
    let run = tokio::spawn(async move { crew.kickoff(()).await });
    pending(&store).await;
    announcer.deliver_due().await.expect("a pass");
    let value = approve_value(&stand_in.calls("chat.postMessage")[0]);
    let (_, said) = click(&origin, TEAM, "UALICE", "approve", &value).await;
    assert_eq!(said["decided"], json!(true), "{said}");
    tokio::time::timeout(PATIENCE, run)
        .await
        .expect("ends")
        .expect("no panic")
        .expect("runs");
    // Told once it was approved, and again once the call ran.
    let started = Instant::now();
    loop {
        announcer.deliver_due().await.expect("a pass");
        let updates = stand_in.calls("chat.update");
        if let Some(last) = updates.last()
            && last["blocks"].to_string().contains("The call ran.")
        {
            assert!(last["blocks"].to_string().contains("Approved by alice"));
            break;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "never told the call ran: {updates:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn a_refused_user_is_told_why_through_slacks_response_url_and_no_other_is_called(
    store: Store,
    _keep: Keep,
) {
    let stand_in = SlackStandIn::start().await;
    approvers(&store).await;
    let announcer = slack(&store, &stand_in);
    announcer.register().await.expect("named");
    let router = Inbox::new(store.clone())
        .slack_signing_secret(SIGNING_SECRET)
        .slack_response_base(&format!("{}/responses/", stand_in.origin))
        .router();
    let origin = channels::serve(router).await;
    let _waiting = ask(&store);
    pending(&store).await;
    announcer.deliver_due().await.expect("a pass");
    let value = approve_value(&stand_in.calls("chat.postMessage")[0]);

    let post = |user: &'static str, url: String| {
        let (origin, value) = (origin.clone(), value.clone());
        async move { click_answering(&origin, TEAM, user, "approve", &value, Some(&url)).await }
    };
    // An unlinked user, told why where Slack shows it.
    let (status, said) = post("UNOBODY", format!("{}/responses/T1/1", stand_in.origin)).await;
    assert_eq!((status, said["decided"].clone()), (200, json!(false)));
    // A response URL elsewhere is never called, whatever the click says.
    post("UCAROL", format!("{}/elsewhere/T1/2", stand_in.origin)).await;
    let started = Instant::now();
    while stand_in.responses.lock().expect("responses").is_empty() {
        assert!(started.elapsed() < PATIENCE, "nobody was told");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The second click's response would have come by now too.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let responses = stand_in.responses.lock().expect("responses").clone();
    assert_eq!(responses.len(), 1, "{responses:?}");
    let (path, told) = &responses[0];
    assert_eq!(path, "/responses/T1/1");
    assert_eq!(told["response_type"], "ephemeral");
    assert!(
        told["text"]
            .as_str()
            .unwrap_or_default()
            .contains("not linked to an approver"),
        "{told}"
    );
}

on_both_stores!(
    a_refused_user_is_told_why_through_slacks_response_url_and_no_other_is_called,
    a_shared_channel_gets_one_message_and_only_a_linked_approvers_click_decides,
    the_slack_message_says_what_became_of_the_approved_call,
    crew_inbox_serve_sends_to_slack_and_takes_its_clicks,
    a_question_goes_to_linked_approvers_in_scope_and_a_signed_click_decides_it,
    no_forged_stale_replayed_or_misdirected_click_decides_anything,
    slacks_rate_limit_is_honored_and_nobody_is_messaged_twice,
    slack_down_leaves_the_question_waiting_in_the_inbox,
);

#[tokio::test]
async fn a_slack_token_never_shows_and_only_a_bot_token_is_taken() {
    let dir = tempfile::tempdir().expect("a directory");
    let store = Store::connect(&format!("sqlite://{}", dir.path().join("s.db").display()))
        .await
        .expect("a store");
    let slack = Slack::new(store.clone(), "ops", TEAM, TOKEN).expect("a channel");
    assert!(!format!("{slack:?}").contains("standin"));
    for bad in [
        "xoxp-user-credential-1",
        "not-a-bot-credential",
        "xoxb- spaced",
    ] {
        let error = Slack::new(store.clone(), "ops", TEAM, bad).expect_err("refused");
        assert!(!error.to_string().contains(bad), "{error}");
    }
    assert!(Slack::new(store, "ops", "not a team", TOKEN).is_err());
}

#[tokio::test]
async fn crew_inbox_links_and_unlinks_a_slack_user() {
    let dir = tempfile::tempdir().expect("a directory");
    let url = format!("sqlite://{}", dir.path().join("s.db").display());
    let store = Store::connect(&url).await.expect("a store");
    store
        .add_approver("alice", None, ApproverScope::everything())
        .await
        .expect("an approver");
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_crew-inbox"))
            .args(args)
            .args(["--store", &url])
            .output()
            .expect("crew-inbox runs")
    };
    let identity = SlackIdentity::new(TEAM, "UALICE");
    let linked = run(&["link-slack", "alice", TEAM, "UALICE"]);
    assert!(linked.status.success(), "{linked:?}");
    let approver = store.slack_approver(&identity).await.expect("reads");
    assert_eq!(
        approver.map(|approver| approver.name).as_deref(),
        Some("alice")
    );
    let unknown = run(&["link-slack", "mallory", TEAM, "UMAL"]);
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("mallory"));
    let malformed = run(&["link-slack", "alice", TEAM, "U <script>"]);
    assert!(!malformed.status.success());
    let unlinked = run(&["unlink-slack", TEAM, "UALICE"]);
    assert!(unlinked.status.success(), "{unlinked:?}");
    assert!(
        store
            .slack_approver(&identity)
            .await
            .expect("reads")
            .is_none()
    );
    // A disabled approver's link decides nothing.
    run(&["link-slack", "alice", TEAM, "UALICE"]);
    store.disable_approver("alice").await.expect("disabled");
    assert!(
        store
            .slack_approver(&identity)
            .await
            .expect("reads")
            .is_none()
    );
}

#[tokio::test]
async fn an_endless_answer_from_slack_is_not_read_whole_and_the_question_waits() {
    let dir = tempfile::tempdir().expect("a directory");
    let store = Store::connect(&format!("sqlite://{}", dir.path().join("s.db").display()))
        .await
        .expect("a store");
    approvers(&store).await;
    // 4 MiB of padding around "ok": true.
    let huge = format!(
        r#"{{"ok": true, "channel": "D1", "ts": "1", "pad": "{}"}}"#,
        "x".repeat(4 << 20)
    );
    let router = axum::Router::new().route(
        "/api/{method}",
        axum::routing::post(move || {
            let huge = huge.clone();
            async move { huge }
        }),
    );
    let api = format!("{}/api/", channels::serve(router).await);
    let slack = Slack::new(store.clone(), "ops-slack", TEAM, TOKEN)
        .expect("a Slack channel")
        .api_base(&api)
        .expect("a base");
    let announcer = Announcer::new(store.clone()).channel(slack);
    announcer.register().await.expect("named");
    let _waiting = ask(&store);
    let question = pending(&store).await;
    assert_eq!(announcer.deliver_due().await.expect("a pass"), 0);
    let told = store.announcements(&question.id).await.expect("reads");
    let error = told[0].last_error.clone().expect("why");
    assert!(error.contains("larger than"), "{error}");
    assert_eq!(told[0].told, None);
}

async fn a_shared_channel_gets_one_message_and_only_a_linked_approvers_click_decides(
    store: Store,
    _keep: Keep,
) {
    let stand_in = SlackStandIn::start().await;
    approvers(&store).await;
    let slack = Slack::new(store.clone(), "ops-room", TEAM, TOKEN)
        .expect("a Slack channel")
        .api_base(&stand_in.api)
        .expect("the stand-in")
        .shared_channel("C024BE91L");
    let announcer = Announcer::new(store.clone()).channel(slack);
    announcer.register().await.expect("named");
    let origin = serve_inbox(&store).await;
    let waiting = ask(&store);
    pending(&store).await;
    assert_eq!(announcer.deliver_due().await.expect("a pass"), 1);
    let posted = stand_in.calls("chat.postMessage");
    // Once, in the channel: not a message per approver.
    assert_eq!(posted.len(), 1, "{posted:?}");
    assert_eq!(posted[0]["channel"], "C024BE91L");
    let value = approve_value(&posted[0]);
    // Anyone in the channel may click; an unlinked member decides nothing.
    let (_, said) = click(&origin, TEAM, "UNOBODY", "approve", &value).await;
    assert_eq!(said["decided"], json!(false), "{said}");
    alice_approves(&origin, &value).await;
    assert_eq!(
        answered(waiting).await.answered_by.as_deref(),
        Some("alice")
    );
}
