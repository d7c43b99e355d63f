//! `crew-audit verify` is strict (SPEC §11 "Under attack"): records at
//! sequence 0 or below, stored text that is not the canonical text that
//! was hashed, a store that is not there, an empty, deleted or unknown
//! trail are all refused, naming what is wrong; the read-only commands
//! never create or migrate a store, and read a read-only copy of one.
//!
//! On a real SQLite file and a real PostgreSQL server (started by the test
//! run), tampered with SQL straight on the database, as an intruder with
//! write access to the store would.

mod support;

use std::path::Path;

use crew_runtime::audit::{self, AuditError, AuditTrail, Head, canonical, record_hash};
use crew_runtime::store::{Store, StoreError};
use serde_json::{Value, json};

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

/// One number from the database at `url`.
async fn scalar(url: &str, sql: &str) -> i64 {
    if url.starts_with("sqlite:") {
        let pool = sqlx::SqlitePool::connect(url).await.expect("opens");
        let value = sqlx::query_scalar(sql).fetch_one(&pool).await.expect(sql);
        pool.close().await;
        value
    } else {
        let pool = sqlx::PgPool::connect(url).await.expect("opens");
        let value = sqlx::query_scalar(sql).fetch_one(&pool).await.expect(sql);
        pool.close().await;
        value
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
    verify_refuses_a_record_at_sequence_zero_or_below,
    verify_refuses_stored_text_that_is_not_its_canonical_form,
    verify_refuses_an_empty_or_deleted_trail,
    verify_refuses_an_unknown_trail_name,
    verify_refuses_a_store_without_audit_tables_and_migrates_nothing,
    a_record_holding_any_float_verifies,
);

/// What `crew-audit ARGS` said: its exit status, standard output and
/// standard error.
struct Run {
    status: i32,
    stdout: String,
    stderr: String,
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\n--- stdout\n{}--- stderr\n{}",
            self.status, self.stdout, self.stderr
        )
    }
}

