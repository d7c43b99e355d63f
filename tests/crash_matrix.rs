//! The crash matrix of durable kickoffs (SPEC §13, "Proved by crashing
//! it"): the `durable_refunds` example runs as child processes, each killed
//! with SIGKILL at one named crash point, on a real SQLite file and a real
//! PostgreSQL; then other processes resume the kickoff (on PostgreSQL, two
//! resumers racing). For every point: the kickoff completes or ends in
//! doubt, never both and never neither; no refund's idempotency key is in
//! the ledger twice; a completed kickoff's output is an uninterrupted
//! run's; the approval is asked once, and not lost.
//!
//! The children are the example program next to this test's executable
//! (`target/debug/examples/durable_refunds`): `cargo test --workspace`
//! builds it, with the crash points, since this package turns them on in
//! crew-runtime and one build unifies the features. Run alone, build it
//! first (see [`example`]). Every child is killed after 60 s, and the test
//! then fails.

#[path = "children.rs"]
mod children;
#[path = "../crew-runtime/tests/support/mod.rs"]
mod support;

use std::collections::HashSet;
use std::path::Path;
use std::sync::Mutex;

use crew_runtime::crash_point::POINTS;
use crew_runtime::store::Store;
use crew_runtime::store::journal::{JournalKey, KickoffId, KickoffStatus};
use serde_json::Value;

use children::{CHILD_LIMIT, Ran, Running, example, spawn};

/// The lease the children hold kickoffs with, in ms.
const LEASE_MS: &str = "300";
/// How many scenarios run at once.
const AT_ONCE: usize = 4;

/// One store of a scenario.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Sqlite,
    Postgres,
}

/// Which processes of a scenario have its point armed.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Armed {
    /// The start and the first resume: each dies at the point's first
    /// occurrence in it (a point also reached before the approval, such
    /// as the lookup's intent, dies there).
    StartAndResume,
    /// Only the first resume, after the approval: a point's first
    /// occurrence past the question (the refund's intent, once the answer
    /// was taken).
    ResumeOnly,
}

/// What one scenario left, for the checks.
#[derive(Debug)]
struct Scenario {
    point: Option<&'static str>,
    armed: Armed,
    runs: Vec<Ran>,
    /// The kickoff, if any was made.
    kickoff: Option<KickoffId>,
    /// Whether the start process said its id.
    id_given: bool,
    status: Option<KickoffStatus>,
    /// The refunds' idempotency keys in the ledger, in order.
    refunds: Vec<String>,
    /// The approvals asked for the kickoff's calls: (status, approver).
    /// Questions about a call in doubt ("did it happen?") are not among
    /// them.
    questions: Vec<(String, Option<String>)>,
}

impl Scenario {
    fn transcript(&self) -> String {
        let mut text = String::new();
        for ran in &self.runs {
            text.push_str(&format!(
                "--- `{}`: killed at its point {}, past the limit {}, code {:?}\n{}{}",
                ran.what, ran.killed, ran.timed_out, ran.code, ran.stdout, ran.stderr
            ));
        }
        text
    }

    /// The lines `completed <id>` / `in_doubt <id>` / `failed <id>…` of
    /// every process.
    fn endings(&self) -> Vec<String> {
        self.runs
            .iter()
            .flat_map(Ran::lines)
            .filter(|line| {
                line.starts_with("completed ")
                    || line.starts_with("in_doubt ")
                    || line.starts_with("failed ")
            })
            .map(str::to_owned)
            .collect()
    }

    /// The point, and where it was armed.
    fn label(&self) -> String {
        match (self.point, self.armed) {
            (None, _) => "(uninterrupted)".to_owned(),
            (Some(point), Armed::StartAndResume) => point.to_owned(),
            (Some(point), Armed::ResumeOnly) => format!("{point} (resume only)"),
        }
    }

    /// One line: the point, which processes it killed, how it ended.
    fn summary(&self) -> String {
        let killed: Vec<&str> = self
            .runs
            .iter()
            .filter(|ran| ran.killed)
            .filter_map(|ran| {
                ran.what
                    .split(' ')
                    .find(|word| ["start", "resume"].contains(word))
            })
            .collect();
        let endings: Vec<&str> = self
            .endings()
            .iter()
            .map(|line| {
                if line.starts_with("completed") {
                    "completed"
                } else if line.starts_with("in_doubt") {
                    "in_doubt"
                } else {
                    "failed"
                }
            })
            .collect();
        format!(
            "{:<36} killed in {killed:?}, ended {endings:?}, {} refund(s)",
            self.label(),
            self.refunds.len()
        )
    }

    fn output(&self) -> Option<String> {
        self.runs
            .iter()
            .flat_map(Ran::lines)
            .find_map(|line| line.strip_prefix("output "))
            .and_then(|rest| rest.split_once(' '))
            .map(|(_, output)| output.to_owned())
    }
}

