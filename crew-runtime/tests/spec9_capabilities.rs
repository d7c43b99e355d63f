//! Guards by capability (SPEC §9): hooks see what a tool declares about
//! its effects (`ctx.tool`'s annotations), and the ready-made guards block
//! or ask by capability, not by name. A tool that declares nothing counts
//! as destructive; a local one that does not say it reaches the open world
//! is closed-world (an MCP server's tool keeps MCP's open-world default).

mod common;

use std::sync::Arc;

use common::*;
use crew_runtime::ToolInfo;
use crew_runtime::guards::{ApprovalGate, CapabilityGuard};
use crew_runtime::prelude::*;
use crew_runtime::{ScriptedCall, ScriptedInput, ToolAnnotations};

/// What each tool ran on, in order.
type Ran = Log<String>;

fn recording_tool(name: &'static str, ran: &Ran, annotations: ToolAnnotations) -> Tool {
    let sink = ran.clone();
    Tool::dynamic(
        name,
        "A test tool",
        json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        move |args| {
            let path = args["path"].as_str().unwrap_or("").to_owned();
            push(&sink, format!("{name} {path}"));
            Ok::<_, String>(json!(format!("{name} done on {path}")))
        },
    )
    .with_annotations(annotations)
}

/// `read_file` (read-only), `delete_file` (destructive), `run_shell`
/// (declares nothing).
fn tools(ran: &Ran) -> Vec<Tool> {
    vec![
        recording_tool(
            "read_file",
            ran,
            ToolAnnotations::new()
                .title("Read a file")
                .read_only(true)
                .open_world(false),
        ),
        recording_tool(
            "delete_file",
            ran,
            ToolAnnotations::new()
                .title("Delete a file")
                .read_only(false)
                .destructive(true)
                .idempotent(true)
                .open_world(false),
        ),
        recording_tool("run_shell", ran, ToolAnnotations::new()),
    ]
}

/// A model that calls `read_file`, `delete_file` and `run_shell` in one
/// turn, then answers.
fn model() -> Arc<ScriptedLlm> {
    Arc::new(
        ScriptedLlm::new()
            .calls([
                ScriptedCall::new("read_file", json!({"path": "a.txt"})),
                ScriptedCall::new("delete_file", json!({"path": "b.txt"})),
                ScriptedCall::new("run_shell", json!({"path": "c.sh"})),
            ])
            .answer("done"),
    )
}

fn guarded_crew(ran: &Ran, llm: &Arc<ScriptedLlm>, guard: CapabilityGuard) -> Crew {
    let janitor = agent("Janitor", tools(ran), llm);
    Crew::builder()
        .agent(janitor.clone())
        .task(Task::builder("Tidy up").agent(&janitor).build())
        .global_registry(fresh_registry())
        .hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("capability-guard"),
            guard.pre_hook(),
        )
        .build()
        .expect("the crew builds")
}

fn observations(llm: &ScriptedLlm) -> Vec<String> {
    llm.requests()[1]
        .observations()
        .into_iter()
        .map(str::to_owned)
        .collect()
}

#[test]
fn deny_destructive_blocks_destructive_and_undeclared_tools_and_runs_read_only_ones() {
    let ran = log();
    let llm = model();
    let crew = guarded_crew(&ran, &llm, CapabilityGuard::deny([Capability::Destructive]));
    let events = record_events(crew.events());
    crew.kickoff_blocking(()).expect("the run completes");

    assert_eq!(
        take(&ran),
        ["read_file a.txt"],
        "only the read-only tool ran"
    );
    assert_eq!(
        observations(&llm),
        [
            "read_file done on a.txt",
            "Tool execution blocked by hook. Tool: delete_file",
            "Tool execution blocked by hook. Tool: run_shell",
        ]
    );
    let events = take(&events).join("\n");
    assert!(
        events.contains(
            "tool `delete_file` is destructive: tools with capability `destructive` may not run"
        ),
        "{events}"
    );
    assert!(events.contains("capability-guard"), "{events}");
}

#[test]
fn the_read_only_policy_runs_only_tools_that_declare_themselves_read_only() {
    let ran = log();
    let llm = model();
    let crew = guarded_crew(&ran, &llm, CapabilityGuard::read_only());
    crew.kickoff_blocking(()).expect("the run completes");
    assert_eq!(take(&ran), ["read_file a.txt"]);
    assert_eq!(
        observations(&llm)[1..],
        [
            "Tool execution blocked by hook. Tool: delete_file",
            "Tool execution blocked by hook. Tool: run_shell",
        ]
    );
}

