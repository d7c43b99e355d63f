//! SPEC §12: the lifecycle events of a kickoff, with CrewAI's names and
//! payloads, in order — the kickoff's exactly once, the others once per
//! task, agent execution and model call — in a crew, a nested kickoff and
//! a failing kickoff; every payload through the crew's redaction; token
//! usage counted once per response of the kickoff.

mod common;

use std::sync::Arc;

use common::*;
use crew_runtime::guards::SecretRedactor;
use crew_runtime::prelude::*;
use crew_runtime::{
    ChatMessage, EXECUTION_END, EXECUTION_START, ExecutionEndContext, ExecutionStartContext, INPUT,
    InputContext, TokenUsage,
};

/// One line per lifecycle event: its name and the crew / task / agent it
/// is about.
fn lifecycle(crew: &Crew) -> Log<String> {
    let seen = log();
    let sink = seen.clone();
    crew.events().subscribe(move |event| {
        let line = match event {
            Event::CrewKickoffStarted(e) => format!("CrewKickoffStarted {}", e.crew_name),
            Event::CrewKickoffCompleted(e) => {
                format!("CrewKickoffCompleted {} {}", e.crew_name, e.output)
            }
            Event::CrewKickoffFailed(e) => format!("CrewKickoffFailed {}", e.crew_name),
            Event::TaskStarted(e) => format!("TaskStarted {} {}", e.task_name, e.agent_role),
            Event::TaskCompleted(e) => {
                format!(
                    "TaskCompleted {} {} {}",
                    e.task_name, e.agent_role, e.output
                )
            }
            Event::TaskFailed(e) => format!("TaskFailed {} {}", e.task_name, e.agent_role),
            Event::AgentExecutionStarted(e) => {
                format!("AgentExecutionStarted {} {}", e.agent_role, e.task_name)
            }
            Event::AgentExecutionCompleted(e) => {
                format!("AgentExecutionCompleted {} {}", e.agent_role, e.task_name)
            }
            Event::AgentExecutionError(e) => {
                format!("AgentExecutionError {} {}", e.agent_role, e.task_name)
            }
            Event::LlmCallStarted(e) => format!("LLMCallStarted {}", e.agent_role),
            Event::LlmCallCompleted(e) => format!("LLMCallCompleted {}", e.agent_role),
            Event::LlmCallFailed(e) => format!("LLMCallFailed {}", e.agent_role),
            Event::ToolUsageFinished(e) => format!("ToolUsageFinished {}", e.tool_name),
            _ => return,
        };
        push(&sink, line);
    });
    seen
}

#[test]
fn a_kickoff_reports_its_lifecycle_in_order_with_names() {
    let llm = Arc::new(
        ScriptedLlm::new()
            .reporting_usage(TokenUsage::new(100, 20, 125))
            .call("web_search", json!({"query": "rust"}))
            .answer("facts")
            .answer("report"),
    );
    let researcher = agent("Researcher", vec![search_tool(&log())], &llm);
    let research = Task::builder("Research {topic}")
        .name("research")
        .agent(&researcher)
        .build();
    let write = Task::builder("Write it up").agent(&researcher).build();
    let crew = Crew::builder()
        .name("newsroom")
        .agent(researcher)
        .tasks([research, write])
        .global_registry(fresh_registry())
        .build()
        .expect("builds");
    let seen = lifecycle(&crew);
    let usage = log();
    let sink = usage.clone();
    crew.events().subscribe(move |event| match event {
        Event::LlmCallCompleted(e) => push(&sink, e.usage),
        Event::CrewKickoffCompleted(e) => push(&sink, Some(e.token_usage)),
        _ => {}
    });

    let output = crew.kickoff_blocking([("topic", "Rust")]).expect("runs");

    assert_eq!(
        take(&seen),
        [
            "CrewKickoffStarted newsroom",
            "TaskStarted research Researcher",
            "AgentExecutionStarted Researcher research",
            "LLMCallStarted Researcher",
            "LLMCallCompleted Researcher",
            "ToolUsageFinished web_search",
            "LLMCallStarted Researcher",
            "LLMCallCompleted Researcher",
            "AgentExecutionCompleted Researcher research",
            "TaskCompleted research Researcher facts",
            "TaskStarted Write it up Researcher",
            "AgentExecutionStarted Researcher Write it up",
            "LLMCallStarted Researcher",
            "LLMCallCompleted Researcher",
            "AgentExecutionCompleted Researcher Write it up",
            "TaskCompleted Write it up Researcher report",
            "CrewKickoffCompleted newsroom report",
        ]
    );
    // Three responses of 125 tokens each, counted once; the provider's
    // total is kept (not recomputed as prompt + completion).
    let total = TokenUsage::new(300, 60, 375);
    assert_eq!(output.token_usage, total);
    let usage = take(&usage);
    assert_eq!(usage.len(), 4);
    assert_eq!(usage[0], Some(TokenUsage::new(100, 20, 125)));
    assert_eq!(usage[3], Some(total));
}

