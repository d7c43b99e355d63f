//! The command lines of `crew-inbox` and `crew-audit` called as library
//! functions (`inbox::cli::run_with`, `audit::cli::run_with`), no process,
//! against a real SQLite store in a temporary directory: what an
//! application that ships them as its own binaries, or embeds them, gets.
//!
//! Each test calls the command lines from plain (not async) code: they
//! build their own runtime, as a binary's `main` does. The store is set up
//! and checked on a runtime of the test's own, never around a call.

use std::process::ExitCode;
use std::time::Duration;

use crew_runtime::audit::{self, AuditTrail};
use crew_runtime::store::Store;
use serde_json::json;

/// What a command line said: its exit status, standard output and
/// standard error.
struct Said {
    status: ExitCode,
    out: String,
    err: String,
}

impl std::fmt::Display for Said {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:?}\n--- out\n{}--- err\n{}",
            self.status, self.out, self.err
        )
    }
}

/// `crew-inbox ARGS` with `input` as its standard input.
fn crew_inbox(args: &[&str], input: &str) -> Said {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let status = crew_runtime::inbox::cli::run_with(
        std::iter::once("crew-inbox").chain(args.iter().copied()),
        &mut input.as_bytes(),
        &mut out,
        &mut err,
    );
    said(status, out, err)
}

/// `crew-audit ARGS`.
fn crew_audit(args: &[&str]) -> Said {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let status = crew_runtime::audit::cli::run_with(
        std::iter::once("crew-audit").chain(args.iter().copied()),
        &mut out,
        &mut err,
    );
    said(status, out, err)
}

fn said(status: ExitCode, out: Vec<u8>, err: Vec<u8>) -> Said {
    Said {
        status,
        out: String::from_utf8(out).expect("text"),
        err: String::from_utf8(err).expect("text"),
    }
}

/// A runtime for the test's own look at the store, outside the calls.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

#[test]
fn inbox_cli_adds_an_approver_and_manages_their_tokens_in_process() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = format!("sqlite://{}", dir.path().join("approvals.db").display());

    let said = crew_inbox(
        &[
            "add-approver",
            "--store",
            &url,
            "payments",
            "--tools",
            "send_payment, refund",
            "--no-password",
        ],
        "",
    );
    assert_eq!(said.status, ExitCode::SUCCESS, "{said}");
    assert!(said.out.is_empty(), "{said}");
    assert!(
        said.err
            .contains("added the approver payments, who may answer"),
        "{said}"
    );
    // `--no-password`: nothing was asked on the input.
    assert!(!said.err.contains("one line on standard input"), "{said}");

    let said = crew_inbox(&["sessions", "--store", &url, "payments"], "");
    assert_eq!(said.status, ExitCode::SUCCESS, "{said}");
    assert!(said.out.is_empty(), "{said}");
    assert!(said.err.contains("0 open sessions of payments"), "{said}");

    // `--store=URL` as well as `--store URL`.
    let issued = crew_inbox(&["api-token", &format!("--store={url}"), "payments"], "");
    assert_eq!(issued.status, ExitCode::SUCCESS, "{issued}");
    let token = issued.out.trim();
    assert!(!token.is_empty(), "{issued}");
    let approver = runtime().block_on(async {
        let store = Store::connect(&url).await.expect("the store");
        store.api_token_approver(token).await.expect("reads")
    });
    assert_eq!(
        approver.map(|approver| approver.name).as_deref(),
        Some("payments")
    );

    let listed = crew_inbox(&["tokens", "--store", &url, "payments"], "");
    assert_eq!(listed.status, ExitCode::SUCCESS, "{listed}");
    assert_eq!(listed.out.lines().count(), 1, "{listed}");
    assert!(listed.out.contains("expires until revoked"), "{listed}");
    // The list shows a short id, never the secret.
    assert!(!listed.out.contains(token), "{listed}");
    let id = listed
        .out
        .split_whitespace()
        .next()
        .expect("a short id")
        .to_owned();

    let said = crew_inbox(&["revoke-token", "--store", &url, "payments", &id], "");
    assert_eq!(said.status, ExitCode::SUCCESS, "{said}");
    assert!(
        said.err.contains("revoked 1 bearer tokens of payments"),
        "{said}"
    );
    let listed = crew_inbox(&["tokens", "--store", &url, "payments"], "");
    assert_eq!(listed.status, ExitCode::SUCCESS, "{listed}");
    assert!(listed.out.is_empty(), "{listed}");

    // The work failing is exit 1, not a usage error.
    let said = crew_inbox(&["revoke-token", "--store", &url, "payments", &id], "");
    assert_eq!(said.status, ExitCode::FAILURE, "{said}");
    assert!(said.err.contains("no bearer token of payments"), "{said}");
}

