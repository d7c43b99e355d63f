//! A crew has one name, and everything names it by that one (`explain`,
//! `ctx.crew`, events): the builder's name if it was given one, else the
//! `#[crew_base]` type's name, else a plain `crew` — which `explain` shows
//! once, never as `(crew crew)`.

mod common;

use std::sync::Arc;

use common::*;
use crew_runtime::prelude::*;

#[derive(Clone)]
struct SupportDesk {
    name: Option<&'static str>,
    llm: Arc<ScriptedLlm>,
    seen: Log<String>,
}

#[crew_base]
impl SupportDesk {
    #[agent]
    fn support(&self) -> Agent {
        let reply = Tool::dynamic("reply", "Replies", json!({"type": "object"}), |_| {
            Ok::<_, String>(json!("sent"))
        });
        Agent::builder("Support")
            .tool(reply)
            .llm(self.llm.clone())
            .build()
    }

    #[task]
    fn resolve(&self) -> Task {
        Task::builder("Resolve the ticket")
            .agent(&self.support())
            .build()
    }

    #[on(PRE_TOOL_CALL)]
    fn screen(&self, ctx: &mut ToolCallHookContext) {
        let crew = ctx.crew.as_ref().map(|crew| crew.name().to_owned());
        push(&self.seen, crew.unwrap_or_default());
    }

    #[crew]
    fn crew(&self) -> Result<Crew, BuildError> {
        let builder = Crew::builder()
            .agents(self.agents())
            .tasks(self.tasks())
            .global_registry(fresh_registry())
            .hook_with(
                PRE_TOOL_CALL,
                HookOptions::new().name("builder-gate"),
                |_: &mut ToolCallHookContext| {},
            );
        match self.name {
            Some(name) => builder.name(name),
            None => builder,
        }
        .build()
    }
}

fn desk(name: Option<&'static str>) -> SupportDesk {
    SupportDesk {
        name,
        llm: Arc::new(ScriptedLlm::new().call("reply", json!({})).answer("done")),
        seen: log(),
    }
}

/// The origins `explain` shows for the crew's hooks, by hook name.
fn origins(crew: &Crew) -> Vec<(String, String)> {
    crew.explain("reply", "Support")
        .hooks
        .iter()
        .map(|h| (h.hook.name.clone(), h.hook.origin.to_string()))
        .collect()
}

#[test]
fn a_named_crew_base_crew_is_named_by_its_builders_name_everywhere() {
    let desk = desk(Some("support-desk"));
    let crew = desk.crew().expect("builds");
    assert_eq!(crew.name(), "support-desk");
    assert_eq!(
        origins(&crew),
        [
            ("builder-gate".to_owned(), "crew support-desk".to_owned()),
            (
                "SupportDesk::screen".to_owned(),
                "crew support-desk".to_owned()
            ),
        ]
    );
    let shown = crew.explain("reply", "Support").to_string();
    assert!(!shown.contains("crew SupportDesk"), "{shown}");
    crew.kickoff_blocking(()).expect("runs");
    assert_eq!(take(&desk.seen), ["support-desk"]);
}

#[test]
fn an_unnamed_crew_base_crew_is_named_after_its_type_everywhere() {
    let desk = desk(None);
    let crew = desk.crew().expect("builds");
    assert_eq!(crew.name(), "SupportDesk");
    assert_eq!(
        origins(&crew),
        [
            ("builder-gate".to_owned(), "crew SupportDesk".to_owned()),
            (
                "SupportDesk::screen".to_owned(),
                "crew SupportDesk".to_owned()
            ),
        ]
    );
    crew.kickoff_blocking(()).expect("runs");
    assert_eq!(take(&desk.seen), ["SupportDesk"]);
}

#[test]
fn an_unnamed_plain_crew_is_crew_and_explain_never_says_crew_crew() {
    let support = Agent::builder("Support").build();
    let crew = Crew::builder()
        .agent(support.clone())
        .task(Task::builder("Resolve").agent(&support).build())
        .global_registry(fresh_registry())
        .hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("builder-gate"),
            |_: &mut ToolCallHookContext| {},
        )
        .build()
        .expect("builds");
    assert_eq!(crew.name(), "crew");
    let shown = crew.explain("reply", "Support").to_string();
    assert!(shown.contains("builder-gate (crew)"), "{shown}");
    assert!(!shown.contains("(crew crew)"), "{shown}");
}