#[test]
fn the_kickoff_started_event_carries_the_inputs_the_boundary_hooks_left() {
    let global = fresh_registry();
    global
        .register_hook(INPUT, |ctx: &mut InputContext| {
            ctx.inputs.insert("topic", "RUST");
        })
        .expect("registers");
    let llm = Arc::new(ScriptedLlm::new().answer("done"));
    let writer = agent("Writer", Vec::new(), &llm);
    let crew = Crew::builder()
        .agent(writer.clone())
        .task(Task::builder("Write about {topic}").agent(&writer).build())
        .global_registry(global)
        .build()
        .expect("builds");
    let inputs = log();
    let sink = inputs.clone();
    crew.events().subscribe(move |event| {
        if let Event::CrewKickoffStarted(e) = event {
            push(&sink, e.inputs.get("topic").map(str::to_owned));
        }
    });

    crew.kickoff_blocking([("topic", "rust")]).expect("runs");

    assert_eq!(take(&inputs), [Some("RUST".to_owned())]);
}

#[test]
fn a_failing_kickoff_reports_the_failed_task_and_kickoff_once() {
    // The model has one answer for two tasks: the second task's model call
    // fails, and so do its two retries.
    let llm = Arc::new(ScriptedLlm::new().answer("one"));
    let worker = agent("Worker", Vec::new(), &llm);
    let crew = Crew::builder()
        .name("short")
        .agent(worker.clone())
        .task(Task::builder("First").agent(&worker).build())
        .task(Task::builder("Second").agent(&worker).build())
        .global_registry(fresh_registry())
        .build()
        .expect("builds");
    let seen = lifecycle(&crew);

    crew.kickoff_blocking(()).expect_err("the model runs out");

    assert_eq!(
        take(&seen),
        [
            "CrewKickoffStarted short",
            "TaskStarted First Worker",
            "AgentExecutionStarted Worker First",
            "LLMCallStarted Worker",
            "LLMCallCompleted Worker",
            "AgentExecutionCompleted Worker First",
            "TaskCompleted First Worker one",
            "TaskStarted Second Worker",
            "AgentExecutionStarted Worker Second",
            "LLMCallStarted Worker",
            "LLMCallFailed Worker",
            "AgentExecutionStarted Worker Second",
            "LLMCallStarted Worker",
            "LLMCallFailed Worker",
            "AgentExecutionStarted Worker Second",
            "LLMCallStarted Worker",
            "LLMCallFailed Worker",
            "AgentExecutionError Worker Second",
            "TaskFailed Second Worker",
            "CrewKickoffFailed short",
        ]
    );
}

#[test]
fn a_kickoff_refused_at_execution_start_reports_no_lifecycle() {
    let global = fresh_registry();
    global
        .register_hook(
            EXECUTION_START,
            |_: &mut ExecutionStartContext| -> Result<(), HookAborted> {
                Err("closed today".into())
            },
        )
        .expect("registers");
    let llm = Arc::new(ScriptedLlm::new().answer("done"));
    let worker = agent("Worker", Vec::new(), &llm);
    let crew = Crew::builder()
        .agent(worker.clone())
        .task(Task::builder("Work").agent(&worker).build())
        .global_registry(global)
        .build()
        .expect("builds");
    let seen = lifecycle(&crew);

    crew.kickoff_blocking(()).expect_err("refused");

    assert!(take(&seen).is_empty());
}

/// A kickoff has begun once its INPUT hooks let it through: refused there,
/// it reports no lifecycle (its EXECUTION_END still fires, with the
/// failure); refused just after, for an input a task lacks, it reports its
/// start and its failure.
#[test]
fn a_kickoff_begins_once_its_input_hooks_let_it_through() {
    let global = fresh_registry();
    let ends = log();
    let sink = ends.clone();
    global
        .register_hook(EXECUTION_END, move |ctx: &mut ExecutionEndContext| {
            push(&sink, format!("{:?}", ctx.status));
        })
        .expect("registers");
    let refuse = global
        .register_hook(INPUT, |_: &mut InputContext| -> Result<(), HookAborted> {
            Err("not today".into())
        })
        .expect("registers");
    let llm = Arc::new(ScriptedLlm::new().answer("done"));
    let worker = agent("Worker", Vec::new(), &llm);
    let crew = Crew::builder()
        .name("gated")
        .agent(worker.clone())
        .task(Task::builder("Work on {topic}").agent(&worker).build())
        .global_registry(global.clone())
        .build()
        .expect("builds");
    let seen = lifecycle(&crew);

    crew.kickoff_blocking([("topic", "Rust")])
        .expect_err("refused at INPUT");
    assert!(take(&seen).is_empty(), "refused at INPUT: no lifecycle");
    assert_eq!(take(&ends), ["Failed"]);

    assert!(global.unregister_hook(INPUT, refuse));
    let error = crew.kickoff_blocking(()).expect_err("no topic given");
    assert!(
        matches!(error, CrewError::MissingInputs { .. }),
        "{error:?}"
    );
    assert_eq!(
        take(&seen),
        ["CrewKickoffStarted gated", "CrewKickoffFailed gated"]
    );
    // The log keeps both kickoffs' ends.
    assert_eq!(take(&ends), ["Failed", "Failed"]);
}

