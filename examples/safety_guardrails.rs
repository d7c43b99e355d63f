//! Safety guardrails: destructive tools are blocked before they run.
//!
//! `cargo run --example safety_guardrails`
//!
//! One global PRE_TOOL_CALL hook, filtered to the destructive tools, refuses
//! every call to them with a reason and a source. The tool never runs; the
//! agent is told `Tool execution blocked by hook. Tool: <name>` and goes on.
//! The reason and source travel on the `HookDispatched` event, where
//! monitoring picks them up. A POST_TOOL_CALL hook still sees every
//! attempt, blocked or not, so an audit trail is complete.

use std::error::Error;
use std::process::ExitCode;
use std::sync::Arc;

use crew_runtime::global_registry;
use crew_runtime::prelude::*;
use crew_runtime::schemars::JsonSchema;
use crew_runtime::serde::Deserialize;
use crew_runtime::transcript::note;
use crew_runtime::{ToolCallStatus, transcript::Transcript};

/// The guide's list. A filter rather than an `if` inside the hook: the
/// hook is not even called for other tools, and `explain` can say why.
/// Filter entries are normalized like tool names, so a model that spells
/// a tool `DropTable` or `drop-table` still meets this hook.
#[on(PRE_TOOL_CALL, tools = ["delete_file", "drop_table", "remove_user", "system_shutdown"])]
fn safety_check(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
    Err(HookAborted::new(
        format!("{} is destructive", ctx.tool_name()),
        "safety-policy",
    ))
}

/// POST hooks run for blocked calls too (with the blocked message as the
/// result): the audit sees every attempt, which is what an audit is for.
/// `ctx.status()` says what happened, without comparing texts.
#[on(POST_TOOL_CALL)]
fn audit_every_attempt(ctx: &ToolCallHookContext) {
    let blocked = matches!(ctx.status(), ToolCallStatus::Blocked(_));
    let verdict = if blocked { "BLOCKED" } else { "allowed" };
    note(ctx, format!("audit: {} {verdict}", ctx.tool_name()));
}

#[derive(Deserialize, JsonSchema)]
#[serde(crate = "crew_runtime::serde")]
#[schemars(crate = "crew_runtime::schemars")]
struct PathArgs {
    /// The file's path.
    path: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(crate = "crew_runtime::serde")]
#[schemars(crate = "crew_runtime::schemars")]
struct TableArgs {
    /// The table's name.
    table: String,
}

fn run() -> Result<Vec<String>, Box<dyn Error>> {
    let transcript = Transcript::new();

    let read_file = Tool::typed("read_file", "Reads a file", |args: PathArgs| {
        Ok::<_, String>(format!("{}: 3 stale log files listed", args.path))
    });
    let delete_file = Tool::typed("delete_file", "Deletes a file", |args: PathArgs| {
        Ok::<_, String>(format!("deleted {}", args.path))
    });
    let drop_table = Tool::typed("drop_table", "Drops a table", |args: TableArgs| {
        Ok::<_, String>(format!("dropped {}", args.table))
    });

    // The model reads, then tries two destructive tools (the second one
    // spelled the way some models do), then reports.
    let model = ScriptedLlm::new()
        .call("read_file", json!({"path": "logs/index.txt"}))
        .call("delete_file", json!({"path": "logs/old.log"}))
        .call("DropTable", json!({"table": "sessions"}))
        .answer("I listed the stale logs; deleting files and dropping tables is not allowed.");
    let janitor = Agent::builder("Janitor")
        .goal("Free up disk space")
        .tool(read_file)
        .tool(delete_file)
        .tool(drop_table)
        .llm(transcript.model("Janitor", Arc::new(model)))
        .build();
    let task = Task::builder("Clean up old logs and unused tables")
        .agent(&janitor)
        .build();
    let crew = Crew::builder().agent(janitor).task(task).build()?;
    transcript.attach(&crew);

    // What `explain` says before anything runs: the hook would run for
    // drop_table, and is skipped for read_file by its filter.
    for tool in ["drop_table", "read_file"] {
        let explanation = global_registry().explain(tool, Some("Janitor"));
        let running = explanation.running(PRE_TOOL_CALL);
        transcript.line(format!(
            "explain({tool}): PRE_TOOL_CALL hooks that run: {running:?}"
        ));
    }

    crew.kickoff_blocking(())?;

    let blocked: Vec<String> = transcript
        .dispatches()
        .iter()
        .filter(|d| d.outcome == "aborted")
        .map(|d| {
            format!(
                "blocked: {} (reason: {}, source: {})",
                d.tool_name.as_deref().unwrap_or(""),
                d.abort_reason.as_deref().unwrap_or_default(),
                d.abort_source.as_deref().unwrap_or_default()
            )
        })
        .collect();
    for line in blocked {
        transcript.line(line);
    }
    Ok(transcript.lines())
}

fn main() -> ExitCode {
    match run() {
        Ok(lines) => {
            // Lines hold text the model and the tools chose: the console
            // escapes control characters.
            for line in lines {
                crew_runtime::console::print_line(&line);
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!(
                "error: {}",
                crew_runtime::console::escape_control(&error.to_string())
            );
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn destructive_tools_are_blocked_and_the_agent_is_told() {
        let lines = super::run().expect("the example runs");
        assert_has_lines(
            &lines,
            &[
                "explain(drop_table): PRE_TOOL_CALL hooks that run: [\"safety_check\"]",
                "explain(read_file): PRE_TOOL_CALL hooks that run: []",
                "    tool read_file runs with {\"path\":\"logs/index.txt\"}",
                "    audit: read_file allowed",
                "[Janitor] model asks: delete_file {\"path\":\"logs/old.log\"}",
                "    PRE_TOOL_CALL  blocked the call: delete_file is destructive [source: safety-policy] (1 hook ran)",
                "    audit: delete_file BLOCKED",
                "[Janitor] agent saw: Tool execution blocked by hook. Tool: delete_file",
                "[Janitor] model asks: DropTable {\"table\":\"sessions\"}",
                "[Janitor] agent saw: Tool execution blocked by hook. Tool: drop_table",
                "blocked: delete_file (reason: delete_file is destructive, source: safety-policy)",
                "blocked: drop_table (reason: drop_table is destructive, source: safety-policy)",
            ],
        );
        let ran: Vec<&String> = lines.iter().filter(|l| l.contains(" runs with ")).collect();
        assert_eq!(ran.len(), 1, "only read_file ran: {ran:?}");
    }

    /// Panics unless every `expected` line is among `lines`, showing them
    /// all.
    #[track_caller]
    fn assert_has_lines(lines: &[String], expected: &[&str]) {
        for wanted in expected {
            assert!(
                lines.iter().any(|line| line == wanted),
                "missing {wanted:?} in {lines:#?}"
            );
        }
    }
}
