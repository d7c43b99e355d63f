//! The approval inbox in a real browser (SPEC §11): headless Chromium,
//! driven over WebDriver, against the inbox served on 127.0.0.1 on a
//! temporary SQLite store, with a real crew waiting for the answers.
//!
//! An approver signs in, sees a call appear without reloading, approves it
//! and the crew goes on; denies one; edits one's arguments and the tool
//! runs with the edit; edits one's path where a guard refuses it, and the
//! history shows the refusal. A wrong password, a forged cross-site POST
//! and an answer to an expired question are refused. Screenshots of the
//! inbox are written under the target directory (never into the
//! repository).
//!
//! Where Chromium or chromedriver is missing, each test says so loudly and
//! checks nothing; CI installs them and sets `CREW_REQUIRE_SERVICES=1`, so
//! there they fail instead.

mod common;
mod drafts_crew;
mod support;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use crew_runtime::guards::ApprovalGate;
use crew_runtime::inbox::Inbox;
use crew_runtime::prelude::*;
use crew_runtime::store::{ApproverScope, Question, QuestionStatus, Store, StoreApprovals};
use crew_runtime::{HumanInputRequest, HumanInputSource, ToolAnnotations};
use fantoccini::{Client, Locator};

const PASSWORD: &str = "correct horse battery";
/// How long a test waits for what must happen.
const PATIENCE: Duration = Duration::from_secs(30);

/// The inbox served on a fresh store, with the approver `alice`.
struct Served {
    store: Store,
    origin: String,
    _dir: tempfile::TempDir,
}

async fn serve() -> Served {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = format!("sqlite://{}", dir.path().join("approvals.db").display());
    let store = Store::connect(&url).await.expect("the store opens");
    store
        .add_approver("alice", Some(PASSWORD), ApproverScope::everything())
        .await
        .expect("alice is an approver");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let origin = format!("http://{}", listener.local_addr().expect("an address"));
    let inbox = Inbox::new(store.clone()).public_origin(origin.clone());
    tokio::spawn(inbox.serve(listener));
    Served {
        store,
        origin,
        _dir: dir,
    }
}

async fn sign_in(client: &Client, origin: &str, password: &str) {
    support::sign_in(client, origin, "alice", password).await;
}

/// Waits for the element `css` to show up on the current page.
async fn wait_for(client: &Client, css: &str) -> fantoccini::elements::Element {
    client
        .wait()
        .at_most(PATIENCE)
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|error| panic!("{css} never showed up: {error}"))
}

/// A refund crew for `carol` asking through `store`; returns its kickoff
/// on a task of its own and the log of the arguments the tool ran with.
fn refund_kickoff(
    store: &Store,
    amount: u64,
) -> (
    tokio::task::JoinHandle<Result<CrewOutput, CrewError>>,
    Log<Value>,
) {
    refund_kickoff_through(
        store,
        amount,
        ApprovalGate::for_capabilities([Capability::Destructive]),
    )
}

/// [`refund_kickoff`], asking through `gate`.
fn refund_kickoff_through(
    store: &Store,
    amount: u64,
    gate: ApprovalGate,
) -> (
    tokio::task::JoinHandle<Result<CrewOutput, CrewError>>,
    Log<Value>,
) {
    let ran: Log<Value> = log();
    let sink = ran.clone();
    let refund = Tool::dynamic(
        "refund",
        "Refunds an order",
        json!({
            "type": "object",
            "properties": {"order": {"type": "string"}, "amount": {"type": "integer", "maximum": 500}},
            "required": ["order", "amount"],
            "additionalProperties": false
        }),
        move |args| {
            push(&sink, args.clone());
            Ok::<_, String>(json!("refunded"))
        },
    )
    .with_annotations(ToolAnnotations::new().destructive(true));
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("refund", json!({"order": "A-17", "amount": amount}))
            .answer("done"),
    );
    let support = agent("Support", vec![refund], &llm);
    let crew = Crew::builder()
        .name("support-desk")
        .agent(support.clone())
        .task(Task::builder("Handle the ticket").agent(&support).build())
        .global_registry(fresh_registry())
        .human_input(Arc::new(StoreApprovals::new(store.clone())))
        .human_input_timeout(Duration::from_secs(120))
        .async_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("approval-gate"),
            gate.pre_hook(),
        )
        .build()
        .expect("the crew builds")
        .for_user("carol");
    (tokio::spawn(async move { crew.kickoff(()).await }), ran)
}

