//! Durable kickoffs in the runtime (SPEC §13): a kickoff journaled step by
//! step, interrupted (its future dropped while a tool runs, as a crashed
//! process leaves it) and resumed from its journal, on a real SQLite file
//! and a real PostgreSQL server. Every scenario runs on both.
//!
//! Leases are short (1 s, renewed every third of it: long enough for a
//! loaded machine to renew them in time) and tools' timeouts small, so a
//! call in doubt is judged within two seconds; every wait is bounded.

#[path = "support/stores.rs"]
mod stores;
mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crew_runtime::audit::{self, AuditTrail};
use crew_runtime::durable::{
    CrewKickoffParkedEvent, CrewKickoffResumedEvent, Durable, DurableError, InDoubtOutcome,
    Resumer, ToolCallInDoubtEvent,
};
use crew_runtime::guards::ApprovalGate;
use crew_runtime::prelude::*;
use crew_runtime::store::Store;
use crew_runtime::store::journal::{JournalKey, KickoffId, KickoffStatus};
use crew_runtime::store::{Answer, Decision, StoreApprovals};
use crew_runtime::{
    CurrentCall, EXECUTION_END, EXECUTION_START, ExecutionEndContext, ExecutionStartContext, INPUT,
    InputContext, Reconciled, ScriptedInput, ToolAnnotations,
};
use serde_json::json;
use tokio::sync::Notify;

/// The lease every crew here holds its kickoffs with.
const LEASE: Duration = Duration::from_secs(1);
/// How long any wait here lasts at most.
const PATIENCE: Duration = Duration::from_secs(30);

use stores::{Keep, on_both_stores};

on_both_stores!(
    a_durable_kickoff_runs_to_its_end_and_its_journal_is_purged,
    a_resumed_kickoff_asks_no_model_and_runs_no_finished_call_again,
    execution_start_and_input_run_once_and_execution_end_once_across_a_resume,
    an_idempotent_call_in_doubt_runs_again_with_the_same_key,
    a_call_in_doubt_that_may_not_run_again_ends_the_kickoff_in_doubt,
    a_reconciled_effect_that_happened_is_not_run_again,
    a_reconciled_effect_that_did_not_happen_runs_as_a_new_attempt,
    a_crew_that_changed_since_is_refused_with_the_difference_named,
    a_cancelled_kickoff_stops_before_its_next_tool,
    a_started_kickoff_is_taken_up_by_a_resumer_of_its_crew_only,
    a_kickoff_held_elsewhere_or_ended_is_not_resumed,
    a_durable_kickoffs_question_outlives_its_process_and_its_answer_reaches_the_resumed_run,
    an_answer_taken_before_the_process_went_is_used_again_not_asked_again,
    a_resume_is_reported_and_the_kickoffs_events_go_on_where_they_stopped,
    a_process_paused_past_its_lease_writes_nothing_and_starts_no_tool,
    a_call_in_doubt_that_a_rule_added_since_forbids_is_not_run_again,
    a_wrong_key_or_an_entry_that_does_not_parse_is_a_clear_error_and_runs_nothing,
    a_cancelled_kickoffs_question_is_withdrawn,
    the_calls_of_one_turn_run_at_once_and_each_is_resumed_from_its_own_record,
    a_person_who_says_the_effect_happened_settles_the_call_in_doubt,
    a_person_who_says_the_effect_did_not_happen_runs_it_again_as_a_new_attempt,
    a_journal_kept_for_a_retention_is_purged_once_it_passed,
    a_kickoff_parked_at_once_holds_no_process_and_runs_on_once_answered,
    a_crew_that_parks_parks_at_its_human_input_timeout_instead_of_denying,
    a_deadline_passing_while_parked_denies_the_call_and_the_run_goes_on,
    a_background_resumer_wakes_on_the_answer_to_a_parked_kickoff,
    a_kickoff_parked_for_a_week_finds_its_question_expired_and_the_call_denied,
    an_answer_at_or_after_the_deadline_is_refused_and_one_just_before_is_taken,
    a_kickoff_dropped_while_it_waits_for_a_person_parks,
    a_parked_kickoff_is_recorded_on_the_audit_trail,
    a_parked_call_resumes_at_its_gate_and_the_hooks_before_it_count_it_once,
    a_service_withdrawing_its_open_questions_leaves_a_parked_kickoffs_question_open,
    a_held_kickoff_is_left_to_its_process_until_it_runs_and_given_up_if_dropped_unrun,
    an_answered_question_says_which_process_ran_the_resumed_call,
    an_answered_question_says_its_call_was_left_in_doubt_and_by_which_process,
    a_caller_that_chose_to_wait_gets_the_output_of_a_crew_that_parks,
    a_resumed_call_takes_up_the_question_its_journal_names_even_if_worded_anew,
    a_second_identical_call_is_asked_about_anew_not_approved_by_the_first_answer,
    the_crew_builder_parks_a_durable_crew_told_before_or_after_it_is_made_durable,
);

/// A tool's calls: how many, and the idempotency keys they got.
#[derive(Clone, Default)]
struct Calls {
    count: Arc<AtomicUsize>,
    keys: Arc<Mutex<Vec<String>>>,
}

impl Calls {
    fn ran(&self) -> usize {
        self.count.fetch_add(1, Ordering::SeqCst) + 1
    }

    fn count(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }

    fn keys(&self) -> Vec<String> {
        self.keys
            .lock()
            .map(|keys| keys.clone())
            .unwrap_or_default()
    }

    fn keep_key(&self) {
        let key = CurrentCall::get()
            .and_then(|call| call.idempotency_key().map(|key| key.as_str().to_owned()))
            .unwrap_or_default();
        if let Ok(mut keys) = self.keys.lock() {
            keys.push(key);
        }
    }
}

/// A tool that records its calls, and on its first call waits until
/// `release` is notified (forever, unless the test notifies), after saying
/// it started on `started`; its timeout is 400 ms.
fn stalling_tool(name: &str, calls: &Calls, started: &Arc<Notify>, release: &Arc<Notify>) -> Tool {
    let (calls, started, release) = (calls.clone(), Arc::clone(started), Arc::clone(release));
    Tool::dynamic(
        name,
        "Does the thing",
        json!({"type": "object"}),
        move |args| {
            let (calls, started, release) =
                (calls.clone(), Arc::clone(&started), Arc::clone(&release));
            async move {
                calls.keep_key();
                if calls.ran() == 1 {
                    started.notify_one();
                    release.notified().await;
                }
                Ok::<_, String>(json!(format!(
                    "done: {}",
                    args["order"].as_str().unwrap_or("?")
                )))
            }
        },
    )
    // A call in doubt is judged once its timeout and a lease have passed.
    .with_timeout(Duration::from_millis(400))
}

/// A quick tool that counts its calls.
fn counting_tool(name: &str, calls: &Calls) -> Tool {
    let calls = calls.clone();
    Tool::dynamic(name, "Looks it up", json!({"type": "object"}), move |_| {
        calls.keep_key();
        calls.ran();
        Ok::<_, String>(json!("found"))
    })
    .with_timeout(Duration::from_secs(5))
}

/// A support crew named `name` with `tools`, its model `llm`, durable on
/// `store`, its hooks on `registry`.
fn support_crew(
    name: &str,
    store: &Store,
    key: &JournalKey,
    llm: &Arc<ScriptedLlm>,
    tools: Vec<Tool>,
    registry: &Arc<HookRegistry>,
) -> Result<Crew, BuildError> {
    // Nobody to ask: a call in doubt that only a person could settle
    // stays in doubt.
    let nobody = Arc::new(ScriptedInput::new(Vec::<String>::new()));
    asking_crew(name, store, key, llm, tools, registry, nobody)
}

/// [`support_crew`], asking `person` what became of a call in doubt.
fn asking_crew(
    name: &str,
    store: &Store,
    key: &JournalKey,
    llm: &Arc<ScriptedLlm>,
    tools: Vec<Tool>,
    registry: &Arc<HookRegistry>,
    person: Arc<ScriptedInput>,
) -> Result<Crew, BuildError> {
    let support = Agent::builder("Support")
        .llm(Arc::clone(llm) as Arc<dyn Llm>)
        .tools(tools)
        .build();
    Crew::builder()
        .name(name)
        .human_input(person)
        .agent(support.clone())
        .task(
            Task::builder("Settle order {order}")
                .agent(&support)
                .build(),
        )
        .global_registry(Arc::clone(registry))
        .durable(
            Durable::new(store.clone())
                .journal_key(key.clone())
                .lease(LEASE),
        )
        .build()
}

/// The script: look the order up, act on it, answer.
fn script(tool: &str) -> Arc<ScriptedLlm> {
    Arc::new(
        ScriptedLlm::new()
            .call("lookup", json!({"order": "A-1"}))
            .call(tool, json!({"order": "A-1"}))
            .answer("settled"),
    )
}

/// A kickoff of `crew` in a task of its own, once `started` says its
/// stalling tool runs.
async fn running_until_the_tool_starts(
    crew: &Crew,
    started: &Arc<Notify>,
) -> tokio::task::JoinHandle<Result<CrewOutput, CrewError>> {
    let running = tokio::spawn({
        let crew = crew.clone();
        async move { crew.kickoff([("order", "A-1")]).await }
    });
    tokio::time::timeout(PATIENCE, started.notified())
        .await
        .expect("the tool starts");
    running
}

/// Starts a kickoff of `crew` in a task of its own, waits until `started`
/// says its stalling tool runs, then drops the kickoff there (as a process
/// gone in the middle of a tool leaves it). Its id.
async fn interrupted_while_the_tool_runs(
    crew: &Crew,
    store: &Store,
    started: &Arc<Notify>,
) -> KickoffId {
    let running = running_until_the_tool_starts(crew, started).await;
    running.abort();
    let _ = running.await;
    let kickoffs = store.kickoffs().await.expect("lists");
    assert_eq!(kickoffs.len(), 1, "{kickoffs:?}");
    kickoffs[0].id
}

/// Resumes `id` once it can be claimed (its lease given up or run out).
async fn resume(crew: &Crew, id: &KickoffId) -> Result<CrewOutput, CrewError> {
    let started = std::time::Instant::now();
    loop {
        match crew.resume(id).await {
            Err(error) if not_resumable_yet(&error) && started.elapsed() < PATIENCE => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            other => return other,
        }
    }
}

fn durable_error(error: &CrewError) -> Option<&DurableError> {
    match error {
        CrewError::Integration(error) => error.downcast_ref::<DurableError>(),
        _ => None,
    }
}

fn not_resumable_yet(error: &CrewError) -> bool {
    matches!(durable_error(error), Some(DurableError::NotResumable { status, .. }) if status.starts_with("running"))
}

async fn status(store: &Store, id: &KickoffId) -> KickoffStatus {
    store.kickoff(id).await.expect("reads").status
}

