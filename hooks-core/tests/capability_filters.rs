//! Capability filters (SPEC §9): a hook limited to `capabilities = [...]`
//! runs for a call whose tool has any of them, as the tool's annotations
//! read with the MCP defaults, never for a call without a tool, and
//! combines with the `tools` and `agents` filters. Registries are created
//! per test (no global state).

mod common;
use common::{Log, logging_pre};

use std::sync::Arc;

use hooks_core::runtime::{TOOL_CALL_POINTS, ToolOutput};
use hooks_core::{
    AgentInfo, Capabilities, Capability, HookOptions, HookRegistry, InterceptionPoint,
    POST_TOOL_CALL, PRE_TOOL_CALL, RegisterError, ToolAnnotations, ToolCallHookContext,
    ToolCapabilities, ToolInfo, Verdict, async_hook,
};
use serde_json::{Map, Value};

/// A tool that declares annotations, as a runtime's tool type would.
struct StubTool {
    name: &'static str,
    annotations: ToolAnnotations,
    schema: Value,
}

impl ToolInfo for StubTool {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "a stub"
    }
    fn args_schema(&self) -> &Value {
        &self.schema
    }
    fn annotations(&self) -> &ToolAnnotations {
        &self.annotations
    }
}

struct TestAgent(&'static str);

impl AgentInfo for TestAgent {
    fn role(&self) -> &str {
        self.0
    }
}

fn tool(name: &'static str, annotations: ToolAnnotations) -> Arc<dyn ToolInfo> {
    Arc::new(StubTool {
        name,
        annotations,
        schema: Value::Null,
    })
}

fn read_only() -> ToolAnnotations {
    ToolAnnotations::new().read_only(true).open_world(false)
}

fn destructive() -> ToolAnnotations {
    ToolAnnotations::new()
        .read_only(false)
        .destructive(true)
        .open_world(false)
}

/// A call of `name` whose tool declares `annotations`.
fn call_of(name: &'static str, annotations: ToolAnnotations) -> ToolCallHookContext {
    ToolCallHookContext::new(name, Map::new()).with_tool(tool(name, annotations))
}

/// The hooks that ran at PRE for `ctx`.
fn ran(registry: &HookRegistry, log: &Log, mut ctx: ToolCallHookContext) -> Vec<String> {
    registry.dispatch_pre(&mut ctx);
    log.take()
}

#[test]
fn a_capability_filter_matches_a_tool_having_any_of_them() {
    let registry = HookRegistry::new();
    let log = Log::default();
    logging_pre(
        &registry,
        &log,
        "risky",
        HookOptions::new().capabilities([Capability::Destructive, Capability::OpenWorld]),
    );

    assert_eq!(
        ran(&registry, &log, call_of("drop_table", destructive())),
        ["risky"]
    );
    let fetch = ToolAnnotations::new().read_only(true).open_world(true);
    assert_eq!(
        ran(&registry, &log, call_of("fetch_page", fetch)),
        ["risky"]
    );
    assert!(ran(&registry, &log, call_of("read_file", read_only())).is_empty());
}

#[test]
fn a_tool_that_declares_nothing_counts_as_destructive() {
    let registry = HookRegistry::new();
    let log = Log::default();
    logging_pre(
        &registry,
        &log,
        "destructive-only",
        HookOptions::new().capabilities([Capability::Destructive]),
    );
    logging_pre(
        &registry,
        &log,
        "read-only-only",
        HookOptions::new().capabilities([Capability::ReadOnly]),
    );
    assert_eq!(
        ran(
            &registry,
            &log,
            call_of("run_shell", ToolAnnotations::new())
        ),
        ["destructive-only"]
    );
}

#[test]
fn a_call_without_a_tool_runs_no_capability_filtered_hook() {
    let registry = HookRegistry::new();
    let log = Log::default();
    logging_pre(&registry, &log, "unfiltered", HookOptions::new());
    for capability in Capability::ALL {
        logging_pre(
            &registry,
            &log,
            capability.name(),
            HookOptions::new().capabilities([capability]),
        );
    }
    // The model named a tool the agent does not have: `ctx.tool` is absent.
    let no_tool = ToolCallHookContext::new("made_up_tool", Map::new());
    assert_eq!(ran(&registry, &log, no_tool), ["unfiltered"]);
}

#[test]
fn capability_tools_and_agents_filters_must_all_match() {
    let registry = HookRegistry::new();
    let log = Log::default();
    logging_pre(
        &registry,
        &log,
        "ops-deletes",
        HookOptions::new()
            .tools(["delete_file", "read_file"])
            .agents(["Ops"])
            .capabilities([Capability::Destructive]),
    );
    let by = |name: &'static str, annotations, role: &'static str| {
        call_of(name, annotations).with_agent(Arc::new(TestAgent(role)))
    };

    assert_eq!(
        ran(&registry, &log, by("delete_file", destructive(), "Ops")),
        ["ops-deletes"]
    );
    // Each filter alone stops it.
    assert!(ran(&registry, &log, by("read_file", read_only(), "Ops")).is_empty());
    assert!(ran(&registry, &log, by("delete_file", destructive(), "Writer")).is_empty());
    assert!(ran(&registry, &log, by("drop_table", destructive(), "Ops")).is_empty());
}

#[test]
fn a_capability_filter_applies_only_at_the_tool_call_points() {
    let registry = HookRegistry::new();
    let options = || HookOptions::new().capabilities([Capability::Destructive]);

    let error = registry
        .register_hook_with(
            hooks_core::PRE_MODEL_CALL,
            options(),
            |_: &mut hooks_core::LlmCallHookContext| {},
        )
        .expect_err("a model call has no tool");
    assert_eq!(
        error,
        RegisterError::FilterDoesNotApply {
            point: InterceptionPoint::PRE_MODEL_CALL,
            filter: "capabilities",
        }
    );
    assert!(
        error.to_string().contains(
            "`tools` and `capabilities` filters apply at PRE_TOOL_CALL and POST_TOOL_CALL"
        )
    );
    let at_step = registry.register_async_hook_with(
        hooks_core::POST_STEP,
        options(),
        async_hook(|_: &mut hooks_core::StepContext| Box::pin(async {})),
    );
    assert!(matches!(
        at_step,
        Err(RegisterError::FilterDoesNotApply {
            filter: "capabilities",
            ..
        })
    ));
    for point in InterceptionPoint::ALL {
        assert!(
            registry.get_hooks(point).is_empty(),
            "{point} took the hook"
        );
    }
    registry
        .register_hook_with(POST_TOOL_CALL, options(), |_: &mut ToolCallHookContext| {})
        .expect("POST_TOOL_CALL has a tool");
}

/// Pending once, then ready: an await point that any executor resumes
/// (the synchronous dispatch drives `async` hooks outside tokio).
struct Pending(bool);

impl Pending {
    fn once() -> Self {
        Pending(false)
    }
}

impl std::future::Future for Pending {
    type Output = ();
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0 {
            return std::task::Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}

#[tokio::test]
async fn sync_and_async_dispatch_both_honor_the_capability_filter() {
    let registry = HookRegistry::new();
    let log = Log::default();
    logging_pre(
        &registry,
        &log,
        "sync-guard",
        HookOptions::new().capabilities([Capability::Destructive]),
    );
    let async_log = log.clone();
    registry
        .register_async_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new()
                .name("async-guard")
                .capabilities([Capability::Destructive]),
            async_hook(move |_: &mut ToolCallHookContext| {
                let log = async_log.clone();
                Box::pin(async move {
                    Pending::once().await;
                    log.push("async-guard");
                })
            }),
        )
        .expect("fits PRE");

    for (name, annotations, expected) in [
        (
            "delete_file",
            destructive(),
            vec!["sync-guard", "async-guard"],
        ),
        ("read_file", read_only(), vec![]),
    ] {
        // The awaiting walk (the chain has an `async` hook).
        let mut ctx = call_of(name, annotations.clone());
        registry
            .dispatcher()
            .begin_call(&TOOL_CALL_POINTS)
            .dispatch_async(PRE_TOOL_CALL, &mut ctx)
            .await;
        assert_eq!(log.take(), expected, "awaiting dispatch of {name}");

        // The synchronous walk drives the `async` hook in place.
        let mut ctx = call_of(name, annotations);
        registry.dispatch_pre(&mut ctx);
        assert_eq!(log.take(), expected, "synchronous dispatch of {name}");
    }
}

#[test]
fn a_capability_guard_blocks_the_tool_and_post_hooks_still_see_the_call() {
    let registry = HookRegistry::new();
    registry
        .register_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new()
                .name("no-destruction")
                .capabilities([Capability::Destructive]),
            |_: &mut ToolCallHookContext| -> Result<(), hooks_core::HookAborted> {
                Err("destructive tools are off".into())
            },
        )
        .expect("fits PRE");
    let mut ran_tools = Vec::new();
    for (name, annotations) in [("delete_file", destructive()), ("read_file", read_only())] {
        let mut ctx = call_of(name, annotations);
        let report = registry
            .run_tool_call(&mut ctx, |ctx| {
                ran_tools.push(ctx.tool_name().to_owned());
                ToolOutput::text("done")
            })
            .expect("no POST abort");
        match name {
            "delete_file" => {
                assert_eq!(
                    report.blocked.map(|abort| (abort.source, abort.reason)),
                    Some((
                        "no-destruction".to_owned(),
                        "destructive tools are off".to_owned()
                    ))
                );
                assert_eq!(
                    report.observation,
                    "Tool execution blocked by hook. Tool: delete_file"
                );
            }
            _ => assert_eq!(report.observation, "done"),
        }
    }
    assert_eq!(ran_tools, ["read_file"]);
}

