//! The audit trail (SPEC §11): every decision recorded, hash-chained,
//! verifiable — on a real SQLite file and a real PostgreSQL server (started
//! by the test run), each scenario on both. Tampering is done the way an
//! intruder would: with SQL, straight on the database.
//!
//! Every wait is bounded: a regression fails an assertion, never hangs.

mod common;
mod support;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use crew_runtime::ToolAnnotations;
use crew_runtime::audit::{
    self, AuditError, AuditRecordsDroppedEvent, AuditTrail, Head, canonical, record_hash,
};
use crew_runtime::guards::ApprovalGate;
use crew_runtime::prelude::*;
use crew_runtime::store::{Answer, Decision, Store, StoreApprovals};

const PATIENCE: Duration = Duration::from_secs(30);
const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// A store of `kind`, its URL, and what keeps it alive; `None` (after a
/// loud message) when PostgreSQL is missing on this machine.
async fn store(kind: &str) -> Option<(Store, String, Option<tempfile::TempDir>)> {
    match kind {
        "sqlite" => {
            let dir = tempfile::tempdir().expect("a temporary directory");
            let url = format!("sqlite://{}", dir.path().join("audit.db").display());
            let store = Store::connect(&url).await.expect("SQLite opens");
            Some((store, url, Some(dir)))
        }
        _ => {
            let url = support::postgres_database().await?;
            let store = Store::connect(&url).await.expect("PostgreSQL opens");
            Some((store, url, None))
        }
    }
}

/// Runs SQL straight on the database, as an intruder would.
async fn tamper(url: &str, statements: &[String]) {
    if url.starts_with("sqlite:") {
        let pool = sqlx::SqlitePool::connect(url).await.expect("opens");
        for sql in statements {
            sqlx::query(sql).execute(&pool).await.expect(sql);
        }
        pool.close().await;
    } else {
        let pool = sqlx::PgPool::connect(url).await.expect("opens");
        for sql in statements {
            sqlx::query(sql).execute(&pool).await.expect(sql);
        }
        pool.close().await;
    }
}

macro_rules! on_both_stores {
    ($($scenario:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    let (store, url, _keep) = super::store("sqlite").await.expect("SQLite");
                    super::$scenario(store, url).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    let Some((store, url, _keep)) = super::store("postgres").await else { return };
                    super::$scenario(store, url).await;
                }
            )*
        }
    };
}

on_both_stores!(
    a_kickoff_is_recorded_with_every_decision_and_the_chain_verifies,
    approvals_asked_and_answered_are_recorded_with_the_approver_and_the_edit,
    a_changed_record_is_named,
    a_removed_record_is_named,
    an_inserted_record_is_named,
    reordered_records_are_named,
    records_cut_from_the_end_are_caught_only_with_a_head,
    a_chain_rewritten_whole_is_caught_only_with_a_head,
    a_trail_whose_first_record_is_missing_is_refused,
    two_trails_interleaved_in_one_table_verify_apart,
    a_clock_that_went_back_is_noted_not_taken_for_a_break,
    a_store_that_stalls_never_stalls_the_crew_and_drops_are_recorded_once_it_is_back,
    two_writers_on_one_trail_keep_one_chain,
    a_crew_that_requires_its_audit_refuses_calls_while_the_trail_cannot_be_written,
    a_record_too_large_is_kept_as_a_note_of_its_size,
);

