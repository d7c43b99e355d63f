//! The approval inbox over real HTTP: a temporary SQLite store, the
//! router served on 127.0.0.1, questions asked by a real `StoreApprovals`
//! in a spawned task, and answers given through the pages and the API.

mod common;
mod drafts_crew;

use std::sync::Arc;
use std::time::Duration;

use common::take;
use crew_runtime::inbox::Inbox;
use crew_runtime::store::{ApproverScope, Question, QuestionStatus, Store, StoreApprovals};
use hooks_core::{
    Capabilities, Capability, HumanAnswer, HumanInputError, HumanInputRequest, HumanInputSource,
};
use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, COOKIE, LOCATION, ORIGIN, SET_COOKIE};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

const PASSWORD: &str = "correct horse battery";

/// A served inbox on a fresh store.
struct Served {
    store: Store,
    approvals: Arc<StoreApprovals>,
    origin: String,
    client: reqwest::Client,
    _dir: tempfile::TempDir,
}

/// A signed-in browser: its session cookie and the session's CSRF token.
#[derive(Debug, Clone)]
struct Session {
    cookie: String,
    csrf: String,
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(60))
        .build()
        .expect("an HTTP client")
}

/// Serves `router` on 127.0.0.1 on a port of its own; returns the origin.
async fn serve(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let address = listener.local_addr().expect("its address");
    tokio::spawn(async move { axum::serve(listener, router).await });
    format!("http://{address}")
}

impl Served {
    async fn start() -> Served {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let url = format!("sqlite://{}", dir.path().join("inbox.db").display());
        let store = Store::connect(&url).await.expect("the store opens");
        let origin = serve(Inbox::new(store.clone()).router()).await;
        Served {
            approvals: Arc::new(StoreApprovals::new(store.clone())),
            store,
            origin,
            client: client(),
            _dir: dir,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.origin)
    }

    async fn add(&self, name: &str, scope: ApproverScope) {
        self.store
            .add_approver(name, Some(PASSWORD), scope)
            .await
            .expect("the approver is added");
    }

    /// Asks `request` as a crew would, in a task of its own.
    fn ask(&self, request: HumanInputRequest) -> JoinHandle<Result<HumanAnswer, HumanInputError>> {
        let approvals = self.approvals.clone();
        tokio::spawn(async move { approvals.answer(request).await })
    }

