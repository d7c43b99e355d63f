//! SPEC §12 (what a CrewAI user sees, kept): a task's `output_file` gets
//! the task's output when the task finishes, as the `POST_STEP` hooks left
//! it (the last point that can change a task's output, SPEC §6), with its
//! parent folders created; a file that cannot be written is a clear error
//! of the kickoff naming the path, never a panic.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::*;
use crew_runtime::guards::SecretRedactor;
use crew_runtime::prelude::*;
use crew_runtime::{
    EXECUTION_END, ExecutionEndContext, ExecutionStatus, OUTPUT, OutputContext, POST_STEP,
    StepContext,
};

fn writer(llm: &Arc<ScriptedLlm>) -> Agent {
    agent("Writer", Vec::new(), llm)
}

fn crew_with(task: Task, agent: Agent, hooks: &Arc<HookRegistry>) -> Crew {
    Crew::builder()
        .agent(agent)
        .task(task)
        .global_registry(hooks.clone())
        .build()
        .expect("builds")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).expect("the output file was written")
}

#[test]
fn the_file_holds_the_output_as_post_step_hooks_left_it() {
    let folder = tempfile::tempdir().expect("a temporary folder");
    let path = folder.path().join("report.md");
    let llm = Arc::new(ScriptedLlm::new().answer("draft"));
    let writer = writer(&llm);
    let task = Task::builder("Write")
        .agent(&writer)
        .output_file(&path)
        .build();
    let hooks = fresh_registry();
    hooks
        .register_hook(POST_STEP, |ctx: &mut StepContext| {
            Some(format!("{} (reviewed)", ctx.payload))
        })
        .expect("registers");
    // OUTPUT changes what the kickoff returns, not the task's output.
    hooks
        .register_hook(OUTPUT, |ctx: &mut OutputContext| {
            ctx.output.raw.push_str(" [signed]");
        })
        .expect("registers");
    let crew = crew_with(task, writer, &hooks);

    let output = crew.kickoff_blocking(()).expect("runs");

    assert_eq!(read(&path), "draft (reviewed)");
    assert_eq!(output.tasks_output[0].raw, "draft (reviewed)");
    assert_eq!(output.raw, "draft (reviewed) [signed]");
}

#[test]
fn missing_parent_folders_are_created_and_an_old_file_is_replaced() {
    let folder = tempfile::tempdir().expect("a temporary folder");
    let path = folder.path().join("out/2026/report.md");
    let llm = Arc::new(ScriptedLlm::new().answer("new"));
    let writer = writer(&llm);
    let task = Task::builder("Write")
        .agent(&writer)
        .output_file(&path)
        .build();
    crew_with(task, writer, &fresh_registry())
        .kickoff_blocking(())
        .expect("runs");
    assert_eq!(read(&path), "new");

    std::fs::write(&path, "an older, longer report").expect("writes");
    let llm = Arc::new(ScriptedLlm::new().answer("newer"));
    let writer = self::writer(&llm);
    let task = Task::builder("Write")
        .agent(&writer)
        .output_file(&path)
        .build();
    crew_with(task, writer, &fresh_registry())
        .kickoff_blocking(())
        .expect("runs");
    assert_eq!(read(&path), "newer");
}

#[test]
fn each_task_writes_its_own_file_before_the_next_task_runs() {
    let folder = tempfile::tempdir().expect("a temporary folder");
    let first = folder.path().join("first.md");
    let second = folder.path().join("second.md");
    let seen_by_second = log();
    let sink = seen_by_second.clone();
    let check = first.clone();
    let llm = Arc::new(ScriptedLlm::new().answer("one").answer_with(move |_| {
        push(&sink, std::fs::read_to_string(&check).ok());
        "two".to_owned()
    }));
    let writer = writer(&llm);
    let crew = Crew::builder()
        .agent(writer.clone())
        .task(
            Task::builder("First")
                .agent(&writer)
                .output_file(&first)
                .build(),
        )
        .task(
            Task::builder("Second")
                .agent(&writer)
                .output_file(&second)
                .build(),
        )
        .global_registry(fresh_registry())
        .build()
        .expect("builds");

    crew.kickoff_blocking(()).expect("runs");

    assert_eq!(take(&seen_by_second), [Some("one".to_owned())]);
    assert_eq!((read(&first), read(&second)), ("one".into(), "two".into()));
}

