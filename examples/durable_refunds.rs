//! Durable refunds: a support crew whose kickoff outlives its process. It
//! looks an order up, asks a person (through the store) before it refunds
//! it, and appends each refund it makes to a ledger file with the call's
//! idempotency key. Start it in one process, approve it from another, and
//! finish it in a third: the refund happens once.
//!
//! The store is SQLite (`sqlite://refunds.db`) or PostgreSQL
//! (`postgres://…`); the model is the embedded scripted one.
//!
//! ```text
//! cargo run --example durable_refunds -- --store sqlite://refunds.db --ledger ledger.jsonl start
//! kickoff 5b0c…
//! cargo run --example durable_refunds -- --store sqlite://refunds.db approve 5b0c…
//! cargo run --example durable_refunds -- --store sqlite://refunds.db --ledger ledger.jsonl resume
//! completed 5b0c…
//! ```
//!
//! `start` journals the kickoff, runs it until its refund waits for a
//! person, and exits: the kickoff is left for a resumer. `approve` answers
//! that question as the approver `ops`. `resume` runs a resumer until no
//! kickoff of the crew is left to run, and says how each one it finished
//! ended (`completed <id>` or `in_doubt <id>`).
//!
//! With `--park-after-ms N`, a kickoff whose refund waited N ms for a
//! person parks: `start` prints `parked <id>` and exits, no process holds
//! the kickoff, and `resume --wait-ms M` (a resumer woken by answers,
//! until M ms pass with nothing to do) takes it up once it is approved.
//! `start --count K` starts K kickoffs (4 at a time), each running until
//! it parks.
//!
//! The journal is sealed with the key of `--journal-key` or of
//! `CREW_JOURNAL_KEY` (base64, 32 bytes; every process must use the same),
//! else with a fixed development key, which is only for trying it out.
//!
//! Built with the test-only feature `crash-points`, `start` and `resume`
//! take `--kill-at <point>`: the process kills itself with SIGKILL at that
//! point (`points` lists them), which is how the crash tests of the
//! workspace (`tests/crash_matrix.rs`) prove that a crash anywhere leaves
//! the kickoff completed, or in doubt, and never refunds twice.

use std::error::Error;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
#[path = "support/replaying.rs"]
mod replaying;

use crew_runtime::crash_point;
use crew_runtime::durable::{Durable, DurableError, Resumer};
use crew_runtime::guards::ApprovalGate;
use crew_runtime::llm::LlmRequest;
use crew_runtime::prelude::*;
use crew_runtime::store::journal::{JournalKey, KickoffId, KickoffStatus};
use crew_runtime::store::{Answer, ApproverScope, Decision, Store, StoreApprovals};
use crew_runtime::{CurrentCall, ToolAnnotations};
use replaying::Replaying;

/// The crew's name, which its kickoffs are journaled under.
const CREW: &str = "refunds";
/// The order every ticket of this example is about.
const ORDER: &str = "A-1042";
/// Who the kickoffs run for (they may not approve their own refunds).
const CUSTOMER: &str = "customer-7";
/// Who approves the refunds.
const APPROVER: &str = "ops";
/// How long a refund waits for a person.
const APPROVAL_WAIT: Duration = Duration::from_secs(10 * 60);
/// How long a command waits at most for what it waits for.
const PATIENCE: Duration = Duration::from_secs(10 * 60);
/// How often a command looks again at the store.
const POLL: Duration = Duration::from_millis(50);
/// The development key: for trying the example out, never for real data.
const DEVELOPMENT_KEY: [u8; 32] = *b"durable_refunds example, dev key";

