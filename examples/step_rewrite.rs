//! Step rewrite: hooks around each task of a crew, not only around its
//! tool calls.
//!
//! `cargo run --example step_rewrite`
//!
//! Three agents work in turn: a Researcher lists findings, a Reviewer
//! checks them, a Writer turns them into a short note. Each agent's model
//! signs its answers ("-- Researcher bot, sent from the lab"), and the
//! Writer should only work from the strongest findings.
//!
//! - `POST_STEP` runs after each task, before its output is stored.
//!   `strip_signature` returns the output without its sign-off, and that
//!   replacement is what every later step sees: the context text of the
//!   tasks that depend on it, and the crew's output.
//! - `PRE_STEP` runs before each task, with the context text the agent is
//!   about to be given. `trim_context` (`agents = ["Writer"]`) keeps the
//!   first three findings for the Writer only; the Reviewer, reading the
//!   same research, still gets all of them.
//!
//! The proof is in the models' recorded prompts: what each agent was given.

use std::error::Error;
use std::process::ExitCode;
use std::sync::Arc;

use crew_runtime::llm::Role;
use crew_runtime::prelude::*;
use crew_runtime::transcript::note;
use crew_runtime::{ChatMessage, InterceptionPoint, StepContext, transcript::Transcript};

/// How many findings the Writer is given.
const WRITER_FINDINGS: usize = 3;

/// Where the task prompt puts the context text, and where that ends.
const CONTEXT_START: &str = "This is the context you're working with:\n";
const CONTEXT_END: &str = "\n\nBegin!";

/// Every task's output loses its trailing `-- ` sign-off line.
#[on(POST_STEP)]
fn strip_signature(ctx: &mut StepContext) -> Option<String> {
    let (body, last_line) = ctx.payload.trim_end().rsplit_once('\n')?;
    let signature = last_line.trim();
    if !signature.starts_with("-- ") {
        return None;
    }
    let role = ctx.agent_role().unwrap_or("an agent");
    note(
        ctx,
        format!("strip_signature: removed {signature:?} from {role}'s output"),
    );
    Some(body.trim_end().to_owned())
}

/// The Writer gets the first findings only (bullet lines past the limit go;
/// every other line stays).
#[on(PRE_STEP, agents = ["Writer"])]
fn trim_context(ctx: &mut StepContext) -> Option<String> {
    let findings = ctx.payload.lines().filter(|l| is_finding(l)).count();
    if findings <= WRITER_FINDINGS {
        return None;
    }
    let mut seen = 0;
    let trimmed: Vec<&str> = ctx
        .payload
        .lines()
        .filter(|line| {
            seen += usize::from(is_finding(line));
            !is_finding(line) || seen <= WRITER_FINDINGS
        })
        .collect();
    note(
        ctx,
        format!("trim_context: kept {WRITER_FINDINGS} of {findings} findings"),
    );
    Some(trimmed.join("\n"))
}

fn is_finding(line: &str) -> bool {
    line.starts_with("- ")
}

/// The context text a task prompt carries (empty when it has none).
fn context_of(prompt: &str) -> &str {
    let Some((_, rest)) = prompt.split_once(CONTEXT_START) else {
        return "";
    };
    rest.split_once(CONTEXT_END)
        .map_or(rest, |(context, _)| context)
}

/// The task prompt of a conversation (its first user message).
fn task_prompt(messages: &[ChatMessage]) -> &str {
    messages
        .iter()
        .find(|m| m.role == Role::User)
        .map_or("", |m| m.content.as_str())
}

