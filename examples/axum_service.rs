//! An HTTP service that runs a crew per request, whose risky tool calls
//! wait for a person who answers them in the approval inbox, mounted in
//! the same axum app.
//!
//! - `POST /research {"topic": "Rust", "requester": "carol"}` runs a
//!   research crew on the topic for `requester` and answers
//!   `{"topic": .., "output": ..}` when the crew is done.
//! - The crew's `publish_report` tool is risky: the approval gate (an
//!   `async` `PRE_TOOL_CALL` hook) asks a person through `StoreApprovals`,
//!   which records the question in the store and awaits its answer. A
//!   refusal, no answer in time, or a request that goes away all block the
//!   call: the gate fails closed.
//! - `/inbox/` is the approval inbox (`crew_runtime::inbox`): approvers
//!   sign in with a password, and only they see and answer the questions,
//!   never their own requests. Its state changes must come from the
//!   service's own origin; its JSON API (`/inbox/api/approvals`) takes a
//!   bearer token instead.
//!
//! The questions live in the store, not in the process: a temporary
//! SQLite file unless `--store URL` names another (`sqlite://PATH` kept
//! across restarts, or `postgres://…` shared by several replicas).
//!
//! With `--durable`, the crews are durable (SPEC §13): each request's
//! kickoff is journaled in the store, a resumer runs in the background,
//! and nothing is lost when the service stops. A request waiting for a
//! person longer than the wait parks (`202 Accepted` with its kickoff's id)
//! instead of failing; a graceful shutdown parks the kickoffs waiting for
//! a person (their questions stay open, their callers are told the kickoff
//! id); and whichever replica or next run of the service hears the answer
//! goes on with the kickoff, the approved call made once. `GET
//! /kickoffs/{id}` says where a kickoff stands. The journal's key comes
//! from `CREW_JOURNAL_KEY` (base64), the same on every replica; without
//! it a fresh key is made and printed, and a kickoff cannot outlive the
//! process.
//!
//! `cargo run --example axum_service` serves on 127.0.0.1:3000 (`--port N`
//! or the `PORT` variable for another port), creates the approver `demo`
//! with a fresh password, and prints how to sign in and how to ask for a
//! report with curl. `cargo run --example axum_service -- --demo` serves on
//! a free port and drives itself through the inbox's JSON API: one report
//! approved, one refused. Every crew runs on the embedded scripted model,
//! offline.

use std::error::Error;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use crew_runtime::durable::{Durable, Resumer};
use crew_runtime::guards::ApprovalGate;
use crew_runtime::inbox::Inbox;
use crew_runtime::llm::LlmRequest;
use crew_runtime::prelude::*;
use crew_runtime::serde::{Deserialize, Serialize};
use crew_runtime::store::journal::{JournalKey, KickoffId, KickoffStatus};
use crew_runtime::store::{ApproverScope, QuestionStatus, Store, StoreApprovals};
use crew_runtime::{Role, ToolAnnotations};
use tokio::net::TcpListener;

#[path = "support/replaying.rs"]
mod replaying;
use replaying::Replaying;
use tokio::task::JoinHandle;

/// The tool a person must approve.
const RISKY_TOOL: &str = "publish_report";

/// How long a call waits for a person when the service runs for real.
const APPROVAL_WAIT: Duration = Duration::from_secs(5 * 60);

/// Who answers the questions: created (or given a fresh password) on start.
const APPROVER: &str = "demo";

/// Where the inbox is mounted in the service's app.
const INBOX_PATH: &str = "/inbox";

/// The body of `POST /research`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(crate = "crew_runtime::serde")]
struct ResearchRequest {
    topic: String,
    /// Who the crew runs for; they may never approve its calls. This
    /// example takes the client's word for it: a real service names the
    /// user its own authentication found.
    #[serde(default)]
    requester: Option<String>,
}

/// What `POST /research` answers once the crew is done.
#[derive(Debug, Serialize, Deserialize)]
#[serde(crate = "crew_runtime::serde")]
struct ResearchResponse {
    topic: String,
    output: String,
}

/// What `POST /research` answers (`202 Accepted`, or `503` while the
/// service shuts down) for a durable kickoff that goes on without the
/// request, and `GET /kickoffs/{id}`: where the kickoff stands.
#[derive(Debug, Serialize, Deserialize)]
#[serde(crate = "crew_runtime::serde")]
struct KickoffState {
    kickoff: String,
    /// `parked`, `ready`, `running`, `completed`, …
    status: String,
}

/// What the service shares between requests.
#[derive(Clone)]
struct Service {
    /// Where the questions are asked and answered.
    store: Store,
    /// The source every crew asks through: one per process, so that the
    /// questions still open can be withdrawn together on shutdown.
    approvals: StoreApprovals,
    /// How long a risky call waits for a person.
    wait: Duration,
    /// The titles `publish_report` really published, in order.
    published: Arc<Mutex<Vec<String>>>,
    /// Turns `true` when the service starts shutting down.
    stopping: tokio::sync::watch::Receiver<bool>,
    /// With `--durable`: the one durable crew every request kicks off
    /// (a resumer must be able to take up any of them).
    desk: Option<Crew>,
}

/// Stops a running service: its requests waiting for a person give up at
/// once (their questions withdrawn), then the server ends.
struct Shutdown(tokio::sync::watch::Sender<bool>);

impl Shutdown {
    fn stop(&self) {
        self.0.send_replace(true);
    }
}

