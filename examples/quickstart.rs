//! Quickstart: one agent, two hooks, a blocked call and a rewritten result,
//! on tokio (`crew.kickoff(..).await`).
//!
//! `cargo run --example quickstart` — offline: the model is scripted.

use std::error::Error;
use std::process::ExitCode;
use std::sync::Arc;

use crew_runtime::prelude::*;
use crew_runtime::transcript::describe_hook;
use crew_runtime::{InterceptionPoint, get_hooks, transcript::Transcript};

// A PRE_TOOL_CALL hook runs before a tool. `Err` blocks the call: the tool
// never runs and the agent is told "Tool execution blocked by hook". The
// attribute registers it at link time: nothing to call at start-up.
#[on(PRE_TOOL_CALL, tools = ["delete_file"])]
fn block_delete(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
    Err(HookAborted::new(
        format!("{} is not allowed", ctx.tool_name()),
        "safety-policy",
    ))
}

// A POST_TOOL_CALL hook runs after a tool. `Some(text)` replaces what the
// agent sees; `None` keeps it.
#[on(POST_TOOL_CALL)]
fn redact_password(ctx: &mut ToolCallHookContext) -> Option<String> {
    let result = ctx.tool_result.as_deref()?;
    result
        .contains("hunter2")
        .then(|| result.replace("hunter2", "[REDACTED]"))
}

async fn run() -> Result<Vec<String>, Box<dyn Error>> {
    let transcript = Transcript::new();
    transcript.line("Hooks registered by their attributes (nothing was called at start-up):");
    for point in [
        InterceptionPoint::PRE_TOOL_CALL,
        InterceptionPoint::POST_TOOL_CALL,
    ] {
        for hook in get_hooks(point) {
            transcript.line(format!("  {:<15}{}", point.as_str(), describe_hook(&hook)));
        }
    }
    transcript.line("");
    transcript.line("The run (the model's turns at the left, what hooks and tools did indented):");

    // Two tools over JSON arguments (see `Tool::typed` for typed ones). An
    // async closure is awaited on the runtime (a file read, an HTTP call);
    // a plain closure runs on tokio's blocking pool, so either kind can take
    // its time without stalling other calls.
    let path = json!({"type": "object", "properties": {"path": {"type": "string"}}});
    let read_file = Tool::dynamic(
        "read_file",
        "Reads a file",
        path.clone(),
        |args: Value| async move {
            let path = args["path"].as_str().unwrap_or("?");
            Ok::<_, String>(json!(format!("{path}: db password is hunter2")))
        },
    );
    let delete_file = Tool::dynamic("delete_file", "Deletes a file", path, |_| {
        Ok::<_, String>(json!("deleted"))
    });

    // The model follows a script, so the example runs offline: read the
    // file, try to delete it, then answer.
    let model = ScriptedLlm::new()
        .call("read_file", json!({"path": "notes.txt"}))
        .call("delete_file", json!({"path": "notes.txt"}))
        .answer("notes.txt holds a password; I was not allowed to delete it.");

    let assistant = Agent::builder("Assistant")
        .goal("Tidy up the project folder")
        .tool(read_file)
        .tool(delete_file)
        // Wrapped so the transcript sees each model turn.
        .llm(transcript.model("Assistant", Arc::new(model)))
        .build();
    // `{file}` is filled in by the kickoff's inputs.
    let task = Task::builder("Tidy up {file}").agent(&assistant).build();
    // No registry given: the crew uses the global one, with the hooks above.
    let crew = Crew::builder().agent(assistant).task(task).build()?;
    // The transcript listens to the crew's events: hook decisions, tool runs.
    transcript.attach(&crew);

    // The kickoff is a future: await it (a synchronous program calls
    // `crew.kickoff_blocking(..)` instead). Dropping it would cancel the run.
    let output = crew.kickoff([("file", "notes.txt")]).await?;
    transcript.line(format!("final output: {output}"));
    Ok(transcript.lines())
}

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
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
    #[tokio::test]
    async fn blocks_the_delete_and_redacts_the_read() {
        let lines = super::run().await.expect("the quickstart runs");
        assert_has_lines(
            &lines,
            &[
                "[Assistant] task: Tidy up notes.txt",
                "[Assistant] model asks: read_file {\"path\":\"notes.txt\"}",
                "    tool read_file runs with {\"path\":\"notes.txt\"}",
                "    POST_TOOL_CALL replaced the result (1 hook ran)",
                "[Assistant] agent saw: notes.txt: db password is [REDACTED]",
                "    PRE_TOOL_CALL  blocked the call: delete_file is not allowed [source: safety-policy] (1 hook ran)",
                "[Assistant] agent saw: Tool execution blocked by hook. Tool: delete_file",
            ],
        );
        assert!(
            !lines.iter().any(|l| l.contains("tool delete_file runs")),
            "{lines:#?}"
        );
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