/// The one question pending in `store`, once there is one.
async fn the_pending_question(store: &Store) -> Question {
    let started = std::time::Instant::now();
    loop {
        let mut pending = store.pending().await.expect("lists");
        if pending.len() == 1 {
            return pending.remove(0);
        }
        assert!(started.elapsed() < PATIENCE, "{} pending", pending.len());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The row of question `id` once the page shows it.
async fn row_of(client: &Client, id: &str) -> fantoccini::elements::Element {
    wait_for(client, &format!("li.question[data-question-id=\"{id}\"]")).await
}

async fn finished(kickoff: tokio::task::JoinHandle<Result<CrewOutput, CrewError>>) -> CrewOutput {
    tokio::time::timeout(PATIENCE, kickoff)
        .await
        .expect("the crew goes on once answered")
        .expect("the kickoff does not panic")
        .expect("the kickoff ends well")
}

/// Whether the page is still the one this test marked (no reload since).
async fn still_the_same_page(client: &Client) -> bool {
    client
        .execute("return window.__crewTestMarker === 42;", vec![])
        .await
        .expect("runs a script")
        .as_bool()
        .unwrap_or(false)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approver_signs_in_and_approves_denies_and_edits_calls_as_they_appear() {
    let Some(browser) = support::browser().await else {
        return;
    };
    let client = browser.client();
    let served = serve().await;
    sign_in(client, &served.origin, PASSWORD).await;
    wait_for(client, "#no-pending:not([hidden])").await;
    client
        .execute("window.__crewTestMarker = 42; return null;", vec![])
        .await
        .expect("marks the page");

    // 1. A call appears without a reload; approving it lets the crew go on.
    let (kickoff, ran) = refund_kickoff(&served.store, 120);
    let question = the_pending_question(&served.store).await;
    let row = row_of(client, &question.id).await;
    assert!(still_the_same_page(client).await, "the page was reloaded");
    let shown = row.text().await.expect("the row's text");
    for fact in ["refund", "Support", "carol", "support-desk", "A-17", "120"] {
        assert!(shown.contains(fact), "{fact} is not shown in {shown:?}");
    }
    let screenshot = browser.screenshot("inbox_pending_refund").await;
    assert!(screenshot.exists());
    row.find(Locator::Css("button.approve"))
        .await
        .expect("an approve button")
        .click()
        .await
        .expect("approves");
    finished(kickoff).await;
    assert_eq!(take(&ran), vec![json!({"order": "A-17", "amount": 120})]);
    let answered = served
        .store
        .question(&question.id)
        .await
        .expect("reads")
        .expect("kept");
    assert_eq!(answered.status, QuestionStatus::Approved);
    assert_eq!(
        answered.answer.map(|answer| answer.approver),
        Some("alice".to_owned())
    );

    // 2. Denied with a comment: the tool never runs.
    client
        .goto(&format!("{}/", served.origin))
        .await
        .expect("back to the list");
    let (kickoff, ran) = refund_kickoff(&served.store, 480);
    let question = the_pending_question(&served.store).await;
    let row = row_of(client, &question.id).await;
    row.find(Locator::Css("input.comment"))
        .await
        .expect("a comment field")
        .send_keys("above the refund policy")
        .await
        .expect("types a comment");
    row.find(Locator::Css("button.deny"))
        .await
        .expect("a deny button")
        .click()
        .await
        .expect("denies");
    finished(kickoff).await;
    assert!(take(&ran).is_empty(), "a denied refund ran");
    let denied = served
        .store
        .question(&question.id)
        .await
        .expect("reads")
        .expect("kept");
    assert_eq!(denied.status, QuestionStatus::Denied);
    assert_eq!(
        denied.answer.and_then(|answer| answer.comment),
        Some("above the refund policy".to_owned())
    );

    // 3. Edited: the tool receives the edit.
    client
        .goto(&format!("{}/", served.origin))
        .await
        .expect("back to the list");
    let (kickoff, ran) = refund_kickoff(&served.store, 450);
    let question = the_pending_question(&served.store).await;
    let row = row_of(client, &question.id).await;
    row.find(Locator::Css("details.edit-details > summary"))
        .await
        .expect("the edit section")
        .click()
        .await
        .expect("opens the edit section");
    let arguments = row
        .find(Locator::Css("textarea.edit-arguments"))
        .await
        .expect("the arguments");
    arguments.clear().await.expect("clears the arguments");
    arguments
        .send_keys(r#"{"order": "A-17", "amount": 45}"#)
        .await
        .expect("types the edit");
    row.find(Locator::Css("button.edit"))
        .await
        .expect("an edit button")
        .click()
        .await
        .expect("approves the edit");
    finished(kickoff).await;
    assert_eq!(take(&ran), vec![json!({"order": "A-17", "amount": 45})]);

    // The history page shows all three.
    client
        .goto(&format!("{}/history", served.origin))
        .await
        .expect("the history page");
    let history = wait_for(client, "table#history")
        .await
        .text()
        .await
        .expect("the history's text");
    for decision in ["approve", "deny", "edit", "above the refund policy"] {
        assert!(history.contains(decision), "{decision} missing: {history}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_shows_why_the_call_is_asked_and_the_call_without_the_terminals_wording() {
    let Some(browser) = support::browser().await else {
        return;
    };
    let client = browser.client();
    let served = serve().await;
    sign_in(client, &served.origin, PASSWORD).await;
    wait_for(client, "#no-pending:not([hidden])").await;
    // Worded for a terminal, as a policy's @ask is: backticks, "(yes/no)".
    let gate = ApprovalGate::for_capabilities([Capability::Destructive])
        .prompt(|ctx| {
            format!(
                "Refunds above 100 EUR need a second pair of eyes\nAllow `{}` for {}? (yes/no)",
                ctx.tool_name(),
                ctx.agent_role().unwrap_or("the agent")
            )
        })
        .message("yes/no");
    let (kickoff, ran) = refund_kickoff_through(&served.store, 300, gate);
    let question = the_pending_question(&served.store).await;
    let row = row_of(client, &question.id).await;
    let shown = row.text().await.expect("the row's text");
    assert!(
        shown.contains("Refunds above 100 EUR need a second pair of eyes"),
        "the reason is not shown: {shown:?}"
    );
    for fact in ["refund", "Support", "Handle the ticket", "A-17", "300"] {
        assert!(shown.contains(fact), "{fact} is not shown in {shown:?}");
    }
    assert!(!shown.contains('`'), "backticks on the card: {shown:?}");
    assert!(
        !shown.contains("(yes/no)"),
        "terminal wording on the card: {shown:?}"
    );
    browser.screenshot("inbox_card_reason").await;
    row.find(Locator::Css("button.approve"))
        .await
        .expect("an approve button")
        .click()
        .await
        .expect("approves");
    finished(kickoff).await;
    assert_eq!(take(&ran), vec![json!({"order": "A-17", "amount": 300})]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_is_refused_in_the_browser() {
    let Some(browser) = support::browser().await else {
        return;
    };
    let client = browser.client();
    let served = serve().await;
    sign_in(client, &served.origin, "not the password").await;
    let error = wait_for(client, "#login-error")
        .await
        .text()
        .await
        .expect("the error's text");
    assert!(!error.is_empty());
    // Still signed out: the list is not reachable.
    client
        .goto(&format!("{}/", served.origin))
        .await
        .expect("asks for the list");
    wait_for(client, "form#login-form").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_cross_site_post_approves_nothing() {
    let Some(browser) = support::browser().await else {
        return;
    };
    let client = browser.client();
    let served = serve().await;
    sign_in(client, &served.origin, PASSWORD).await;
    wait_for(client, "#pending").await;
    let (kickoff, ran) = refund_kickoff(&served.store, 120);
    let question = the_pending_question(&served.store).await;

    // Another site, on another origin, posts an approval from the same
    // browser, which holds alice's session.
    let attacker = tiny_http::Server::http("127.0.0.1:0").expect("the other site");
    let attacker_port = attacker.server_addr().to_ip().expect("an ip").port();
    let page = format!(
        r#"<!doctype html><html><body>
        <form id="forged" method="post" action="{}/questions/{}/decision">
          <input name="decision" value="approve"><input name="csrf" value="guessed">
        </form>
        <script>document.getElementById("forged").submit();</script>
        </body></html>"#,
        served.origin, question.id
    );
    let site = std::thread::spawn(move || {
        if let Ok(request) = attacker.recv() {
            let header =
                tiny_http::Header::from_bytes("Content-Type", "text/html").expect("a header");
            let _ = request.respond(tiny_http::Response::from_string(page).with_header(header));
        }
    });
    client
        .goto(&format!("http://127.0.0.1:{attacker_port}/"))
        .await
        .expect("visits the other site");
    // The forged form went out: wait until the browser left the other site.
    let started = std::time::Instant::now();
    while client
        .current_url()
        .await
        .expect("a url")
        .port()
        .is_some_and(|port| port == attacker_port)
    {
        assert!(started.elapsed() < PATIENCE, "the forged form never left");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    site.join().expect("the other site ends");

    let still = served
        .store
        .question(&question.id)
        .await
        .expect("reads")
        .expect("kept");
    assert_eq!(
        still.status,
        QuestionStatus::Pending,
        "a forged POST answered"
    );
    assert!(take(&ran).is_empty());
    kickoff.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_to_an_expired_question_is_refused_in_the_browser() {
    let Some(browser) = support::browser().await else {
        return;
    };
    let client = browser.client();
    let served = serve().await;
    sign_in(client, &served.origin, PASSWORD).await;
    wait_for(client, "#pending").await;

    // Asked straight through the store with a short deadline; the page
    // keeps showing it, marked expired, after the deadline.
    let mut request = HumanInputRequest::new("Refund?", "yes/no")
        .with_call_id("call_1")
        .with_tool("refund", json!({"order": "A-17", "amount": 120}));
    request.timeout = Some(Duration::from_secs(3));
    request.requester = Some("carol".into());
    let approvals = StoreApprovals::new(served.store.clone());
    let waiting = tokio::spawn(async move { approvals.answer(request).await });
    let question = the_pending_question(&served.store).await;
    let row = row_of(client, &question.id).await;
    wait_for(
        client,
        &format!("li.question.expired[data-question-id=\"{}\"]", question.id),
    )
    .await;
    row.find(Locator::Css("button.approve"))
        .await
        .expect("the stale approve button")
        .click()
        .await
        .expect("tries to approve");
    let message = wait_for(client, "#error-message")
        .await
        .text()
        .await
        .expect("the refusal's text");
    assert!(message.contains("deadline"), "{message}");
    let expired = served
        .store
        .question(&question.id)
        .await
        .expect("reads")
        .expect("kept");
    assert_eq!(expired.status, QuestionStatus::Expired);
    assert!(expired.answer.is_none(), "nothing was approved");
    assert_eq!(
        served
            .store
            .refusals(&question.id)
            .await
            .expect("reads")
            .len(),
        1,
        "the late answer is recorded"
    );
    waiting.abort();
}

/// The value of the edit box of `row`, once opening it has filled it with
/// the arguments shown.
async fn edit_box_of(
    row: &fantoccini::elements::Element,
) -> (fantoccini::elements::Element, String) {
    row.find(Locator::Css("details.edit-details > summary"))
        .await
        .expect("the edit section")
        .click()
        .await
        .expect("opens the edit section");
    let area = row
        .find(Locator::Css("textarea.edit-arguments"))
        .await
        .expect("the edit box");
    let started = std::time::Instant::now();
    loop {
        let value = area
            .prop("value")
            .await
            .expect("reads the edit box")
            .unwrap_or_default();
        if !value.is_empty() {
            return (area, value);
        }
        assert!(started.elapsed() < PATIENCE, "the edit box stays empty");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// SPEC §11 "Under attack": an approver's edit goes through the guards
// that ran before the question, and the history tells the approver it
// was refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_a_guard_refuses_is_shown_in_the_history() {
    let Some(browser) = support::browser().await else {
        return;
    };
    let client = browser.client();
    let served = serve().await;
    sign_in(client, &served.origin, PASSWORD).await;
    wait_for(client, "#no-pending:not([hidden])").await;
    let mut kickoff = drafts_crew::kickoff(
        &served.store,
        json!({"path": "drafts/a.md", "content": "notes", "token": drafts_crew::TOKEN}),
    );
    let question = the_pending_question(&served.store).await;
    let row = row_of(client, &question.id).await;
    let card = row.text().await.expect("the row's text");
    assert!(card.contains("drafts/a.md"), "{card:?}");
    assert!(
        !card.contains(drafts_crew::TOKEN),
        "the card shows the secret"
    );

    // Alice changes the path in the edit box and leaves the rest as shown.
    let (area, shown) = edit_box_of(&row).await;
    assert!(
        !shown.contains(drafts_crew::TOKEN),
        "the edit box holds the secret"
    );
    let mut edit: Value = serde_json::from_str(&shown).expect("the edit box holds JSON");
    edit["path"] = json!("/etc/cron.d/evil");
    area.clear().await.expect("clears the edit box");
    area.send_keys(&edit.to_string())
        .await
        .expect("types the edit");
    row.find(Locator::Css("button.edit"))
        .await
        .expect("an approve-with-this-edit button")
        .click()
        .await
        .expect("approves the edit");
    kickoff.ended(PATIENCE).await;
    assert!(
        take(&kickoff.ran).is_empty(),
        "the edited call ran: {:?}",
        take(&kickoff.ran)
    );

    // Once the call has told what became of it, the history says so.
    let started = std::time::Instant::now();
    while served
        .store
        .question(&question.id)
        .await
        .expect("reads")
        .expect("kept")
        .outcome
        .is_none()
    {
        assert!(started.elapsed() < PATIENCE, "no outcome recorded");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    client
        .goto(&format!("{}/history", served.origin))
        .await
        .expect("the history page");
    let summary = wait_for(
        client,
        &format!(
            "tr.history-row[data-question-id=\"{}\"] td.summary",
            question.id
        ),
    )
    .await
    .text()
    .await
    .expect("the summary's text");
    assert!(
        summary.contains("refused by drafts-only"),
        "the refusal is not shown: {summary:?}"
    );
    assert!(
        summary.contains("/etc/cron.d/evil is outside drafts/"),
        "{summary:?}"
    );
    let history = wait_for(client, "table#history")
        .await
        .text()
        .await
        .expect("the history's text");
    assert!(
        !history.contains(drafts_crew::TOKEN),
        "the history shows the secret"
    );
    let screenshot = browser.screenshot("inbox_history_refused_edit").await;
    assert!(screenshot.exists());
}