impl Service {
    fn new(store: Store, wait: Duration) -> (Self, Shutdown) {
        let (stop, stopping) = tokio::sync::watch::channel(false);
        let service = Service {
            approvals: StoreApprovals::new(store.clone()),
            store,
            wait,
            published: Arc::default(),
            stopping,
            desk: None,
        };
        (service, Shutdown(stop))
    }

    /// The service with durable crews journaled in its store, sealed with
    /// `key`: a request waiting for a person longer than the wait parks.
    fn durable(mut self, key: JournalKey) -> Result<Self, BuildError> {
        let durable = Durable::new(self.store.clone())
            .journal_key(key)
            .park_after(self.wait);
        // One model for every kickoff: it reads the topic from the task in
        // the conversation, and answers from where the conversation stands.
        let model = Replaying(|request: &LlmRequest<'_>| research_plan(&topic_of(request)));
        let desk = self.crew_with(Arc::new(model), Some(durable))?;
        self.desk = Some(desk);
        Ok(self)
    }

    /// Resolves once the service is shutting down.
    async fn stopped(&self) {
        let mut stopping = self.stopping.clone();
        // An error means the sender is gone: the service is stopping too.
        let _ = stopping.wait_for(|stopping| *stopping).await;
    }

    /// The titles published so far.
    fn published(&self) -> Vec<String> {
        self.published
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// A research crew for one request: it searches (an async tool),
    /// publishes a report (the risky tool, asked about first), and answers
    /// with what both calls told it.
    fn research_crew(&self, topic: &str) -> Result<Crew, BuildError> {
        self.crew_with(Arc::new(research_plan(topic)), None)
    }

    /// The research crew on `model`, durable when `durable` is given.
    fn crew_with(&self, model: Arc<dyn Llm>, durable: Option<Durable>) -> Result<Crew, BuildError> {
        let query = json!({"type": "object", "properties": {"query": {"type": "string"}}});
        let web_search = Tool::dynamic(
            "web_search",
            "Searches the web",
            query,
            |args: Value| async move {
                // Stands for an HTTP call: awaited, it holds no thread.
                tokio::task::yield_now().await;
                let query = args["query"].as_str().unwrap_or_default();
                Ok::<_, String>(json!(format!("3 recent articles about {query}")))
            },
        )
        // It changes nothing: a durable kickoff may run it again.
        .with_annotations(ToolAnnotations::new().read_only(true));
        let report = json!({
            "type": "object",
            "properties": {"title": {"type": "string"}, "body": {"type": "string"}},
        });
        let published = Arc::clone(&self.published);
        let publish_report = Tool::dynamic(
            RISKY_TOOL,
            "Publishes a report on the company blog",
            report,
            move |args: Value| {
                let title = args["title"].as_str().unwrap_or("untitled").to_owned();
                let mut published = published.lock().unwrap_or_else(PoisonError::into_inner);
                published.push(title.clone());
                Ok::<_, String>(json!(format!(
                    "published \"{title}\" as post #{}",
                    published.len()
                )))
            },
        )
        // A durable kickoff's effect that may not run twice must have a
        // time limit: past it, a call that left no result is in doubt.
        .with_timeout(Duration::from_secs(10));

        let researcher = Agent::builder("Researcher")
            .goal("Keep the blog up to date")
            .tool(web_search)
            .tool(publish_report)
            .llm(model)
            .build();
        let task = Task::builder("Research {topic} and publish a short report")
            .agent(&researcher)
            .build();
        let crew = Crew::builder()
            .name("research-desk")
            .agent(researcher)
            .task(task)
            // This crew's hooks only: the program's `#[on]` hooks stay out.
            .global_registry(Arc::new(HookRegistry::new()))
            // The questions go to the store, where the inbox shows them; a
            // question the kickoff stops waiting for is withdrawn (a durable
            // kickoff's stays: it belongs to the kickoff).
            .human_input(Arc::new(self.approvals.clone()))
            .human_input_timeout(self.wait)
            .async_hook_with(
                PRE_TOOL_CALL,
                HookOptions::new().name("approval-gate"),
                ApprovalGate::for_tools([RISKY_TOOL]).pre_hook(),
            );
        match durable {
            Some(durable) => crew.durable(durable).build(),
            None => crew.build(),
        }
    }
}

/// What the research crew's model does for `topic`: search, publish a
/// report (the risky call), then answer with what both calls told it.
fn research_plan(topic: &str) -> ScriptedLlm {
    ScriptedLlm::new()
        .call("web_search", json!({"query": topic}))
        .call(
            RISKY_TOOL,
            json!({"title": format!("{topic} this week"), "body": "Three articles, summed up."}),
        )
        // The answer is made of what the agent saw after each call.
        .answer_with(|request| {
            let mut seen = request
                .messages
                .iter()
                .filter(|message| message.role == Role::Tool)
                .map(|message| message.content.as_str());
            let found = seen.next().unwrap_or("nothing");
            let published = seen.next().unwrap_or("nothing");
            format!("Found: {found}. Publishing: {published}")
        })
}

/// The topic of the task `Research {topic} and publish a short report`,
/// as the conversation's first message states it.
fn topic_of(request: &LlmRequest<'_>) -> String {
    let task = request
        .messages
        .iter()
        .find(|message| message.role == Role::User)
        .map_or("", |message| message.content.as_str());
    task.split_once("Research ")
        .and_then(|(_, rest)| rest.split_once(" and publish"))
        .map_or("something", |(topic, _)| topic)
        .to_owned()
}

/// An error as `POST /research` answers it: a status and `{"error": ..}`.
struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(json!({"error": self.message}))).into_response()
    }
}

