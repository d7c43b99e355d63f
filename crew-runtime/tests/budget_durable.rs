//! Budgets in durable kickoffs (SPEC §15, "Reservations are keyed by the
//! call (its idempotency key in a durable kickoff), so a resumed or
//! re-checked call is never counted twice"): a kickoff interrupted after
//! its budget reserved a call (its future dropped, as a crashed process
//! leaves it) and resumed from its journal counts that call once, on the
//! store's ledger, on a real SQLite file and a real PostgreSQL server.

#[path = "support/stores.rs"]
mod stores;
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crew_runtime::budget::{Budget, Charge, Ledger, Per};
use crew_runtime::durable::{Durable, DurableError};
use crew_runtime::llm::{Llm, LlmError, LlmRequest, ModelTurn};
use crew_runtime::prelude::*;
use crew_runtime::store::Store;
use crew_runtime::store::journal::{JournalKey, KickoffId, KickoffStatus};
use crew_runtime::{CrewBuilder, Role, ToolCallRequest, async_trait};
use tokio::sync::Notify;

use stores::{Keep, on_both_stores};

/// The lease the crews here hold their kickoffs with.
const LEASE: Duration = Duration::from_secs(1);
/// How long any wait here lasts at most.
const PATIENCE: Duration = Duration::from_secs(30);

on_both_stores!(
    a_budgeted_call_whose_hooks_run_again_after_a_crash_is_counted_once,
    a_budgeted_model_turn_asked_again_after_a_crash_is_counted_once,
    a_budget_counts_the_calls_of_two_durable_kickoffs_apart,
    a_resumed_kickoff_counts_in_the_budgets_of_the_tenant_it_started_for,
);

/// A tool that counts its runs.
fn counted(name: &str, runs: &Arc<AtomicUsize>) -> Tool {
    let runs = Arc::clone(runs);
    Tool::dynamic(name, "Pays it back", json!({"type": "object"}), move |_| {
        runs.fetch_add(1, Ordering::SeqCst);
        Ok::<_, String>(json!("refunded"))
    })
    .idempotent()
    .with_timeout(Duration::from_secs(5))
}

/// A model that calls `refund` until the conversation holds its result,
/// then answers: asked again for a turn (after a crash), it answers the
/// same. Its first request never ends when `stall` is set (after saying so
/// on it).
#[derive(Default)]
struct Refunder {
    asked: AtomicUsize,
    stall: Option<Arc<Notify>>,
}

