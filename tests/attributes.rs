//! Behavior of the hook attributes, one test per rule of the contract.
//!
//! Every attribute hook here is filtered to a `ui_probe_*` tool no other
//! test calls, so these hooks never fire in tests that dispatch on the
//! global registry.

use std::sync::{Arc, Mutex};

use hooks_core::__private::{CrewScope, DefaultTaskName};
use hooks_core::events::Event;
use hooks_core::runtime::{Dispatcher, ToolCallReport, ToolOutput, blocked_message};
use hooks_core::testing::GlobalHooksFixture;
use hooks_core::{
    FailureMode, HookAborted, HookDispatchedEvent, HookInfo, HookOrigin, HookRegistry, HookStyle,
    InterceptionPoint, LEGACY_BLOCK_REASON, POST_TOOL_CALL, PRE_TOOL_CALL, ToolCallHookContext,
    get_hooks, global_registry, restore_static_hooks, unregister_after_tool_call_hook,
    unregister_hook,
};
use hooks_macros::{after_tool_call, agent, before_tool_call, crew, crew_base, on, task};
use serde_json::{Map, Value, json};

// Linking the library is what brings its hooks in; nothing else of it is used.
use hooks_tests as _;

/// What one call through a dispatcher came to.
struct Call {
    report: Result<ToolCallReport, HookAborted>,
    /// The arguments the tool received; `None` when it did not run.
    received: Option<Map<String, Value>>,
}

fn call_through(dispatcher: Dispatcher<'_>, tool: &str) -> Call {
    let mut ctx = ToolCallHookContext::new(tool, Map::new());
    let mut received = None;
    let report = dispatcher.run_tool_call(&mut ctx, |ctx| {
        received = Some(ctx.tool_input.clone());
        ToolOutput::text("tool ran")
    });
    Call { report, received }
}

fn call(tool: &str) -> Call {
    call_through(global_registry().dispatcher(), tool)
}

fn listed(point: impl Into<InterceptionPoint>, name: &str) -> Option<HookInfo> {
    get_hooks(point).into_iter().find(|hook| hook.name == name)
}

/// Appends `name` to the `trace` list in the call's input.
fn trace(ctx: &mut ToolCallHookContext, name: &str) {
    let list = ctx.tool_input.entry("trace").or_insert_with(|| json!([]));
    if let Some(list) = list.as_array_mut() {
        list.push(json!(name));
    }
}