/// Runs `crew-audit ARGS`, as user `as_user` (uid, gid) when given.
fn crew_audit_as(args: &[&str], as_user: Option<(u32, u32)>) -> Run {
    use std::os::unix::process::CommandExt as _;
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_crew-audit"));
    command.args(args).current_dir("/");
    if let Some((uid, gid)) = as_user {
        command.uid(uid).gid(gid);
    }
    let output = command.output().expect("crew-audit runs");
    Run {
        status: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn crew_audit(args: &[&str]) -> Run {
    crew_audit_as(args, None)
}

/// Writes `count` records to trail `name`, each deciding something, and
/// returns the trail's head.
async fn write_records(store: &Store, name: &str, count: usize) -> Head {
    let trail = AuditTrail::open_with(store.clone(), name, 10_000).expect("a writer");
    for n in 0..count {
        trail.record(
            "approval_answered",
            json!({"decision": "deny", "n": n, "approver": "ops"}),
        );
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

/// A record at `seq` of trail `default` whose hash is right for its place
/// (what an intruder who read the code would forge).
fn forged(seq: i64, prev: &str) -> String {
    let data = canonical(&json!({"decision": "approve", "n": seq, "approver": "ops"}));
    let at = 1_700_000_000_000i64;
    let hash = record_hash("default", seq, at, "approval_answered", &data, prev);
    format!(
        "INSERT INTO crew_audit (trail, seq, at, kind, data, prev_hash, hash) \
         VALUES ('default', {seq}, {at}, 'approval_answered', '{data}', '{prev}', '{hash}')"
    )
}

const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

async fn verify_refuses_a_record_at_sequence_zero_or_below(store: Store, url: String) {
    let kept = write_records(&store, "default", 3).await;
    let expect = kept.to_string();
    tamper(&url, &[forged(0, GENESIS)]).await;

    let (seq, problem) = broken_at(audit::verify(&store, "default", None).await);
    assert_eq!(seq, 0, "{problem}");
    assert!(problem.contains("0 or below"), "{problem}");
    // A head kept elsewhere is still reached: the record hides below it.
    let (seq, _) = broken_at(audit::verify(&store, "default", Some(&kept)).await);
    assert_eq!(seq, 0);
    for args in [
        vec!["verify", url.as_str()],
        vec!["verify", &url, "--trail", "default", "--expect", &expect],
    ] {
        let run = crew_audit(&args);
        assert_eq!(run.status, 1, "{args:?}: {run}");
        assert!(run.stderr.contains("broken at record 0"), "{run}");
    }

    // Read back, the trail is records 1 to 3 and nothing else; the record
    // outside it is named, and the status says something is wrong.
    assert_eq!(
        audit::tail(&store, "default", 10)
            .await
            .expect("reads")
            .iter()
            .map(|record| record.seq)
            .collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert_eq!(audit::head(&store, "default").await.expect("a head"), kept);
    assert_eq!(
        audit::outside_the_chain(&store, "default")
            .await
            .expect("reads"),
        [0]
    );
    let run = crew_audit(&["tail", &url, "-n", "10"]);
    assert_eq!(run.status, 1, "{run}");
    assert_eq!(run.stdout.lines().count(), 3, "{run}");
    assert!(!run.stdout.contains("#0 "), "{run}");
    assert!(run.stderr.contains("at sequence 0"), "{run}");
    let run = crew_audit(&["export", &url, "--format", "jsonl"]);
    assert_eq!(run.status, 1, "{run}");
    let seqs: Vec<i64> = run
        .stdout
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line).expect("a JSON line")["seq"]
                .as_i64()
                .expect("a sequence number")
        })
        .collect();
    assert_eq!(seqs, [1, 2, 3], "{run}");
    assert!(run.stderr.contains("at sequence 0"), "{run}");
    let run = crew_audit(&["head", &url, "--trail", "default"]);
    assert_eq!(run.status, 1, "{run}");
    assert_eq!(run.stdout.trim(), expect, "{run}");
    assert!(run.stderr.contains("at sequence 0"), "{run}");

    // Below zero too; the lowest is named.
    tamper(
        &url,
        &[
            "DELETE FROM crew_audit WHERE seq = 0".into(),
            forged(-7, GENESIS),
            forged(-2, GENESIS),
        ],
    )
    .await;
    let (seq, _) = broken_at(audit::verify(&store, "default", None).await);
    assert_eq!(seq, -7);
    let run = crew_audit(&["verify", &url]);
    assert_eq!(run.status, 1, "{run}");
    assert!(run.stderr.contains("broken at record -7"), "{run}");

    // A trail of nothing but such a record is not shown as a trail either.
    tamper(&url, &[forged(0, GENESIS).replace("'default'", "'ghost'")]).await;
    let run = crew_audit(&["tail", &url, "--trail", "ghost"]);
    assert_eq!(run.status, 1, "{run}");
    assert!(run.stdout.is_empty(), "{run}");
    assert!(run.stderr.contains("at sequence 0"), "{run}");
}

async fn verify_refuses_stored_text_that_is_not_its_canonical_form(store: Store, url: String) {
    write_records(&store, "default", 3).await;
    let record =
        |seq: i64| canonical(&json!({"decision": "deny", "n": seq - 1, "approver": "ops"}));
    // The same JSON to serde_json, other text: each hashes as the record
    // did, and each is refused.
    let variants = [
        (
            2,
            r#"{"approver":"ops","decision":"approve","decision":"deny","n":1}"#,
            "repeats the key \"decision\"",
        ),
        (
            3,
            r#"{"approver":"ops", "decision":"deny","n":2}"#,
            "not byte for byte the canonical text",
        ),
        (
            1,
            r#"{"approver":"ops","decision":"d\u0065ny","n":0}"#,
            "not byte for byte the canonical text",
        ),
    ];
    for (seq, text, problem_says) in variants {
        let read: Value = serde_json::from_str(text).expect("JSON");
        assert_eq!(canonical(&read), record(seq), "the variant reads the same");
        tamper(
            &url,
            &[format!(
                "UPDATE crew_audit SET data = '{text}' WHERE trail = 'default' AND seq = {seq}"
            )],
        )
        .await;
        if url.starts_with("sqlite:") && seq == 2 {
            // What makes it matter: another reader takes the other key.
            let approve = scalar(
                &url,
                "SELECT count(*) FROM crew_audit WHERE seq = 2 \
                 AND json_extract(data, '$.decision') = 'approve'",
            )
            .await;
            assert_eq!(approve, 1, "SQLite reads the first of the repeated keys");
        }
        let (at, problem) = broken_at(audit::verify(&store, "default", None).await);
        assert_eq!(at, seq, "{problem}");
        assert!(problem.contains(problem_says), "{problem}");
        let run = crew_audit(&["verify", &url]);
        assert_eq!(run.status, 1, "{run}");
        assert!(
            run.stderr.contains(&format!("broken at record {seq}")),
            "{run}"
        );
        assert!(run.stderr.contains("canonical"), "{run}");
        tamper(
            &url,
            &[format!(
                "UPDATE crew_audit SET data = '{}' WHERE trail = 'default' AND seq = {seq}",
                record(seq)
            )],
        )
        .await;
        audit::verify(&store, "default", None)
            .await
            .expect("the canonical text verifies again");
    }
}

async fn verify_refuses_an_empty_or_deleted_trail(store: Store, url: String) {
    // A store with no trail at all.
    match audit::verify(&store, "default", None).await {
        Err(AuditError::NoSuchTrail { trail, known }) => {
            assert_eq!(trail, "default");
            assert!(known.is_empty(), "{known:?}");
        }
        other => panic!("an empty trail passed: {other:?}"),
    }
    let run = crew_audit(&["verify", &url]);
    assert_eq!(run.status, 1, "{run}");
    assert!(run.stderr.contains("holds no audit trail"), "{run}");
    for command in ["head", "tail"] {
        let run = crew_audit(&[command, &url]);
        assert_eq!(run.status, 1, "{command}: {run}");
    }

    // A trail whose records were all deleted: its writers' head remains.
    let kept = write_records(&store, "default", 3).await;
    tamper(&url, &["DELETE FROM crew_audit".into()]).await;
    match audit::verify(&store, "default", None).await {
        Err(AuditError::Emptied { reached, .. }) => assert_eq!(reached, 3),
        other => panic!("a deleted trail passed: {other:?}"),
    }
    let expect = kept.to_string();
    for args in [
        vec!["verify", url.as_str()],
        vec!["verify", &url, "--trail", "default"],
        vec!["verify", &url, "--trail", "default", "--expect", &expect],
        vec!["head", &url, "--trail", "default"],
        vec!["export", &url, "--format", "jsonl"],
    ] {
        let run = crew_audit(&args);
        assert_eq!(run.status, 1, "{args:?}: {run}");
        assert!(
            run.stderr.contains("records were deleted"),
            "{args:?}: {run}"
        );
        assert!(run.stdout.is_empty(), "{args:?}: {run}");
    }

    // Its head deleted too: nothing says a trail was there, and nothing
    // passes.
    tamper(&url, &["DELETE FROM crew_audit_heads".into()]).await;
    let run = crew_audit(&["verify", &url]);
    assert_eq!(run.status, 1, "{run}");
    assert!(run.stderr.contains("holds no audit trail"), "{run}");
    let run = crew_audit(&["verify", &url, "--trail", "default"]);
    assert_eq!(run.status, 1, "{run}");
    assert!(run.stderr.contains("no audit trail `default`"), "{run}");
}

async fn verify_refuses_an_unknown_trail_name(store: Store, url: String) {
    write_records(&store, "payments", 2).await;
    write_records(&store, "support", 2).await;
    match audit::verify(&store, "paymnets", None).await {
        Err(AuditError::NoSuchTrail { trail, known }) => {
            assert_eq!(trail, "paymnets");
            assert_eq!(known, ["payments", "support"]);
        }
        other => panic!("an unknown trail passed: {other:?}"),
    }
    for command in ["verify", "head", "tail", "export"] {
        let run = crew_audit(&[command, &url, "--trail", "paymnets", "--format", "jsonl"]);
        assert_eq!(run.status, 1, "{command}: {run}");
        assert!(
            run.stderr
                .contains("no audit trail `paymnets` (its trails: payments, support)"),
            "{command}: {run}"
        );
        assert!(run.stdout.is_empty(), "{command}: {run}");
    }
    let run = crew_audit(&["verify", &url, "--trail", "payments"]);
    assert_eq!(run.status, 0, "{run}");
}

async fn verify_refuses_a_store_without_audit_tables_and_migrates_nothing(
    store: Store,
    url: String,
) {
    drop(store);
    // A store of an older program: approvals and accounts, no audit trail.
    tamper(
        &url,
        &[
            "DROP TABLE crew_audit".into(),
            "DROP TABLE crew_audit_heads".into(),
            // The trail came in version 3: the store's record of it and
            // of every later version goes.
            "DELETE FROM _sqlx_migrations WHERE version >= 3".into(),
        ],
    )
    .await;
    for command in ["verify", "head", "tail", "export"] {
        let run = crew_audit(&[command, &url, "--format", "jsonl"]);
        assert_eq!(run.status, 1, "{command}: {run}");
        assert!(
            run.stderr.contains("has no audit trail"),
            "{command}: {run}"
        );
    }
    // Not migrated: the tables are still missing.
    let tables = if url.starts_with("sqlite:") {
        "SELECT count(*) FROM sqlite_master WHERE name LIKE 'crew_audit%'"
    } else {
        "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'crew_audit%'"
    };
    assert_eq!(scalar(&url, tables).await, 0);
    assert_eq!(
        scalar(&url, "SELECT MAX(version) FROM _sqlx_migrations").await,
        2
    );
}

async fn a_record_holding_any_float_verifies(store: Store, _url: String) {
    // Floats that serde_json's quick parsing reads back one unit off in
    // the last place: the text read back must still be the text hashed.
    let trail = AuditTrail::open(store.clone()).expect("a writer");
    let mut bits: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..200 {
        bits ^= bits << 13;
        bits ^= bits >> 7;
        bits ^= bits << 17;
        let score = (bits >> 11) as f64 / (1u64 << 53) as f64 * 1000.0;
        trail.record("model_call", json!({"score": score}));
    }
    trail.record("model_call", json!({"score": 212.91890726713459}));
    trail.flush().await.expect("written");
    let verified = audit::verify(&store, "default", None)
        .await
        .expect("every record verifies");
    assert_eq!(verified.head.count, 201);
}

/// A mistyped SQLite path: every command refuses it and creates nothing
/// (not the file, not its log, not with `mode=rwc` in the URL).
#[tokio::test]
async fn verify_refuses_a_missing_store_and_creates_nothing() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("audti.db");
    for url in [
        format!("sqlite://{}", path.display()),
        format!("sqlite://{}?mode=rwc", path.display()),
    ] {
        for command in ["verify", "head", "tail", "export"] {
            let run = crew_audit(&[command, &url, "--format", "jsonl"]);
            assert_eq!(run.status, 1, "{command} {url}: {run}");
            assert!(
                run.stderr.contains("there is no SQLite store at")
                    && run.stderr.contains("audti.db"),
                "{command} {url}: {run}"
            );
        }
        match Store::open_read_only(&url).await {
            Err(StoreError::NoSuchFile { path }) => assert!(path.ends_with("audti.db")),
            other => panic!("a missing store opened: {other:?}"),
        }
    }
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .expect("lists")
        .map(|entry| entry.expect("an entry").file_name())
        .collect();
    assert!(left.is_empty(), "created {left:?}");
}

/// A PostgreSQL database that does not exist, or that holds no store:
/// refused, and nothing is created in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_refuses_a_postgres_database_without_a_store_and_creates_nothing() {
    let Some(url) = support::postgres_database().await else {
        return;
    };
    let run = crew_audit(&["verify", &url]);
    assert_eq!(run.status, 1, "{run}");
    assert!(run.stderr.contains("is not a crew store"), "{run}");
    assert_eq!(
        scalar(
            &url,
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
        )
        .await,
        0,
        "nothing was created or migrated"
    );
    let (name, _) = url
        .split_once("localhost/")
        .and_then(|(_, rest)| rest.split_once('?'))
        .expect("the test URL names its database");
    let missing = url.replace(&format!("/{name}?"), "/no_such_database?");
    let run = crew_audit(&["verify", &missing]);
    assert_eq!(run.status, 1, "{run}");
    assert!(run.stderr.contains("does not exist"), "{run}");
}