async fn a_record_too_large_is_kept_as_a_note_of_its_size(store: Store, _url: String) {
    let trail = AuditTrail::open(store.clone()).expect("a writer");
    trail.record(
        "tool_finished",
        json!({"result": "x".repeat(20 * 1024 * 1024)}),
    );
    trail.record("note", json!({"after": true}));
    trail.flush().await.expect("the trail goes on");
    let records = audit::tail(&store, "default", 10).await.expect("reads");
    assert_eq!(records.len(), 2);
    assert_eq!(records[0].kind, "tool_finished");
    assert!(
        records[0].data["bytes"]
            .as_u64()
            .is_some_and(|bytes| bytes > 20 * 1024 * 1024)
    );
    assert_eq!(records[1].data["after"], true);
    audit::verify(&store, "default", None)
        .await
        .expect("intact");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_store_fails_the_flush_clearly_and_keeps_the_crew_going() {
    let (store, url, _keep) = store("sqlite").await.expect("SQLite");
    drop(store);
    let read_only = Store::connect(&format!("{url}?mode=ro"))
        .await
        .expect("a read-only handle opens an up-to-date store");
    let trail = AuditTrail::open(read_only).expect("a writer");
    trail.record("note", json!({"n": 1}));
    match trail.flush().await {
        Err(AuditError::Unwritten(error)) => {
            assert!(error.to_string().contains("readonly"), "{error}")
        }
        other => panic!("a read-only store took records: {other:?}"),
    }
    assert!(trail.is_failing());
    assert!(!trail.can_take_records());
}

/// Writes `count` records to trail `name` and returns the trail's head.
async fn write_records(store: &Store, name: &str, count: usize) -> Head {
    let trail = AuditTrail::open_with(store.clone(), name, 10_000).expect("a writer");
    for n in 0..count {
        trail.record("note", json!({"n": n, "text": format!("record {n}")}));
    }
    trail.flush().await.expect("written");
    audit::head(store, name).await.expect("a head")
}

fn broken_at(result: Result<audit::Verified, AuditError>) -> (i64, String) {
    match result {
        Err(AuditError::Broken { seq, problem, .. }) => (seq, problem),
        other => panic!("the trail passed or failed otherwise: {other:?}"),
    }
}

/// The exit status and output of `crew-audit ARGS`.
fn crew_audit(args: &[&str]) -> (i32, String) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_crew-audit"))
        .args(args)
        .output()
        .expect("crew-audit runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code().unwrap_or(-1), text)
}

async fn a_kickoff_is_recorded_with_every_decision_and_the_chain_verifies(
    store: Store,
    url: String,
) {
    let trail = AuditTrail::open(store.clone()).expect("a writer");
    let llm = Arc::new(
        ScriptedLlm::new()
            .calls([
                ("lookup", json!({"order": "A-17"})),
                ("delete_order", json!({"order": "A-17"})),
                ("broken", json!({})),
            ])
            .answer("done"),
    );
    let lookup = Tool::dynamic(
        "lookup",
        "Looks up an order",
        json!({"type": "object"}),
        |_| Ok::<_, String>(json!("shipped")),
    );
    let delete = Tool::dynamic("delete_order", "Deletes", json!({"type": "object"}), |_| {
        Ok::<_, String>(json!("deleted"))
    });
    let broken = Tool::dynamic("broken", "Fails", json!({"type": "object"}), |_| {
        Err::<Value, _>("the backend is down".to_owned())
    });
    let support = agent("Support", vec![lookup, delete, broken], &llm);
    let crew = Crew::builder()
        .name("support-desk")
        .agent(support.clone())
        .task(Task::builder("Handle the ticket").agent(&support).build())
        .global_registry(fresh_registry())
        .hook(PRE_TOOL_CALL, |ctx: &mut ToolCallHookContext| {
            if ctx.tool_name() == "delete_order" {
                Err(HookAborted::new("deleting is not allowed", "no-deletes"))
            } else {
                Ok(())
            }
        })
        .build()
        .expect("the crew builds");
    trail.attach(&crew);
    crew.for_user("carol")
        .kickoff(())
        .await
        .expect("the kickoff runs");
    trail.flush().await.expect("the trail is written");
    assert_eq!(trail.dropped(), 0);

    let records = audit::tail(&store, "default", 1000).await.expect("reads");
    let kinds: Vec<&str> = records.iter().map(|record| record.kind.as_str()).collect();
    for kind in [
        "kickoff_started",
        "tool_started",
        "tool_finished",
        "blocked",
        "tool_failed",
        "model_call",
        "kickoff_ended",
    ] {
        assert!(kinds.contains(&kind), "no {kind} in {kinds:?}");
    }
    assert_eq!(kinds.first(), Some(&"kickoff_started"));
    assert_eq!(kinds.last(), Some(&"kickoff_ended"));
    let started = &records[0].data;
    assert_eq!(started["user"], "carol");
    assert_eq!(started["crew"], "support-desk");
    let ended = &records[records.len() - 1].data;
    assert_eq!(ended["status"], "completed");
    assert_eq!(ended["kickoff_id"], started["kickoff_id"]);
    let blocked = records
        .iter()
        .find(|record| record.kind == "blocked")
        .expect("a block");
    assert_eq!(blocked.data["source"], "no-deletes");
    assert_eq!(blocked.data["reason"], "deleting is not allowed");
    assert_eq!(blocked.data["tool"], "delete_order");
    let model_call = records
        .iter()
        .find(|record| record.kind == "model_call")
        .expect("a model call");
    assert!(model_call.data["tokens"].is_object() || model_call.data["tokens"].is_null());

    let verified = audit::verify(&store, "default", None)
        .await
        .expect("intact");
    assert_eq!(verified.head.count, records.len() as i64);
    let (status, text) = crew_audit(&["verify", &url]);
    assert_eq!(status, 0, "{text}");
    assert!(text.contains("intact"), "{text}");
    let (status, text) = crew_audit(&["head", &url, "--trail", "default"]);
    assert_eq!(status, 0, "{text}");
    assert_eq!(text.trim(), verified.head.to_string());
    let (status, text) = crew_audit(&["export", &url, "--format", "jsonl"]);
    assert_eq!(status, 0, "{text}");
    assert_eq!(text.lines().count(), records.len());
    for line in text.lines() {
        let record: Value = serde_json::from_str(line).expect("one JSON object per line");
        assert!(record["hash"].as_str().is_some_and(|hash| hash.len() == 64));
    }
}

async fn approvals_asked_and_answered_are_recorded_with_the_approver_and_the_edit(
    store: Store,
    _url: String,
) {
    let trail = AuditTrail::open(store.clone()).expect("a writer");
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("refund", json!({"order": "A-17", "amount": 350}))
            .answer("done"),
    );
    let ran = log();
    let sink = ran.clone();
    let refund = Tool::dynamic(
        "refund",
        "Refunds",
        json!({"type": "object", "properties": {"order": {"type": "string"}, "amount": {"type": "integer"}}}),
        move |args| {
            push(&sink, args.clone());
            Ok::<_, String>(json!("refunded"))
        },
    )
    .with_annotations(ToolAnnotations::new().destructive(true));
    let support = agent("Support", vec![refund], &llm);
    let crew = Crew::builder()
        .agent(support.clone())
        .task(Task::builder("Handle the ticket").agent(&support).build())
        .global_registry(fresh_registry())
        .human_input(Arc::new(
            StoreApprovals::new(store.clone()).audit(trail.clone()),
        ))
        .human_input_timeout(PATIENCE)
        .async_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("approval-gate"),
            ApprovalGate::for_capabilities([Capability::Destructive]).pre_hook(),
        )
        .build()
        .expect("builds")
        .for_user("carol");
    trail.attach(&crew);
    let run = tokio::spawn(async move { crew.kickoff(()).await });
    let started = std::time::Instant::now();
    let question = loop {
        if let Some(question) = store.pending().await.expect("lists").pop() {
            break question;
        }
        assert!(started.elapsed() < PATIENCE);
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let edit = json!({"order": "A-17", "amount": 35});
    store
        .decide(
            &question.id,
            Answer::new(
                "ops",
                Decision::ApproveWithEdit(edit.as_object().cloned().expect("an object")),
            )
            .with_comment("capped"),
        )
        .await
        .expect("answered");
    tokio::time::timeout(PATIENCE, run)
        .await
        .expect("ends")
        .expect("no panic")
        .expect("runs");
    trail.flush().await.expect("written");
    assert_eq!(take(&ran), vec![edit.clone()]);

    let records = audit::tail(&store, "default", 1000).await.expect("reads");
    let asked = records
        .iter()
        .find(|record| record.kind == "approval_asked")
        .expect("the question is recorded");
    assert_eq!(asked.data["question"], question.id.as_str());
    assert_eq!(asked.data["requester"], "carol");
    assert_eq!(
        asked.data["arguments"],
        json!({"order": "A-17", "amount": 350})
    );
    let answered = records
        .iter()
        .find(|record| record.kind == "approval_answered")
        .expect("the answer is recorded");
    assert_eq!(answered.data["approver"], "ops");
    assert_eq!(answered.data["decision"], "edit");
    assert_eq!(answered.data["edited_arguments"], edit);
    assert_eq!(answered.data["comment"], "capped");
    // What the tool ran with is recorded too.
    let tool_started = records
        .iter()
        .find(|record| record.kind == "tool_started")
        .expect("the tool's start");
    assert_eq!(tool_started.data["input"], edit);
    audit::verify(&store, "default", None)
        .await
        .expect("intact");
}