#[test]
fn placeholders_in_the_path_are_filled_from_the_inputs() {
    let folder = tempfile::tempdir().expect("a temporary folder");
    let llm = Arc::new(ScriptedLlm::new().answer("facts"));
    let writer = writer(&llm);
    let task = Task::builder("Research {topic}")
        .agent(&writer)
        .output_file(folder.path().join("{topic}/notes.md"))
        .build();
    crew_with(task, writer, &fresh_registry())
        .kickoff_blocking([("topic", "rust")])
        .expect("runs");
    assert_eq!(read(&folder.path().join("rust/notes.md")), "facts");
}

#[test]
fn a_placeholder_of_the_path_without_an_input_is_a_missing_input() {
    let llm = Arc::new(ScriptedLlm::new().answer("facts"));
    let writer = writer(&llm);
    let task = Task::builder("Research")
        .agent(&writer)
        .output_file("notes/{topic}.md")
        .build();
    let error = crew_with(task, writer, &fresh_registry())
        .kickoff_blocking(())
        .expect_err("no topic given");
    let CrewError::MissingInputs { missing, .. } = &error else {
        panic!("expected MissingInputs, got {error:?}");
    };
    assert_eq!(missing, &["topic"]);
    assert!(llm.requests().is_empty(), "no task ran");
}

#[test]
fn an_input_that_leads_the_path_out_of_its_folder_is_refused_before_any_task_runs() {
    let folder = tempfile::tempdir().expect("a temporary folder");
    let llm = Arc::new(ScriptedLlm::new().answer("facts"));
    let writer = writer(&llm);
    let task = Task::builder("Research")
        .name("research")
        .agent(&writer)
        .output_file(folder.path().join("notes/{topic}.md"))
        .build();
    let error = crew_with(task, writer, &fresh_registry())
        .kickoff_blocking([("topic", "../../escaped")])
        .expect_err("the path leaves its folder");
    let CrewError::OutputFile { task, kind, .. } = &error else {
        panic!("expected OutputFile, got {error:?}");
    };
    assert_eq!(
        (task.as_str(), *kind),
        ("research", std::io::ErrorKind::InvalidInput)
    );
    assert!(error.to_string().contains("escaped"), "{error}");
    assert!(llm.requests().is_empty(), "no task ran");
}

#[test]
fn a_file_that_cannot_be_written_fails_the_kickoff_with_the_path_in_the_message() {
    let folder = tempfile::tempdir().expect("a temporary folder");
    // A folder where the file should be.
    let path = folder.path().join("report.md");
    std::fs::create_dir(&path).expect("creates");
    let llm = Arc::new(ScriptedLlm::new().answer("draft"));
    let writer = writer(&llm);
    let task = Task::builder("Write the report")
        .name("report")
        .agent(&writer)
        .output_file(&path)
        .build();
    let hooks = fresh_registry();
    let ends = log();
    let sink = ends.clone();
    hooks
        .register_hook(EXECUTION_END, move |ctx: &mut ExecutionEndContext| {
            push(&sink, ctx.status);
        })
        .expect("registers");
    let crew = crew_with(task, writer, &hooks);
    let failed = log();
    let sink = failed.clone();
    crew.events().subscribe(move |event| {
        if let Event::TaskFailed(task) = event {
            push(&sink, (task.task_name.clone(), task.error.clone()));
        }
    });

    let error = crew
        .kickoff_blocking(())
        .expect_err("the file cannot be written");

    let CrewError::OutputFile {
        task,
        path: failed_path,
        ..
    } = &error
    else {
        panic!("expected OutputFile, got {error:?}");
    };
    assert_eq!(
        (task.as_str(), failed_path.as_path()),
        ("report", path.as_path())
    );
    let message = error.to_string();
    assert!(
        message.starts_with(&format!(
            "task `report` could not write its output to {}: ",
            path.display()
        )),
        "{message}"
    );
    assert_eq!(take(&failed), [("report".to_owned(), message)]);
    assert_eq!(take(&ends), [ExecutionStatus::Failed]);
}

#[test]
fn the_file_passes_through_the_crews_redaction() {
    let folder = tempfile::tempdir().expect("a temporary folder");
    let path = folder.path().join("secret.txt");
    let llm = Arc::new(ScriptedLlm::new().answer("token=abc123"));
    let writer = writer(&llm);
    let crew = Crew::builder()
        .agent(writer.clone())
        .task(
            Task::builder("Write")
                .agent(&writer)
                .output_file(&path)
                .build(),
        )
        .global_registry(fresh_registry())
        .redact_with(SecretRedactor::new())
        .build()
        .expect("builds");
    crew.kickoff_blocking(()).expect("runs");
    assert_eq!(read(&path), "token=[REDACTED]");
}
