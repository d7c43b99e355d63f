//! The approval guarantee: a `send_email` gated by a PRE hook that asks a
//! person (`ctx.request_human_input(..).await?`) never sends unless the
//! person answered `yes` for that very call — whether the answer source is
//! closed, fails, times out, panics, or standard input is not a terminal.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use crew_runtime::CrewBuilder;
use crew_runtime::events::HookPanickedEvent;
use crew_runtime::guards::ApprovalGate;
use crew_runtime::prelude::*;
use crew_runtime::{
    CallbackInput, ChannelInput, HumanInputError, HumanInputRequest, HumanInputSource,
    ScriptedInput, TerminalInput,
};

const BLOCKED: &str = "Tool execution blocked by hook. Tool: send_email";
/// A human-input timeout short enough for a test to wait it out.
const SHORT: Duration = Duration::from_millis(20);

/// The gate, as the guide writes it: ask, and let the call through only on
/// `yes`.
async fn approval_gate(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
    let to = ctx.tool_input["to"].as_str().unwrap_or("nobody").to_owned();
    let answer = ctx
        .request_human_input(
            &format!("Send an email to {to}?"),
            "Type yes to approve, anything else to refuse",
        )
        .await?;
    if answer == "yes" {
        Ok(())
    } else {
        Err(HookAborted::new(
            format!("refused: {answer}"),
            "approval-gate",
        ))
    }
}

/// A registry with the gate on `send_email` only, fail-closed (a panic
/// while asking refuses the call).
fn gated_registry() -> Arc<HookRegistry> {
    let global = fresh_registry();
    global
        .register_async_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new()
                .name("approval-gate")
                .tools(["send_email"])
                .fail_closed(),
            approval_gate,
        )
        .expect("registers");
    global
}

/// An approval source that crashes while asking.
async fn crashing(_: HumanInputRequest) -> Result<String, HumanInputError> {
    panic!("the approval UI crashed")
}

/// A crew whose agent has `send_email` (recording every address it sends
/// to) and runs its calls up to four at once.
fn email_crew(
    global: &Arc<HookRegistry>,
    input: Option<Arc<dyn HumanInputSource>>,
    sent: &Log<String>,
    llm: &Arc<ScriptedLlm>,
) -> Crew {
    email_crew_builder(global, input, sent, llm)
        .build()
        .expect("builds")
}

fn email_crew_builder(
    global: &Arc<HookRegistry>,
    input: Option<Arc<dyn HumanInputSource>>,
    sent: &Log<String>,
    llm: &Arc<ScriptedLlm>,
) -> CrewBuilder {
    let send = send_email_tool(sent);
    let assistant = agent("Assistant", vec![send], llm);
    let mut builder = Crew::builder()
        .name("mailroom")
        .agent(assistant.clone())
        .task(Task::builder("Email the team").agent(&assistant).build())
        .global_registry(global.clone())
        .max_concurrent_tool_calls(4)
        // The full-size run asks for more calls in one turn than the
        // default per-turn limit (tested in `hardening_limits.rs`).
        .max_tool_calls_per_turn(usize::MAX);
    if let Some(input) = input {
        builder = builder.human_input(input);
    }
    builder
}

fn one_email() -> Arc<ScriptedLlm> {
    Arc::new(
        ScriptedLlm::new()
            .call("send_email", json!({"to": "team@example.com"}))
            .answer("done"),
    )
}

/// Runs one gated email with `input`; returns what was sent, what the
/// model was told, and the abort the gate's dispatch reported.
fn run_one(input: Arc<dyn HumanInputSource>) -> (Vec<String>, String, Option<(String, String)>) {
    let global = gated_registry();
    let sent = log();
    let llm = one_email();
    // Short enough to wait out for the sources that never answer.
    let crew = email_crew_builder(&global, Some(input), &sent, &llm)
        .human_input_timeout(SHORT)
        .build()
        .expect("builds");
    let aborts = log();
    let sink = aborts.clone();
    crew.events().subscribe(move |event| {
        if let Event::HookDispatched(dispatch) = event
            && let (Some(source), Some(reason)) = (&dispatch.abort_source, &dispatch.abort_reason)
        {
            push(&sink, (source.clone(), reason.clone()));
        }
    });

    crew.kickoff_blocking(())
        .expect("an unanswered gate blocks the call; the run goes on");

    let observation = llm.requests()[1].observations().concat();
    (take(&sent), observation, take(&aborts).into_iter().next())
}