impl Refunder {
    fn asked(&self) -> usize {
        self.asked.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Llm for Refunder {
    fn name(&self) -> &str {
        "refunder"
    }

    async fn complete(&self, request: &LlmRequest<'_>) -> Result<ModelTurn, LlmError> {
        if self.asked.fetch_add(1, Ordering::SeqCst) == 0
            && let Some(stall) = &self.stall
        {
            stall.notify_one();
            std::future::pending::<()>().await;
        }
        if request
            .messages
            .iter()
            .any(|message| message.role == Role::Tool)
        {
            return Ok(ModelTurn::FinalAnswer("refunded".to_owned()));
        }
        Ok(ModelTurn::ToolCalls {
            content: String::new(),
            calls: vec![ToolCallRequest {
                id: "call_1".to_owned(),
                name: "refund".to_owned(),
                arguments: r#"{"order": "A-1"}"#.to_owned(),
            }],
        })
    }
}

/// A durable crew named `refunds` on `store`, with the tool-call budget
/// `refunds` (per crew, on the store's ledger) and a model-call budget
/// `turns`, then the hooks `after` adds.
fn durable_crew(
    store: &Store,
    key: &JournalKey,
    llm: Arc<dyn Llm>,
    runs: &Arc<AtomicUsize>,
    after: impl FnOnce(CrewBuilder) -> CrewBuilder,
) -> Crew {
    durable_crew_per(store, key, llm, runs, Per::Crew, after)
}

/// [`durable_crew`], its budgets counted `per`.
fn durable_crew_per(
    store: &Store,
    key: &JournalKey,
    llm: Arc<dyn Llm>,
    runs: &Arc<AtomicUsize>,
    per: Per,
    after: impl FnOnce(CrewBuilder) -> CrewBuilder,
) -> Crew {
    let clerk = Agent::builder("Clerk")
        .llm(llm)
        .tool(counted("refund", runs))
        .build();
    let builder = Crew::builder()
        .name("refunds")
        .agent(clerk.clone())
        .task(Task::builder("Refund {order}").agent(&clerk).build())
        .global_registry(Arc::new(HookRegistry::new()))
        .budget(Budget::tool_calls("refunds", 10).per(per))
        .budget(Budget::model_calls("turns", 10).per(per))
        .budget_ledger(Arc::new(store.clone()));
    after(builder)
        .durable(
            Durable::new(store.clone())
                .journal_key(key.clone())
                .lease(LEASE),
        )
        .build()
        .expect("builds")
}

/// What the budget `name` (per crew `refunds`) has counted.
async fn used(store: &Store, name: &str) -> u64 {
    used_by(store, name, "crew:refunds").await
}

/// What the budget `name` has counted for `key`.
async fn used_by(store: &Store, name: &str, key: &str) -> u64 {
    store
        .used(&Charge::new(name, key, 10, 1))
        .await
        .expect("reads the counter")
}

/// Starts a kickoff of `crew`, waits until `stalled` says it stopped where
/// the test holds it, then drops it there (as a process gone at that
/// point leaves it). Its id.
async fn interrupted(crew: &Crew, store: &Store, stalled: &Arc<Notify>) -> KickoffId {
    let running = tokio::spawn({
        let crew = crew.clone();
        async move { crew.kickoff([("order", "A-1")]).await }
    });
    tokio::time::timeout(PATIENCE, stalled.notified())
        .await
        .expect("the kickoff reaches the point it is held at");
    running.abort();
    let _ = running.await;
    let kickoffs = store.kickoffs().await.expect("lists");
    assert_eq!(kickoffs.len(), 1, "{kickoffs:?}");
    kickoffs[0].id
}

/// Resumes `id` once it can be claimed (its lease run out).
async fn resume(crew: &Crew, id: &KickoffId) -> CrewOutput {
    let started = std::time::Instant::now();
    loop {
        match crew.resume(id).await {
            Err(CrewError::Integration(error))
                if matches!(
                    error.downcast_ref::<DurableError>(),
                    Some(DurableError::NotResumable { status, .. }) if status.starts_with("running")
                ) && started.elapsed() < PATIENCE =>
            {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            other => return other.expect("resumes"),
        }
    }
}

async fn a_budgeted_call_whose_hooks_run_again_after_a_crash_is_counted_once(
    store: Store,
    _keep: Keep,
) {
    let key = JournalKey::generate().expect("a key");
    let runs = Arc::new(AtomicUsize::new(0));
    let stalled = Arc::new(Notify::new());
    // A hook after the budget holds the first call: the budget reserved
    // it, no intent is journaled, so the resumed kickoff runs the call's
    // PRE chain (the budget's hook included) again.
    let checks = Arc::new(AtomicUsize::new(0));
    let hold = {
        let (stalled, checks) = (Arc::clone(&stalled), Arc::clone(&checks));
        move |builder: CrewBuilder| {
            builder.async_hook_with(
                PRE_TOOL_CALL,
                HookOptions::new().name("slow-check"),
                crew_runtime::async_hook::<ToolCallHookContext, _, _>(move |_| {
                    let (stalled, checks) = (Arc::clone(&stalled), Arc::clone(&checks));
                    Box::pin(async move {
                        if checks.fetch_add(1, Ordering::SeqCst) == 0 {
                            stalled.notify_one();
                            std::future::pending::<()>().await;
                        }
                        Ok::<(), HookAborted>(())
                    })
                }),
            )
        }
    };
    let llm = Arc::new(Refunder::default());
    let crew = durable_crew(&store, &key, llm.clone(), &runs, hold);
    let id = interrupted(&crew, &store, &stalled).await;
    assert_eq!(
        used(&store, "refunds").await,
        1,
        "reserved before the crash"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0, "the tool never started");

    let output = resume(&crew, &id).await;
    assert_eq!(output.raw, "refunded");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(
        checks.load(Ordering::SeqCst),
        2,
        "the call's PRE chain ran again on resume"
    );
    assert_eq!(
        used(&store, "refunds").await,
        1,
        "the call is counted once, by its idempotency key"
    );
    // Its turn's answer was not journaled yet (an answer is committed with
    // its first call's intent): the turn was asked again, counted once.
    assert_eq!(llm.asked(), 3);
    assert_eq!(used(&store, "turns").await, 2);
    assert_eq!(
        store.kickoff(&id).await.expect("reads").status,
        KickoffStatus::Completed
    );
}

/// A durable crew whose budgets count `per`, its kickoff (for `tenant`,
/// if given) dropped while its model answers the first turn: the crew,
/// its model, the tool's runs, and the kickoff's id.
async fn interrupted_in_the_first_turn(
    store: &Store,
    per: Per,
    tenant: Option<&str>,
) -> (Crew, Arc<Refunder>, Arc<AtomicUsize>, KickoffId) {
    let key = JournalKey::generate().expect("a key");
    let runs = Arc::new(AtomicUsize::new(0));
    let stalled = Arc::new(Notify::new());
    let llm = Arc::new(Refunder {
        stall: Some(Arc::clone(&stalled)),
        ..Refunder::default()
    });
    let crew = durable_crew_per(store, &key, llm.clone(), &runs, per, |builder| builder);
    let started = match tenant {
        Some(tenant) => crew.for_tenant(tenant),
        None => crew.clone(),
    };
    let id = interrupted(&started, store, &stalled).await;
    (crew, llm, runs, id)
}

async fn a_budgeted_model_turn_asked_again_after_a_crash_is_counted_once(
    store: Store,
    _keep: Keep,
) {
    let (crew, llm, _, id) = interrupted_in_the_first_turn(&store, Per::Crew, None).await;
    assert_eq!(used(&store, "turns").await, 1, "the first turn reserved");

    let output = resume(&crew, &id).await;
    assert_eq!(output.raw, "refunded");
    assert_eq!(
        llm.asked(),
        3,
        "the first turn asked twice, then the second"
    );
    assert_eq!(
        used(&store, "turns").await,
        2,
        "two turns, the one asked again counted once"
    );
    assert_eq!(used(&store, "refunds").await, 1);
}

async fn a_budget_counts_the_calls_of_two_durable_kickoffs_apart(store: Store, _keep: Keep) {
    // Keys are the kickoff's own: the same place in another kickoff is
    // another call, counted again.
    let key = JournalKey::generate().expect("a key");
    let runs = Arc::new(AtomicUsize::new(0));
    let llm = Arc::new(Refunder::default());
    let crew = durable_crew(&store, &key, llm, &runs, |builder| builder);
    crew.kickoff([("order", "A-1")]).await.expect("runs");
    crew.kickoff([("order", "A-1")]).await.expect("runs");
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert_eq!(used(&store, "refunds").await, 2);
    assert_eq!(used(&store, "turns").await, 4);
}

async fn a_resumed_kickoff_counts_in_the_budgets_of_the_tenant_it_started_for(
    store: Store,
    _keep: Keep,
) {
    let (crew, _, runs, id) =
        interrupted_in_the_first_turn(&store, Per::Tenant, Some("acme")).await;
    assert_eq!(used_by(&store, "turns", "tenant:acme").await, 1);

    // Resumed by a value of the crew for no tenant: the kickoff still
    // runs for acme, whose budgets count its calls.
    let output = resume(&crew, &id).await;
    assert_eq!(output.raw, "refunded");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(used_by(&store, "turns", "tenant:acme").await, 2);
    assert_eq!(used_by(&store, "refunds", "tenant:acme").await, 1);
}