#[test]
fn the_guards_refusal_names_the_tool_and_the_capability() {
    let ran = log();
    let mut declared = tools(&ran);
    let shell = declared.pop().expect("run_shell");
    let delete = declared.pop().expect("delete_file");
    // Open-world because it says so: a local tool that says nothing is not.
    let fetch = recording_tool(
        "fetch_page",
        &ran,
        ToolAnnotations::new().read_only(true).open_world(true),
    );
    let call = |tool: Tool| {
        let name = tool.name().to_owned();
        ToolCallHookContext::new(&name, Default::default())
            .with_tool(Arc::new(tool) as Arc<dyn ToolInfo>)
    };
    let refusal = |guard: CapabilityGuard, ctx: &ToolCallHookContext| {
        guard
            .check(ctx)
            .err()
            .map(|abort| (abort.source, abort.reason))
    };
    assert_eq!(
        refusal(CapabilityGuard::deny([Capability::OpenWorld]), &call(fetch)),
        Some((
            "capability-guard".to_owned(),
            "tool `fetch_page` is open-world: tools with capability `open_world` may not run"
                .to_owned()
        ))
    );
    assert_eq!(
        refusal(
            CapabilityGuard::deny([Capability::OpenWorld]),
            &call(shell.clone())
        ),
        None
    );
    assert_eq!(
        refusal(
            CapabilityGuard::deny([Capability::OpenWorld]),
            &call(delete.clone())
        ),
        None
    );
    assert_eq!(
        refusal(CapabilityGuard::read_only(), &call(delete)),
        Some((
            "capability-guard".to_owned(),
            "tool `delete_file` is not read-only: only read-only tools may run".to_owned()
        ))
    );
    // No tool: the call runs nothing, and the guard lets the agent be told so.
    let unknown = ToolCallHookContext::new("made_up_tool", Default::default());
    assert_eq!(refusal(CapabilityGuard::read_only(), &unknown), None);
}

#[test]
fn an_approval_gate_for_capabilities_asks_only_about_destructive_tools() {
    let ran = log();
    let llm = model();
    let answers = Arc::new(ScriptedInput::new(["no", "yes"]));
    let janitor = agent("Janitor", tools(&ran), &llm);
    let crew = Crew::builder()
        .agent(janitor.clone())
        .task(Task::builder("Tidy up").agent(&janitor).build())
        .global_registry(fresh_registry())
        .human_input(answers.clone())
        // One call at a time, so that the scripted answers go in call order.
        .max_concurrent_tool_calls(1)
        .async_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("approval-gate"),
            ApprovalGate::for_capabilities([Capability::Destructive]).pre_hook(),
        )
        .build()
        .expect("the crew builds");
    crew.kickoff_blocking(()).expect("the run completes");

    let asked: Vec<Option<String>> = answers
        .requests()
        .into_iter()
        .map(|request| request.tool_name)
        .collect();
    assert_eq!(
        asked,
        [Some("delete_file".to_owned()), Some("run_shell".to_owned())],
        "the read-only tool is not asked about"
    );
    assert_eq!(take(&ran), ["read_file a.txt", "run_shell c.sh"]);
    assert_eq!(
        observations(&llm),
        [
            "read_file done on a.txt",
            "Tool execution blocked by hook. Tool: delete_file",
            "run_shell done on c.sh",
        ]
    );
}

#[test]
fn a_post_hook_sees_the_tools_annotations() {
    let ran = log();
    let llm = model();
    let seen: Log<String> = log();
    let sink = seen.clone();
    let janitor = agent("Janitor", tools(&ran), &llm);
    let crew = Crew::builder()
        .agent(janitor.clone())
        .task(Task::builder("Tidy up").agent(&janitor).build())
        .global_registry(fresh_registry())
        .hook(POST_TOOL_CALL, move |ctx: &mut ToolCallHookContext| {
            let tool = ctx.tool.as_deref().expect("a known tool");
            let annotations = tool.annotations();
            push(
                &sink,
                format!(
                    "{}: {:?} read_only={:?} destructive={:?} [{}]",
                    ctx.tool_name(),
                    annotations.title,
                    annotations.read_only,
                    annotations.destructive,
                    annotations.capabilities()
                ),
            );
        })
        .build()
        .expect("the crew builds");
    crew.kickoff_blocking(()).expect("the run completes");

    let mut seen = take(&seen);
    seen.sort();
    assert_eq!(
        seen,
        [
            "delete_file: Some(\"Delete a file\") read_only=Some(false) destructive=Some(true) \
             [destructive, idempotent]",
            "read_file: Some(\"Read a file\") read_only=Some(true) destructive=None \
             [read_only, idempotent]",
            "run_shell: None read_only=None destructive=None [destructive]",
        ]
    );
}

#[test]
fn a_local_tool_that_declares_nothing_is_closed_world_for_guards_and_questions() {
    let ran = log();
    let llm = model();
    let answers = Arc::new(ScriptedInput::new(["yes"]));
    let janitor = agent("Janitor", tools(&ran), &llm);
    let crew = Crew::builder()
        .agent(janitor.clone())
        .task(Task::builder("Tidy up").agent(&janitor).build())
        .global_registry(fresh_registry())
        .human_input(answers.clone())
        .hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("closed-world"),
            CapabilityGuard::deny([Capability::OpenWorld]).pre_hook(),
        )
        .async_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("ask-about-the-shell"),
            ApprovalGate::for_tools(["run_shell"]).pre_hook(),
        )
        .build()
        .expect("the crew builds");
    crew.kickoff_blocking(()).expect("the run completes");

    let mut ran = take(&ran);
    ran.sort();
    assert_eq!(
        ran,
        ["delete_file b.txt", "read_file a.txt", "run_shell c.sh"]
    );
    // The approver is shown what the tool is read as: destructive (it does
    // not say it only reads), not open-world (it is the program's own).
    let shown: Vec<String> = answers
        .requests()
        .into_iter()
        .map(|request| format!("{:?}", request.tool_capabilities.map(|c| c.to_string())))
        .collect();
    assert_eq!(shown, ["Some(\"destructive\")"]);
}