async fn a_changed_record_is_named(store: Store, url: String) {
    write_records(&store, "default", 6).await;
    tamper(
        &url,
        &[
            r#"UPDATE crew_audit SET data = '{"n":2,"text":"nothing happened"}' WHERE seq = 3"#
                .into(),
        ],
    )
    .await;
    let (seq, problem) = broken_at(audit::verify(&store, "default", None).await);
    assert_eq!(seq, 3);
    assert!(problem.contains("changed"), "{problem}");
    let (status, text) = crew_audit(&["verify", &url]);
    assert_eq!(status, 1, "{text}");
    assert!(text.contains("record 3"), "{text}");
}

async fn a_removed_record_is_named(store: Store, url: String) {
    write_records(&store, "default", 6).await;
    tamper(&url, &["DELETE FROM crew_audit WHERE seq = 4".into()]).await;
    let (seq, problem) = broken_at(audit::verify(&store, "default", None).await);
    assert_eq!(seq, 4);
    assert!(problem.contains("removed"), "{problem}");
    let (status, text) = crew_audit(&["verify", &url]);
    assert_eq!(status, 1, "{text}");
    assert!(text.contains("record 4"), "{text}");
}

async fn an_inserted_record_is_named(store: Store, url: String) {
    write_records(&store, "default", 6).await;
    let records = audit::tail(&store, "default", 10).await.expect("reads");
    // Make room at 3, then forge a record there that links to record 2
    // and carries a correct hash of its own.
    let data = canonical(&json!({"n": 99, "text": "forged"}));
    let at = records[1].at;
    let hash = record_hash("default", 3, at, "note", &data, &records[1].hash);
    tamper(
        &url,
        &[
            "UPDATE crew_audit SET seq = seq + 1000 WHERE seq >= 3".into(),
            "UPDATE crew_audit SET seq = seq - 999 WHERE seq >= 1000".into(),
            format!(
                "INSERT INTO crew_audit (trail, seq, at, kind, data, prev_hash, hash) \
                 VALUES ('default', 3, {at}, 'note', '{data}', '{}', '{hash}')",
                records[1].hash
            ),
        ],
    )
    .await;
    let (seq, problem) = broken_at(audit::verify(&store, "default", None).await);
    assert_eq!(seq, 4, "{problem}");
    assert!(problem.contains("record 3 was inserted"), "{problem}");
}

