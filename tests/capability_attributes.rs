//! `capabilities = [...]` in the attributes (SPEC §9): a link-time hook
//! and a `#[crew_base]` hook method filtered by capability run for calls
//! whose tool has the capability, and for no other call.
//!
//! A test binary of its own: its global capability-filtered hook would
//! otherwise meet the undeclared (so destructive) tools of other tests.

use std::sync::{Arc, Mutex, PoisonError};

use crew_runtime::ToolInfo;
use crew_runtime::prelude::*;
use crew_runtime::{ScriptedCall, ToolAnnotations, get_hooks, global_registry};
use hooks_core::testing::GlobalHooksFixture;

/// Every call the link-time guard was asked about.
static GUARDED: Mutex<Vec<String>> = Mutex::new(Vec::new());

#[on(PRE_TOOL_CALL, capabilities = [destructive])]
fn destructive_guard(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
    GUARDED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(ctx.tool_name().to_owned());
    Err("destructive tools need a ticket".into())
}

fn tool(name: &'static str, annotations: ToolAnnotations) -> Tool {
    Tool::dynamic(name, "A test tool", json!({"type": "object"}), move |_| {
        Ok::<_, String>(json!(format!("{name} ran")))
    })
    .with_annotations(annotations)
}

fn read_only() -> ToolAnnotations {
    ToolAnnotations::new().read_only(true).open_world(false)
}

fn destructive() -> ToolAnnotations {
    ToolAnnotations::new().destructive(true).open_world(false)
}

/// One call of `tool` through the global registry: its observation, and
/// whether the tool ran.
fn call_globally(tool: Tool) -> (String, bool) {
    let name = tool.name().to_owned();
    let mut ctx = ToolCallHookContext::new(&name, Default::default())
        .with_tool(Arc::new(tool) as Arc<dyn ToolInfo>);
    let mut ran = false;
    let report = global_registry()
        .run_tool_call(&mut ctx, |_| {
            ran = true;
            hooks_core::runtime::ToolOutput::text("ran")
        })
        .expect("no POST abort");
    (report.observation, ran)
}

#[test]
fn an_on_hook_with_a_capability_filter_runs_for_destructive_tools_only() {
    let _fixture = GlobalHooksFixture::new();
    GUARDED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();

    let listed = get_hooks(PRE_TOOL_CALL)
        .into_iter()
        .find(|hook| hook.name == "destructive_guard")
        .expect("registered at link time");
    assert!(listed.capabilities.contains(Capability::Destructive));

    assert_eq!(
        call_globally(tool("drop_table", destructive())),
        (
            "Tool execution blocked by hook. Tool: drop_table".to_owned(),
            false
        )
    );
    assert_eq!(
        call_globally(tool("read_file", read_only())),
        ("ran".to_owned(), true)
    );
    // Declares nothing: counts as destructive.
    let (observation, ran) = call_globally(tool("run_shell", ToolAnnotations::new()));
    assert!(!ran, "{observation}");
    // No tool at all: the hook is not asked.
    let mut unknown = ToolCallHookContext::new("made_up_tool", Default::default());
    assert!(
        global_registry()
            .dispatch_pre(&mut unknown)
            .aborted()
            .is_none()
    );

    assert_eq!(
        *GUARDED.lock().unwrap_or_else(PoisonError::into_inner),
        ["drop_table", "run_shell"]
    );
}

#[derive(Clone)]
struct AuditedCrew {
    llm: Arc<ScriptedLlm>,
    audited: Arc<Mutex<Vec<String>>>,
}

#[crew_base]
impl AuditedCrew {
    #[agent]
    fn janitor(&self) -> Agent {
        Agent::builder("Janitor")
            .tools([
                tool("read_file", read_only()),
                tool("delete_file", destructive()),
            ])
            .llm(self.llm.clone())
            .build()
    }

    #[task]
    fn tidy(&self) -> Task {
        Task::builder("Tidy up").agent(&self.janitor()).build()
    }

    #[on(POST_TOOL_CALL, capabilities = [destructive, open_world])]
    fn audit(&self, ctx: &mut ToolCallHookContext) {
        self.audited
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(format!(
                "{}: {}",
                ctx.tool_name(),
                ctx.tool_result.as_deref().unwrap_or("")
            ));
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

#[test]
fn a_crew_base_hook_method_with_a_capability_filter_sees_only_matching_tools() {
    let llm = Arc::new(
        ScriptedLlm::new()
            .calls([
                ScriptedCall::new("read_file", json!({})),
                ScriptedCall::new("delete_file", json!({})),
            ])
            .answer("done"),
    );
    let instance = AuditedCrew {
        llm,
        audited: Arc::default(),
    };
    let crew = instance.crew().expect("the crew builds");
    let listed = crew.hooks().get_hooks(POST_TOOL_CALL);
    assert_eq!(listed[0].name, "AuditedCrew::audit");
    assert_eq!(
        listed[0].capabilities.to_string(),
        "destructive, open_world"
    );

    crew.kickoff_blocking(()).expect("the run completes");
    assert_eq!(
        *instance
            .audited
            .lock()
            .unwrap_or_else(PoisonError::into_inner),
        ["delete_file: delete_file ran"]
    );
}