    /// Waits until `count` questions are pending.
    async fn pending(&self, count: usize) -> Vec<Question> {
        for _ in 0..600 {
            let pending = self.store.pending().await.expect("pending questions");
            if pending.len() >= count {
                return pending;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{count} questions never became pending");
    }

    /// Signs in with a password through the login form.
    async fn sign_in(&self, name: &str, password: &str) -> Session {
        let response = self.log_in(&[("name", name), ("password", password)]).await;
        assert_eq!(response.status(), StatusCode::SEE_OTHER, "signed in");
        self.session_of(&response).await
    }

    /// Posts the login form (with its CSRF cookie and token) and returns
    /// the answer.
    async fn log_in(&self, fields: &[(&str, &str)]) -> reqwest::Response {
        let form = self
            .client
            .get(self.url("/login"))
            .send()
            .await
            .expect("the login page");
        assert_eq!(form.status(), StatusCode::OK);
        let login_cookie = cookie_named(&form, "crew_inbox_login").expect("a login cookie");
        let html = form.text().await.expect("its text");
        let csrf = csrf_in(&html);
        let mut body: Vec<(&str, &str)> = vec![("csrf", csrf.as_str())];
        body.extend_from_slice(fields);
        self.client
            .post(self.url("/login"))
            .header(ORIGIN, &self.origin)
            .header(COOKIE, format!("crew_inbox_login={login_cookie}"))
            .form(&body)
            .send()
            .await
            .expect("the login answer")
    }

    /// The session a successful sign-in opened, with its CSRF token read
    /// from the page.
    async fn session_of(&self, response: &reqwest::Response) -> Session {
        let cookie = cookie_named(response, "crew_inbox_session").expect("a session cookie");
        let page = self
            .client
            .get(self.url("/"))
            .header(COOKIE, format!("crew_inbox_session={cookie}"))
            .send()
            .await
            .expect("the inbox page");
        assert_eq!(page.status(), StatusCode::OK);
        let csrf = csrf_in(&page.text().await.expect("its text"));
        Session { cookie, csrf }
    }

    async fn get(&self, session: &Session, path: &str) -> reqwest::Response {
        self.client
            .get(self.url(path))
            .header(COOKIE, format!("crew_inbox_session={}", session.cookie))
            .send()
            .await
            .expect("an answer")
    }

    /// Posts a decision form as the page does.
    async fn decide(
        &self,
        session: &Session,
        id: &str,
        fields: &[(&str, &str)],
    ) -> reqwest::Response {
        let mut body: Vec<(&str, &str)> = vec![("csrf", session.csrf.as_str())];
        body.extend_from_slice(fields);
        self.client
            .post(self.url(&format!("/questions/{id}/decision")))
            .header(ORIGIN, &self.origin)
            .header(COOKIE, format!("crew_inbox_session={}", session.cookie))
            .form(&body)
            .send()
            .await
            .expect("an answer")
    }
}

/// The value of the cookie `name` a response sets.
fn cookie_named(response: &reqwest::Response, name: &str) -> Option<String> {
    response
        .headers()
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .find_map(|value| {
            let (pair, _) = value.split_once(';').unwrap_or((value, ""));
            let (key, value) = pair.split_once('=')?;
            (key == name && !value.is_empty()).then(|| value.to_owned())
        })
}

/// The CSRF token of the first form of a page.
fn csrf_in(html: &str) -> String {
    let pattern = regex::Regex::new(r#"name="csrf" value="([^"]+)""#).expect("a pattern");
    pattern
        .captures(html)
        .and_then(|captures| captures.get(1))
        .map(|token| token.as_str().to_owned())
        .expect("a CSRF token in the page")
}

/// A request to send an email, as a crew of `requester` would ask it.
fn email_request(requester: &str) -> HumanInputRequest {
    let mut request = HumanInputRequest::new("Send the quarterly report to the board?", "")
        .with_call_id("call_1")
        .with_tool(
            "send_email",
            json!({"to": "board@example.com", "subject": "Q3"}),
        )
        .with_agent_role("Assistant");
    request.task = Some("report".into());
    request.crew = Some("finance".into());
    request.requester = Some(requester.into());
    request.timeout = Some(Duration::from_secs(300));
    request.tool_schema = Some(json!({
        "type": "object",
        "properties": {"to": {"type": "string"}, "subject": {"type": "string"}},
        "required": ["to", "subject"],
        "additionalProperties": false
    }));
    request.tool_capabilities = Some(
        Capabilities::NONE
            .with(Capability::OpenWorld)
            .with(Capability::Destructive),
    );
    request
}

/// A request to read a file: a read-only tool.
fn read_request(requester: &str) -> HumanInputRequest {
    let mut request = HumanInputRequest::new("Read the payroll file?", "")
        .with_tool("read_file", json!({"path": "/srv/payroll.csv"}));
    request.requester = Some(requester.into());
    request.timeout = Some(Duration::from_secs(300));
    request.tool_capabilities = Some(Capabilities::NONE.with(Capability::ReadOnly));
    request
}

/// What the waiting task got.
async fn answer_of(task: JoinHandle<Result<HumanAnswer, HumanInputError>>) -> HumanAnswer {
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("the waiting call hears of the answer")
        .expect("the task ran")
        .expect("an answer")
}

async fn error_json(response: reqwest::Response) -> String {
    let body: Value = serde_json::from_str(&response.text().await.expect("a body")).expect("JSON");
    body["error"].as_str().expect("an error message").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signing_in_with_a_password_opens_a_session_and_a_wrong_one_is_refused() {
    let inbox = Served::start().await;
    inbox.add("alice", ApproverScope::everything()).await;
    let wrong = inbox
        .log_in(&[("name", "alice"), ("password", "not her password")])
        .await;
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    assert!(cookie_named(&wrong, "crew_inbox_session").is_none());
    assert!(
        wrong
            .text()
            .await
            .expect("a page")
            .contains("Wrong name or password")
    );
    let nobody = inbox
        .log_in(&[("name", "mallory"), ("password", PASSWORD)])
        .await;
    assert_eq!(nobody.status(), StatusCode::UNAUTHORIZED);

    let response = inbox
        .log_in(&[("name", "alice"), ("password", PASSWORD)])
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(response.headers()[LOCATION], "/");
    let set_cookie = response
        .headers()
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .find(|value| value.starts_with("crew_inbox_session="))
        .expect("a session cookie")
        .to_owned();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set_cookie.contains(attribute), "{set_cookie}");
    }
    let session = inbox.session_of(&response).await;
    let page = inbox.get(&session, "/").await;
    assert!(
        page.text()
            .await
            .expect("a page")
            .contains("id=\"signed-in-as\">alice<")
    );

    // Signing out ends the session for good.
    let out = inbox
        .client
        .post(inbox.url("/logout"))
        .header(ORIGIN, &inbox.origin)
        .header(COOKIE, format!("crew_inbox_session={}", session.cookie))
        .form(&[("csrf", session.csrf.as_str())])
        .send()
        .await
        .expect("an answer");
    assert_eq!(out.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        inbox.get(&session, "/").await.status(),
        StatusCode::SEE_OTHER
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_time_token_signs_in_once_and_is_refused_when_reused() {
    let inbox = Served::start().await;
    inbox
        .store
        .add_approver("bob", None, ApproverScope::everything())
        .await
        .expect("bob is added");
    let token = inbox
        .store
        .issue_sign_in_token("bob", Duration::from_secs(600))
        .await
        .expect("a token");
    let first = inbox.log_in(&[("token", token.as_str())]).await;
    assert_eq!(first.status(), StatusCode::SEE_OTHER);
    let session = inbox.session_of(&first).await;
    assert!(!session.csrf.is_empty());
    let again = inbox.log_in(&[("token", token.as_str())]).await;
    assert_eq!(again.status(), StatusCode::UNAUTHORIZED);
    assert!(cookie_named(&again, "crew_inbox_session").is_none());
    assert!(again.text().await.expect("a page").contains("used already"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_session_pages_redirect_to_login_and_the_api_answers_401() {
    let inbox = Served::start().await;
    for page in ["/", "/history", "/questions/some-id", "/?after=1.some-id"] {
        let response = inbox
            .client
            .get(inbox.url(page))
            .send()
            .await
            .expect("an answer");
        assert_eq!(response.status(), StatusCode::SEE_OTHER, "{page}");
        assert_eq!(response.headers()[LOCATION], "/login", "{page}");
    }
    for script in ["/fragments/pending", "/events"] {
        let response = inbox
            .client
            .get(inbox.url(script))
            .send()
            .await
            .expect("an answer");
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{script}");
    }
    let forged = inbox
        .client
        .get(inbox.url("/"))
        .header(COOKIE, "crew_inbox_session=made-up")
        .send()
        .await
        .expect("an answer");
    assert_eq!(forged.status(), StatusCode::SEE_OTHER);
    let decision = inbox
        .client
        .post(inbox.url("/questions/some-id/decision"))
        .header(ORIGIN, &inbox.origin)
        .form(&[("decision", "approve")])
        .send()
        .await
        .expect("an answer");
    assert_eq!(decision.status(), StatusCode::SEE_OTHER);

    let list = inbox
        .client
        .get(inbox.url("/api/approvals"))
        .send()
        .await
        .expect("an answer");
    assert_eq!(list.status(), StatusCode::UNAUTHORIZED);
    assert!(error_json(list).await.contains("Bearer"));
    let one = inbox
        .client
        .get(inbox.url("/api/approvals/some-id"))
        .send()
        .await
        .expect("an answer");
    assert_eq!(one.status(), StatusCode::UNAUTHORIZED);
    let wrong_token = inbox
        .client
        .post(inbox.url("/api/approvals/some-id/decision"))
        .bearer_auth("made-up")
        .header(CONTENT_TYPE, "application/json")
        .body(r#"{"decision": "approve"}"#)
        .send()
        .await
        .expect("an answer");
    assert_eq!(wrong_token.status(), StatusCode::UNAUTHORIZED);

    // What anyone may fetch: the sign-in page and the script.
    for open in ["/login", "/static/inbox.js", "/static/inbox.css"] {
        let response = inbox
            .client
            .get(inbox.url(open))
            .send()
            .await
            .expect("an answer");
        assert_eq!(response.status(), StatusCode::OK, "{open}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approving_in_the_page_answers_the_waiting_call_yes() {
    let inbox = Served::start().await;
    inbox.add("alice", ApproverScope::everything()).await;
    let waiting = inbox.ask(email_request("carol"));
    let question = inbox.pending(1).await.remove(0);
    let session = inbox.sign_in("alice", PASSWORD).await;

    let page = inbox.get(&session, "/").await.text().await.expect("a page");
    assert!(page.contains(&format!("data-question-id=\"{}\"", question.id)));
    for shown in [
        "send_email",
        "Assistant",
        "report",
        "finance",
        "carol",
        "Send the quarterly report to the board?",
        "&quot;board@example.com&quot;",
        "class=\"time-left\"",
        "class=\"approve\"",
    ] {
        assert!(page.contains(shown), "the page shows {shown}");
    }

    let response = inbox
        .decide(
            &session,
            &question.id,
            &[("decision", "approve"), ("comment", "fine by me")],
        )
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let answer = answer_of(waiting).await;
    assert_eq!(answer.text, "yes");
    assert_eq!(answer.answered_by.as_deref(), Some("alice"));
    assert_eq!(answer.comment.as_deref(), Some("fine by me"));
    assert!(answer.edited_input.is_none());

    let history = inbox
        .get(&session, "/history")
        .await
        .text()
        .await
        .expect("a page");
    assert!(history.contains(&format!("data-question-id=\"{}\"", question.id)));
    assert!(history.contains("fine by me"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denying_answers_no_and_an_edit_reaches_the_tool() {
    let inbox = Served::start().await;
    inbox.add("alice", ApproverScope::everything()).await;
    let session = inbox.sign_in("alice", PASSWORD).await;

    let denied = inbox.ask(email_request("carol"));
    let question = inbox.pending(1).await.remove(0);
    let response = inbox
        .decide(&session, &question.id, &[("decision", "deny")])
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(answer_of(denied).await.text, "no");

    let edited = inbox.ask(email_request("carol"));
    let question = inbox.pending(1).await.remove(0);
    let edit = r#"{"to": "cfo@example.com", "subject": "Q3"}"#;
    let response = inbox
        .decide(
            &session,
            &question.id,
            &[
                ("decision", "edit"),
                ("arguments", edit),
                ("comment", "only the CFO"),
            ],
        )
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let answer = answer_of(edited).await;
    assert_eq!(answer.text, "yes");
    assert_eq!(
        answer.edited_input.map(Value::Object),
        Some(json!({"to": "cfo@example.com", "subject": "Q3"}))
    );
    let history = inbox
        .get(&session, "/history")
        .await
        .text()
        .await
        .expect("a page");
    assert!(history.contains("cfo@example.com") && history.contains("only the CFO"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_form_without_the_csrf_token_is_refused_403() {
    let inbox = Served::start().await;
    inbox.add("alice", ApproverScope::everything()).await;
    let waiting = inbox.ask(email_request("carol"));
    let question = inbox.pending(1).await.remove(0);
    let session = inbox.sign_in("alice", PASSWORD).await;
    let response = inbox
        .client
        .post(inbox.url(&format!("/questions/{}/decision", question.id)))
        .header(ORIGIN, &inbox.origin)
        .header(COOKIE, format!("crew_inbox_session={}", session.cookie))
        .form(&[("decision", "approve")])
        .send()
        .await
        .expect("an answer");
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    assert!(response.text().await.expect("a page").contains("CSRF"));
    let no_login_token = inbox
        .client
        .post(inbox.url("/login"))
        .header(ORIGIN, &inbox.origin)
        .form(&[("name", "alice"), ("password", PASSWORD)])
        .send()
        .await
        .expect("an answer");
    assert_eq!(no_login_token.status(), StatusCode::FORBIDDEN);
    assert_eq!(
        inbox
            .store
            .question(&question.id)
            .await
            .expect("read")
            .map(|q| q.status),
        Some(QuestionStatus::Pending)
    );
    waiting.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_or_missing_origin_is_refused_403() {
    let inbox = Served::start().await;
    inbox.add("alice", ApproverScope::everything()).await;
    let waiting = inbox.ask(email_request("carol"));
    let question = inbox.pending(1).await.remove(0);
    let session = inbox.sign_in("alice", PASSWORD).await;
    let path = format!("/questions/{}/decision", question.id);
    let body = [("csrf", session.csrf.as_str()), ("decision", "approve")];
    let forged = inbox
        .client
        .post(inbox.url(&path))
        .header(ORIGIN, "https://evil.example")
        .header(COOKIE, format!("crew_inbox_session={}", session.cookie))
        .form(&body)
        .send()
        .await
        .expect("an answer");
    assert_eq!(forged.status(), StatusCode::FORBIDDEN);
    assert!(
        forged
            .text()
            .await
            .expect("a page")
            .contains("evil.example")
    );
    let missing = inbox
        .client
        .post(inbox.url(&path))
        .header(COOKIE, format!("crew_inbox_session={}", session.cookie))
        .form(&body)
        .send()
        .await
        .expect("an answer");
    assert_eq!(missing.status(), StatusCode::FORBIDDEN);
    assert!(missing.text().await.expect("a page").contains("no Origin"));
    let login = inbox
        .client
        .post(inbox.url("/login"))
        .header(ORIGIN, "null")
        .form(&[("name", "alice"), ("password", PASSWORD)])
        .send()
        .await
        .expect("an answer");
    assert_eq!(login.status(), StatusCode::FORBIDDEN);
    assert_eq!(
        inbox
            .store
            .question(&question.id)
            .await
            .expect("read")
            .map(|q| q.status),
        Some(QuestionStatus::Pending)
    );
    waiting.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_approvers_cookie_with_anothers_csrf_token_is_refused_403() {
    let inbox = Served::start().await;
    inbox.add("alice", ApproverScope::everything()).await;
    inbox.add("bob", ApproverScope::everything()).await;
    let waiting = inbox.ask(email_request("carol"));
    let question = inbox.pending(1).await.remove(0);
    let alice = inbox.sign_in("alice", PASSWORD).await;
    let bob = inbox.sign_in("bob", PASSWORD).await;
    let mixed = Session {
        cookie: alice.cookie.clone(),
        csrf: bob.csrf.clone(),
    };
    let response = inbox
        .decide(&mixed, &question.id, &[("decision", "approve")])
        .await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    assert_eq!(
        inbox
            .store
            .question(&question.id)
            .await
            .expect("read")
            .map(|q| q.status),
        Some(QuestionStatus::Pending)
    );
    waiting.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_requester_cannot_answer_their_own_request_and_the_attempt_is_recorded() {
    let inbox = Served::start().await;
    inbox.add("carol", ApproverScope::everything()).await;
    let waiting = inbox.ask(email_request("carol"));
    let question = inbox.pending(1).await.remove(0);
    let carol = inbox.sign_in("carol", PASSWORD).await;

    let page = inbox.get(&carol, "/").await.text().await.expect("a page");
    assert!(page.contains(&format!("data-question-id=\"{}\"", question.id)));
    assert!(page.contains("class=\"own-request"));
    assert!(
        !page.contains("class=\"approve\""),
        "no buttons on her own request"
    );

    let response = inbox
        .decide(&carol, &question.id, &[("decision", "approve")])
        .await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    assert!(
        response
            .text()
            .await
            .expect("a page")
            .contains("cannot approve their own request")
    );
    let refusals = inbox.store.refusals(&question.id).await.expect("refusals");
    assert_eq!(refusals.len(), 1);
    assert_eq!(refusals[0].approver, "carol");

    // Through the API too, and the bot's list leaves it out.
    let token = inbox.store.issue_api_token("carol").await.expect("a token");
    let list: Value = serde_json::from_str(
        &inbox
            .client
            .get(inbox.url("/api/approvals"))
            .bearer_auth(&token)
            .send()
            .await
            .expect("an answer")
            .text()
            .await
            .expect("a body"),
    )
    .expect("JSON");
    assert_eq!(list["approvals"], json!([]));
    let api = inbox
        .client
        .post(inbox.url(&format!("/api/approvals/{}/decision", question.id)))
        .bearer_auth(&token)
        .header(CONTENT_TYPE, "application/json")
        .body(r#"{"decision": "approve"}"#)
        .send()
        .await
        .expect("an answer");
    assert_eq!(api.status(), StatusCode::FORBIDDEN);
    assert!(error_json(api).await.contains("own request"));
    assert_eq!(
        inbox
            .store
            .question(&question.id)
            .await
            .expect("read")
            .map(|q| q.status),
        Some(QuestionStatus::Pending)
    );
    waiting.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvers_limited_to_tools_or_capabilities_see_and_answer_only_those() {
    let inbox = Served::start().await;
    inbox
        .add("mailer", ApproverScope::everything().tools(["Send Email"]))
        .await;
    inbox
        .add(
            "reader",
            ApproverScope::everything().capabilities([Capability::ReadOnly]),
        )
        .await;
    let email = inbox.ask(email_request("carol"));
    inbox.pending(1).await;
    let read = inbox.ask(read_request("carol"));
    let pending = inbox.pending(2).await;
    let id_of = |tool: &str| {
        pending
            .iter()
            .find(|question| question.tool == tool)
            .map(|question| question.id.clone())
            .expect("the question")
    };
    let (email_id, read_id) = (id_of("send_email"), id_of("read_file"));

    let mailer = inbox.sign_in("mailer", PASSWORD).await;
    let page = inbox.get(&mailer, "/").await.text().await.expect("a page");
    assert!(page.contains(&email_id) && !page.contains(&read_id));
    let refused = inbox
        .decide(&mailer, &read_id, &[("decision", "approve")])
        .await;
    assert_eq!(refused.status(), StatusCode::NOT_FOUND);
    assert!(
        refused
            .text()
            .await
            .expect("a page")
            .contains("no question has this id")
    );

    let reader = inbox.sign_in("reader", PASSWORD).await;
    let page = inbox.get(&reader, "/").await.text().await.expect("a page");
    assert!(page.contains(&read_id) && !page.contains(&email_id));
    let refused = inbox
        .decide(&reader, &email_id, &[("decision", "deny")])
        .await;
    assert_eq!(refused.status(), StatusCode::NOT_FOUND);

    let taken = inbox
        .decide(&reader, &read_id, &[("decision", "approve")])
        .await;
    assert_eq!(taken.status(), StatusCode::SEE_OTHER);
    assert_eq!(answer_of(read).await.text, "yes");
    let taken = inbox
        .decide(&mailer, &email_id, &[("decision", "deny")])
        .await;
    assert_eq!(taken.status(), StatusCode::SEE_OTHER);
    assert_eq!(answer_of(email).await.text, "no");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_question_is_404_and_an_answered_one_409() {
    let inbox = Served::start().await;
    inbox.add("alice", ApproverScope::everything()).await;
    let session = inbox.sign_in("alice", PASSWORD).await;
    let unknown = inbox
        .decide(&session, "no-such-question", &[("decision", "approve")])
        .await;
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);

    let waiting = inbox.ask(email_request("carol"));
    let question = inbox.pending(1).await.remove(0);
    let first = inbox
        .decide(&session, &question.id, &[("decision", "approve")])
        .await;
    assert_eq!(first.status(), StatusCode::SEE_OTHER);
    assert_eq!(answer_of(waiting).await.text, "yes");
    let second = inbox
        .decide(&session, &question.id, &[("decision", "deny")])
        .await;
    assert_eq!(second.status(), StatusCode::CONFLICT);
    assert!(
        second
            .text()
            .await
            .expect("a page")
            .contains("approved already")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_question_refuses_answers() {
    let inbox = Served::start().await;
    inbox.add("alice", ApproverScope::everything()).await;
    let session = inbox.sign_in("alice", PASSWORD).await;
    let mut request = email_request("carol");
    request.timeout = Some(Duration::from_millis(600));
    let waiting = inbox.ask(request);
    let question = inbox.pending(1).await.remove(0);
    // The call gives up at its deadline (the crew's human-input timeout
    // ends the wait; here the deadline itself closes the question).
    tokio::time::sleep(Duration::from_millis(900)).await;
    let late = inbox
        .decide(&session, &question.id, &[("decision", "approve")])
        .await;
    assert_eq!(late.status(), StatusCode::CONFLICT);
    assert!(late.text().await.expect("a page").contains("deadline"));
    let refusals = inbox.store.refusals(&question.id).await.expect("refusals");
    assert_eq!(refusals.len(), 1, "a late answer is recorded");
    waiting.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_of_ten_megabytes_is_refused_413() {
    let inbox = Served::start().await;
    inbox.add("alice", ApproverScope::everything()).await;
    let waiting = inbox.ask(email_request("carol"));
    let question = inbox.pending(1).await.remove(0);
    let session = inbox.sign_in("alice", PASSWORD).await;
    let huge = format!(
        r#"{{"to": "board@example.com", "subject": "{}"}}"#,
        "x".repeat(10 * 1024 * 1024)
    );
    let response = inbox
        .decide(
            &session,
            &question.id,
            &[("decision", "edit"), ("arguments", huge.as_str())],
        )
        .await;
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(
        inbox
            .store
            .question(&question.id)
            .await
            .expect("read")
            .map(|q| q.status),
        Some(QuestionStatus::Pending)
    );
    waiting.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_the_schema_rejects_is_422_and_approves_nothing() {
    let inbox = Served::start().await;
    inbox.add("alice", ApproverScope::everything()).await;
    let waiting = inbox.ask(email_request("carol"));
    let question = inbox.pending(1).await.remove(0);
    let session = inbox.sign_in("alice", PASSWORD).await;
    let response = inbox
        .decide(
            &session,
            &question.id,
            &[
                ("decision", "edit"),
                ("arguments", r#"{"to": 42, "bcc": "everyone@example.com"}"#),
            ],
        )
        .await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let page = response.text().await.expect("a page");
    assert!(page.contains("not valid for the tool"), "{page}");
    let not_json = inbox
        .decide(
            &session,
            &question.id,
            &[("decision", "edit"), ("arguments", "{not json")],
        )
        .await;
    assert_eq!(not_json.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        inbox
            .store
            .question(&question.id)
            .await
            .expect("read")
            .map(|q| q.status),
        Some(QuestionStatus::Pending)
    );
    assert!(!waiting.is_finished(), "the call still waits");
    waiting.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_and_one_pending_questions_come_fifty_a_page_and_the_api_pages_through_all() {
    let inbox = Served::start().await;
    inbox.add("alice", ApproverScope::everything()).await;
    let waiting: Vec<_> = (0..1001)
        .map(|_| inbox.ask(email_request("carol")))
        .collect();
    let pending = inbox.pending(1001).await;
    assert_eq!(pending.len(), 1001);
    let session = inbox.sign_in("alice", PASSWORD).await;

    // The page: 50 cards, the whole count, and a link to the next page,
    // followed to the end.
    let link = regex::Regex::new(r#"id="next-page" href="([^"]+)""#).expect("a pattern");
    let mut path = "/".to_owned();
    let mut shown = std::collections::HashSet::new();
    let mut largest = 0;
    for _ in 0..30 {
        let page = inbox
            .get(&session, &path)
            .await
            .text()
            .await
            .expect("a page");
        largest = largest.max(page.len());
        assert!(page.contains("1001 pending"), "the count of all");
        let cards = page.matches("class=\"question\"").count();
        assert!(cards <= 50, "{cards} cards on one page");
        for id in pending.iter().map(|question| &question.id) {
            if page.contains(&format!("data-question-id=\"{id}\"")) {
                shown.insert(id.clone());
            }
        }
        match link.captures(&page).and_then(|found| found.get(1)) {
            // The template escapes the link as HTML does.
            Some(next) => path = next.as_str().replace("&#x2f;", "/").replace("&amp;", "&"),
            None => break,
        }
    }
    assert_eq!(shown.len(), 1001, "every question is on some page");
    assert!(largest < 512 * 1024, "a page of {largest} bytes");
    let fragment = inbox
        .get(&session, "/fragments/pending")
        .await
        .text()
        .await
        .expect("a fragment");
    assert_eq!(fragment.matches("data-question-id=").count(), 50);

    // The API: 50 by default, up to 200 when asked, and `next_cursor`
    // until the end; nothing twice, nothing left out.
    let token = inbox.store.issue_api_token("alice").await.expect("a token");
    let list = |query: String| {
        let request = inbox
            .client
            .get(inbox.url(&format!("/api/approvals{query}")))
            .bearer_auth(&token);
        async move {
            let response = request.send().await.expect("an answer");
            assert_eq!(response.status(), StatusCode::OK);
            serde_json::from_str::<Value>(&response.text().await.expect("a body")).expect("JSON")
        }
    };
    let first = list(String::new()).await;
    assert_eq!(first["approvals"].as_array().map(Vec::len), Some(50));
    let mut listed = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..20 {
        let query = match &cursor {
            None => "?limit=200".to_owned(),
            Some(cursor) => format!("?limit=200&cursor={cursor}"),
        };
        let page = list(query).await;
        let approvals = page["approvals"].as_array().expect("a list");
        assert!(approvals.len() <= 200);
        listed.extend(
            approvals
                .iter()
                .map(|question| question["id"].as_str().expect("an id").to_owned()),
        );
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    let expected: Vec<String> = pending.iter().map(|question| question.id.clone()).collect();
    assert!(
        listed == expected,
        "all, once each, oldest first: {} listed of {}",
        listed.len(),
        expected.len()
    );
    for task in waiting {
        task.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_inbox_on_the_same_store_accepts_the_first_ones_session() {
    let inbox = Served::start().await;
    inbox.add("alice", ApproverScope::everything()).await;
    let session = inbox.sign_in("alice", PASSWORD).await;
    // Another replica, mounted under a path of a bigger app.
    let app = axum::Router::new().nest("/approvals", Inbox::new(inbox.store.clone()).router());
    let other = serve(app).await;
    let waiting = inbox.ask(email_request("carol"));
    let question = inbox.pending(1).await.remove(0);

    let page = inbox
        .client
        .get(format!("{other}/approvals"))
        .header(COOKIE, format!("crew_inbox_session={}", session.cookie))
        .send()
        .await
        .expect("an answer");
    assert_eq!(page.status(), StatusCode::OK);
    let html = page.text().await.expect("a page");
    assert!(html.contains(&question.id));
    // Links follow the mount path (minijinja writes `/` as `&#x2f;`).
    assert!(html.contains(&format!(
        "action=\"&#x2f;approvals/questions/{}/decision\"",
        question.id
    )));
    let response = inbox
        .client
        .post(format!(
            "{other}/approvals/questions/{}/decision",
            question.id
        ))
        .header(ORIGIN, &other)
        .header(COOKIE, format!("crew_inbox_session={}", session.cookie))
        .form(&[("csrf", session.csrf.as_str()), ("decision", "approve")])
        .send()
        .await
        .expect("an answer");
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(response.headers()[LOCATION], "/approvals?done=approve");
    assert_eq!(answer_of(waiting).await.text, "yes");

    let anonymous = inbox
        .client
        .get(format!("{other}/approvals/history"))
        .send()
        .await
        .expect("an answer");
    assert_eq!(anonymous.headers()[LOCATION], "/approvals/login");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bot_with_a_bearer_token_lists_and_decides_through_the_api() {
    let inbox = Served::start().await;
    inbox.add("bot", ApproverScope::everything()).await;
    let token = inbox.store.issue_api_token("bot").await.expect("a token");
    let approved = inbox.ask(email_request("carol"));
    let first = inbox.pending(1).await.remove(0);

    let list: Value = serde_json::from_str(
        &inbox
            .client
            .get(inbox.url("/api/approvals"))
            .bearer_auth(&token)
            .send()
            .await
            .expect("an answer")
            .text()
            .await
            .expect("a body"),
    )
    .expect("JSON");
    let approvals = list["approvals"].as_array().expect("a list");
    assert_eq!(approvals.len(), 1);
    let shown = &approvals[0];
    assert_eq!(shown["id"], json!(first.id));
    assert_eq!(shown["tool"], "send_email");
    assert_eq!(shown["arguments"]["to"], "board@example.com");
    assert_eq!(shown["agent"], "Assistant");
    assert_eq!(shown["task"], "report");
    assert_eq!(shown["crew"], "finance");
    assert_eq!(shown["requester"], "carol");
    assert!(
        shown["reason"]
            .as_str()
            .expect("a reason")
            .contains("quarterly")
    );
    assert!(shown["created_at"].as_str().expect("a time").ends_with('Z'));
    assert!(shown["deadline"].is_string());
    assert!(shown["seconds_left"].as_u64().expect("seconds") > 200);

    let post = |id: String, body: String| {
        let request = inbox
            .client
            .post(inbox.url(&format!("/api/approvals/{id}/decision")))
            .bearer_auth(&token)
            .header(CONTENT_TYPE, "application/json")
            .body(body);
        async move { request.send().await.expect("an answer") }
    };
    let response = post(
        first.id.clone(),
        json!({"decision": "edit", "arguments": {"to": "cfo@example.com", "subject": "Q3"}, "comment": "via chat"})
            .to_string(),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    let decided: Value =
        serde_json::from_str(&response.text().await.expect("a body")).expect("JSON");
    assert_eq!(decided["status"], "approved");
    assert_eq!(decided["answer"]["approver"], "bot");
    let answer = answer_of(approved).await;
    assert_eq!(
        answer.edited_input.map(Value::Object),
        Some(json!({"to": "cfo@example.com", "subject": "Q3"}))
    );
    assert_eq!(answer.comment.as_deref(), Some("via chat"));

    // Errors as JSON, with the statuses of the pages.
    let again = post(first.id.clone(), json!({"decision": "deny"}).to_string()).await;
    assert_eq!(again.status(), StatusCode::CONFLICT);
    assert!(error_json(again).await.contains("already"));
    let unknown = post("nope".into(), json!({"decision": "deny"}).to_string()).await;
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);

    let denied = inbox.ask(email_request("carol"));
    let second = inbox.pending(1).await.remove(0);
    let invalid = post(
        second.id.clone(),
        json!({"decision": "edit", "arguments": {"to": 1}}).to_string(),
    )
    .await;
    assert_eq!(invalid.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(error_json(invalid).await.contains("not valid for the tool"));
    let nonsense = post(second.id.clone(), json!({"decision": "maybe"}).to_string()).await;
    assert_eq!(nonsense.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let huge = post(
        second.id.clone(),
        json!({"decision": "edit", "arguments": {"to": "x".repeat(2 * 1024 * 1024)}}).to_string(),
    )
    .await;
    assert_eq!(huge.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let response = post(second.id.clone(), json!({"decision": "deny"}).to_string()).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(answer_of(denied).await.text, "no");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_stream_announces_a_question_when_it_is_asked() {
    let inbox = Served::start().await;
    inbox.add("alice", ApproverScope::everything()).await;
    let session = inbox.sign_in("alice", PASSWORD).await;
    let mut events = inbox.get(&session, "/events").await;
    assert_eq!(events.status(), StatusCode::OK);
    assert!(
        events.headers()[CONTENT_TYPE]
            .to_str()
            .expect("a type")
            .starts_with("text/event-stream")
    );
    let waiting = inbox.ask(email_request("carol"));
    let question = inbox.pending(1).await.remove(0);
    let mut seen = String::new();
    let found = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(chunk) = events.chunk().await.expect("the stream") {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if seen.contains(&format!("data: {}", question.id))
                || seen.contains(&format!("data:{}", question.id))
            {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(found, Ok(true), "events so far: {seen}");
    assert!(seen.contains("event: change") || seen.contains("event:change"));
    waiting.abort();
}

/// The status of `path` for `session`: 200 while it is open, 303 (to
/// sign in) once it has ended.
async fn status_of(inbox: &Served, session: &Session, path: &str) -> StatusCode {
    inbox.get(session, path).await.status()
}

/// The status of `GET /api/approvals` with `token`.
async fn api_status(inbox: &Served, token: &str) -> StatusCode {
    inbox
        .client
        .get(inbox.url("/api/approvals"))
        .bearer_auth(token)
        .send()
        .await
        .expect("an answer")
        .status()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_password_ends_the_approvers_sessions_and_bearer_tokens() {
    let inbox = Served::start().await;
    inbox.add("alice", ApproverScope::everything()).await;
    inbox.add("bob", ApproverScope::everything()).await;
    let alice = inbox.sign_in("alice", PASSWORD).await;
    let bob = inbox.sign_in("bob", PASSWORD).await;
    let token = inbox.store.issue_api_token("alice").await.expect("a token");
    assert_eq!(status_of(&inbox, &alice, "/").await, StatusCode::OK);
    assert_eq!(api_status(&inbox, &token).await, StatusCode::OK);

    inbox
        .store
        .set_password("alice", Some("a brand new passphrase"))
        .await
        .expect("changed");
    assert_eq!(status_of(&inbox, &alice, "/").await, StatusCode::SEE_OTHER);
    assert_eq!(api_status(&inbox, &token).await, StatusCode::UNAUTHORIZED);
    assert!(
        inbox
            .store
            .sessions("alice")
            .await
            .expect("listed")
            .is_empty()
    );
    // Nobody else is signed out; alice signs in with the new password.
    assert_eq!(status_of(&inbox, &bob, "/").await, StatusCode::OK);
    let again = inbox.sign_in("alice", "a brand new passphrase").await;
    assert_eq!(status_of(&inbox, &again, "/").await, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_approver_is_refused_at_once_everywhere_and_an_enabled_one_signs_in_anew() {
    let inbox = Served::start().await;
    inbox.add("alice", ApproverScope::everything()).await;
    let session = inbox.sign_in("alice", PASSWORD).await;
    let token = inbox.store.issue_api_token("alice").await.expect("a token");
    let sign_in_token = inbox
        .store
        .issue_sign_in_token("alice", Duration::from_secs(600))
        .await
        .expect("a sign-in token");

    inbox
        .store
        .disable_approver("alice")
        .await
        .expect("disabled");
    assert_eq!(
        status_of(&inbox, &session, "/").await,
        StatusCode::SEE_OTHER
    );
    assert_eq!(api_status(&inbox, &token).await, StatusCode::UNAUTHORIZED);
    let refused = inbox
        .log_in(&[("name", "alice"), ("password", PASSWORD)])
        .await;
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    let refused = inbox.log_in(&[("token", sign_in_token.as_str())]).await;
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);

    inbox.store.enable_approver("alice").await.expect("enabled");
    // Nothing of before comes back: not the session, not the token.
    assert_eq!(
        status_of(&inbox, &session, "/").await,
        StatusCode::SEE_OTHER
    );
    assert_eq!(api_status(&inbox, &token).await, StatusCode::UNAUTHORIZED);
    let again = inbox.sign_in("alice", PASSWORD).await;
    assert_eq!(status_of(&inbox, &again, "/").await, StatusCode::OK);
    assert!(
        inbox.store.disable_approver("nobody").await.is_err(),
        "an unknown name is an error"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_listed_without_their_secret_and_end_one_at_a_time() {
    use crew_runtime::store::Which;
    let inbox = Served::start().await;
    inbox.add("alice", ApproverScope::everything()).await;
    let laptop = inbox.sign_in("alice", PASSWORD).await;
    let phone = inbox.sign_in("alice", PASSWORD).await;
    let listed = inbox.store.sessions("alice").await.expect("listed");
    assert_eq!(listed.len(), 2);
    for session in &listed {
        assert_eq!(session.id.len(), 12, "{:?}", session.id);
        assert!(session.expires_at.is_some_and(|at| at > session.created_at));
        for secret in [&laptop.cookie, &phone.cookie, &laptop.csrf, &phone.csrf] {
            assert!(
                !secret.contains(&session.id),
                "a short id is no part of a secret"
            );
        }
    }
    let short = inbox
        .store
        .end_sessions("alice", &Which::Prefix("ab".into()))
        .await
        .expect_err("too short to pick one");
    assert!(short.to_string().contains("at least 4"), "{short}");

    // Which listed session is the phone's: the one left after the laptop
    // signs out.
    let before: Vec<String> = listed.iter().map(|session| session.id.clone()).collect();
    let signed_out = inbox
        .client
        .post(inbox.url("/logout"))
        .header(ORIGIN, &inbox.origin)
        .header(COOKIE, format!("crew_inbox_session={}", laptop.cookie))
        .form(&[("csrf", laptop.csrf.as_str())])
        .send()
        .await
        .expect("an answer");
    assert_eq!(signed_out.status(), StatusCode::SEE_OTHER);
    let left = inbox.store.sessions("alice").await.expect("listed");
    assert_eq!(left.len(), 1);
    assert!(before.contains(&left[0].id));
    let tablet = inbox.sign_in("alice", PASSWORD).await;
    let ended = inbox
        .store
        .end_sessions("alice", &Which::Prefix(left[0].id[..6].to_owned()))
        .await
        .expect("ended");
    assert_eq!(ended, 1);
    assert_eq!(status_of(&inbox, &phone, "/").await, StatusCode::SEE_OTHER);
    assert_eq!(status_of(&inbox, &tablet, "/").await, StatusCode::OK);
    assert_eq!(
        inbox
            .store
            .end_sessions("alice", &Which::All)
            .await
            .expect("ended"),
        1
    );
    assert_eq!(status_of(&inbox, &tablet, "/").await, StatusCode::SEE_OTHER);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bearer_token_is_revoked_by_its_short_id_and_the_others_keep_working() {
    use crew_runtime::store::Which;
    let inbox = Served::start().await;
    inbox.add("bot", ApproverScope::everything()).await;
    let first = inbox.store.issue_api_token("bot").await.expect("a token");
    let listed = inbox.store.api_tokens("bot").await.expect("listed");
    assert_eq!(listed.len(), 1);
    assert!(listed[0].expires_at.is_none());
    assert!(!first.contains(&listed[0].id));
    let second = inbox.store.issue_api_token("bot").await.expect("a token");
    let revoked = inbox
        .store
        .revoke_api_token("bot", &Which::Prefix(listed[0].id.clone()))
        .await
        .expect("revoked");
    assert_eq!(revoked, 1);
    assert_eq!(api_status(&inbox, &first).await, StatusCode::UNAUTHORIZED);
    assert_eq!(api_status(&inbox, &second).await, StatusCode::OK);
    assert_eq!(
        inbox.store.api_tokens("bot").await.expect("listed").len(),
        1
    );
}

/// Reads server-sent events from `events` until `done` says the text so
/// far is enough, or the stream ends; returns the text and whether the
/// stream ended. A test fails rather than hangs after 30 seconds.
async fn read_events(
    events: &mut reqwest::Response,
    done: impl Fn(&str) -> bool,
) -> (String, bool) {
    let mut seen = String::new();
    let read = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match events.chunk().await {
                Ok(Some(chunk)) => {
                    seen.push_str(&String::from_utf8_lossy(&chunk));
                    if done(&seen) {
                        return false;
                    }
                }
                Ok(None) | Err(_) => return true,
            }
        }
    })
    .await;
    match read {
        Ok(ended) => (seen, ended),
        Err(_) => panic!("the stream neither said enough nor ended; so far: {seen}"),
    }
}

/// The data of every `change` event in `text`.
fn changes_in(text: &str) -> Vec<String> {
    text.split("\n\n")
        .filter(|event| event.contains("event: change") || event.contains("event:change"))
        .filter_map(|event| {
            event
                .lines()
                .find_map(|line| line.strip_prefix("data:"))
                .map(|data| data.trim().to_owned())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_stream_says_nothing_of_questions_outside_the_approvers_scope() {
    let inbox = Served::start().await;
    inbox
        .add("reader", ApproverScope::everything().tools(["read_file"]))
        .await;
    let reader = inbox.sign_in("reader", PASSWORD).await;
    let mut events = inbox.get(&reader, "/events").await;
    assert_eq!(events.status(), StatusCode::OK);

    // First a question on another tool, then one on theirs: by the time
    // theirs is announced, the other's would have been.
    let email = inbox.ask(email_request("carol"));
    let other = inbox.pending(1).await.remove(0);
    let read = inbox.ask(read_request("carol"));
    let theirs = inbox
        .pending(2)
        .await
        .into_iter()
        .find(|question| question.tool == "read_file")
        .expect("the read question");
    let (seen, ended) =
        read_events(&mut events, |seen| changes_in(seen).contains(&theirs.id)).await;
    assert!(!ended, "the stream ended: {seen}");
    assert!(
        !seen.contains(&other.id),
        "told of another tool's question: {seen}"
    );
    for change in changes_in(&seen) {
        assert!(
            change == theirs.id || change == "*",
            "a change outside the scope: {change} in {seen}"
        );
    }
    // Answering the other tool's question tells them nothing either,
    // while answering theirs does.
    inbox
        .store
        .decide(
            &other.id,
            crew_runtime::store::Answer::new("dave", crew_runtime::store::Decision::Deny),
        )
        .await
        .expect("answered");
    assert_eq!(answer_of(email).await.text, "no");
    let decided = inbox
        .decide(&reader, &theirs.id, &[("decision", "approve")])
        .await;
    assert_eq!(decided.status(), StatusCode::SEE_OTHER);
    let (seen, _) = read_events(&mut events, |now| changes_in(now).contains(&theirs.id)).await;
    assert!(
        !seen.contains(&other.id),
        "told of another tool's answer: {seen}"
    );
    assert_eq!(answer_of(read).await.text, "yes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_stream_ends_when_its_session_is_signed_out() {
    let inbox = Served::start().await;
    inbox.add("alice", ApproverScope::everything()).await;
    let session = inbox.sign_in("alice", PASSWORD).await;
    let mut events = inbox.get(&session, "/events").await;
    assert_eq!(events.status(), StatusCode::OK);
    let signed_out = inbox
        .client
        .post(inbox.url("/logout"))
        .header(ORIGIN, &inbox.origin)
        .header(COOKIE, format!("crew_inbox_session={}", session.cookie))
        .form(&[("csrf", session.csrf.as_str())])
        .send()
        .await
        .expect("an answer");
    assert_eq!(signed_out.status(), StatusCode::SEE_OTHER);
    let (seen, ended) = read_events(&mut events, |_| false).await;
    assert!(ended, "the stream goes on: {seen}");
    assert!(seen.contains("signed-out"), "{seen}");
    assert_eq!(
        inbox.get(&session, "/events").await.status(),
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_stream_ends_when_the_approver_is_disabled() {
    let inbox = Served::start().await;
    inbox.add("alice", ApproverScope::everything()).await;
    let session = inbox.sign_in("alice", PASSWORD).await;
    let mut events = inbox.get(&session, "/events").await;
    assert_eq!(events.status(), StatusCode::OK);
    inbox
        .store
        .disable_approver("alice")
        .await
        .expect("disabled");
    let (seen, ended) = read_events(&mut events, |_| false).await;
    assert!(ended && seen.contains("signed-out"), "{seen}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_outside_the_scope_reads_as_a_missing_question_and_names_no_tool() {
    let inbox = Served::start().await;
    inbox
        .add("reader", ApproverScope::everything().tools(["read_file"]))
        .await;
    let email = inbox.ask(email_request("carol"));
    let other = inbox.pending(1).await.remove(0);
    let reader = inbox.sign_in("reader", PASSWORD).await;

    let missing = inbox
        .decide(&reader, "no-such-question", &[("decision", "approve")])
        .await;
    let missing = (missing.status(), missing.text().await.expect("a page"));
    let refused = inbox
        .decide(&reader, &other.id, &[("decision", "approve")])
        .await;
    let refused = (refused.status(), refused.text().await.expect("a page"));
    assert_eq!(refused, missing, "the same status and the same page");
    assert!(!refused.1.contains("send_email"), "{}", refused.1);

    let page = inbox
        .get(&reader, &format!("/questions/{}", other.id))
        .await;
    assert_eq!(page.status(), StatusCode::NOT_FOUND);
    assert!(!page.text().await.expect("a page").contains("send_email"));

    let token = inbox
        .store
        .issue_api_token("reader")
        .await
        .expect("a token");
    let api = |path: String, body: Option<Value>| {
        let request = match body {
            Some(body) => inbox.client.post(inbox.url(&path)).json(&body),
            None => inbox.client.get(inbox.url(&path)),
        };
        let request = request.bearer_auth(&token);
        async move {
            let response = request.send().await.expect("an answer");
            (response.status(), response.text().await.expect("a body"))
        }
    };
    let decision = json!({"decision": "approve"});
    let missing = api(
        "/api/approvals/nothing/decision".into(),
        Some(decision.clone()),
    )
    .await;
    let refused = api(
        format!("/api/approvals/{}/decision", other.id),
        Some(decision),
    )
    .await;
    assert_eq!(refused, missing);
    assert_eq!(refused.0, StatusCode::NOT_FOUND);
    assert!(!refused.1.contains("send_email"), "{}", refused.1);
    let shown = api(format!("/api/approvals/{}", other.id), None).await;
    assert_eq!(shown.0, StatusCode::NOT_FOUND);
    assert!(!shown.1.contains("send_email"));
    assert_eq!(
        inbox
            .store
            .question(&other.id)
            .await
            .expect("read")
            .map(|q| q.status),
        Some(QuestionStatus::Pending),
        "nothing was decided"
    );
    email.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_mebibytes_of_arguments_keep_the_list_small_and_show_whole_on_the_questions_page() {
    let inbox = Served::start().await;
    inbox.add("alice", ApproverScope::everything()).await;
    let body = format!("{}THE-END", "x".repeat(8 * 1024 * 1024));
    let mut request = email_request("carol");
    request.tool_input = Some(json!({"to": "board@example.com", "subject": "Q3", "body": body}));
    request.tool_schema = None;
    let huge = inbox.ask(request);
    inbox.pending(1).await;
    let small = inbox.ask(read_request("carol"));
    let pending = inbox.pending(2).await;
    let huge_id = pending
        .iter()
        .find(|question| question.tool == "send_email")
        .map(|question| question.id.clone())
        .expect("the huge question");
    let session = inbox.sign_in("alice", PASSWORD).await;

    let page = inbox.get(&session, "/").await.text().await.expect("a page");
    assert!(page.len() < 64 * 1024, "a page of {} bytes", page.len());
    assert_eq!(page.matches("class=\"question\"").count(), 2);
    assert!(!page.contains("THE-END"));
    assert!(
        page.contains(&format!("/questions/{huge_id}")),
        "a link to the whole"
    );
    assert!(
        page.contains("payroll.csv"),
        "a small question is shown whole"
    );
    let fragment = inbox.get(&session, "/fragments/pending").await;
    let fragment = fragment.text().await.expect("a fragment");
    assert!(
        fragment.len() < 64 * 1024,
        "a fragment of {} bytes",
        fragment.len()
    );

    let whole = inbox.get(&session, &format!("/questions/{huge_id}")).await;
    assert_eq!(whole.status(), StatusCode::OK);
    let whole = whole.text().await.expect("a page");
    assert_eq!(whole.matches("THE-END").count(), 1, "shown once, whole");
    assert!(
        whole.len() < 9 * 1024 * 1024,
        "a page of {} bytes",
        whole.len()
    );

    let token = inbox.store.issue_api_token("alice").await.expect("a token");
    let listed = inbox
        .client
        .get(inbox.url("/api/approvals"))
        .bearer_auth(&token)
        .send()
        .await
        .expect("an answer")
        .text()
        .await
        .expect("a body");
    assert!(
        listed.len() < 64 * 1024,
        "a listing of {} bytes",
        listed.len()
    );
    let listed: Value = serde_json::from_str(&listed).expect("JSON");
    let cut = listed["approvals"]
        .as_array()
        .and_then(|all| all.iter().find(|q| q["id"] == json!(huge_id)))
        .expect("listed");
    assert_eq!(cut["arguments_cut"], json!(true));
    let one: Value = serde_json::from_str(
        &inbox
            .client
            .get(inbox.url(&format!("/api/approvals/{huge_id}")))
            .bearer_auth(&token)
            .send()
            .await
            .expect("an answer")
            .text()
            .await
            .expect("a body"),
    )
    .expect("JSON");
    assert!(
        one["arguments"]["body"]
            .as_str()
            .is_some_and(|b| b.ends_with("THE-END"))
    );
    huge.abort();
    small.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_refuses_a_limit_beyond_its_maximum_and_a_malformed_cursor() {
    let inbox = Served::start().await;
    inbox.add("alice", ApproverScope::everything()).await;
    let token = inbox.store.issue_api_token("alice").await.expect("a token");
    for query in ["?limit=0", "?limit=201", "?limit=many", "?cursor=nonsense"] {
        let response = inbox
            .client
            .get(inbox.url(&format!("/api/approvals{query}")))
            .bearer_auth(&token)
            .send()
            .await
            .expect("an answer");
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{query}");
        let message = error_json(response).await;
        assert!(
            message.contains("limit") || message.contains("cursor"),
            "{message}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_stream_ends_when_its_session_expires_though_nothing_changes() {
    let inbox = Served::start().await;
    inbox.add("alice", ApproverScope::everything()).await;
    // An inbox that looks at its streams' sessions often, on the same store.
    let origin = serve(
        Inbox::new(inbox.store.clone())
            .session_check_every(Duration::from_millis(50))
            .router(),
    )
    .await;
    let (cookie, _) = inbox
        .store
        .create_session("alice", Duration::from_secs(1))
        .await
        .expect("a short session");
    let mut events = inbox
        .client
        .get(format!("{origin}/events"))
        .header(COOKIE, format!("crew_inbox_session={cookie}"))
        .send()
        .await
        .expect("an answer");
    assert_eq!(events.status(), StatusCode::OK);
    let (seen, ended) = read_events(&mut events, |_| false).await;
    assert!(ended && seen.contains("signed-out"), "{seen}");
}

/// `GET /api/approvals/{id}` with `token`, as JSON.
async fn api_question(inbox: &Served, token: &str, id: &str) -> Value {
    let response = inbox
        .client
        .get(inbox.url(&format!("/api/approvals/{id}")))
        .bearer_auth(token)
        .send()
        .await
        .expect("an answer");
    assert_eq!(response.status(), StatusCode::OK);
    serde_json::from_str(&response.text().await.expect("a body")).expect("JSON")
}

// SPEC §11 "Under attack": an approver's edit goes through the guards
// that ran before the question, and the approver is told what they did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_a_guard_refuses_is_shown_to_the_approver_through_the_api() {
    let inbox = Served::start().await;
    inbox.add("alice", ApproverScope::everything()).await;
    let token = inbox.store.issue_api_token("alice").await.expect("a token");
    let mut kickoff = drafts_crew::kickoff(
        &inbox.store,
        json!({"path": "drafts/a.md", "content": "notes"}),
    );
    let question = inbox.pending(1).await.remove(0);
    assert_eq!(question.requester.as_deref(), Some("carol"));

    // Valid for the tool's schema; the guard let the question be asked
    // about drafts/a.md, never about this path.
    let decided = inbox
        .client
        .post(inbox.url(&format!("/api/approvals/{}/decision", question.id)))
        .bearer_auth(&token)
        .header(CONTENT_TYPE, "application/json")
        .body(
            json!({
                "decision": "edit",
                "arguments": {"path": "/etc/cron.d/evil", "content": "notes"}
            })
            .to_string(),
        )
        .send()
        .await
        .expect("an answer");
    assert_eq!(decided.status(), StatusCode::OK);
    kickoff.ended(Duration::from_secs(30)).await;

    // The call tells its outcome after the answer: the approver asks
    // until it is there.
    let mut shown = Value::Null;
    for _ in 0..600 {
        shown = api_question(&inbox, &token, &question.id).await;
        if shown.get("outcome").is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let outcome = &shown["outcome"];
    assert_eq!(outcome["outcome"], "refused", "{shown:#}");
    assert_eq!(outcome["source"], "drafts-only", "{shown:#}");
    assert_eq!(outcome["detail"], "/etc/cron.d/evil is outside drafts/");
    assert_eq!(
        shown["summary"],
        "approved, then refused by drafts-only: /etc/cron.d/evil is outside drafts/"
    );
    assert_eq!(shown["status"], "approved");
    assert_eq!(shown["answer"]["approver"], "alice");
    assert_eq!(shown["answer"]["decision"], "edit");
    assert_eq!(
        shown["answer"]["edited_arguments"]["path"],
        "/etc/cron.d/evil"
    );

    assert!(
        take(&kickoff.ran).is_empty(),
        "the edited call ran: {:?}",
        take(&kickoff.ran)
    );
    assert_eq!(
        kickoff.llm.requests()[1].observations(),
        ["Tool execution blocked by hook. Tool: write_file"]
    );
}