async fn reordered_records_are_named(store: Store, url: String) {
    write_records(&store, "default", 6).await;
    tamper(
        &url,
        &[
            "UPDATE crew_audit SET seq = 1003 WHERE seq = 3".into(),
            "UPDATE crew_audit SET seq = 3 WHERE seq = 4".into(),
            "UPDATE crew_audit SET seq = 4 WHERE seq = 1003".into(),
        ],
    )
    .await;
    let (seq, problem) = broken_at(audit::verify(&store, "default", None).await);
    assert_eq!(seq, 3);
    assert!(problem.contains("reordered"), "{problem}");
}

async fn records_cut_from_the_end_are_caught_only_with_a_head(store: Store, url: String) {
    let kept = write_records(&store, "default", 6).await;
    tamper(&url, &["DELETE FROM crew_audit WHERE seq >= 5".into()]).await;
    // What the chain alone cannot see:
    let verified = audit::verify(&store, "default", None)
        .await
        .expect("a shorter chain still holds");
    assert_eq!(verified.head.count, 4);
    // What a head kept elsewhere catches:
    match audit::verify(&store, "default", Some(&kept)).await {
        Err(AuditError::HeadMismatch { problem, .. }) => {
            assert!(problem.contains("cut from the end"), "{problem}")
        }
        other => panic!("a cut trail passed: {other:?}"),
    }
    let expect = kept.to_string();
    let (status, text) = crew_audit(&["verify", &url, "--trail", "default", "--expect", &expect]);
    assert_eq!(status, 1, "{text}");
    assert!(text.contains("cut"), "{text}");
}

async fn a_chain_rewritten_whole_is_caught_only_with_a_head(store: Store, url: String) {
    let kept = write_records(&store, "default", 4).await;
    let records = audit::tail(&store, "default", 10).await.expect("reads");
    // Rewrite every record, one of them changed, with fresh hashes.
    let mut statements = vec!["DELETE FROM crew_audit".to_owned()];
    let mut prev = GENESIS.to_owned();
    for record in &records {
        let mut data = record.data.clone();
        if record.seq == 2 {
            data = json!({"n": 1, "text": "something else"});
        }
        let data = canonical(&data);
        let hash = record_hash("default", record.seq, record.at, "note", &data, &prev);
        statements.push(format!(
            "INSERT INTO crew_audit (trail, seq, at, kind, data, prev_hash, hash) \
             VALUES ('default', {}, {}, 'note', '{data}', '{prev}', '{hash}')",
            record.seq, record.at
        ));
        prev = hash;
    }
    tamper(&url, &statements).await;
    audit::verify(&store, "default", None)
        .await
        .expect("a chain rewritten whole holds by itself");
    match audit::verify(&store, "default", Some(&kept)).await {
        Err(AuditError::HeadMismatch { problem, .. }) => {
            assert!(problem.contains("rewritten"), "{problem}")
        }
        other => panic!("a rewritten chain passed: {other:?}"),
    }
}

async fn a_trail_whose_first_record_is_missing_is_refused(store: Store, url: String) {
    write_records(&store, "default", 3).await;
    tamper(&url, &["DELETE FROM crew_audit WHERE seq = 1".into()]).await;
    let (seq, problem) = broken_at(audit::verify(&store, "default", None).await);
    assert_eq!(seq, 1);
    assert!(problem.contains("starts at record 2"), "{problem}");
}

async fn two_trails_interleaved_in_one_table_verify_apart(store: Store, url: String) {
    let first = AuditTrail::open_with(store.clone(), "payments", 1000).expect("a writer");
    let second = AuditTrail::open_with(store.clone(), "support", 1000).expect("a writer");
    for n in 0..20 {
        first.record("note", json!({"n": n}));
        second.record("note", json!({"n": n}));
        if n % 5 == 0 {
            first.flush().await.expect("written");
            second.flush().await.expect("written");
        }
    }
    first.flush().await.expect("written");
    second.flush().await.expect("written");
    assert_eq!(
        audit::trails(&store).await.expect("lists"),
        ["payments", "support"]
    );
    for trail in ["payments", "support"] {
        let verified = audit::verify(&store, trail, None).await.expect("intact");
        assert_eq!(verified.head.count, 20);
    }
    let (status, text) = crew_audit(&["verify", &url]);
    assert_eq!(status, 0, "{text}");
    assert!(
        text.contains("trail payments") && text.contains("trail support"),
        "{text}"
    );
    // A record moved from one trail to the other breaks both.
    tamper(
        &url,
        &["UPDATE crew_audit SET trail = 'support', seq = 21 WHERE trail = 'payments' AND seq = 20".into()],
    )
    .await;
    let (seq, problem) = broken_at(audit::verify(&store, "support", None).await);
    assert_eq!(seq, 21, "{problem}");
}

