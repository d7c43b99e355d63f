//! Legacy attributes: `#[before_tool_call]` and `#[after_tool_call]`, bare
//! and filtered, mixed with `#[on]` in one ordered chain per point.
//!
//! `cargo run --example legacy_decorators`
//!
//! Both styles register on the same engine. A legacy before hook blocks by
//! returning `Some(false)` (or `false`); telemetry then reports the reason
//! `before_tool_call hook returned False` and the hook's name as source.
//! Link-time hooks run sorted by `order = N` (default 0), then module path,
//! then position in the file: `log_tool_call` is written after
//! `block_dangerous_tools` but runs first, because of its `order = -10`.
//! `get_hooks` and `explain` show the order before anything runs.

use std::error::Error;
use std::process::ExitCode;
use std::sync::Arc;

use crew_runtime::explain;
use crew_runtime::prelude::*;
use crew_runtime::schemars::JsonSchema;
use crew_runtime::serde::Deserialize;
use crew_runtime::transcript::{describe_hook, note};
use crew_runtime::{InterceptionPoint, get_hooks, transcript::Transcript};

/// Legacy, bare: every tool. `None` lets the call go on.
#[before_tool_call]
fn block_dangerous_tools(ctx: &ToolCallHookContext) -> Option<bool> {
    note(ctx, "PRE  block_dangerous_tools");
    matches!(ctx.tool_name(), "delete_database" | "drop_table").then_some(false)
}

/// `#[on]`, placed first by its order although it is written second.
#[on(PRE_TOOL_CALL, order = -10)]
fn log_tool_call(ctx: &mut ToolCallHookContext) {
    note(ctx, format!("PRE  log_tool_call: {}", ctx.tool_name()));
}

/// Legacy, filtered: a plain `bool`, `false` blocks.
#[before_tool_call(tools = ["web_search"], order = 5)]
fn require_query(ctx: &ToolCallHookContext) -> bool {
    note(ctx, "PRE  require_query");
    ctx.tool_input
        .get("query")
        .and_then(Value::as_str)
        .is_some_and(|query| !query.trim().is_empty())
}

/// `#[on]` after the legacy hooks: only reached when none of them blocked.
#[on(PRE_TOOL_CALL, tools = ["web_search"], order = 10)]
fn trim_query(ctx: &mut ToolCallHookContext) {
    note(ctx, "PRE  trim_query");
    if let Some(query) = ctx.tool_input.get_mut("query")
        && let Some(text) = query.as_str()
    {
        *query = json!(text.trim());
    }
}

/// Legacy after hook, filtered by tool and agent, as the guide writes it.
#[after_tool_call(tools = ["web_search"], agents = ["Researcher"])]
fn sanitize_results(ctx: &ToolCallHookContext) -> Option<String> {
    note(ctx, "POST sanitize_results");
    let result = ctx.tool_result.as_deref()?;
    result
        .to_lowercase()
        .contains("password")
        .then(|| result.replace("password", "[REDACTED]"))
}