/// Whom to run `crew-audit` as so that file modes bite: `nobody` when the
/// tests run as root (who may write anything), else the tests' own user.
fn unprivileged() -> Option<(u32, u32)> {
    if rustix::process::geteuid().is_root() {
        Some((65534, 65534))
    } else {
        None
    }
}

/// The names in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("lists")
        .map(|entry| {
            entry
                .expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// A copy of an SQLite store, the file of mode 0444, in a directory one
/// may write and in one nobody may: every command reads it, nothing in
/// it changes, nothing is added beside it in the read-only directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_works_on_a_read_only_copy() {
    let (store, url, keep) = store("sqlite").await.expect("SQLite");
    let head = write_records(&store, "default", 5).await;
    drop(store);
    // Everything in the main file, as a backup copy would be.
    tamper(&url, &["PRAGMA wal_checkpoint(TRUNCATE)".into()]).await;
    let original = std::fs::read(url.trim_start_matches("sqlite://")).expect("the store");
    let root = keep.expect("a directory");
    // `nobody` must reach the copies.
    chmod(root.path(), 0o755);
    let as_user = unprivileged();

    for (name, dir_mode) in [("writable-dir", 0o777), ("read-only-dir", 0o555)] {
        let dir = root.path().join(name);
        std::fs::create_dir(&dir).expect("a directory");
        let copy = dir.join("copy.db");
        std::fs::write(&copy, &original).expect("copies");
        chmod(&copy, 0o444);
        chmod(&dir, dir_mode);
        let url = format!("sqlite://{}", copy.display());
        let expect = head.to_string();

        let run = crew_audit_as(
            &["verify", &url, "--trail", "default", "--expect", &expect],
            as_user,
        );
        assert_eq!(run.status, 0, "{name}: {run}");
        assert!(run.stdout.contains("5 records intact"), "{name}: {run}");
        let run = crew_audit_as(&["head", &url, "--trail", "default"], as_user);
        assert_eq!(
            (run.status, run.stdout.trim()),
            (0, expect.as_str()),
            "{name}: {run}"
        );
        let run = crew_audit_as(&["tail", &url, "-n", "2"], as_user);
        assert_eq!(
            (run.status, run.stdout.lines().count()),
            (0, 2),
            "{name}: {run}"
        );
        let run = crew_audit_as(&["export", &url, "--format", "jsonl"], as_user);
        assert_eq!(
            (run.status, run.stdout.lines().count()),
            (0, 5),
            "{name}: {run}"
        );

        assert_eq!(
            std::fs::read(&copy).expect("the copy"),
            original,
            "{name}: the copy changed"
        );
        if dir_mode == 0o555 {
            assert_eq!(listing(&dir), ["copy.db"], "{name}");
        }
        // The temporary directory is removed as root; let it go.
        chmod(&dir, 0o755);
    }
}

/// A PostgreSQL database that takes no writes (every session read-only):
/// `crew-audit` reads it; connecting as a writer would first migrate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_works_on_a_read_only_postgres_database() {
    let Some((store, url, _keep)) = store("postgres").await else {
        return;
    };
    let head = write_records(&store, "default", 4).await;
    drop(store);
    let (name, _) = url
        .split_once("localhost/")
        .and_then(|(_, rest)| rest.split_once('?'))
        .expect("the test URL names its database");
    let admin = url.replace(&format!("/{name}?"), "/postgres?");
    tamper(
        &admin,
        &[
            format!("ALTER DATABASE \"{name}\" SET default_transaction_read_only = on"),
            format!(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'"
            ),
        ],
    )
    .await;
    let expect = head.to_string();
    let run = crew_audit(&["verify", &url, "--trail", "default", "--expect", &expect]);
    assert_eq!(run.status, 0, "{run}");
    assert!(run.stdout.contains("4 records intact"), "{run}");
    let run = crew_audit(&["export", &url, "--format", "jsonl"]);
    assert_eq!((run.status, run.stdout.lines().count()), (0, 4), "{run}");
}

