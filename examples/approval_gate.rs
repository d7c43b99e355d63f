//! Human approval gate: a person approves `send_email` and `make_purchase`
//! before they run.
//!
//! The same errands run twice: first under a gate written by hand (an
//! `async` hook that awaits `ctx.request_human_input(..).await?`), then
//! under the ready-made [`ApprovalGate`] of `crew_runtime::guards`, which
//! does the same with a default question (the tool, the agent, the input)
//! and answer rule (`y` or `yes`). Waiting for the person holds no thread:
//! the runtime goes on with other work meanwhile, and gives up (refusing
//! the call) after the crew's human-input timeout, five minutes by default.
//!
//! `cargo run --example approval_gate` answers from a script (approve the
//! e-mail, deny the purchase, both times). `cargo run --example
//! approval_gate -- --interactive` asks you on the terminal instead: each
//! question comes in a frame under an `approval requested` header, apart
//! from the agents' output, with any control character a model put in the
//! arguments shown escaped, and whatever you typed before the question
//! appeared is dropped. With standard input closed or not a terminal
//! (`< /dev/null`, a CI job) no person can be asked, and every gated call
//! is denied: both gates fail closed.

use std::error::Error;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};

use crew_runtime::guards::ApprovalGate;
use crew_runtime::prelude::*;
use crew_runtime::schemars::JsonSchema;
use crew_runtime::serde::Deserialize;
use crew_runtime::{
    CallbackInput, HumanInputRequest, HumanInputSource, ScriptedInput, TerminalInput,
    transcript::Transcript,
};

/// Asks a person, through the crew's human-input source, before each gated
/// call. `?` turns "no answer could be had" into a block: nobody there
/// means no approval.
#[on(PRE_TOOL_CALL, tools = ["send_email", "make_purchase"])]
async fn require_approval(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
    let input = Value::Object(ctx.tool_input.clone());
    let answer = ctx
        .request_human_input(
            &format!("Approve {}?", ctx.tool_name()),
            &format!("Input: {input}\nType 'yes' to approve:"),
        )
        .await?;
    if answer.eq_ignore_ascii_case("yes") {
        Ok(())
    } else {
        Err(HookAborted::new(
            format!("denied by operator (answered {answer:?})"),
            "approval-gate",
        ))
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(crate = "crew_runtime::serde")]
#[schemars(crate = "crew_runtime::schemars")]
struct EmailArgs {
    /// The recipient.
    to: String,
    /// The subject line.
    subject: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(crate = "crew_runtime::serde")]
#[schemars(crate = "crew_runtime::schemars")]
struct PurchaseArgs {
    /// What to buy.
    item: String,
    /// The price in US dollars.
    amount_usd: f64,
}

/// What the tools really did: the proof that a denied call never ran.
type Ledger = Arc<Mutex<Vec<String>>>;

fn record(ledger: &Ledger, entry: String) {
    ledger
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(entry);
}

/// Which gate stands before the two tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gate {
    /// [`require_approval`], registered at link time in the global registry.
    HandWritten,
    /// [`ApprovalGate`], registered on the crew alone.
    ReadyMade,
}

