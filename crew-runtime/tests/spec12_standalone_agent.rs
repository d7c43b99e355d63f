//! SPEC §12 (what a CrewAI user sees, kept): an agent run on its own,
//! without a crew — CrewAI's `Agent.kickoff(messages)` — goes through
//! every point a crew's task meets (SPEC §6), on the global registry or
//! one of its own; a PRE_TOOL_CALL block works as in a crew; the output
//! carries the final answer and the conversation; errors say what is
//! wrong.

mod common;

use std::sync::Arc;

use common::*;
use crew_runtime::Role;
use crew_runtime::prelude::*;
use crew_runtime::testing::GlobalHooksFixture;
use crew_runtime::{
    ChatMessage, EXECUTION_END, EXECUTION_START, ExecutionEndContext, ExecutionStartContext,
    ExecutionStatus, INPUT, InputContext, InterceptionPoint, OUTPUT, OutputContext,
    POST_MODEL_CALL, POST_STEP, PRE_MODEL_CALL, PRE_STEP, StepContext, TokenUsage, clear_all_hooks,
    register_hook,
};

/// Registers on `hooks`, at every point, a hook that logs the point's name
/// and whether it saw a crew.
fn log_every_point(hooks: &HookRegistry) -> Log<String> {
    let seen = log();
    macro_rules! at {
        ($point:ident, $context:ty) => {{
            let sink = seen.clone();
            hooks
                .register_hook($point, move |ctx: &mut $context| {
                    let crew = if ctx.crew.is_some() { " (crew)" } else { "" };
                    push(&sink, format!("{}{crew}", stringify!($point)));
                })
                .expect("registers");
        }};
    }
    at!(EXECUTION_START, ExecutionStartContext);
    at!(INPUT, InputContext);
    at!(PRE_STEP, StepContext);
    at!(PRE_MODEL_CALL, LlmCallHookContext);
    at!(POST_MODEL_CALL, LlmCallHookContext);
    at!(PRE_TOOL_CALL, ToolCallHookContext);
    at!(POST_TOOL_CALL, ToolCallHookContext);
    at!(POST_STEP, StepContext);
    at!(OUTPUT, OutputContext);
    at!(EXECUTION_END, ExecutionEndContext);
    seen
}

fn researcher(
    llm: &Arc<ScriptedLlm>,
    hooks: &Arc<HookRegistry>,
    searched: &Log<SearchArgs>,
) -> Agent {
    Agent::builder("Researcher")
        .goal("Find facts")
        .tool(search_tool(searched))
        .llm(llm.clone())
        .global_registry(hooks.clone())
        .build()
}

fn one_search_then_answer() -> Arc<ScriptedLlm> {
    Arc::new(
        ScriptedLlm::new()
            .call("web_search", json!({"query": "rust"}))
            .answer("Rust is fast."),
    )
}

#[test]
fn every_point_fires_in_order_for_a_standalone_agent_with_no_crew() {
    let hooks = fresh_registry();
    let seen = log_every_point(&hooks);
    let agent = researcher(&one_search_then_answer(), &hooks, &log());

    let output = agent.kickoff_blocking("Research Rust").expect("runs");

    assert_eq!(output.raw, "Rust is fast.");
    assert_eq!(
        take(&seen),
        [
            "EXECUTION_START",
            "INPUT",
            "PRE_STEP",
            "PRE_MODEL_CALL",
            "POST_MODEL_CALL",
            "PRE_TOOL_CALL",
            "POST_TOOL_CALL",
            "PRE_MODEL_CALL",
            "POST_MODEL_CALL",
            "POST_STEP",
            "OUTPUT",
            "EXECUTION_END",
        ]
    );
}

#[tokio::test]
async fn the_async_kickoff_runs_the_same_points_and_can_be_spawned() {
    let hooks = fresh_registry();
    let seen = log_every_point(&hooks);
    let agent = researcher(&one_search_then_answer(), &hooks, &log());

    // Spawned: the kickoff's future is `Send`.
    let output = tokio::spawn(async move { agent.kickoff("Research Rust").await })
        .await
        .expect("the task finishes")
        .expect("runs");

    assert_eq!(output.raw, "Rust is fast.");
    assert_eq!(take(&seen).len(), 12);
}