/// A copy taken with its write-ahead log, in a directory nobody may write:
/// SQLite cannot read the log there, and reading the file alone (as
/// immutable) would skip the records in it, so it is refused with what to
/// do, not read short.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_copy_whose_log_holds_changes_is_refused_not_read_short() {
    let (store, url, keep) = store("sqlite").await.expect("SQLite");
    write_records(&store, "default", 5).await;
    let path = url.trim_start_matches("sqlite://").to_owned();
    let root = keep.expect("a directory");
    chmod(root.path(), 0o755);
    let dir = root.path().join("read-only-dir");
    std::fs::create_dir(&dir).expect("a directory");
    // Copied while the store is open: its last records are in the log.
    for suffix in ["", "-wal"] {
        let log = std::fs::read(format!("{path}{suffix}")).expect("the store's file");
        if suffix == "-wal" {
            assert!(!log.is_empty(), "the log holds the records");
        }
        std::fs::write(dir.join(format!("copy.db{suffix}")), log).expect("copies");
    }
    drop(store);
    chmod(&dir, 0o555);
    let url = format!("sqlite://{}", dir.join("copy.db").display());
    let run = crew_audit_as(&["verify", &url], unprivileged());
    assert_eq!(run.status, 1, "{run}");
    assert!(run.stderr.contains("write-ahead log"), "{run}");
    assert_eq!(listing(&dir), ["copy.db", "copy.db-wal"]);
    chmod(&dir, 0o755);
}