async fn a_clock_that_went_back_is_noted_not_taken_for_a_break(store: Store, url: String) {
    // A writer whose clock went back an hour between records 2 and 3.
    let mut statements = Vec::new();
    let mut prev = GENESIS.to_owned();
    for (seq, at) in [
        (1i64, 1_700_000_000_000i64),
        (2, 1_700_000_001_000),
        (3, 1_699_996_401_000),
        (4, 1_699_996_402_000),
    ] {
        let data = canonical(&json!({"seq": seq}));
        let hash = record_hash("default", seq, at, "note", &data, &prev);
        statements.push(format!(
            "INSERT INTO crew_audit (trail, seq, at, kind, data, prev_hash, hash) \
             VALUES ('default', {seq}, {at}, 'note', '{data}', '{prev}', '{hash}')"
        ));
        prev = hash;
    }
    tamper(&url, &statements).await;
    let verified = audit::verify(&store, "default", None)
        .await
        .expect("intact");
    assert_eq!(verified.clock_went_back_at, [3]);
    let (status, text) = crew_audit(&["verify", &url]);
    assert_eq!(status, 0, "{text}");
    assert!(text.contains("clock went back"), "{text}");
    // And a writer appends after it without trouble.
    write_records(&store, "default", 2).await;
    assert_eq!(
        audit::verify(&store, "default", None)
            .await
            .expect("intact")
            .head
            .count,
        6
    );
}

