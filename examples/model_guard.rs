//! Model guard: hooks around every model call, not only around tools.
//!
//! `cargo run --example model_guard`
//!
//! An agent stuck in a loop keeps asking its model for the same search and
//! never answers. Its own `max_iter` has been lifted, so nothing in the
//! runtime would stop it: the scripted plan is a thousand identical
//! searches. Two model-call hooks keep it in line:
//!
//! - `PRE_MODEL_CALL` runs before every call. `cap_model_calls` blocks the
//!   call once the task has used its budget: the run ends with
//!   `CrewError::AbortedAt { point: PRE_MODEL_CALL, .. }` carrying the
//!   reason and the source (`loop-guard`). `remind_budget` edits the
//!   messages in place; what it leaves is what the model receives, so the
//!   model is told how many calls it has left (one reminder, kept up to
//!   date, not one more per turn: messages PRE hooks leave stay in the
//!   conversation).
//! - `POST_MODEL_CALL` runs after every call, before any tool call the
//!   model asked for is dispatched. `drop_forbidden_calls` removes the
//!   calls of tools the policy forbids: they never reach a PRE_TOOL_CALL
//!   hook or the tool, and the conversation keeps only the calls that ran.

use std::error::Error;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crew_runtime::llm::Role;
use crew_runtime::normalize_tool_name;
use crew_runtime::prelude::*;
use crew_runtime::transcript::note;
use crew_runtime::{ChatMessage, ScriptedCall, transcript::Transcript};

/// Model calls a task may make.
const MAX_MODEL_CALLS: usize = 4;
/// Tools the model may ask for but the policy never lets run.
const FORBIDDEN_TOOLS: [&str; 1] = ["send_email"];
/// How the reminder starts, so the hook finds the one it left before.
const BUDGET_PREFIX: &str = "Model-call budget:";

/// Runs first: a blocked call needs no reminder.
#[on(PRE_MODEL_CALL, order = -10)]
fn cap_model_calls(ctx: &mut LlmCallHookContext) -> Result<(), HookAborted> {
    if ctx.iterations > MAX_MODEL_CALLS {
        let role = ctx.agent_role().unwrap_or("the agent");
        return Err(HookAborted::new(
            format!(
                "{role} used its {MAX_MODEL_CALLS} model calls for this task without answering"
            ),
            "loop-guard",
        ));
    }
    Ok(())
}

/// Keeps one system message up to date with the calls left.
#[on(PRE_MODEL_CALL)]
fn remind_budget(ctx: &mut LlmCallHookContext) {
    let left = (MAX_MODEL_CALLS + 1).saturating_sub(ctx.iterations);
    let reminder = ChatMessage::system(format!(
        "{BUDGET_PREFIX} {left} of {MAX_MODEL_CALLS} calls left. Give your final answer before \
         they run out."
    ));
    let previous = ctx
        .messages
        .iter()
        .position(|m| m.role == Role::System && m.content.starts_with(BUDGET_PREFIX));
    match previous {
        Some(index) => ctx.messages[index] = reminder,
        // Right after the agent's own system message.
        None => ctx.messages.insert(1.min(ctx.messages.len()), reminder),
    }
}

/// Drops the tool calls the policy forbids before they are dispatched. (A
/// turn left with no call at all would count as the model's final answer.)
#[on(POST_MODEL_CALL)]
fn drop_forbidden_calls(ctx: &mut LlmCallHookContext) {
    let Some(response) = ctx.response.as_mut() else {
        return;
    };
    let mut dropped = Vec::new();
    response.tool_calls.retain(|call| {
        let forbidden = FORBIDDEN_TOOLS.contains(&normalize_tool_name(&call.name).as_str());
        if forbidden {
            dropped.push(format!("{} ({})", call.name, call.id));
        }
        !forbidden
    });
    for call in dropped {
        note(
            ctx,
            format!("drop_forbidden_calls: dropped {call}, the policy forbids it"),
        );
    }
}

