//! Parked kickoffs across processes (SPEC §13, "Parking"): the
//! `durable_refunds` example parks kickoffs in one process and exits; the
//! questions are answered through the store while no process holds them;
//! resumer processes, woken by the answers, take each kickoff up exactly
//! once, and each refund is made once. On a real SQLite file and a real
//! PostgreSQL.
//!
//! One kickoff is answered in the approval inbox in a real browser
//! (headless Chromium; missing, the test says so loudly, and fails under
//! `CREW_REQUIRE_SERVICES=1`).
//!
//! The children are the example program next to this test's executable,
//! as for `crash_matrix` (`cargo test --workspace` builds it).

#[allow(dead_code, reason = "the crash tests read more of a child's end")]
#[path = "children.rs"]
mod children;
#[path = "../crew-runtime/tests/support/mod.rs"]
mod support;

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use crew_runtime::inbox::Inbox;
use crew_runtime::store::journal::{JournalKey, KickoffId, KickoffStatus};
use crew_runtime::store::{Answer, ApproverScope, Decision, Store};
use serde_json::Value;

use children::{Running, example, spawn};

/// How many kickoffs park at once in the burst.
const KICKOFFS: usize = 1000;

/// A store of `kind` for one test, and the directory its files (and the
/// ledger) live in; `None` (after a loud message) without PostgreSQL.
fn fresh(runtime: &tokio::runtime::Runtime, kind: &str) -> Option<(String, tempfile::TempDir)> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = match kind {
        "sqlite" => format!("sqlite://{}", dir.path().join("store.db").display()),
        _ => runtime.block_on(support::postgres_database())?,
    };
    Some((url, dir))
}

/// The example's arguments for `command` on the store at `url`, parking
/// at once.
fn args(url: &str, ledger: &Path, key: &str, command: &[&str]) -> Vec<String> {
    let ledger = ledger.display().to_string();
    let mut args: Vec<String> = [
        "--store",
        url,
        "--ledger",
        &ledger,
        "--journal-key",
        key,
        "--park-after-ms",
        "0",
    ]
    .iter()
    .map(|arg| (*arg).to_owned())
    .collect();
    args.extend(command.iter().map(|arg| (*arg).to_owned()));
    args
}

/// The ids after `prefix` (`"parked "`, `"completed "`) in `stdout`.
fn ids<'a>(stdout: &'a str, prefix: &str) -> Vec<&'a str> {
    stdout
        .lines()
        .filter_map(|line| line.strip_prefix(prefix))
        .collect()
}

/// The refunds' idempotency keys in the ledger.
fn ledger_keys(ledger: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(ledger) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|line| line["idempotency_key"].as_str().map(str::to_owned))
        .collect()
}

/// `count` kickoffs started and parked by one process of the example
/// (waiting for their refunds' approval); their ids.
fn parked(program: &Path, url: &str, ledger: &Path, key: &str, count: usize) -> Vec<String> {
    let count = count.to_string();
    let start = spawn(
        program,
        &args(url, ledger, key, &["start", "--count", &count]),
    )
    .wait()
    .expect("start runs");
    assert_eq!(
        start.code,
        Some(0),
        "start failed:\n{}{}",
        start.stdout,
        start.stderr
    );
    let parked: Vec<String> = ids(&start.stdout, "parked ")
        .into_iter()
        .map(str::to_owned)
        .collect();
    assert_eq!(
        parked.len(),
        ids(&start.stdout, "kickoff ").len(),
        "every kickoff started parks:\n{}{}",
        start.stdout,
        start.stderr
    );
    parked
}

/// Approves every pending question, all at once, as `ops`.
async fn approve_all(store: &Store, expected: usize) {
    store
        .add_approver("ops", None, ApproverScope::everything())
        .await
        .expect("the approver");
    let pending = store.pending().await.expect("lists");
    assert_eq!(pending.len(), expected, "one question per parked kickoff");
    let decisions = pending.iter().map(|question| async move {
        store
            .decide(&question.id, Answer::new("ops", Decision::Approve))
            .await
            .map(drop)
    });
    for decided in futures_util::future::join_all(decisions).await {
        decided.expect("ops may approve");
    }
}

