//! Approvals by e-mail (SPEC §14): a question is mailed over SMTP, to each
//! approver with an address whose scope covers it, with a signed link for
//! that approver alone; the link, opened in a real browser, asks to
//! confirm and decides once. An SMTP server that refuses or is not there
//! never blocks or answers anything: the question waits in the inbox.
//! Each scenario runs on a real SQLite file and a real PostgreSQL, against
//! a local SMTP server (`support/smtp.rs`).

#[path = "support/channels.rs"]
mod channels;
#[path = "support/smtp.rs"]
mod smtp;
#[path = "support/stores.rs"]
mod stores;
mod support;

use std::time::Duration;

use channels::{PATIENCE, Waiting, answered};
use crew_runtime::channels::{Announcer, Email};
use crew_runtime::inbox::{Inbox, LinkKeys};
use crew_runtime::store::{ApproverScope, Question, QuestionStatus, Store, StoreApprovals};
use smtp::SmtpServer;
use stores::{Keep, on_both_stores};

const KEYS: &str = "k1 q8vN0o3bHh3XU6mCw0d2kUeUq7SQXnGkd1r5n8E3Z1I=\n";
const PASSWORD: &str = "correct horse battery staple";
const FROM: &str = "Approvals <approvals@example.com>";

fn keys() -> LinkKeys {
    LinkKeys::parse(KEYS).expect("keys")
}

/// alice may answer everything (with a password, for the browser), bob
/// only `other_tool`, carol (the requester) everything, dave everything
/// but has no address.
async fn approvers(store: &Store) {
    for (name, scope, address) in [
        (
            "alice",
            ApproverScope::everything(),
            Some("alice@example.com"),
        ),
        (
            "bob",
            ApproverScope::everything().tools(["other_tool"]),
            Some("bob@example.com"),
        ),
        (
            "carol",
            ApproverScope::everything(),
            Some("carol@example.com"),
        ),
        ("dave", ApproverScope::everything(), None),
    ] {
        let password = (name == "alice").then_some(PASSWORD);
        store
            .add_approver(name, password, scope)
            .await
            .expect("an approver");
        store
            .set_approver_email(name, address)
            .await
            .expect("an address");
    }
}

/// An announcer with the e-mail channel sending through `server`, linking
/// to the inbox at `origin`; a failure is tried again after 100 ms.
fn email(store: &Store, server: &SmtpServer, origin: &str) -> Announcer {
    let email = Email::new(
        store.clone(),
        "ops-mail",
        &server.url(),
        FROM,
        origin,
        keys(),
    )
    .expect("an e-mail channel");
    Announcer::new(store.clone()).channel(email).retry(
        Duration::from_millis(100),
        Duration::from_millis(100),
        5,
    )
}

/// The inbox serving signed links, on loopback: its origin.
async fn serve_inbox(store: &Store) -> String {
    channels::serve(Inbox::new(store.clone()).link_keys(keys()).router()).await
}

fn ask(store: &Store) -> Waiting {
    channels::ask(&StoreApprovals::new(store.clone()))
}

async fn pending(store: &Store) -> Question {
    channels::pending(store, 1).await.remove(0)
}

async fn status_of(store: &Store, question: &Question) -> QuestionStatus {
    store
        .question(&question.id)
        .await
        .expect("reads")
        .expect("there")
        .status
}

/// The token of a link `…/links/TOKEN`.
fn token_of(link: &str) -> &str {
    link.rsplit_once("/links/").expect("a link").1
}

/// Posts the link's confirmation as `session` (cookie, CSRF token).
async fn confirm(origin: &str, token: &str, session: &(String, String)) -> (u16, String) {
    confirm_from(origin, origin, token, session).await
}

/// [`confirm`] to the inbox at `served`, from a page of `origin` (the
/// public origin a browser would be on).
async fn confirm_from(
    served: &str,
    origin: &str,
    token: &str,
    session: &(String, String),
) -> (u16, String) {
    channels::post_link(served, origin, token, "approve", Some(session)).await
}

