//! An HTTP service that runs a crew per request, where a person approves
//! each risky tool call through a second endpoint.
//!
//! - `POST /research {"topic": "Rust"}` runs a research crew on the topic
//!   and answers `{"topic": .., "output": ..}` when the crew is done.
//! - The crew's `publish_report` tool is risky: an `async` `PRE_TOOL_CALL`
//!   hook parks each of its calls as a pending approval and awaits a
//!   person's answer. No answer in time, a refusal, or an approval dropped
//!   unanswered all block the call: the gate fails closed.
//! - `GET /approvals` lists the pending approvals: id, tool, input, agent.
//! - `POST /approvals/{id} {"approve": true}` answers one.
//!
//! `cargo run --example axum_service` serves on 127.0.0.1:3000 (`--port N`
//! or the `PORT` variable for another port) and prints how to drive it with
//! curl. `cargo run --example axum_service -- --demo` serves on a free port
//! and drives itself: one report approved, one refused. Every crew runs on
//! the embedded scripted model, offline.

use std::collections::BTreeMap;
use std::error::Error;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use crew_examples::Transcript;
use crew_runtime::prelude::*;
use crew_runtime::serde::{Deserialize, Serialize};
use crew_runtime::{AsyncHookFn, Role, console};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The tool a person must approve.
const RISKY_TOOL: &str = "publish_report";

/// How long a call waits for a person when the service runs for real.
const APPROVAL_WAIT: Duration = Duration::from_secs(5 * 60);

/// A tool call waiting for a person, as `GET /approvals` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(crate = "crew_runtime::serde")]
struct PendingApproval {
    id: u64,
    tool: String,
    input: Value,
    agent_role: Option<String>,
}

/// The body of `POST /approvals/{id}`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(crate = "crew_runtime::serde")]
struct ApprovalAnswer {
    approve: bool,
}

/// The body of `POST /research`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(crate = "crew_runtime::serde")]
struct ResearchRequest {
    topic: String,
}

/// What `POST /research` answers.
#[derive(Debug, Serialize, Deserialize)]
#[serde(crate = "crew_runtime::serde")]
struct ResearchResponse {
    topic: String,
    output: String,
}

/// A pending approval and the way to answer the call waiting on it.
struct Waiting {
    approval: PendingApproval,
    answer: oneshot::Sender<bool>,
}

/// The approvals waiting for a person, shared by the hook (which opens
/// them) and the endpoints (which list and answer them).
#[derive(Default)]
struct Approvals {
    next_id: AtomicU64,
    waiting: Mutex<BTreeMap<u64, Waiting>>,
}

/// Why an answer could not be delivered.
#[derive(Debug, PartialEq)]
enum AnswerError {
    /// No approval has this id (never opened, or already answered).
    NotFound,
    /// The call stopped waiting (timed out, or its request went away).
    NoLongerWaiting,
}

