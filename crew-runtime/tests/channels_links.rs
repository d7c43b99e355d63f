//! Signed links (SPEC §14): a link decides its own question, at its own
//! revision, for its own approver, before its expiry, once; opening it
//! never decides; a dead link says nothing of why. Every scenario runs on
//! a real SQLite file and a real PostgreSQL.

#[path = "support/channels.rs"]
mod channels;
#[path = "support/stores.rs"]
mod stores;
mod support;

use std::time::{Duration, SystemTime};

use channels::{Waiting, answered, ask, pending};
use crew_runtime::inbox::{Inbox, LinkKeys};
use crew_runtime::store::{
    Answer, ApproverScope, Decision, Question, QuestionStatus, Store, StoreApprovals,
};
use stores::{Keep, on_both_stores};

const KEYS: &str = "k2 q8vN0o3bHh3XU6mCw0d2kUeUq7SQXnGkd1r5n8E3Z1I=\n\
                    k1 9dS8c2VjcmV0LWtleS1mb3ItdGVzdHMtb25seS0xMjM0NTY=\n";

/// What a test works with: the inbox's origin, the question, the call
/// waiting for it, and the keys.
struct Setup {
    origin: String,
    question: Question,
    waiting: Waiting,
    keys: LinkKeys,
}

/// alice and bob may answer everything; carol asks. The inbox serves
/// links signed with [`KEYS`].
async fn setup(store: &Store) -> Setup {
    for name in ["alice", "bob"] {
        store
            .add_approver(name, None, ApproverScope::everything())
            .await
            .expect("an approver");
    }
    let keys = LinkKeys::parse(KEYS).expect("keys");
    let origin = channels::serve(Inbox::new(store.clone()).link_keys(keys.clone()).router()).await;
    let waiting = ask(&StoreApprovals::new(store.clone()));
    let question = pending(store, 1).await.remove(0);
    Setup {
        origin,
        question,
        waiting,
        keys,
    }
}

fn link_for(setup: &Setup, approver: &str) -> String {
    setup
        .keys
        .issue(
            &setup.question,
            approver,
            SystemTime::now() + Duration::from_secs(3600),
        )
        .expect("a link")
}

/// A session of `name`: its cookie's value and its CSRF token.
async fn session(store: &Store, name: &str) -> (String, String) {
    store
        .create_session(name, Duration::from_secs(3600))
        .await
        .expect("a session")
}

async fn open(origin: &str, token: &str, session: Option<&(String, String)>) -> (u16, String) {
    let mut request = reqwest::Client::new().get(format!("{origin}/links/{token}"));
    if let Some((cookie, _)) = session {
        request = request.header("cookie", format!("crew_inbox_session={cookie}"));
    }
    let response = request.send().await.expect("the inbox answers");
    let status = response.status().as_u16();
    (status, response.text().await.expect("a page"))
}

async fn decide(
    origin: &str,
    token: &str,
    decision: &str,
    session: Option<&(String, String)>,
) -> (u16, String) {
    channels::post_link(origin, origin, token, decision, session).await
}

async fn status_of(store: &Store, question: &Question) -> QuestionStatus {
    store
        .question(&question.id)
        .await
        .expect("reads")
        .expect("there")
        .status
}

async fn a_link_opens_a_confirmation_and_decides_once_for_its_signed_in_approver(
    store: Store,
    keep: Keep,
) {
    let setup = setup(&store).await;
    let token = link_for(&setup, "alice");
    let alice = session(&store, "alice").await;

    // Not signed in: asked to sign in. Signed in: the confirmation. Neither
    // decides.
    let (status, page) = open(&setup.origin, &token, None).await;
    assert_eq!(status, 401, "{page}");
    assert!(page.contains("Sign in first"), "{page}");
    let (status, page) = open(&setup.origin, &token, Some(&alice)).await;
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("A-17") && page.contains("link-form"),
        "{page}"
    );
    assert_eq!(
        status_of(&store, &setup.question).await,
        QuestionStatus::Pending
    );

    // Two replicas take the same decision at once: one decides.
    let other = Store::connect(&keep.url).await.expect("another handle");
    let second = channels::serve(Inbox::new(other).link_keys(setup.keys.clone()).router()).await;
    let (first, again) = tokio::join!(
        decide(&setup.origin, &token, "approve", Some(&alice)),
        decide(&second, &token, "approve", Some(&alice)),
    );
    let mut statuses = [first.0, again.0];
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 404], "{first:?} {again:?}");
    let answer = answered(setup.waiting).await;
    assert_eq!(answer.answered_by.as_deref(), Some("alice"));
    let decided = store
        .question(&setup.question.id)
        .await
        .expect("reads")
        .expect("there");
    assert_eq!(
        decided.answer.expect("recorded").via.as_deref(),
        Some("link")
    );
    // Used: dead everywhere.
    assert_eq!(open(&second, &token, Some(&alice)).await.0, 404);
}