impl From<BuildError> for ApiError {
    fn from(error: BuildError) -> Self {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, error.to_string())
    }
}

impl From<CrewError> for ApiError {
    fn from(error: CrewError) -> Self {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, error.to_string())
    }
}

/// Checks a short field of a request: trimmed, 1 to 100 characters.
fn short_field<'a>(name: &str, value: &'a str) -> Result<&'a str, ApiError> {
    let value = value.trim();
    if value.is_empty() || value.chars().count() > 100 {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("{name} must be 1 to 100 characters"),
        ));
    }
    Ok(value)
}

/// `POST /research`: runs a crew on the topic for its requester, and
/// answers when it is done (after any approval it waited for). Should the
/// client go away, axum drops this future, which cancels the kickoff and
/// withdraws its pending question. Should the service shut down while a
/// call waits for a person, the kickoff is dropped the same way and the
/// client told so: a graceful shutdown does not wait days for a person
/// (a crew that is not durable cannot resume elsewhere, so its call is
/// simply not made).
async fn research(
    State(service): State<Service>,
    Json(request): Json<ResearchRequest>,
) -> Result<Response, ApiError> {
    let topic = short_field("topic", &request.topic)?;
    let requester = short_field("requester", request.requester.as_deref().unwrap_or("web"))?;
    println!("service: a crew starts researching {topic:?} for {requester}");
    if let Some(desk) = &service.desk {
        return research_durably(&service, desk.for_user(requester), topic).await;
    }
    let crew = service.research_crew(topic)?.for_user(requester);
    let output = tokio::select! {
        output = crew.kickoff([("topic", topic)]) => output?,
        () = service.stopped() => {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "the service is shutting down: the request was stopped before its risky call, \
                 whose question is withdrawn; send it again later",
            ));
        }
    };
    Ok(Json(ResearchResponse {
        topic: topic.to_owned(),
        output: output.raw,
    })
    .into_response())
}

/// `POST /research` with durable crews: the kickoff is journaled first, so
/// the request can go while the kickoff goes on. It answers with the
/// output once the crew is done; with `202 Accepted` and the kickoff's id
/// when the kickoff parked waiting for a person; and, should the service shut down meanwhile, with `503` and the
/// kickoff's id: the kickoff is dropped, which parks it if it waits for a
/// person (its question stays open) or leaves it to a resumer, here on the
/// next start or on another replica. Nothing of it is lost.
async fn research_durably(
    service: &Service,
    crew: Crew,
    topic: &str,
) -> Result<Response, ApiError> {
    // Held by this process: the background resumer leaves it alone.
    let held = crew.start_held([("topic", topic)]).await?;
    let id = held.id();
    let outcome = tokio::select! {
        outcome = held.run() => Some(outcome),
        () = service.stopped() => None,
    };
    // The run is dropped here when the service stops: it parks if it
    // waits for a person, else gives up its lease to a resumer.
    let Some(outcome) = outcome else {
        let state = state_once_dropped(&service.store, &id).await?;
        let body = json!({
            "error": "the service is shutting down: the request's kickoff is kept, and goes on \
                      once its question is answered or another run of the service takes it up",
            "kickoff": state.kickoff,
            "status": state.status,
        });
        return Ok((StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response());
    };
    match outcome {
        Ok(output) => Ok(Json(ResearchResponse {
            topic: topic.to_owned(),
            output: output.raw,
        })
        .into_response()),
        Err(error) => {
            // Parked: it goes on without the request. Anything else ended
            // it.
            let state = kickoff_state(&service.store, &id).await?;
            let goes_on = state
                .status
                .parse::<KickoffStatus>()
                .is_ok_and(|status| !status.is_finished());
            if goes_on {
                println!("service: kickoff {id} goes on without the request ({error})");
                return Ok((StatusCode::ACCEPTED, Json(state)).into_response());
            }
            Err(error.into())
        }
    }
}

/// Where the durable kickoff `id` stands.
async fn kickoff_state(store: &Store, id: &KickoffId) -> Result<KickoffState, ApiError> {
    let summary = store
        .kickoff(id)
        .await
        .map_err(|error| ApiError::new(StatusCode::NOT_FOUND, error.to_string()))?;
    Ok(KickoffState {
        kickoff: id.to_string(),
        status: summary.status.to_string(),
    })
}

/// Where the durable kickoff `id` stands once its run was dropped: a run
/// waiting for a person parks in a task of its own, which this waits for
/// (5 s at most), so that the caller hears `parked` and the process does
/// not exit before the kickoff is parked.
async fn state_once_dropped(store: &Store, id: &KickoffId) -> Result<KickoffState, ApiError> {
    let failed = |error: crew_runtime::store::StoreError| {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, error.to_string())
    };
    let named = id.to_string();
    let asking = store
        .pending()
        .await
        .map_err(failed)?
        .iter()
        .any(|question| question.kickoff_id.as_deref() == Some(named.as_str()));
    let started = std::time::Instant::now();
    loop {
        let state = kickoff_state(store, id).await?;
        if !asking || state.status != "running" || started.elapsed() > Duration::from_secs(5) {
            return Ok(state);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `GET /kickoffs/{id}`: where a durable kickoff stands.
async fn kickoff(
    State(service): State<Service>,
    Path(id): Path<String>,
) -> Result<Json<KickoffState>, ApiError> {
    let id = id
        .parse::<KickoffId>()
        .map_err(|_| ApiError::new(StatusCode::NOT_FOUND, "no such kickoff"))?;
    Ok(Json(kickoff_state(&service.store, &id).await?))
}

/// The service's app: its own endpoint, and the inbox under `/inbox`
/// (`nest` routes `/inbox` to the inbox's home page; `/inbox/`, which
/// people type as often, is sent there).
fn app(service: Service, origin: &str) -> Router {
    let inbox = Inbox::new(service.store.clone()).public_origin(origin);
    Router::new()
        .route("/research", post(research))
        .route("/kickoffs/{id}", get(kickoff))
        .with_state(service)
        .route(
            &format!("{INBOX_PATH}/"),
            get(|| async { Redirect::permanent(INBOX_PATH) }),
        )
        .nest(INBOX_PATH, inbox.router())
}

/// Serves on 127.0.0.1:`port` (0: any free port) in a task of its own;
/// returns the address it listens on.
async fn start(
    service: Service,
    port: u16,
) -> std::io::Result<(SocketAddr, JoinHandle<std::io::Result<()>>)> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, port)).await?;
    let address = listener.local_addr()?;
    // The origin the approvers' browsers use: the inbox refuses a state
    // change that names another.
    let app = app(service.clone(), &format!("http://{address}"));
    // With each connection's address: the inbox throttles failed
    // sign-ins per client address too.
    let app = app.into_make_service_with_connect_info::<SocketAddr>();
    // With durable crews, a resumer in the background takes up the
    // kickoffs ready to go on (answered while parked, left by a replica
    // that went), until the service stops.
    if let Some(desk) = &service.desk {
        let resumer = Resumer::new(service.store.clone()).crew(desk);
        let stopping = service.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = resumer.run() => {}
                () = stopping.stopped() => {}
            }
        });
    }
    let server = tokio::spawn(async move {
        // Graceful: the server stops taking connections and waits for the
        // requests in flight, which give up their waits for a person (see
        // `research`); then the questions they dropped are withdrawn and
        // recorded before the process goes on to exit (a durable
        // kickoff's stay open: it parked, and goes on once answered).
        let stopping = service.clone();
        axum::serve(listener, app)
            .with_graceful_shutdown(async move { stopping.stopped().await })
            .await?;
        if let Err(error) = service.approvals.withdraw_open().await {
            eprintln!("service: withdrawing the open questions failed: {error}");
        }
        Ok(())
    });
    Ok((address, server))
}