async fn a_question_is_emailed_to_approvers_in_scope_with_a_link_that_decides_once(
    store: Store,
    _keep: Keep,
) {
    let server = SmtpServer::start().await;
    approvers(&store).await;
    let origin = serve_inbox(&store).await;
    let announcer = email(&store, &server, &origin);
    announcer.register().await.expect("named");
    let waiting = ask(&store);
    let question = pending(&store).await;

    assert_eq!(announcer.deliver_due().await.expect("a pass"), 1);
    let mails = server.received();
    // Only alice: bob's scope does not cover `refund`, carol asked, dave
    // has no address.
    assert_eq!(mails.len(), 1, "{mails:?}");
    let mail = &mails[0];
    assert_eq!(mail.to, ["alice@example.com"]);
    assert_eq!(mail.from, "approvals@example.com");
    assert_eq!(
        mail.header("Subject").as_deref(),
        Some("Approval asked: refund")
    );
    let body = mail.body();
    assert!(
        body.contains("A-17") && body.contains("Support") && body.contains("carol"),
        "{body}"
    );
    assert!(
        body.contains(&format!("{origin}/questions/{}", question.id)),
        "{body}"
    );
    let link = mail.link();
    assert!(link.starts_with(&format!("{origin}/links/")), "{link}");

    // The link is alice's: opened by bob, signed in, it decides nothing.
    let bob = store
        .create_session("bob", Duration::from_secs(3600))
        .await
        .expect("a session");
    let (status, _) = confirm(&origin, token_of(&link), &bob).await;
    assert_eq!(status, 404);
    assert_eq!(status_of(&store, &question).await, QuestionStatus::Pending);

    let alice = store
        .create_session("alice", Duration::from_secs(3600))
        .await
        .expect("a session");
    let (status, page) = confirm(&origin, token_of(&link), &alice).await;
    assert_eq!(status, 200, "{page}");
    let answer = answered(waiting).await;
    assert_eq!(answer.answered_by.as_deref(), Some("alice"));
    let recorded = store
        .question(&question.id)
        .await
        .expect("reads")
        .expect("there")
        .answer
        .expect("answered");
    assert_eq!(recorded.via.as_deref(), Some("link"));
    // Once.
    let (status, _) = confirm(&origin, token_of(&link), &alice).await;
    assert_eq!(status, 404);

    // An e-mail cannot be taken back: nothing more is sent once decided.
    assert_eq!(announcer.deliver_due().await.expect("a pass"), 1);
    assert_eq!(server.received().len(), 1);
}

/// The element `css` once the page shows it.
async fn shown(client: &fantoccini::Client, css: &str) -> fantoccini::elements::Element {
    client
        .wait()
        .at_most(PATIENCE)
        .for_element(fantoccini::Locator::Css(css))
        .await
        .unwrap_or_else(|error| panic!("{css} never showed up: {error}"))
}

async fn the_emailed_link_decides_in_a_real_browser(store: Store, _keep: Keep) {
    use fantoccini::Locator;
    let Some(browser) = support::browser().await else {
        return;
    };
    let server = SmtpServer::start().await;
    approvers(&store).await;
    let origin = serve_inbox(&store).await;
    let announcer = email(&store, &server, &origin);
    announcer.register().await.expect("named");
    let waiting = ask(&store);
    let question = pending(&store).await;
    announcer.deliver_due().await.expect("a pass");
    let link = server.wait_for(1).await[0].link();

    let client = browser.client();
    // Opened before signing in: it asks to sign in, and decides nothing.
    client.goto(&link).await.expect("opens the link");
    shown(client, ".link-sign-in").await;
    assert_eq!(status_of(&store, &question).await, QuestionStatus::Pending);

    support::sign_in(client, &origin, "alice", PASSWORD).await;
    shown(client, "#no-pending, .question").await;
    client.goto(&link).await.expect("opens the link again");
    let arguments = shown(client, "pre.arguments").await.text().await;
    let arguments = arguments.expect("its text");
    assert!(arguments.contains("A-17"), "{arguments}");
    // Opening it, twice, decided nothing.
    assert_eq!(status_of(&store, &question).await, QuestionStatus::Pending);
    client
        .find(Locator::Css("button.approve"))
        .await
        .expect("an Approve button")
        .click()
        .await
        .expect("clicks");
    let done = shown(client, ".link-done")
        .await
        .text()
        .await
        .expect("its text");
    assert!(done.to_lowercase().contains("approved"), "{done}");
    let answer = answered(waiting).await;
    assert_eq!(answer.answered_by.as_deref(), Some("alice"));
}