/// `#[on]` after the legacy after hook: it sees the replaced result.
#[on(POST_TOOL_CALL, order = 10)]
fn measure_result(ctx: &mut ToolCallHookContext) {
    let length = ctx.tool_result.as_deref().map_or(0, str::len);
    note(ctx, format!("POST measure_result: {length} characters"));
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
struct TableArgs {
    /// The table.
    table: String,
}

fn run() -> Result<Vec<String>, Box<dyn Error>> {
    let transcript = Transcript::new();

    // The chains as registered: one list per point, both styles mixed.
    for point in [
        InterceptionPoint::PRE_TOOL_CALL,
        InterceptionPoint::POST_TOOL_CALL,
    ] {
        transcript.line(format!("get_hooks({point}):"));
        for (position, hook) in get_hooks(point).iter().enumerate() {
            transcript.line(format!("  {}. {}", position + 1, describe_hook(hook)));
        }
    }
    // Which of them a call would meet, and which filter skips the others.
    for tool in ["web_search", "drop_table"] {
        transcript.line(format!("explain({tool}, Researcher):"));
        let explanation = explain(tool, Some("Researcher")).to_string();
        for line in explanation.lines().skip(1) {
            transcript.line(format!("  {line}"));
        }
    }
    transcript.line("");

    let web_search = Tool::typed("web_search", "Searches the web", |args: SearchArgs| {
        Ok::<_, String>(format!("{}: use a password manager", args.query))
    });
    let drop_table = Tool::typed("drop_table", "Drops a table", |args: TableArgs| {
        Ok::<_, String>(format!("dropped {}", args.table))
    });
    let model = ScriptedLlm::new()
        .call("web_search", json!({"query": "  password policy  "}))
        .call("web_search", json!({"query": "   "}))
        .call("drop_table", json!({"table": "users"}))
        .answer("Use a password manager.");
    let researcher = Agent::builder("Researcher")
        .goal("Write the security guidelines")
        .tool(web_search)
        .tool(drop_table)
        .llm(transcript.model("Researcher", Arc::new(model)))
        .build();
    let task = Task::builder("Research password policies")
        .agent(&researcher)
        .build();
    let crew = Crew::builder().agent(researcher).task(task).build()?;
    transcript.attach(&crew);

    crew.kickoff_blocking(())?;
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
    fn both_styles_share_one_ordered_chain() {
        let explained = explain("web_search", Some("Researcher"));
        assert_eq!(
            explained.running(PRE_TOOL_CALL),
            [
                "log_tool_call",
                "block_dangerous_tools",
                "require_query",
                "trim_query"
            ]
        );
        assert_eq!(
            explained.running(POST_TOOL_CALL),
            ["sanitize_results", "measure_result"]
        );
        let other_agent = explain("web_search", Some("Writer"));
        assert_eq!(other_agent.running(POST_TOOL_CALL), ["measure_result"]);
    }

    #[test]
    fn legacy_blocks_report_the_legacy_reason() {
        let lines = run().expect("the example runs");
        let in_order = [
            "[Researcher] model asks: web_search {\"query\":\"  password policy  \"}",
            "    PRE  log_tool_call: web_search",
            "    PRE  block_dangerous_tools",
            "    PRE  require_query",
            "    PRE  trim_query",
            "    PRE_TOOL_CALL  let the call through (4 hooks ran)",
            "    tool web_search runs with {\"query\":\"password policy\"}",
            "    POST sanitize_results",
            "    POST measure_result: 43 characters",
            "    POST_TOOL_CALL replaced the result (2 hooks ran)",
            "[Researcher] agent saw: [REDACTED] policy: use a [REDACTED] manager",
            "[Researcher] model asks: web_search {\"query\":\"   \"}",
            "    PRE  log_tool_call: web_search",
            "    PRE  block_dangerous_tools",
            "    PRE  require_query",
            "    PRE_TOOL_CALL  blocked the call: before_tool_call hook returned False [source: require_query] (3 hooks ran)",
            "    POST sanitize_results",
            "[Researcher] model asks: drop_table {\"table\":\"users\"}",
            "    PRE  log_tool_call: drop_table",
            "    PRE  block_dangerous_tools",
            "    PRE_TOOL_CALL  blocked the call: before_tool_call hook returned False [source: block_dangerous_tools] (2 hooks ran)",
            "[Researcher] agent saw: Tool execution blocked by hook. Tool: drop_table",
        ];
        assert_lines_in_order(&lines, &in_order);
    }

    /// Panics unless the `expected` lines appear among `lines` in this
    /// order (others may stand between them), showing them all.
    #[track_caller]
    fn assert_lines_in_order(lines: &[String], expected: &[&str]) {
        let mut rest = lines.iter();
        for wanted in expected {
            assert!(
                rest.any(|line| line == wanted),
                "missing (in order) {wanted:?} in {lines:#?}"
            );
        }
    }
}
