//! SPEC §17 (what a CrewAI user sees, kept), its last items: the prompt an
//! `AgentExecutionStarted` carries, an `EXECUTION_END` edit reported as
//! one, the name of a legacy hook registered from a function, and the task
//! a standalone agent's model-call hooks see (none, as the reference).

mod common;

use std::sync::Arc;

use common::*;
use crew_runtime::events::HookDispatchedEvent;
use crew_runtime::guards::SecretRedactor;
use crew_runtime::prelude::*;
use crew_runtime::testing::GlobalHooksFixture;
use crew_runtime::{
    EXECUTION_END, EventBus, ExecutionEndContext, InterceptionPoint, POST_MODEL_CALL,
    PRE_MODEL_CALL, clear_all_hooks, get_hooks,
    legacy::{
        register_after_llm_call_hook, register_after_tool_call_hook, register_before_llm_call_hook,
        register_before_tool_call_hook,
    },
};

/// Every `AgentExecutionStarted` prompt, in order.
fn task_prompts(bus: &EventBus) -> Log<String> {
    let seen = log();
    let sink = seen.clone();
    bus.subscribe(move |event| {
        if let Event::AgentExecutionStarted(e) = event {
            push(&sink, e.task_prompt.clone());
        }
    });
    seen
}

/// Every hook dispatch, in order.
fn dispatches(bus: &EventBus) -> Log<HookDispatchedEvent> {
    let seen = log();
    let sink = seen.clone();
    bus.subscribe(move |event| {
        if let Event::HookDispatched(e) = event {
            push(&sink, e.clone());
        }
    });
    seen
}