fn traced(input: &Map<String, Value>) -> Vec<String> {
    input
        .get("trace")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

// Rule 1 ----------------------------------------------------------------

#[on(PRE_TOOL_CALL, tools = ["ui_probe_link"])]
fn link_time_probe(ctx: &mut ToolCallHookContext) {
    ctx.tool_input
        .insert("stamped_by".into(), json!("link_time_probe"));
}

#[test]
fn attribute_hooks_register_at_link_time() {
    let _fixture = GlobalHooksFixture::new();
    let hook = listed(PRE_TOOL_CALL, "link_time_probe").expect("the attribute hook is listed");
    assert_eq!(hook.tools, ["ui_probe_link"]);
    assert_eq!(hook.style, HookStyle::On);
    assert_eq!(hook.failure, FailureMode::FailOpen);
    match &hook.origin {
        HookOrigin::LinkTime {
            module_path, file, ..
        } => {
            assert_eq!(*module_path, "attributes");
            assert!(file.ends_with("attributes.rs"), "{file}");
        }
        other => panic!("expected a link-time origin, got {other:?}"),
    }

    let call = call("ui_probe_link");
    let received = call.received.expect("the tool ran");
    assert_eq!(received["stamped_by"], "link_time_probe");
}

// Rule 3 ----------------------------------------------------------------
//
// `zeta` comes first in the file, `alpha` second: the module path, not the
// file position, decides between modules; `order` decides before both.

mod zeta {
    use super::trace;
    use hooks_core::ToolCallHookContext;
    use hooks_macros::{before_tool_call, on};

    #[on(PRE_TOOL_CALL, tools = ["ui_probe_order"], order = -5)]
    fn zeta_early(ctx: &mut ToolCallHookContext) {
        trace(ctx, "zeta_early");
    }

    #[before_tool_call(tools = ["ui_probe_order"])]
    fn zeta_default(ctx: &mut ToolCallHookContext) -> Option<bool> {
        trace(ctx, "zeta_default");
        None
    }

    #[on(PRE_TOOL_CALL, tools = ["ui_probe_order"], order = 10)]
    fn zeta_late(ctx: &mut ToolCallHookContext) {
        trace(ctx, "zeta_late");
    }
}

mod alpha {
    use super::trace;
    use hooks_core::ToolCallHookContext;
    use hooks_macros::on;

    #[on(InterceptionPoint::PRE_TOOL_CALL, tools = ["ui_probe_order"], order = 10)]
    fn alpha_late(ctx: &mut ToolCallHookContext) {
        trace(ctx, "alpha_late");
    }

    #[on(PRE_TOOL_CALL, tools = ["ui_probe_order"])]
    fn alpha_first_in_file(ctx: &mut ToolCallHookContext) {
        trace(ctx, "alpha_first_in_file");
    }

    #[on(PRE_TOOL_CALL, tools = ["ui_probe_order"])]
    fn alpha_second_in_file(ctx: &mut ToolCallHookContext) {
        trace(ctx, "alpha_second_in_file");
    }
}

#[test]
fn link_time_order_is_order_then_module_then_position() {
    let _fixture = GlobalHooksFixture::new();
    let expected = [
        "zeta_early",
        "alpha_first_in_file",
        "alpha_second_in_file",
        "zeta_default",
        "alpha_late",
        "zeta_late",
    ];

    let listed: Vec<String> = get_hooks(PRE_TOOL_CALL)
        .into_iter()
        .filter(|hook| hook.tools == ["ui_probe_order"])
        .map(|hook| hook.name)
        .collect();
    assert_eq!(listed, expected);

    let call = call("ui_probe_order");
    assert_eq!(traced(&call.received.expect("the tool ran")), expected);
}

// Rule 5 ----------------------------------------------------------------

#[after_tool_call(tools = ["Ui Probe Web Search"])]
fn normalized_filter_probe(ctx: &ToolCallHookContext) -> Option<String> {
    ctx.tool_result
        .as_deref()
        .map(|result| format!("{result} [seen]"))
}

#[test]
fn filter_literals_are_normalized_at_compile_time() {
    let _fixture = GlobalHooksFixture::new();
    let hook = listed(POST_TOOL_CALL, "normalized_filter_probe").expect("listed");
    assert_eq!(hook.tools, ["ui_probe_web_search"]);
    assert_eq!(hook.style, HookStyle::AfterToolCall);

    for spelled in [
        "UiProbeWebSearch",
        "ui-probe-web-search",
        "ui_probe_web_search",
    ] {
        let call = call(spelled);
        let report = call.report.expect("no abort");
        assert_eq!(report.observation, "tool ran [seen]", "{spelled}");
    }
    // Exact matching: a longer name that contains the filter is not it.
    let call = call("ui_probe_web_search_v2");
    assert_eq!(call.report.expect("no abort").observation, "tool ran");
}

// Rules 11 and 21 -------------------------------------------------------

#[before_tool_call(tools = ["ui_probe_legacy_block"])]
fn legacy_blocker(_ctx: &ToolCallHookContext) -> bool {
    false
}

#[test]
fn legacy_false_blocks_with_legacy_reason() {
    let _fixture = GlobalHooksFixture::new();
    let events: Arc<Mutex<Vec<HookDispatchedEvent>>> = Arc::default();
    let sink = Arc::clone(&events);
    global_registry().events().subscribe(move |event| {
        if let Event::HookDispatched(dispatched) = event {
            sink.lock().expect("listener lock").push(dispatched.clone());
        }
    });

    let call = call("ui_probe_legacy_block");
    assert!(call.received.is_none(), "a blocked tool does not run");
    let report = call.report.expect("a block is not an abort of the run");
    assert_eq!(report.observation, blocked_message("ui_probe_legacy_block"));
    let blocked = report.blocked.expect("blocked");
    assert_eq!(blocked.reason, LEGACY_BLOCK_REASON);
    assert_eq!(blocked.source, "legacy_blocker");

    let events = events.lock().expect("listener lock");
    let pre = events
        .iter()
        .find(|event| event.point == PRE_TOOL_CALL)
        .expect("a PRE dispatch event");
    assert_eq!(pre.outcome, "aborted");
    assert_eq!(
        pre.abort_reason.as_deref(),
        Some("before_tool_call hook returned False")
    );
    assert_eq!(pre.abort_source.as_deref(), Some("legacy_blocker"));
    assert_eq!(pre.tool_name.as_deref(), Some("ui_probe_legacy_block"));
}

// Rules 17 and 19 -------------------------------------------------------

#[on(PRE_TOOL_CALL, tools = ["ui_probe_unregister"])]
fn removable_probe(ctx: &mut ToolCallHookContext) {
    ctx.tool_input.insert("removable".into(), json!(true));
}

#[after_tool_call(tools = ["ui_probe_unregister"])]
fn removable_after(_ctx: &ToolCallHookContext) -> Option<String> {
    Some("replaced by removable_after".to_owned())
}

#[test]
fn unregister_by_function_removes_attribute_hook() {
    let _fixture = GlobalHooksFixture::new();
    let before = call("ui_probe_unregister");
    assert_eq!(before.received.expect("ran")["removable"], true);
    assert_eq!(
        before.report.expect("no abort").observation,
        "replaced by removable_after"
    );

    assert!(unregister_hook(PRE_TOOL_CALL, removable_probe));
    assert!(unregister_after_tool_call_hook(removable_after));
    assert!(listed(PRE_TOOL_CALL, "removable_probe").is_none());
    assert!(listed(POST_TOOL_CALL, "removable_after").is_none());
    assert!(
        !unregister_hook(PRE_TOOL_CALL, removable_probe),
        "already gone"
    );

    let after = call("ui_probe_unregister");
    assert!(!after.received.expect("ran").contains_key("removable"));
    assert_eq!(after.report.expect("no abort").observation, "tool ran");
}

#[test]
fn restore_static_hooks_puts_it_back() {
    let _fixture = GlobalHooksFixture::new();
    let position = |name: &str| {
        get_hooks(PRE_TOOL_CALL)
            .iter()
            .position(|hook| hook.name == name)
    };
    let original = position("removable_probe").expect("listed");

    assert!(unregister_hook(PRE_TOOL_CALL, removable_probe));
    assert!(position("removable_probe").is_none());
    assert!(restore_static_hooks() >= 1);

    assert_eq!(
        position("removable_probe"),
        Some(original),
        "back in its place"
    );
    let call = call("ui_probe_unregister");
    assert_eq!(call.received.expect("ran")["removable"], true);
}

// Rule 14 ---------------------------------------------------------------

#[on(PRE_TOOL_CALL, tools = ["ui_probe_fail_closed"], fail_closed)]
fn panics_fail_closed(_ctx: &mut ToolCallHookContext) {
    panic!("a fail-closed probe hook panicked on purpose");
}

#[on(PRE_TOOL_CALL, tools = ["ui_probe_fail_open"])]
fn panics_fail_open(_ctx: &mut ToolCallHookContext) {
    panic!("a fail-open probe hook panicked on purpose");
}

#[test]
fn fail_closed_attribute_blocks_on_panic() {
    let _fixture = GlobalHooksFixture::new();
    let hook = listed(PRE_TOOL_CALL, "panics_fail_closed").expect("listed");
    assert_eq!(hook.failure, FailureMode::FailClosed);

    let closed = call("ui_probe_fail_closed");
    assert!(
        closed.received.is_none(),
        "fail-closed: the tool does not run"
    );
    let report = closed.report.expect("a block is not an abort of the run");
    assert!(report.blocked.is_some());
    assert_eq!(report.observation, blocked_message("ui_probe_fail_closed"));

    let open = call("ui_probe_fail_open");
    assert!(open.received.is_some(), "fail-open: the tool still runs");
    assert_eq!(open.report.expect("no abort").observation, "tool ran");
}

// Rule 1, library modules ----------------------------------------------

#[test]
fn hooks_in_an_unreferenced_library_module_are_registered() {
    let _fixture = GlobalHooksFixture::new();
    let pre = listed(PRE_TOOL_CALL, "orphan_marks_input").expect("listed");
    match pre.origin {
        HookOrigin::LinkTime { module_path, .. } => {
            assert_eq!(module_path, "hooks_tests::orphan_hooks");
        }
        other => panic!("expected a link-time origin, got {other:?}"),
    }
    assert!(listed(POST_TOOL_CALL, "orphan_tags_result").is_some());

    let call = call("ui_probe_orphan");
    assert_eq!(call.received.expect("ran")["orphan"], true);
    assert_eq!(
        call.report.expect("no abort").observation,
        "tool ran (seen by orphan)"
    );
}

// Rule 20 ---------------------------------------------------------------

/// A stand-in for the runtime's crew: it only needs its own registry.
struct ProbeCrewBuilt {
    hooks: HookRegistry,
    agents: Vec<String>,
    tasks: Vec<ProbeTask>,
}

/// A stand-in for the runtime's task: `tasks()` names it after its
/// `#[task]` method.
#[derive(Debug, PartialEq)]
struct ProbeTask {
    description: String,
    name: Option<&'static str>,
}

impl DefaultTaskName for ProbeTask {
    fn named_by_default(mut self, name: &'static str) -> Self {
        self.name.get_or_insert(name);
        self
    }
}

impl CrewScope for ProbeCrewBuilt {
    fn crew_hooks(&self) -> &HookRegistry {
        &self.hooks
    }
}

#[derive(Clone)]
struct ProbeCrew {
    label: &'static str,
}

#[crew_base]
impl ProbeCrew {
    #[agent]
    fn researcher(&self) -> String {
        format!("{} researcher", self.label)
    }

    #[agent]
    fn writer(&self) -> String {
        format!("{} writer", self.label)
    }

    #[task]
    fn research(&self) -> ProbeTask {
        ProbeTask {
            description: format!("{} research", self.label),
            name: None,
        }
    }

    #[on(PRE_TOOL_CALL, tools = ["ui_probe_crew"], order = 5)]
    fn stamp_label(&self, ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
        trace(ctx, &format!("stamp_label:{}", self.label));
        Ok(())
    }

    #[before_tool_call(tools = ["ui_probe_crew"])]
    fn declared_later_runs_first(&self, ctx: &mut ToolCallHookContext) -> Option<bool> {
        trace(ctx, &format!("declared_later_runs_first:{}", self.label));
        None
    }

    #[after_tool_call(tools = ["ui_probe_crew"])]
    fn tag_result(&self, ctx: &ToolCallHookContext) -> Option<String> {
        ctx.tool_result
            .as_deref()
            .map(|result| format!("{result} via {}", self.label))
    }

    #[crew]
    fn crew(&self) -> ProbeCrewBuilt {
        ProbeCrewBuilt {
            hooks: HookRegistry::new(),
            agents: self.agents(),
            tasks: self.tasks(),
        }
    }
}

#[test]
fn crew_base_hook_methods_belong_to_the_crews_an_instance_builds() {
    let _fixture = GlobalHooksFixture::new();
    let first = ProbeCrew { label: "a" }.crew();
    let again = ProbeCrew { label: "a" }.crew();
    let other = ProbeCrew { label: "b" }.crew();

    assert_eq!(first.agents, ["a researcher", "a writer"]);
    assert_eq!(
        first.tasks,
        [ProbeTask {
            description: "a research".to_owned(),
            name: Some("research"),
        }]
    );

    // Sorted by `order`, then declaration; listed as the crew's own.
    let names = |crew: &ProbeCrewBuilt| -> Vec<String> {
        crew.hooks
            .get_hooks(PRE_TOOL_CALL)
            .into_iter()
            .map(|hook| hook.name)
            .collect()
    };
    assert_eq!(
        names(&first),
        [
            "ProbeCrew::declared_later_runs_first",
            "ProbeCrew::stamp_label"
        ]
    );
    assert_eq!(
        names(&again),
        names(&first),
        "a second build does not double them"
    );
    let post = first.hooks.get_hooks(POST_TOOL_CALL);
    assert_eq!(post.len(), 1);
    assert_eq!(post[0].style, HookStyle::AfterToolCall);
    assert_eq!(
        post[0].origin,
        HookOrigin::Crew {
            crew: "ProbeCrew".to_owned()
        }
    );

    // Never global.
    assert!(
        get_hooks(PRE_TOOL_CALL)
            .iter()
            .chain(&get_hooks(POST_TOOL_CALL))
            .all(|hook| !hook.name.starts_with("ProbeCrew::"))
    );
    let outside = call("ui_probe_crew");
    assert!(traced(&outside.received.expect("ran")).is_empty());

    // Each crew's calls see that crew's instance, and only its hooks.
    let empty_global = HookRegistry::new();
    let through_b = call_through(
        Dispatcher::new(&empty_global).with_scope(&other.hooks),
        "ui_probe_crew",
    );
    assert_eq!(
        traced(&through_b.received.expect("ran")),
        ["declared_later_runs_first:b", "stamp_label:b"]
    );
    assert_eq!(
        through_b.report.expect("no abort").observation,
        "tool ran via b"
    );
}

// Linking ---------------------------------------------------------------
//
// CI runs this file under `--profile release-lto` (fat LTO) and
// `--profile release-cgu1` (one codegen unit): whole-program optimization
// must not drop a single registration.

#[test]
fn every_link_time_hook_of_the_binary_is_registered() {
    let _fixture = GlobalHooksFixture::new();
    let mut names: Vec<String> = get_hooks(PRE_TOOL_CALL)
        .into_iter()
        .chain(get_hooks(POST_TOOL_CALL))
        .filter(|hook| matches!(hook.origin, HookOrigin::LinkTime { .. }))
        .map(|hook| hook.name)
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "alpha_first_in_file",
            "alpha_late",
            "alpha_second_in_file",
            "legacy_blocker",
            "link_time_probe",
            "normalized_filter_probe",
            "orphan_marks_input",
            "orphan_tags_result",
            "panics_fail_closed",
            "panics_fail_open",
            "removable_after",
            "removable_probe",
            "zeta_default",
            "zeta_early",
            "zeta_late",
        ]
    );
}