#[test]
fn a_crews_own_hooks_do_not_fire_for_its_agent_run_alone() {
    let hooks = fresh_registry();
    let crew_saw = log();
    let sink = crew_saw.clone();
    let agent = researcher(&one_search_then_answer(), &hooks, &log());
    let crew = Crew::builder()
        .agent(agent.clone())
        .task(Task::builder("Research").agent(&agent).build())
        .global_registry(hooks.clone())
        .hook(PRE_TOOL_CALL, move |ctx: &mut ToolCallHookContext| {
            push(&sink, ctx.tool_name().to_owned());
        })
        .build()
        .expect("builds");

    agent.kickoff_blocking("Research Rust").expect("runs");

    assert!(take(&crew_saw).is_empty(), "the run is outside the crew");
    drop(crew);
}

#[test]
fn an_agents_filter_matches_the_standalone_agents_role() {
    let hooks = fresh_registry();
    let seen = log();
    for role in ["Researcher", "Writer"] {
        let sink = seen.clone();
        hooks
            .register_hook_with(
                PRE_MODEL_CALL,
                HookOptions::new().agents([role]).unchecked_filters(),
                move |_: &mut LlmCallHookContext| push(&sink, role),
            )
            .expect("registers");
    }
    let llm = Arc::new(ScriptedLlm::new().answer("done"));
    researcher(&llm, &hooks, &log())
        .kickoff_blocking("Go")
        .expect("runs");
    assert_eq!(take(&seen), ["Researcher"]);
}

#[test]
fn hooks_see_the_agent_and_the_prompt_as_the_task() {
    let hooks = fresh_registry();
    let seen = log();
    let sink = seen.clone();
    hooks
        .register_hook(PRE_TOOL_CALL, move |ctx: &mut ToolCallHookContext| {
            push(
                &sink,
                (
                    ctx.agent.as_ref().map(|a| a.role().to_owned()),
                    ctx.task.as_ref().map(|t| t.description().to_owned()),
                ),
            );
        })
        .expect("registers");
    let agent = researcher(&one_search_then_answer(), &hooks, &log());

    agent.kickoff_blocking("Research Rust").expect("runs");

    assert_eq!(
        take(&seen),
        [(
            Some("Researcher".to_owned()),
            Some("Research Rust".to_owned())
        )]
    );
}

#[test]
fn a_pre_tool_call_block_keeps_the_tool_from_running_and_the_agent_goes_on() {
    let hooks = fresh_registry();
    hooks
        .register_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().tools(["web_search"]),
            |_: &mut ToolCallHookContext| -> Result<(), HookAborted> {
                Err(HookAborted::new("no searching", "policy"))
            },
        )
        .expect("registers");
    let post = log();
    let sink = post.clone();
    hooks
        .register_hook(POST_TOOL_CALL, move |ctx: &mut ToolCallHookContext| {
            push(&sink, ctx.tool_result.clone());
        })
        .expect("registers");
    let searched = log();
    let llm = one_search_then_answer();
    let agent = researcher(&llm, &hooks, &searched);

    let output = agent.kickoff_blocking("Research Rust").expect("runs");

    assert!(take(&searched).is_empty(), "the tool never ran");
    let blocked = "Tool execution blocked by hook. Tool: web_search";
    assert_eq!(take(&post), [Some(blocked.to_owned())]);
    assert_eq!(llm.requests()[1].observations(), [blocked]);
    assert_eq!(output.raw, "Rust is fast.");
}

