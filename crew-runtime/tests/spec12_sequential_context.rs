//! SPEC §12: in a sequential crew, a task with no explicit `context`
//! receives the outputs of all earlier tasks, as in CrewAI; an explicit
//! `context` (even an empty one) replaces that. Tasks have names, which
//! the step contexts carry.

mod common;

use std::sync::Arc;

use common::*;
use crew_runtime::prelude::*;
use crew_runtime::{PRE_STEP, StepContext};

const CONTEXT: &str = "This is the context you're working with:\n";

fn prompt_of(llm: &ScriptedLlm) -> String {
    llm.requests()[0]
        .task_prompt()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn a_task_without_explicit_context_receives_every_earlier_output() {
    let first_llm = Arc::new(
        ScriptedLlm::new()
            .answer("Rust has no GC.")
            .answer("Plan: a talk"),
    );
    let researcher = agent("Researcher", Vec::new(), &first_llm);
    let write_llm = Arc::new(ScriptedLlm::new().answer("Report"));
    let writer = agent("Writer", Vec::new(), &write_llm);
    let research = Task::builder("Research").agent(&researcher).build();
    let plan = Task::builder("Plan").agent(&researcher).build();
    let report = Task::builder("Write the report").agent(&writer).build();
    let crew = Crew::builder()
        .agents([researcher, writer])
        .tasks([research, plan, report])
        .global_registry(fresh_registry())
        .build()
        .expect("builds");

    crew.kickoff_blocking(()).expect("runs");

    let prompt = prompt_of(&write_llm);
    assert!(prompt.contains(CONTEXT), "{prompt}");
    let context = prompt.split(CONTEXT).nth(1).unwrap_or_default();
    let research_at = context.find("Rust has no GC.");
    let plan_at = context.find("Plan: a talk");
    assert!(
        research_at.is_some() && plan_at.is_some() && research_at < plan_at,
        "both earlier outputs, in order: {prompt}"
    );
    // The second task got the first's output.
    let plan_prompt = first_llm.requests()[1]
        .task_prompt()
        .unwrap_or_default()
        .to_owned();
    assert!(
        plan_prompt.contains(&format!("{CONTEXT}Rust has no GC.")),
        "{plan_prompt}"
    );
    // The first task has nothing before it.
    assert!(!prompt_of(&first_llm).contains(CONTEXT));
}

#[test]
fn an_explicit_context_replaces_the_default_even_when_empty() {
    let llm = Arc::new(
        ScriptedLlm::new()
            .answer("one")
            .answer("two")
            .answer("three")
            .answer("four"),
    );
    let worker = agent("Worker", Vec::new(), &llm);
    let first = Task::builder("First").agent(&worker).build();
    let second = Task::builder("Second").agent(&worker).build();
    let only_first = Task::builder("Third")
        .agent(&worker)
        .context([&first])
        .build();
    let alone = Task::builder("Fourth")
        .agent(&worker)
        .without_context()
        .build();
    let crew = Crew::builder()
        .agent(worker)
        .tasks([first, second, only_first, alone])
        .global_registry(fresh_registry())
        .build()
        .expect("builds");

    crew.kickoff_blocking(()).expect("runs");

    let prompts: Vec<String> = llm
        .requests()
        .iter()
        .map(|request| request.task_prompt().unwrap_or_default().to_owned())
        .collect();
    assert!(
        prompts[2].contains(&format!("{CONTEXT}one\n"))
            || prompts[2].contains(&format!("{CONTEXT}one"))
    );
    assert!(!prompts[2].contains("two"), "{}", prompts[2]);
    assert!(!prompts[3].contains(CONTEXT), "{}", prompts[3]);
}

#[test]
fn tasks_are_named_by_their_builder_or_their_description() {
    let llm = Arc::new(ScriptedLlm::new().answer("a").answer("b"));
    let worker = agent("Worker", Vec::new(), &llm);
    let named = Task::builder("Research {topic}")
        .name("research")
        .agent(&worker)
        .build();
    let unnamed = Task::builder("Summarize").agent(&worker).build();
    assert_eq!(named.name(), "research");
    assert_eq!(unnamed.name(), "Summarize");
    let seen = log();
    let sink = seen.clone();
    let global = fresh_registry();
    global
        .register_hook(PRE_STEP, move |ctx: &mut StepContext| {
            push(
                &sink,
                ctx.task
                    .as_ref()
                    .map(|task| task.name().to_owned())
                    .unwrap_or_default(),
            );
        })
        .expect("registers");
    let crew = Crew::builder()
        .agent(worker)
        .tasks([named, unnamed])
        .global_registry(global)
        .build()
        .expect("builds");

    crew.kickoff_blocking([("topic", "Rust")]).expect("runs");

    assert_eq!(take(&seen), ["research", "Summarize"]);
}
