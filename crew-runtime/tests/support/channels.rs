//! What the channels' tests share: a server on loopback, and a question
//! about a refund asked and waited for. A test file includes it as
//! `#[path = "support/channels.rs"] mod channels;`.

#![allow(dead_code)] // each test file uses a different part

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crew_runtime::channels::AnnouncementFailed;
use crew_runtime::store::{Question, Store, StoreApprovals};
use crew_runtime::{HumanAnswer, HumanInputError, HumanInputRequest, HumanInputSource};
use hooks_core::{Event, EventBus};
use serde_json::json;

/// How long a test waits for what must happen.
pub(crate) const PATIENCE: Duration = Duration::from_secs(30);

/// A call waiting for its question's answer.
pub(crate) type Waiting = tokio::task::JoinHandle<Result<HumanAnswer, HumanInputError>>;

/// Serves `router` on a free port of 127.0.0.1: its origin.
pub(crate) async fn serve(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let origin = format!("http://{}", listener.local_addr().expect("bound"));
    tokio::spawn(async move { axum::serve(listener, router).await });
    origin
}

/// A question about refunding order A-17, asked for carol.
pub(crate) fn refund_request() -> HumanInputRequest {
    let mut request = HumanInputRequest::new("Refund order A-17?", "yes/no")
        .with_call_id("call_1")
        .with_tool("refund", json!({"order": "A-17", "amount": 120}))
        .with_agent_role("Support");
    request.task = Some("Handle the ticket".into());
    request.crew = Some("support-desk".into());
    request.requester = Some("carol".into());
    request.timeout = Some(PATIENCE);
    request
}

/// Asks [`refund_request`] through `approvals` on a task of its own.
pub(crate) fn ask(approvals: &StoreApprovals) -> Waiting {
    let approvals = approvals.clone();
    tokio::spawn(async move { approvals.answer(refund_request()).await })
}

/// The pending questions once there are `count` of them.
pub(crate) async fn pending(store: &Store, count: usize) -> Vec<Question> {
    let started = Instant::now();
    loop {
        let pending = store.pending().await.expect("lists");
        if pending.len() == count {
            return pending;
        }
        assert!(started.elapsed() < PATIENCE, "{} pending", pending.len());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The answer `waiting` gets.
pub(crate) async fn answered(waiting: Waiting) -> HumanAnswer {
    tokio::time::timeout(PATIENCE, waiting)
        .await
        .expect("answered in time")
        .expect("no panic")
        .expect("an answer")
}

/// An event bus for an announcer, and every failed delivery it carried.
pub(crate) fn failure_bus() -> (Arc<EventBus>, Arc<Mutex<Vec<AnnouncementFailed>>>) {
    let bus = Arc::new(EventBus::new());
    let failures = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&failures);
    bus.subscribe(move |event: &Event| {
        if let Event::Integration(integration) = event
            && let Some(failed) = integration.downcast_ref::<AnnouncementFailed>()
        {
            seen.lock().expect("seen").push(failed.clone());
        }
    });
    (bus, failures)
}

/// Posts `decision` on the link `token` to the inbox at `served`, from a
/// page of `origin`, as `session` (its cookie and CSRF token) or signed
/// out: the status and the page.
pub(crate) async fn post_link(
    served: &str,
    origin: &str,
    token: &str,
    decision: &str,
    session: Option<&(String, String)>,
) -> (u16, String) {
    let mut form = vec![("decision", decision.to_owned())];
    let mut request = reqwest::Client::new()
        .post(format!("{served}/links/{token}"))
        .header("origin", origin);
    if let Some((cookie, csrf)) = session {
        request = request.header("cookie", format!("crew_inbox_session={cookie}"));
        form.push(("csrf", csrf.clone()));
    }
    let response = request.form(&form).send().await.expect("the inbox answers");
    let status = response.status().as_u16();
    (status, response.text().await.expect("a page"))
}