fn run() -> Result<Vec<String>, Box<dyn Error>> {
    let transcript = Transcript::new();

    let research_model = Arc::new(ScriptedLlm::new().answer(
        "Findings on error handling in Rust:\n\
         - Errors are values: `Result<T, E>` is a plain enum.\n\
         - `?` returns early with the error, converting it with `From`.\n\
         - `thiserror` derives error enums for libraries.\n\
         - `anyhow` gives applications one error type with context.\n\
         - Panics are for bugs, not for expected failures.\n\
         \n\
         -- Researcher bot, sent from the lab",
    ));
    // The other two answer from the context they are given.
    let review_model = Arc::new(ScriptedLlm::new().answer_with(|request| {
        let checked = context_of(task_prompt(request.messages))
            .lines()
            .filter(|l| is_finding(l))
            .count();
        format!("All {checked} findings check out.\n-- Reviewer bot")
    }));
    let write_model = Arc::new(ScriptedLlm::new().answer_with(|request| {
        let points: Vec<&str> = context_of(task_prompt(request.messages))
            .lines()
            .filter_map(|l| l.strip_prefix("- "))
            .collect();
        format!(
            "Rust error handling in {} points: {}\n-- Writer bot",
            points.len(),
            points.join(" ")
        )
    }));

    let agent = |role: &str, model: &Arc<ScriptedLlm>| {
        Agent::builder(role)
            .llm(transcript.model(role, model.clone()))
            .build()
    };
    let researcher = agent("Researcher", &research_model);
    let reviewer = agent("Reviewer", &review_model);
    let writer = agent("Writer", &write_model);
    let research = Task::builder("Research {topic}").agent(&researcher).build();
    let review = Task::builder("Check the findings on {topic}")
        .agent(&reviewer)
        .context([&research])
        .build();
    let write = Task::builder("Write a short note on {topic}")
        .agent(&writer)
        .context([&research])
        .build();
    let crew = Crew::builder()
        .agents([researcher, reviewer, writer])
        .tasks([research, review, write])
        .build()?;
    transcript.attach(&crew);

    let output = crew.kickoff_blocking([("topic", "error handling in Rust")])?;

    let dispatches = transcript.dispatches();
    for point in [InterceptionPoint::PRE_STEP, InterceptionPoint::POST_STEP] {
        let agents: Vec<&str> = dispatches
            .iter()
            .filter(|d| d.point == point)
            .filter_map(|d| d.agent_role.as_deref())
            .collect();
        transcript.line(format!("{point} hooks ran for: {}", agents.join(", ")));
    }
    transcript.line("");
    transcript.line("The context each agent was given (from its model's recorded prompt):");
    for (role, model) in [("Reviewer", &review_model), ("Writer", &write_model)] {
        transcript.line(format!("  {role}:"));
        let requests = model.requests();
        let prompt = requests.first().and_then(|r| r.task_prompt()).unwrap_or("");
        for line in context_of(prompt).lines() {
            transcript.line(format!("    | {line}"));
        }
    }
    transcript.line("");
    transcript.line("The crew's output, task by task:");
    for task in &output.tasks_output[..output.tasks_output.len().saturating_sub(1)] {
        let last_line = task.raw.lines().last().unwrap_or_default();
        transcript.line(format!("  {}: ends with {last_line:?}", task.agent));
    }
    transcript.line(format!("final output: {output}"));
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
    fn outputs_lose_their_signature_and_only_the_writer_is_trimmed() {
        let lines = super::run().expect("the example runs");
        assert_lines_in_order(
            &lines,
            &[
                "[Researcher]   -- Researcher bot, sent from the lab",
                "    strip_signature: removed \"-- Researcher bot, sent from the lab\" from Researcher's output",
                "    POST_STEP      replaced the output (1 hook ran)",
                "[Reviewer] model answers: All 5 findings check out.",
                "    trim_context: kept 3 of 5 findings",
                "    PRE_STEP       replaced the context (1 hook ran)",
                "[Writer] task: Write a short note on error handling in Rust",
                // From the dispatch events: the filter kept the others out.
                "PRE_STEP hooks ran for: Writer",
                "POST_STEP hooks ran for: Researcher, Reviewer, Writer",
                // The Reviewer's context: all five findings, no signature.
                "  Reviewer:",
                "    | - Panics are for bugs, not for expected failures.",
                "The crew's output, task by task:",
            ],
        );
        assert_has_lines(
            &lines,
            &[
                "  Researcher: ends with \"- Panics are for bugs, not for expected failures.\"",
                "  Reviewer: ends with \"All 5 findings check out.\"",
                "final output: Rust error handling in 3 points: Errors are values: `Result<T, E>` \
                 is a plain enum. `?` returns early with the error, converting it with `From`. \
                 `thiserror` derives error enums for libraries.",
            ],
        );
        // The Writer's context, whole: three findings and nothing after.
        let writer = lines.iter().position(|l| l == "  Writer:");
        let writer = writer.expect("the Writer's context is shown") + 1;
        assert_eq!(
            lines[writer..writer + 5],
            [
                "    | Findings on error handling in Rust:",
                "    | - Errors are values: `Result<T, E>` is a plain enum.",
                "    | - `?` returns early with the error, converting it with `From`.",
                "    | - `thiserror` derives error enums for libraries.",
                "",
            ]
        );
        assert!(
            !lines
                .iter()
                .any(|l| l.starts_with("    | ") && l.contains("-- ")),
            "a signature reached a context: {lines:#?}"
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
