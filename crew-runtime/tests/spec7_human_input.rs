//! Human input is async (SPEC §7): an approval waits for a person without
//! holding a runtime thread, every question names the call it is about so
//! that an answer approves that call only, and every question has a
//! timeout (five minutes unless the crew sets another) after which the
//! gate refuses.
//!
//! Every wait here is bounded: a regression fails an assertion instead of
//! hanging the test run.

mod common;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::*;
use crew_runtime::guards::ApprovalGate;
use crew_runtime::prelude::*;
use crew_runtime::{
    ChannelInput, HumanInputRequest, HumanInputSource, PRE_MODEL_CALL, ScriptedInput,
};
use crew_runtime::{CrewBuilder, DEFAULT_HUMAN_INPUT_TIMEOUT};

const BLOCKED: &str = "Tool execution blocked by hook. Tool: send_email";
/// How long a test waits for what must happen: generous, never reached
/// when the code is right.
const PATIENCE: Duration = Duration::from_secs(30);

/// A crew whose agent has `send_email` (recording every address it sends
/// to), gated by the ready-made approval gate, asking `input`.
fn gated_email_crew(
    input: Arc<dyn HumanInputSource>,
    sent: &Log<String>,
    llm: &Arc<ScriptedLlm>,
) -> CrewBuilder {
    let send = send_email_tool(sent);
    let assistant = agent("Assistant", vec![send], llm);
    Crew::builder()
        .name("mailroom")
        .agent(assistant.clone())
        .task(Task::builder("Email the team").agent(&assistant).build())
        .global_registry(fresh_registry())
        .human_input(input)
        .async_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("approval-gate"),
            ApprovalGate::for_tools(["send_email"]).pre_hook(),
        )
}

/// The address a question is about, from the call's input it carries.
fn recipient(request: &HumanInputRequest) -> String {
    request
        .tool_input
        .as_ref()
        .and_then(|input| input["to"].as_str())
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_source_approves_only_the_call_whose_reply_it_got_when_two_calls_wait_at_once() {
    let (input, mut questions) = ChannelInput::new(4);
    // Two calls in one turn, run concurrently: both gates ask at once.
    let llm = Arc::new(
        ScriptedLlm::new()
            .calls([
                ("send_email", json!({"to": "alice@example.com"})),
                ("send_email", json!({"to": "bob@example.com"})),
            ])
            .answer("done"),
    );
    let sent = log();
    let crew = gated_email_crew(Arc::new(input), &sent, &llm)
        .max_concurrent_tool_calls(2)
        .build()
        .expect("builds");
    let run = tokio::spawn(async move { crew.kickoff(()).await });

    // Both questions are open before either is answered.
    let mut open = Vec::new();
    for _ in 0..2 {
        let question = tokio::time::timeout(PATIENCE, questions.recv())
            .await
            .expect("both calls ask at once")
            .expect("a question");
        open.push(question.into_parts());
    }
    let mut asked: Vec<(Option<String>, String)> = open
        .iter()
        .map(|(request, _)| (request.call_id.clone(), recipient(request)))
        .collect();
    asked.sort();
    assert_eq!(
        asked,
        [
            (Some("call_1".to_owned()), "alice@example.com".to_owned()),
            (Some("call_2".to_owned()), "bob@example.com".to_owned()),
        ]
    );
    // Answered in the reverse order of asking: "yes" for bob's call only,
    // chosen by its call id.
    for (request, reply) in open.into_iter().rev() {
        let answer = if request.call_id.as_deref() == Some("call_2") {
            "yes"
        } else {
            "no"
        };
        assert!(reply.send(answer), "the question still waits");
    }

    tokio::time::timeout(PATIENCE, run)
        .await
        .expect("the run ends once both are answered")
        .expect("the run task")
        .expect("runs");
    assert_eq!(take(&sent), ["bob@example.com"]);
    assert_eq!(
        llm.requests()[1].observations(),
        [BLOCKED, "sent to bob@example.com"]
    );
}

#[test]
fn the_default_human_input_timeout_is_five_minutes_and_reaches_every_context() {
    assert_eq!(DEFAULT_HUMAN_INPUT_TIMEOUT, Duration::from_secs(5 * 60));
    let seen = log();
    let crew = timeout_recording_crew(&seen, None);
    crew.kickoff_blocking(()).expect("runs");
    assert_eq!(
        take(&seen),
        [
            ("model call", DEFAULT_HUMAN_INPUT_TIMEOUT),
            ("tool call", DEFAULT_HUMAN_INPUT_TIMEOUT),
            ("model call", DEFAULT_HUMAN_INPUT_TIMEOUT),
        ]
    );
}

#[test]
fn a_crews_human_input_timeout_reaches_every_context() {
    let seen = log();
    let crew = timeout_recording_crew(&seen, Some(Duration::from_secs(42)));
    crew.kickoff_blocking(()).expect("runs");
    assert_eq!(
        take(&seen),
        [
            ("model call", Duration::from_secs(42)),
            ("tool call", Duration::from_secs(42)),
            ("model call", Duration::from_secs(42)),
        ]
    );
}

/// A crew with one tool call whose hooks record the human-input timeout
/// their contexts carry.
fn timeout_recording_crew(seen: &Log<(&'static str, Duration)>, timeout: Option<Duration>) -> Crew {
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("web_search", json!({"query": "rust"}))
            .answer("done"),
    );
    let received = log();
    let searcher = agent("Searcher", vec![search_tool(&received)], &llm);
    let (on_model, on_tool) = (seen.clone(), seen.clone());
    let mut crew = Crew::builder()
        .agent(searcher.clone())
        .task(Task::builder("Search").agent(&searcher).build())
        .global_registry(fresh_registry())
        .hook(PRE_MODEL_CALL, move |ctx: &mut LlmCallHookContext| {
            push(&on_model, ("model call", ctx.human_input_timeout()));
        })
        .hook(PRE_TOOL_CALL, move |ctx: &mut ToolCallHookContext| {
            push(&on_tool, ("tool call", ctx.human_input_timeout()));
        });
    if let Some(timeout) = timeout {
        crew = crew.human_input_timeout(timeout);
    }
    crew.build().expect("builds")
}

#[test]
fn a_question_nobody_answers_refuses_the_call_after_the_crews_timeout() {
    // The UI receives the question and never answers it.
    let (input, mut questions) = ChannelInput::new(4);
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("send_email", json!({"to": "team@example.com"}))
            .answer("done"),
    );
    let sent = log();
    let crew = gated_email_crew(Arc::new(input), &sent, &llm)
        .human_input_timeout(Duration::from_millis(50))
        .build()
        .expect("builds");
    let events = record_events(crew.events());

    crew.kickoff_blocking(()).expect("the run goes on");

    assert!(take(&sent).is_empty());
    assert_eq!(llm.requests()[1].observations(), [BLOCKED]);
    assert!(
        take(&events).iter().any(|e| e
            .ends_with("abort=(approval-gate: no human approval: no answer within 50ms)")),
        "the refusal names the timeout"
    );
    let late = questions.try_recv().expect("the question went out");
    assert!(!late.reply("yes"), "a late answer approves nothing");
    assert!(take(&sent).is_empty());
}

