//! SPEC §13 "Parking": a kickoff parked on PostgreSQL outlives a restart of
//! the database. A resumer running in the background through the restart
//! (it looks for work only when told, here: once an hour) is woken by the
//! answer given after it through another connection to the store (as
//! another replica would: only PostgreSQL's `NOTIFY` can tell it), and the
//! refund runs once.
//!
//! Its own test binary: it restarts the binary's PostgreSQL cluster, which
//! would cut every other test's connections.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crew_runtime::ToolAnnotations;
use crew_runtime::durable::{Durable, Resumer};
use crew_runtime::guards::ApprovalGate;
use crew_runtime::prelude::*;
use crew_runtime::store::journal::{JournalKey, KickoffId, KickoffStatus};
use crew_runtime::store::{Answer, Decision, Store, StoreApprovals};
use serde_json::json;

/// How long any wait here lasts at most.
const PATIENCE: Duration = Duration::from_secs(30);

/// A crew that refunds order A-1 once a person approves, parking at once
/// while it waits; and how many refunds it made.
fn refund_crew(store: &Store) -> (Crew, Arc<AtomicUsize>) {
    let refunds = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&refunds);
    let refund = Tool::dynamic(
        "refund",
        "Refunds an order",
        json!({"type": "object"}),
        move |_| {
            counted.fetch_add(1, Ordering::SeqCst);
            Ok::<_, String>(json!("refunded"))
        },
    )
    .with_annotations(ToolAnnotations::new().destructive(true))
    .with_timeout(Duration::from_secs(1));
    let llm = ScriptedLlm::new()
        .call("refund", json!({"order": "A-1"}))
        .answer("settled");
    let support = Agent::builder("Support")
        .llm(Arc::new(llm) as Arc<dyn Llm>)
        .tool(refund)
        .build();
    let crew = Crew::builder()
        .name("refunds")
        .agent(support.clone())
        .task(
            Task::builder("Settle order {order}")
                .agent(&support)
                .build(),
        )
        .global_registry(Arc::new(HookRegistry::new()))
        .human_input(Arc::new(StoreApprovals::new(store.clone())))
        .async_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("approval-gate"),
            ApprovalGate::for_capabilities([Capability::Destructive]).pre_hook(),
        )
        .durable(
            Durable::new(store.clone())
                .journal_key(JournalKey::generate().expect("a key"))
                .lease(Duration::from_secs(1))
                .park_after(Duration::ZERO),
        )
        .build()
        .expect("builds")
        .for_user("customer-7");
    (crew, refunds)
}

/// Waits until `check` holds, retrying what fails meanwhile (the store
/// reconnecting after the restart), at most [`PATIENCE`].
async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let started = std::time::Instant::now();
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "{what}: not within {PATIENCE:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kickoff_parked_across_a_postgres_restart_wakes_on_the_answer_and_refunds_once() {
    let Some(url) = support::postgres_database().await else {
        return;
    };
    let store = Store::connect(&url).await.expect("connects");
    let (crew, refunds) = refund_crew(&store);
    let id = match tokio::time::timeout(PATIENCE, crew.kickoff([("order", "A-1")]))
        .await
        .expect("returns once parked")
    {
        Err(CrewError::Parked { kickoff_id }) => kickoff_id.parse::<KickoffId>().expect("an id"),
        other => panic!("expected Parked, got {other:?}"),
    };
    // A resumer in the background, which looks only when told of a change
    // (or once an hour): through the restart, the answer must reach it.
    let resumer = Resumer::new(store.clone())
        .crew(&crew)
        .every(Duration::from_secs(3600));
    let background = tokio::spawn(async move { resumer.run().await });
    tokio::time::sleep(Duration::from_millis(200)).await;

    tokio::task::spawn_blocking(support::restart_postgres)
        .await
        .expect("restarted");

    // The question and the kickoff are still there once the store is back.
    let question = eventually("the question is read back", || async {
        store.pending().await.ok()?.into_iter().next()
    })
    .await;
    assert_eq!(
        question.kickoff_id.as_deref(),
        Some(id.to_string().as_str())
    );
    assert_eq!(
        store.kickoff(&id).await.expect("reads").status,
        KickoffStatus::Parked
    );
    assert_eq!(refunds.load(Ordering::SeqCst), 0);
    // Answered through a store of its own: this process's resumer hears of
    // it only from the database.
    let elsewhere = Store::connect(&url).await.expect("connects");
    elsewhere
        .decide(&question.id, Answer::new("ops", Decision::Approve))
        .await
        .expect("ops may approve");
    let status = eventually("the kickoff completes", || async {
        let status = store.kickoff(&id).await.ok()?.status;
        (status == KickoffStatus::Completed).then_some(status)
    })
    .await;
    assert_eq!(status, KickoffStatus::Completed);
    assert_eq!(refunds.load(Ordering::SeqCst), 1, "refunded once");
    background.abort();
}