/// Runs one scenario on a fresh store `url`: start (armed at `point`
/// unless `armed` says resume only), an approver answering each question
/// as it comes, a resume (armed at `point`), then a resume with no point
/// (two at once on PostgreSQL).
fn scenario(
    runtime: &tokio::runtime::Runtime,
    program: &Path,
    kind: Kind,
    url: &str,
    dir: &Path,
    point: Option<&'static str>,
    armed: Armed,
) -> Result<Scenario, String> {
    let key = JournalKey::generate()
        .map_err(|error| error.to_string())?
        .to_base64();
    let ledger = dir.join("ledger.jsonl");
    let common = |command: &str, armed: bool| {
        let mut args: Vec<String> = [
            "--store",
            url,
            "--ledger",
            &ledger.display().to_string(),
            "--lease-ms",
            LEASE_MS,
            "--journal-key",
            &key,
            command,
        ]
        .iter()
        .map(|arg| arg.to_string())
        .collect();
        if let (true, Some(point)) = (armed, point) {
            args.extend(["--kill-at".to_owned(), point.to_owned()]);
        }
        args
    };
    let mut runs = Vec::new();
    let start = spawn(program, &common("start", armed == Armed::StartAndResume)).wait()?;
    let given = start
        .lines()
        .find_map(|line| line.strip_prefix("kickoff "))
        .map(str::to_owned);
    if !start.killed && start.code != Some(0) {
        return Err(format!("start failed:\n{}{}", start.stdout, start.stderr));
    }
    runs.push(start);
    let store = runtime
        .block_on(Store::connect(url))
        .map_err(|error| format!("the test opens the store: {error}"))?;
    let kickoff = match &given {
        Some(id) => Some(id.parse::<KickoffId>().map_err(|error| error.to_string())?),
        None => {
            let kickoffs = runtime
                .block_on(store.kickoffs())
                .map_err(|error| error.to_string())?;
            if kickoffs.len() > 1 {
                return Err(format!("one start made {} kickoffs", kickoffs.len()));
            }
            kickoffs.first().map(|kickoff| kickoff.id)
        }
    };
    // A person answering each question of the kickoff as it comes, until
    // it ends (asked once, if all is well: checked below).
    let approver = kickoff.map(|id| {
        let mut args = common("approve", false);
        args.extend([id.to_string(), "--wait-ms".to_owned(), "50000".to_owned()]);
        let program = program.to_owned();
        std::thread::spawn(move || {
            let mut runs = Vec::new();
            // Exit 3: the kickoff ended, nothing left to answer.
            for _ in 0..4 {
                let ran = spawn(&program, &args).wait()?;
                let ended = ran.code == Some(3) || ran.timed_out;
                runs.push(ran);
                if ended {
                    break;
                }
            }
            Ok::<_, String>(runs)
        })
    });
    runs.push(spawn(program, &common("resume", true)).wait()?);
    let last: Vec<Running> = match kind {
        Kind::Sqlite => vec![spawn(program, &common("resume", false))],
        // Two replicas whose resumers race.
        Kind::Postgres => vec![
            spawn(program, &common("resume", false)),
            spawn(program, &common("resume", false)),
        ],
    };
    for running in last {
        runs.push(running.wait()?);
    }
    if let Some(approver) = approver {
        let approved = approver
            .join()
            .map_err(|_| "the approver's thread panicked".to_owned())??;
        runs.extend(approved);
    }
    let status = match kickoff {
        Some(id) => Some(
            runtime
                .block_on(store.kickoff(&id))
                .map_err(|error| error.to_string())?
                .status,
        ),
        None => None,
    };
    let refunds = match std::fs::read_to_string(&ledger) {
        Ok(text) => text
            .lines()
            .map(|line| {
                let entry: Value = serde_json::from_str(line)
                    .map_err(|error| format!("a ledger line {line:?}: {error}"))?;
                assert_eq!(entry["tool"], "refund");
                Ok(entry["idempotency_key"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned())
            })
            .collect::<Result<Vec<_>, String>>()?,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(error) => return Err(format!("reading the ledger: {error}")),
    };
    let questions = match kickoff {
        Some(id) => {
            let id = id.to_string();
            let mut all = runtime
                .block_on(store.history(10_000))
                .map_err(|error| error.to_string())?;
            all.extend(
                runtime
                    .block_on(store.pending())
                    .map_err(|error| error.to_string())?,
            );
            all.into_iter()
                .filter(|question| question.kickoff_id.as_deref() == Some(id.as_str()))
                .filter(|question| !question.prompt.contains("did it happen?"))
                .map(|question| {
                    (
                        question.status.to_string(),
                        question.answer.map(|answer| answer.approver),
                    )
                })
                .collect()
        }
        None => Vec::new(),
    };
    runtime.block_on(async move { drop(store) });
    Ok(Scenario {
        point,
        armed,
        runs,
        kickoff,
        id_given: given.is_some(),
        status,
        refunds,
        questions,
    })
}

/// What is wrong with `scenario`, checked against the uninterrupted run's
/// output `expected`; empty when nothing is.
fn problems(scenario: &Scenario, expected: Option<&str>) -> Vec<String> {
    let mut wrong = problems_of(scenario, expected);
    if !wrong.is_empty() {
        wrong.insert(0, format!("at {}:", scenario.label()));
    }
    wrong
}

fn problems_of(scenario: &Scenario, expected: Option<&str>) -> Vec<String> {
    let mut wrong = Vec::new();
    for ran in scenario.runs.iter().filter(|ran| ran.timed_out) {
        wrong.push(format!(
            "`{}` ran for more than {} s",
            ran.what,
            CHILD_LIMIT.as_secs()
        ));
    }
    // Every point is reached once armed from the start (points of the
    // start alone are not reached by a resume).
    if scenario.point.is_some()
        && scenario.armed == Armed::StartAndResume
        && !scenario.runs.iter().any(|ran| ran.killed)
    {
        wrong.push("the point was never reached: no process was killed".to_owned());
    }
    let Some(kickoff) = scenario.kickoff else {
        wrong.push("no kickoff was made".to_owned());
        return wrong;
    };
    let endings = scenario.endings();
    let mut keys = HashSet::new();
    for key in &scenario.refunds {
        if !keys.insert(key) {
            wrong.push(format!("the refund's key {key} is in the ledger twice"));
        }
    }
    if !scenario.id_given && scenario.point == Some("before_append:start") {
        // Killed before its start was committed: the kickoff never began
        // (its caller got no id); it ends failed, with no effect.
        if endings.len() != 1 || !endings[0].starts_with(&format!("failed {kickoff}")) {
            wrong.push(format!("a kickoff that never began ended as {endings:?}"));
        }
        if scenario.status != Some(KickoffStatus::Failed) {
            wrong.push(format!("its status is {:?}, not failed", scenario.status));
        }
        if !scenario.refunds.is_empty() || !scenario.questions.is_empty() {
            wrong.push("a kickoff that never began refunded or asked".to_owned());
        }
        return wrong;
    }
    let finished: Vec<&String> = endings
        .iter()
        .filter(|line| line.starts_with("completed ") || line.starts_with("in_doubt "))
        .collect();
    if finished.len() != 1 || endings.len() != 1 {
        wrong.push(format!(
            "{} processes finished it ({endings:?}): exactly one must, completed or in doubt",
            endings.len()
        ));
        return wrong;
    }
    let completed = finished[0] == &format!("completed {kickoff}");
    let in_doubt = finished[0] == &format!("in_doubt {kickoff}");
    if !completed && !in_doubt {
        wrong.push(format!("it ended as {:?}", finished[0]));
    }
    let status = scenario.status;
    if completed && status != Some(KickoffStatus::Completed) {
        wrong.push(format!("it completed, but the store says {status:?}"));
    }
    if in_doubt && status != Some(KickoffStatus::InDoubt) {
        wrong.push(format!("it ended in doubt, but the store says {status:?}"));
    }
    if completed {
        if scenario.refunds.len() != 1 {
            wrong.push(format!(
                "it completed with {} refunds in the ledger, not one",
                scenario.refunds.len()
            ));
        }
        if scenario.output().as_deref() != expected {
            wrong.push(format!(
                "its output {:?} is not the uninterrupted run's {expected:?}",
                scenario.output()
            ));
        }
    }
    if scenario.refunds.len() > 1 {
        wrong.push(format!("{} refunds in the ledger", scenario.refunds.len()));
    }
    if scenario.questions.len() != 1 {
        wrong.push(format!(
            "the store holds {} questions of the kickoff ({:?}): the approval must be asked once",
            scenario.questions.len(),
            scenario.questions
        ));
    } else if completed && scenario.questions[0].1.as_deref() != Some("ops") {
        wrong.push(format!(
            "it completed, but its question was {:?}",
            scenario.questions[0]
        ));
    }
    wrong
}

/// The example must have been built with the crash points.
fn check_built_with_points(program: &Path) {
    let ran = spawn(
        program,
        &[
            "start".to_owned(),
            "--kill-at".to_owned(),
            "tool_running".to_owned(),
        ],
    )
    .wait()
    .expect("runs");
    assert!(
        !ran.stderr.contains("without crash points"),
        "{} was built without crash points: build it with \
         `--features crash-points` (or through `cargo test --workspace`): {}",
        program.display(),
        ran.stderr
    );
    let listed = spawn(program, &["points".to_owned()]).wait().expect("runs");
    let listed: Vec<&str> = listed.stdout.lines().collect();
    assert_eq!(listed, POINTS, "the example lists the crate's points");
}

/// Runs every point on fresh stores of `kind`, [`AT_ONCE`] at a time, and
/// fails with every problem found.
fn matrix(kind: Kind) {
    let program = example();
    check_built_with_points(&program);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let fresh = |runtime: &tokio::runtime::Runtime| -> Option<(String, tempfile::TempDir)> {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let url = match kind {
            Kind::Sqlite => format!("sqlite://{}", dir.path().join("store.db").display()),
            Kind::Postgres => runtime.block_on(support::postgres_database())?,
        };
        Some((url, dir))
    };
    let Some((url, dir)) = fresh(&runtime) else {
        return;
    };
    let baseline = scenario(
        &runtime,
        &program,
        kind,
        &url,
        dir.path(),
        None,
        Armed::StartAndResume,
    )
    .unwrap_or_else(|error| panic!("the uninterrupted run: {error}"));
    let expected = baseline.output();
    assert_eq!(
        baseline.status,
        Some(KickoffStatus::Completed),
        "the uninterrupted run did not complete:\n{}",
        baseline.transcript()
    );
    assert!(
        expected
            .as_deref()
            .is_some_and(|output| output.contains("refunded 42 EUR on A-1042")),
        "the uninterrupted run's output: {expected:?}"
    );
    // Its other problems (an approval asked twice) are reported with the
    // points', so that one run shows them all.
    let found = problems(&baseline, expected.as_deref());
    let failures = Mutex::new(Vec::<String>::new());
    if !found.is_empty()
        && let Ok(mut failures) = failures.lock()
    {
        failures.push(format!(
            "the uninterrupted run: {}\n{}",
            found.join("\n  "),
            baseline.transcript()
        ));
    }
    let work: Vec<(&'static str, Armed)> = POINTS
        .iter()
        .flat_map(|point| [(*point, Armed::StartAndResume), (*point, Armed::ResumeOnly)])
        .collect();
    let next = Mutex::new(work.into_iter());
    let summary = Mutex::new(vec![baseline.summary()]);
    std::thread::scope(|scope| {
        for _ in 0..AT_ONCE {
            scope.spawn(|| {
                loop {
                    let Some((point, armed)) =
                        next.lock().map(|mut next| next.next()).ok().flatten()
                    else {
                        return;
                    };
                    let Some((url, dir)) = fresh(&runtime) else {
                        return;
                    };
                    let result = scenario(
                        &runtime,
                        &program,
                        kind,
                        &url,
                        dir.path(),
                        Some(point),
                        armed,
                    );
                    if let Ok(done) = &result
                        && let Ok(mut summary) = summary.lock()
                    {
                        summary.push(done.summary());
                    }
                    let report = match result {
                        Ok(done) => {
                            let found = problems(&done, expected.as_deref());
                            (!found.is_empty())
                                .then(|| format!("{}\n{}", found.join("\n  "), done.transcript()))
                        }
                        Err(error) => Some(format!("at {point} ({armed:?}): {error}")),
                    };
                    if let Some(report) = report
                        && let Ok(mut failures) = failures.lock()
                    {
                        failures.push(report);
                    }
                }
            });
        }
    });
    let mut summary = summary.into_inner().unwrap_or_default();
    summary.sort();
    // Shown with `--nocapture`: how each point ended.
    println!("{kind:?}:\n{}", summary.join("\n"));
    let failures = failures.into_inner().unwrap_or_default();
    assert!(
        failures.is_empty(),
        "{} failures (of {} crash points, each armed from the start and in the resume only, \
         and the uninterrupted run) on {kind:?}:\n\n{}",
        failures.len(),
        POINTS.len(),
        failures.join("\n\n")
    );
}

#[test]
fn every_crash_point_on_sqlite_leaves_the_kickoff_completed_or_in_doubt_with_one_refund() {
    matrix(Kind::Sqlite);
}

#[test]
fn every_crash_point_on_postgresql_with_racing_resumers_leaves_one_ending_and_one_refund() {
    matrix(Kind::Postgres);
}

#[test]
fn every_crash_point_the_example_reaches_is_a_listed_point() {
    let source = include_str!("../examples/durable_refunds.rs");
    let call = "crash_point::reached(\"";
    let named: Vec<&str> = source
        .match_indices(call)
        .filter_map(|(at, _)| source[at + call.len()..].split('"').next())
        .collect();
    assert_eq!(
        named,
        ["tool_running", "after_effect", "question_pending"],
        "the example's call sites"
    );
    for name in named {
        assert!(POINTS.contains(&name), "`{name}` is not in POINTS");
    }
}
