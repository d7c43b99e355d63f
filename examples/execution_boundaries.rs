//! Execution boundaries: hooks at the edges of a kickoff, around all of
//! its tasks.
//!
//! `cargo run --example execution_boundaries`
//!
//! A documentation crew is kicked off three times by a service that passes
//! on whatever its users typed. Four hooks frame each kickoff:
//!
//! - `EXECUTION_START` sees the inputs as given. `require_topic` refuses a
//!   kickoff whose topic is blank: the run never starts, and `kickoff`
//!   returns an error naming the point, the reason and the source (here the
//!   hook's own name: `?` turned a `&str` into the abort).
//! - `INPUT` runs next, before tasks fill in their `{placeholders}`.
//!   `normalize_inputs` tidies the topic and gives a default audience; what
//!   it returns is what the task descriptions are filled from.
//! - `OUTPUT` sees the final output before `kickoff` returns it.
//!   `sign_output` appends the team's sign-off.
//! - `EXECUTION_END` fires exactly once for every kickoff that got past
//!   `EXECUTION_START`, whether it completed or failed, and never for a
//!   refused one. `report_end` reports either: the signed output, or the
//!   error. The third kickoff fails because the scripted model has nothing
//!   more to say, as a model server that went away would: the agent asks it
//!   again twice (its `max_retry_limit`), then gives up.

use std::error::Error;
use std::process::ExitCode;
use std::sync::Arc;

use crew_runtime::prelude::*;
use crew_runtime::transcript::note;
use crew_runtime::{
    ExecutionEndContext, ExecutionStartContext, ExecutionStatus, InputContext, InterceptionPoint,
    OutputContext, transcript::Transcript,
};

/// The audience when a kickoff names none.
const DEFAULT_AUDIENCE: &str = "beginners";
/// What `sign_output` appends.
const SIGN_OFF: &str = "-- reviewed by the docs team";

#[on(EXECUTION_START)]
fn require_topic(ctx: &mut ExecutionStartContext) -> Result<(), HookAborted> {
    ctx.inputs
        .get("topic")
        .filter(|topic| !topic.trim().is_empty())
        .ok_or("a kickoff needs a non-blank `topic` input")?;
    Ok(())
}

/// Collapses runs of spaces, lowercases the topic, fills in the audience.
/// Returns new inputs only when something changed.
#[on(INPUT)]
fn normalize_inputs(ctx: &mut InputContext) -> Option<Inputs> {
    let mut inputs: Inputs = ctx
        .inputs
        .iter()
        .map(|(name, value)| (name, value.split_whitespace().collect::<Vec<_>>().join(" ")))
        .collect();
    if let Some(topic) = inputs.get("topic").map(str::to_lowercase) {
        inputs.insert("topic", topic);
    }
    if inputs.get("audience").is_none() {
        inputs.insert("audience", DEFAULT_AUDIENCE);
    }
    if inputs == ctx.inputs {
        return None;
    }
    note(ctx, format!("normalize_inputs: now {}", show(&inputs)));
    Some(inputs)
}

#[on(OUTPUT)]
fn sign_output(ctx: &mut OutputContext) -> Option<String> {
    Some(format!("{}\n{SIGN_OFF}", ctx.output.raw))
}

#[on(EXECUTION_END)]
fn report_end(ctx: &mut ExecutionEndContext) {
    let report = match (ctx.status, &ctx.output, &ctx.error) {
        (ExecutionStatus::Completed, Some(output), _) => {
            let last_line = output.raw.lines().last().unwrap_or_default();
            format!("Completed, the output ends with {last_line:?}")
        }
        (ExecutionStatus::Failed, _, Some(error)) => format!("Failed: {error}"),
        (status, _, _) => format!("{status:?}"),
    };
    note(ctx, format!("report_end: {report}"));
}

/// `audience="beginners", topic="error handling"`.
fn show(inputs: &Inputs) -> String {
    let pairs: Vec<String> = inputs
        .iter()
        .map(|(name, value)| format!("{name}={value:?}"))
        .collect();
    pairs.join(", ")
}