/// Runs the crew under `gate` with answers from `input`, writing to
/// `transcript`.
fn run_with(
    gate: Gate,
    input: Arc<dyn HumanInputSource>,
    transcript: Transcript,
) -> Result<Vec<String>, Box<dyn Error>> {
    let ledger = Ledger::default();

    let sent = ledger.clone();
    let send_email = Tool::typed("send_email", "Sends an e-mail", move |args: EmailArgs| {
        record(&sent, format!("e-mail to {}: {}", args.to, args.subject));
        Ok::<_, String>(format!("sent to {}", args.to))
    });
    let bought = ledger.clone();
    let make_purchase = Tool::typed(
        "make_purchase",
        "Buys an item",
        move |args: PurchaseArgs| {
            record(
                &bought,
                format!("bought {} for ${}", args.item, args.amount_usd),
            );
            Ok::<_, String>(format!("ordered {}", args.item))
        },
    );

    // Every question and answer goes into the transcript: the source is
    // wrapped in a callback, the way a web UI or a chat bot would plug in.
    let asked = transcript.clone();
    let narrated_input = CallbackInput::new(move |request: HumanInputRequest| {
        let (input, asked) = (Arc::clone(&input), asked.clone());
        async move {
            // The question's first line is enough to tell which call it was.
            let prompt = request.prompt.lines().next().unwrap_or_default().to_owned();
            let answer = input.ask(request).await;
            match &answer {
                Ok(text) => asked.line(format!(
                    "    human asked {prompt:?} and answered {:?}",
                    text.trim()
                )),
                Err(error) => {
                    asked.line(format!("    human asked {prompt:?}: no answer ({error})"))
                }
            }
            answer
        }
    });

    let model = ScriptedLlm::new()
        .call(
            "send_email",
            json!({"to": "team@example.com", "subject": "Release notes"}),
        )
        .call(
            "make_purchase",
            json!({"item": "GPU server", "amount_usd": 24999.0}),
        )
        .answer("I handled the e-mail and the purchase request.");
    let assistant = Agent::builder("Assistant")
        .goal("Run errands for the team")
        .tool(send_email)
        .tool(make_purchase)
        .llm(transcript.model("Assistant", Arc::new(model)))
        .build();
    let task = Task::builder("Send the release notes and order the new server")
        .agent(&assistant)
        .build();
    let mut crew = Crew::builder()
        .agent(assistant)
        .task(task)
        .human_input(Arc::new(narrated_input));
    if gate == Gate::ReadyMade {
        // A registry of its own, so that only the ready-made gate asks. It
        // fails closed by itself; `fail_closed()` is not needed.
        crew = crew
            .global_registry(Arc::new(HookRegistry::new()))
            .async_hook_with(
                PRE_TOOL_CALL,
                HookOptions::new().name("approval-gate"),
                ApprovalGate::for_tools(["send_email", "make_purchase"]).pre_hook(),
            );
    }
    let crew = crew.build()?;
    transcript.attach(&crew);

    crew.kickoff_blocking(())?;

    let done = ledger
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    if done.is_empty() {
        transcript.line("tools that really ran: none");
    }
    for entry in done {
        transcript.line(format!("tools that really ran: {entry}"));
    }
    Ok(transcript.lines())
}

/// Runs the errands under both gates, one after the other.
fn run_both(
    input: impl Fn() -> Arc<dyn HumanInputSource>,
    transcript: impl Fn() -> Transcript,
) -> Result<Vec<String>, Box<dyn Error>> {
    let mut lines = Vec::new();
    for (gate, title) in [
        (Gate::HandWritten, "== 1. the gate written by hand =="),
        (Gate::ReadyMade, "== 2. the ready-made ApprovalGate =="),
    ] {
        let transcript = transcript();
        transcript.line(title);
        lines.extend(run_with(gate, input(), transcript)?);
    }
    Ok(lines)
}

