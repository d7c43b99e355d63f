//! An audit trail: every decision a crew made, in the store, hash-chained.
//!
//! A records crew for the customer `carol` makes five calls: it reads a
//! file (a read-only tool runs), writes a draft outside `drafts/` (a
//! `PRE_TOOL_CALL` hook refuses it), deletes two files (destructive: the
//! approval gate asks through the store, and the approver `ops` approves
//! one and denies the other, answered here by code as the inbox would),
//! and fetches exchange rates from a service that is down (the tool
//! fails). An `AuditTrail` attached to the crew and to its approvals
//! records all of it, with the secret the read file holds redacted by the
//! crew's redactor.
//!
//! `cargo run --example audit_trail` writes to a fresh SQLite file in the
//! temporary directory (printed, and kept so that it can be checked);
//! `-- --store sqlite://PATH` or `-- --store postgres://…` writes
//! elsewhere. It prints where it wrote, how many records, the trail's head
//! and the command that verifies it.

use std::error::Error;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use crew_runtime::ToolAnnotations;
use crew_runtime::audit::{self, AuditTrail, Head};
use crew_runtime::guards::{ApprovalGate, SecretRedactor};
use crew_runtime::prelude::*;
use crew_runtime::store::{Answer, Decision, Store, StoreApprovals};

/// The file the crew reads, with a token a careless admin left in it.
const CONFIG: &str = "region=eu-west-1\ngithub_token=ghp_R7kQ2mX9vL4pT8wZ1cN6bH3jF5sD0aY2eU7i\n";

/// How long a deletion waits for the approver.
const APPROVAL_WAIT: Duration = Duration::from_secs(60);

/// What a run wrote.
struct Written {
    store: Store,
    trail: String,
    records: u64,
    head: Head,
}

/// A tool taking one `path` argument.
fn path_tool(
    name: &str,
    description: &str,
    body: impl Fn(&str) -> Result<Value, String> + Send + Sync + 'static,
) -> Tool {
    Tool::dynamic(
        name,
        description,
        json!({
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
            "additionalProperties": false
        }),
        move |args| body(args["path"].as_str().unwrap_or_default()),
    )
}

/// The records crew: its model's five calls are fixed, one per turn.
fn records_crew(store: &Store, trail: &AuditTrail) -> Result<Crew, BuildError> {
    let read_file = path_tool("read_file", "Reads a file", |path| {
        Ok(json!(format!("{path}:\n{CONFIG}")))
    })
    .with_annotations(ToolAnnotations::new().read_only(true));
    let write_draft = path_tool("write_draft", "Writes a draft", |path| {
        Ok(json!(format!("wrote {path}")))
    })
    // A draft adds a file: nothing is lost, no approval needed (an
    // undeclared tool would count as destructive).
    .with_annotations(ToolAnnotations::new().destructive(false));
    let delete_file = path_tool("delete_file", "Deletes a file", |path| {
        Ok(json!(format!("deleted {path}")))
    })
    .with_annotations(ToolAnnotations::new().destructive(true));
    let fetch_rates = Tool::dynamic(
        "fetch_rates",
        "Fetches today's exchange rates",
        json!({"type": "object", "properties": {}, "additionalProperties": false}),
        |_| Err::<Value, _>("the rates service answered 503".to_owned()),
    )
    .with_annotations(ToolAnnotations::new().read_only(true));
    let model = Arc::new(
        ScriptedLlm::new()
            .call("read_file", json!({"path": "config/app.env"}))
            .call("write_draft", json!({"path": "/etc/cron.d/cleanup"}))
            .call("delete_file", json!({"path": "drafts/old-summary.md"}))
            .call("delete_file", json!({"path": "reports/q3.md"}))
            .call("fetch_rates", json!({}))
            .answer("Config read, the old draft deleted; the rest was refused or failed."),
    );
    let clerk = Agent::builder("Clerk")
        .goal("Keep the records folder tidy")
        .backstory("Files, drafts and deletes records")
        .tools(vec![read_file, write_draft, delete_file, fetch_rates])
        .llm(model)
        .build();
    let task = Task::builder("Tidy the records folder")
        .name("tidy records")
        .agent(&clerk)
        .build();
    let approvals = StoreApprovals::new(store.clone()).audit(trail.clone());
    let crew = Crew::builder()
        .name("records-desk")
        .agent(clerk)
        .task(task)
        // This crew's hooks only: the program's `#[on]` hooks stay out.
        .global_registry(Arc::new(HookRegistry::new()))
        // Secrets leave the crew redacted: its events, and so its audit
        // records, included.
        .redact_with(SecretRedactor::new())
        .hook_with(
            PRE_TOOL_CALL,
            HookOptions::new()
                .name("drafts-only")
                .tools(["write_draft"]),
            |ctx: &mut ToolCallHookContext| {
                let path = ctx.tool_input["path"].as_str().unwrap_or_default();
                if path.starts_with("drafts/") && !path.contains("..") {
                    Ok(())
                } else {
                    Err(HookAborted::new(
                        format!("{path} is outside drafts/"),
                        "drafts-only",
                    ))
                }
            },
        )
        .human_input(Arc::new(approvals))
        .human_input_timeout(APPROVAL_WAIT)
        .async_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("approval-gate"),
            ApprovalGate::for_capabilities([Capability::Destructive]).pre_hook(),
        )
        .build()?;
    trail.attach(&crew);
    Ok(crew)
}