async fn an_smtp_server_refusing_leaves_the_question_waiting_and_nobody_is_mailed_twice(
    store: Store,
    _keep: Keep,
) {
    let server = SmtpServer::start().await;
    approvers(&store).await;
    store
        .add_approver("erin", None, ApproverScope::everything())
        .await
        .expect("an approver");
    store
        .set_approver_email("erin", Some("erin@example.com"))
        .await
        .expect("an address");
    let (bus, failures) = channels::failure_bus();
    let origin = serve_inbox(&store).await;
    let announcer = email(&store, &server, &origin).events(bus);
    announcer.register().await.expect("named");
    server.refuse_recipient("erin@example.com");
    let waiting = ask(&store);
    let question = pending(&store).await;

    // erin's mailbox is refused, alice's is not.
    assert_eq!(announcer.deliver_due().await.expect("a pass"), 0);
    assert_eq!(server.received().len(), 1);
    assert_eq!(server.received()[0].to, ["alice@example.com"]);
    let told = store.announcements(&question.id).await.expect("reads");
    let error = told[0].last_error.clone().expect("why");
    assert!(error.contains("erin") && error.contains("550"), "{error}");
    assert_eq!(failures.lock().expect("seen").len(), 1);
    assert_eq!(status_of(&store, &question).await, QuestionStatus::Pending);
    assert!(!waiting.is_finished());

    // Every message refused for now: still waiting.
    server.refuse_all_for_now(true);
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(announcer.deliver_due().await.expect("a pass"), 0);
    assert_eq!(status_of(&store, &question).await, QuestionStatus::Pending);

    // Taken again: erin is mailed, alice not a second time.
    server.refuse_all_for_now(false);
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(announcer.deliver_due().await.expect("a pass"), 1);
    let mails = server.received();
    let to: Vec<&str> = mails.iter().map(|mail| mail.to[0].as_str()).collect();
    assert_eq!(to, ["alice@example.com", "erin@example.com"]);
    // Each link is its approver's own.
    assert_ne!(mails[0].link(), mails[1].link());
    // The question still waits for its answer in the inbox.
    assert_eq!(status_of(&store, &question).await, QuestionStatus::Pending);
    assert!(!waiting.is_finished());
}

async fn no_smtp_server_leaves_the_question_waiting_in_the_inbox(store: Store, _keep: Keep) {
    approvers(&store).await;
    // A port nobody listens on.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        listener.local_addr().expect("bound").port()
    };
    let origin = serve_inbox(&store).await;
    let email = Email::new(
        store.clone(),
        "ops-mail",
        &format!("smtp://127.0.0.1:{port}"),
        FROM,
        &origin,
        keys(),
    )
    .expect("an e-mail channel");
    let announcer = Announcer::new(store.clone()).channel(email);
    announcer.register().await.expect("named");
    let waiting = ask(&store);
    let question = pending(&store).await;
    assert_eq!(announcer.deliver_due().await.expect("a pass"), 0);
    let told = store.announcements(&question.id).await.expect("reads");
    let error = told[0].last_error.clone().expect("why");
    assert!(error.contains("alice"), "{error}");
    assert_eq!(status_of(&store, &question).await, QuestionStatus::Pending);
    // Answered in the inbox all the same.
    store
        .decide(
            &question.id,
            crew_runtime::store::Answer::new("alice", crew_runtime::store::Decision::Approve),
        )
        .await
        .expect("decided");
    assert_eq!(
        answered(waiting).await.answered_by.as_deref(),
        Some("alice")
    );
}