fn main() -> ExitCode {
    let result = if std::env::args().any(|a| a == "--interactive") {
        println!("You will be asked to approve each gated call: type y or yes to approve.");
        println!("(With standard input closed or not a terminal, every call is denied.)");
        // The transcript prints as it goes, so each question comes in context.
        run_both(
            || Arc::new(TerminalInput::new()),
            || Transcript::new().echo(),
        )
        .map(|_| ())
    } else {
        // Approve the e-mail, deny the purchase: "yes"/"no" for the gate
        // written by hand, "y"/"n" for the ready-made one.
        let answers = Mutex::new(vec![["yes", "no"], ["y", "n"]].into_iter());
        run_both(
            || {
                let next = answers
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .next()
                    .unwrap_or_default();
                Arc::new(ScriptedInput::new(next))
            },
            Transcript::new,
        )
        .map(|lines| {
            // Model-written text is in these lines: print it escaped.
            for line in lines {
                crew_runtime::console::print_line(&line);
            }
        })
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crew_runtime::HumanInputError;

    #[test]
    fn scripted_answers_approve_the_email_and_deny_the_purchase() {
        let answers = ScriptedInput::new(["yes", "no"]);
        let lines =
            run_with(Gate::HandWritten, Arc::new(answers), Transcript::new()).expect("runs");
        assert_has_lines(
            &lines,
            &[
                "    human asked \"Approve send_email?\" and answered \"yes\"",
                "    PRE_TOOL_CALL  let the call through (1 hook ran)",
                "    tool send_email runs with {\"subject\":\"Release notes\",\"to\":\"team@example.com\"}",
                "[Assistant] agent saw: sent to team@example.com",
                "    human asked \"Approve make_purchase?\" and answered \"no\"",
                "    PRE_TOOL_CALL  blocked the call: denied by operator (answered \"no\") [source: approval-gate] (1 hook ran)",
                "[Assistant] agent saw: Tool execution blocked by hook. Tool: make_purchase",
                "tools that really ran: e-mail to team@example.com: Release notes",
            ],
        );
        assert!(!lines.iter().any(|l| l.contains("bought")), "{lines:#?}");
    }

    #[test]
    fn closed_input_denies_every_gated_call() {
        let closed =
            CallbackInput::new(|_: HumanInputRequest| async { Err(HumanInputError::Closed) });
        let lines = run_with(Gate::HandWritten, Arc::new(closed), Transcript::new()).expect("runs");
        assert_has_lines(
            &lines,
            &[
                "    human asked \"Approve send_email?\": no answer (human input is closed: no answer can be read)",
                "    PRE_TOOL_CALL  blocked the call: no human approval: human input is closed: no answer can be read [source: human-input] (1 hook ran)",
                "[Assistant] agent saw: Tool execution blocked by hook. Tool: send_email",
                "[Assistant] agent saw: Tool execution blocked by hook. Tool: make_purchase",
                "tools that really ran: none",
            ],
        );
        assert!(
            !lines.iter().any(|l| l.contains(" runs with ")),
            "{lines:#?}"
        );
    }

    #[test]
    fn the_ready_made_gate_approves_y_and_denies_n() {
        let answers = ScriptedInput::new(["y", "n"]);
        let lines = run_with(Gate::ReadyMade, Arc::new(answers), Transcript::new()).expect("runs");
        assert_lines_in_order(
            &lines,
            &[
                "    human asked \"Approve the call of send_email by Assistant?\" and answered \"y\"",
                "    PRE_TOOL_CALL  let the call through (1 hook ran)",
                "    tool send_email runs with {\"subject\":\"Release notes\",\"to\":\"team@example.com\"}",
                "[Assistant] agent saw: sent to team@example.com",
                "    human asked \"Approve the call of make_purchase by Assistant?\" and answered \"n\"",
                "    PRE_TOOL_CALL  blocked the call: refused by a person (answered \"n\") [source: approval-gate] (1 hook ran)",
                "[Assistant] agent saw: Tool execution blocked by hook. Tool: make_purchase",
                "tools that really ran: e-mail to team@example.com: Release notes",
            ],
        );
        assert!(!lines.iter().any(|l| l.contains("bought")), "{lines:#?}");
    }

    #[test]
    fn the_ready_made_gate_alone_asks() {
        // The hand-written gate is in the global registry; the ready-made
        // run has a registry of its own, so each call is asked about once.
        let answers = Arc::new(ScriptedInput::new(["y", "y"]));
        let lines = run_with(Gate::ReadyMade, answers.clone(), Transcript::new()).expect("runs");
        let questions: Vec<String> = answers
            .prompts()
            .into_iter()
            .map(|(prompt, message)| format!("{prompt}\n{message}"))
            .collect();
        assert_eq!(
            questions,
            [
                "Approve the call of send_email by Assistant?\nInput: {\n  \"subject\": \"Release notes\",\n  \"to\": \"team@example.com\"\n}\nAnswer y or yes to approve; anything else refuses the call.",
                "Approve the call of make_purchase by Assistant?\nInput: {\n  \"amount_usd\": 24999.0,\n  \"item\": \"GPU server\"\n}\nAnswer y or yes to approve; anything else refuses the call.",
            ]
        );
        assert_has_lines(
            &lines,
            &[
                "tools that really ran: e-mail to team@example.com: Release notes",
                "tools that really ran: bought GPU server for $24999",
            ],
        );
    }

    #[test]
    fn closed_input_denies_every_call_under_the_ready_made_gate_too() {
        let closed =
            CallbackInput::new(|_: HumanInputRequest| async { Err(HumanInputError::Closed) });
        let lines = run_with(Gate::ReadyMade, Arc::new(closed), Transcript::new()).expect("runs");
        assert_has_lines(
            &lines,
            &[
                "    PRE_TOOL_CALL  blocked the call: no human approval: human input is closed: no answer can be read [source: approval-gate] (1 hook ran)",
                "[Assistant] agent saw: Tool execution blocked by hook. Tool: send_email",
                "[Assistant] agent saw: Tool execution blocked by hook. Tool: make_purchase",
                "tools that really ran: none",
            ],
        );
    }

    #[test]
    fn both_gates_run_one_after_the_other() {
        let lines = run_both(
            || Arc::new(ScriptedInput::new(["yes", "n"])),
            Transcript::new,
        )
        .expect("runs");
        assert_lines_in_order(
            &lines,
            &[
                "== 1. the gate written by hand ==",
                "    human asked \"Approve send_email?\" and answered \"yes\"",
                "tools that really ran: e-mail to team@example.com: Release notes",
                "== 2. the ready-made ApprovalGate ==",
                "    human asked \"Approve the call of send_email by Assistant?\" and answered \"yes\"",
                "tools that really ran: e-mail to team@example.com: Release notes",
            ],
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
