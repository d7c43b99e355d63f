//! Rule 22 for `#[crew_base]`: hook methods are attached after the crew is
//! built, and their filters are checked all the same — a warning, or in
//! strict mode a kickoff that refuses to start.

use std::sync::Arc;

use crew_runtime::prelude::*;

#[derive(Clone)]
struct TypoCrew {
    strict: bool,
    llm: Arc<ScriptedLlm>,
}

#[crew_base]
impl TypoCrew {
    #[agent]
    fn worker(&self) -> Agent {
        let search = Tool::dynamic("web_search", "Searches", json!({"type": "object"}), |_| {
            Ok::<_, String>(json!("results"))
        });
        Agent::builder("Worker")
            .tool(search)
            .llm(self.llm.clone())
            .build()
    }

    #[task]
    fn work(&self) -> Task {
        Task::builder("Search").agent(&self.worker()).build()
    }

    // A typo: the crew's tool is `web_search`.
    #[on(PRE_TOOL_CALL, tools = ["web_serch"])]
    fn typo(&self, _ctx: &ToolCallHookContext) {}

    #[crew]
    fn crew(&self) -> Result<Crew, BuildError> {
        Crew::builder()
            .agents(self.agents())
            .tasks(self.tasks())
            .global_registry(Arc::new(HookRegistry::new()))
            .strict(self.strict)
            .build()
    }
}

fn typo_crew(strict: bool) -> (Crew, Arc<ScriptedLlm>) {
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("web_search", json!({}))
            .answer("done"),
    );
    let crew = TypoCrew {
        strict,
        llm: llm.clone(),
    }
    .crew()
    .expect("the crew builds: its hook methods are attached afterwards");
    (crew, llm)
}

#[test]
fn strict_crew_refuses_to_start_with_a_crew_base_filter_naming_nothing() {
    let (crew, llm) = typo_crew(true);
    let error = crew
        .kickoff_blocking(())
        .expect_err("strict mode refuses the typo");
    match &error {
        CrewError::UnmatchedHookFilters(warnings) => {
            let names: Vec<&str> = warnings.iter().map(|w| w.hook.name.as_str()).collect();
            assert_eq!(names, ["TypoCrew::typo"]);
        }
        other => panic!("expected unmatched hook filters, got {other:?}"),
    }
    assert!(error.to_string().contains("web_serch"), "{error}");
    assert!(llm.requests().is_empty(), "the model was never asked");
}

#[test]
fn lenient_crew_runs_with_a_crew_base_filter_naming_nothing() {
    let (crew, llm) = typo_crew(false);
    let output = crew
        .kickoff_blocking(())
        .expect("outside strict mode the run goes on");
    assert_eq!(output.raw, "done");
    assert_eq!(llm.requests()[1].observations(), ["results"]);
}