#[test]
fn get_hooks_shows_the_capability_filter() {
    let registry = HookRegistry::new();
    registry
        .register_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new()
                .name("guard")
                .capabilities([Capability::OpenWorld, Capability::Destructive]),
            |_: &mut ToolCallHookContext| {},
        )
        .expect("fits PRE");
    registry
        .register_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("plain"),
            |_: &mut ToolCallHookContext| {},
        )
        .expect("fits PRE");
    let hooks = registry.get_hooks(PRE_TOOL_CALL);
    let expected: Capabilities = [Capability::Destructive, Capability::OpenWorld]
        .into_iter()
        .collect();
    assert_eq!(hooks[0].capabilities, expected);
    assert_eq!(hooks[0].capabilities.to_string(), "destructive, open_world");
    assert!(hooks[1].capabilities.is_empty());
}

#[test]
fn explain_decides_capability_filters_when_told_the_tools_capabilities() {
    let registry = HookRegistry::new();
    let log = Log::default();
    logging_pre(&registry, &log, "everyone", HookOptions::new());
    logging_pre(
        &registry,
        &log,
        "destructive-guard",
        HookOptions::new().capabilities([Capability::Destructive]),
    );
    logging_pre(
        &registry,
        &log,
        "writers-guard",
        HookOptions::new()
            .agents(["Writer"])
            .capabilities([Capability::Destructive]),
    );
    let verdicts = |explanation: &hooks_core::Explanation| -> Vec<(String, Verdict)> {
        explanation
            .hooks
            .iter()
            .filter(|h| h.hook.point == InterceptionPoint::PRE_TOOL_CALL)
            .map(|h| (h.hook.name.clone(), h.verdict.clone()))
            .collect()
    };
    let named = |name: &str, verdict| (name.to_owned(), verdict);

    // By name only: the capability filter depends on the tool; the agents
    // filter still decides first.
    let by_name = registry.explain("delete_file", Some("Ops"));
    assert_eq!(by_name.tool_capabilities, ToolCapabilities::Unknown);
    assert_eq!(
        verdicts(&by_name),
        [
            named("everyone", Verdict::Runs),
            named("destructive-guard", Verdict::DependsOnCapabilities),
            named("writers-guard", Verdict::SkippedByAgents),
        ]
    );
    assert!(by_name.to_string().contains(
        "  depends  destructive-guard (registered at run time): runs if the tool has any of \
         capabilities = [destructive]"
    ));

    let destructive_tool = destructive().capabilities();
    let explained =
        registry.explain_with_capabilities("delete_file", Some(destructive_tool), Some("Writer"));
    assert_eq!(
        explained.running(PRE_TOOL_CALL),
        ["everyone", "destructive-guard", "writers-guard"]
    );
    assert!(
        explained
            .to_string()
            .starts_with("hooks for tool `delete_file` (destructive) and agent `Writer`:")
    );

    let reader = read_only().capabilities();
    let explained = registry.explain_with_capabilities("read_file", Some(reader), None);
    assert_eq!(
        verdicts(&explained)[1],
        named("destructive-guard", Verdict::SkippedByCapabilities)
    );

    // No tool: skipped, and the text says why.
    let explained = registry.explain_with_capabilities("made_up_tool", None, None);
    assert_eq!(explained.tool_capabilities, ToolCapabilities::NoTool);
    assert_eq!(explained.running(PRE_TOOL_CALL), ["everyone"]);
    let text = explained.to_string();
    assert!(
        text.contains("hooks for tool `made_up_tool` (no such tool)"),
        "{text}"
    );
    assert!(
        text.contains(
            "  skipped  destructive-guard: capabilities = [destructive] never matches a call \
             without a tool"
        ),
        "{text}"
    );
    // What explain said is what dispatch does.
    assert_eq!(
        ran(
            &registry,
            &log,
            ToolCallHookContext::new("made_up_tool", Map::new())
        ),
        ["everyone"]
    );
}
