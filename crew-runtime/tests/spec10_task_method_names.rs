//! SPEC §10: a task's name is the one `TaskBuilder::name(..)` gave it,
//! else the name of the `#[task]` method that made it (inside
//! `#[crew_base]`), else its description; step contexts, task infos and
//! events carry that name.

mod common;

use std::sync::Arc;

use common::*;
use crew_runtime::prelude::*;
use crew_runtime::{PRE_STEP, StepContext};

#[derive(Clone)]
struct Newsroom {
    llm: Arc<ScriptedLlm>,
    hooks: Arc<HookRegistry>,
}

#[crew_base]
impl Newsroom {
    #[agent]
    fn writer(&self) -> Agent {
        Agent::builder("Writer").llm(self.llm.clone()).build()
    }

    #[task]
    fn research(&self) -> Task {
        Task::builder("Research {topic}")
            .agent(&self.writer())
            .build()
    }

    #[task]
    fn r#write(&self) -> Task {
        Task::builder("Write about {topic}")
            .name("final article")
            .agent(&self.writer())
            .build()
    }

    #[crew]
    fn crew(&self) -> Result<Crew, BuildError> {
        Crew::builder()
            .agents(self.agents())
            .tasks(self.tasks())
            .global_registry(self.hooks.clone())
            .build()
    }
}

#[derive(Clone)]
struct PlainTasks;

#[crew_base]
impl PlainTasks {
    #[task]
    fn summarize(&self) -> Task {
        Task::builder("Summarize the news").build()
    }

    #[task]
    fn translate(&self) -> Task {
        Task::builder("Translate the summary")
            .name("translation")
            .build()
    }
}

// A `#[task]` method may return a `Result` holding the task.
#[derive(Clone)]
struct FallibleTasks;

#[crew_base]
impl FallibleTasks {
    #[task]
    fn review(&self) -> Result<Task, String> {
        Ok(Task::builder("Review the article").build())
    }
}

#[test]
fn a_task_method_without_a_name_is_named_after_the_method() {
    let names: Vec<String> = PlainTasks
        .tasks()
        .iter()
        .map(|task| task.name().to_owned())
        .collect();
    assert_eq!(names, ["summarize", "translation"]);
}

#[test]
fn a_task_in_a_result_is_named_after_its_method() {
    let review = FallibleTasks.tasks().remove(0).expect("a task");
    assert_eq!(review.name(), "review");
}

#[test]
fn an_explicit_name_wins_over_the_method_name() {
    let translate = PlainTasks.tasks().remove(1);
    assert_eq!(translate.name(), "translation");
    // Called directly, the method's task keeps what its builder gave it.
    assert_eq!(PlainTasks.summarize().name(), "Summarize the news");
}

#[test]
fn step_contexts_task_infos_and_events_carry_the_method_name() {
    let hooks = fresh_registry();
    let steps = log();
    let sink = steps.clone();
    hooks
        .register_hook(PRE_STEP, move |ctx: &mut StepContext| {
            let task = ctx.task.as_ref().map(|task| task.name().to_owned());
            push(&sink, (ctx.step_name.clone(), task));
        })
        .expect("registers");
    let llm = Arc::new(ScriptedLlm::new().answer("notes").answer("article"));
    let crew = Newsroom {
        llm,
        hooks: hooks.clone(),
    }
    .crew()
    .expect("builds");
    let started = log();
    let sink = started.clone();
    crew.events().subscribe(move |event| {
        if let Event::TaskStarted(task) = event {
            push(&sink, task.task_name.clone());
        }
    });

    crew.kickoff_blocking([("topic", "Rust")]).expect("runs");

    assert_eq!(
        take(&steps),
        [
            ("research".to_owned(), Some("research".to_owned())),
            ("final article".to_owned(), Some("final article".to_owned())),
        ]
    );
    assert_eq!(take(&started), ["research", "final article"]);
}