async fn a_store_that_stalls_never_stalls_the_crew_and_drops_are_recorded_once_it_is_back(
    store: Store,
    url: String,
) {
    let trail = AuditTrail::open_with(store.clone(), "default", 8).expect("a writer");
    // A crew the trail is attached to hears of the drops on its bus.
    let idle = agent(
        "Idle",
        Vec::new(),
        &Arc::new(ScriptedLlm::new().answer("done")),
    );
    let crew = crew(&fresh_registry(), idle);
    trail.attach(&crew);
    let heard = log();
    let sink = heard.clone();
    crew.events().subscribe(move |event| {
        if let Event::Integration(event) = event
            && let Some(dropped) = event.downcast_ref::<AuditRecordsDroppedEvent>()
        {
            push(&sink, format!("{} {}", dropped.trail, dropped.dropped));
        }
    });
    trail.record("note", json!({"n": "before"}));
    trail.flush().await.expect("written");
    // Another session holds the trail's table: the writer waits.
    let (held, is_held) = tokio::sync::oneshot::channel::<()>();
    let (hold, release) = tokio::sync::oneshot::channel::<()>();
    let locker = hold_the_trail(url.clone(), held, release);
    is_held.await.expect("the table is held");
    // Calls go on: recording never waits for the store.
    for n in 0..200 {
        trail.record("note", json!({"n": n}));
    }
    assert!(trail.dropped() > 0, "a buffer of 8 took 200 records");
    let dropped = trail.dropped();
    // The first drop is told at once; later ones at most once a second
    // (a slow machine may see a second event, never more than the drops).
    let heard = take(&heard);
    assert_eq!(
        heard.first().map(String::as_str),
        Some("default 1"),
        "{heard:?}"
    );
    assert!(heard.len() <= 2, "{heard:?}");
    hold.send(()).expect("releases");
    locker.await.expect("the locker ends");
    tokio::time::timeout(PATIENCE, async {
        loop {
            if trail.flush().await.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the store takes records again");
    let records = audit::tail(&store, "default", 1000).await.expect("reads");
    let reported: u64 = records
        .iter()
        .filter(|record| record.kind == "records_dropped")
        .map(|record| record.data["count"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(reported, dropped, "every drop is on the trail");
    audit::verify(&store, "default", None)
        .await
        .expect("the chain holds");
}

/// Holds the store's audit tables from another session until `release`
/// fires; resolves `held` once they are held.
fn hold_the_trail(
    url: String,
    held: tokio::sync::oneshot::Sender<()>,
    release: tokio::sync::oneshot::Receiver<()>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if url.starts_with("sqlite:") {
            let pool = sqlx::SqlitePool::connect(&url).await.expect("opens");
            let mut conn = pool.acquire().await.expect("a connection");
            sqlx::query("BEGIN IMMEDIATE")
                .execute(&mut *conn)
                .await
                .expect("locks");
            let _ = held.send(());
            let _ = release.await;
            sqlx::query("COMMIT")
                .execute(&mut *conn)
                .await
                .expect("unlocks");
        } else {
            let pool = sqlx::PgPool::connect(&url).await.expect("opens");
            let mut tx = pool.begin().await.expect("a transaction");
            sqlx::query("LOCK TABLE crew_audit_heads IN ACCESS EXCLUSIVE MODE")
                .execute(&mut *tx)
                .await
                .expect("locks");
            let _ = held.send(());
            let _ = release.await;
            tx.commit().await.expect("unlocks");
        }
    })
}

async fn a_crew_that_requires_its_audit_refuses_calls_while_the_trail_cannot_be_written(
    store: Store,
    url: String,
) {
    let trail = AuditTrail::open_with(store.clone(), "default", 4).expect("a writer");
    let ran = log();
    let crew_with = |llm: &Arc<ScriptedLlm>| {
        let sink = ran.clone();
        let lookup = Tool::dynamic("lookup", "Looks up", json!({"type": "object"}), move |_| {
            push(&sink, "ran".to_owned());
            Ok::<_, String>(json!("found"))
        });
        let support = agent("Support", vec![lookup], llm);
        Crew::builder()
            .agent(support.clone())
            .task(Task::builder("Look it up").agent(&support).build())
            .global_registry(fresh_registry())
            .build()
            .expect("builds")
    };
    let llm = Arc::new(ScriptedLlm::new().call("lookup", json!({})).answer("done"));
    let crew = crew_with(&llm);
    trail.require(&crew).expect("the hook registers");

    let (held, is_held) = tokio::sync::oneshot::channel();
    let (release, released) = tokio::sync::oneshot::channel();
    let locker = hold_the_trail(url.clone(), held, released);
    is_held.await.expect("the trail is held");
    // The writer is stuck on the store; the buffer fills up.
    for n in 0..16 {
        trail.record("note", json!({"n": n}));
    }
    // The writer is held: within a moment (its buffer full, or its write
    // hung past a second) the trail says it takes no records.
    tokio::time::timeout(PATIENCE, async {
        while trail.can_take_records() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("a held trail stops taking records");
    crew.kickoff(()).await.expect("the kickoff runs");
    assert!(take(&ran).is_empty(), "a call ran without its audit");
    let observation = llm.requests()[1].observations().join("\n");
    assert!(
        observation.contains("Tool execution blocked by hook"),
        "{observation}"
    );

    release.send(()).expect("releases");
    locker.await.expect("the locker ends");
    tokio::time::timeout(PATIENCE, async {
        while trail.flush().await.is_err() || !trail.can_take_records() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the trail takes records again");
    let llm = Arc::new(ScriptedLlm::new().call("lookup", json!({})).answer("done"));
    let crew = crew_with(&llm);
    trail.require(&crew).expect("the hook registers");
    crew.kickoff(()).await.expect("the kickoff runs");
    assert_eq!(take(&ran), ["ran"]);
}

async fn two_writers_on_one_trail_keep_one_chain(store: Store, url: String) {
    // Two processes' writers (each with its own pool) on one trail.
    let other = Store::connect(&url).await.expect("a second handle");
    let first = AuditTrail::open_with(store.clone(), "default", 10_000).expect("a writer");
    let second = AuditTrail::open_with(other, "default", 10_000).expect("a writer");
    for n in 0..300 {
        first.record("note", json!({"writer": 1, "n": n}));
        second.record("note", json!({"writer": 2, "n": n}));
    }
    first.flush().await.expect("written");
    second.flush().await.expect("written");
    let verified = audit::verify(&store, "default", None)
        .await
        .expect("one chain");
    assert_eq!(verified.head.count, 600);
}

/// A policy set's decisions reach the trail through the bus as the
/// integration events they are, denials with their policy and reason.
#[cfg(feature = "policy")]
#[tokio::test]
async fn a_policy_decision_is_recorded_with_its_policies_and_reason() {
    let Some((store, _url, _dir)) = store("sqlite").await else {
        return;
    };
    let trail = AuditTrail::open(store.clone()).expect("a writer");
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("delete_order", json!({"order": "A-17"}))
            .answer("done"),
    );
    let delete = Tool::dynamic("delete_order", "Deletes", json!({"type": "object"}), |_| {
        Ok::<_, String>(json!("deleted"))
    });
    let support = agent("Support", vec![delete], &llm);
    let policies = crew_runtime::policy::Policies::from_text(
        r#"
        @id("no-deletes")
        @reason("orders are never deleted")
        forbid(principal, action == Action::"delete_order", resource);
        "#,
    )
    .expect("the policy text parses");
    let crew = Crew::builder()
        .agent(support.clone())
        .task(Task::builder("Handle the ticket").agent(&support).build())
        .global_registry(fresh_registry())
        .policies(policies)
        .build()
        .expect("the crew builds");
    trail.attach(&crew);
    crew.kickoff(()).await.expect("the kickoff runs");
    trail.flush().await.expect("the trail is written");

    let records = audit::tail(&store, "default", 1000).await.expect("reads");
    let decided: Vec<&Value> = records
        .iter()
        .filter(|record| record.kind == "policy_decided")
        .map(|record| &record.data)
        .collect();
    assert_eq!(
        decided,
        [
            &json!({"tool": "delete_order", "agent": "Support", "decision": "deny",
                 "mode": "enforced", "policies": ["no-deletes"],
                 "reason": "orders are never deleted"})
        ],
        "{records:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_record_names_the_task_by_its_name_and_tool_started_keeps_the_description() {
    let Some((store, _url, _dir)) = store("sqlite").await else {
        return;
    };
    let trail = AuditTrail::open(store.clone()).expect("a writer");
    let llm = Arc::new(
        ScriptedLlm::new()
            .calls([("lookup", json!({})), ("broken", json!({}))])
            .answer("done"),
    );
    let lookup = Tool::dynamic("lookup", "Looks up", json!({"type": "object"}), |_| {
        Ok::<_, String>(json!("shipped"))
    });
    let broken = Tool::dynamic("broken", "Fails", json!({"type": "object"}), |_| {
        Err::<Value, _>("the backend is down".to_owned())
    });
    let support = agent("Support", vec![lookup, broken], &llm);
    let crew = Crew::builder()
        .agent(support.clone())
        .task(
            Task::builder("Handle ticket {ticket}")
                .name("resolve")
                .agent(&support)
                .build(),
        )
        .global_registry(fresh_registry())
        .build()
        .expect("the crew builds");
    trail.attach(&crew);
    crew.kickoff([("ticket", "T-9")])
        .await
        .expect("the kickoff runs");
    trail.flush().await.expect("the trail is written");

    let records = audit::tail(&store, "default", 1000).await.expect("reads");
    let named: Vec<(&str, &Value)> = records
        .iter()
        .filter_map(|record| Some((record.kind.as_str(), record.data.get("task")?)))
        .collect();
    let kinds: Vec<&str> = named.iter().map(|(kind, _)| *kind).collect();
    for kind in ["tool_started", "tool_finished", "tool_failed", "model_call"] {
        assert!(
            kinds.contains(&kind),
            "no {kind} naming a task in {records:?}"
        );
    }
    for (kind, task) in &named {
        assert_eq!(*task, "resolve", "{kind} names the task otherwise");
    }
    let started = records
        .iter()
        .find(|record| record.kind == "tool_started")
        .expect("a tool start");
    assert_eq!(started.data["task_description"], "Handle ticket T-9");
}

#[tokio::test]
async fn a_malformed_head_or_command_line_is_a_clear_error() {
    for bad in ["", "12", "x:abc", "3:not-hex", "-1:ab"] {
        assert!(bad.parse::<Head>().is_err(), "{bad}");
    }
    let (status, text) = crew_audit(&["verify"]);
    assert_eq!(status, 2, "{text}");
    assert!(text.contains("name the store"), "{text}");
    // Refused before any store is opened.
    let (status, text) = crew_audit(&["frobnicate", "sqlite:///nonexistent-dir/x.db"]);
    assert_eq!(status, 2, "{text}");
    assert!(text.contains("unknown command"), "{text}");
    let (status, text) = crew_audit(&["verify", "mysql://db"]);
    assert_eq!(status, 1, "{text}");
    assert!(text.contains("sqlite://"), "{text}");
    let (status, text) = crew_audit(&[
        "export",
        "sqlite:///nonexistent-dir/x.db",
        "--format",
        "csv",
    ]);
    assert_ne!(status, 0, "{text}");
}

/// An SQLite file removed under an open store still takes writes, into a
/// file that no longer has a name: the trail must see it and fail, not
/// report records as written that nobody can read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_file_removed_mid_run_makes_a_failing_trail_not_a_silent_one() {
    let (store, url, _keep) = store("sqlite").await.expect("SQLite");
    let trail = AuditTrail::open(store.clone()).expect("a writer");
    trail.record("note", json!({"n": 1}));
    trail.flush().await.expect("written");
    let path = url.trim_start_matches("sqlite://").to_owned();
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{path}{suffix}"));
    }
    // The crew goes on; its records wait.
    let crew = lookup_crew();
    trail.attach(&crew);
    let output = crew.kickoff(()).await.expect("the kickoff runs");
    assert_eq!(output.raw, "done");
    match trail.flush().await {
        Err(error) => assert!(
            error
                .to_string()
                .contains("was removed or replaced while it was open"),
            "{error}"
        ),
        Ok(()) => panic!("records were taken as written into a removed file"),
    }
    assert!(trail.is_failing());
    assert!(!trail.can_take_records());
    assert_eq!(trail.written(), 1, "only the record before the removal");
}

/// A crew of one agent that calls `lookup` once, then answers `done`.
fn lookup_crew() -> Crew {
    let llm = Arc::new(ScriptedLlm::new().call("lookup", json!({})).answer("done"));
    let lookup = Tool::dynamic("lookup", "Looks up", json!({"type": "object"}), |_| {
        Ok::<_, String>(json!("found"))
    });
    crew(&fresh_registry(), agent("Support", vec![lookup], &llm))
}

/// A PostgreSQL server that goes away mid-run (every connection cut, new
/// ones refused) and comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_server_that_goes_away_mid_run_loses_no_record_once_it_is_back() {
    postgres_fails_mid_run_and_recovers(
        |name| {
            vec![
                format!("ALTER DATABASE \"{name}\" ALLOW_CONNECTIONS false"),
                terminate(name),
            ]
        },
        |name| vec![format!("ALTER DATABASE \"{name}\" ALLOW_CONNECTIONS true")],
    )
    .await;
}

/// A PostgreSQL database that turns read-only mid-run (new sessions refuse
/// writes, the running ones are cut) and writable again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_database_that_goes_read_only_mid_run_loses_no_record_once_it_is_writable() {
    postgres_fails_mid_run_and_recovers(
        |name| {
            vec![
                format!("ALTER DATABASE \"{name}\" SET default_transaction_read_only = on"),
                terminate(name),
            ]
        },
        |name| {
            vec![
                format!("ALTER DATABASE \"{name}\" RESET default_transaction_read_only"),
                terminate(name),
            ]
        },
    )
    .await;
}

/// SQL that cuts every session on database `name`.
fn terminate(name: &str) -> String {
    format!("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'")
}

/// Runs the statements of `fail` on the test's PostgreSQL server (from a
/// session on another database) while a trail has records to write, then
/// those of `recover`: the crew never waits on the store, the trail says it
/// is failing, and once the store is back every record is written into one
/// unbroken chain.
async fn postgres_fails_mid_run_and_recovers(
    fail: fn(&str) -> Vec<String>,
    recover: fn(&str) -> Vec<String>,
) {
    let Some((store, url, _keep)) = store("postgres").await else {
        return;
    };
    let trail = AuditTrail::open(store.clone()).expect("a writer");
    trail.record("note", json!({"n": "before"}));
    trail.flush().await.expect("written");
    let name = url
        .split_once("localhost/")
        .and_then(|(_, rest)| rest.split_once('?'))
        .map(|(name, _)| name.to_owned())
        .expect("the test URL names its database");
    let admin = sqlx::PgPool::connect(&url.replace(&format!("/{name}?"), "/postgres?"))
        .await
        .expect("an admin session");
    for sql in fail(&name) {
        sqlx::query(&sql).execute(&admin).await.expect(&sql);
    }

    let crew = lookup_crew();
    trail.attach(&crew);
    let output = tokio::time::timeout(PATIENCE, crew.kickoff(()))
        .await
        .expect("the crew never waits on the store")
        .expect("the kickoff runs");
    assert_eq!(output.raw, "done");
    match trail.flush().await {
        Err(AuditError::Unwritten(error)) => eprintln!("as expected, the store failed: {error}"),
        other => panic!("records written to a store that cannot take them: {other:?}"),
    }
    assert!(trail.is_failing());

    for sql in recover(&name) {
        sqlx::query(&sql).execute(&admin).await.expect(&sql);
    }
    tokio::time::timeout(PATIENCE, async {
        while trail.flush().await.is_err() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the store takes records again");
    assert_eq!(trail.dropped(), 0);
    let records = audit::tail(&store, "default", 1000).await.expect("reads");
    assert_eq!(records.first().map(|r| r.kind.as_str()), Some("note"));
    assert_eq!(
        records.last().map(|r| r.kind.as_str()),
        Some("kickoff_ended")
    );
    let verified = audit::verify(&store, "default", None)
        .await
        .expect("the chain holds");
    assert_eq!(verified.head.count, records.len() as i64);
}

/// The child process of [`a_store_that_fills_up_fails_clearly_and_keeps_its_chain`]:
/// runs under a file-size limit, records until the store is full, then runs
/// a crew, and says on stdout what it saw.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by another test as a separate process"]
async fn child_fills_the_store() {
    let Ok(url) = std::env::var("CREW_AUDIT_CHILD_URL") else {
        return;
    };
    let store = Store::connect(&url)
        .await
        .expect("the child opens the store");
    let trail = AuditTrail::open(store).expect("a writer");
    let page = "x".repeat(4096);
    let mut full = None;
    for n in 0..10_000 {
        trail.record("note", json!({"n": n, "page": page}));
        if n % 16 == 15
            && let Err(error) = trail.flush().await
        {
            full = Some(error);
            break;
        }
    }
    let full = full.expect("a file-size limit stops the store");
    println!("FLUSH-ERROR {full}");
    println!("FAILING {}", trail.is_failing());
    let crew = lookup_crew();
    trail.attach(&crew);
    let output = crew.kickoff(()).await.expect("the kickoff runs");
    println!("KICKOFF {}", output.raw);
    println!("WRITTEN {}", trail.written());
}

/// A store that fills up: the disk is played by a file-size limit on a
/// child process (`ulimit -f`, with `SIGXFSZ` ignored, so a write past it
/// fails as on a full disk). The flush fails with the store's own error,
/// the crew still runs, and what was written verifies.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_fills_up_fails_clearly_and_keeps_its_chain() {
    let (store, url, _keep) = store("sqlite").await.expect("SQLite");
    drop(store);
    let path = url.trim_start_matches("sqlite://").to_owned();
    let size = std::fs::metadata(&path).expect("the store's file").len()
        + std::fs::metadata(format!("{path}-wal")).map_or(0, |m| m.len());
    // 512-byte blocks (a shell counting 1024-byte blocks only doubles it):
    // room for the store as it is and about 256 KiB more.
    let blocks = size / 512 + 512;
    let child = std::process::Command::new("sh")
        .args([
            "-c",
            &format!("trap '' XFSZ; ulimit -f {blocks}; exec \"$0\" \"$@\""),
        ])
        .arg(std::env::current_exe().expect("the test binary"))
        .args([
            "--exact",
            "child_fills_the_store",
            "--ignored",
            "--nocapture",
        ])
        .env("CREW_AUDIT_CHILD_URL", &url)
        .output()
        .expect("the child runs");
    let stdout = String::from_utf8_lossy(&child.stdout);
    assert!(
        child.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&child.stderr)
    );
    let line = |tag: &str| {
        stdout
            .lines()
            .find_map(|line| line.strip_prefix(tag))
            .map(str::trim)
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("no {tag} line in {stdout}"))
    };
    let error = line("FLUSH-ERROR");
    assert!(
        error.contains("full") || error.contains("disk I/O error"),
        "{error}"
    );
    assert_eq!(line("FAILING"), "true");
    assert_eq!(line("KICKOFF"), "done");
    let written: i64 = line("WRITTEN").parse().expect("a count");
    assert!(written > 0);
    let store = Store::connect(&url).await.expect("opens again");
    let verified = audit::verify(&store, "default", None)
        .await
        .expect("what was written holds");
    assert_eq!(verified.head.count, written);
}