async fn a_one_click_link_decides_without_a_sign_in_and_only_for_its_approver(
    store: Store,
    _keep: Keep,
) {
    let setup = setup(&store).await;
    store
        .set_one_click_links("alice", true)
        .await
        .expect("opted in");
    let alices = link_for(&setup, "alice");
    let bobs = link_for(&setup, "bob");
    // bob did not opt in: his link needs his sign-in.
    assert_eq!(decide(&setup.origin, &bobs, "deny", None).await.0, 404);
    // Another approver signed in cannot use alice's link.
    let bob = session(&store, "bob").await;
    assert_eq!(open(&setup.origin, &alices, Some(&bob)).await.0, 404);
    assert_eq!(
        decide(&setup.origin, &alices, "deny", Some(&bob)).await.0,
        404
    );
    // Opening it decides nothing; its form does.
    let (status, page) = open(&setup.origin, &alices, None).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(
        status_of(&store, &setup.question).await,
        QuestionStatus::Pending
    );
    let (status, page) = decide(&setup.origin, &alices, "deny", None).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("denied as alice"), "{page}");
    let answer = answered(setup.waiting).await;
    assert_eq!(answer.answered_by.as_deref(), Some("alice"));
}

async fn dead_links_decide_nothing_and_say_nothing_of_why(store: Store, _keep: Keep) {
    let setup = setup(&store).await;
    store
        .set_one_click_links("alice", true)
        .await
        .expect("opted in");
    store
        .set_one_click_links("bob", true)
        .await
        .expect("opted in");
    let mut dead: Vec<(&str, String)> = Vec::new();

    // Its MAC altered; its fields altered (each checked one by one in the
    // unit tests of the token).
    let token = link_for(&setup, "alice");
    let mut altered = token.clone();
    let last = altered.pop().expect("a character");
    altered.push(if last == 'A' { 'B' } else { 'A' });
    dead.push(("altered", altered));
    // Signed with a key the inbox does not have (rotated out).
    let elsewhere =
        LinkKeys::parse("k0 c2VjcmV0LWtleS1yb3RhdGVkLW91dC1vZi10aGUtaW5ib3g=").expect("a key");
    dead.push((
        "rotated out",
        elsewhere
            .issue(
                &setup.question,
                "alice",
                SystemTime::now() + Duration::from_secs(60),
            )
            .expect("a link"),
    ));
    // Its expiry passed (the question's own deadline bounds it too).
    dead.push((
        "expired",
        setup
            .keys
            .issue(
                &setup.question,
                "alice",
                SystemTime::now() - Duration::from_secs(1),
            )
            .expect("a link"),
    ));
    for (why, token) in &dead {
        assert_eq!(open(&setup.origin, token, None).await.0, 404, "{why}");
        let (status, page) = decide(&setup.origin, token, "approve", None).await;
        assert_eq!(status, 404, "{why}");
        assert!(page.contains("cannot decide anything"), "{why}: {page}");
    }

    // A revoked key: dead at once, although the inbox still holds it.
    let signed_by_k2 = link_for(&setup, "alice");
    store.revoke_link_key("k2").await.expect("revoked");
    assert_eq!(open(&setup.origin, &signed_by_k2, None).await.0, 404);

    // bob ended his links; bob's earlier link is dead. alice is disabled.
    let two_keys = LinkKeys::parse("k1 9dS8c2VjcmV0LWtleS1mb3ItdGVzdHMtb25seS0xMjM0NTY=")
        .expect("the other key");
    let bobs = two_keys
        .issue(
            &setup.question,
            "bob",
            SystemTime::now() + Duration::from_secs(60),
        )
        .expect("a link");
    tokio::time::sleep(Duration::from_millis(5)).await;
    store.end_links("bob").await.expect("ended");
    assert_eq!(open(&setup.origin, &bobs, None).await.0, 404, "ended");
    let alices = two_keys
        .issue(
            &setup.question,
            "alice",
            SystemTime::now() + Duration::from_secs(60),
        )
        .expect("a link");
    assert_eq!(open(&setup.origin, &alices, None).await.0, 200, "alive");
    store.disable_approver("alice").await.expect("disabled");
    assert_eq!(decide(&setup.origin, &alices, "approve", None).await.0, 404);
    assert_eq!(
        status_of(&store, &setup.question).await,
        QuestionStatus::Pending
    );

    // A link issued after bob ended his links works, until the question
    // changes: decided through another way, the link is dead.
    let fresh = two_keys
        .issue(
            &setup.question,
            "bob",
            SystemTime::now() + Duration::from_secs(60),
        )
        .expect("a link");
    assert_eq!(open(&setup.origin, &fresh, None).await.0, 200, "alive");
    store
        .decide(&setup.question.id, Answer::new("bob", Decision::Deny))
        .await
        .expect("decided in the inbox");
    assert_eq!(decide(&setup.origin, &fresh, "approve", None).await.0, 404);
    let answer = answered(setup.waiting).await;
    assert_eq!(answer.text, "no");
}