#[test]
fn the_output_carries_the_whole_conversation_as_the_model_saw_it() {
    let hooks = fresh_registry();
    hooks
        .register_hook(PRE_MODEL_CALL, |ctx: &mut LlmCallHookContext| {
            if ctx.iterations == 1 {
                ctx.messages.push(ChatMessage::user("Cite a source."));
            }
        })
        .expect("registers");
    hooks
        .register_hook(POST_STEP, |ctx: &mut StepContext| {
            Some(format!("{} [checked]", ctx.payload))
        })
        .expect("registers");
    let llm = one_search_then_answer();
    let agent = researcher(&llm, &hooks, &log());

    let output = agent
        .kickoff_blocking(vec![
            ChatMessage::user("What is Rust?"),
            ChatMessage::assistant("A language."),
            ChatMessage::user("Is it fast?"),
        ])
        .expect("runs");

    let summary: Vec<(Role, &str)> = output
        .messages
        .iter()
        .map(|m| (m.role, m.content.as_str()))
        .collect();
    assert_eq!(summary[0].0, Role::System);
    assert!(
        summary[0].1.starts_with("You are Researcher."),
        "{}",
        summary[0].1
    );
    assert_eq!(
        summary[1..],
        [
            (Role::User, "What is Rust?"),
            (Role::Assistant, "A language."),
            (Role::User, "Is it fast?"),
            (Role::User, "Cite a source."),
            (Role::Assistant, ""),
            (Role::Tool, "results for rust"),
            (Role::Assistant, "Rust is fast."),
        ]
    );
    assert_eq!(output.messages[5].tool_calls[0].name, "web_search");
    // The conversation is what the model was last sent, plus its final
    // answer.
    assert_eq!(output.messages[..7], llm.requests()[1].messages[..]);
    // POST_STEP changed the run's output, not what the model said.
    assert_eq!(output.raw, "Rust is fast. [checked]");
    assert_eq!(output.agent_role, "Researcher");
    assert!(!output.iteration_limit_reached);
}

#[test]
fn the_output_counts_the_runs_tokens() {
    let llm = Arc::new(
        ScriptedLlm::new()
            .reporting_usage(TokenUsage::new(10, 2, 12))
            .call("web_search", json!({"query": "rust"}))
            .answer("done"),
    );
    let agent = researcher(&llm, &fresh_registry(), &log());
    let first = agent.kickoff_blocking("Go").expect("runs");
    assert_eq!(first.token_usage, TokenUsage::new(20, 4, 24));
}

#[test]
fn a_pre_step_payload_reaches_the_model_as_context() {
    let hooks = fresh_registry();
    hooks
        .register_hook(PRE_STEP, |_: &mut StepContext| {
            Some("Rust 1.0 shipped in 2015.".to_owned())
        })
        .expect("registers");
    let llm = Arc::new(ScriptedLlm::new().answer("2015"));
    let agent = researcher(&llm, &hooks, &log());
    agent
        .kickoff_blocking("When did Rust 1.0 ship?")
        .expect("runs");
    let sent = &llm.requests()[0].messages;
    assert_eq!(
        sent[1].content,
        "This is the context you're working with:\nRust 1.0 shipped in 2015."
    );
    assert_eq!(sent[2].content, "When did Rust 1.0 ship?");
}

#[test]
fn braces_in_a_prompt_are_sent_as_they_are() {
    let llm = Arc::new(ScriptedLlm::new().answer("ok"));
    let agent = researcher(&llm, &fresh_registry(), &log());
    agent
        .kickoff_blocking("Format {\"topic\": \"{topic}\"}")
        .expect("no input is missing: a prompt is no template");
    assert_eq!(
        llm.requests()[0].messages[1].content,
        "Format {\"topic\": \"{topic}\"}"
    );
}

#[test]
fn without_a_registry_of_its_own_the_agent_uses_the_global_one() {
    let _fixture = GlobalHooksFixture::new();
    clear_all_hooks();
    register_hook(POST_STEP, |ctx: &mut StepContext| {
        Some(format!("{} (global)", ctx.payload))
    })
    .expect("registers");
    let agent = Agent::builder("Writer")
        .llm(Arc::new(ScriptedLlm::new().answer("draft")))
        .build();
    assert_eq!(
        agent.kickoff_blocking("Write").expect("runs").raw,
        "draft (global)"
    );
}

