//! SPEC §4: tasks, inputs, context, iteration limits, model failures and
//! crew-build errors.

mod common;

use std::sync::Arc;

use common::*;
use crew_runtime::llm::{LlmError, Role};
use crew_runtime::prelude::*;

#[test]
fn placeholders_are_interpolated_and_missing_input_is_an_error() {
    let global = fresh_registry();
    let llm = Arc::new(ScriptedLlm::new().answer("three facts"));
    let researcher = agent("Researcher", Vec::new(), &llm);
    let task = Task::builder("Research {topic} for {audience}")
        .expected_output("{count} facts about {topic}")
        .agent(&researcher)
        .build();
    let crew = Crew::builder()
        .agent(researcher)
        .task(task)
        .global_registry(global.clone())
        .build()
        .expect("builds");

    let error = crew
        .kickoff_blocking([("topic", "Rust")])
        .expect_err("audience and count are missing");
    assert_eq!(
        error,
        CrewError::MissingInputs {
            index: 1,
            task: "Research {topic} for {audience}".into(),
            missing: vec!["audience".into(), "count".into()],
            provided: vec!["topic".into()],
        }
    );
    assert_eq!(
        error.to_string(),
        "task 1 (\"Research {topic} for {audience}\") uses {audience}, {count} that kickoff was \
         not given; inputs given: topic"
    );
    assert_eq!(llm.asked(), 0, "nothing runs when an input is missing");

    let output = crew
        .kickoff_blocking(
            Inputs::new()
                .with("topic", "Rust")
                .with("audience", "students")
                .with("count", 3),
        )
        .expect("runs");
    assert_eq!(
        output.tasks_output[0].description,
        "Research Rust for students"
    );
    assert_eq!(output.tasks_output[0].expected_output, "3 facts about Rust");
    let prompt = llm.requests()[0]
        .task_prompt()
        .unwrap_or_default()
        .to_owned();
    assert!(
        prompt.contains("Current Task: Research Rust for students"),
        "{prompt}"
    );
    assert!(prompt.contains("3 facts about Rust"), "{prompt}");
}

#[test]
fn task_context_passes_earlier_outputs() {
    let global = fresh_registry();
    let research_llm = Arc::new(
        ScriptedLlm::new()
            .answer("Rust has no GC.")
            .answer("Plan: none"),
    );
    let researcher = agent("Researcher", Vec::new(), &research_llm);
    let write_llm = Arc::new(ScriptedLlm::new().answer("Report: Rust has no GC."));
    let writer = agent("Writer", Vec::new(), &write_llm);
    // A task's agent is the crew's agent itself (another agent that only
    // shares its role fails the build: `hardening_limits.rs`).
    let research = Task::builder("Research").agent(&researcher).build();
    let plan = Task::builder("Plan").agent(&researcher).build();
    let report = Task::builder("Write the report")
        .agent(&writer)
        .context([&research])
        .build();
    let crew = Crew::builder()
        .agents([researcher, writer])
        .tasks([research, plan, report])
        .global_registry(global.clone())
        .build()
        .expect("builds");

    let output = crew.kickoff_blocking(()).expect("runs");

    assert_eq!(output.raw, "Report: Rust has no GC.");
    let answers: Vec<(&str, &str)> = output
        .tasks_output
        .iter()
        .map(|t| (t.agent.as_str(), t.raw.as_str()))
        .collect();
    assert_eq!(
        answers,
        [
            ("Researcher", "Rust has no GC."),
            ("Researcher", "Plan: none"),
            ("Writer", "Report: Rust has no GC."),
        ]
    );
    let prompt = write_llm.requests()[0]
        .task_prompt()
        .unwrap_or_default()
        .to_owned();
    assert!(
        prompt.contains("This is the context you're working with:\nRust has no GC."),
        "{prompt}"
    );
    assert!(
        !prompt.contains("Plan: none"),
        "only the named context is passed"
    );
}

#[test]
fn agents_are_told_who_they_are_and_which_tools_they_have() {
    let global = fresh_registry();
    let llm = Arc::new(ScriptedLlm::new().answer("done"));
    let crew = crew(
        &global,
        agent("Researcher", vec![search_tool(&log())], &llm),
    );

    crew.kickoff_blocking(()).expect("runs");

    let request = &llm.requests()[0];
    assert_eq!(request.tools, ["web_search"]);
    assert_eq!(request.messages[0].role, Role::System);
    assert_eq!(
        request.messages[0].content,
        "You are Researcher. A test agent\nYour personal goal is: Get the task done"
    );
}