impl Approvals {
    /// Opens an approval; the call waits on the receiver. The ticket
    /// takes the approval off the list when the call stops waiting, for
    /// whatever reason (answered, timed out, or its kickoff dropped because
    /// the client went away).
    fn open(
        self: &Arc<Self>,
        tool: &str,
        input: Value,
        agent_role: Option<&str>,
    ) -> (Ticket, oneshot::Receiver<bool>) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let (answer, answered) = oneshot::channel();
        let approval = PendingApproval {
            id,
            tool: tool.to_owned(),
            input,
            agent_role: agent_role.map(str::to_owned),
        };
        self.lock().insert(id, Waiting { approval, answer });
        let ticket = Ticket {
            approvals: Arc::clone(self),
            id,
        };
        (ticket, answered)
    }

    /// The pending approvals, oldest first.
    fn pending(&self) -> Vec<PendingApproval> {
        self.lock()
            .values()
            .map(|waiting| waiting.approval.clone())
            .collect()
    }

    /// Delivers a person's answer to the call waiting on approval `id`.
    fn answer(&self, id: u64, approve: bool) -> Result<PendingApproval, AnswerError> {
        let waiting = self.lock().remove(&id).ok_or(AnswerError::NotFound)?;
        waiting
            .answer
            .send(approve)
            .map_err(|_| AnswerError::NoLongerWaiting)?;
        Ok(waiting.approval)
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<u64, Waiting>> {
        // Entries are inserted and removed whole: a panic elsewhere cannot
        // leave the map half-written.
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Takes an approval off the list when dropped.
struct Ticket {
    approvals: Arc<Approvals>,
    id: u64,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        // Dropping the sender here, if it is still there, is harmless: the
        // receiver is gone or about to be.
        self.approvals.lock().remove(&self.id);
    }
}

/// What the service shares between requests.
#[derive(Clone)]
struct Service {
    approvals: Arc<Approvals>,
    /// The hooks of every crew the service runs: the approval gate.
    hooks: Arc<HookRegistry>,
    /// The titles `publish_report` really published, in order.
    published: Arc<Mutex<Vec<String>>>,
    /// What happens, line by line (printed as it happens when echoing).
    log: Transcript,
}

impl Service {
    /// A service whose risky calls wait at most `wait` for a person.
    fn new(wait: Duration, log: Transcript) -> Result<Self, RegisterError> {
        let approvals = Arc::new(Approvals::default());
        let hooks = Arc::new(HookRegistry::new());
        hooks.register_async_hook_with(
            PRE_TOOL_CALL,
            // Fail-closed: should the hook panic, the call is blocked too.
            HookOptions::new()
                .tools([RISKY_TOOL])
                .name("http-approval")
                .fail_closed(),
            approval_gate(Arc::clone(&approvals), wait, log.clone()),
        )?;
        Ok(Service {
            approvals,
            hooks,
            published: Arc::default(),
            log,
        })
    }

    /// A research crew for one request: it searches (an async tool),
    /// publishes a report (the risky tool), and answers with what both
    /// calls told it.
    fn research_crew(&self, topic: &str) -> Result<Crew, BuildError> {
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
        );
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
        );

        let model = ScriptedLlm::new()
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
            });
        let researcher = Agent::builder("Researcher")
            .goal("Keep the blog up to date")
            .tool(web_search)
            .tool(publish_report)
            .llm(Arc::new(model))
            .build();
        let task = Task::builder("Research {topic} and publish a short report")
            .agent(&researcher)
            .build();
        Crew::builder()
            .agent(researcher)
            .task(task)
            .global_registry(Arc::clone(&self.hooks))
            .build()
    }
}

/// The `async` `PRE_TOOL_CALL` hook: opens an approval, awaits a person's
/// answer for at most `wait`, and lets the call through only on a yes.
fn approval_gate(
    approvals: Arc<Approvals>,
    wait: Duration,
    log: Transcript,
) -> impl for<'c> AsyncHookFn<'c, ToolCallHookContext, Result<(), HookAborted>> {
    async_hook(move |ctx: &mut ToolCallHookContext| {
        let approvals = Arc::clone(&approvals);
        let log = log.clone();
        Box::pin(async move {
            let input = Value::Object(ctx.tool_input.clone());
            let shown = format!(
                "{} {input} for {}",
                ctx.tool_name(),
                ctx.agent_role().unwrap_or("no agent")
            );
            let (ticket, answered) = approvals.open(ctx.tool_name(), input, ctx.agent_role());
            let id = ticket.id;
            log.line(format!("service: approval {id} pending: {shown}"));
            let answer = tokio::time::timeout(wait, answered).await;
            drop(ticket);
            let refusal = match answer {
                Ok(Ok(true)) => {
                    log.line(format!("service: approval {id} approved, the call runs"));
                    return Ok(());
                }
                Ok(Ok(false)) => format!("approval {id} refused by a reviewer"),
                Ok(Err(_dropped)) => format!("approval {id} was dropped unanswered"),
                Err(_elapsed) => format!("no answer to approval {id} within {wait:?}"),
            };
            log.line(format!("service: {refusal}, the call is blocked"));
            Err(HookAborted::new(refusal, "http-approval"))
        })
    })
}