/// The scenarios run one at a time: each is several processes working
/// hard on a small machine.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs the scenario on the store `kind`: `count` kickoffs parked by one
/// process; `resumers` resumer processes waiting (woken by answers); every
/// question approved at once while no process holds its kickoff; then
/// each kickoff completed by exactly one resumer, its refund made once.
fn parked_then_resumed(kind: &str, count: usize, resumers: usize) {
    let _alone = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let program = example();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let Some((url, dir)) = fresh(&runtime, kind) else {
        return;
    };
    let key = JournalKey::generate().expect("a key").to_base64();
    let ledger = dir.path().join("ledger.jsonl");
    let kickoffs = parked(&program, &url, &ledger, &key, count);
    let store = runtime.block_on(Store::connect(&url)).expect("opens");
    let statuses = runtime.block_on(store.kickoffs()).expect("lists");
    assert_eq!(statuses.len(), count);
    assert!(
        statuses
            .iter()
            .all(|kickoff| kickoff.status == KickoffStatus::Parked),
        "all parked, none held"
    );
    // The resumers wait first: the answers wake them.
    let waiting: Vec<Running> = (0..resumers)
        .map(|_| {
            spawn(
                &program,
                &args(&url, &ledger, &key, &["resume", "--wait-ms", "3000"]),
            )
        })
        .collect();
    runtime.block_on(approve_all(&store, count));
    let mut completed = BTreeMap::<String, usize>::new();
    for resumer in waiting {
        let ran = resumer.wait().expect("the resumer runs");
        assert_eq!(
            ran.code,
            Some(0),
            "a resumer failed:\n{}{}",
            ran.stdout,
            ran.stderr
        );
        for line in ran.stdout.lines() {
            let ended = line.split(' ').next().unwrap_or_default();
            assert!(
                matches!(ended, "completed" | "output"),
                "a kickoff ended otherwise: {line}"
            );
        }
        for id in ids(&ran.stdout, "completed ") {
            *completed.entry(id.to_owned()).or_default() += 1;
        }
    }
    for id in &kickoffs {
        assert_eq!(
            completed.get(id),
            Some(&1),
            "kickoff {id} completed once, by one resumer"
        );
    }
    assert_eq!(completed.len(), count);
    let keys = ledger_keys(&ledger);
    assert_eq!(keys.len(), count, "one refund per kickoff");
    assert_eq!(
        keys.iter().collect::<HashSet<_>>().len(),
        count,
        "no refund twice"
    );
    let statuses = runtime.block_on(store.kickoffs()).expect("lists");
    assert!(
        statuses
            .iter()
            .all(|kickoff| kickoff.status == KickoffStatus::Completed)
    );
    let asked = runtime.block_on(store.history(count * 2)).expect("reads");
    assert_eq!(asked.len(), count, "each refund asked about once");
}

#[test]
fn a_kickoff_parked_by_one_process_is_run_on_by_another_once_approved_on_sqlite() {
    parked_then_resumed("sqlite", 1, 1);
}

#[test]
fn a_kickoff_parked_by_one_process_is_run_on_by_another_once_approved_on_postgresql() {
    parked_then_resumed("postgres", 1, 1);
}

#[test]
fn a_thousand_parked_kickoffs_answered_in_a_burst_are_each_resumed_once_on_sqlite() {
    parked_then_resumed("sqlite", KICKOFFS, 2);
}

#[test]
fn a_thousand_parked_kickoffs_answered_in_a_burst_are_each_resumed_once_on_postgresql() {
    parked_then_resumed("postgres", KICKOFFS, 2);
}

/// The approver's password in the browser test.
const PASSWORD: &str = "correct horse battery";

/// How long the browser test waits for what must happen.
const PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

