//! Tool usage analytics: how often each tool is called and how long calls
//! take, measured by a PRE and a POST hook working together.
//!
//! `cargo run --example tool_analytics`
//!
//! The PRE hook stashes a start time in `ctx.tool_input` under `_start_ns`;
//! the POST hook of the same call takes it out again (PRE and POST share one
//! context) and adds the elapsed time to per-tool statistics. Tools ignore
//! keys they do not declare, so the stash never bothers them.

use std::collections::BTreeMap;
use std::error::Error;
use std::process::ExitCode;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::thread::sleep;
use std::time::{Duration, Instant};

use crew_examples::Transcript;
use crew_runtime::prelude::*;
use crew_runtime::schemars::JsonSchema;
use crew_runtime::serde::Deserialize;

/// The stash key. The leading `_` marks it as the hooks' own, not an
/// argument of any tool.
const START_KEY: &str = "_start_ns";

/// Times are nanoseconds since this instant: JSON holds a `u64`, not an
/// `Instant`.
static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

/// One tool's numbers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct ToolStats {
    count: u64,
    total: Duration,
}

/// Per tool, sorted by name. A `Mutex`: calls of one turn run concurrently.
static TOOL_STATS: Mutex<BTreeMap<String, ToolStats>> = Mutex::new(BTreeMap::new());

fn now_ns() -> u64 {
    // u64 nanoseconds cover 584 years of uptime.
    u64::try_from(EPOCH.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// Runs first (`order = -100`), so the time covers every later hook too.
#[on(PRE_TOOL_CALL, order = -100)]
fn start_timer(ctx: &mut ToolCallHookContext) {
    ctx.tool_input.insert(START_KEY.to_owned(), json!(now_ns()));
}

/// Takes the stash out and counts the call. POST hooks also run for blocked
/// calls, so blocked attempts are counted too.
#[on(POST_TOOL_CALL)]
fn track_tool_usage(ctx: &mut ToolCallHookContext) {
    let now = now_ns();
    let start = ctx
        .tool_input
        .remove(START_KEY)
        .and_then(|start| start.as_u64())
        .unwrap_or(now);
    let mut stats = TOOL_STATS.lock().unwrap_or_else(PoisonError::into_inner);
    let entry = stats.entry(ctx.tool_name().to_owned()).or_default();
    entry.count += 1;
    entry.total += Duration::from_nanos(now.saturating_sub(start));
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
    // The stash changes on every run: show it without its value.
    let transcript = Transcript::new().mask_input(START_KEY);

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

    crew.kickoff(())?;

    transcript.line("");
    transcript.line("tool usage, from the hooks' statistics:");
    transcript.line(format!(
        "  {:<12}{:>6}{:>12}{:>12}",
        "tool", "calls", "total", "mean"
    ));
    for (tool, stats) in tool_stats() {
        let mean = stats.total / u32::try_from(stats.count).unwrap_or(u32::MAX).max(1);
        transcript.line(format!(
            "  {tool:<12}{:>6}{:>12}{:>12}",
            stats.count,
            format!("{:.1?}", stats.total),
            format!("{mean:.1?}")
        ));
    }
    Ok(transcript.lines())
}

fn main() -> ExitCode {
    crew_examples::report(run())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_call_is_counted_per_tool() {
        let lines = run().expect("the example runs");
        let counts: Vec<(String, u64)> = tool_stats()
            .into_iter()
            .map(|(tool, stats)| (tool, stats.count))
            .collect();
        assert_eq!(
            counts,
            [
                ("read_page".to_owned(), 2),
                ("summarize".to_owned(), 1),
                ("web_search".to_owned(), 3),
            ]
        );
        // The stash travels with the call, and the tool still gets its query.
        let expected = "    tool web_search runs with {\"_start_ns\":\"…\",\"query\":\"rust\"}";
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
