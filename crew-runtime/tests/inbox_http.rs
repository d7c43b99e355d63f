//! The approval inbox over real HTTP: a temporary SQLite store, the
//! router served on 127.0.0.1, questions asked by a real `StoreApprovals`
//! in a spawned task, and answers given through the pages and the API.

use std::sync::Arc;
use std::time::Duration;

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
    for page in ["/", "/history"] {
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
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    assert!(
        refused
            .text()
            .await
            .expect("a page")
            .contains("may answer only the tools send_email")
    );

    let reader = inbox.sign_in("reader", PASSWORD).await;
    let page = inbox.get(&reader, "/").await.text().await.expect("a page");
    assert!(page.contains(&read_id) && !page.contains(&email_id));
    let refused = inbox
        .decide(&reader, &email_id, &[("decision", "deny")])
        .await;
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);

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
async fn a_thousand_pending_questions_are_listed_on_the_page_and_by_the_api() {
    let inbox = Served::start().await;
    inbox.add("alice", ApproverScope::everything()).await;
    let waiting: Vec<_> = (0..1000)
        .map(|_| inbox.ask(email_request("carol")))
        .collect();
    let pending = inbox.pending(1000).await;
    assert_eq!(pending.len(), 1000);
    let session = inbox.sign_in("alice", PASSWORD).await;
    let page = inbox.get(&session, "/").await.text().await.expect("a page");
    assert_eq!(page.matches("class=\"question\"").count(), 1000);
    assert!(page.contains("1000 pending"));
    let fragment = inbox
        .get(&session, "/fragments/pending")
        .await
        .text()
        .await
        .expect("a fragment");
    assert_eq!(fragment.matches("data-question-id=").count(), 1000);

    let token = inbox.store.issue_api_token("alice").await.expect("a token");
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
    assert_eq!(list["approvals"].as_array().map(Vec::len), Some(1000));
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
        shown["prompt"]
            .as_str()
            .expect("a prompt")
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
