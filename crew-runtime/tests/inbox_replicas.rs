//! Several replicas on one PostgreSQL (SPEC §11): two `crew-inbox`
//! processes (the real binary) and two asking store handles, each with its
//! own connection pool and `LISTEN` connection, share one database; each
//! answer, given at either inbox, reaches the call that waits for it.
//! The approver and the bot's token are made with the binary's own
//! commands.
//!
//! Where PostgreSQL is missing the test says so loudly and checks nothing;
//! CI installs it and sets `CREW_REQUIRE_SERVICES=1`, so there it fails
//! instead.

mod support;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use crew_runtime::store::{Store, StoreApprovals};
use crew_runtime::{HumanAnswer, HumanInputError, HumanInputRequest, HumanInputSource};
use serde_json::{Value, json};

/// How long a test waits for what must happen.
const PATIENCE: Duration = Duration::from_secs(30);

fn crew_inbox() -> Command {
    Command::new(env!("CARGO_BIN_EXE_crew-inbox"))
}

/// A running `crew-inbox serve`, stopped when dropped.
type Replica = support::ServedInbox;

/// Starts `crew-inbox serve` on a free port of 127.0.0.1.
fn start_replica(url: &str) -> Replica {
    support::serve_inbox(env!("CARGO_BIN_EXE_crew-inbox"), url, &[])
}

fn question(call_id: &str) -> HumanInputRequest {
    let mut request = HumanInputRequest::new("Refund this order?", "yes/no")
        .with_call_id(call_id)
        .with_tool("refund", json!({"order": call_id, "amount": 10}))
        .with_agent_role("Support");
    request.requester = Some("carol".into());
    request.timeout = Some(PATIENCE);
    request
}

fn ask(
    store: Store,
    call_id: &str,
) -> tokio::task::JoinHandle<Result<HumanAnswer, HumanInputError>> {
    let request = question(call_id);
    tokio::spawn(async move { StoreApprovals::new(store).answer(request).await })
}

