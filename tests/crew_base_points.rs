//! Rule 28: `#[crew_base]` hook methods may use any point, see the
//! instance's state, and stay scoped to the crews that instance builds.

use std::sync::{Arc, Mutex, PoisonError};

use crew_runtime::prelude::*;
use crew_runtime::{
    ExecutionStartContext, InputContext, InterceptionPoint, POST_STEP, StepContext, get_hooks,
};

#[derive(Clone)]
struct ReviewedCrew {
    reviewer: &'static str,
    seen_calls: Arc<Mutex<Vec<usize>>>,
    llm: Arc<ScriptedLlm>,
}

#[crew_base]
impl ReviewedCrew {
    #[agent]
    fn writer(&self) -> Agent {
        Agent::builder("Writer").llm(self.llm.clone()).build()
    }

    #[task]
    fn draft(&self) -> Task {
        Task::builder("Draft a note on {topic}")
            .agent(&self.writer())
            .build()
    }

    #[on(INPUT)]
    fn lowercase_topic(&self, ctx: &mut InputContext) -> Option<Inputs> {
        Some(
            ctx.inputs
                .iter()
                .map(|(name, value)| (name.to_owned(), value.to_lowercase()))
                .collect(),
        )
    }

    #[on(PRE_MODEL_CALL, agents = ["Writer"])]
    fn count_model_calls(&self, ctx: &mut LlmCallHookContext) {
        self.seen_calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(ctx.iterations);
    }

    #[on(POST_STEP)]
    fn sign(&self, ctx: &mut StepContext) -> Option<String> {
        Some(format!("{} -- reviewed by {}", ctx.payload, self.reviewer))
    }

    #[on(EXECUTION_START)]
    fn require_topic(&self, ctx: &mut ExecutionStartContext) -> Result<(), HookAborted> {
        ctx.inputs
            .get("topic")
            .map(drop)
            .ok_or("a topic is required".into())
    }

    #[crew]
    fn crew(&self) -> Result<Crew, BuildError> {
        Crew::builder()
            .agents(self.agents())
            .tasks(self.tasks())
            .global_registry(Arc::new(HookRegistry::new()))
            .build()
    }
}

fn reviewed(reviewer: &'static str, answers: &[&str]) -> (ReviewedCrew, Arc<ScriptedLlm>) {
    let mut llm = ScriptedLlm::new();
    for answer in answers {
        llm = llm.answer(*answer);
    }
    let llm = Arc::new(llm);
    let instance = ReviewedCrew {
        reviewer,
        seen_calls: Arc::default(),
        llm: llm.clone(),
    };
    (instance, llm)
}

#[test]
fn crew_base_hook_methods_run_at_every_point_with_the_instances_state() {
    let (instance, llm) = reviewed("Ada", &["A note."]);
    let crew = instance.crew().expect("builds");
    let output = crew.kickoff_blocking([("topic", "RUST")]).expect("runs");

    assert_eq!(output.raw, "A note. -- reviewed by Ada");
    assert!(
        llm.requests()[0]
            .task_prompt()
            .is_some_and(|prompt| prompt.contains("Draft a note on rust")),
        "the INPUT hook method's inputs filled the placeholder"
    );
    assert_eq!(
        *instance
            .seen_calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner),
        [1]
    );
    let error = crew.kickoff_blocking(()).expect_err("no topic");
    assert_eq!(error.aborted_at(), Some(InterceptionPoint::EXECUTION_START));
    assert_eq!(
        error.abort().map(|a| a.source.as_str()),
        Some("ReviewedCrew::require_topic")
    );
}

#[test]
fn crew_base_hook_methods_at_new_points_stay_with_their_crew() {
    let (first, _) = reviewed("Ada", &["One."]);
    let (second, _) = reviewed("Grace", &["Two."]);
    let first_crew = first.crew().expect("builds");
    let second_crew = second.crew().expect("builds");
    assert_eq!(
        first_crew
            .kickoff_blocking([("topic", "x")])
            .expect("runs")
            .raw,
        "One. -- reviewed by Ada"
    );
    assert_eq!(
        second_crew
            .kickoff_blocking([("topic", "x")])
            .expect("runs")
            .raw,
        "Two. -- reviewed by Grace"
    );
    assert!(get_hooks(POST_STEP).is_empty(), "never global");
    assert_eq!(
        first_crew.hooks().get_hooks(POST_STEP).len(),
        1,
        "not doubled"
    );
}