#[test]
fn a_nested_kickoff_reports_its_own_lifecycle_inside_the_outer_one() {
    // A tool of the outer crew kicks off an inner crew; both report to one
    // global bus, so the order of the whole is visible.
    let global = fresh_registry();
    let inner_llm = Arc::new(ScriptedLlm::new().answer("inner answer"));
    let inner_worker = agent("Inner", Vec::new(), &inner_llm);
    let inner = Crew::builder()
        .name("inner")
        .agent(inner_worker.clone())
        .task(Task::builder("Inner task").agent(&inner_worker).build())
        .global_registry(global.clone())
        .build()
        .expect("builds");
    let delegate = Tool::dynamic(
        "delegate",
        "Asks the inner crew",
        json!({"type": "object"}),
        move |_| {
            inner
                .kickoff_blocking(())
                .map(|output| json!(output.raw))
                .map_err(|error| error.to_string())
        },
    )
    .with_sync_placement(crew_runtime::SyncPlacement::BlockingPool);
    let outer_llm = Arc::new(
        ScriptedLlm::new()
            .call("delegate", json!({}))
            .answer("outer answer"),
    );
    let outer_worker = agent("Outer", vec![delegate], &outer_llm);
    let outer = Crew::builder()
        .name("outer")
        .agent(outer_worker.clone())
        .task(Task::builder("Outer task").agent(&outer_worker).build())
        .global_registry(global.clone())
        .build()
        .expect("builds");
    let seen = log();
    let sink = seen.clone();
    global.events().subscribe(move |event| {
        let line = match event {
            Event::CrewKickoffStarted(e) => format!("started {}", e.crew_name),
            Event::CrewKickoffCompleted(e) => format!("completed {}", e.crew_name),
            Event::TaskStarted(e) => format!("task {}", e.task_name),
            _ => return,
        };
        push(&sink, line);
    });

    outer.kickoff_blocking(()).expect("runs");

    assert_eq!(
        take(&seen),
        [
            "started outer",
            "task Outer task",
            "started inner",
            "task Inner task",
            "completed inner",
            "completed outer",
        ]
    );
}

#[test]
fn lifecycle_payloads_pass_the_crews_redaction() {
    let secret = "ghp_8bT4kLq9ZrX2mN7vC1wE5yH3jP6sD0fA9gQw";
    let llm = Arc::new(ScriptedLlm::new().answer(format!("the token is {secret}")));
    let worker = agent("Worker", Vec::new(), &llm);
    let crew = Crew::builder()
        .agent(worker.clone())
        .task(
            Task::builder("Find the token {hint}")
                .agent(&worker)
                .build(),
        )
        .global_registry(fresh_registry())
        .redact_with(SecretRedactor::new())
        .build()
        .expect("builds");
    let texts = log();
    let sink = texts.clone();
    crew.events()
        .subscribe(move |event| push(&sink, format!("{event:?}")));

    crew.kickoff_blocking([("hint", secret)]).expect("runs");

    let texts = take(&texts);
    assert!(texts.len() >= 8, "{texts:?}");
    for text in texts {
        assert!(!text.contains(secret), "leaked in {text}");
    }
}

/// The conversation is lent to `LLMCallStarted` rather than copied: a
/// listener that keeps every event still sees each call's messages as the
/// model received them, and keeping them changes nothing for the next turn.
#[test]
fn llm_call_started_carries_the_messages_the_model_received_even_when_kept() {
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("web_search", json!({"query": "rust"}))
            .call("web_search", json!({"query": "hooks"}))
            .answer("facts"),
    );
    let crew = crew(
        &fresh_registry(),
        agent("Researcher", vec![search_tool(&log())], &llm),
    );
    let kept = log();
    let sink = kept.clone();
    crew.events().subscribe(move |event| {
        if let Event::LlmCallStarted(e) = event {
            push(&sink, Arc::clone(&e.messages));
        }
    });
    crew.kickoff_blocking(()).expect("the kickoff runs");
    let kept = take(&kept);
    let received: Vec<Vec<ChatMessage>> = llm.requests().into_iter().map(|r| r.messages).collect();
    assert_eq!(received.len(), 3);
    assert_eq!(
        kept.iter().map(|m| m.as_ref().clone()).collect::<Vec<_>>(),
        received
    );
    // Each turn adds the model's call and its observation.
    assert_eq!(kept[1].len(), kept[0].len() + 2);
    assert_eq!(kept[2].len(), kept[1].len() + 2);
}
