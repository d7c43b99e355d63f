//! SPEC §17, kickoff callbacks: `CrewBuilder::before_kickoff` (may change
//! the inputs) and `after_kickoff` (may change the output) run in the
//! reference's places around the boundary hooks, in the order added; what
//! `after_kickoff` returns passes the crew's redaction, and
//! `CrewKickoffCompleted` carries exactly what `kickoff` returns; a
//! callback that panics fails the kickoff with a clear error.

mod common;

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::*;
use crew_runtime::guards::SecretRedactor;
use crew_runtime::prelude::*;
use crew_runtime::{CrewBuilder, Redact};
use crew_runtime::{
    EXECUTION_END, EXECUTION_START, ExecutionEndContext, ExecutionStartContext, INPUT,
    InputContext, OUTPUT, OutputContext,
};

/// A token of a shape the redactor knows (GitHub's).
const SECRET: &str = "ghp_8bT4kLq9ZrX2mN7vC1wE5yH3jP6sD0fA9gQw";

/// A one-task crew builder whose agent answers `answer`, on a registry of
/// its own.
fn one_task_crew(llm: &Arc<ScriptedLlm>, description: &str) -> CrewBuilder {
    let writer = agent("Writer", Vec::new(), llm);
    Crew::builder()
        .name("desk")
        .agent(writer.clone())
        .task(
            Task::builder(description)
                .name("write")
                .agent(&writer)
                .build(),
        )
        .global_registry(fresh_registry())
}

/// The kickoff's own events, by name, into `sink`.
fn record_kickoff_events(crew: &Crew, sink: &Log<String>) {
    let sink = sink.clone();
    crew.events().subscribe(move |event| {
        let name = match event {
            Event::CrewKickoffStarted(_) => "CrewKickoffStarted",
            Event::TaskStarted(_) => "TaskStarted",
            Event::TaskCompleted(_) => "TaskCompleted",
            Event::CrewKickoffCompleted(_) => "CrewKickoffCompleted",
            Event::CrewKickoffFailed(_) => "CrewKickoffFailed",
            _ => return,
        };
        push(&sink, name.to_owned());
    });
}

#[test]
fn kickoff_callbacks_run_in_the_references_places_around_the_boundary_hooks() {
    let llm = Arc::new(ScriptedLlm::new().answer("draft"));
    let seen: Log<String> = log();
    let (before, start, input, output, after, end) = (
        seen.clone(),
        seen.clone(),
        seen.clone(),
        seen.clone(),
        seen.clone(),
        seen.clone(),
    );
    let crew = one_task_crew(&llm, "Write")
        .before_kickoff(move |inputs| {
            push(&before, "before_kickoff".to_owned());
            inputs
        })
        .after_kickoff(move |output| {
            push(&after, "after_kickoff".to_owned());
            output
        })
        .hook(EXECUTION_START, move |_: &mut ExecutionStartContext| {
            push(&start, "EXECUTION_START".to_owned());
        })
        .hook(INPUT, move |_: &mut InputContext| {
            push(&input, "INPUT".to_owned());
        })
        .hook(OUTPUT, move |_: &mut OutputContext| {
            push(&output, "OUTPUT".to_owned());
        })
        .hook(EXECUTION_END, move |_: &mut ExecutionEndContext| {
            push(&end, "EXECUTION_END".to_owned());
        })
        .build()
        .expect("builds");
    record_kickoff_events(&crew, &seen);

    crew.kickoff_blocking(()).expect("the kickoff runs");

    assert_eq!(
        take(&seen),
        [
            "before_kickoff",
            "EXECUTION_START",
            "INPUT",
            "CrewKickoffStarted",
            "TaskStarted",
            "TaskCompleted",
            "OUTPUT",
            "after_kickoff",
            "EXECUTION_END",
            "CrewKickoffCompleted",
        ]
    );
}