/// An error as the endpoints answer it: a status and `{"error": ..}`.
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

/// `POST /research`: runs a crew on the topic, and answers when it is
/// done (after any approval it waited for). Should the client go away,
/// axum drops this future, which cancels the kickoff and withdraws its
/// pending approval.
async fn research(
    State(service): State<Service>,
    Json(request): Json<ResearchRequest>,
) -> Result<Json<ResearchResponse>, ApiError> {
    let topic = request.topic.trim();
    if topic.is_empty() || topic.chars().count() > 100 {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "topic must be 1 to 100 characters",
        ));
    }
    service
        .log
        .line(format!("service: a crew starts researching {topic:?}"));
    let crew = service.research_crew(topic)?;
    let output = crew.kickoff([("topic", topic)]).await?;
    Ok(Json(ResearchResponse {
        topic: topic.to_owned(),
        output: output.raw,
    }))
}

/// `GET /approvals`: the pending approvals, oldest first.
async fn pending_approvals(State(service): State<Service>) -> Json<Vec<PendingApproval>> {
    Json(service.approvals.pending())
}

/// `POST /approvals/{id}`: a person's answer.
async fn answer_approval(
    State(service): State<Service>,
    Path(id): Path<u64>,
    Json(answer): Json<ApprovalAnswer>,
) -> Result<Json<Value>, ApiError> {
    match service.approvals.answer(id, answer.approve) {
        Ok(approval) => Ok(Json(json!({
            "id": approval.id,
            "tool": approval.tool,
            "approved": answer.approve,
        }))),
        Err(AnswerError::NotFound) => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no pending approval {id}"),
        )),
        Err(AnswerError::NoLongerWaiting) => Err(ApiError::new(
            StatusCode::GONE,
            format!("approval {id} is no longer waiting"),
        )),
    }
}

fn router(service: Service) -> Router {
    Router::new()
        .route("/research", post(research))
        .route("/approvals", get(pending_approvals))
        .route("/approvals/{id}", post(answer_approval))
        .with_state(service)
}

/// Serves on 127.0.0.1:`port` (0: any free port) in a task of its own;
/// returns the address it listens on.
async fn start(
    service: Service,
    port: u16,
) -> std::io::Result<(SocketAddr, JoinHandle<std::io::Result<()>>)> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, port)).await?;
    let address = listener.local_addr()?;
    let server = tokio::spawn(async move { axum::serve(listener, router(service)).await });
    Ok((address, server))
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