/// Gives the approver a fresh password, creating them on first start (a
/// store kept across restarts has them already); returns the password.
async fn approver_with_fresh_password(store: &Store) -> Result<String, Box<dyn Error>> {
    let password = uuid::Uuid::new_v4().simple().to_string();
    if store.approver(APPROVER).await?.is_some() {
        store.set_password(APPROVER, Some(&password)).await?;
    } else {
        store
            .add_approver(APPROVER, Some(&password), ApproverScope::everything())
            .await?;
    }
    Ok(password)
}

/// An HTTP client for this machine's loopback: no proxy, every request
/// bounded.
fn client() -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
}

/// Waits for `future`, at most `limit`.
async fn within<T>(
    limit: Duration,
    what: &str,
    future: impl Future<Output = T>,
) -> Result<T, Box<dyn Error>> {
    tokio::time::timeout(limit, future)
        .await
        .map_err(|_| format!("{what}: nothing after {limit:?}").into())
}

/// Polls the inbox's `GET /api/approvals` until a question about the
/// report titled `title` is pending; returns it as listed.
async fn question_about(
    client: &reqwest::Client,
    base: &str,
    token: &str,
    title: &str,
) -> Result<Value, Box<dyn Error>> {
    within(Duration::from_secs(10), "waiting for a question", async {
        loop {
            let listed: Value = client
                .get(format!("{base}{INBOX_PATH}/api/approvals"))
                .bearer_auth(token)
                .send()
                .await?
                .error_for_status()?
                .json()
                .await?;
            let found = listed["approvals"].as_array().and_then(|approvals| {
                approvals
                    .iter()
                    .find(|question| question["arguments"]["title"] == title)
                    .cloned()
            });
            if let Some(question) = found {
                return Ok::<_, Box<dyn Error>>(question);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await?
}

/// Asks for a report on `topic` for carol and answers its question with
/// `decision`, as an approver's chat bot would; returns the crew's output
/// and the question's id.
async fn research_with_answer(
    client: &reqwest::Client,
    base: &str,
    token: &str,
    topic: &str,
    decision: Value,
) -> Result<(String, String), Box<dyn Error>> {
    let body = json!({"topic": topic, "requester": "carol"});
    println!("client: POST /research {body}");
    // The request waits on the approval: it runs while the approver looks.
    let request = tokio::spawn(client.post(format!("{base}/research")).json(&body).send());

    let question = question_about(client, base, token, &format!("{topic} this week")).await?;
    let id = question["id"]
        .as_str()
        .ok_or("a question without an id")?
        .to_owned();
    println!(
        "approver: {} asks to call {} with {}",
        question["agent"].as_str().unwrap_or("?"),
        question["tool"].as_str().unwrap_or("?"),
        question["arguments"]
    );
    println!("approver: POST {INBOX_PATH}/api/approvals/{id}/decision {decision}");
    client
        .post(format!("{base}{INBOX_PATH}/api/approvals/{id}/decision"))
        .bearer_auth(token)
        .json(&decision)
        .send()
        .await?
        .error_for_status()?;

    let response = within(Duration::from_secs(10), "the research", request).await?;
    let response: ResearchResponse = response??.error_for_status()?.json().await?;
    println!("client: the crew answered: {}", response.output);
    Ok((response.output, id))
}

/// What the demo saw.
#[derive(Debug)]
struct DemoOutcome {
    /// What the inbox's API answered a request without a token.
    without_token: reqwest::StatusCode,
    /// The crews' outputs: the approved report's, then the refused one's.
    outputs: Vec<String>,
    /// The titles `publish_report` really published.
    published: Vec<String>,
    /// The questions' statuses as the store recorded them, oldest first.
    statuses: Vec<QuestionStatus>,
}

impl DemoOutcome {
    /// Whether the service did what it promises: the API refused a
    /// stranger, the approved report was published and the refused one was
    /// not, and the store recorded both answers. A demo that saw otherwise
    /// exits with a failure rather than print a story that is not true.
    fn check(&self) -> Result<(), String> {
        let statuses: Vec<&str> = self.statuses.iter().map(|status| status.as_str()).collect();
        let refused_ran = self
            .outputs
            .iter()
            .any(|output| output.contains("published \"Cobol"));
        if self.without_token != reqwest::StatusCode::UNAUTHORIZED
            || self.published != ["Rust this week"]
            || refused_ran
            || statuses != ["approved", "denied"]
        {
            return Err(format!(
                "the demo went wrong: without a token {}, published {:?}, questions {statuses:?}",
                self.without_token, self.published
            ));
        }
        Ok(())
    }
}

/// Drives the service at `address` through the inbox's JSON API with a
/// bearer token: a report approved, then one refused.
async fn demo(address: SocketAddr, service: &Service) -> Result<DemoOutcome, Box<dyn Error>> {
    let store = &service.store;
    let client = client()?;
    let base = format!("http://{address}");
    let without_token = client
        .get(format!("{base}{INBOX_PATH}/api/approvals"))
        .send()
        .await?
        .status();
    println!("stranger: GET {INBOX_PATH}/api/approvals without a token: {without_token}");

    let token = store.issue_api_token(APPROVER).await?;
    let (approved, approved_id) = research_with_answer(
        &client,
        &base,
        &token,
        "Rust",
        json!({"decision": "approve"}),
    )
    .await?;
    let (refused, refused_id) = research_with_answer(
        &client,
        &base,
        &token,
        "Cobol",
        json!({"decision": "deny", "comment": "not this week"}),
    )
    .await?;
    // The demo's own questions only (a store given with `--store` may hold
    // older ones), oldest first.
    let mut history = store.history(100).await?;
    history.retain(|question| question.id == approved_id || question.id == refused_id);
    history.sort_by_key(|question| question.created_at);
    for question in &history {
        if let Some(answer) = &question.answer {
            println!(
                "history: {} {:?} for {} {} by {}",
                question.tool,
                question.arguments["title"].as_str().unwrap_or("?"),
                question.requester.as_deref().unwrap_or("?"),
                answer.decision,
                answer.approver
            );
        }
    }
    Ok(DemoOutcome {
        without_token,
        outputs: vec![approved, refused],
        published: service.published(),
        statuses: history.iter().map(|question| question.status).collect(),
    })
}

/// How the example was asked to run.
struct Options {
    demo: bool,
    /// Durable crews, a resumer in the background.
    durable: bool,
    port: u16,
    /// The store's URL; `None`: a temporary SQLite file.
    store: Option<String>,
}

fn options() -> Result<Options, String> {
    let mut options = Options {
        demo: false,
        durable: false,
        port: match std::env::var("PORT") {
            Ok(port) => port
                .parse()
                .map_err(|_| format!("PORT={port:?} is no port"))?,
            Err(_) => 3000,
        },
        store: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--demo" => options.demo = true,
            "--durable" => options.durable = true,
            "--port" => {
                let port = args.next().ok_or("--port needs a number")?;
                options.port = port
                    .parse()
                    .map_err(|_| format!("--port {port:?} is no port"))?;
            }
            "--store" => {
                options.store = Some(args.next().ok_or("--store needs a URL")?);
            }
            other => {
                return Err(format!(
                    "unknown argument {other:?} (try --demo, --durable, --port N or --store URL)"
                ));
            }
        }
    }
    Ok(options)
}

/// Serves until Ctrl-C, or runs the demo and returns what it saw.
async fn run(options: Options) -> Result<Option<DemoOutcome>, Box<dyn Error>> {
    // Kept until the end: the temporary store is deleted with it.
    let temporary = tempfile::tempdir()?;
    let url = match options.store {
        Some(url) => url,
        None => format!(
            "sqlite://{}",
            temporary.path().join("approvals.db").display()
        ),
    };
    let store = Store::connect(&url).await?;
    let password = approver_with_fresh_password(&store).await?;
    let key = if options.durable {
        Some(journal_key()?)
    } else {
        None
    };
    // The service, durable when asked.
    let service = |wait: Duration| -> Result<(Service, Shutdown), BuildError> {
        let (service, shutdown) = Service::new(store.clone(), wait);
        match &key {
            Some(key) => Ok((service.durable(key.clone())?, shutdown)),
            None => Ok((service, shutdown)),
        }
    };

    if options.demo {
        let (service, shutdown) = service(Duration::from_secs(30))?;
        let (address, server) = start(service.clone(), 0).await?;
        println!("research service on http://{address} (demo, store {url})");
        let outcome = demo(address, &service).await;
        shutdown.stop();
        within(Duration::from_secs(10), "the server stopping", server).await???;
        let outcome = outcome?;
        outcome.check()?;
        println!(
            "demo: {:?} published, the refused report not",
            outcome.published
        );
        return Ok(Some(outcome));
    }

    let (service, shutdown) = service(APPROVAL_WAIT)?;
    let (address, server) = start(service, options.port).await?;
    let base = format!("http://{address}");
    println!("research service on {base} (store {url})");
    println!("Sign in to the approval inbox at {base}{INBOX_PATH}/login");
    println!("  as {APPROVER} with the password {password}");
    println!("Ask for a report (the request waits while the publication awaits approval):");
    println!(
        "  curl -s -X POST {base}/research -H 'content-type: application/json' -d '{{\"topic\": \"Rust\", \"requester\": \"carol\"}}'"
    );
    if key.is_some() {
        println!(
            "Durable crews: a request nobody answers within {APPROVAL_WAIT:?} parks (202 and its \
             kickoff's id; GET {base}/kickoffs/ID says where it stands), and goes on once \
             answered. Ctrl-C stops the service; the kickoffs waiting for a person park and go \
             on in its next run on the same store and key."
        );
    } else {
        println!(
            "A call nobody answers within {APPROVAL_WAIT:?} is blocked. Ctrl-C stops the \
             service (a request still waiting for a person is stopped, its question withdrawn)."
        );
    }
    let mut server = server;
    tokio::select! {
        served = &mut server => served??,
        stop = tokio::signal::ctrl_c() => {
            stop?;
            println!("service: shutting down");
            shutdown.stop();
            within(Duration::from_secs(30), "the server stopping", server).await???;
        }
    }
    Ok(None)
}

/// The journal's key for durable crews: `CREW_JOURNAL_KEY` (32 bytes in
/// base64), the same on every replica, kept as a secret; or a fresh one,
/// with which this run's kickoffs cannot outlive the process.
fn journal_key() -> Result<JournalKey, Box<dyn Error>> {
    if let Ok(text) = std::env::var("CREW_JOURNAL_KEY") {
        return Ok(JournalKey::from_base64(&text)?);
    }
    println!(
        "No CREW_JOURNAL_KEY: the journal is sealed with a fresh key, so this run's kickoffs \
         cannot be resumed after it. Give every run and replica the same key (for example \
         CREW_JOURNAL_KEY=$(openssl rand -base64 32)) to resume them."
    );
    Ok(JournalKey::generate()?)
}

#[tokio::main]
async fn main() -> ExitCode {
    let options = match options() {
        Ok(options) => options,
        Err(error) => {
            eprintln!("axum_service: {error}");
            return ExitCode::from(2);
        }
    };
    match run(options).await {
        Ok(_) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("axum_service: {error}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BLOCKED: &str = "Tool execution blocked by hook. Tool: publish_report";

    /// A service on a temporary SQLite store, served on a free port, and
    /// an API token for the approver.
    struct Running {
        service: Service,
        address: SocketAddr,
        token: String,
        server: JoinHandle<std::io::Result<()>>,
        shutdown: Shutdown,
        _dir: tempfile::TempDir,
    }

    async fn running(wait: Duration) -> Running {
        let dir = tempfile::tempdir().expect("a temporary directory");
        running_on(dir, wait, None).await
    }

    /// A service on the SQLite store in `dir` (made, or kept from an
    /// earlier run), durable with `key` when given.
    async fn running_on(
        dir: tempfile::TempDir,
        wait: Duration,
        key: Option<&JournalKey>,
    ) -> Running {
        let url = format!("sqlite://{}", dir.path().join("approvals.db").display());
        let store = Store::connect(&url).await.expect("the store opens");
        approver_with_fresh_password(&store)
            .await
            .expect("the approver is created");
        let token = store.issue_api_token(APPROVER).await.expect("a token");
        let (service, shutdown) = Service::new(store, wait);
        let service = match key {
            Some(key) => service.durable(key.clone()).expect("builds"),
            None => service,
        };
        let (address, server) = start(service.clone(), 0).await.expect("the server starts");
        Running {
            service,
            address,
            token,
            server,
            shutdown,
            _dir: dir,
        }
    }

    impl Running {
        /// Stops the service and waits for its server to end (10 s at
        /// most); gives back the store's directory.
        async fn stop(self) -> tempfile::TempDir {
            self.shutdown.stop();
            within(Duration::from_secs(10), "the server stopping", self.server)
                .await
                .expect("the server stops in time")
                .expect("the server task")
                .expect("the server");
            self._dir
        }

        /// Approves question `id` through the inbox's JSON API.
        async fn approve(&self, id: &str) {
            client()
                .expect("a client")
                .post(format!(
                    "http://{}{INBOX_PATH}/api/approvals/{id}/decision",
                    self.address
                ))
                .bearer_auth(&self.token)
                .json(&json!({"decision": "approve"}))
                .send()
                .await
                .expect("a response")
                .error_for_status()
                .expect("approved");
        }

        /// Waits until `GET /kickoffs/{id}` says `status` (10 s at most).
        async fn kickoff_reaches(&self, id: &str, status: &str) {
            let client = client().expect("a client");
            let url = format!("http://{}/kickoffs/{id}", self.address);
            within(Duration::from_secs(10), "the kickoff's status", async {
                loop {
                    let state: KickoffState = client
                        .get(&url)
                        .send()
                        .await
                        .expect("a response")
                        .json()
                        .await
                        .expect("JSON");
                    if state.status == status {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            })
            .await
            .unwrap_or_else(|error| panic!("{error}"));
        }
    }

    /// Asks for a report on Rust for carol, in a task of its own.
    fn ask_for_rust(running: &Running) -> JoinHandle<reqwest::Result<reqwest::Response>> {
        let request = client()
            .expect("a client")
            .post(format!("http://{}/research", running.address))
            .json(&json!({"topic": "Rust", "requester": "carol"}))
            .send();
        tokio::spawn(request)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_shutdown_parks_a_durable_kickoff_and_the_next_run_makes_its_call_once() {
        let key = JournalKey::generate().expect("a key");
        let dir = tempfile::tempdir().expect("a temporary directory");
        // Nobody answers for an hour: the shutdown must not wait.
        let first = running_on(dir, Duration::from_secs(3600), Some(&key)).await;
        let request = ask_for_rust(&first);
        let question = first_question(&first.service.store).await;
        let first_published = Arc::clone(&first.service.published);
        let dir = first.stop().await;

        // The client was told the kickoff goes on, and under which id.
        let response = request.await.expect("the request task").expect("an answer");
        assert_eq!(response.status(), reqwest::StatusCode::SERVICE_UNAVAILABLE);
        let body: Value = response.json().await.expect("a JSON body");
        assert_eq!(body["status"], "parked", "{body}");
        let id = body["kickoff"]
            .as_str()
            .expect("the kickoff's id")
            .to_owned();
        assert!(first_published.lock().expect("not poisoned").is_empty());

        // The next run, on the same store and key: the question is still
        // open, its answer reaches the resumer, the report is published
        // once.
        let second = running_on(dir, Duration::from_secs(3600), Some(&key)).await;
        let kept = second
            .service
            .store
            .question(&question.id)
            .await
            .expect("reads")
            .expect("kept");
        assert_eq!(kept.status, QuestionStatus::Pending, "not withdrawn");
        second.kickoff_reaches(&id, "parked").await;
        second.approve(&question.id).await;
        second.kickoff_reaches(&id, "completed").await;
        assert_eq!(second.service.published(), ["Rust this week"]);
        assert!(first_published.lock().expect("not poisoned").is_empty());
        second.stop().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_durable_request_waiting_past_the_wait_parks_and_goes_on_once_answered() {
        let key = JournalKey::generate().expect("a key");
        let dir = tempfile::tempdir().expect("a temporary directory");
        let running = running_on(dir, Duration::from_millis(300), Some(&key)).await;
        let response = within(
            Duration::from_secs(10),
            "the request",
            ask_for_rust(&running),
        )
        .await
        .expect("answers once parked")
        .expect("the request task")
        .expect("a response");
        assert_eq!(response.status(), reqwest::StatusCode::ACCEPTED);
        let state: KickoffState = response.json().await.expect("JSON");
        assert_eq!(state.status, "parked");
        // Past the wait the question stays open: the kickoff parked, the
        // call was not blocked.
        let question = first_question(&running.service.store).await;
        running.approve(&question.id).await;
        running.kickoff_reaches(&state.kickoff, "completed").await;
        assert_eq!(running.service.published(), ["Rust this week"]);
        running.stop().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_durable_demo_publishes_the_approved_report_only() {
        let outcome = run(Options {
            demo: true,
            durable: true,
            port: 0,
            store: None,
        })
        .await
        .expect("the demo runs")
        .expect("the demo's outcome");
        assert_eq!(outcome.published, ["Rust this week"]);
        assert_eq!(
            outcome.statuses,
            [QuestionStatus::Approved, QuestionStatus::Denied]
        );
    }

    /// The first question asked, once there is one (within 10 s).
    async fn first_question(store: &Store) -> crew_runtime::store::Question {
        within(Duration::from_secs(10), "the question", async {
            loop {
                let pending = store.pending().await.expect("the pending questions");
                if let Some(question) = pending.into_iter().next() {
                    return question;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .expect("a question in time")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_shutdown_stops_a_call_waiting_for_a_person_and_withdraws_its_question() {
        // Nobody would answer for an hour: the shutdown must not wait.
        let running = running(Duration::from_secs(3600)).await;
        let client = client().expect("a client");
        let base = format!("http://{}", running.address);
        let request = tokio::spawn(
            client
                .post(format!("{base}/research"))
                .json(&json!({"topic": "Rust", "requester": "carol"}))
                .send(),
        );
        let store = running.service.store.clone();
        let question = first_question(&store).await;

        running.shutdown.stop();
        let stopped = within(
            Duration::from_secs(10),
            "the server stopping",
            running.server,
        )
        .await
        .expect("the server stops without waiting for the person");
        stopped.expect("the server task").expect("the server");

        // The client was told, and the call never ran.
        let response = request.await.expect("the request task").expect("an answer");
        assert_eq!(response.status(), reqwest::StatusCode::SERVICE_UNAVAILABLE);
        let body: Value = response.json().await.expect("a JSON body");
        assert!(
            body["error"]
                .as_str()
                .is_some_and(|e| e.contains("shutting down")),
            "{body}"
        );
        assert!(running.service.published().is_empty());
        // Its question is closed as withdrawn, with the time, before the
        // server task ended: no approver can answer it any more.
        let closed = store
            .question(&question.id)
            .await
            .expect("reads")
            .expect("kept");
        assert_eq!(closed.status, QuestionStatus::Withdrawn);
        assert!(closed.closed_at.is_some());
    }

    /// The statuses of the questions asked, oldest first.
    async fn statuses(store: &Store) -> Vec<QuestionStatus> {
        let mut history = store.history(10).await.expect("the history");
        history.sort_by_key(|question| question.created_at);
        history.iter().map(|question| question.status).collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_inbox_answers_at_its_path_with_and_without_a_trailing_slash() {
        let running = running(Duration::from_secs(5)).await;
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("an HTTP client");
        let at = |path: &str| format!("http://{}{path}", running.address);
        let slash = client.get(at("/inbox/")).send().await.expect("an answer");
        assert_eq!(slash.status(), reqwest::StatusCode::PERMANENT_REDIRECT);
        assert_eq!(slash.headers()[reqwest::header::LOCATION], "/inbox");
        let bare = client.get(at("/inbox")).send().await.expect("an answer");
        assert_eq!(bare.status(), reqwest::StatusCode::SEE_OTHER, "to sign in");
        assert_eq!(bare.headers()[reqwest::header::LOCATION], "/inbox/login");
        let login = client
            .get(at("/inbox/login"))
            .send()
            .await
            .expect("an answer");
        assert_eq!(login.status(), reqwest::StatusCode::OK);
        running.server.abort();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_demo_publishes_the_approved_report_only() {
        let outcome = run(Options {
            demo: true,
            durable: false,
            port: 0,
            store: None,
        })
        .await
        .expect("the demo runs")
        .expect("the demo's outcome");

        assert_eq!(outcome.without_token, reqwest::StatusCode::UNAUTHORIZED);
        // The approved call ran, and its observation reached the model,
        // which built its answer from it.
        assert_eq!(
            outcome.outputs[0],
            "Found: 3 recent articles about Rust. Publishing: published \"Rust this week\" as post #1"
        );
        // The refused one never ran: the model was told it was blocked.
        assert_eq!(
            outcome.outputs[1],
            format!("Found: 3 recent articles about Cobol. Publishing: {BLOCKED}")
        );
        assert_eq!(outcome.published, ["Rust this week"]);
        assert_eq!(
            outcome.statuses,
            [QuestionStatus::Approved, QuestionStatus::Denied]
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_requester_cannot_approve_their_own_call() {
        let running = running(Duration::from_millis(500)).await;
        let client = client().expect("a client");
        let base = format!("http://{}", running.address);
        let request = tokio::spawn(
            client
                .post(format!("{base}/research"))
                .json(&json!({"topic": "Rust", "requester": APPROVER}))
                .send(),
        );
        let store = &running.service.store;
        let pending = first_question(store).await;
        assert_eq!(pending.requester.as_deref(), Some(APPROVER));

        // Not listed to its requester, and their answer is refused.
        let listed: Value = client
            .get(format!("{base}{INBOX_PATH}/api/approvals"))
            .bearer_auth(&running.token)
            .send()
            .await
            .expect("a response")
            .json()
            .await
            .expect("JSON");
        assert_eq!(listed, json!({"approvals": [], "next_cursor": null}));
        let answer = client
            .post(format!(
                "{base}{INBOX_PATH}/api/approvals/{}/decision",
                pending.id
            ))
            .bearer_auth(&running.token)
            .json(&json!({"decision": "approve"}))
            .send()
            .await
            .expect("a response");
        assert!(answer.status().is_client_error(), "{}", answer.status());

        // Nobody else answers in time: the call is blocked.
        let response: ResearchResponse = within(Duration::from_secs(10), "the research", request)
            .await
            .expect("an answer in time")
            .expect("the request task")
            .expect("a response")
            .json()
            .await
            .expect("JSON");
        assert_eq!(
            response.output,
            format!("Found: 3 recent articles about Rust. Publishing: {BLOCKED}")
        );
        assert!(running.service.published().is_empty());
        assert_eq!(statuses(store).await, [QuestionStatus::Expired]);
        running.server.abort();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_client_that_goes_away_withdraws_its_question() {
        let running = running(Duration::from_secs(30)).await;
        let client = client().expect("a client");
        let base = format!("http://{}", running.address);
        let request = tokio::spawn(
            client
                .post(format!("{base}/research"))
                .json(&json!({"topic": "Rust", "requester": "carol"}))
                .send(),
        );
        let question = question_about(&client, &base, &running.token, "Rust this week")
            .await
            .expect("a question");
        assert_eq!(question["agent"], "Researcher");

        // The client hangs up: axum drops the handler's future, which
        // drops the kickoff, which withdraws its question.
        request.abort();
        let store = &running.service.store;
        within(Duration::from_secs(5), "the withdrawal", async {
            while !store
                .pending()
                .await
                .expect("the pending questions")
                .is_empty()
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .expect("the question is withdrawn");
        assert_eq!(statuses(store).await, [QuestionStatus::Withdrawn]);
        assert!(running.service.published().is_empty());
        running.server.abort();
    }
}