async fn a_link_is_alive_until_its_expiry_and_dead_exactly_at_it(store: Store, _keep: Keep) {
    let setup = setup(&store).await;
    store
        .set_one_click_links("alice", true)
        .await
        .expect("opted in");
    // Before the question's deadline, which would bound it otherwise.
    let expiry = setup.question.deadline - Duration::from_secs(5);
    let token = setup
        .keys
        .issue(&setup.question, "alice", expiry)
        .expect("a link");
    store.freeze_clock(expiry - Duration::from_millis(1));
    assert_eq!(
        open(&setup.origin, &token, None).await.0,
        200,
        "a moment before"
    );
    store.freeze_clock(expiry);
    assert_eq!(
        open(&setup.origin, &token, None).await.0,
        404,
        "exactly at it"
    );
    assert_eq!(decide(&setup.origin, &token, "approve", None).await.0, 404);
    drop(setup.waiting);
}

async fn crew_inbox_issues_serves_and_revokes_links(store: Store, keep: Keep) {
    for name in ["alice", "bob"] {
        store
            .add_approver(name, None, ApproverScope::everything())
            .await
            .expect("an approver");
    }
    let dir = tempfile::tempdir().expect("a directory");
    let keys = dir.path().join("link.keys");
    std::fs::write(&keys, KEYS).expect("the keys' file");
    let keys = keys.display().to_string();
    let inbox = support::serve_inbox(
        env!("CARGO_BIN_EXE_crew-inbox"),
        &keep.url,
        &["--link-keys", &keys],
    );
    let cli = |args: &[&str]| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_crew-inbox"))
            .args(args)
            .args(["--store", &keep.url])
            .output()
            .expect("crew-inbox runs");
        assert!(output.status.success(), "{args:?}: {output:?}");
        String::from_utf8(output.stdout).expect("UTF-8")
    };
    cli(&["one-click-links", "alice", "on"]);
    let waiting = ask(&StoreApprovals::new(store.clone()));
    let question = pending(&store, 1).await.remove(0);
    let link = |approver: &str| {
        let printed = cli(&[
            "link",
            approver,
            &question.id,
            "--link-keys",
            &keys,
            "--public-origin",
            "https://approvals.example.com",
        ]);
        let url = printed.trim().to_owned();
        url.strip_prefix("https://approvals.example.com/links/")
            .expect("a link to the inbox")
            .to_owned()
    };
    let bobs = link("bob");
    let alices = link("alice");
    cli(&["revoke-key", "k2"]);
    assert_eq!(open(&inbox.origin, &bobs, None).await.0, 404, "revoked");
    assert_eq!(open(&inbox.origin, &alices, None).await.0, 404, "revoked");
    // The inbox signs with k1 once the file puts it first.
    std::fs::write(
        &keys,
        "k1 9dS8c2VjcmV0LWtleS1mb3ItdGVzdHMtb25seS0xMjM0NTY=\n",
    )
    .expect("rotated");
    let alices = link("alice");
    let (status, page) = decide(&inbox.origin, &alices, "approve", None).await;
    assert_eq!(status, 200, "{page}");
    let answer = answered(waiting).await;
    assert_eq!(answer.answered_by.as_deref(), Some("alice"));
}

on_both_stores!(
    crew_inbox_issues_serves_and_revokes_links,
    a_link_opens_a_confirmation_and_decides_once_for_its_signed_in_approver,
    a_one_click_link_decides_without_a_sign_in_and_only_for_its_approver,
    dead_links_decide_nothing_and_say_nothing_of_why,
    a_link_is_alive_until_its_expiry_and_dead_exactly_at_it,
);