/// Polls `GET /approvals` until an approval for `tool` is pending.
async fn next_approval(
    client: &reqwest::Client,
    base: &str,
) -> Result<PendingApproval, Box<dyn Error>> {
    within(Duration::from_secs(5), "waiting for an approval", async {
        loop {
            let pending: Vec<PendingApproval> = client
                .get(format!("{base}/approvals"))
                .send()
                .await?
                .error_for_status()?
                .json()
                .await?;
            if let Some(approval) = pending.into_iter().next() {
                return Ok::<_, Box<dyn Error>>(approval);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await?
}

/// Asks for a report on `topic` and answers its approval with `approve`,
/// as a person at the second endpoint would; returns the crew's output.
async fn research_with_answer(
    client: &reqwest::Client,
    base: &str,
    topic: &str,
    approve: bool,
    log: &Transcript,
) -> Result<String, Box<dyn Error>> {
    log.line(format!(
        "client: POST /research {}",
        json!({"topic": topic})
    ));
    let request = client
        .post(format!("{base}/research"))
        .json(&json!({"topic": topic}))
        .send();
    // The request waits on the approval: it runs while the reviewer looks.
    let request = tokio::spawn(request);

    let approval = next_approval(client, base).await?;
    log.line(format!(
        "reviewer: GET /approvals lists approval {} ({} {})",
        approval.id, approval.tool, approval.input
    ));
    let answer = json!({"approve": approve});
    log.line(format!(
        "reviewer: POST /approvals/{} {answer}",
        approval.id
    ));
    client
        .post(format!("{base}/approvals/{}", approval.id))
        .json(&answer)
        .send()
        .await?
        .error_for_status()?;

    let response = within(Duration::from_secs(5), "the research", request).await?;
    let response: ResearchResponse = response??.error_for_status()?.json().await?;
    log.line(format!("client: the crew answered: {}", response.output));
    Ok(response.output)
}

/// Drives the service at `address` through both endpoints: a report
/// approved, then one refused.
async fn demo(address: SocketAddr, log: &Transcript) -> Result<Vec<String>, Box<dyn Error>> {
    let client = client()?;
    let base = format!("http://{address}");
    let approved = research_with_answer(&client, &base, "Rust", true, log).await?;
    let refused = research_with_answer(&client, &base, "Cobol", false, log).await?;
    Ok(vec![approved, refused])
}

/// How the example was asked to run.
struct Options {
    demo: bool,
    port: u16,
}

fn options() -> Result<Options, Box<dyn Error>> {
    let mut options = Options {
        demo: false,
        port: match std::env::var("PORT") {
            Ok(port) => port
                .parse()
                .map_err(|_| format!("PORT={port:?} is no port"))?,
            Err(_) => 3000,
        },
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--demo" => options.demo = true,
            "--port" => {
                let port = args.next().ok_or("--port needs a number")?;
                options.port = port
                    .parse()
                    .map_err(|_| format!("--port {port:?} is no port"))?;
            }
            other => {
                return Err(format!("unknown argument {other:?} (try --demo or --port N)").into());
            }
        }
    }
    Ok(options)
}

async fn run() -> Result<Vec<String>, Box<dyn Error>> {
    let options = options()?;
    let log = Transcript::new().echo();
    if options.demo {
        let service = Service::new(Duration::from_secs(10), log.clone())?;
        let (address, server) = start(service, 0).await?;
        log.line(format!(
            "research service listening on http://{address} (demo)"
        ));
        demo(address, &log).await?;
        server.abort();
        return Ok(Vec::new());
    }
    let service = Service::new(APPROVAL_WAIT, log.clone())?;
    let (address, server) = start(service, options.port).await?;
    let base = format!("http://{address}");
    for line in [
        format!("research service listening on {base}"),
        "Ask for a report (the request waits while the publication awaits approval):".to_owned(),
        format!(
            "  curl -s -X POST {base}/research -H 'content-type: application/json' -d '{{\"topic\": \"Rust\"}}'"
        ),
        "Then, from another terminal, list and answer the pending approvals:".to_owned(),
        format!("  curl -s {base}/approvals"),
        format!(
            "  curl -s -X POST {base}/approvals/1 -H 'content-type: application/json' -d '{{\"approve\": true}}'"
        ),
        format!(
            "A call nobody answers within {APPROVAL_WAIT:?} is blocked. Ctrl-C stops the service."
        ),
    ] {
        console::print_line(&line);
    }
    server.await??;
    Ok(Vec::new())
}

#[tokio::main]
async fn main() -> ExitCode {
    // Lines are printed as things happen: nothing is left to print.
    crew_examples::report(run().await)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BLOCKED: &str = "Tool execution blocked by hook. Tool: publish_report";

    fn published(service: &Service) -> Vec<String> {
        service
            .published
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    #[tokio::test]
    async fn an_approved_call_runs_and_a_refused_one_is_blocked() {
        let log = Transcript::new();
        let service =
            Service::new(Duration::from_secs(5), log.clone()).expect("the gate registers");
        let (address, server) = start(service.clone(), 0).await.expect("the server starts");

        let outputs = demo(address, &log).await.expect("the demo runs");

        // The approved call ran, and its observation reached the model,
        // which built its answer from it.
        assert_eq!(
            outputs[0],
            "Found: 3 recent articles about Rust. Publishing: published \"Rust this week\" as post #1"
        );
        // The refused one never ran: the model was told it was blocked.
        assert_eq!(
            outputs[1],
            format!("Found: 3 recent articles about Cobol. Publishing: {BLOCKED}")
        );
        assert_eq!(published(&service), ["Rust this week"]);
        crew_examples::assert_lines_in_order(
            &log.lines(),
            &[
                "service: approval 1 pending: publish_report {\"body\":\"Three articles, summed up.\",\"title\":\"Rust this week\"} for Researcher",
                "reviewer: POST /approvals/1 {\"approve\":true}",
                "service: approval 1 approved, the call runs",
                "service: approval 2 pending: publish_report {\"body\":\"Three articles, summed up.\",\"title\":\"Cobol this week\"} for Researcher",
                "reviewer: POST /approvals/2 {\"approve\":false}",
                "service: approval 2 refused by a reviewer, the call is blocked",
            ],
        );
        assert!(service.approvals.pending().is_empty());

        // An approval answered once, or never opened, cannot be answered.
        let client = client().expect("a client");
        let again = within(
            Duration::from_secs(5),
            "answering again",
            client
                .post(format!("http://{address}/approvals/1"))
                .json(&json!({"approve": true}))
                .send(),
        )
        .await
        .expect("an answer in time")
        .expect("a response");
        assert_eq!(again.status(), reqwest::StatusCode::NOT_FOUND);
        server.abort();
    }

    #[tokio::test]
    async fn an_unanswered_approval_blocks_the_call() {
        let log = Transcript::new();
        let service =
            Service::new(Duration::from_millis(100), log.clone()).expect("the gate registers");
        let (address, server) = start(service.clone(), 0).await.expect("the server starts");

        let client = client().expect("a client");
        let response: ResearchResponse = within(Duration::from_secs(5), "the research", async {
            client
                .post(format!("http://{address}/research"))
                .json(&json!({"topic": "Rust"}))
                .send()
                .await?
                .error_for_status()?
                .json()
                .await
        })
        .await
        .expect("an answer in time")
        .expect("a response");

        assert_eq!(
            response.output,
            format!("Found: 3 recent articles about Rust. Publishing: {BLOCKED}")
        );
        assert!(published(&service).is_empty());
        assert!(service.approvals.pending().is_empty(), "withdrawn");
        crew_examples::assert_has_lines(
            &log.lines(),
            &["service: no answer to approval 1 within 100ms, the call is blocked"],
        );
        server.abort();
    }

    #[tokio::test]
    async fn a_client_that_goes_away_withdraws_its_approval() {
        let service =
            Service::new(Duration::from_secs(30), Transcript::new()).expect("the gate registers");
        let (address, server) = start(service.clone(), 0).await.expect("the server starts");
        let client = client().expect("a client");
        let base = format!("http://{address}");
        let request = tokio::spawn(
            client
                .post(format!("{base}/research"))
                .json(&json!({"topic": "Rust"}))
                .send(),
        );
        let approval = next_approval(&client, &base).await.expect("an approval");
        assert_eq!(approval.agent_role.as_deref(), Some("Researcher"));

        // The client hangs up: axum drops the handler's future, which
        // drops the kickoff, which drops the hook's future and its ticket.
        request.abort();
        within(Duration::from_secs(5), "the withdrawal", async {
            while !service.approvals.pending().is_empty() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .expect("the approval is withdrawn");
        assert_eq!(
            service.approvals.answer(approval.id, true),
            Err(AnswerError::NotFound)
        );
        assert!(published(&service).is_empty());
        server.abort();
    }

    #[test]
    fn an_approval_whose_call_stopped_waiting_cannot_be_answered() {
        let approvals = Arc::new(Approvals::default());
        let (ticket, answered) = approvals.open(RISKY_TOOL, json!({}), Some("Researcher"));
        drop(answered);
        assert_eq!(
            approvals.answer(ticket.id, true),
            Err(AnswerError::NoLongerWaiting)
        );
        let (ticket, _answered) = approvals.open(RISKY_TOOL, json!({}), None);
        let id = ticket.id;
        drop(ticket);
        assert_eq!(approvals.answer(id, true), Err(AnswerError::NotFound));
    }
}
