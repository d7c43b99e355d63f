//! Rule 10: `request_human_input` asks the crew's source; no answer blocks.

mod common;

use std::sync::Arc;

use common::*;
use crew_runtime::prelude::*;
use crew_runtime::{
    CallbackInput, HumanInputError, HumanInputRequest, HumanInputSource, ScriptedInput,
};

/// An approval gate on `send_email`, as the guide writes it: an `async`
/// hook that awaits the answer.
async fn approval_gate(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
    let to = ctx.tool_input["to"].as_str().unwrap_or_default().to_owned();
    let answer = ctx
        .request_human_input(
            &format!("Send an email to {to}?"),
            "Type y to approve, anything else to refuse",
        )
        .await?;
    if answer == "y" {
        Ok(())
    } else {
        Err(HookAborted::new(
            format!("refused: {answer}"),
            "approval-gate",
        ))
    }
}

fn email_crew(
    global: &Arc<HookRegistry>,
    input: Arc<dyn HumanInputSource>,
    sent: &Log<Value>,
    llm: &Arc<ScriptedLlm>,
) -> Crew {
    let sink = sent.clone();
    let send = Tool::dynamic(
        "send_email",
        "Sends an email",
        json!({"type": "object"}),
        move |args| {
            push(&sink, args);
            Ok::<_, String>(json!("sent"))
        },
    );
    let assistant = agent("Assistant", vec![send], llm);
    Crew::builder()
        .agent(assistant.clone())
        .task(Task::builder("Email the team").agent(&assistant).build())
        .global_registry(global.clone())
        .human_input(input)
        .build()
        .expect("builds")
}

fn one_email() -> Arc<ScriptedLlm> {
    Arc::new(
        ScriptedLlm::new()
            .call("send_email", json!({"to": "team@example.com"}))
            .answer("done"),
    )
}

fn gated_registry() -> Arc<HookRegistry> {
    let global = fresh_registry();
    global
        .register_async_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().tools(["send_email"]),
            approval_gate,
        )
        .expect("registers");
    global
}

#[test]
fn human_input_approved_runs_the_tool() {
    let global = gated_registry();
    let input = Arc::new(ScriptedInput::new(["  y \n"]));
    let sent = log();
    let llm = one_email();
    let crew = email_crew(&global, input.clone(), &sent, &llm);

    crew.kickoff_blocking(()).expect("runs");

    assert_eq!(take(&sent), [json!({"to": "team@example.com"})]);
    assert_eq!(
        input.prompts(),
        [(
            "Send an email to team@example.com?".to_owned(),
            "Type y to approve, anything else to refuse".to_owned()
        )]
    );
    assert_eq!(llm.requests()[1].observations(), ["sent"]);
}

#[test]
fn human_input_denied_blocks_the_tool() {
    let global = gated_registry();
    let input = Arc::new(ScriptedInput::new(["no"]));
    let sent = log();
    let llm = one_email();
    let crew = email_crew(&global, input.clone(), &sent, &llm);
    let events = record_events(crew.events());

    crew.kickoff_blocking(())
        .expect("a refused call does not end the run");

    assert!(take(&sent).is_empty(), "the email is not sent");
    assert_eq!(input.prompts().len(), 1);
    assert_eq!(
        llm.requests()[1].observations(),
        ["Tool execution blocked by hook. Tool: send_email"]
    );
    let events = take(&events);
    assert!(
        events
            .iter()
            .any(|e| e.ends_with("abort=(approval-gate: refused: no)")),
        "{events:?}"
    );
}

#[test]
fn human_input_unavailable_blocks_the_tool() {
    let global = gated_registry();
    let sent = log();
    // A scripted source that has no answer, and a callback whose UI is gone.
    let sources: [Arc<dyn HumanInputSource>; 2] = [
        Arc::new(ScriptedInput::new(Vec::<String>::new()).then_fail(HumanInputError::Closed)),
        Arc::new(CallbackInput::new(|_: HumanInputRequest| async {
            Err(HumanInputError::NotATerminal)
        })),
    ];
    for source in sources {
        let llm = one_email();
        let crew = email_crew(&global, source, &sent, &llm);
        let events = record_events(crew.events());

        crew.kickoff_blocking(())
            .expect("an unanswered gate does not end the run");

        assert_eq!(
            llm.requests()[1].observations(),
            ["Tool execution blocked by hook. Tool: send_email"]
        );
        assert!(
            take(&events)
                .iter()
                .any(|e| e.contains("abort=(human-input: no human approval: ")),
            "the block names the missing answer"
        );
    }
    assert!(take(&sent).is_empty(), "no email is sent without an answer");
}
