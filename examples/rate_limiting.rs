//! Rate limiting: at most 10 calls of each tool per sliding minute.
//!
//! `cargo run --example rate_limiting`
//!
//! The model asks for 15 `get_quote` calls in a single turn; the runtime
//! runs them concurrently. The limiter checks and records each call under
//! one lock, so however the threads interleave exactly 10 calls run and 5
//! are refused with `rate limit exceeded for get_quote`. Which 5 depends on
//! which threads get there first. Another tool has a window of its own.

use std::collections::{HashMap, VecDeque};
use std::error::Error;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crew_runtime::DEFAULT_MAX_CONCURRENT_TOOL_CALLS;
use crew_runtime::prelude::*;
use crew_runtime::runtime::blocked_message;
use crew_runtime::schemars::JsonSchema;
use crew_runtime::serde::Deserialize;
use crew_runtime::{ScriptedCall, transcript::Transcript};

/// Calls allowed per tool within [`WINDOW`].
const LIMIT: usize = 10;
/// The sliding window.
const WINDOW: Duration = Duration::from_secs(60);

/// When each tool was last let through, oldest first.
static CALL_HISTORY: LazyLock<Mutex<HashMap<String, VecDeque<Instant>>>> =
    LazyLock::new(Mutex::default);

/// The guide's limiter. Forgetting old entries, checking the count and
/// recording the call all happen under one lock: checking under one lock and
/// recording under another would let concurrent calls slip past the limit.
#[on(PRE_TOOL_CALL)]
fn rate_limit_tools(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
    let now = Instant::now();
    let mut history = CALL_HISTORY.lock().unwrap_or_else(PoisonError::into_inner);
    let calls = history.entry(ctx.tool_name().to_owned()).or_default();
    while calls
        .front()
        .is_some_and(|&then| now.duration_since(then) >= WINDOW)
    {
        calls.pop_front();
    }
    if calls.len() >= LIMIT {
        return Err(HookAborted::new(
            format!("rate limit exceeded for {}", ctx.tool_name()),
            "rate-limiter",
        ));
    }
    calls.push_back(now);
    Ok(())
}

#[derive(Deserialize, JsonSchema)]
#[serde(crate = "crew_runtime::serde")]
#[schemars(crate = "crew_runtime::schemars")]
struct QuoteArgs {
    /// A ticker symbol.
    symbol: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(crate = "crew_runtime::serde")]
#[schemars(crate = "crew_runtime::schemars")]
struct NewsArgs {
    /// A topic.
    topic: String,
}

const SYMBOLS: [&str; 15] = [
    "AAPL", "MSFT", "GOOG", "AMZN", "META", "NVDA", "TSLA", "ORCL", "INTC", "AMD", "IBM", "CSCO",
    "ADBE", "CRM", "QCOM",
];

fn run() -> Result<Vec<String>, Box<dyn Error>> {
    // Events of 15 concurrent calls arrive in any order: keep them for the
    // summary instead of writing a line each.
    let transcript = Transcript::new().quiet_events();

    // The tool counts its own runs: the proof of how many got through.
    let quotes_served = Arc::new(AtomicUsize::new(0));
    let served = quotes_served.clone();
    let get_quote = Tool::typed("get_quote", "Gets a stock quote", move |args: QuoteArgs| {
        served.fetch_add(1, Ordering::SeqCst);
        Ok::<_, String>(format!("{}: 123.45 USD", args.symbol))
    });
    let get_news = Tool::typed("get_news", "Gets news on a topic", |args: NewsArgs| {
        Ok::<_, String>(format!("no big news on {}", args.topic))
    });

    let quotes = SYMBOLS.map(|symbol| ScriptedCall::new("get_quote", json!({"symbol": symbol})));
    let model = ScriptedLlm::new()
        .calls(quotes)
        .call("get_news", json!({"topic": "markets"}))
        .answer("Ten quotes came back; five calls hit the rate limit.");
    let analyst = Agent::builder("Analyst")
        .goal("Report on tech stocks")
        .tool(get_quote)
        .tool(get_news)
        .llm(transcript.model("Analyst", Arc::new(model)))
        .build();
    let task = Task::builder("Report on 15 tech stocks")
        .agent(&analyst)
        .build();
    let crew = Crew::builder().agent(analyst).task(task).build()?;
    transcript.attach(&crew);

    transcript.line(format!(
        "limit: {LIMIT} calls per tool per {WINDOW:?}; up to \
         {DEFAULT_MAX_CONCURRENT_TOOL_CALLS} calls of one turn run at once"
    ));
    crew.kickoff_blocking(())?;

    // The summary, from the events and the tool's own counter.
    let dispatches = transcript.dispatches();
    for tool in ["get_quote", "get_news"] {
        let pre: Vec<_> = dispatches
            .iter()
            .filter(|d| d.tool_name.as_deref() == Some(tool) && d.point == PRE_TOOL_CALL)
            .collect();
        let blocked: Vec<_> = pre.iter().filter(|d| d.outcome == "aborted").collect();
        let why = blocked
            .first()
            .map(|d| {
                let reason = d.abort_reason.as_deref().unwrap_or_default();
                let source = d.abort_source.as_deref().unwrap_or_default();
                format!(" ({reason} [source: {source}])")
            })
            .unwrap_or_default();
        transcript.line(format!(
            "{tool}: {} let through, {} blocked{why}",
            pre.len() - blocked.len(),
            blocked.len()
        ));
    }
    transcript.line(format!(
        "the get_quote tool itself ran {} times",
        quotes_served.load(Ordering::SeqCst)
    ));
    let blocked = blocked_message("get_quote");
    let told = transcript
        .lines()
        .iter()
        .filter(|line| line.starts_with("[Analyst] agent saw") && line.ends_with(&blocked))
        .count();
    transcript.line(format!("the agent was told \"{blocked}\" {told} times"));
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
    fn exactly_ten_of_fifteen_concurrent_calls_run() {
        let lines = super::run().expect("the example runs");
        assert_has_lines(
            &lines,
            &[
                "[Analyst] model asks for 15 tool calls in one turn (they run concurrently):",
                "get_quote: 10 let through, 5 blocked (rate limit exceeded for get_quote [source: rate-limiter])",
                "get_news: 1 let through, 0 blocked",
                "the get_quote tool itself ran 10 times",
                "the agent was told \"Tool execution blocked by hook. Tool: get_quote\" 5 times",
            ],
        );
        let served = lines
            .iter()
            .filter(|l| l.starts_with("[Analyst] agent saw (call_") && l.ends_with(": 123.45 USD"))
            .count();
        assert_eq!(served, 10, "{lines:#?}");
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