fn run() -> Result<Vec<String>, Box<dyn Error>> {
    let transcript = Transcript::new();

    // One answer: enough for the one kickoff that gets that far first.
    let model = Arc::new(ScriptedLlm::new().answer(
        "In Rust, a function that can fail returns a `Result`; `?` hands the error to the \
         caller.",
    ));
    let writer = Agent::builder("Writer")
        .goal("Explain Rust clearly")
        .llm(transcript.model("Writer", model.clone()))
        .build();
    let task = Task::builder("Explain {topic} to {audience}")
        .expected_output("One paragraph for {audience}")
        .agent(&writer)
        .build();
    let crew = Crew::builder().agent(writer).task(task).build()?;
    transcript.attach(&crew);

    let kickoffs = [
        Inputs::from([("topic", "   ")]),
        Inputs::from([("topic", "  Error   HANDLING ")]),
        Inputs::from([("topic", "lifetimes"), ("audience", "Rust newcomers")]),
    ];
    for (number, inputs) in kickoffs.into_iter().enumerate() {
        let number = number + 1;
        transcript.line(format!("kickoff {number} with {}", show(&inputs)));
        match crew.kickoff_blocking(inputs) {
            Ok(output) => {
                transcript.line(format!("kickoff {number} returned:"));
                for line in output.raw.lines() {
                    transcript.line(format!("  | {line}"));
                }
            }
            Err(error) => {
                let point = error.aborted_at().map_or("", |point| point.as_str());
                let verb = if point == "EXECUTION_START" {
                    "refused"
                } else {
                    "failed"
                };
                transcript.line(format!("kickoff {number} {verb}: {error}"));
            }
        }
        transcript.line("");
    }

    let dispatches = transcript.dispatches();
    let count = |point| dispatches.iter().filter(|d| d.point == point).count();
    transcript.line(format!(
        "from the events: EXECUTION_START dispatched {} times, EXECUTION_END {} times",
        count(InterceptionPoint::EXECUTION_START),
        count(InterceptionPoint::EXECUTION_END)
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
    fn each_started_kickoff_ends_once_and_the_refused_one_never_starts() {
        let lines = super::run().expect("the example runs");
        assert_lines_in_order(
            &lines,
            &[
                "kickoff 1 with topic=\"   \"",
                "    EXECUTION_START aborted the run: a kickoff needs a non-blank `topic` input \
                 [source: require_topic] (1 hook ran)",
                "kickoff 1 refused: the run was stopped at EXECUTION_START: hook aborted by \
                 require_topic: a kickoff needs a non-blank `topic` input",
                "kickoff 2 with topic=\"  Error   HANDLING \"",
                "    EXECUTION_START let the kickoff start (1 hook ran)",
                "    normalize_inputs: now audience=\"beginners\", topic=\"error handling\"",
                "    INPUT          replaced the inputs (1 hook ran)",
                // The placeholders were filled from the normalized inputs.
                "[Writer] task: Explain error handling to beginners",
                "    OUTPUT         replaced the output (1 hook ran)",
                "    report_end: Completed, the output ends with \"-- reviewed by the docs team\"",
                "    EXECUTION_END  went on (1 hook ran)",
                "kickoff 2 returned:",
                "  | In Rust, a function that can fail returns a `Result`; `?` hands the error to \
                 the caller.",
                "  | -- reviewed by the docs team",
                "kickoff 3 with audience=\"Rust newcomers\", topic=\"lifetimes\"",
                "    INPUT          went on (1 hook ran)",
                "[Writer] task: Explain lifetimes to Rust newcomers",
                "[Writer] model failed: the scripted model has no more turns (it was asked 2 \
                 times)",
                // The failed call is asked again, twice: the agent's max_retry_limit.
                "[Writer] model asked again",
                "[Writer] model failed: the scripted model has no more turns (it was asked 3 \
                 times)",
                "[Writer] model asked again",
                "[Writer] model failed: the scripted model has no more turns (it was asked 4 \
                 times)",
                "    report_end: Failed: agent `Writer`: the model failed: the scripted model has \
                 no more turns (it was asked 4 times)",
                "kickoff 3 failed: agent `Writer`: the model failed: the scripted model has no \
                 more turns (it was asked 4 times)",
                "from the events: EXECUTION_START dispatched 3 times, EXECUTION_END 2 times",
            ],
        );
        // Nothing of the refused kickoff ran past its gate.
        let refused: Vec<&String> = lines
            .iter()
            .skip_while(|l| !l.starts_with("kickoff 1 with"))
            .take_while(|l| !l.starts_with("kickoff 2 with"))
            .collect();
        assert!(
            !refused
                .iter()
                .any(|l| l.contains("INPUT") || l.contains("END") || l.contains("report_end")),
            "{refused:#?}"
        );
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