async fn crew_inbox_serve_emails_questions_with_signed_links(store: Store, keep: Keep) {
    let server = SmtpServer::start().await;
    let dir = tempfile::tempdir().expect("a directory");
    let smtp_url = dir.path().join("smtp-url");
    std::fs::write(&smtp_url, server.url()).expect("written");
    let key_file = dir.path().join("link-keys");
    std::fs::write(&key_file, KEYS).expect("written");
    store
        .add_approver("alice", None, ApproverScope::everything())
        .await
        .expect("an approver");
    // The address is set from the command line.
    let set = std::process::Command::new(env!("CARGO_BIN_EXE_crew-inbox"))
        .args([
            "set-email",
            "--store",
            &keep.url,
            "alice",
            "alice@example.com",
        ])
        .output()
        .expect("crew-inbox runs");
    assert!(
        set.status.success(),
        "{}",
        String::from_utf8_lossy(&set.stderr)
    );
    assert_eq!(
        store
            .approver_email("alice")
            .await
            .expect("reads")
            .as_deref(),
        Some("alice@example.com")
    );
    let inbox = support::serve_inbox(
        env!("CARGO_BIN_EXE_crew-inbox"),
        &keep.url,
        &[
            "--public-origin",
            "https://approvals.example.com",
            "--link-keys",
            &key_file.display().to_string(),
            "--email",
            &format!("ops-mail={FROM}"),
            "--smtp-url-file",
            &format!("ops-mail={}", smtp_url.display()),
        ],
    );
    let waiting = ask(&store);
    let question = pending(&store).await;
    let mail = server.wait_for(1).await.remove(0);
    let link = mail.link();
    assert!(
        link.starts_with("https://approvals.example.com/links/"),
        "{link}"
    );
    // The inbox behind the public origin takes the link.
    let alice = store
        .create_session("alice", Duration::from_secs(3600))
        .await
        .expect("a session");
    let (status, page) = confirm_from(
        &inbox.origin,
        "https://approvals.example.com",
        token_of(&link),
        &alice,
    )
    .await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(
        answered(waiting).await.answered_by.as_deref(),
        Some("alice")
    );
    assert_eq!(status_of(&store, &question).await, QuestionStatus::Approved);
}

on_both_stores!(
    a_question_is_emailed_to_approvers_in_scope_with_a_link_that_decides_once,
    the_emailed_link_decides_in_a_real_browser,
    an_smtp_server_refusing_leaves_the_question_waiting_and_nobody_is_mailed_twice,
    no_smtp_server_leaves_the_question_waiting_in_the_inbox,
    crew_inbox_serve_emails_questions_with_signed_links,
);

#[tokio::test]
async fn an_smtp_password_never_shows() {
    let dir = tempfile::tempdir().expect("a directory");
    let store = Store::connect(&format!("sqlite://{}", dir.path().join("s.db").display()))
        .await
        .expect("a store");
    let email = Email::new(
        store.clone(),
        "ops-mail",
        "smtp://approvals:hunter22@127.0.0.1:2525",
        FROM,
        "https://approvals.example.com",
        keys(),
    )
    .expect("an e-mail channel");
    let shown = format!("{email:?}");
    assert!(
        !shown.contains("hunter22") && !shown.contains("q8vN0"),
        "{shown}"
    );
    let error = Email::new(
        store,
        "ops-mail",
        "smtp://approvals:hunter22@mail.example.com:25",
        FROM,
        "https://approvals.example.com",
        keys(),
    )
    .expect_err("a password in the clear");
    assert!(!error.to_string().contains("hunter22"), "{error}");
}