#[test]
fn gate_blocks_when_the_answer_source_is_closed_or_fails() {
    let failures = [
        HumanInputError::Closed,
        HumanInputError::NotATerminal,
        HumanInputError::Exhausted,
        HumanInputError::TimedOut(Duration::from_secs(30)),
        HumanInputError::Io("broken pipe".into()),
    ];
    let mut sources: Vec<(String, Arc<dyn HumanInputSource>)> = vec![(
        "a script with no answer".into(),
        Arc::new(ScriptedInput::new(Vec::<String>::new())),
    )];
    for failure in failures {
        let scripted = ScriptedInput::new(Vec::<String>::new()).then_fail(failure.clone());
        sources.push((format!("scripted {failure:?}"), Arc::new(scripted)));
        let callback = CallbackInput::new(move |_: HumanInputRequest| {
            let failure = failure.clone();
            async move { Err(failure) }
        });
        sources.push(("a failing callback".into(), Arc::new(callback)));
    }
    for (name, source) in sources {
        let (sent, observation, abort) = run_one(source);

        assert!(sent.is_empty(), "{name}: nothing is sent");
        assert_eq!(observation, BLOCKED, "{name}");
        let (source, reason) = abort.expect("the gate's dispatch reports its abort");
        assert_eq!(source, "human-input", "{name}");
        assert!(
            reason.starts_with("no human approval: "),
            "{name}: {reason}"
        );
    }
}

#[test]
fn gate_blocks_when_nobody_answers_in_time() {
    let (input, mut questions) = ChannelInput::new(4);

    let (sent, observation, abort) = run_one(Arc::new(input));

    assert!(sent.is_empty());
    assert_eq!(observation, BLOCKED);
    let (_, reason) = abort.expect("an abort");
    assert_eq!(reason, "no human approval: no answer within 20ms");
    // The question did go out; an answer after the timeout changes nothing.
    let question = questions.try_recv().expect("the gate asked");
    assert_eq!(
        question.request().prompt,
        "Send an email to team@example.com?"
    );
    assert!(!question.reply("yes"), "nobody waits for a late answer");
    assert!(sent.is_empty());
}

#[test]
fn gate_blocks_when_the_answering_side_is_gone() {
    // The UI's receiving end dropped before anything was asked.
    let (gone, questions) = ChannelInput::new(4);
    drop(questions);
    // A UI that drops every question unanswered (its reply handle with it).
    let (dropping, mut questions) = ChannelInput::new(4);
    let ui = std::thread::spawn(move || {
        let mut asked = 0;
        while let Some(question) = questions.blocking_recv() {
            asked += 1;
            drop(question);
        }
        asked
    });

    for input in [gone, dropping] {
        let (sent, observation, abort) = run_one(Arc::new(input));
        assert!(sent.is_empty());
        assert_eq!(observation, BLOCKED);
        let (_, reason) = abort.expect("an abort");
        assert_eq!(
            reason,
            "no human approval: human input is closed: no answer can be read"
        );
    }
    assert_eq!(ui.join().expect("the UI thread ends"), 1);
}

#[test]
fn gate_blocks_when_asking_panics_and_the_panic_never_reaches_the_gate() {
    let panicking = CallbackInput::new(crashing);
    // The gate is registered fail-open (the default): the call is refused
    // because asking is an error, not because a panic went through the hook.
    let global = fresh_registry();
    global
        .register_async_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new()
                .name("approval-gate")
                .tools(["send_email"]),
            approval_gate,
        )
        .expect("registers");
    let sent = log();
    let llm = one_email();
    let crew = email_crew(&global, Some(Arc::new(panicking)), &sent, &llm);
    let panics = log();
    let aborts = log();
    let (panic_sink, abort_sink) = (panics.clone(), aborts.clone());
    crew.events().subscribe(move |event| match event {
        Event::HookPanicked(HookPanickedEvent { hook, .. }) => push(&panic_sink, hook.clone()),
        Event::HookDispatched(dispatch) => {
            if let (Some(source), Some(reason)) = (&dispatch.abort_source, &dispatch.abort_reason) {
                push(&abort_sink, (source.clone(), reason.clone()));
            }
        }
        _ => {}
    });

    crew.kickoff_blocking(()).expect("the panic is contained");

    assert!(take(&sent).is_empty());
    assert_eq!(llm.requests()[1].observations(), [BLOCKED]);
    assert!(take(&panics).is_empty(), "the gate itself never panicked");
    assert_eq!(
        take(&aborts),
        [(
            "human-input".to_owned(),
            "no human approval: the answer source failed: it panicked: the approval UI crashed"
                .to_owned()
        )]
    );
}

