//! Input validation and sanitization: bad arguments are refused before a
//! tool runs, and acceptable ones are cleaned up in place.
//!
//! `cargo run --example input_validation`
//!
//! - `web_search`: a query shorter than 3 characters is refused; any other
//!   is trimmed and lowercased *in place*, in `ctx.tool_input`. What the PRE
//!   chain leaves there is exactly what the tool receives.
//! - `read_file`: a path that climbs out of the workspace (`..`) or is
//!   absolute is refused.

use std::error::Error;
use std::path::{Component, Path};
use std::process::ExitCode;
use std::sync::Arc;

use crew_runtime::prelude::*;
use crew_runtime::schemars::JsonSchema;
use crew_runtime::serde::Deserialize;
use crew_runtime::transcript::Transcript;

/// Refuses short queries, then cleans the query up where the tool will
/// read it. The length is checked after trimming, so `"  a  "` cannot pass
/// by padding.
#[on(PRE_TOOL_CALL, tools = ["web_search"])]
fn validate_query(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
    let query = ctx
        .tool_input
        .get("query")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let cleaned = query.trim().to_lowercase();
    if cleaned.chars().count() < 3 {
        return Err(HookAborted::new(
            "search query too short",
            "input-validation",
        ));
    }
    // Edit the entry in place, as the guide says: replacing the whole map
    // would also reach the tool here, but would drop any key an earlier
    // hook stashed in it.
    ctx.tool_input.insert("query".to_owned(), json!(cleaned));
    Ok(())
}

/// Refuses paths that leave the workspace. Looking at path components
/// rather than searching for the text `..` lets `notes..txt` through and
/// still catches `a/../../b`.
#[on(PRE_TOOL_CALL, tools = ["read_file"])]
fn validate_path(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
    let path = ctx
        .tool_input
        .get("path")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let climbs = Path::new(path)
        .components()
        .any(|part| part == Component::ParentDir);
    let absolute = Path::new(path).is_absolute() || path.starts_with(['/', '\\']);
    if climbs || absolute {
        return Err(HookAborted::new(
            format!("invalid file path {path:?}"),
            "input-validation",
        ));
    }
    Ok(())
}

#[derive(Deserialize, JsonSchema)]
#[serde(crate = "crew_runtime::serde")]
#[schemars(crate = "crew_runtime::schemars")]
struct SearchArgs {
    /// What to look for.
    query: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(crate = "crew_runtime::serde")]
#[schemars(crate = "crew_runtime::schemars")]
struct ReadArgs {
    /// A path inside the workspace.
    path: String,
}

fn run() -> Result<Vec<String>, Box<dyn Error>> {
    let transcript = Transcript::new();

    // The tools echo what they received, so the transcript shows the
    // cleaned arguments from the tool's side too.
    let web_search = Tool::typed("web_search", "Searches the web", |args: SearchArgs| {
        Ok::<_, String>(format!("3 results for {:?}", args.query))
    });
    let read_file = Tool::typed("read_file", "Reads a workspace file", |args: ReadArgs| {
        Ok::<_, String>(format!("contents of {}", args.path))
    });

    let model = ScriptedLlm::new()
        .call("web_search", json!({"query": "ab"}))
        .call("web_search", json!({"query": "  Rust ASYNC Traits  "}))
        .call("read_file", json!({"path": "../../etc/passwd"}))
        .call("read_file", json!({"path": "/etc/shadow"}))
        .call("read_file", json!({"path": "docs/notes..v2.md"}))
        .answer("Async traits are stable; the notes are summarized.");
    let researcher = Agent::builder("Researcher")
        .goal("Answer questions from the web and the workspace")
        .tool(web_search)
        .tool(read_file)
        .llm(transcript.model("Researcher", Arc::new(model)))
        .build();
    let task = Task::builder("Research {topic}").agent(&researcher).build();
    let crew = Crew::builder().agent(researcher).task(task).build()?;
    transcript.attach(&crew);

    crew.kickoff_blocking([("topic", "async traits in Rust")])?;
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
    fn bad_inputs_are_blocked_and_queries_cleaned() {
        let lines = super::run().expect("the example runs");
        assert_has_lines(
            &lines,
            &[
                "[Researcher] model asks: web_search {\"query\":\"ab\"}",
                "    PRE_TOOL_CALL  blocked the call: search query too short [source: input-validation] (1 hook ran)",
                "[Researcher] model asks: web_search {\"query\":\"  Rust ASYNC Traits  \"}",
                "    tool web_search runs with {\"query\":\"rust async traits\"}",
                "[Researcher] agent saw: 3 results for \"rust async traits\"",
                "    PRE_TOOL_CALL  blocked the call: invalid file path \"../../etc/passwd\" [source: input-validation] (1 hook ran)",
                "    PRE_TOOL_CALL  blocked the call: invalid file path \"/etc/shadow\" [source: input-validation] (1 hook ran)",
                "[Researcher] agent saw: Tool execution blocked by hook. Tool: read_file",
                "    tool read_file runs with {\"path\":\"docs/notes..v2.md\"}",
                "[Researcher] agent saw: contents of docs/notes..v2.md",
            ],
        );
        let ran = lines.iter().filter(|l| l.contains(" runs with ")).count();
        assert_eq!(ran, 2, "{lines:#?}");
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