#[test]
fn iteration_limit_stops_the_agent_with_a_note() {
    let global = fresh_registry();
    let received = log();
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("web_search", json!({"query": "a"}))
            .call("web_search", json!({"query": "b"}))
            .call("web_search", json!({"query": "c"})),
    );
    let researcher = Agent::builder("Researcher")
        .tool(search_tool(&received))
        .llm(llm.clone())
        .max_iter(2)
        .build();
    let crew = Crew::builder()
        .agent(researcher.clone())
        .task(Task::builder("Loop").agent(&researcher).build())
        .global_registry(global.clone())
        .build()
        .expect("builds");

    let output = crew
        .kickoff_blocking(())
        .expect("the limit is not an error");

    assert_eq!(llm.asked(), 2);
    assert_eq!(take(&received).len(), 2);
    assert!(output.tasks_output[0].iteration_limit_reached);
    assert_eq!(
        output.raw,
        "Agent stopped: it reached its limit of 2 model turns (max_iter) without giving a final \
         answer."
    );
}

#[test]
fn model_failure_is_an_error_naming_the_agent() {
    let global = fresh_registry();
    // No model given: the default empty script fails on the first turn.
    let researcher = Agent::builder("Researcher").build();
    let crew = Crew::builder()
        .agent(researcher.clone())
        .task(Task::builder("Research").agent(&researcher).build())
        .global_registry(global.clone())
        .build()
        .expect("builds");

    let error = crew
        .kickoff_blocking(())
        .expect_err("the model cannot answer");

    assert_eq!(
        error,
        CrewError::Model {
            agent: "Researcher".into(),
            // Asked once, then again twice (the default max_retry_limit).
            source: LlmError::ScriptExhausted { asked: 3 },
        }
    );
}

#[test]
fn crew_build_errors_say_what_to_fix() {
    let researcher = Agent::builder("Researcher").build();
    let orphan = Task::builder("Orphan").build();
    let later = Task::builder("Later").agent(&researcher).build();
    let needs_later = Task::builder("Needs later")
        .agent(&researcher)
        .context([&later])
        .build();
    let twin = Agent::builder("Researcher").goal("other").build();
    let doubled = Agent::builder("Doubled")
        .tool(search_tool(&log()))
        .tool(search_tool(&log()))
        .build();

    let cases = [
        (
            Crew::builder().agent(researcher.clone()).build(),
            BuildError::NoTasks,
        ),
        (
            Crew::builder().task(orphan).build(),
            BuildError::TaskWithoutAgent {
                index: 1,
                task: "Orphan".into(),
            },
        ),
        (
            Crew::builder()
                .agents([researcher.clone(), twin])
                .task(later.clone())
                .build(),
            BuildError::DuplicateRole {
                role: "Researcher".into(),
            },
        ),
        (
            Crew::builder().tasks([needs_later, later]).build(),
            BuildError::ContextNotEarlier {
                index: 1,
                task: "Needs later".into(),
            },
        ),
        (
            Crew::builder()
                .task(Task::builder("x").agent(&doubled).build())
                .build(),
            BuildError::DuplicateTool {
                role: "Doubled".into(),
                tool: "web_search".into(),
            },
        ),
        (
            Crew::builder()
                .task(
                    Task::builder("x")
                        .agent(&Agent::builder("Lazy").max_iter(0).build())
                        .build(),
                )
                .build(),
            BuildError::ZeroMaxIter {
                role: "Lazy".into(),
            },
        ),
    ];
    for (result, expected) in cases {
        assert_eq!(result.map(|_| ()), Err(expected));
    }
}

#[test]
fn verbose_output_does_not_change_the_run() {
    let global = fresh_registry();
    global
        .register_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().tools(["delete_file"]),
            |_: &mut ToolCallHookContext| -> Result<(), HookAborted> {
                Err(HookAborted::new("no deletes", "policy"))
            },
        )
        .expect("registers");
    global
        .register_hook(POST_TOOL_CALL, |ctx: &mut ToolCallHookContext| {
            ctx.tool_result.as_deref().map(str::to_uppercase)
        })
        .expect("registers");
    let run = |verbose: bool| {
        let llm = Arc::new(
            ScriptedLlm::new()
                .calls([
                    ("web_search", json!({"query": "rust"})),
                    ("delete_file", json!({"path": "x"})),
                ])
                .call_raw("web_search", "[]")
                .answer("done"),
        );
        let researcher = Agent::builder("Researcher")
            .tool(search_tool(&log()))
            .llm(llm.clone())
            .verbose(verbose)
            .build();
        let crew = Crew::builder()
            .agent(researcher.clone())
            .task(Task::builder("Research").agent(&researcher).build())
            .global_registry(global.clone())
            .build()
            .expect("builds");
        let output = crew.kickoff_blocking(()).expect("runs");
        let seen: Vec<Vec<String>> = llm
            .requests()
            .iter()
            .map(|r| r.observations().into_iter().map(str::to_owned).collect())
            .collect();
        (output, seen)
    };

    let quiet = run(false);
    let verbose = run(true);

    assert_eq!(quiet, verbose);
    assert_eq!(
        quiet.1[1],
        [
            "RESULTS FOR RUST",
            "TOOL EXECUTION BLOCKED BY HOOK. TOOL: DELETE_FILE"
        ]
    );
}