#[test]
fn before_kickoff_changes_the_inputs_the_tasks_are_filled_from() {
    let llm = Arc::new(ScriptedLlm::new().answer("draft"));
    let at_start: Log<Option<String>> = log();
    let sink = at_start.clone();
    let crew = one_task_crew(&llm, "Write about {topic} for {audience}")
        // `audience` is not given to the kickoff: the callback adds it.
        .before_kickoff(|inputs| {
            let topic = inputs
                .get("topic")
                .unwrap_or_default()
                .trim()
                .to_lowercase();
            inputs.with("topic", topic).with("audience", "beginners")
        })
        .hook(EXECUTION_START, move |ctx: &mut ExecutionStartContext| {
            push(&sink, ctx.inputs.get("topic").map(str::to_owned));
        })
        .build()
        .expect("builds");

    let output = crew
        .kickoff_blocking([("topic", "  RUST ")])
        .expect("the callback gave every input the task uses");

    assert_eq!(take(&at_start), [Some("rust".to_owned())]);
    assert_eq!(
        output.tasks_output[0].description,
        "Write about rust for beginners"
    );
    let prompt = llm.requests()[0]
        .task_prompt()
        .expect("the task's prompt")
        .to_owned();
    assert!(
        prompt.contains("Write about rust for beginners"),
        "{prompt}"
    );
}

#[test]
fn after_kickoff_changes_the_output_kickoff_returns() {
    let llm = Arc::new(ScriptedLlm::new().answer("draft"));
    let at_end: Log<Option<String>> = log();
    let sink = at_end.clone();
    let crew = one_task_crew(&llm, "Write")
        .after_kickoff(|mut output| {
            output.raw = format!("{} (checked)", output.raw);
            output
        })
        .hook(EXECUTION_END, move |ctx: &mut ExecutionEndContext| {
            push(&sink, ctx.output.as_ref().map(|output| output.raw.clone()));
        })
        .build()
        .expect("builds");

    let output = crew.kickoff_blocking(()).expect("the kickoff runs");

    assert_eq!(output.raw, "draft (checked)");
    assert_eq!(take(&at_end), [Some("draft (checked)".to_owned())]);
}

/// The text of the crew's `CrewKickoffCompleted` events.
fn completed_outputs(crew: &Crew) -> Log<String> {
    let outputs = log();
    let sink = outputs.clone();
    crew.events().subscribe(move |event| {
        if let Event::CrewKickoffCompleted(done) = event {
            push(&sink, done.output.clone());
        }
    });
    outputs
}

#[test]
fn what_after_kickoff_returns_passes_the_crews_redaction() {
    let llm = Arc::new(ScriptedLlm::new().answer("draft"));
    let crew = one_task_crew(&llm, "Write")
        .redact_with(SecretRedactor::new())
        .after_kickoff(|mut output| {
            output.raw = format!("{} signed with {SECRET}", output.raw);
            output.tasks_output[0].raw = format!("token {SECRET}");
            output
        })
        .build()
        .expect("builds");
    let completed = completed_outputs(&crew);

    let output = crew.kickoff_blocking(()).expect("the kickoff runs");

    assert!(!output.raw.contains(SECRET), "{}", output.raw);
    assert!(
        output.raw.starts_with("draft signed with "),
        "{}",
        output.raw
    );
    assert!(
        !output.tasks_output[0].raw.contains(SECRET),
        "{}",
        output.tasks_output[0].raw
    );
    assert_eq!(take(&completed), [output.raw]);
}

/// A redactor whose every cleaning is numbered: two cleanings of one text
/// differ, so a text cleaned twice cannot pass for one cleaned once.
#[derive(Default)]
struct NumberedRedactor {
    cleanings: AtomicUsize,
}

impl Redact for NumberedRedactor {
    fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
        if !text.contains("secret") {
            return Cow::Borrowed(text);
        }
        let number = self.cleanings.fetch_add(1, Ordering::Relaxed) + 1;
        Cow::Owned(text.replace("secret", &format!("[REDACTED #{number}]")))
    }
}

#[test]
fn crew_kickoff_completed_carries_exactly_what_kickoff_returns() {
    let llm = Arc::new(ScriptedLlm::new().answer("draft"));
    let crew = one_task_crew(&llm, "Write")
        .redact_with(NumberedRedactor::default())
        .after_kickoff(|mut output| {
            output.raw = format!("{} with a secret", output.raw);
            output
        })
        // An edit in place at the end is what `kickoff` returns too.
        .hook(EXECUTION_END, |ctx: &mut ExecutionEndContext| {
            if let Some(output) = ctx.output.as_mut() {
                output.raw.push_str(" (signed)");
            }
        })
        .build()
        .expect("builds");
    let completed = completed_outputs(&crew);

    let output = crew.kickoff_blocking(()).expect("the kickoff runs");

    assert!(
        output.raw.starts_with("draft with a [REDACTED #"),
        "{}",
        output.raw
    );
    assert!(output.raw.ends_with("] (signed)"), "{}", output.raw);
    assert_eq!(take(&completed), [output.raw]);
}