#[derive(Parser)]
#[command(
    name = "durable_refunds",
    about = "A durable refund crew: start a kickoff, approve its refund, resume it elsewhere"
)]
struct Cli {
    /// The store: `sqlite://path` or `postgres://…`.
    #[arg(long, global = true)]
    store: Option<String>,
    /// The ledger file the refunds are appended to (one JSON line each).
    #[arg(long, global = true)]
    ledger: Option<PathBuf>,
    /// How long a process holds a kickoff between renewals, in ms.
    #[arg(long, global = true, default_value_t = 15_000)]
    lease_ms: u64,
    /// The journal's key (base64 of 32 bytes); else `CREW_JOURNAL_KEY`.
    #[arg(long, global = true)]
    journal_key: Option<String>,
    /// Park a kickoff whose refund waited this long for a person, in ms
    /// (0: at once): no process holds it until the refund is answered.
    #[arg(long, global = true)]
    park_after_ms: Option<u64>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Starts a kickoff and runs it until its refund waits for a person.
    Start {
        /// Kill this process at the named crash point (test builds only).
        #[arg(long)]
        kill_at: Option<String>,
        /// How many kickoffs to start (more than one: with
        /// `--park-after-ms`, each runs until it parks).
        #[arg(long, default_value_t = 1)]
        count: usize,
    },
    /// Approves the pending refund of a kickoff, as `ops`.
    Approve {
        /// The kickoff.
        kickoff: String,
        /// How long to wait for its question to be asked, in ms.
        #[arg(long, default_value_t = 0)]
        wait_ms: u64,
    },
    /// Runs the crew's kickoffs that are left to run, to their ends.
    Resume {
        /// Kill this process at the named crash point (test builds only).
        #[arg(long)]
        kill_at: Option<String>,
        /// Keep resuming, woken by answers, until this many ms pass with
        /// nothing to do (parked kickoffs wait for their answers); else
        /// stop once no kickoff is running or ready.
        #[arg(long)]
        wait_ms: Option<u64>,
    },
    /// Lists the named crash points.
    Points,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(code) => code,
        Err(error) => {
            eprintln!("durable_refunds: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<ExitCode, Box<dyn Error>> {
    let lease = Duration::from_millis(cli.lease_ms);
    match cli.command {
        Command::Points => {
            for point in crash_point::POINTS {
                println!("{point}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Start { kill_at, count } => {
            arm(kill_at.as_deref())?;
            let store = Store::connect(&store_url(cli.store.as_deref())?).await?;
            let ledger = ledger_path(cli.ledger)?;
            let key = journal_key(cli.journal_key.as_deref())?;
            let park_after = cli.park_after_ms.map(Duration::from_millis);
            let crew = refunds_crew(&store, key, lease, park_after, ledger)?;
            match park_after {
                Some(_) => start_parking(&crew, count).await,
                None if count == 1 => start(&store, &crew).await,
                None => Err("more than one kickoff at once needs --park-after-ms".into()),
            }
        }
        Command::Approve { kickoff, wait_ms } => {
            let store = Store::connect(&store_url(cli.store.as_deref())?).await?;
            approve(&store, &kickoff, Duration::from_millis(wait_ms)).await
        }
        Command::Resume { kill_at, wait_ms } => {
            arm(kill_at.as_deref())?;
            let store = Store::connect(&store_url(cli.store.as_deref())?).await?;
            let ledger = ledger_path(cli.ledger)?;
            let key = journal_key(cli.journal_key.as_deref())?;
            let park_after = cli.park_after_ms.map(Duration::from_millis);
            let crew = refunds_crew(&store, key, lease, park_after, ledger)?;
            match wait_ms {
                Some(wait) => resume_waiting(&store, &crew, Duration::from_millis(wait)).await,
                None => resume(&store, &crew, lease).await,
            }
        }
    }
}

fn store_url(url: Option<&str>) -> Result<String, String> {
    url.map(str::to_owned)
        .ok_or_else(|| "give the store with --store (sqlite://path or postgres://…)".to_owned())
}

fn ledger_path(ledger: Option<PathBuf>) -> Result<PathBuf, String> {
    ledger.ok_or_else(|| "give the ledger file with --ledger PATH".to_owned())
}

/// Arms `point`, when given: refused by a build without crash points.
fn arm(point: Option<&str>) -> Result<(), String> {
    let Some(point) = point else { return Ok(()) };
    crash_point::arm(point).map_err(|error| {
        format!(
            "--kill-at {point}: {error} (cargo build --example durable_refunds --features crash-points)"
        )
    })
}

/// The journal's key: `--journal-key`, `CREW_JOURNAL_KEY`, or the
/// development key (said so on standard error).
fn journal_key(given: Option<&str>) -> Result<JournalKey, Box<dyn Error>> {
    if let Some(text) = given {
        return Ok(JournalKey::from_base64(text)?);
    }
    if let Ok(text) = std::env::var("CREW_JOURNAL_KEY") {
        return Ok(JournalKey::from_base64(&text)?);
    }
    eprintln!(
        "warning: no --journal-key and no CREW_JOURNAL_KEY: the journal is sealed with the \
         example's fixed development key, fit for trying it out only"
    );
    Ok(JournalKey::from_bytes(DEVELOPMENT_KEY))
}

/// The refund crew: `lookup` (read-only), then `refund` (destructive,
/// asked of a person through the store, 1 s timeout), durable on `store`.
fn refunds_crew(
    store: &Store,
    key: JournalKey,
    lease: Duration,
    park_after: Option<Duration>,
    ledger: PathBuf,
) -> Result<Crew, BuildError> {
    let order_schema = json!({
        "type": "object",
        "properties": {"order": {"type": "string"}},
        "required": ["order"]
    });
    let lookup = Tool::dynamic(
        "lookup",
        "Looks an order up",
        order_schema,
        |args: Value| {
            let order = args["order"].as_str().unwrap_or("?").to_owned();
            Ok::<_, String>(json!(format!("order {order}: 42 EUR, delivered damaged")))
        },
    )
    .with_annotations(ToolAnnotations::new().read_only(true))
    // A call cut short by a crash runs again once it cannot still be
    // running anywhere: its timeout (and a lease) after it began.
    .with_timeout(Duration::from_secs(1));
    let refund = Tool::dynamic(
        "refund",
        "Refunds an order",
        json!({
            "type": "object",
            "properties": {
                "order": {"type": "string"},
                "amount": {"type": "integer", "minimum": 1}
            },
            "required": ["order", "amount"]
        }),
        move |args: Value| refund(&ledger, &args),
    )
    .with_annotations(ToolAnnotations::new().destructive(true))
    .with_timeout(Duration::from_secs(1));
    let support = Agent::builder("Support")
        .goal("Settle refund tickets")
        .tools(vec![lookup, refund])
        .llm(Arc::new(Replaying(plan)))
        .build();
    let ticket = Task::builder("Settle the ticket about order {order}")
        .name("refund ticket")
        .agent(&support)
        .build();
    Crew::builder()
        .name(CREW)
        .agent(support)
        .task(ticket)
        // This crew's hooks only: the program's `#[on]` hooks stay out.
        .global_registry(Arc::new(HookRegistry::new()))
        .human_input(Arc::new(StoreApprovals::new(store.clone())))
        .human_input_timeout(APPROVAL_WAIT)
        .async_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("approval-gate"),
            ApprovalGate::for_capabilities([Capability::Destructive]).pre_hook(),
        )
        .durable({
            let durable = Durable::new(store.clone())
                .journal_key(key)
                .lease(lease)
                .owner(format!("durable_refunds-{}", std::process::id()));
            match park_after {
                Some(after) => durable.park_after(after),
                None => durable,
            }
        })
        .build()
}

/// The refund's effect: one JSON line appended to the ledger, with the
/// call's idempotency key (what a payment API's own key would carry).
fn refund(ledger: &Path, args: &Value) -> Result<Value, String> {
    crash_point::reached("tool_running");
    let key = CurrentCall::get()
        .and_then(|call| call.idempotency_key().map(|key| key.as_str().to_owned()))
        .ok_or("a refund runs only in a durable kickoff's tool call")?;
    let line = json!({
        "tool": "refund",
        "idempotency_key": key,
        "order": args["order"],
        "amount": args["amount"],
    });
    let write = || -> std::io::Result<()> {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(ledger)?;
        file.write_all(format!("{line}\n").as_bytes())?;
        file.sync_data()
    };
    write()
        .map_err(|error| format!("the ledger {} cannot be written: {error}", ledger.display()))?;
    crash_point::reached("after_effect");
    Ok(json!(format!(
        "refunded {} EUR on {}",
        args["amount"],
        args["order"].as_str().unwrap_or("?")
    )))
}

/// The refund's plan, played from where the conversation stands (see
/// [`Replaying`]): a process that takes a kickoff over asks for the turn
/// after the answers its journal replays.
fn plan(_: &LlmRequest<'_>) -> ScriptedLlm {
    ScriptedLlm::new()
        .call("lookup", json!({"order": ORDER}))
        .call("refund", json!({"order": ORDER, "amount": 42}))
        .answer_with(|request| format!("Ticket settled: {}.", request.observations().join("; ")))
}

/// `start`: journals a kickoff, runs it until its question waits for a
/// person, and exits (the kickoff is left for a resumer).
async fn start(store: &Store, crew: &Crew) -> Result<ExitCode, Box<dyn Error>> {
    let crew = crew.for_user(CUSTOMER);
    let id = crew.start([("order", ORDER)]).await?;
    println!("kickoff {id}");
    let running = tokio::spawn({
        let crew = crew.clone();
        async move { crew.resume(&id).await }
    });
    let waited = Instant::now();
    while waited.elapsed() < PATIENCE {
        if running.is_finished() {
            // Answered already (by someone quick): it ran to its end here.
            let result = running.await?;
            report(&id, &result);
            return Ok(ExitCode::SUCCESS);
        }
        let asked = store
            .pending()
            .await?
            .into_iter()
            .find(|question| question.kickoff_id.as_deref() == Some(id.to_string().as_str()));
        if let Some(question) = asked {
            crash_point::reached("question_pending");
            println!("question {} pending", question.id);
            // Gone without ending the kickoff: a resumer finishes it.
            std::process::exit(0);
        }
        tokio::time::sleep(POLL).await;
    }
    Err(format!("kickoff {id} asked no question in {} s", PATIENCE.as_secs()).into())
}

/// How many kickoffs `start --count` runs at once: more would only wait
/// for the store's connections.
const AT_ONCE: usize = 4;

/// `start --park-after-ms N`: journals `count` kickoffs and runs each
/// until it parks (its refund waits for a person, held by no process),
/// [`AT_ONCE`] at a time; prints `kickoff <id>` and then `parked <id>` for
/// each.
async fn start_parking(crew: &Crew, count: usize) -> Result<ExitCode, Box<dyn Error>> {
    use futures_util::StreamExt as _;
    let crew = crew.for_user(CUSTOMER);
    let runs = (0..count).map(|_| {
        let crew = crew.clone();
        async move {
            let id = crew.start([("order", ORDER)]).await?;
            println!("kickoff {id}");
            let result = crew.resume(&id).await;
            report(&id, &result);
            Ok::<_, CrewError>(())
        }
    });
    let mut runs = futures_util::stream::iter(runs).buffer_unordered(AT_ONCE);
    while let Some(run) = runs.next().await {
        run?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `approve`: approves the kickoff's pending question as `ops`, waiting up
/// to `wait` for it to be asked; exits 3 if the kickoff ended first.
async fn approve(store: &Store, kickoff: &str, wait: Duration) -> Result<ExitCode, Box<dyn Error>> {
    let id: KickoffId = kickoff
        .parse()
        .map_err(|error| format!("{kickoff:?} is not a kickoff id: {error}"))?;
    if store.approver(APPROVER).await?.is_none() {
        let added = store
            .add_approver(APPROVER, None, ApproverScope::everything())
            .await;
        // Another process may have added it meanwhile.
        if let Err(error) = added
            && store.approver(APPROVER).await?.is_none()
        {
            return Err(error.into());
        }
    }
    let waited = Instant::now();
    loop {
        let asked = store
            .pending()
            .await?
            .into_iter()
            .find(|question| question.kickoff_id.as_deref() == Some(kickoff));
        if let Some(question) = asked {
            store
                .decide(&question.id, Answer::new(APPROVER, Decision::Approve))
                .await?;
            println!("approved {} of kickoff {kickoff}", question.id);
            return Ok(ExitCode::SUCCESS);
        }
        let status = store.kickoff(&id).await?.status;
        if status.is_finished() {
            println!("kickoff {kickoff} ended ({status}) with no question pending");
            return Ok(ExitCode::from(3));
        }
        if waited.elapsed() >= wait {
            return Err(format!("no question of kickoff {kickoff} is pending").into());
        }
        tokio::time::sleep(POLL).await;
    }
}

/// `resume`: runs a resumer until no kickoff of the crew is claimable,
/// running or ready, saying how each one it finished ended.
async fn resume(store: &Store, crew: &Crew, lease: Duration) -> Result<ExitCode, Box<dyn Error>> {
    let resumer = Resumer::new(store.clone()).crew(crew);
    let waited = Instant::now();
    loop {
        let resumed = resumer.resume_claimable().await?;
        for kickoff in &resumed {
            report(&kickoff.kickoff, &kickoff.result);
        }
        if !resumed.is_empty() {
            continue;
        }
        let left = store.kickoffs().await?.into_iter().any(|kickoff| {
            kickoff.crew == CREW
                && matches!(
                    kickoff.status,
                    KickoffStatus::Running | KickoffStatus::Ready
                )
        });
        if !left {
            return Ok(ExitCode::SUCCESS);
        }
        if waited.elapsed() >= PATIENCE {
            return Err(format!(
                "kickoffs held by other processes were still running after {} s",
                PATIENCE.as_secs()
            )
            .into());
        }
        // Held elsewhere, or its holder's lease not yet run out.
        tokio::time::sleep(POLL.max(lease / 10)).await;
    }
}

/// `resume --wait-ms N`: runs a resumer, woken by the store's changes (an
/// answer, say), until `wait` passes with nothing to do; says how each
/// kickoff it took up ended.
async fn resume_waiting(
    store: &Store,
    crew: &Crew,
    wait: Duration,
) -> Result<ExitCode, Box<dyn Error>> {
    let resumer = Resumer::new(store.clone()).crew(crew);
    let mut changes = store.changes();
    let mut idle_since = Instant::now();
    loop {
        let resumed = resumer.resume_claimable().await?;
        for kickoff in &resumed {
            report(&kickoff.kickoff, &kickoff.result);
        }
        if !resumed.is_empty() {
            idle_since = Instant::now();
            continue;
        }
        let Some(left) = wait.checked_sub(idle_since.elapsed()) else {
            return Ok(ExitCode::SUCCESS);
        };
        // Woken by a change, else looking again now and then (a lease
        // running out is no change).
        let _ = tokio::time::timeout(left.min(POLL * 10), changes.recv()).await;
    }
}

/// One line for how a kickoff ended, and its output on the next when it
/// completed. A kickoff this process lost (its lease ran out while it was
/// slow, and another process holds it now) did not end: `lost <id>`.
fn report(id: &KickoffId, result: &Result<CrewOutput, CrewError>) {
    let lost = match result {
        Err(CrewError::Integration(error)) => matches!(
            error.downcast_ref::<DurableError>(),
            Some(DurableError::LeaseLost(_) | DurableError::NotResumable { .. })
        ),
        _ => false,
    };
    if lost && let Err(error) = result {
        println!("lost {id}: {error}");
        return;
    }
    match result {
        Ok(output) => {
            println!("completed {id}");
            println!("output {id} {}", json!(output.raw));
        }
        Err(CrewError::Parked { .. }) => println!("parked {id}"),
        Err(CrewError::InDoubt { tool, key, .. }) => {
            println!("in_doubt {id}");
            eprintln!("kickoff {id}: the call of `{tool}` (key {key}) is in doubt: check by hand");
        }
        Err(error) => println!("failed {id}: {error}"),
    }
}