#[test]
fn gate_blocks_when_asking_panics_even_if_it_is_fail_closed() {
    // The same panic under the fail-closed gate of the other tests.
    let panicking = CallbackInput::new(crashing);

    let (sent, observation, abort) = run_one(Arc::new(panicking));

    assert!(sent.is_empty());
    assert_eq!(observation, BLOCKED);
    let (source, reason) = abort.expect("an abort");
    assert_eq!(source, "human-input");
    assert!(
        reason.ends_with("it panicked: the approval UI crashed"),
        "{reason}"
    );
}

const TERMINAL_CHILD: &str = "HARDENING_APPROVAL_TERMINAL_CHILD";

#[test]
fn gate_blocks_when_stdin_is_not_a_terminal() {
    if is_child(TERMINAL_CHILD) {
        // Standard input is /dev/null here. Three ways to read it: the
        // crew's default source, the terminal, the terminal with a crew
        // timeout of its own.
        type Source = Option<Arc<dyn HumanInputSource>>;
        let sources: [(Source, Option<Duration>); 3] = [
            (None, None),
            (Some(Arc::new(TerminalInput::new())), None),
            (
                Some(Arc::new(TerminalInput::new())),
                Some(Duration::from_secs(30)),
            ),
        ];
        for (source, timeout) in sources {
            let global = gated_registry();
            let sent = log();
            let llm = one_email();
            let mut crew = email_crew_builder(&global, source, &sent, &llm);
            if let Some(timeout) = timeout {
                crew = crew.human_input_timeout(timeout);
            }
            crew.build()
                .expect("builds")
                .kickoff_blocking(())
                .expect("the run goes on");
            println!("SENT={}", take(&sent).len());
            println!("OBSERVATION={}", llm.requests()[1].observations().concat());
        }
        return;
    }
    let stdout = run_in_child("gate_blocks_when_stdin_is_not_a_terminal", TERMINAL_CHILD);
    // The test harness may print `test … ... ` in front of the first line.
    let lines: Vec<&str> = stdout
        .lines()
        .filter_map(|l| {
            ["SENT=", "OBSERVATION="]
                .iter()
                .find_map(|marker| l.find(marker).map(|at| &l[at..]))
        })
        .collect();
    let expected_one = ["SENT=0".to_owned(), format!("OBSERVATION={BLOCKED}")];
    let expected: Vec<&str> = expected_one
        .iter()
        .map(String::as_str)
        .cycle()
        .take(6)
        .collect();
    assert_eq!(lines, expected, "child output:\n{stdout}");
}

const DEFAULT_SOURCE_CHILD: &str = "HARDENING_APPROVAL_DEFAULT_SOURCE_CHILD";

#[test]
fn a_crew_built_without_a_source_asks_the_terminal() {
    // The engine has no default person; the runtime gives a crew the
    // terminal. With standard input /dev/null the terminal refuses as not
    // a terminal, which tells it apart from a context with no source.
    if is_child(DEFAULT_SOURCE_CHILD) {
        let global = gated_registry();
        let sent = log();
        let llm = one_email();
        let crew = email_crew_builder(&global, None, &sent, &llm)
            .build()
            .expect("builds");
        let aborts = log();
        let sink = aborts.clone();
        crew.events().subscribe(move |event| {
            if let Event::HookDispatched(dispatch) = event
                && let Some(reason) = &dispatch.abort_reason
            {
                push(&sink, reason.clone());
            }
        });
        crew.kickoff_blocking(()).expect("the run goes on");
        println!("SENT={}", take(&sent).len());
        for reason in take(&aborts) {
            println!("REASON={reason}");
        }
        return;
    }
    let stdout = run_in_child(
        "a_crew_built_without_a_source_asks_the_terminal",
        DEFAULT_SOURCE_CHILD,
    );
    let lines: Vec<&str> = stdout
        .lines()
        .filter_map(|l| {
            ["SENT=", "REASON="]
                .iter()
                .find_map(|marker| l.find(marker).map(|at| &l[at..]))
        })
        .collect();
    assert_eq!(
        lines,
        [
            "SENT=0",
            "REASON=no human approval: standard input is not a terminal: no person can be asked",
        ],
        "child output:\n{stdout}"
    );
}