/// A kickoff parked by one process, approved in the inbox in a real
/// browser while no process holds it, then resumed by another process:
/// its refund made once, and the inbox's history saying it ran there.
fn parked_then_approved_in_a_browser(kind: &str) {
    let _alone = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let program = example();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let Some((url, dir)) = fresh(&runtime, kind) else {
        return;
    };
    let key = JournalKey::generate().expect("a key").to_base64();
    let ledger = dir.path().join("ledger.jsonl");
    let kickoffs = parked(&program, &url, &ledger, &key, 1);
    runtime.block_on(async {
        use fantoccini::Locator;
        let Some(browser) = support::browser().await else {
            return;
        };
        let client = browser.client();
        let store = Store::connect(&url).await.expect("opens");
        store
            .add_approver("alice", Some(PASSWORD), ApproverScope::everything())
            .await
            .expect("alice is an approver");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        let origin = format!("http://{}", listener.local_addr().expect("an address"));
        let inbox = Inbox::new(store.clone()).public_origin(origin.clone());
        let served = tokio::spawn(inbox.serve(listener));

        // Approved in the browser while no process holds the kickoff.
        support::sign_in(client, &origin, "alice", PASSWORD).await;
        let pending = store.pending().await.expect("lists");
        assert_eq!(pending.len(), 1, "the parked kickoff's question");
        let question = pending[0].id.clone();
        let row = client
            .wait()
            .at_most(PATIENCE)
            .for_element(Locator::Css(&format!(
                "li.question[data-question-id=\"{question}\"]"
            )))
            .await
            .expect("the question is shown");
        row.find(Locator::Css("button.approve"))
            .await
            .expect("an approve button")
            .click()
            .await
            .expect("approves");
        let kickoff: KickoffId = kickoffs[0].parse().expect("a kickoff id");
        let started = std::time::Instant::now();
        while store.kickoff(&kickoff).await.expect("reads").status != KickoffStatus::Ready {
            assert!(
                started.elapsed() < PATIENCE,
                "the answer did not make it ready"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }

        // Another process resumes it.
        let resume = args(&url, &ledger, &key, &["resume"]);
        let resumed = tokio::task::spawn_blocking(move || spawn(&program, &resume).wait())
            .await
            .expect("the resumer's task")
            .expect("the resumer runs");
        assert_eq!(
            resumed.code,
            Some(0),
            "the resumer failed:\n{}{}",
            resumed.stdout,
            resumed.stderr
        );
        assert_eq!(
            ids(&resumed.stdout, "completed "),
            kickoffs,
            "{}",
            resumed.stdout
        );
        assert_eq!(ledger_keys(&ledger).len(), 1, "one refund");

        // The question says who approved it and what became of the call,
        // where it ran: in the store, and on the inbox's history page.
        let answered = store
            .question(&question)
            .await
            .expect("reads")
            .expect("kept");
        assert_eq!(
            answered.answer.map(|answer| answer.approver).as_deref(),
            Some("alice")
        );
        let outcome = answered
            .outcome
            .expect("the resumer said what became of it");
        assert_eq!(outcome.outcome, "ran");
        let by = outcome.by.expect("the process that ran it is named");
        client
            .goto(&format!("{origin}/history"))
            .await
            .expect("the history page");
        let summary = client
            .wait()
            .at_most(PATIENCE)
            .for_element(Locator::Css(&format!(
                "tr[data-question-id=\"{question}\"] td.summary"
            )))
            .await
            .expect("the question's row")
            .text()
            .await
            .expect("its text");
        assert_eq!(summary, format!("approved; the call ran on {by}"));
        served.abort();
    });
}

#[test]
fn a_parked_kickoff_approved_in_a_browser_is_resumed_by_another_process_on_sqlite() {
    parked_then_approved_in_a_browser("sqlite");
}

#[test]
fn a_parked_kickoff_approved_in_a_browser_is_resumed_by_another_process_on_postgresql() {
    parked_then_approved_in_a_browser("postgres");
}