#[test]
fn spec17_agent_execution_started_carries_the_whole_task_prompt() {
    let llm = Arc::new(ScriptedLlm::new().answer("three facts").answer("report"));
    let writer = agent("Writer", vec![], &llm);
    let research = Task::builder("Research {topic}")
        .expected_output("Three facts about {topic}")
        .agent(&writer)
        .build();
    let write = Task::builder("Write about {topic}")
        .expected_output("One paragraph")
        .agent(&writer)
        .build();
    let crew = Crew::builder()
        .name("newsroom")
        .agent(writer)
        .tasks([research, write])
        .global_registry(fresh_registry())
        .build()
        .expect("builds");
    let prompts = task_prompts(crew.events());

    crew.kickoff_blocking([("topic", "Rust")]).expect("runs");

    // Each prompt is the task message the model got: the description with
    // its inputs filled in, the expected output, the earlier task's output
    // as context.
    let sent: Vec<String> = llm
        .requests()
        .iter()
        .map(|request| request.task_prompt().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(take(&prompts), sent);
    let [first, second] = &sent[..] else {
        panic!("two model calls, one per task: {sent:?}");
    };
    assert!(first.contains("Research Rust"), "{first}");
    assert!(first.contains("Three facts about Rust"), "{first}");
    assert!(second.contains("Write about Rust"), "{second}");
    assert!(second.contains("One paragraph"), "{second}");
    assert!(second.contains("three facts"), "the context: {second}");
}

const SECRET: &str = "ghp_8bT4kLq9ZrX2mN7vC1wE5yH3jP6sD0fA9gQw";

#[test]
fn spec17_the_task_prompt_passes_the_crews_redaction() {
    let llm = Arc::new(ScriptedLlm::new().answer("done"));
    let worker = agent("Worker", vec![], &llm);
    let task = Task::builder("Check the key {key}")
        .expected_output("A verdict")
        .agent(&worker)
        .build();
    let crew = Crew::builder()
        .agent(worker)
        .task(task)
        .global_registry(fresh_registry())
        .redact_with(SecretRedactor::new())
        .build()
        .expect("builds");
    let prompts = task_prompts(crew.events());

    crew.kickoff_blocking([("key", SECRET)]).expect("runs");

    let prompts = take(&prompts);
    assert_eq!(prompts.len(), 1);
    assert!(!prompts[0].contains(SECRET), "{}", prompts[0]);
    assert_eq!(
        Some(prompts[0].as_str()),
        llm.requests()[0].task_prompt(),
        "the event and the model see one prompt"
    );
}

#[test]
fn spec17_an_end_hook_that_edits_the_output_is_reported_modified() {
    let hooks = fresh_registry();
    hooks
        .register_hook(EXECUTION_END, |ctx: &mut ExecutionEndContext| {
            if let Some(output) = &mut ctx.output {
                output.raw.push_str(" [signed]");
            }
        })
        .expect("registers");
    let llm = Arc::new(ScriptedLlm::new().answer("done"));
    let crew = crew(&hooks, agent("Worker", vec![], &llm));
    let seen = dispatches(crew.events());

    let output = crew.kickoff_blocking(()).expect("runs");

    assert_eq!(output.raw, "done [signed]");
    let end: Vec<(&str, usize)> = take(&seen)
        .iter()
        .filter(|e| e.point == InterceptionPoint::EXECUTION_END)
        .map(|e| (e.outcome, e.hooks_run))
        .collect();
    assert_eq!(end, [("modified", 1)]);
}

#[test]
fn spec17_an_end_hook_that_only_reads_is_reported_proceeded() {
    let hooks = fresh_registry();
    let read = log();
    let sink = read.clone();
    hooks
        .register_hook(EXECUTION_END, move |ctx: &mut ExecutionEndContext| {
            push(&sink, ctx.output.as_ref().map(|o| o.raw.clone()));
        })
        .expect("registers");
    let llm = Arc::new(ScriptedLlm::new().answer("done"));
    let crew = crew(&hooks, agent("Worker", vec![], &llm));
    let seen = dispatches(crew.events());

    let output = crew.kickoff_blocking(()).expect("runs");

    assert_eq!(output.raw, "done");
    assert_eq!(take(&read), [Some("done".to_owned())]);
    let end: Vec<&str> = take(&seen)
        .iter()
        .filter(|e| e.point == InterceptionPoint::EXECUTION_END)
        .map(|e| e.outcome)
        .collect();
    assert_eq!(end, ["proceeded"]);
}

#[test]
fn spec17_an_end_hook_that_edits_a_failed_runs_context_is_reported_proceeded() {
    // A failed run's error stands whatever END hooks write: nothing they do
    // changes what the kickoff returns.
    let hooks = fresh_registry();
    hooks
        .register_hook(EXECUTION_END, |ctx: &mut ExecutionEndContext| {
            ctx.output = Some(CrewOutput::default());
            ctx.error = Some("rewritten".to_owned());
        })
        .expect("registers");
    let llm = Arc::new(ScriptedLlm::new());
    let crew = crew(&hooks, agent("Worker", vec![], &llm));
    let seen = dispatches(crew.events());

    let error = crew
        .kickoff_blocking(())
        .expect_err("the model has no answer");

    assert!(!error.to_string().contains("rewritten"), "{error}");
    let end: Vec<&str> = take(&seen)
        .iter()
        .filter(|e| e.point == InterceptionPoint::EXECUTION_END)
        .map(|e| e.outcome)
        .collect();
    assert_eq!(end, ["proceeded"]);
}

/// A legacy before hook that blocks `ping`.
fn block_ping(ctx: &mut ToolCallHookContext) -> bool {
    ctx.tool_name() != "ping"
}

/// A legacy after hook that leaves every result as it is.
fn keep_result(_: &mut ToolCallHookContext) -> Option<String> {
    None
}

/// A legacy model hook that lets every call through.
fn allow_call(_: &mut LlmCallHookContext) -> bool {
    true
}

/// A legacy after-model hook that keeps every answer.
fn keep_answer(_: &mut LlmCallHookContext) -> Option<String> {
    None
}

#[test]
fn spec17_a_legacy_hook_from_a_function_is_named_by_the_function() {
    let hooks = HookRegistry::new();
    hooks.register_before_tool_call_hook(block_ping);
    hooks.register_after_tool_call_hook_with(HookOptions::new().tools(["ping"]), keep_result);
    hooks.register_before_llm_call_hook(allow_call);
    hooks.register_after_llm_call_hook(keep_answer);

    let name = |point: InterceptionPoint| -> Vec<String> {
        hooks.get_hooks(point).into_iter().map(|h| h.name).collect()
    };
    assert_eq!(name(InterceptionPoint::PRE_TOOL_CALL), ["block_ping"]);
    assert_eq!(name(InterceptionPoint::POST_TOOL_CALL), ["keep_result"]);
    assert_eq!(name(InterceptionPoint::PRE_MODEL_CALL), ["allow_call"]);
    assert_eq!(name(InterceptionPoint::POST_MODEL_CALL), ["keep_answer"]);

    // The name is what a block reports as its source.
    let mut ctx = ToolCallHookContext::new("ping", Default::default());
    let outcome = hooks.dispatch(PRE_TOOL_CALL, &mut ctx);
    assert_eq!(
        outcome.aborted().map(|abort| abort.source.as_str()),
        Some("block_ping")
    );
}

#[test]
fn spec17_a_legacy_hook_from_a_function_is_named_by_the_function_through_the_free_functions() {
    let _fixture = GlobalHooksFixture::new();
    clear_all_hooks();
    register_before_tool_call_hook(block_ping);
    register_after_tool_call_hook(keep_result);
    register_before_llm_call_hook(allow_call);
    register_after_llm_call_hook(keep_answer);

    let names: Vec<String> = [
        InterceptionPoint::PRE_TOOL_CALL,
        InterceptionPoint::POST_TOOL_CALL,
        InterceptionPoint::PRE_MODEL_CALL,
        InterceptionPoint::POST_MODEL_CALL,
    ]
    .into_iter()
    .flat_map(get_hooks)
    .map(|hook| hook.name)
    .collect();
    assert_eq!(
        names,
        ["block_ping", "keep_result", "allow_call", "keep_answer"]
    );
}

#[test]
fn spec17_an_attribute_or_named_hook_keeps_its_name() {
    let hooks = HookRegistry::new();
    hooks.register_before_tool_call_hook_with(HookOptions::new().name("ping-guard"), block_ping);
    hooks
        .register_hook(PRE_TOOL_CALL, |_: &mut ToolCallHookContext| {})
        .expect("registers");

    let names: Vec<String> = hooks
        .get_hooks(InterceptionPoint::PRE_TOOL_CALL)
        .into_iter()
        .map(|hook| hook.name)
        .collect();
    assert_eq!(names[0], "ping-guard", "a name given wins");
    assert!(
        names[1].ends_with("{{closure}}"),
        "a closure keeps its type's name: {}",
        names[1]
    );
}

#[test]
fn spec17_a_standalone_agents_model_hooks_see_no_task() {
    let hooks = fresh_registry();
    let seen = log();
    let record = |sink: Log<_>| {
        move |ctx: &mut LlmCallHookContext| {
            push(
                &sink,
                (
                    ctx.agent.as_ref().map(|a| a.role().to_owned()),
                    ctx.task.as_ref().map(|t| t.description().to_owned()),
                ),
            );
        }
    };
    hooks
        .register_hook(PRE_MODEL_CALL, record(seen.clone()))
        .expect("registers");
    hooks
        .register_hook(POST_MODEL_CALL, record(seen.clone()))
        .expect("registers");
    let advisor = Agent::builder("Advisor")
        .llm(Arc::new(ScriptedLlm::new().answer("Use Rust.")))
        .global_registry(hooks)
        .build();

    advisor
        .kickoff_blocking("Which language for a CLI?")
        .expect("runs");

    let advisor_no_task = (Some("Advisor".to_owned()), None);
    assert_eq!(take(&seen), [advisor_no_task.clone(), advisor_no_task]);
}

#[test]
fn spec17_a_crews_model_hooks_still_see_their_task() {
    let hooks = fresh_registry();
    let seen = log();
    let sink = seen.clone();
    hooks
        .register_hook(PRE_MODEL_CALL, move |ctx: &mut LlmCallHookContext| {
            push(&sink, ctx.task.as_ref().map(|t| t.description().to_owned()));
        })
        .expect("registers");
    let llm = Arc::new(ScriptedLlm::new().answer("done"));
    let crew = crew(&hooks, agent("Worker", vec![], &llm));

    crew.kickoff_blocking(()).expect("runs");

    assert_eq!(take(&seen), [Some("Do the work".to_owned())]);
}
