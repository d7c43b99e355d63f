//! SPEC §11 "Under attack": a crew's own hooks run by `order` among
//! themselves, policies included (at the default position, 0), so that a
//! `#[crew_base]` budget check with `order = -1` refuses a call before a
//! policy asks a person to approve it, instead of after.

use std::sync::Arc;

use crew_runtime::ScriptedInput;
use crew_runtime::policy::Policies;
use crew_runtime::prelude::*;

const POLICY: &str = r#"
@id("ask-for-refunds")
@ask("refunds need a person")
permit(principal, action == Action::"refund", resource);
"#;

#[derive(Clone)]
struct Refunds {
    llm: Arc<ScriptedLlm>,
    answers: Arc<ScriptedInput>,
}

#[crew_base]
impl Refunds {
    #[agent]
    fn clerk(&self) -> Agent {
        let refund = Tool::dynamic(
            "refund",
            "Refunds an order",
            json!({
                "type": "object",
                "properties": {"cents": {"type": "integer"}},
                "required": ["cents"]
            }),
            |_| Ok::<_, String>(json!("refunded")),
        );
        Agent::builder("Clerk")
            .tool(refund)
            .llm(self.llm.clone())
            .build()
    }

    #[task]
    fn handle(&self) -> Task {
        Task::builder("Handle the ticket")
            .agent(&self.clerk())
            .build()
    }

    /// Runs after the policies: the crew's default position.
    #[on(PRE_TOOL_CALL)]
    fn after_policies(&self, _ctx: &mut ToolCallHookContext) {}

    /// Runs before the policies, though declared after them.
    #[on(PRE_TOOL_CALL, order = -1)]
    fn budget(&self, ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
        match ctx.tool_input["cents"].as_i64() {
            Some(cents) if cents <= 50_000 => Ok(()),
            _ => Err(HookAborted::new("over the budget", "budget")),
        }
    }

    #[crew]
    fn crew(&self) -> Result<Crew, BuildError> {
        let policies = Policies::from_text(POLICY)?;
        Crew::builder()
            .agents(self.agents())
            .tasks(self.tasks())
            .global_registry(Arc::new(HookRegistry::new()))
            .human_input(self.answers.clone())
            .policies(policies)
            .hook_with(
                PRE_TOOL_CALL,
                HookOptions::new().name("last").order(5),
                |_: &mut ToolCallHookContext| {},
            )
            .build()
    }
}

fn refunds(cents: i64) -> Refunds {
    Refunds {
        llm: Arc::new(
            ScriptedLlm::new()
                .call("refund", json!({ "cents": cents }))
                .answer("done"),
        ),
        answers: Arc::new(ScriptedInput::new(["yes"])),
    }
}

#[test]
fn a_crews_own_hooks_run_by_order_policies_included() {
    let crew = refunds(100).crew().expect("the crew builds");
    let names: Vec<String> = crew
        .hooks()
        .get_hooks(PRE_TOOL_CALL)
        .into_iter()
        .map(|hook| hook.name)
        .collect();
    assert_eq!(
        names,
        [
            "Refunds::budget",
            "policies",
            "Refunds::after_policies",
            "last"
        ]
    );
}

#[test]
fn a_budget_hook_ordered_first_refuses_before_a_person_is_asked() {
    let instance = refunds(80_000);
    let crew = instance.crew().expect("the crew builds");
    crew.kickoff_blocking(()).expect("the kickoff ends");
    assert!(
        instance.answers.requests().is_empty(),
        "nobody is asked to approve a call the budget refuses"
    );
    assert_eq!(
        instance.llm.requests()[1].observations(),
        ["Tool execution blocked by hook. Tool: refund"]
    );

    // Within the budget, the person is asked, and the call runs.
    let instance = refunds(100);
    let crew = instance.crew().expect("the crew builds");
    crew.kickoff_blocking(()).expect("the kickoff ends");
    assert_eq!(instance.answers.requests().len(), 1);
    assert_eq!(instance.llm.requests()[1].observations(), ["refunded"]);
}
