//! Tool usage analytics: how often each tool is called and how long calls
//! take, measured by a PRE and a POST hook working together.
//!
//! `cargo run --example tool_analytics`
//!
//! The PRE hook stashes the call's start time in `ctx.extensions`, a typed
//! map that the PRE and POST hooks of one call share; the POST hook of the
//! same call takes it out again and adds the elapsed time to per-tool
//! statistics. The stash is an `Instant`, not a number dressed up as JSON,
//! and it never reaches the tool, the model or the events: the tool
//! receives exactly the arguments the model sent.
//!
//! The guide stashes the time in the tool's arguments instead
//! (`tool_input['_start_time']`). That still works, since tools ignore keys
//! they do not declare, but the key then travels with the call:
//!
//! ```text
//! ctx.tool_input.insert("_start_ns".into(), json!(now_ns)); // PRE
//! let start = ctx.tool_input.remove("_start_ns");           // POST
//! ```

use std::collections::BTreeMap;
use std::error::Error;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::sleep;
use std::time::{Duration, Instant};

use crew_runtime::prelude::*;
use crew_runtime::schemars::JsonSchema;
use crew_runtime::serde::Deserialize;
use crew_runtime::transcript::Transcript;

/// When a call started: the value the PRE hook leaves for the POST hook.
/// Its own type, so no other hook's `Instant` can be taken for it.
struct CallStarted(Instant);

/// One tool's numbers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct ToolStats {
    count: u64,
    /// Calls whose POST hook found the PRE hook's start time.
    timed: u64,
    total: Duration,
}

/// Per tool, sorted by name. A `Mutex`: calls of one turn run concurrently.
static TOOL_STATS: Mutex<BTreeMap<String, ToolStats>> = Mutex::new(BTreeMap::new());

/// Runs first (`order = -100`), so the time covers every later hook too.
#[on(PRE_TOOL_CALL, order = -100)]
fn start_timer(ctx: &mut ToolCallHookContext) {
    ctx.extensions.insert(CallStarted(Instant::now()));
}

/// Takes the stash out and counts the call. POST hooks also run for blocked
/// calls, so blocked attempts are counted too.
#[on(POST_TOOL_CALL)]
fn track_tool_usage(ctx: &mut ToolCallHookContext) {
    let started = ctx.extensions.remove::<CallStarted>();
    let mut stats = TOOL_STATS.lock().unwrap_or_else(PoisonError::into_inner);
    let entry = stats.entry(ctx.tool_name().to_owned()).or_default();
    entry.count += 1;
    if let Some(CallStarted(start)) = started {
        entry.timed += 1;
        entry.total += start.elapsed();
    }
}

fn tool_stats() -> BTreeMap<String, ToolStats> {
    TOOL_STATS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
}

#[derive(Deserialize, JsonSchema)]
#[serde(crate = "crew_runtime::serde")]
#[schemars(crate = "crew_runtime::schemars")]
struct QueryArgs {
    /// What to look for.
    query: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(crate = "crew_runtime::serde")]
#[schemars(crate = "crew_runtime::schemars")]
struct TextArgs {
    /// The text to work on.
    text: String,
}

fn run() -> Result<Vec<String>, Box<dyn Error>> {
    let transcript = Transcript::new();

    // Tools that take a little time, as real ones do.
    let web_search = Tool::typed("web_search", "Searches the web", |args: QueryArgs| {
        sleep(Duration::from_millis(15));
        Ok::<_, String>(format!("results for {}", args.query))
    });
    let read_page = Tool::typed("read_page", "Reads a web page", |args: QueryArgs| {
        sleep(Duration::from_millis(5));
        Ok::<_, String>(format!("page about {}", args.query))
    });
    let summarize = Tool::typed("summarize", "Summarizes a text", |args: TextArgs| {
        sleep(Duration::from_millis(2));
        Ok::<_, String>(format!("summary of {} characters", args.text.len()))
    });

    let model = ScriptedLlm::new()
        .call("web_search", json!({"query": "rust"}))
        .call("read_page", json!({"query": "rust book"}))
        .call("web_search", json!({"query": "rust async"}))
        .call("read_page", json!({"query": "tokio tutorial"}))
        .call("web_search", json!({"query": "rust embedded"}))
        .call("summarize", json!({"text": "Rust is a systems language."}))
        .answer("Rust: fast, safe, async-ready and embedded-friendly.");
    let researcher = Agent::builder("Researcher")
        .goal("Survey the Rust ecosystem")
        .tool(web_search)
        .tool(read_page)
        .tool(summarize)
        .llm(transcript.model("Researcher", Arc::new(model)))
        .build();
    let task = Task::builder("Survey the Rust ecosystem")
        .agent(&researcher)
        .build();
    let crew = Crew::builder().agent(researcher).task(task).build()?;
    transcript.attach(&crew);

    crew.kickoff_blocking(())?;

    transcript.line("");
    transcript.line("tool usage, from the hooks' statistics:");
    transcript.line(format!(
        "  {:<12}{:>6}{:>7}{:>12}{:>12}",
        "tool", "calls", "timed", "total", "mean"
    ));
    for (tool, stats) in tool_stats() {
        let mean = stats.total / u32::try_from(stats.timed).unwrap_or(u32::MAX).max(1);
        transcript.line(format!(
            "  {tool:<12}{:>6}{:>7}{:>12}{:>12}",
            stats.count,
            stats.timed,
            format!("{:.1?}", stats.total),
            format!("{mean:.1?}")
        ));
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
    use super::*;

    #[test]
    fn every_call_is_counted_per_tool() {
        let lines = run().expect("the example runs");
        // Every POST hook found its own call's start time: counted and timed.
        let counts: Vec<(String, u64, u64)> = tool_stats()
            .into_iter()
            .map(|(tool, stats)| (tool, stats.count, stats.timed))
            .collect();
        assert_eq!(
            counts,
            [
                ("read_page".to_owned(), 2, 2),
                ("summarize".to_owned(), 1, 1),
                ("web_search".to_owned(), 3, 3),
            ]
        );
        // The stash stays with the hooks: the tool gets the model's arguments only.
        let expected = "    tool web_search runs with {\"query\":\"rust\"}";
        assert!(lines.iter().any(|l| l == expected), "{lines:#?}");
        assert!(
            lines
                .iter()
                .any(|l| l == "[Researcher] agent saw: results for rust")
        );
        let rows: Vec<&String> = lines
            .iter()
            .filter(|l| l.starts_with("  web_search ") || l.starts_with("  read_page "))
            .collect();
        assert_eq!(rows.len(), 2, "{lines:#?}");
    }
}