#[test]
fn yes_lets_exactly_that_call_through() {
    // Four calls at once, two of them spelled differently (the gate's
    // `tools` filter is normalized like tool names); only bob is approved.
    let approver = CallbackInput::new(|request: HumanInputRequest| async move {
        Ok(if request.prompt.contains("bob@") {
            " yes \n".to_owned()
        } else if request.prompt.contains("carol@") {
            "yes please".to_owned()
        } else {
            "y".to_owned()
        })
    });
    let llm = Arc::new(
        ScriptedLlm::new()
            .calls([
                ("send_email", json!({"to": "alice@example.com"})),
                ("Send Email", json!({"to": "bob@example.com"})),
                ("sendEmail", json!({"to": "carol@example.com"})),
                ("send-email", json!({"to": "dave@example.com"})),
            ])
            .answer("done"),
    );
    let global = gated_registry();
    let sent = log();
    let crew = email_crew(&global, Some(Arc::new(approver)), &sent, &llm);

    crew.kickoff_blocking(()).expect("runs");

    assert_eq!(take(&sent), ["bob@example.com"]);
    assert_eq!(
        llm.requests()[1].observations(),
        [BLOCKED, "sent to bob@example.com", BLOCKED, BLOCKED]
    );
}

#[test]
fn a_ui_answering_over_a_channel_approves_only_what_it_approves() {
    let (input, mut questions) = ChannelInput::new(4);
    // The UI decides on the call the request names, not on the prompt's
    // text; it ends when the crew (the channel's sender) is gone.
    let ui = std::thread::spawn(move || {
        let mut asked = Vec::new();
        while let Some(question) = questions.blocking_recv() {
            let request = question.request();
            let to = request
                .tool_input
                .as_ref()
                .and_then(|input| input["to"].as_str())
                .unwrap_or_default();
            let answer = if to.starts_with("bob@") { "yes" } else { "no" };
            asked.push(request.call_id.clone());
            question.reply(answer);
        }
        asked
    });
    let scale = test_scale();
    let recipients: Vec<String> = (0..8 * scale)
        .map(|n| {
            if n % 4 == 1 {
                format!("bob@example.com#{n}")
            } else {
                format!("user{n}@example.com")
            }
        })
        .collect();
    let llm = Arc::new(
        ScriptedLlm::new()
            .calls(
                recipients
                    .iter()
                    .map(|to| ("send_email", json!({ "to": to }))),
            )
            .answer("done"),
    );
    let global = gated_registry();
    let sent = log();
    let crew = email_crew(&global, Some(Arc::new(input)), &sent, &llm);

    crew.kickoff_blocking(()).expect("runs");
    drop(crew);

    let mut sent = take(&sent);
    sent.sort();
    let mut approved: Vec<String> = recipients
        .iter()
        .filter(|to| to.starts_with("bob@"))
        .cloned()
        .collect();
    approved.sort();
    assert_eq!(sent, approved);
    let mut asked = ui.join().expect("the UI thread ends");
    asked.sort();
    let mut ids: Vec<Option<String>> = (1..=recipients.len())
        .map(|n| Some(format!("call_{n}")))
        .collect();
    ids.sort();
    assert_eq!(asked, ids, "one question per call, each naming its call");
    let observations = llm.requests()[1]
        .observations()
        .iter()
        .map(|o| o.to_string())
        .collect::<Vec<_>>();
    for (to, observation) in recipients.iter().zip(&observations) {
        if to.starts_with("bob@") {
            assert_eq!(observation, &format!("sent to {to}"));
        } else {
            assert_eq!(observation, BLOCKED);
        }
    }
}

// The ready-made gate (`crew_runtime::guards::ApprovalGate`) keeps the same
// guarantee in a running crew.

/// A registry with the ready-made gate on `send_email`, registered with the
/// default options (fail-open): the gate fails closed on its own.
fn ready_made_registry() -> Arc<HookRegistry> {
    let global = fresh_registry();
    global
        .register_async_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("ready-made-gate"),
            ApprovalGate::for_tools(["Send Email"]).pre_hook(),
        )
        .expect("registers");
    global
}