#[test]
fn a_panicking_callback_fails_the_kickoff_with_a_clear_error() {
    // Before: the kickoff stops before anything of it runs.
    let llm = Arc::new(ScriptedLlm::new().answer("draft"));
    let seen: Log<String> = log();
    let start = seen.clone();
    let crew = one_task_crew(&llm, "Write")
        .before_kickoff(|inputs| inputs)
        .before_kickoff(|_| panic!("the inputs service is down"))
        .hook(EXECUTION_START, move |_: &mut ExecutionStartContext| {
            push(&start, "EXECUTION_START".to_owned());
        })
        .build()
        .expect("builds");
    record_kickoff_events(&crew, &seen);

    let error = crew
        .kickoff_blocking(())
        .expect_err("a panicking before_kickoff callback fails the kickoff");

    assert!(
        matches!(
            &error,
            CrewError::CallbackPanicked {
                which: "before_kickoff",
                position: 2,
                message,
            } if message == "the inputs service is down"
        ),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "before_kickoff callback #2 (in the order added to the crew) panicked: the inputs \
         service is down; the kickoff was stopped. Fix the callback, or have it return what it \
         was given when it cannot do its work"
    );
    assert_eq!(take(&seen), Vec::<String>::new());
    assert!(llm.requests().is_empty());

    // After: the kickoff fails, and its end says so.
    let llm = Arc::new(ScriptedLlm::new().answer("draft"));
    let seen: Log<String> = log();
    let end = seen.clone();
    let crew = one_task_crew(&llm, "Write")
        .after_kickoff(|_| panic!("the archive is offline"))
        .hook(EXECUTION_END, move |ctx: &mut ExecutionEndContext| {
            push(
                &end,
                format!("EXECUTION_END {:?} {:?}", ctx.status, ctx.error),
            );
        })
        .build()
        .expect("builds");
    record_kickoff_events(&crew, &seen);

    let error = crew
        .kickoff_blocking(())
        .expect_err("a panicking after_kickoff callback fails the kickoff");

    assert!(
        matches!(
            &error,
            CrewError::CallbackPanicked {
                which: "after_kickoff",
                position: 1,
                message,
            } if message == "the archive is offline"
        ),
        "{error:?}"
    );
    assert_eq!(
        take(&seen),
        [
            "CrewKickoffStarted".to_owned(),
            "TaskStarted".to_owned(),
            "TaskCompleted".to_owned(),
            format!("EXECUTION_END Failed {:?}", Some(error.to_string())),
            "CrewKickoffFailed".to_owned(),
        ]
    );
}

#[test]
fn a_callbacks_panic_message_passes_the_crews_redaction() {
    let llm = Arc::new(ScriptedLlm::new().answer("draft"));
    let crew = one_task_crew(&llm, "Write")
        .redact_with(SecretRedactor::new())
        .after_kickoff(|_| panic!("could not sign with {SECRET}"))
        .build()
        .expect("builds");

    let error = crew.kickoff_blocking(()).expect_err("the callback panics");

    let text = error.to_string();
    assert!(
        matches!(error, CrewError::CallbackPanicked { .. }),
        "{error:?}"
    );
    assert!(!text.contains(SECRET), "{text}");
    assert!(text.contains("could not sign with "), "{text}");
}

#[test]
fn callbacks_run_in_the_order_added() {
    let llm = Arc::new(ScriptedLlm::new().answer("draft"));
    let append = |tag: &'static str| {
        move |inputs: Inputs| {
            let topic = format!("{}{tag}", inputs.get("topic").unwrap_or_default());
            inputs.with("topic", topic)
        }
    };
    let sign = |tag: &'static str| {
        move |mut output: CrewOutput| {
            output.raw = format!("{} {tag}", output.raw);
            output
        }
    };
    let crew = one_task_crew(&llm, "Write about {topic}")
        .before_kickoff(append("-1"))
        .after_kickoff(sign("A"))
        .before_kickoff(append("-2"))
        .after_kickoff(sign("B"))
        .before_kickoff(append("-3"))
        .build()
        .expect("builds");

    let output = crew
        .kickoff_blocking([("topic", "rust")])
        .expect("the kickoff runs");

    assert_eq!(output.tasks_output[0].description, "Write about rust-1-2-3");
    assert_eq!(output.raw, "draft A B");
}