#[test]
fn task_agent_and_model_events_are_reported_without_a_crew() {
    let hooks = fresh_registry();
    let seen = log();
    let sink = seen.clone();
    hooks.events().subscribe(move |event| {
        let line = match event {
            Event::CrewKickoffStarted(_) => "CrewKickoffStarted".to_owned(),
            Event::CrewKickoffCompleted(_) => "CrewKickoffCompleted".to_owned(),
            Event::TaskStarted(e) => format!("TaskStarted {} crew={:?}", e.task_name, e.crew),
            Event::AgentExecutionStarted(e) => format!("AgentExecutionStarted {}", e.agent_role),
            Event::LlmCallCompleted(e) => format!("LlmCallCompleted {}", e.agent_role),
            Event::ToolUsageFinished(e) => {
                format!("ToolUsageFinished {} crew={:?}", e.tool_name, e.crew)
            }
            Event::AgentExecutionCompleted(e) => {
                format!("AgentExecutionCompleted {}", e.agent_role)
            }
            Event::TaskCompleted(e) => format!("TaskCompleted {}", e.output),
            _ => return,
        };
        push(&sink, line);
    });
    let agent = researcher(&one_search_then_answer(), &hooks, &log());

    agent.kickoff_blocking("Research Rust").expect("runs");

    assert_eq!(
        take(&seen),
        [
            "TaskStarted Research Rust crew=\"\"",
            "AgentExecutionStarted Researcher",
            "LlmCallCompleted Researcher",
            "ToolUsageFinished web_search crew=None",
            "LlmCallCompleted Researcher",
            "AgentExecutionCompleted Researcher",
            "TaskCompleted Rust is fast.",
        ]
    );
}

#[test]
fn an_abort_ends_the_run_with_the_point_and_execution_end_reports_it() {
    let hooks = fresh_registry();
    hooks
        .register_hook(PRE_MODEL_CALL, |_: &mut LlmCallHookContext| {
            Err::<(), _>(HookAborted::new("over budget", "budget"))
        })
        .expect("registers");
    let ends = log();
    let sink = ends.clone();
    hooks
        .register_hook(EXECUTION_END, move |ctx: &mut ExecutionEndContext| {
            push(&sink, ctx.status);
        })
        .expect("registers");
    let llm = one_search_then_answer();
    let agent = researcher(&llm, &hooks, &log());

    let error = agent
        .kickoff_blocking("Research Rust")
        .expect_err("the model call is blocked");

    assert_eq!(error.aborted_at(), Some(InterceptionPoint::PRE_MODEL_CALL));
    assert_eq!(
        error.to_string(),
        "the run was stopped at PRE_MODEL_CALL (agent `Researcher`): hook aborted by budget: over budget"
    );
    assert_eq!(take(&ends), [ExecutionStatus::Failed]);
    assert!(llm.requests().is_empty(), "the model was never asked");
}

#[test]
fn no_message_is_a_clear_error() {
    let agent = researcher(&one_search_then_answer(), &fresh_registry(), &log());
    let error = agent
        .kickoff_blocking(Vec::<ChatMessage>::new())
        .expect_err("nothing to answer");
    assert_eq!(
        error,
        CrewError::NoMessages {
            agent: "Researcher".into()
        }
    );
    assert_eq!(
        error.to_string(),
        "agent `Researcher` was kicked off with no message: give it a prompt or a conversation"
    );
}

#[test]
fn an_agent_no_crew_could_run_is_a_clear_error() {
    let agent = Agent::builder("Researcher")
        .llm(one_search_then_answer())
        .max_iter(0)
        .global_registry(fresh_registry())
        .build();
    let error = agent.kickoff_blocking("Go").expect_err("max_iter 0");
    assert!(
        matches!(
            &error,
            CrewError::InvalidAgent { source, .. }
                if matches!(**source, BuildError::ZeroMaxIter { .. })
        ),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .starts_with("agent `Researcher` cannot run: agent `Researcher` has max_iter 0"),
        "{error}"
    );
}

#[test]
fn a_failing_model_names_the_agent() {
    let agent = researcher(&Arc::new(ScriptedLlm::new()), &fresh_registry(), &log());
    let error = agent
        .kickoff_blocking("Go")
        .expect_err("the script is empty");
    assert!(
        matches!(&error, CrewError::Model { agent, .. } if agent == "Researcher"),
        "{error:?}"
    );
}

#[test]
fn an_agent_that_reaches_its_limit_says_so_and_keeps_the_conversation() {
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("web_search", json!({"query": "a"}))
            .call("web_search", json!({"query": "b"})),
    );
    let agent = Agent::builder("Researcher")
        .tool(search_tool(&log()))
        .llm(llm)
        .max_iter(2)
        .global_registry(fresh_registry())
        .build();
    let output = agent.kickoff_blocking("Search").expect("stops with a note");
    assert!(output.iteration_limit_reached);
    assert!(output.raw.starts_with("Agent stopped"), "{}", output.raw);
    let observations: Vec<&str> = output
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.content.as_str())
        .collect();
    assert_eq!(observations, ["results for a", "results for b"]);
}