#[test]
fn ready_made_gate_refuses_whenever_no_answer_can_be_had() {
    let (closed, questions) = ChannelInput::new(4);
    drop(questions);
    let (silent, _questions) = ChannelInput::new(4);
    let sources: Vec<(&str, Arc<dyn HumanInputSource>)> = vec![
        ("no answer left", Arc::new(ScriptedInput::default())),
        ("closed", Arc::new(closed)),
        ("timed out", Arc::new(silent)),
        (
            "failing",
            Arc::new(CallbackInput::new(|_: HumanInputRequest| async {
                Err(HumanInputError::Io("broken pipe".into()))
            })),
        ),
        ("panicking", Arc::new(CallbackInput::new(crashing))),
    ];
    for (name, source) in sources {
        let global = ready_made_registry();
        let sent = log();
        let llm = one_email();
        let crew = email_crew_builder(&global, Some(source), &sent, &llm)
            .human_input_timeout(SHORT)
            .build()
            .expect("builds");
        let aborts = log();
        let sink = aborts.clone();
        crew.events().subscribe(move |event| {
            if let Event::HookDispatched(dispatch) = event
                && let Some(source) = &dispatch.abort_source
            {
                push(&sink, source.clone());
            }
        });

        crew.kickoff_blocking(()).expect("the run goes on");

        assert!(take(&sent).is_empty(), "{name}: nothing is sent");
        assert_eq!(llm.requests()[1].observations(), [BLOCKED], "{name}");
        assert_eq!(take(&aborts), ["approval-gate"], "{name}");
    }
}

#[test]
fn ready_made_gate_approves_only_y_or_yes_for_that_very_call() {
    let answers = CallbackInput::new(|request: HumanInputRequest| async move {
        let prompt = request.prompt;
        Ok(if prompt.contains("bob@") {
            "Y".to_owned()
        } else if prompt.contains("carol@") {
            " yes\n".to_owned()
        } else if prompt.contains("dave@") {
            "yes please".to_owned()
        } else {
            "no".to_owned()
        })
    });
    let llm = Arc::new(
        ScriptedLlm::new()
            .calls([
                ("send_email", json!({"to": "alice@example.com"})),
                ("SendEmail", json!({"to": "bob@example.com"})),
                ("send-email", json!({"to": "carol@example.com"})),
                ("Send Email", json!({"to": "dave@example.com"})),
            ])
            .answer("done"),
    );
    let global = ready_made_registry();
    let sent = log();
    let crew = email_crew(&global, Some(Arc::new(answers)), &sent, &llm);

    crew.kickoff_blocking(()).expect("runs");

    let mut sent = take(&sent);
    sent.sort();
    assert_eq!(sent, ["bob@example.com", "carol@example.com"]);
    assert_eq!(
        llm.requests()[1].observations(),
        [
            BLOCKED,
            "sent to bob@example.com",
            "sent to carol@example.com",
            BLOCKED
        ]
    );
}

#[test]
fn ready_made_gate_shows_the_call_and_who_makes_it() {
    let source = Arc::new(ScriptedInput::new(["n"]));
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("send_email", json!({"to": "team@example.com\u{202e}"}))
            .answer("done"),
    );
    let global = ready_made_registry();
    let sent = log();
    let crew = email_crew(&global, Some(source.clone()), &sent, &llm);

    crew.kickoff_blocking(()).expect("runs");

    assert!(take(&sent).is_empty());
    assert_eq!(
        source.prompts(),
        [(
            "Approve the call of send_email by Assistant?\nInput: {\n  \
             \"to\": \"team@example.com\\u{202e}\"\n}"
                .to_owned(),
            "Answer y or yes to approve; anything else refuses the call.".to_owned()
        )]
    );
    // The request names the call itself, for a UI that shows it its own way.
    let request = &source.requests()[0];
    assert_eq!(request.call_id.as_deref(), Some("call_1"));
    assert_eq!(request.tool_name.as_deref(), Some("send_email"));
    assert_eq!(
        request.tool_input,
        Some(json!({"to": "team@example.com\u{202e}"}))
    );
    assert_eq!(request.agent_role.as_deref(), Some("Assistant"));
}