/// Runs `test` on a current-thread runtime of its own, on a thread of its
/// own, and fails if it does not finish within the patience (a runtime
/// whose only thread is blocked could not even time itself out).
fn on_one_thread_within_patience<F>(test: impl FnOnce() -> F + Send + 'static)
where
    F: Future<Output = ()>,
{
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a current-thread runtime");
        runtime.block_on(test());
        let _ = done.send(());
    });
    match finished.recv_timeout(PATIENCE) {
        Ok(()) => {}
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("the runtime's only thread was blocked")
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            panic!("the test failed on its runtime's thread (see its panic above)")
        }
    }
}

#[test]
fn a_waiting_approval_does_not_block_other_tasks_on_a_current_thread_runtime() {
    on_one_thread_within_patience(|| async {
        let (input, mut questions) = ChannelInput::new(4);
        let llm = Arc::new(
            ScriptedLlm::new()
                .call("send_email", json!({"to": "team@example.com"}))
                .answer("done"),
        );
        let sent = log();
        let crew = gated_email_crew(Arc::new(input), &sent, &llm)
            .build()
            .expect("builds");
        let run = tokio::spawn(async move { crew.kickoff(()).await });
        // Another task of the same thread, ticking while the gate waits.
        let ticks = Arc::new(AtomicUsize::new(0));
        let ticker = {
            let ticks = Arc::clone(&ticks);
            tokio::spawn(async move {
                loop {
                    ticks.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            })
        };

        let question = questions.recv().await.expect("the gate asks");
        // The question is open; the thread goes on with the other task.
        let before = ticks.load(Ordering::SeqCst);
        while ticks.load(Ordering::SeqCst) < before + 3 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert!(!run.is_finished(), "the call still waits for its answer");
        assert!(take(&sent).is_empty());
        assert!(question.reply("yes"));

        run.await.expect("the run task").expect("runs");
        ticker.abort();
        assert_eq!(take(&sent), ["team@example.com"]);
    });
}

#[test]
fn a_model_call_hook_asks_with_the_agents_role() {
    async fn confirm(ctx: &mut LlmCallHookContext) -> Result<(), HookAborted> {
        let answer = ctx.request_human_input("Call the model?", "yes/no").await?;
        if answer == "yes" {
            Ok(())
        } else {
            Err(HookAborted::new("not confirmed", "confirm"))
        }
    }
    let script = Arc::new(ScriptedInput::new(["yes"]));
    let llm = Arc::new(ScriptedLlm::new().answer("draft"));
    let writer = agent("Writer", vec![], &llm);
    let crew = Crew::builder()
        .agent(writer.clone())
        .task(Task::builder("Write").agent(&writer).build())
        .global_registry(fresh_registry())
        .human_input(script.clone())
        .async_hook(PRE_MODEL_CALL, confirm)
        .build()
        .expect("builds");

    assert_eq!(crew.kickoff_blocking(()).expect("runs").raw, "draft");
    let asked = script.requests();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].prompt, "Call the model?");
    assert_eq!(asked[0].agent_role.as_deref(), Some("Writer"));
    assert_eq!((&asked[0].call_id, &asked[0].tool_name), (&None, &None));
}