async fn a_durable_kickoff_runs_to_its_end_and_its_journal_is_purged(store: Store, _keep: Keep) {
    let key = JournalKey::generate().expect("a key");
    let lookups = Calls::default();
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("lookup", json!({"order": "A-1"}))
            .answer("settled"),
    );
    let registry = Arc::new(HookRegistry::new());
    let crew = support_crew(
        "refunds",
        &store,
        &key,
        &llm,
        vec![counting_tool("lookup", &lookups)],
        &registry,
    )
    .expect("builds");
    let output = crew.kickoff([("order", "A-1")]).await.expect("runs");
    assert_eq!(output.raw, "settled");
    assert_eq!(lookups.count(), 1);
    // The tool got a key, derived from the kickoff's id.
    assert_eq!(lookups.keys()[0].len(), 64);
    let kickoffs = store.kickoffs().await.expect("lists");
    assert_eq!(kickoffs.len(), 1);
    assert_eq!(kickoffs[0].status, KickoffStatus::Completed);
    assert!(kickoffs[0].purged_at.is_some(), "purged at once by default");
    // Its steps were journaled: start, inputs, step, two answers, intent,
    // result, the task, the end.
    assert_eq!(kickoffs[0].step, 9, "{kickoffs:?}");
}

async fn a_resumed_kickoff_asks_no_model_and_runs_no_finished_call_again(
    store: Store,
    _keep: Keep,
) {
    let key = JournalKey::generate().expect("a key");
    let (lookups, refunds) = (Calls::default(), Calls::default());
    let (started, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let llm = script("check");
    let registry = Arc::new(HookRegistry::new());
    let tools = || {
        vec![
            counting_tool("lookup", &lookups),
            stalling_tool("check", &refunds, &started, &release).idempotent(),
        ]
    };
    let crew = support_crew("refunds", &store, &key, &llm, tools(), &registry).expect("builds");
    let id = interrupted_while_the_tool_runs(&crew, &store, &started).await;
    assert_eq!(
        llm.requests().len(),
        2,
        "two answers before the interruption"
    );

    let output = resume(&crew, &id).await.expect("resumes");
    assert_eq!(output.raw, "settled");
    // The model was asked once more (after the call in doubt), not three
    // times: its two recorded answers were replayed.
    assert_eq!(llm.requests().len(), 3);
    assert_eq!(lookups.count(), 1, "a finished call is not run again");
    assert_eq!(status(&store, &id).await, KickoffStatus::Completed);
    assert_eq!(llm.requests()[2].observations(), ["done: A-1"]);
    // The model's last request is the very conversation an uninterrupted
    // run sends it.
    let (started, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let quick = Calls::default();
    quick.ran(); // Its first call, the one that stalls, is behind it.
    let uninterrupted = script("check");
    let tools = vec![
        counting_tool("lookup", &Calls::default()),
        stalling_tool("check", &quick, &started, &release).idempotent(),
    ];
    support_crew("refunds", &store, &key, &uninterrupted, tools, &registry)
        .expect("builds")
        .kickoff([("order", "A-1")])
        .await
        .expect("runs");
    assert_eq!(
        llm.requests()[2].messages,
        uninterrupted.requests()[2].messages
    );
}

async fn execution_start_and_input_run_once_and_execution_end_once_across_a_resume(
    store: Store,
    _keep: Keep,
) {
    let key = JournalKey::generate().expect("a key");
    let (lookups, checks) = (Calls::default(), Calls::default());
    let (started, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let llm = script("check");
    let registry = Arc::new(HookRegistry::new());
    let points = Arc::new(Mutex::new(Vec::<&'static str>::new()));
    let seen = Arc::clone(&points);
    registry
        .register_hook(EXECUTION_START, move |_: &mut ExecutionStartContext| {
            seen.lock().map(|mut seen| seen.push("start")).ok();
        })
        .expect("registers");
    let seen = Arc::clone(&points);
    registry
        .register_hook(INPUT, move |_: &mut InputContext| {
            seen.lock().map(|mut seen| seen.push("input")).ok();
        })
        .expect("registers");
    let seen = Arc::clone(&points);
    registry
        .register_hook(EXECUTION_END, move |_: &mut ExecutionEndContext| {
            seen.lock().map(|mut seen| seen.push("end")).ok();
        })
        .expect("registers");
    let tools = vec![
        counting_tool("lookup", &lookups),
        stalling_tool("check", &checks, &started, &release).idempotent(),
    ];
    let crew = support_crew("refunds", &store, &key, &llm, tools, &registry).expect("builds");
    let id = interrupted_while_the_tool_runs(&crew, &store, &started).await;
    assert_eq!(
        *points.lock().expect("not poisoned"),
        ["start", "input"],
        "dropping is not ending"
    );
    resume(&crew, &id).await.expect("resumes");
    assert_eq!(
        *points.lock().expect("not poisoned"),
        ["start", "input", "end"]
    );
}

async fn an_idempotent_call_in_doubt_runs_again_with_the_same_key(store: Store, _keep: Keep) {
    let key = JournalKey::generate().expect("a key");
    let (lookups, checks) = (Calls::default(), Calls::default());
    let (started, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let llm = script("check");
    let registry = Arc::new(HookRegistry::new());
    let tools = vec![
        counting_tool("lookup", &lookups),
        stalling_tool("check", &checks, &started, &release).idempotent(),
    ];
    let crew = support_crew("refunds", &store, &key, &llm, tools, &registry).expect("builds");
    let id = interrupted_while_the_tool_runs(&crew, &store, &started).await;
    resume(&crew, &id).await.expect("resumes");
    assert_eq!(checks.count(), 2, "run again");
    let keys = checks.keys();
    assert_eq!(keys[0], keys[1], "with the same key");
    assert_ne!(keys[0], lookups.keys()[0], "a key per call");
}

async fn a_call_in_doubt_that_may_not_run_again_ends_the_kickoff_in_doubt(
    store: Store,
    _keep: Keep,
) {
    let key = JournalKey::generate().expect("a key");
    let (lookups, refunds) = (Calls::default(), Calls::default());
    let (started, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let llm = script("refund");
    let registry = Arc::new(HookRegistry::new());
    let tools = vec![
        counting_tool("lookup", &lookups),
        stalling_tool("refund", &refunds, &started, &release)
            .with_timeout(Duration::from_millis(400)),
    ];
    let crew = support_crew("refunds", &store, &key, &llm, tools, &registry).expect("builds");
    let trail = AuditTrail::open(store.clone()).expect("a writer");
    trail.attach(&crew);
    let id = interrupted_while_the_tool_runs(&crew, &store, &started).await;
    let error = resume(&crew, &id).await.expect_err("in doubt");
    trail.flush().await.expect("written");
    let records = audit::tail(&store, "default", 100).await.expect("reads");
    let kinds: Vec<&str> = records.iter().map(|record| record.kind.as_str()).collect();
    assert!(kinds.contains(&"kickoff_resumed"), "{kinds:?}");
    let in_doubt = records
        .iter()
        .find(|record| record.kind == "call_in_doubt")
        .expect("recorded");
    assert_eq!(in_doubt.data["tool"], "refund");
    assert_eq!(in_doubt.data["outcome"], "left_in_doubt");
    assert_eq!(in_doubt.data["idempotency_key"], refunds.keys()[0]);
    match &error {
        CrewError::InDoubt {
            kickoff, tool, key, ..
        } => {
            assert_eq!(&**kickoff, id.to_string());
            assert_eq!(tool, "refund");
            assert_eq!(key, &refunds.keys()[0], "the key the tool got");
        }
        other => panic!("not in doubt: {other}"),
    }
    assert!(error.to_string().contains("check by hand"), "{error}");
    assert_eq!(refunds.count(), 1, "never run again blind");
    assert_eq!(status(&store, &id).await, KickoffStatus::InDoubt);
    assert_eq!(llm.requests().len(), 2, "the model was not asked again");
}

async fn a_reconciled_effect_that_happened_is_not_run_again(store: Store, _keep: Keep) {
    let key = JournalKey::generate().expect("a key");
    let (lookups, refunds) = (Calls::default(), Calls::default());
    let (started, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let llm = script("refund");
    let registry = Arc::new(HookRegistry::new());
    let asked = Calls::default();
    let asked_too = asked.clone();
    let refund = stalling_tool("refund", &refunds, &started, &release)
        .with_timeout(Duration::from_millis(400))
        .reconcile(move |key, args| {
            let asked = asked_too.clone();
            async move {
                asked.ran();
                assert_eq!(args["order"], "A-1");
                Ok::<_, String>(Reconciled::Happened {
                    result: Some(json!(format!(
                        "refunded earlier under {}",
                        &key.as_str()[..8]
                    ))),
                })
            }
        });
    let tools = vec![counting_tool("lookup", &lookups), refund];
    let crew = support_crew("refunds", &store, &key, &llm, tools, &registry).expect("builds");
    let trail = AuditTrail::open(store.clone()).expect("a writer");
    trail.attach(&crew);
    let id = interrupted_while_the_tool_runs(&crew, &store, &started).await;
    let output = resume(&crew, &id).await.expect("resumes");
    assert_eq!(output.raw, "settled");
    assert_eq!(asked.count(), 1);
    trail.flush().await.expect("written");
    let records = audit::tail(&store, "default", 100).await.expect("reads");
    let reconciled = records
        .iter()
        .find(|record| record.kind == "call_reconciled")
        .expect("recorded");
    assert_eq!(reconciled.data["happened"], true);
    assert_eq!(refunds.count(), 1, "not run again");
    let told = llm.requests()[2]
        .observations()
        .last()
        .map(|text| text.to_string());
    assert_eq!(
        told,
        Some(format!(
            "refunded earlier under {}",
            &refunds.keys()[0][..8]
        ))
    );
}

async fn a_reconciled_effect_that_did_not_happen_runs_as_a_new_attempt(store: Store, _keep: Keep) {
    let key = JournalKey::generate().expect("a key");
    let (lookups, refunds) = (Calls::default(), Calls::default());
    let (started, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let llm = script("refund");
    let registry = Arc::new(HookRegistry::new());
    let refund = stalling_tool("refund", &refunds, &started, &release)
        .with_timeout(Duration::from_millis(400))
        .reconcile(|_, _| async { Ok::<_, String>(Reconciled::DidNotHappen) });
    let tools = vec![counting_tool("lookup", &lookups), refund];
    let crew = support_crew("refunds", &store, &key, &llm, tools, &registry).expect("builds");
    let id = interrupted_while_the_tool_runs(&crew, &store, &started).await;
    resume(&crew, &id).await.expect("resumes");
    assert_eq!(refunds.count(), 2, "run again");
    let keys = refunds.keys();
    assert_ne!(keys[0], keys[1], "as a new attempt, with a new key");
}

async fn a_crew_that_changed_since_is_refused_with_the_difference_named(store: Store, _keep: Keep) {
    let key = JournalKey::generate().expect("a key");
    let (lookups, checks) = (Calls::default(), Calls::default());
    let (started, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let registry = Arc::new(HookRegistry::new());
    let tools = vec![
        counting_tool("lookup", &lookups),
        stalling_tool("check", &checks, &started, &release).idempotent(),
    ];
    let before =
        support_crew("refunds", &store, &key, &script("check"), tools, &registry).expect("builds");
    let id = interrupted_while_the_tool_runs(&before, &store, &started).await;
    // The next version renamed a tool.
    let tools = vec![
        counting_tool("lookup_order", &lookups),
        stalling_tool("check", &checks, &started, &release).idempotent(),
    ];
    let after =
        support_crew("refunds", &store, &key, &script("check"), tools, &registry).expect("builds");
    let error = resume(&after, &id).await.expect_err("refused");
    match durable_error(&error) {
        Some(DurableError::FingerprintChanged { difference, .. }) => assert_eq!(
            difference,
            r#"agents[0].tools[0].name: "lookup" then, "lookup_order" now"#
        ),
        other => panic!("{other:?}: {error}"),
    }
    // Left for a process of the version that started it, which resumes it.
    assert_eq!(status(&store, &id).await, KickoffStatus::Running);
    let resumed = Resumer::new(store.clone())
        .crew(&after)
        .resume_claimable()
        .await
        .expect("looks");
    assert!(resumed.is_empty(), "a resumer of another shape leaves it");
    resume(&before, &id)
        .await
        .expect("the first version resumes it");
    assert_eq!(status(&store, &id).await, KickoffStatus::Completed);
}

async fn a_cancelled_kickoff_stops_before_its_next_tool(store: Store, _keep: Keep) {
    let key = JournalKey::generate().expect("a key");
    let (checks, refunds) = (Calls::default(), Calls::default());
    let (started, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("check", json!({"order": "A-1"}))
            .call("refund", json!({"order": "A-1"}))
            .answer("settled"),
    );
    let registry = Arc::new(HookRegistry::new());
    let tools = vec![
        stalling_tool("check", &checks, &started, &release)
            .idempotent()
            .with_timeout(PATIENCE),
        counting_tool("refund", &refunds),
    ];
    let crew = support_crew("refunds", &store, &key, &llm, tools, &registry).expect("builds");
    let running = running_until_the_tool_starts(&crew, &started).await;
    let id = store.kickoffs().await.expect("lists")[0].id;
    assert_eq!(
        crew.cancel(&id).await.expect("cancels"),
        KickoffStatus::Cancelled
    );
    release.notify_one();
    let error = tokio::time::timeout(PATIENCE, running)
        .await
        .expect("stops")
        .expect("does not panic")
        .expect_err("stopped");
    assert!(
        matches!(durable_error(&error), Some(DurableError::LeaseLost(_))),
        "{error}"
    );
    assert_eq!(refunds.count(), 0, "no tool after the cancel");
    assert_eq!(status(&store, &id).await, KickoffStatus::Cancelled);
    assert_eq!(llm.requests().len(), 1);
}

async fn a_started_kickoff_is_taken_up_by_a_resumer_of_its_crew_only(store: Store, _keep: Keep) {
    let key = JournalKey::generate().expect("a key");
    let registry = Arc::new(HookRegistry::new());
    let lookups = Calls::default();
    let answer = || Arc::new(ScriptedLlm::new().answer("settled"));
    let refunds = support_crew(
        "refunds",
        &store,
        &key,
        &answer(),
        vec![counting_tool("lookup", &lookups)],
        &registry,
    )
    .expect("builds");
    let research = support_crew(
        "research",
        &store,
        &key,
        &answer(),
        vec![counting_tool("lookup", &lookups)],
        &registry,
    )
    .expect("builds");
    let first = refunds.start([("order", "A-1")]).await.expect("starts");
    let second = research.start([("order", "B-2")]).await.expect("starts");
    assert_eq!(status(&store, &first).await, KickoffStatus::Running);

    let resumed = Resumer::new(store.clone())
        .crew(&refunds)
        .resume_claimable()
        .await
        .expect("looks");
    assert_eq!(resumed.len(), 1);
    assert_eq!(resumed[0].kickoff, first);
    assert_eq!(
        resumed[0].result.as_ref().map(|output| output.raw.as_str()),
        Ok("settled")
    );
    assert_eq!(status(&store, &first).await, KickoffStatus::Completed);
    assert_eq!(
        status(&store, &second).await,
        KickoffStatus::Running,
        "another crew's"
    );
    // Nothing more to do.
    let again = Resumer::new(store.clone())
        .crew(&refunds)
        .resume_claimable()
        .await
        .expect("looks");
    assert!(again.is_empty());
}

async fn a_kickoff_held_elsewhere_or_ended_is_not_resumed(store: Store, _keep: Keep) {
    let key = JournalKey::generate().expect("a key");
    let (checks, lookups) = (Calls::default(), Calls::default());
    let (started, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("check", json!({"order": "A-1"}))
            .answer("settled"),
    );
    let registry = Arc::new(HookRegistry::new());
    let tools = vec![
        stalling_tool("check", &checks, &started, &release)
            .idempotent()
            .with_timeout(PATIENCE),
        counting_tool("lookup", &lookups),
    ];
    let crew = support_crew("refunds", &store, &key, &llm, tools, &registry).expect("builds");
    let running = running_until_the_tool_starts(&crew, &started).await;
    let id = store.kickoffs().await.expect("lists")[0].id;
    // Held (and renewed) by the running kickoff, past several leases.
    tokio::time::sleep(LEASE * 3).await;
    let error = crew.resume(&id).await.expect_err("held");
    assert!(not_resumable_yet(&error), "{error}");
    release.notify_one();
    let output = tokio::time::timeout(PATIENCE, running)
        .await
        .expect("ends")
        .expect("does not panic")
        .expect("completes");
    assert_eq!(output.raw, "settled");
    let error = crew.resume(&id).await.expect_err("ended");
    assert!(
        matches!(durable_error(&error), Some(DurableError::NotResumable { status, .. }) if status == "completed"),
        "{error}"
    );
    let unknown = KickoffId::generate().expect("an id");
    let error = crew.resume(&unknown).await.expect_err("unknown");
    assert!(error.to_string().contains("no durable kickoff"), "{error}");
}

#[tokio::test]
async fn a_durable_crew_refuses_a_tool_that_may_not_run_again_without_a_timeout() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = format!("sqlite://{}", dir.path().join("store.db").display());
    let store = Store::connect(&url).await.expect("SQLite opens");
    let refund = Tool::dynamic("refund", "Refunds", json!({"type": "object"}), |_| {
        Ok::<_, String>(json!("refunded"))
    });
    let llm = Arc::new(ScriptedLlm::new().answer("ok"));
    let registry = Arc::new(HookRegistry::new());
    let key = JournalKey::generate().expect("a key");
    let error = support_crew(
        "refunds",
        &store,
        &key,
        &llm,
        vec![refund.clone()],
        &registry,
    )
    .expect_err("refused");
    assert!(error.to_string().contains("`refund`"), "{error}");
    assert!(error.to_string().contains("timeout"), "{error}");
    // Idempotent, or with a timeout, it builds.
    assert!(
        support_crew(
            "refunds",
            &store,
            &key,
            &llm,
            vec![refund.clone().idempotent()],
            &registry
        )
        .is_ok()
    );
    assert!(
        support_crew(
            "refunds",
            &store,
            &key,
            &llm,
            vec![refund.with_timeout(Duration::from_secs(1))],
            &registry
        )
        .is_ok()
    );
    // Without a journal key, nothing builds.
    let support = Agent::builder("Support").llm(llm as Arc<dyn Llm>).build();
    let keyless = Crew::builder()
        .agent(support.clone())
        .task(Task::builder("Settle").agent(&support).build())
        .global_registry(registry)
        .durable(store)
        .build()
        .expect_err("refused");
    assert!(keyless.to_string().contains("journal key"), "{keyless}");
}

/// A durable crew whose `refund` (destructive, timeout 1 s) needs an
/// approval asked through `store` (a lease of 1 s, after which a question
/// of a gone process would be abandoned), then passes `after_gate`.
fn gated_crew(
    store: &Store,
    key: &JournalKey,
    llm: &Arc<ScriptedLlm>,
    refunds: &Calls,
    after_gate: Option<(Arc<Notify>, Arc<Notify>)>,
) -> Crew {
    gated_crew_with(store, key, llm, refunds, after_gate, PATIENCE, |durable| {
        durable
    })
}

/// A destructive `refund` (1 s timeout) that hands each call's arguments
/// to `ran` and answers "refunded".
fn refund_tool(ran: impl Fn(serde_json::Value) + Send + Sync + 'static) -> Tool {
    Tool::dynamic(
        "refund",
        "Refunds an order",
        json!({"type": "object"}),
        move |args: serde_json::Value| {
            ran(args);
            Ok::<_, String>(json!("refunded"))
        },
    )
    .with_annotations(ToolAnnotations::new().destructive(true))
    .with_timeout(Duration::from_secs(1))
}

/// [`gated_crew`] with a human-input timeout of `timeout`, made durable
/// as `durable` says (parking, say).
fn gated_crew_with(
    store: &Store,
    key: &JournalKey,
    llm: &Arc<ScriptedLlm>,
    refunds: &Calls,
    after_gate: Option<(Arc<Notify>, Arc<Notify>)>,
    timeout: Duration,
    durable: impl FnOnce(Durable) -> Durable,
) -> Crew {
    let calls = refunds.clone();
    let refund = refund_tool(move |_| {
        calls.keep_key();
        calls.ran();
    });
    let mut builder = refund_builder(store, llm, refund, timeout).async_hook_with(
        PRE_TOOL_CALL,
        HookOptions::new().name("approval-gate"),
        ApprovalGate::for_capabilities([Capability::Destructive]).pre_hook(),
    );
    if let Some((started, release)) = after_gate {
        let first = Arc::new(AtomicUsize::new(0));
        builder = builder.async_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("after-the-gate"),
            crew_runtime::async_hook(move |_: &mut ToolCallHookContext| {
                let (started, release, first) = (
                    Arc::clone(&started),
                    Arc::clone(&release),
                    Arc::clone(&first),
                );
                Box::pin(async move {
                    if first.fetch_add(1, Ordering::SeqCst) == 0 {
                        started.notify_one();
                        release.notified().await;
                    }
                })
            }),
        );
    }
    builder
        .durable(durable(
            Durable::new(store.clone())
                .journal_key(key.clone())
                .lease(LEASE),
        ))
        .build()
        .expect("builds")
        .for_user("customer-7")
}

/// The questions pending, once there are `count`.
async fn pending(store: &Store, count: usize) -> Vec<crew_runtime::store::Question> {
    let started = std::time::Instant::now();
    loop {
        let pending = store.pending().await.expect("lists");
        if pending.len() == count {
            return pending;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "{} pending, expected {count}",
            pending.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn a_durable_kickoffs_question_outlives_its_process_and_its_answer_reaches_the_resumed_run(
    store: Store,
    _keep: Keep,
) {
    let key = JournalKey::generate().expect("a key");
    let refunds = Calls::default();
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("refund", json!({"order": "A-1"}))
            .answer("settled"),
    );
    let crew = gated_crew(&store, &key, &llm, &refunds, None);
    let running = tokio::spawn({
        let crew = crew.clone();
        async move { crew.kickoff([("order", "A-1")]).await }
    });
    let question = pending(&store, 1).await.remove(0);
    // The process goes while the question waits.
    running.abort();
    let _ = running.await;
    // Past the approvals' lease: a process's own question would be
    // abandoned by now; the kickoff's stays open.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let still = pending(&store, 1).await.remove(0);
    assert_eq!(still.id, question.id);
    store
        .decide(&question.id, Answer::new("ops", Decision::Approve))
        .await
        .expect("ops may approve");
    let id = store.kickoffs().await.expect("lists")[0].id;
    let output = tokio::time::timeout(PATIENCE, resume(&crew, &id))
        .await
        .expect("the answer is used, not asked for again")
        .expect("completes");
    assert_eq!(output.raw, "settled");
    assert_eq!(refunds.count(), 1);
    let asked = store.history(10).await.expect("reads");
    assert_eq!(asked.len(), 1, "one question for the call: {asked:?}");
    assert_eq!(asked[0].id, question.id);
}

async fn an_answer_taken_before_the_process_went_is_used_again_not_asked_again(
    store: Store,
    _keep: Keep,
) {
    let key = JournalKey::generate().expect("a key");
    let refunds = Calls::default();
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("refund", json!({"order": "A-1"}))
            .answer("settled"),
    );
    let (started, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let crew = gated_crew(
        &store,
        &key,
        &llm,
        &refunds,
        Some((Arc::clone(&started), release)),
    );
    let running = tokio::spawn({
        let crew = crew.clone();
        async move { crew.kickoff([("order", "A-1")]).await }
    });
    let question = pending(&store, 1).await.remove(0);
    store
        .decide(&question.id, Answer::new("ops", Decision::Approve))
        .await
        .expect("ops may approve");
    // The answer was taken; the process goes in the hook after the gate,
    // before the call's intent is journaled.
    tokio::time::timeout(PATIENCE, started.notified())
        .await
        .expect("the call passes the gate");
    running.abort();
    let _ = running.await;
    let id = store.kickoffs().await.expect("lists")[0].id;
    let output = tokio::time::timeout(PATIENCE, resume(&crew, &id))
        .await
        .expect("the answer is used, not asked for again")
        .expect("completes");
    assert_eq!(output.raw, "settled");
    assert_eq!(refunds.count(), 1);
    assert!(store.pending().await.expect("lists").is_empty());
    assert_eq!(
        store.history(10).await.expect("reads").len(),
        1,
        "asked once"
    );
}

async fn a_resume_is_reported_and_the_kickoffs_events_go_on_where_they_stopped(
    store: Store,
    _keep: Keep,
) {
    let key = JournalKey::generate().expect("a key");
    let (lookups, checks) = (Calls::default(), Calls::default());
    let (started, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let llm = script("check");
    let registry = Arc::new(HookRegistry::new());
    let tools = vec![
        counting_tool("lookup", &lookups),
        stalling_tool("check", &checks, &started, &release).idempotent(),
    ];
    let crew = support_crew("refunds", &store, &key, &llm, tools, &registry).expect("builds");
    let events = Arc::new(Mutex::new(Vec::<Event>::new()));
    let sink = Arc::clone(&events);
    crew.events().subscribe(move |event| {
        if let Ok(mut events) = sink.lock() {
            events.push(event.clone());
        }
    });
    let id = interrupted_while_the_tool_runs(&crew, &store, &started).await;
    let before: Vec<Event> = std::mem::take(&mut *events.lock().expect("not poisoned"));
    resume(&crew, &id).await.expect("resumes");
    let after: Vec<Event> = std::mem::take(&mut *events.lock().expect("not poisoned"));

    let last_before = before
        .iter()
        .filter_map(|event| event.meta().emission_sequence)
        .max()
        .expect("numbered events");
    let first_after = after
        .iter()
        .filter_map(|event| event.meta().emission_sequence)
        .min()
        .expect("numbered events");
    assert!(
        first_after > last_before,
        "{first_after} after {last_before}"
    );
    let integration = |event: &Event| match event {
        Event::Integration(integration) => Some(integration.clone()),
        _ => None,
    };
    let resumed = after
        .iter()
        .filter_map(integration)
        .find_map(|event| event.downcast_ref::<CrewKickoffResumedEvent>().cloned())
        .expect("reported");
    assert_eq!(resumed.kickoff_id, id.to_string());
    assert_eq!(resumed.crew_name, "refunds");
    // Start, inputs, step, two answers, lookup's intent and result, and
    // check's intent.
    assert_eq!(resumed.step, 8);
    let in_doubt = after
        .iter()
        .filter_map(integration)
        .find_map(|event| event.downcast_ref::<ToolCallInDoubtEvent>().cloned())
        .expect("reported");
    assert_eq!(in_doubt.tool_name, "check");
    assert_eq!(in_doubt.outcome, InDoubtOutcome::RanAgain);
    assert_eq!(in_doubt.idempotency_key, checks.keys()[0]);
    // The kickoff's end names its start, sent by the first process.
    let kickoff_started = before
        .iter()
        .find_map(|event| match event {
            Event::CrewKickoffStarted(started) => Some(started.meta.event_id),
            _ => None,
        })
        .expect("started");
    let ended = after
        .iter()
        .find_map(|event| match event {
            Event::CrewKickoffCompleted(completed) => Some(completed.meta.started_event_id),
            _ => None,
        })
        .expect("completed");
    assert_eq!(ended, Some(kickoff_started));
}

async fn a_process_paused_past_its_lease_writes_nothing_and_starts_no_tool(
    store: Store,
    keep: Keep,
) {
    let key = JournalKey::generate().expect("a key");
    let (lookups, refunds, checks) = (Calls::default(), Calls::default(), Calls::default());
    let llm = script("refund");
    // `lookup` freezes the whole first process (its only thread) on its
    // first call until the test lets it go: no renewal can run meanwhile.
    let (paused_tx, paused_rx) = std::sync::mpsc::channel::<()>();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let go = Arc::new(Mutex::new(Some(go_rx)));
    let first = Arc::new(AtomicUsize::new(0));
    let freezing = {
        let (lookups, first, go) = (lookups.clone(), Arc::clone(&first), Arc::clone(&go));
        Tool::dynamic(
            "lookup",
            "Looks it up",
            json!({"type": "object"}),
            move |_| {
                let (lookups, first, go, paused) = (
                    lookups.clone(),
                    Arc::clone(&first),
                    Arc::clone(&go),
                    paused_tx.clone(),
                );
                async move {
                    lookups.keep_key();
                    lookups.ran();
                    if first.fetch_add(1, Ordering::SeqCst) == 0 {
                        let _ = paused.send(());
                        // A process stopped (SIGSTOP): this thread, and with it
                        // the process's whole runtime, does nothing.
                        let go = go.lock().ok().and_then(|mut go| go.take());
                        if let Some(go) = go {
                            let _ = go.recv();
                        }
                    }
                    Ok::<_, String>(json!("found"))
                }
            },
        )
        .idempotent()
        .with_timeout(Duration::from_millis(400))
    };
    let registry = Arc::new(HookRegistry::new());
    let first_process = std::thread::spawn({
        let (key, registry, refunds, url) = (
            key.clone(),
            Arc::clone(&registry),
            refunds.clone(),
            keep.url.clone(),
        );
        move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            runtime.block_on(async move {
                // A process of its own: its own connections to the store.
                let store = Store::connect(&url).await.expect("opens");
                let tools = vec![freezing, counting_tool("refund", &refunds)];
                support_crew("refunds", &store, &key, &llm, tools, &registry)
                    .expect("builds")
                    .kickoff([("order", "A-1")])
                    .await
            })
        }
    });
    paused_rx
        .recv_timeout(PATIENCE)
        .expect("the first process pauses");
    let id = store.kickoffs().await.expect("lists")[0].id;
    // Another process takes the kickoff over once the lease ran out, and
    // finishes it.
    let other = support_crew(
        "refunds",
        &store,
        &key,
        &script("refund"),
        vec![
            counting_tool("lookup", &checks).idempotent(),
            counting_tool("refund", &refunds),
        ],
        &registry,
    )
    .expect("builds");
    let output = resume(&other, &id).await.expect("taken over");
    assert_eq!(output.raw, "settled");
    assert_eq!(refunds.count(), 1);
    // The first process wakes: it finds its lease gone, writes nothing
    // and starts no tool.
    go_tx.send(()).expect("the first process waits");
    let woke = first_process.join().expect("does not panic");
    let error = woke.expect_err("it stops");
    assert!(
        matches!(durable_error(&error), Some(DurableError::LeaseLost(_))),
        "{error}"
    );
    assert_eq!(refunds.count(), 1, "the paused process started no tool");
    assert_eq!(status(&store, &id).await, KickoffStatus::Completed);
}

async fn a_call_in_doubt_that_a_rule_added_since_forbids_is_not_run_again(
    store: Store,
    _keep: Keep,
) {
    let key = JournalKey::generate().expect("a key");
    let (lookups, checks) = (Calls::default(), Calls::default());
    let (started, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let registry = Arc::new(HookRegistry::new());
    let tools = || {
        vec![
            counting_tool("lookup", &lookups),
            stalling_tool("check", &checks, &started, &release).idempotent(),
        ]
    };
    let before = support_crew(
        "refunds",
        &store,
        &key,
        &script("check"),
        tools(),
        &registry,
    )
    .expect("builds");
    let id = interrupted_while_the_tool_runs(&before, &store, &started).await;
    // Deployed after the crash: an emergency rule.
    let llm = script("check");
    let support = Agent::builder("Support")
        .llm(Arc::clone(&llm) as Arc<dyn Llm>)
        .tools(tools())
        .build();
    let policies = crew_runtime::policy::Policies::from_text(
        r#"permit(principal, action, resource);
           @id("freeze") @reason("checks are frozen")
           forbid(principal, action == Action::"check", resource);"#,
    )
    .expect("parses");
    let after = Crew::builder()
        .name("refunds")
        .agent(support.clone())
        .task(
            Task::builder("Settle order {order}")
                .agent(&support)
                .build(),
        )
        .global_registry(Arc::clone(&registry))
        .policies(policies)
        .durable(
            Durable::new(store.clone())
                .journal_key(key.clone())
                .lease(LEASE),
        )
        .build()
        .expect("builds");
    let output = resume(&after, &id).await.expect("goes on");
    assert_eq!(output.raw, "settled");
    assert_eq!(checks.count(), 1, "not run again");
    let told = llm.requests()[0].observations().join("\n");
    assert!(told.contains("checks are frozen"), "{told}");
}

async fn a_wrong_key_or_an_entry_that_does_not_parse_is_a_clear_error_and_runs_nothing(
    store: Store,
    _keep: Keep,
) {
    let key = JournalKey::generate().expect("a key");
    let lookups = Calls::default();
    let registry = Arc::new(HookRegistry::new());
    let answer = || Arc::new(ScriptedLlm::new().answer("settled"));
    let tools = || vec![counting_tool("lookup", &lookups)];
    let crew =
        support_crew("refunds", &store, &key, &answer(), tools(), &registry).expect("builds");
    let id = crew.start([("order", "A-1")]).await.expect("starts");

    // Another key does not open it; the kickoff stays for the right one.
    let other_key = JournalKey::generate().expect("a key");
    let stranger = answer();
    let wrong =
        support_crew("refunds", &store, &other_key, &stranger, tools(), &registry).expect("builds");
    let error = resume(&wrong, &id).await.expect_err("refused");
    assert!(error.to_string().contains("another one"), "{error}");
    assert!(stranger.requests().is_empty(), "nothing ran");
    assert_eq!(status(&store, &id).await, KickoffStatus::Running);

    // An entry that does not parse: nothing after it can be trusted.
    let journal = crew_runtime::store::journal::Journal::new(store.clone(), key.clone());
    let lease = journal
        .claim_kickoff(&id, "tamperer", LEASE)
        .await
        .expect("claims")
        .expect("claimable");
    journal
        .append(&lease, "answer", b"not json")
        .await
        .expect("appends");
    journal.release(&lease).await.expect("releases");
    let llm = answer();
    let crew = support_crew("refunds", &store, &key, &llm, tools(), &registry).expect("builds");
    let error = resume(&crew, &id).await.expect_err("refused");
    assert!(error.to_string().contains("entry 2"), "{error}");
    assert!(error.to_string().contains("does not parse"), "{error}");
    assert!(llm.requests().is_empty(), "nothing ran");
    assert_eq!(status(&store, &id).await, KickoffStatus::Failed);
}

/// SQLite only: its file can be taken away under a running kickoff.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_cannot_be_written_stops_the_kickoff_before_its_next_tool() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("store.db");
    let store = Store::connect(&format!("sqlite://{}", path.display()))
        .await
        .expect("SQLite opens");
    let key = JournalKey::generate().expect("a key");
    let (checks, refunds) = (Calls::default(), Calls::default());
    let (started, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("check", json!({"order": "A-1"}))
            .call("refund", json!({"order": "A-1"}))
            .answer("settled"),
    );
    let registry = Arc::new(HookRegistry::new());
    let tools = vec![
        stalling_tool("check", &checks, &started, &release)
            .idempotent()
            .with_timeout(PATIENCE),
        counting_tool("refund", &refunds),
    ];
    let crew = support_crew("refunds", &store, &key, &llm, tools, &registry).expect("builds");
    let running = running_until_the_tool_starts(&crew, &started).await;
    // The store goes away while the tool runs.
    for suffix in ["", "-wal", "-shm"] {
        let file = std::path::PathBuf::from(format!("{}{suffix}", path.display()));
        let _ = std::fs::remove_file(file);
    }
    release.notify_one();
    let error = tokio::time::timeout(PATIENCE, running)
        .await
        .expect("stops")
        .expect("does not panic")
        .expect_err("stopped");
    assert!(
        matches!(durable_error(&error), Some(DurableError::Journal(_))),
        "{error}"
    );
    assert_eq!(
        refunds.count(),
        0,
        "no tool runs without its intent journaled"
    );
    assert_eq!(llm.requests().len(), 1, "nor is the model asked again");
}

async fn a_cancelled_kickoffs_question_is_withdrawn(store: Store, _keep: Keep) {
    let key = JournalKey::generate().expect("a key");
    let refunds = Calls::default();
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("refund", json!({"order": "A-1"}))
            .answer("settled"),
    );
    let crew = gated_crew(&store, &key, &llm, &refunds, None);
    let running = tokio::spawn({
        let crew = crew.clone();
        async move { crew.kickoff([("order", "A-1")]).await }
    });
    let question = pending(&store, 1).await.remove(0);
    running.abort();
    let _ = running.await;
    let id = store.kickoffs().await.expect("lists")[0].id;
    assert_eq!(
        crew.cancel(&id).await.expect("cancels"),
        KickoffStatus::Cancelled
    );
    let closed = store
        .question(&question.id)
        .await
        .expect("reads")
        .expect("kept");
    assert_eq!(
        closed.status,
        crew_runtime::store::QuestionStatus::Withdrawn
    );
    let refused = store
        .decide(&question.id, Answer::new("ops", Decision::Approve))
        .await;
    assert!(refused.is_err(), "{refused:?}");
    assert_eq!(refunds.count(), 0);
}

async fn a_journal_kept_for_a_retention_is_purged_once_it_passed(store: Store, _keep: Keep) {
    let key = JournalKey::generate().expect("a key");
    let lookups = Calls::default();
    let support = Agent::builder("Support")
        .llm(Arc::new(ScriptedLlm::new().answer("settled")) as Arc<dyn Llm>)
        .tool(counting_tool("lookup", &lookups))
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
        .durable(
            Durable::new(store.clone())
                .journal_key(key.clone())
                .retention(Duration::from_millis(200)),
        )
        .build()
        .expect("builds");
    crew.kickoff([("order", "A-1")]).await.expect("runs");
    let id = store.kickoffs().await.expect("lists")[0].id;
    assert!(
        store.kickoff(&id).await.expect("reads").purged_at.is_none(),
        "kept"
    );
    let journal = crew_runtime::store::journal::Journal::new(store.clone(), key.clone());
    assert!(!journal.entries(&id).await.expect("reads").is_empty());
    let resumer = Resumer::new(store.clone()).crew(&crew);
    let started = std::time::Instant::now();
    while store.kickoff(&id).await.expect("reads").purged_at.is_none() {
        assert!(started.elapsed() < PATIENCE, "never purged");
        tokio::time::sleep(Duration::from_millis(50)).await;
        resumer.resume_claimable().await.expect("looks");
    }
    assert!(journal.entries(&id).await.expect("reads").is_empty());
}

async fn a_person_who_says_the_effect_happened_settles_the_call_in_doubt(
    store: Store,
    _keep: Keep,
) {
    let key = JournalKey::generate().expect("a key");
    let (lookups, refunds) = (Calls::default(), Calls::default());
    let (started, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let llm = script("refund");
    let registry = Arc::new(HookRegistry::new());
    let tools = vec![
        counting_tool("lookup", &lookups),
        stalling_tool("refund", &refunds, &started, &release),
    ];
    let person = Arc::new(ScriptedInput::new([
        "Happened: refund R-17, issued by hand",
    ]));
    let crew = asking_crew(
        "refunds",
        &store,
        &key,
        &llm,
        tools,
        &registry,
        Arc::clone(&person),
    )
    .expect("builds");
    let id = interrupted_while_the_tool_runs(&crew, &store, &started).await;
    let output = resume(&crew, &id).await.expect("settled by a person");
    assert_eq!(output.raw, "settled");
    assert_eq!(refunds.count(), 1, "not run again");
    let asked = person.requests();
    assert_eq!(asked.len(), 1);
    assert!(
        asked[0].prompt.contains(&refunds.keys()[0]),
        "{}",
        asked[0].prompt
    );
    assert_eq!(asked[0].tool_name.as_deref(), Some("refund"));
    assert_eq!(
        llm.requests()[2].observations(),
        ["refund R-17, issued by hand"]
    );
}

async fn a_person_who_says_the_effect_did_not_happen_runs_it_again_as_a_new_attempt(
    store: Store,
    _keep: Keep,
) {
    let key = JournalKey::generate().expect("a key");
    let (lookups, refunds) = (Calls::default(), Calls::default());
    let (started, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let llm = script("refund");
    let registry = Arc::new(HookRegistry::new());
    let tools = vec![
        counting_tool("lookup", &lookups),
        stalling_tool("refund", &refunds, &started, &release),
    ];
    let person = Arc::new(ScriptedInput::new(["did not happen"]));
    let crew =
        asking_crew("refunds", &store, &key, &llm, tools, &registry, person).expect("builds");
    let id = interrupted_while_the_tool_runs(&crew, &store, &started).await;
    resume(&crew, &id).await.expect("runs again");
    assert_eq!(refunds.count(), 2);
    let keys = refunds.keys();
    assert_ne!(keys[0], keys[1], "a new attempt, a new key");
}

async fn the_calls_of_one_turn_run_at_once_and_each_is_resumed_from_its_own_record(
    store: Store,
    _keep: Keep,
) {
    let key = JournalKey::generate().expect("a key");
    let (lookups, checks) = (Calls::default(), Calls::default());
    let (started, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let call = |id: &str, name: &str| crew_runtime::ToolCallRequest {
        id: id.into(),
        name: name.into(),
        arguments: r#"{"order": "A-1"}"#.into(),
    };
    let llm = Arc::new(
        ScriptedLlm::new()
            .turn(crew_runtime::llm::ModelTurn::ToolCalls {
                content: String::new(),
                calls: vec![
                    call("c1", "lookup"),
                    call("c2", "lookup"),
                    call("c3", "check"),
                    call("c4", "lookup"),
                ],
            })
            .answer("settled"),
    );
    let registry = Arc::new(HookRegistry::new());
    let tools = vec![
        counting_tool("lookup", &lookups),
        stalling_tool("check", &checks, &started, &release).idempotent(),
    ];
    let crew = support_crew("refunds", &store, &key, &llm, tools, &registry).expect("builds");
    let running = running_until_the_tool_starts(&crew, &started).await;
    // The quick calls of the turn finish, and their results are committed,
    // while `check` stalls: the start, the inputs, the step and the answer,
    // four intents, three results.
    let id = store.kickoffs().await.expect("lists")[0].id;
    let deadline = std::time::Instant::now() + PATIENCE;
    while store.kickoff(&id).await.expect("reads").step < 11 {
        assert!(
            std::time::Instant::now() < deadline,
            "the quick calls are journaled"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    running.abort();
    let _ = running.await;
    let output = resume(&crew, &id).await.expect("resumes");
    assert_eq!(output.raw, "settled");
    assert_eq!(
        lookups.count(),
        3,
        "each finished call is replayed, not run"
    );
    assert_eq!(checks.count(), 2, "the call in doubt runs again");
    let keys = lookups.keys();
    assert_eq!(keys.len(), 3);
    assert!(
        keys[0] != keys[1] && keys[1] != keys[2] && keys[0] != keys[2],
        "a key per call"
    );
    // The model heard of the four calls, in call order.
    assert_eq!(
        llm.requests()[1].observations(),
        ["found", "found", "done: A-1", "found"]
    );
}

/// A refund's script: one refund, then the answer.
fn one_refund() -> Arc<ScriptedLlm> {
    Arc::new(
        ScriptedLlm::new()
            .call("refund", json!({"order": "A-1"}))
            .answer("settled"),
    )
}

/// [`gated_crew_with`] making one refund, with a human-input timeout of
/// `timeout`, parking as `durable` says; and its refunds.
fn parking_crew(
    store: &Store,
    timeout: Duration,
    durable: impl FnOnce(Durable) -> Durable,
) -> (Crew, Calls) {
    let key = JournalKey::generate().expect("a key");
    let refunds = Calls::default();
    let crew = gated_crew_with(store, &key, &one_refund(), &refunds, None, timeout, durable);
    (crew, refunds)
}

/// The id of a kickoff of `crew` that parked, and the events it sent.
async fn parked_kickoff(crew: &Crew) -> (KickoffId, Vec<Event>) {
    let events = Arc::new(Mutex::new(Vec::<Event>::new()));
    let sink = Arc::clone(&events);
    crew.events().subscribe(move |event| {
        if let Ok(mut events) = sink.lock() {
            events.push(event.clone());
        }
    });
    let parked = tokio::time::timeout(PATIENCE, crew.kickoff([("order", "A-1")]))
        .await
        .expect("the kickoff returns once parked");
    let id = match parked {
        Err(CrewError::Parked { kickoff_id }) => {
            kickoff_id.parse::<KickoffId>().expect("a kickoff id")
        }
        other => panic!("expected Parked, got {other:?}"),
    };
    let events = std::mem::take(&mut *events.lock().expect("not poisoned"));
    (id, events)
}

/// SPEC §13 "Parking": a kickoff that parks at once returns
/// `CrewError::Parked`, its question stays open, no resumer takes it up
/// while it waits, and once the question is answered it is ready, taken
/// up once, and its refund runs once with the answer asked once.
async fn a_kickoff_parked_at_once_holds_no_process_and_runs_on_once_answered(
    store: Store,
    _keep: Keep,
) {
    let (crew, refunds) = parking_crew(&store, PATIENCE, |d| d.park_after(Duration::ZERO));
    let (id, events) = parked_kickoff(&crew).await;
    let summary = store.kickoff(&id).await.expect("reads");
    assert_eq!(summary.status, KickoffStatus::Parked);
    let parked = events
        .iter()
        .filter_map(|event| match event {
            Event::Integration(integration) => integration
                .downcast_ref::<CrewKickoffParkedEvent>()
                .cloned(),
            _ => None,
        })
        .next()
        .expect("reported");
    assert_eq!(parked.kickoff_id, id.to_string());
    assert!(!parked.ready);
    let question = pending(&store, 1).await.remove(0);
    assert_eq!(
        question.kickoff_id.as_deref(),
        Some(id.to_string().as_str())
    );
    // Past its lease, a parked kickoff is not taken up: it waits for the
    // person, held by nobody.
    tokio::time::sleep(LEASE + Duration::from_millis(200)).await;
    let resumer = Resumer::new(store.clone()).crew(&crew);
    assert!(resumer.resume_claimable().await.expect("looks").is_empty());
    assert_eq!(refunds.count(), 0);
    store
        .decide(&question.id, Answer::new("ops", Decision::Approve))
        .await
        .expect("ops may approve");
    assert_eq!(
        store.kickoff(&id).await.expect("reads").status,
        KickoffStatus::Ready
    );
    let resumed = resumer.resume_claimable().await.expect("looks");
    assert_eq!(resumed.len(), 1);
    assert_eq!(resumed[0].kickoff, id);
    let output = resumed[0].result.as_ref().expect("completes");
    assert_eq!(output.raw, "settled");
    assert_eq!(refunds.count(), 1);
    assert_eq!(
        store.kickoff(&id).await.expect("reads").status,
        KickoffStatus::Completed
    );
    let asked = store.history(10).await.expect("reads");
    assert_eq!(asked.len(), 1, "one question for the call: {asked:?}");
    assert!(resumer.resume_claimable().await.expect("looks").is_empty());
    // What became of the call, for the inbox: it ran (in the process that
    // resumed it), recorded once the call settled.
    let started = std::time::Instant::now();
    let outcome = loop {
        let question = store.question(&question.id).await.expect("reads");
        if let Some(outcome) = question.and_then(|question| question.outcome) {
            break outcome;
        }
        assert!(started.elapsed() < PATIENCE, "no outcome recorded");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(outcome.outcome, "ran");
}

/// SPEC §13 "Parking": for a crew that parks, the human-input timeout
/// parks the kickoff instead of denying the call, and the question stays
/// open past it.
async fn a_crew_that_parks_parks_at_its_human_input_timeout_instead_of_denying(
    store: Store,
    _keep: Keep,
) {
    let timeout = Duration::from_millis(300);
    let (crew, refunds) =
        parking_crew(&store, timeout, |d| d.park_after(Duration::from_secs(3600)));
    let (id, _) = parked_kickoff(&crew).await;
    assert_eq!(
        store.kickoff(&id).await.expect("reads").status,
        KickoffStatus::Parked
    );
    tokio::time::sleep(timeout * 2).await;
    let question = pending(&store, 1).await.remove(0);
    store
        .decide(&question.id, Answer::new("ops", Decision::Approve))
        .await
        .expect("still open: its deadline is the approval deadline, not the timeout");
    let resumed = Resumer::new(store.clone())
        .crew(&crew)
        .resume_claimable()
        .await
        .expect("looks");
    assert_eq!(resumed.len(), 1);
    assert_eq!(
        resumed[0].result.as_ref().expect("completes").raw,
        "settled"
    );
    assert_eq!(refunds.count(), 1);
}

/// SPEC §13 "Parking": a question whose deadline passes while its
/// kickoff is parked is closed; the call is denied (an answer after the
/// deadline is refused), the kickoff is made ready, and its run goes on
/// without the refund.
async fn a_deadline_passing_while_parked_denies_the_call_and_the_run_goes_on(
    store: Store,
    _keep: Keep,
) {
    let deadline = Duration::from_millis(800);
    let (crew, refunds) = parking_crew(&store, PATIENCE, |d| {
        d.park_after(Duration::ZERO).approval_deadline(deadline)
    });
    let (id, _) = parked_kickoff(&crew).await;
    let question = pending(&store, 1).await.remove(0);
    tokio::time::sleep(deadline + Duration::from_millis(300)).await;
    let late = store
        .decide(&question.id, Answer::new("ops", Decision::Approve))
        .await;
    assert!(
        matches!(late, Err(crew_runtime::store::DecisionError::Expired)),
        "{late:?}"
    );
    let resumer = Resumer::new(store.clone()).crew(&crew);
    run_on_denied(&resumer, &store, &id, &refunds).await;
}

/// SPEC §13 "Parking": a resumer running in the background, looking only
/// once an hour, is woken by the answer and takes the parked kickoff up.
async fn a_background_resumer_wakes_on_the_answer_to_a_parked_kickoff(store: Store, _keep: Keep) {
    let (crew, refunds) = parking_crew(&store, PATIENCE, |d| d.park_after(Duration::ZERO));
    let (id, _) = parked_kickoff(&crew).await;
    let resumer = Resumer::new(store.clone())
        .crew(&crew)
        .every(Duration::from_secs(3600));
    let background = tokio::spawn(async move { resumer.run().await });
    let question = pending(&store, 1).await.remove(0);
    store
        .decide(&question.id, Answer::new("ops", Decision::Approve))
        .await
        .expect("ops may approve");
    let started = std::time::Instant::now();
    while store.kickoff(&id).await.expect("reads").status != KickoffStatus::Completed {
        assert!(started.elapsed() < PATIENCE, "not taken up");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    background.abort();
    assert_eq!(refunds.count(), 1);
}

/// SPEC §13 "Parking", on the store's clock: a kickoff parked for a week
/// (past its question's 24-hour deadline) is taken up with its call
/// denied, and is not asked again.
async fn a_kickoff_parked_for_a_week_finds_its_question_expired_and_the_call_denied(
    store: Store,
    _keep: Keep,
) {
    let (crew, refunds) = parking_crew(&store, PATIENCE, |d| d.park_after(Duration::ZERO));
    let (id, _) = parked_kickoff(&crew).await;
    let question = pending(&store, 1).await.remove(0);
    let resumer = Resumer::new(store.clone()).crew(&crew);
    assert!(resumer.resume_claimable().await.expect("looks").is_empty());
    store.advance_clock(Duration::from_secs(7 * 24 * 3600));
    let asked = run_on_denied(&resumer, &store, &id, &refunds).await;
    assert_eq!(asked.id, question.id);
    assert_eq!(asked.status, crew_runtime::store::QuestionStatus::Expired);
}

/// SPEC §13 "Parking", on the store's clock standing still: an answer
/// given exactly at a parked kickoff's deadline, or one millisecond after,
/// is refused; one given a millisecond before it is taken, and that
/// kickoff alone makes its refund.
async fn an_answer_at_or_after_the_deadline_is_refused_and_one_just_before_is_taken(
    store: Store,
    _keep: Keep,
) {
    // Three crews alike (each with its model's script of its own).
    let mut parked = Vec::new();
    let mut crews = Vec::new();
    for _ in 0..3 {
        let (crew, refunds) = parking_crew(&store, PATIENCE, |d| {
            d.park_after(Duration::ZERO)
                .approval_deadline(Duration::from_secs(3600))
        });
        parked.push(parked_kickoff(&crew).await.0);
        crews.push((crew, refunds));
    }
    let questions = pending(&store, 3).await;
    let question_of = |id: &KickoffId| {
        questions
            .iter()
            .find(|question| question.kickoff_id.as_deref() == Some(id.to_string().as_str()))
            .expect("a question per kickoff")
            .clone()
    };
    let millisecond = Duration::from_millis(1);
    let (at, after, before) = (
        question_of(&parked[0]),
        question_of(&parked[1]),
        question_of(&parked[2]),
    );
    let approve = |id: String| {
        let store = store.clone();
        async move {
            store
                .decide(&id, Answer::new("ops", Decision::Approve))
                .await
        }
    };
    store.freeze_clock(at.deadline);
    let refused = approve(at.id.clone()).await;
    assert!(
        matches!(refused, Err(crew_runtime::store::DecisionError::Expired)),
        "exactly at the deadline: {refused:?}"
    );
    store.freeze_clock(after.deadline + millisecond);
    let refused = approve(after.id.clone()).await;
    assert!(
        matches!(refused, Err(crew_runtime::store::DecisionError::Expired)),
        "a millisecond after: {refused:?}"
    );
    store.freeze_clock(before.deadline - millisecond);
    approve(before.id.clone())
        .await
        .expect("a millisecond before the deadline");
    assert_eq!(
        store.kickoff(&parked[2]).await.expect("reads").status,
        KickoffStatus::Ready
    );
    // The two others' questions are closed (expired): a resumer's sweep
    // would wake them to run on with their calls denied.
    for (id, question) in [(&parked[0], &at), (&parked[1], &after)] {
        assert_eq!(
            store.kickoff(id).await.expect("reads").status,
            KickoffStatus::Parked
        );
        let closed = store.question(&question.id).await.expect("reads");
        assert_eq!(
            closed.map(|question| question.status),
            Some(crew_runtime::store::QuestionStatus::Expired)
        );
    }
    let (crew, refunds) = &crews[2];
    let output = crew.resume(&parked[2]).await.expect("completes");
    assert_eq!(output.raw, "settled");
    assert_eq!(refunds.count(), 1, "the approved refund");
}

/// One look of `resumer` takes up kickoff `id`, made ready by its expired
/// question, and runs it to its end with the refund denied (not run) and
/// the question not asked again; that question.
async fn run_on_denied(
    resumer: &Resumer,
    store: &Store,
    id: &KickoffId,
    refunds: &Calls,
) -> crew_runtime::store::Question {
    let resumed = resumer.resume_claimable().await.expect("looks");
    assert_eq!(resumed.len(), 1, "the expired question made it ready");
    assert_eq!(&resumed[0].kickoff, id);
    assert_eq!(
        resumed[0].result.as_ref().expect("completes").raw,
        "settled"
    );
    assert_eq!(refunds.count(), 0, "the call was denied");
    let mut asked = store.history(10).await.expect("reads");
    assert_eq!(asked.len(), 1, "not asked again: {asked:?}");
    asked.remove(0)
}

/// SPEC §13 "Parking": a kickoff of a crew that parks, dropped while it
/// waits for a person (its caller gone, a service shutting down), parks
/// instead of being left running for a resumer to claim (which would only
/// wait again); no `EXECUTION_END`, and the answer runs it on.
async fn a_kickoff_dropped_while_it_waits_for_a_person_parks(store: Store, _keep: Keep) {
    let (crew, refunds) = parking_crew(&store, PATIENCE, |d| {
        d.park_after(Duration::from_secs(3600))
    });
    let running = tokio::spawn({
        let crew = crew.clone();
        async move { crew.kickoff([("order", "A-1")]).await }
    });
    let question = pending(&store, 1).await.remove(0);
    let id: KickoffId = question
        .kickoff_id
        .as_deref()
        .expect("the kickoff's question")
        .parse()
        .expect("a kickoff id");
    running.abort();
    let _ = running.await;
    let started = std::time::Instant::now();
    while store.kickoff(&id).await.expect("reads").status != KickoffStatus::Parked {
        assert!(started.elapsed() < PATIENCE, "not parked");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Past its lease: still parked, not claimable.
    tokio::time::sleep(LEASE + Duration::from_millis(200)).await;
    let resumer = Resumer::new(store.clone()).crew(&crew);
    assert!(resumer.resume_claimable().await.expect("looks").is_empty());
    store
        .decide(&question.id, Answer::new("ops", Decision::Approve))
        .await
        .expect("ops may approve");
    let resumed = resumer.resume_claimable().await.expect("looks");
    assert_eq!(resumed.len(), 1);
    assert_eq!(
        resumed[0].result.as_ref().expect("completes").raw,
        "settled"
    );
    assert_eq!(refunds.count(), 1);
}

/// SPEC §13 "Parking": a kickoff that parks is recorded on the audit trail
/// as `kickoff_parked`, naming the kickoff and the process.
async fn a_parked_kickoff_is_recorded_on_the_audit_trail(store: Store, _keep: Keep) {
    let (crew, _refunds) = parking_crew(&store, PATIENCE, |d| d.park_after(Duration::ZERO));
    let trail = AuditTrail::open(store.clone()).expect("a writer");
    trail.attach(&crew);
    let (id, _) = parked_kickoff(&crew).await;
    trail.flush().await.expect("written");
    let records = audit::tail(&store, "default", 100).await.expect("reads");
    let parked = records
        .iter()
        .find(|record| record.kind == "kickoff_parked")
        .expect("recorded");
    assert_eq!(parked.data["kickoff"], id.to_string());
    assert_eq!(parked.data["ready"], false);
    assert!(
        parked.data["owner"]
            .as_str()
            .is_some_and(|owner| !owner.is_empty()),
        "{:?}",
        parked.data
    );
}

/// A crew of one support agent with `refund`, settling one order, asking
/// through the store with a human-input timeout of `timeout`; no hook yet.
fn refund_builder(
    store: &Store,
    llm: &Arc<ScriptedLlm>,
    refund: Tool,
    timeout: Duration,
) -> crew_runtime::CrewBuilder {
    let support = Agent::builder("Support")
        .llm(Arc::clone(llm) as Arc<dyn Llm>)
        .tool(refund)
        .build();
    Crew::builder()
        .name("refunds")
        .agent(support.clone())
        .task(
            Task::builder("Settle order {order}")
                .agent(&support)
                .build(),
        )
        .global_registry(Arc::new(HookRegistry::new()))
        .human_input(Arc::new(
            StoreApprovals::new(store.clone()).lease(Duration::from_secs(1)),
        ))
        .human_input_timeout(timeout)
}

/// A refund crew whose approval gate has a counting hook before it (which
/// also stamps the arguments) and one after it; the counts, and the
/// arguments each refund got.
struct CountedGate {
    crew: Crew,
    before: Arc<AtomicUsize>,
    after: Arc<AtomicUsize>,
    refunded_with: Arc<Mutex<Vec<serde_json::Value>>>,
}

fn counted_gate_crew(store: &Store, durable: impl FnOnce(Durable) -> Durable) -> CountedGate {
    let gate = ApprovalGate::for_capabilities([Capability::Destructive]);
    counted_gate_crew_asking(store, &one_refund(), gate, durable)
}

/// [`counted_gate_crew`] on `llm`, asking through `gate`.
fn counted_gate_crew_asking(
    store: &Store,
    llm: &Arc<ScriptedLlm>,
    gate: ApprovalGate,
    durable: impl FnOnce(Durable) -> Durable,
) -> CountedGate {
    let (before, after) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let refunded_with = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&refunded_with);
    let refund = refund_tool(move |args| {
        if let Ok(mut kept) = kept.lock() {
            kept.push(args);
        }
    });
    let counted = Arc::clone(&before);
    let counted_after = Arc::clone(&after);
    let crew = refund_builder(store, llm, refund, PATIENCE)
        .hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("count-before"),
            move |ctx: &mut ToolCallHookContext| {
                let count = counted.fetch_add(1, Ordering::SeqCst) + 1;
                ctx.tool_input.insert("counted".into(), json!(count));
            },
        )
        .async_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("approval-gate"),
            gate.pre_hook(),
        )
        .hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("count-after"),
            move |_: &mut ToolCallHookContext| {
                counted_after.fetch_add(1, Ordering::SeqCst);
            },
        )
        .durable(durable(
            Durable::new(store.clone())
                .journal_key(JournalKey::generate().expect("a key"))
                .lease(LEASE),
        ))
        .build()
        .expect("builds");
    CountedGate {
        crew,
        before,
        after,
        refunded_with,
    }
}

/// SPEC §13 "Parking": the answer to a parked call is journaled against
/// the call (the hook that asked, its place, the arguments the hooks
/// before it left), and the resumed run starts the call's PRE chain at
/// that hook: a counter before the gate counts the call once, as in a run
/// that never parked, and the tool gets the arguments the first process's
/// hooks left.
async fn a_parked_call_resumes_at_its_gate_and_the_hooks_before_it_count_it_once(
    store: Store,
    _keep: Keep,
) {
    // A run that never parks: the question answered while it waits.
    let unparked = counted_gate_crew(&store, |d| d.park_after(Duration::from_secs(3600)));
    let answering = {
        let store = store.clone();
        tokio::spawn(async move {
            let question = pending(&store, 1).await.remove(0);
            store
                .decide(&question.id, Answer::new("ops", Decision::Approve))
                .await
                .expect("ops may approve");
        })
    };
    let output = tokio::time::timeout(PATIENCE, unparked.crew.kickoff([("order", "A-1")]))
        .await
        .expect("ends")
        .expect("completes");
    answering.await.expect("answered");
    assert_eq!(output.raw, "settled");
    let counts = |gate: &CountedGate| {
        (
            gate.before.load(Ordering::SeqCst),
            gate.after.load(Ordering::SeqCst),
        )
    };
    assert_eq!(counts(&unparked), (1, 1));

    // The same call, parked at once and resumed after the answer.
    let parked = counted_gate_crew(&store, |d| d.park_after(Duration::ZERO));
    let (id, _) = parked_kickoff(&parked.crew).await;
    assert_eq!(counts(&parked), (1, 0), "parked at the gate");
    let question = pending(&store, 1).await.remove(0);
    store
        .decide(&question.id, Answer::new("ops", Decision::Approve))
        .await
        .expect("ops may approve");
    let resumed = Resumer::new(store.clone())
        .crew(&parked.crew)
        .resume_claimable()
        .await
        .expect("looks");
    assert_eq!(resumed.len(), 1);
    assert_eq!(resumed[0].kickoff, id);
    assert_eq!(
        resumed[0].result.as_ref().expect("completes").raw,
        "settled"
    );
    assert_eq!(
        counts(&parked),
        counts(&unparked),
        "the hook before the gate counted the call once"
    );
    let refunded = parked.refunded_with.lock().expect("not poisoned").clone();
    assert_eq!(
        refunded,
        vec![json!({"order": "A-1", "counted": 1})],
        "the tool got the arguments the first process's hooks left"
    );
    assert_eq!(store.history(10).await.expect("reads").len(), 2);
}

/// SPEC §13: a durable kickoff's questions belong to it. A service that
/// withdraws its open questions as it shuts down
/// (`StoreApprovals::withdraw_open`) leaves a parked kickoff's question
/// open, and its answer still reaches the resumed run; another question
/// of the same source, about no durable kickoff, is withdrawn.
async fn a_service_withdrawing_its_open_questions_leaves_a_parked_kickoffs_question_open(
    store: Store,
    _keep: Keep,
) {
    use crew_runtime::{HumanInputRequest, HumanInputSource};
    let approvals = StoreApprovals::new(store.clone()).lease(Duration::from_secs(1));
    let refunds = Calls::default();
    let counted = refunds.clone();
    let refund = refund_tool(move |_| {
        counted.ran();
    });
    let crew = refund_builder(&store, &one_refund(), refund, PATIENCE)
        .human_input(Arc::new(approvals.clone()))
        .async_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("approval-gate"),
            ApprovalGate::for_capabilities([Capability::Destructive]).pre_hook(),
        )
        .durable(
            Durable::new(store.clone())
                .journal_key(JournalKey::generate().expect("a key"))
                .lease(LEASE)
                .park_after(Duration::ZERO),
        )
        .build()
        .expect("builds");
    let (id, _) = parked_kickoff(&crew).await;
    // A question of the same source outside any durable kickoff.
    let asking = {
        let approvals = approvals.clone();
        tokio::spawn(async move {
            approvals
                .ask(HumanInputRequest::new("Deploy?", "yes/no"))
                .await
        })
    };
    pending(&store, 2).await;
    assert_eq!(approvals.withdraw_open().await.expect("withdraws"), 1);
    let question = pending(&store, 1).await.remove(0);
    assert_eq!(
        question.kickoff_id.as_deref(),
        Some(id.to_string().as_str())
    );
    assert!(
        asking.await.expect("the task").is_err(),
        "withdrawn: refused"
    );
    store
        .decide(&question.id, Answer::new("ops", Decision::Approve))
        .await
        .expect("ops may approve");
    let resumed = Resumer::new(store.clone())
        .crew(&crew)
        .resume_claimable()
        .await
        .expect("looks");
    assert_eq!(resumed.len(), 1);
    assert!(resumed[0].result.is_ok(), "{:?}", resumed[0].result);
    assert_eq!(refunds.count(), 1);
}

/// `Crew::start_held`: the kickoff is journaled and its id known before
/// it runs, and no resumer takes it up meanwhile (as one may between
/// `start` and `resume`); run, it completes once; dropped unrun, it is
/// given up at once, and a resumer runs it.
async fn a_held_kickoff_is_left_to_its_process_until_it_runs_and_given_up_if_dropped_unrun(
    store: Store,
    _keep: Keep,
) {
    let key = JournalKey::generate().expect("a key");
    let lookups = Calls::default();
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("lookup", json!({"order": "A-1"}))
            .answer("settled")
            .call("lookup", json!({"order": "A-2"}))
            .answer("settled too"),
    );
    let registry = Arc::new(HookRegistry::new());
    let crew = support_crew(
        "refunds",
        &store,
        &key,
        &llm,
        vec![counting_tool("lookup", &lookups)],
        &registry,
    )
    .expect("builds");
    let resumer = Resumer::new(store.clone()).crew(&crew);

    let held = crew.start_held([("order", "A-1")]).await.expect("starts");
    let id = held.id();
    assert_eq!(
        store.kickoff(&id).await.expect("reads").status,
        KickoffStatus::Running
    );
    assert!(
        resumer.resume_claimable().await.expect("looks").is_empty(),
        "held by this process"
    );
    let output = held.run().await.expect("runs");
    assert_eq!(output.raw, "settled");
    assert_eq!(lookups.count(), 1);
    assert_eq!(
        store.kickoff(&id).await.expect("reads").status,
        KickoffStatus::Completed
    );

    let dropped = crew.start_held([("order", "A-2")]).await.expect("starts");
    let id = dropped.id();
    drop(dropped);
    let started = std::time::Instant::now();
    let resumed = loop {
        let resumed = resumer.resume_claimable().await.expect("looks");
        if !resumed.is_empty() {
            break resumed;
        }
        assert!(
            started.elapsed() < LEASE,
            "given up at once, not at its lease's end"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(resumed[0].kickoff, id);
    assert_eq!(
        resumed[0].result.as_ref().expect("completes").raw,
        "settled too"
    );
    assert_eq!(lookups.count(), 2);
}

/// The outcome question `id` holds, once its process recorded one.
async fn outcome_of(store: &Store, id: &str) -> crew_runtime::store::CallOutcome {
    let started = std::time::Instant::now();
    loop {
        let question = store.question(id).await.expect("reads").expect("kept");
        if let Some(outcome) = question.outcome {
            return outcome;
        }
        assert!(started.elapsed() < PATIENCE, "no outcome recorded");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// SPEC §13 "Parking": once answered, a parked kickoff's question says
/// what became of the call and which process ran it: the replica that
/// resumed the kickoff, not the one that asked.
async fn an_answered_question_says_which_process_ran_the_resumed_call(store: Store, _keep: Keep) {
    let key = JournalKey::generate().expect("a key");
    let replica = |owner: &'static str| {
        let key = key.clone();
        move |durable: Durable| {
            durable
                .journal_key(key)
                .owner(owner)
                .park_after(Duration::ZERO)
        }
    };
    let first = counted_gate_crew(&store, replica("replica-a"));
    let (id, _) = parked_kickoff(&first.crew).await;
    let question = pending(&store, 1).await.remove(0);
    store
        .decide(&question.id, Answer::new("ops", Decision::Approve))
        .await
        .expect("ops may approve");
    // Its model goes on from the answer its journal replays.
    let rest = Arc::new(ScriptedLlm::new().answer("settled"));
    let gate = ApprovalGate::for_capabilities([Capability::Destructive]);
    let second = counted_gate_crew_asking(&store, &rest, gate, replica("replica-b"));
    let resumed = Resumer::new(store.clone())
        .crew(&second.crew)
        .resume_claimable()
        .await
        .expect("looks");
    assert_eq!(resumed.len(), 1);
    assert_eq!(resumed[0].kickoff, id);
    assert!(resumed[0].result.is_ok(), "{:?}", resumed[0].result);
    assert_eq!(second.refunded_with.lock().expect("not poisoned").len(), 1);
    let outcome = outcome_of(&store, &question.id).await;
    assert_eq!(outcome.outcome, "ran");
    let started = std::time::Instant::now();
    let by = loop {
        let by = outcome_of(&store, &question.id).await.by;
        if by.is_some() || started.elapsed() > PATIENCE {
            break by;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(by.as_deref(), Some("replica-b"));
}

/// SPEC §13: an approved call whose process went while the tool ran, and
/// that nothing can settle on resume (not idempotent, no reconciler,
/// nobody says what happened), leaves its question saying so: in doubt,
/// held by the process that found it so.
async fn an_answered_question_says_its_call_was_left_in_doubt_and_by_which_process(
    store: Store,
    _keep: Keep,
) {
    let key = JournalKey::generate().expect("a key");
    let refunds = Calls::default();
    let (started, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let replica = |owner: &str| {
        let refund = stalling_tool("refund", &refunds, &started, &release)
            .with_annotations(ToolAnnotations::new().destructive(true))
            .with_timeout(Duration::from_millis(400));
        // Nobody says what happened to the call in doubt within 300 ms.
        refund_builder(&store, &one_refund(), refund, Duration::from_millis(300))
            .async_hook_with(
                PRE_TOOL_CALL,
                HookOptions::new().name("approval-gate"),
                ApprovalGate::for_capabilities([Capability::Destructive]).pre_hook(),
            )
            .durable(
                Durable::new(store.clone())
                    .journal_key(key.clone())
                    .lease(LEASE)
                    .owner(owner),
            )
            .build()
            .expect("builds")
    };
    let first = replica("replica-a");
    let running = {
        let crew = first.clone();
        tokio::spawn(async move { crew.kickoff([("order", "A-1")]).await })
    };
    let question = pending(&store, 1).await.remove(0);
    store
        .decide(&question.id, Answer::new("ops", Decision::Approve))
        .await
        .expect("ops may approve");
    tokio::time::timeout(PATIENCE, started.notified())
        .await
        .expect("the refund starts");
    // Its process goes while the refund runs.
    running.abort();
    let _ = running.await;
    let id = store.kickoffs().await.expect("lists")[0].id;

    let second = replica("replica-b");
    let error = resume(&second, &id).await.expect_err("in doubt");
    assert!(matches!(error, CrewError::InDoubt { .. }), "{error}");
    assert_eq!(refunds.count(), 1, "never run again blind");
    let outcome = outcome_of(&store, &question.id).await;
    assert_eq!(outcome.outcome, "in_doubt");
    assert_eq!(outcome.by.as_deref(), Some("replica-b"));
    assert!(outcome.detail.is_some_and(|why| !why.is_empty()));
}

/// SPEC §13 "Parking": `kickoff` returns `CrewError::Parked` unless the
/// caller chose to wait (`Crew::kickoff_waiting`): then, on a crew that
/// parks at once, the caller waits for the answer and gets the output, and
/// the kickoff never parks.
async fn a_caller_that_chose_to_wait_gets_the_output_of_a_crew_that_parks(
    store: Store,
    _keep: Keep,
) {
    let (crew, refunds) = parking_crew(&store, Duration::from_millis(200), |d| {
        d.park_after(Duration::ZERO)
    });
    let answering = {
        let store = store.clone();
        tokio::spawn(async move {
            let question = pending(&store, 1).await.remove(0);
            // Past the crew's human-input timeout: a waiting caller waits
            // for the question's deadline, not for that.
            tokio::time::sleep(Duration::from_millis(500)).await;
            store
                .decide(&question.id, Answer::new("ops", Decision::Approve))
                .await
                .expect("ops may approve");
        })
    };
    let output = tokio::time::timeout(PATIENCE, crew.kickoff_waiting([("order", "A-1")]))
        .await
        .expect("ends")
        .expect("completes, not parked");
    answering.await.expect("answered");
    assert_eq!(output.raw, "settled");
    assert_eq!(refunds.count(), 1);
    let kickoffs = store.kickoffs().await.expect("lists");
    assert_eq!(kickoffs[0].status, KickoffStatus::Completed);
}

/// SPEC §13 "Parking": the question's id is journaled with its gate before
/// it is asked, so the resumed run asks the very same question again (and
/// takes its answer) even where its wording changed since: here each
/// replica words it with its own name. One question, one refund.
async fn a_resumed_call_takes_up_the_question_its_journal_names_even_if_worded_anew(
    store: Store,
    _keep: Keep,
) {
    let key = JournalKey::generate().expect("a key");
    // The second replica's model goes on from the answer its journal
    // replays: what remains of its plan is the final answer.
    let replica = |name: &'static str, llm: Arc<ScriptedLlm>| {
        let key = key.clone();
        let gate = ApprovalGate::for_capabilities([Capability::Destructive])
            .prompt(move |ctx| format!("{name} asks: refund {}?", ctx.tool_input["order"]));
        counted_gate_crew_asking(&store, &llm, gate, move |durable: Durable| {
            durable.journal_key(key).park_after(Duration::ZERO)
        })
    };
    let first = replica("replica-a", one_refund());
    let (id, _) = parked_kickoff(&first.crew).await;
    let question = pending(&store, 1).await.remove(0);
    assert!(question.prompt.contains("replica-a"), "{}", question.prompt);
    store
        .decide(&question.id, Answer::new("ops", Decision::Approve))
        .await
        .expect("ops may approve");
    let second = replica("replica-b", Arc::new(ScriptedLlm::new().answer("settled")));
    let resumed = Resumer::new(store.clone())
        .crew(&second.crew)
        .resume_claimable()
        .await
        .expect("looks");
    assert_eq!(resumed.len(), 1);
    assert_eq!(resumed[0].kickoff, id);
    assert_eq!(
        resumed[0].result.as_ref().expect("completes").raw,
        "settled"
    );
    assert_eq!(second.refunded_with.lock().expect("not poisoned").len(), 1);
    let asked = store.history(10).await.expect("reads");
    assert_eq!(asked.len(), 1, "asked once: {asked:?}");
    assert_eq!(asked[0].id, question.id);
}

/// SPEC §11/§13: an approval decides exactly the call it was asked about.
/// The model asks for the very same refund twice, in two turns, under the
/// same call id (as some models number their calls per turn): the same
/// arguments, the same question. Each is asked about, each parks, and the
/// first answer does not approve the second.
async fn a_second_identical_call_is_asked_about_anew_not_approved_by_the_first_answer(
    store: Store,
    _keep: Keep,
) {
    let refund = || crew_runtime::llm::ModelTurn::ToolCalls {
        content: String::new(),
        calls: vec![crew_runtime::llm::ToolCallRequest {
            id: "call_1".into(),
            name: "refund".into(),
            arguments: json!({"order": "A-1"}).to_string(),
        }],
    };
    let twice = Arc::new(
        ScriptedLlm::new()
            .turn(refund())
            .turn(refund())
            .answer("settled"),
    );
    let refunds = Calls::default();
    let key = JournalKey::generate().expect("a key");
    let crew = gated_crew_with(&store, &key, &twice, &refunds, None, PATIENCE, |d| {
        d.park_after(Duration::ZERO)
    });
    let (id, _) = parked_kickoff(&crew).await;
    let resumer = Resumer::new(store.clone()).crew(&crew);
    for asked in 1..=2 {
        let question = pending(&store, 1).await.remove(0);
        store
            .decide(&question.id, Answer::new("ops", Decision::Approve))
            .await
            .expect("ops may approve");
        let resumed = resumer.resume_claimable().await.expect("looks");
        assert_eq!(resumed.len(), 1);
        assert_eq!(resumed[0].kickoff, id);
        match (&resumed[0].result, asked) {
            (Err(CrewError::Parked { .. }), 1) => {}
            (Ok(output), 2) => assert_eq!(output.raw, "settled"),
            (other, _) => panic!("after answer {asked}: {other:?}"),
        }
        assert_eq!(refunds.count(), asked);
    }
    assert_eq!(
        store.history(10).await.expect("reads").len(),
        2,
        "asked twice"
    );
}

/// SPEC §13 "Parking": `CrewBuilder::park_after` parks a durable crew's
/// kickoffs, whether it is called before or after `CrewBuilder::durable`
/// (and wins over the durable setting's); on a crew that is not durable
/// the build refuses it.
async fn the_crew_builder_parks_a_durable_crew_told_before_or_after_it_is_made_durable(
    store: Store,
    _keep: Keep,
) {
    let refund = || refund_tool(|_| {});
    let durable = || {
        Durable::new(store.clone())
            .journal_key(JournalKey::generate().expect("a key"))
            .lease(LEASE)
    };
    let gate = ApprovalGate::for_capabilities([Capability::Destructive]);
    let after = refund_builder(&store, &one_refund(), refund(), PATIENCE)
        .async_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("gate"),
            gate.pre_hook(),
        )
        .durable(durable().park_after(Duration::from_secs(3600)))
        .park_after(Duration::ZERO)
        .build()
        .expect("builds");
    let before = refund_builder(&store, &one_refund(), refund(), PATIENCE)
        .async_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("gate"),
            gate.pre_hook(),
        )
        .park_after(Duration::ZERO)
        .durable(durable())
        .build()
        .expect("builds");
    for crew in [after, before] {
        parked_kickoff(&crew).await;
    }
    let refused = refund_builder(&store, &one_refund(), refund(), PATIENCE)
        .park_after(Duration::ZERO)
        .build()
        .expect_err("not durable");
    assert!(
        refused.to_string().contains("needs a durable crew"),
        "{refused}"
    );
}