/// The questions `replica` lists to the bot, once there are `count`.
async fn listed(
    client: &reqwest::Client,
    replica: &Replica,
    token: &str,
    count: usize,
) -> Vec<Value> {
    let started = std::time::Instant::now();
    loop {
        let listed = client
            .get(format!("{}/api/approvals", replica.origin))
            .bearer_auth(token)
            .send()
            .await
            .expect("the replica answers")
            .text()
            .await
            .expect("a body");
        let listed: Value = serde_json::from_str(&listed).expect("JSON");
        let approvals = listed["approvals"].as_array().cloned().unwrap_or_default();
        if approvals.len() == count {
            return approvals;
        }
        assert!(started.elapsed() < PATIENCE, "{listed}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn id_of(approvals: &[Value], call_order: &str) -> String {
    approvals
        .iter()
        .find(|question| question["arguments"]["order"] == call_order)
        .and_then(|question| question["id"].as_str())
        .expect("the question is listed")
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_crew_handles_and_two_inbox_processes_on_one_postgres_route_each_answer_to_its_call() {
    let Some(url) = support::postgres_database().await else {
        return;
    };
    // The approver and its token, made with the binary's own commands.
    let mut add = crew_inbox()
        .args(["add-approver", "--store", &url, "bot"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("add-approver starts");
    add.stdin
        .take()
        .expect("its standard input")
        .write_all(b"correct horse battery\n")
        .expect("the password goes in");
    let added = add.wait_with_output().expect("add-approver ends");
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );
    let issued = crew_inbox()
        .args(["api-token", "--store", &url, "bot"])
        .output()
        .expect("api-token runs");
    assert!(issued.status.success());
    let token = String::from_utf8(issued.stdout)
        .expect("a text token")
        .trim()
        .to_owned();

    let first = start_replica(&url);
    let second = start_replica(&url);
    let asking_a = Store::connect(&url).await.expect("a crew's handle");
    let asking_b = Store::connect(&url).await.expect("another crew's handle");
    let waiting_a = ask(asking_a, "A-1");
    let waiting_b = ask(asking_b, "B-2");

    let client = reqwest::Client::new();
    let at_first = listed(&client, &first, &token, 2).await;
    let at_second = listed(&client, &second, &token, 2).await;
    assert_eq!(id_of(&at_first, "A-1"), id_of(&at_second, "A-1"));

    let decide = |replica: &Replica, id: &str, body: Value| {
        client
            .post(format!("{}/api/approvals/{id}/decision", replica.origin))
            .bearer_auth(&token)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string())
            .send()
    };
    let answered = decide(
        &first,
        &id_of(&at_first, "A-1"),
        json!({"decision": "approve"}),
    )
    .await
    .expect("the first replica answers");
    assert!(answered.status().is_success(), "{answered:?}");
    let answered = decide(
        &second,
        &id_of(&at_second, "B-2"),
        json!({"decision": "deny", "comment": "wrong order"}),
    )
    .await
    .expect("the second replica answers");
    assert!(answered.status().is_success(), "{answered:?}");

    let a = tokio::time::timeout(PATIENCE, waiting_a)
        .await
        .expect("A hears of its answer")
        .expect("no panic")
        .expect("an answer");
    let b = tokio::time::timeout(PATIENCE, waiting_b)
        .await
        .expect("B hears of its answer")
        .expect("no panic")
        .expect("an answer");
    assert_eq!(
        (a.text.as_str(), a.answered_by.as_deref()),
        ("yes", Some("bot"))
    );
    assert_eq!(
        (b.text.as_str(), b.comment.as_deref()),
        ("no", Some("wrong order"))
    );

    // The other replica knows it is answered.
    let again = decide(
        &second,
        &id_of(&at_first, "A-1"),
        json!({"decision": "deny"}),
    )
    .await
    .expect("the second replica answers");
    assert_eq!(again.status(), reqwest::StatusCode::CONFLICT);
}

/// Runs `crew-inbox ARGS…` with `stdin` on its standard input; returns
/// its standard output, failing the test when it fails.
fn run_crew_inbox(args: &[&str], stdin: &str) -> String {
    let mut child = crew_inbox()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("crew-inbox starts");
    child
        .stdin
        .take()
        .expect("its standard input")
        .write_all(stdin.as_bytes())
        .expect("the input goes in");
    let output = child.wait_with_output().expect("crew-inbox ends");
    assert!(
        output.status.success(),
        "crew-inbox {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("text")
}

/// Signs `name` in at `replica` through its login form; returns the
/// session cookie and its CSRF token.
async fn sign_in_at(
    client: &reqwest::Client,
    replica: &Replica,
    name: &str,
    password: &str,
) -> (String, String) {
    let csrf = regex::Regex::new(r#"name="csrf" value="([^"]+)""#).expect("a pattern");
    let cookie = |response: &reqwest::Response, wanted: &str| {
        response
            .headers()
            .get_all(reqwest::header::SET_COOKIE)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .find_map(|value| {
                let pair = value.split(';').next()?;
                let (key, value) = pair.split_once('=')?;
                (key == wanted && !value.is_empty()).then(|| value.to_owned())
            })
            .expect("the cookie is set")
    };
    let form = client
        .get(format!("{}/login", replica.origin))
        .send()
        .await
        .expect("the login page");
    let login = cookie(&form, "crew_inbox_login");
    let html = form.text().await.expect("its text");
    let token = csrf.captures(&html).expect("a CSRF token")[1].to_owned();
    let signed_in = client
        .post(format!("{}/login", replica.origin))
        .header(reqwest::header::ORIGIN, &replica.origin)
        .header(reqwest::header::COOKIE, format!("crew_inbox_login={login}"))
        .form(&[
            ("csrf", token.as_str()),
            ("name", name),
            ("password", password),
        ])
        .send()
        .await
        .expect("the login answer");
    assert_eq!(signed_in.status(), reqwest::StatusCode::SEE_OTHER);
    let session = cookie(&signed_in, "crew_inbox_session");
    let page = client
        .get(format!("{}/", replica.origin))
        .header(
            reqwest::header::COOKIE,
            format!("crew_inbox_session={session}"),
        )
        .send()
        .await
        .expect("the inbox page")
        .text()
        .await
        .expect("its text");
    let token = csrf.captures(&page).expect("a CSRF token")[1].to_owned();
    (session, token)
}

/// The status of `GET path` at `replica` with the session cookie.
async fn page_status(client: &reqwest::Client, replica: &Replica, session: &str) -> u16 {
    client
        .get(format!("{}/", replica.origin))
        .header(
            reqwest::header::COOKIE,
            format!("crew_inbox_session={session}"),
        )
        .send()
        .await
        .expect("the replica answers")
        .status()
        .as_u16()
}

/// Opens the live stream at `replica` with the session cookie.
async fn open_stream(
    client: &reqwest::Client,
    replica: &Replica,
    session: &str,
) -> reqwest::Response {
    let events = client
        .get(format!("{}/events", replica.origin))
        .header(
            reqwest::header::COOKIE,
            format!("crew_inbox_session={session}"),
        )
        .send()
        .await
        .expect("the replica answers");
    assert_eq!(events.status(), reqwest::StatusCode::OK);
    events
}

/// Reads `events` until it ends; returns what it said. Fails rather than
/// hangs when it goes on.
async fn until_it_ends(mut events: reqwest::Response) -> String {
    let mut seen = String::new();
    let ended = tokio::time::timeout(PATIENCE, async {
        while let Ok(Some(chunk)) = events.chunk().await {
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
    })
    .await;
    assert!(ended.is_ok(), "the stream goes on: {seen}");
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ending_access_anywhere_refuses_the_next_request_and_ends_the_stream_on_the_other_replica()
{
    let Some(url) = support::postgres_database().await else {
        return;
    };
    run_crew_inbox(
        &["add-approver", "--store", &url, "alice"],
        "correct horse battery\n",
    );
    let first = start_replica(&url);
    let second = start_replica(&url);
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("a client");

    // Signed out at the first replica: the second refuses the session and
    // its open stream ends.
    let (session, csrf) = sign_in_at(&client, &first, "alice", "correct horse battery").await;
    assert_eq!(page_status(&client, &second, &session).await, 200);
    let stream = open_stream(&client, &second, &session).await;
    let signed_out = client
        .post(format!("{}/logout", first.origin))
        .header(reqwest::header::ORIGIN, &first.origin)
        .header(
            reqwest::header::COOKIE,
            format!("crew_inbox_session={session}"),
        )
        .form(&[("csrf", csrf.as_str())])
        .send()
        .await
        .expect("the first replica answers");
    assert_eq!(signed_out.status(), reqwest::StatusCode::SEE_OTHER);
    assert_eq!(page_status(&client, &second, &session).await, 303);
    assert!(until_it_ends(stream).await.contains("signed-out"));

    // A session ended from the command line by its listed id.
    let (session, _) = sign_in_at(&client, &first, "alice", "correct horse battery").await;
    let stream = open_stream(&client, &second, &session).await;
    let listed = run_crew_inbox(&["sessions", "--store", &url, "alice"], "");
    let id = listed
        .split_whitespace()
        .next()
        .expect("a session id")
        .to_owned();
    assert_eq!(listed.lines().count(), 1, "{listed}");
    assert!(!session.contains(&id) && !listed.contains(&session));
    run_crew_inbox(&["end-session", "--store", &url, "alice", &id[..8]], "");
    assert_eq!(page_status(&client, &second, &session).await, 303);
    assert!(until_it_ends(stream).await.contains("signed-out"));

    // A new password: sessions and bearer tokens end.
    let (session, _) = sign_in_at(&client, &first, "alice", "correct horse battery").await;
    let token = run_crew_inbox(&["api-token", "--store", &url, "alice"], "")
        .trim()
        .to_owned();
    let api = |replica: &Replica| {
        client
            .get(format!("{}/api/approvals", replica.origin))
            .bearer_auth(&token)
            .send()
    };
    assert_eq!(api(&second).await.expect("answers").status().as_u16(), 200);
    let stream = open_stream(&client, &second, &session).await;
    run_crew_inbox(
        &["set-password", "--store", &url, "alice"],
        "a brand new passphrase\n",
    );
    assert_eq!(page_status(&client, &second, &session).await, 303);
    assert_eq!(api(&second).await.expect("answers").status().as_u16(), 401);
    assert!(until_it_ends(stream).await.contains("signed-out"));

    // A bearer token revoked by its id, and a disabled approver.
    let token = run_crew_inbox(&["api-token", "--store", &url, "alice"], "")
        .trim()
        .to_owned();
    let listed = run_crew_inbox(&["tokens", "--store", &url, "alice"], "");
    let id = listed
        .split_whitespace()
        .next()
        .expect("a token id")
        .to_owned();
    assert!(!listed.contains(&token));
    let status = |replica: &Replica| {
        client
            .get(format!("{}/api/approvals", replica.origin))
            .bearer_auth(&token)
            .send()
    };
    assert_eq!(
        status(&first).await.expect("answers").status().as_u16(),
        200
    );
    run_crew_inbox(&["revoke-token", "--store", &url, "alice", &id], "");
    assert_eq!(
        status(&first).await.expect("answers").status().as_u16(),
        401
    );
    assert_eq!(
        status(&second).await.expect("answers").status().as_u16(),
        401
    );

    let (session, _) = sign_in_at(&client, &second, "alice", "a brand new passphrase").await;
    let stream = open_stream(&client, &first, &session).await;
    run_crew_inbox(&["disable", "--store", &url, "alice"], "");
    assert_eq!(page_status(&client, &first, &session).await, 303);
    assert!(until_it_ends(stream).await.contains("signed-out"));
    run_crew_inbox(&["enable", "--store", &url, "alice"], "");
    let (session, _) = sign_in_at(&client, &first, "alice", "a brand new passphrase").await;
    assert_eq!(page_status(&client, &second, &session).await, 200);
}