/// The approver `ops`, answering by code as a person would in the inbox:
/// drafts may go, anything else stays. Returns once `count` questions are
/// answered.
async fn ops_answers(store: Store, count: usize) -> Result<(), String> {
    let mut answered = 0;
    while answered < count {
        let pending = store.pending().await.map_err(|error| error.to_string())?;
        for question in pending {
            let path = question.arguments["path"].as_str().unwrap_or_default();
            let answer = if path.starts_with("drafts/") {
                Answer::new("ops", Decision::Approve).with_comment("an old draft")
            } else {
                Answer::new("ops", Decision::Deny).with_comment("reports are kept")
            };
            println!(
                "ops answers {} on {path}: {}",
                question.tool,
                answer.decision.as_str()
            );
            store
                .decide(&question.id, answer)
                .await
                .map_err(|error| error.to_string())?;
            answered += 1;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// Runs the crew once with its audit trail on the store at `url`.
async fn run(url: &str) -> Result<Written, Box<dyn Error>> {
    let store = Store::connect(url).await?;
    let trail = AuditTrail::open(store.clone())?;
    let crew = records_crew(&store, &trail)?.for_user("carol");
    let answering = tokio::spawn(ops_answers(store.clone(), 2));
    let output = crew.kickoff(()).await?;
    answering.await??;
    println!("the crew answered: {}", output.raw);
    // Records are written in batches off the call path: wait for them.
    trail.flush().await?;
    if trail.dropped() > 0 {
        return Err(format!("{} audit records were dropped", trail.dropped()).into());
    }
    let head = audit::head(&store, trail.name()).await?;
    Ok(Written {
        trail: trail.name().to_owned(),
        records: trail.written(),
        head,
        store,
    })
}

/// The store's URL: `--store URL`, or a fresh SQLite file that outlives
/// the run (so that `crew-audit` can read it afterwards).
fn store_url() -> Result<String, Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    match (args.next().as_deref(), args.next(), args.next()) {
        (Some("--store"), Some(url), None) => Ok(url),
        (None, _, _) => {
            let dir = tempfile::Builder::new()
                .prefix("audit-trail-")
                .tempdir()?
                .keep();
            Ok(format!("sqlite://{}", dir.join("audit.db").display()))
        }
        _ => Err("usage: audit_trail [--store sqlite://PATH | postgres://…]".into()),
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let outcome = async {
        let url = store_url()?;
        println!("store: {url}");
        let written = run(&url).await?;
        for record in audit::tail(&written.store, &written.trail, 50).await? {
            println!("  {:>4} {:<17} {}", record.seq, record.kind, record.data);
        }
        println!(
            "wrote {} records to the trail `{}` of {url}",
            written.records, written.trail
        );
        println!("head: {}", written.head);
        println!(
            "verify: cargo run -p crew-runtime --features store,audit --bin crew-audit -- verify {url}"
        );
        // The chain alone cannot show records cut from its end: a head
        // kept elsewhere can.
        println!(
            "or against this head: … verify {url} --expect {}",
            written.head
        );
        Ok::<_, Box<dyn Error>>(())
    };
    match outcome.await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("audit_trail: {error}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_decision_is_recorded_redacted_and_the_chain_verifies() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let url = format!("sqlite://{}", dir.path().join("audit.db").display());
        let written = run(&url).await.expect("the crew runs");

        let verified = audit::verify(&written.store, &written.trail, Some(&written.head))
            .await
            .expect("the chain verifies against its head");
        assert_eq!(verified.head, written.head);
        assert_eq!(
            u64::try_from(verified.head.count).expect("a count"),
            written.records
        );

        let records = audit::tail(&written.store, &written.trail, 1_000)
            .await
            .expect("the records read back");
        let kinds: Vec<&str> = records.iter().map(|record| record.kind.as_str()).collect();
        for kind in [
            "kickoff_started",
            "kickoff_ended",
            "tool_started",
            "tool_finished",
            "blocked",
            "tool_failed",
            "approval_asked",
            "approval_answered",
            "model_call",
        ] {
            assert!(kinds.contains(&kind), "no {kind} record in {kinds:?}");
        }
        let of = |kind: &'static str| records.iter().filter(move |record| record.kind == kind);

        let decisions: Vec<(&str, &str)> = of("approval_answered")
            .map(|record| {
                (
                    record.data["decision"].as_str().unwrap_or_default(),
                    record.data["approver"].as_str().unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(decisions, [("approve", "ops"), ("deny", "ops")]);
        assert!(
            of("blocked").any(|record| record.data["source"] == "drafts-only"
                && record.data["tool"] == "write_draft"),
            "the hook's block is recorded with its source"
        );
        assert!(
            of("tool_failed").any(|record| record.data["tool"] == "fetch_rates"
                && record.data["error"].to_string().contains("503")),
            "the failing tool is recorded with its error"
        );
        let started = of("kickoff_started").next().expect("a kickoff_started");
        assert_eq!(started.data["user"], "carol");
        let ended = of("kickoff_ended").next().expect("a kickoff_ended");
        assert_eq!(ended.data["status"], "completed");

        // The token the read file holds is in no record; the read's
        // result is there, redacted.
        let everything: String = records.iter().map(|r| r.data.to_string()).collect();
        assert!(!everything.contains("ghp_R7kQ2mX9vL4pT8wZ1cN6bH3jF5sD0aY2eU7i"));
        assert!(
            of("tool_finished").any(|record| record.data["tool"] == "read_file"
                && record.data["result"]
                    .to_string()
                    .contains("GITHUB-TOKEN-REDACTED")),
            "the read's result is recorded, its token redacted"
        );
    }
}