#[test]
fn inbox_cli_reads_the_password_from_its_input_only() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = format!("sqlite://{}", dir.path().join("approvals.db").display());

    let said = crew_inbox(
        &["add-approver", "--store", &url, "alice"],
        "correct horse battery\n",
    );
    assert_eq!(said.status, ExitCode::SUCCESS, "{said}");
    assert!(
        said.err
            .contains("the password of alice, one line on standard input"),
        "{said}"
    );
    let signed_in = |password: &str| {
        runtime().block_on(async {
            let store = Store::connect(&url).await.expect("the store");
            store
                .check_password("alice", password)
                .await
                .expect("checks")
                .is_some()
        })
    };
    // The line without its ending is the password.
    assert!(signed_in("correct horse battery"));

    // No line: refused, the password unchanged.
    let said = crew_inbox(&["set-password", "--store", &url, "alice"], "");
    assert_eq!(said.status, ExitCode::FAILURE, "{said}");
    assert!(said.err.contains("no password on standard input"), "{said}");
    let said = crew_inbox(&["set-password", "--store", &url, "alice"], "\r\n");
    assert_eq!(said.status, ExitCode::FAILURE, "{said}");
    assert!(said.err.contains("the password is empty"), "{said}");
    assert!(signed_in("correct horse battery"));

    let said = crew_inbox(
        &["set-password", "--store", &url, "alice"],
        "tr0ub4dor &3\r\nnot this line\n",
    );
    assert_eq!(said.status, ExitCode::SUCCESS, "{said}");
    assert!(signed_in("tr0ub4dor &3"));
    assert!(!signed_in("correct horse battery"));
}

#[test]
fn audit_cli_verifies_reads_and_exports_a_trail_in_process() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = format!("sqlite://{}", dir.path().join("crew.db").display());

    // A store with no trail yet: verify refuses it, exit 1.
    runtime().block_on(async {
        Store::connect(&url).await.expect("the store is created");
    });
    let said = crew_audit(&["verify", &url]);
    assert_eq!(said.status, ExitCode::FAILURE, "{said}");
    assert!(said.out.is_empty(), "{said}");
    assert!(said.err.contains("holds no audit trail"), "{said}");

    let kept = runtime().block_on(async {
        let store = Store::connect(&url).await.expect("the store");
        let trail = AuditTrail::open_with(store.clone(), "default", 100).expect("a writer");
        for n in 0..3 {
            trail.record("approval_answered", json!({"decision": "deny", "n": n}));
        }
        tokio::time::timeout(Duration::from_secs(30), trail.flush())
            .await
            .expect("written in time")
            .expect("written");
        audit::head(&store, "default").await.expect("a head")
    });
    let expect = kept.to_string();

    let said = crew_audit(&["head", &url, "--trail", "default"]);
    assert_eq!(said.status, ExitCode::SUCCESS, "{said}");
    assert_eq!(said.out.trim(), expect, "{said}");

    let said = crew_audit(&["verify", &url, "--trail", "default", "--expect", &expect]);
    assert_eq!(said.status, ExitCode::SUCCESS, "{said}");
    assert!(
        said.out
            .contains(&format!("trail default: 3 records intact, head {expect}")),
        "{said}"
    );

    let said = crew_audit(&["tail", &url, "-n", "2"]);
    assert_eq!(said.status, ExitCode::SUCCESS, "{said}");
    let lines: Vec<&str> = said.out.lines().collect();
    assert_eq!(lines.len(), 2, "{said}");
    assert!(lines[0].starts_with("default #2 "), "{said}");
    assert!(lines[1].starts_with("default #3 "), "{said}");

    let said = crew_audit(&["export", &url, "--format", "jsonl"]);
    assert_eq!(said.status, ExitCode::SUCCESS, "{said}");
    let records: Vec<serde_json::Value> = said
        .out
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON object a line"))
        .collect();
    assert_eq!(records.len(), 3, "{said}");

    // A head the trail does not reach: exit 1, naming it.
    let said = crew_audit(&["verify", &url, "--trail", "default", "--expect", "4:00ab"]);
    assert_eq!(said.status, ExitCode::FAILURE, "{said}");
    assert!(
        said.err.contains("does not match the expected head"),
        "{said}"
    );
}

#[test]
fn audit_cli_refuses_a_missing_store_with_exit_1_and_creates_nothing() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("crw.db");
    let said = crew_audit(&["verify", &format!("sqlite://{}", path.display())]);
    assert_eq!(said.status, ExitCode::FAILURE, "{said}");
    assert!(said.err.contains("there is no SQLite store at"), "{said}");
    assert!(!path.exists());
}

#[test]
fn usage_errors_exit_2_without_touching_the_store() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("approvals.db");
    let url = format!("sqlite://{}", path.display());
    for said in [
        crew_inbox(&["add-approver", "--store", &url], ""),
        crew_inbox(
            &["add-approver", "--store", &url, "bob", "--frobnicate"],
            "",
        ),
        crew_inbox(
            &["add-approver", "--store", &url, "bob", "--password", "x"],
            "",
        ),
        crew_inbox(&["end-session", "--store", &url, "bob"], ""),
        crew_inbox(&["frobnicate", "--store", &url], ""),
        crew_audit(&["verify", &url, "--expect", "nonsense"]),
        crew_audit(&["export", &url]),
        crew_audit(&["frobnicate", &url]),
    ] {
        assert_eq!(said.status, ExitCode::from(2), "{said}");
        assert!(said.out.is_empty(), "{said}");
        assert!(said.err.contains("try '--help'"), "{said}");
    }
    assert!(!path.exists(), "a bad command line created the store");
}
