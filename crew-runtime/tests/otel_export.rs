//! The runtime's spans and the audit records reach an OpenTelemetry
//! collector over OTLP/HTTP (feature `otel`). The collector is a stand-in:
//! a local HTTP server that answers `POST /v1/traces` with 200 and keeps
//! the bodies. Protobuf keeps strings as they are, so the span names, the
//! tool names and the audit kinds are looked for as bytes in the bodies.
//!
//! Each test installs its subscriber for its own thread only
//! (`set_default`, on a current-thread runtime where the crew's tasks
//! run), so the tests of this binary do not see each other's spans.
//! Every wait is bounded: a regression fails an assertion, never hangs.

mod common;

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::*;
use crew_runtime::audit::AuditTrail;
use crew_runtime::otel::OtlpExport;
use crew_runtime::prelude::*;
use crew_runtime::store::Store;
use tracing_subscriber::layer::SubscriberExt;

/// A collector stand-in: the body of every export it took.
struct Collector {
    url: String,
    received: Log<Vec<u8>>,
    server: Arc<tiny_http::Server>,
    thread: Option<JoinHandle<()>>,
}

impl Collector {
    fn start() -> Collector {
        let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").expect("a local port"));
        let port = server.server_addr().to_ip().expect("an IP address").port();
        let received = log();
        let thread = {
            let server = server.clone();
            let received = received.clone();
            std::thread::spawn(move || {
                for mut request in server.incoming_requests() {
                    let mut body = Vec::new();
                    let read = request.as_reader().read_to_end(&mut body);
                    let status = if request.method() == &tiny_http::Method::Post
                        && request.url() == "/v1/traces"
                        && read.is_ok()
                    {
                        push(&received, body);
                        200
                    } else {
                        404
                    };
                    let _ = request.respond(tiny_http::Response::empty(status));
                }
            })
        };
        Collector {
            url: format!("http://127.0.0.1:{port}"),
            received,
            server,
            thread: Some(thread),
        }
    }

    /// Every body received so far, one after the other.
    fn bodies(&self) -> Vec<u8> {
        take(&self.received).concat()
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

/// A crew of one agent: the model looks an order up, then answers.
fn support_crew() -> Crew {
    let lookup = Tool::dynamic(
        "lookup_order",
        "Looks an order up",
        json!({"type": "object", "properties": {"id": {"type": "string"}}}),
        |args| Ok::<_, String>(json!(format!("order {} shipped", args["id"]))),
    );
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("lookup_order", json!({"id": "A-17"}))
            .answer("Your order shipped."),
    );
    let support = agent("Support", vec![lookup], &llm);
    crew(&fresh_registry(), support)
}

#[tokio::test]
async fn spans_and_audit_records_reach_the_collector() {
    let collector = Collector::start();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = Store::connect(&format!(
        "sqlite://{}",
        dir.path().join("audit.db").display()
    ))
    .await
    .expect("SQLite opens");
    let trail = AuditTrail::open(store).expect("the trail opens");

    let (layer, telemetry) = OtlpExport::http(&collector.url)
        .service_name("support-desk")
        .timeout(Duration::from_secs(5))
        .layer()
        .expect("the export sets up");
    let scope = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));

    let crew = support_crew();
    trail.attach(&crew);
    let output = tokio::time::timeout(Duration::from_secs(30), crew.kickoff(()))
        .await
        .expect("the kickoff ends in time")
        .expect("the kickoff succeeds");
    assert_eq!(output.raw, "Your order shipped.");
    tokio::time::timeout(Duration::from_secs(30), trail.flush())
        .await
        .expect("the trail flushes in time")
        .expect("the trail is written");
    drop(scope);

    // The shutdown waits for the collector: off the runtime's thread.
    tokio::task::spawn_blocking(move || telemetry.shutdown())
        .await
        .expect("the shutdown does not panic")
        .expect("everything was exported");

    let bodies = collector.bodies();
    assert!(!bodies.is_empty(), "the collector received nothing");
    for expected in [
        // The resource.
        "support-desk",
        // The spans and their GenAI attributes.
        "crew.kickoff",
        "invoke_workflow",
        "invoke_agent",
        "chat",
        "execute_tool",
        "gen_ai.tool.name",
        "lookup_order",
        "Support",
        // The audit records, as span events.
        "audit record",
        "audit.kind",
        "kickoff_started",
        "tool_started",
        "tool_finished",
        "kickoff_ended",
        "A-17",
    ] {
        assert!(
            contains(&bodies, expected),
            "`{expected}` is not in what the collector received"
        );
    }
}

#[tokio::test]
async fn an_unreachable_collector_neither_stalls_nor_fails_a_crew() {
    // A port that was free a moment ago: nothing answers there.
    let url = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a local port");
        format!("http://{}", listener.local_addr().expect("its address"))
    };
    let (layer, telemetry) = OtlpExport::http(url)
        .timeout(Duration::from_secs(2))
        .layer()
        .expect("the export sets up");
    let scope = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));

    let started = Instant::now();
    for _ in 0..3 {
        let output = tokio::time::timeout(Duration::from_secs(10), support_crew().kickoff(()))
            .await
            .expect("the kickoff ends in time")
            .expect("the kickoff succeeds");
        assert_eq!(output.raw, "Your order shipped.");
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the crews waited for the collector"
    );
    drop(scope);

    // The spans cannot be sent: the shutdown says so, within its timeout.
    let started = Instant::now();
    let _ = tokio::task::spawn_blocking(move || telemetry.shutdown())
        .await
        .expect("the shutdown does not panic");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the shutdown waited {:?}",
        started.elapsed()
    );
}

#[test]
fn a_malformed_endpoint_is_an_error() {
    for endpoint in ["collector:4318", "not a url", "https://collector:4318", ""] {
        let error = OtlpExport::http(endpoint)
            .layer::<tracing_subscriber::Registry>()
            .err()
            .expect("refused");
        assert!(
            error.to_string().contains("cannot export to"),
            "{endpoint:?}: {error}"
        );
    }
}
