//! Human approval gate: a person approves `send_email` and `make_purchase`
//! before they run.
//!
//! `cargo run --example approval_gate` answers from a script (approve the
//! e-mail, deny the purchase). `cargo run --example approval_gate --
//! --interactive` asks you on the terminal instead. With standard input
//! closed or not a terminal (`< /dev/null`, a CI job) no person can be
//! asked, and every gated call is denied: the gate fails closed.

use std::error::Error;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};

use crew_examples::Transcript;
use crew_runtime::prelude::*;
use crew_runtime::schemars::JsonSchema;
use crew_runtime::serde::Deserialize;

/// Asks a person, through the crew's human-input source, before each gated
/// call. `?` turns "no answer could be had" into a block: nobody there
/// means no approval.
#[on(PRE_TOOL_CALL, tools = ["send_email", "make_purchase"])]
fn require_approval(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
    let input = Value::Object(ctx.tool_input.clone());
    let answer = ctx.request_human_input(
        &format!("Approve {}?", ctx.tool_name()),
        &format!("Input: {input}\nType 'yes' to approve:"),
    )?;
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

/// Runs the crew with answers from `input`, writing to `transcript`.
fn run(
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
    let narrated_input = CallbackInput::new(move |prompt: &str, message: &str| {
        let answer = input.ask(prompt, message);
        match &answer {
            Ok(text) => asked.line(format!(
                "    human asked {prompt:?} and answered {:?}",
                text.trim()
            )),
            Err(error) => asked.line(format!("    human asked {prompt:?}: no answer ({error})")),
        }
        answer
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
    let crew = Crew::builder()
        .agent(assistant)
        .task(task)
        .human_input(Arc::new(narrated_input))
        .build()?;
    transcript.attach(&crew);

    crew.kickoff(())?;

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

fn main() -> ExitCode {
    if !std::env::args().any(|a| a == "--interactive") {
        let answers = ScriptedInput::new(["yes", "no"]);
        return crew_examples::report(run(Arc::new(answers), Transcript::new()));
    }
    println!("You will be asked to approve each gated call: type yes to approve.");
    println!("(With standard input closed or not a terminal, every call is denied.)");
    // The transcript prints as it goes, so each question comes in context.
    match run(Arc::new(TerminalInput::new()), Transcript::new().echo()) {
        Ok(_) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripted_answers_approve_the_email_and_deny_the_purchase() {
        let answers = ScriptedInput::new(["yes", "no"]);
        let lines = run(Arc::new(answers), Transcript::new()).expect("runs");
        crew_examples::assert_has_lines(
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
        let closed = CallbackInput::new(|_: &str, _: &str| Err(HumanInputError::Closed));
        let lines = run(Arc::new(closed), Transcript::new()).expect("runs");
        crew_examples::assert_has_lines(
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
}