fn run() -> Result<Vec<String>, Box<dyn Error>> {
    let transcript = Transcript::new();

    // Each tool counts its own runs: the proof of what really ran.
    let searches = Arc::new(AtomicUsize::new(0));
    let emails = Arc::new(AtomicUsize::new(0));
    let query = json!({"type": "object", "properties": {"query": {"type": "string"}}});
    let counted = searches.clone();
    let web_search = Tool::dynamic("web_search", "Searches the web", query, move |args| {
        counted.fetch_add(1, Ordering::SeqCst);
        Ok::<_, String>(json!(format!("no new results for {}", args["query"])))
    });
    let mail = json!({"type": "object", "properties": {"to": {"type": "string"}}});
    let counted = emails.clone();
    let send_email = Tool::dynamic("send_email", "Sends an e-mail", mail, move |_| {
        counted.fetch_add(1, Ordering::SeqCst);
        Ok::<_, String>(json!("sent"))
    });

    // A runaway plan: a search plus an e-mail, then the same search a
    // thousand times, and never an answer.
    let search = ScriptedCall::new("web_search", json!({"query": "rust release date"}));
    let model = (0..1000).fold(
        ScriptedLlm::new().calls([
            search.clone(),
            ScriptedCall::new("send_email", json!({"to": "boss@example.com"})),
        ]),
        |model, _| model.calls([search.clone()]),
    );
    let model = Arc::new(model);
    let researcher = Agent::builder("Researcher")
        .goal("Find when the next Rust release ships")
        .tool(web_search)
        .tool(send_email)
        .max_iter(usize::MAX)
        .llm(transcript.model("Researcher", model.clone()))
        .build();
    let task = Task::builder("Find the next Rust release date")
        .agent(&researcher)
        .build();
    let crew = Crew::builder().agent(researcher).task(task).build()?;
    transcript.attach(&crew);

    match crew.kickoff_blocking(()) {
        Ok(output) => transcript.line(format!("final output: {output}")),
        Err(error) => {
            transcript.line(format!("kickoff failed: {error}"));
            let point = error.aborted_at().map_or("-", |point| point.as_str());
            let source = error.abort().map_or("-", |abort| abort.source.as_str());
            transcript.line(format!("  stopped at {point}, by {source}"));
        }
    }

    transcript.line("");
    transcript.line("What the model received (from its recorded requests):");
    let requests = model.requests();
    for (number, request) in requests.iter().enumerate() {
        let reminders: Vec<&str> = request
            .messages
            .iter()
            .filter(|m| m.role == Role::System && m.content.starts_with(BUDGET_PREFIX))
            .map(|m| m.content.as_str())
            .collect();
        transcript.line(format!(
            "  request {}: {}",
            number + 1,
            reminders.join(" | ")
        ));
    }
    if let Some(second) = requests.get(1) {
        let asked: Vec<&str> = second
            .messages
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .flat_map(|m| m.tool_calls.iter().map(|call| call.name.as_str()))
            .collect();
        transcript.line(format!(
            "  the conversation keeps of the first turn the calls: {}",
            asked.join(", ")
        ));
    }
    transcript.line(format!(
        "model calls made: {}; turns left unplayed in the plan: {}",
        model.asked(),
        model.remaining()
    ));
    transcript.line(format!(
        "web_search ran {} times; send_email ran {} times",
        searches.load(Ordering::SeqCst),
        emails.load(Ordering::SeqCst)
    ));
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
    fn the_cap_ends_the_run_and_the_forbidden_call_never_runs() {
        let lines = super::run().expect("the example runs");
        assert_lines_in_order(
            &lines,
            &[
                "[Researcher] model asks for 2 tool calls in one turn (they run concurrently):",
                "    drop_forbidden_calls: dropped send_email (call_2), the policy forbids it",
                "    tool web_search runs with {\"query\":\"rust release date\"}",
                "    PRE_MODEL_CALL blocked the call: Researcher used its 4 model calls for this task \
                 without answering [source: loop-guard] (1 hook ran)",
                "kickoff failed: the run was stopped at PRE_MODEL_CALL (agent `Researcher`): hook \
                 aborted by loop-guard: Researcher used its 4 model calls for this task without \
                 answering",
                "  stopped at PRE_MODEL_CALL, by loop-guard",
            ],
        );
        // The reminder is what the model received, one per request, counting down.
        assert_has_lines(
            &lines,
            &[
                "  request 1: Model-call budget: 4 of 4 calls left. Give your final answer before they run out.",
                "  request 4: Model-call budget: 1 of 4 calls left. Give your final answer before they run out.",
                "  the conversation keeps of the first turn the calls: web_search",
                "model calls made: 4; turns left unplayed in the plan: 997",
                "web_search ran 4 times; send_email ran 0 times",
            ],
        );
        assert!(
            !lines.iter().any(|l| l.starts_with("  request 5")),
            "{lines:#?}"
        );
        assert!(
            !lines.iter().any(|l| l.contains("tool send_email runs")),
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
