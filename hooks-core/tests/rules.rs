//! Behavior tests of the engine, one per rule of SPEC.md §3, on registries
//! created per test (no global state).

mod common;
use common::{Log, logging_pre};

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use hooks_core::runtime::{Dispatcher, ToolOutput};
use hooks_core::{
    AgentInfo, CrewOutput, DispatchOutcome, EXECUTION_END, Event, ExecutionEndContext, FailureMode,
    HookAborted, HookOptions, HookOrigin, HookRegistry, HookStyle, InterceptionPoint,
    POST_TOOL_CALL, PRE_TOOL_CALL, RegisterError, ScriptedInput, ToolCallHookContext, Verdict,
};
use serde_json::{Map, Value, json};

struct TestAgent(&'static str);

impl AgentInfo for TestAgent {
    fn role(&self) -> &str {
        self.0
    }
}

fn input(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("test input must be an object, got {other}"),
    }
}

fn call(tool: &str) -> ToolCallHookContext {
    ToolCallHookContext::new(tool, Map::new())
}

fn call_by(tool: &str, role: &'static str) -> ToolCallHookContext {
    call(tool).with_agent(Arc::new(TestAgent(role)))
}

fn logging_post(registry: &HookRegistry, log: &Log, name: &'static str, options: HookOptions) {
    let log = log.clone();
    registry
        .register_hook_with(
            POST_TOOL_CALL,
            options.name(name),
            move |_: &mut ToolCallHookContext| log.push(name),
        )
        .expect("() fits POST");
}

fn run(
    registry: &HookRegistry,
    ctx: &mut ToolCallHookContext,
    tool_runs: &AtomicUsize,
) -> Result<hooks_core::runtime::ToolCallReport, HookAborted> {
    registry.run_tool_call(ctx, |_| {
        tool_runs.fetch_add(1, Ordering::SeqCst);
        ToolOutput::text("tool output")
    })
}

#[test]
fn all_registration_styles_feed_one_chain_per_point() {
    let registry = HookRegistry::new();
    let log = Log::default();
    logging_pre(&registry, &log, "on_style", HookOptions::new());
    let legacy_log = log.clone();
    registry.register_before_tool_call_hook(move |_: &mut ToolCallHookContext| {
        legacy_log.push("legacy_before");
        None::<bool>
    });
    logging_pre(&registry, &log, "on_style_again", HookOptions::new());

    registry.dispatch_pre(&mut call("any_tool"));
    assert_eq!(log.take(), ["on_style", "legacy_before", "on_style_again"]);
    let styles: Vec<HookStyle> = registry
        .get_hooks(PRE_TOOL_CALL)
        .iter()
        .map(|h| h.style)
        .collect();
    assert_eq!(
        styles,
        [HookStyle::On, HookStyle::BeforeToolCall, HookStyle::On]
    );
}

#[test]
fn runtime_hooks_run_in_call_order() {
    let registry = HookRegistry::new();
    let log = Log::default();
    for name in ["first", "second", "third", "fourth"] {
        logging_post(&registry, &log, name, HookOptions::new());
    }
    registry.dispatch_post(&mut call("t"));
    assert_eq!(log.take(), ["first", "second", "third", "fourth"]);
    let listed: Vec<String> = registry
        .get_hooks(POST_TOOL_CALL)
        .into_iter()
        .map(|h| h.name)
        .collect();
    assert_eq!(listed, ["first", "second", "third", "fourth"]);
}

#[test]
fn crew_scoped_hooks_take_their_place_in_registration_order() {
    let global = HookRegistry::new();
    let crew = HookRegistry::new();
    let log = Log::default();
    logging_pre(&global, &log, "global_before_crew", HookOptions::new());
    logging_pre(&crew, &log, "crew_hook", HookOptions::new());
    logging_pre(&global, &log, "global_after_crew", HookOptions::new());

    let dispatcher = Dispatcher::new(&global).with_scope(&crew);
    dispatcher.dispatch_pre(&mut call("t"));
    assert_eq!(
        log.take(),
        ["global_before_crew", "crew_hook", "global_after_crew"]
    );

    // Outside the crew's dispatcher the crew's hook does not exist.
    global.dispatch_pre(&mut call("t"));
    assert_eq!(log.take(), ["global_before_crew", "global_after_crew"]);
}

#[test]
fn hook_registered_during_dispatch_runs_from_the_next_call() {
    let registry = Arc::new(HookRegistry::new());
    let log = Log::default();
    let inner_log = log.clone();
    let handle = Arc::downgrade(&registry);
    registry
        .register_hook(PRE_TOOL_CALL, move |_: &mut ToolCallHookContext| {
            inner_log.push("registrar");
            if let Some(registry) = handle.upgrade() {
                let late_log = inner_log.clone();
                registry
                    .register_hook_with(
                        PRE_TOOL_CALL,
                        HookOptions::new().name("late"),
                        move |_: &mut ToolCallHookContext| late_log.push("late"),
                    )
                    .expect("() fits PRE");
            }
        })
        .expect("() fits PRE");

    registry.dispatch_pre(&mut call("t"));
    assert_eq!(
        log.take(),
        ["registrar"],
        "the new hook must not run in the dispatch that added it"
    );
    registry.dispatch_pre(&mut call("t"));
    // The second dispatch sees the hook added by the first (and adds one
    // more, which waits for the third).
    assert_eq!(log.take(), ["registrar", "late"]);
}

#[test]
fn tools_filter_matches_normalized_names_exactly_never_substrings() {
    let registry = HookRegistry::new();
    let log = Log::default();
    logging_pre(
        &registry,
        &log,
        "search_only",
        HookOptions::new().tools(["Web Search"]),
    );
    assert_eq!(registry.get_hooks(PRE_TOOL_CALL)[0].tools, ["web_search"]);

    for spelled in ["web_search", "WebSearch", "web-search", "Web Search"] {
        let ctx = &mut call(spelled);
        assert_eq!(ctx.tool_name(), "web_search");
        registry.dispatch_pre(ctx);
        assert_eq!(log.take(), ["search_only"], "{spelled}");
    }
    for other in ["web_search_v2", "web", "search", "deep_web_search"] {
        registry.dispatch_pre(&mut call(other));
        assert!(
            log.take().is_empty(),
            "{other} must not match a web_search filter"
        );
    }
}

#[test]
fn agents_filter_matches_the_role_exactly() {
    let registry = HookRegistry::new();
    let log = Log::default();
    logging_pre(
        &registry,
        &log,
        "researcher_only",
        HookOptions::new().agents(["Researcher"]),
    );
    registry.dispatch_pre(&mut call_by("t", "Researcher"));
    assert_eq!(log.take(), ["researcher_only"]);
    for role in ["researcher", "Senior Researcher", "Writer"] {
        registry.dispatch_pre(&mut call_by("t", role));
        assert!(log.take().is_empty(), "{role} must not match");
    }
}

#[test]
fn both_filters_must_match_and_a_call_without_agent_passes_the_agents_filter() {
    let registry = HookRegistry::new();
    let log = Log::default();
    logging_post(
        &registry,
        &log,
        "both",
        HookOptions::new()
            .tools(["web_search"])
            .agents(["Researcher"]),
    );
    logging_post(
        &registry,
        &log,
        "empty_lists",
        HookOptions::new()
            .tools(Vec::<String>::new())
            .agents(Vec::<String>::new()),
    );

    registry.dispatch_post(&mut call_by("web_search", "Researcher"));
    assert_eq!(log.take(), ["both", "empty_lists"]);
    registry.dispatch_post(&mut call_by("web_search", "Writer"));
    assert_eq!(log.take(), ["empty_lists"]);
    registry.dispatch_post(&mut call_by("read_file", "Researcher"));
    assert_eq!(log.take(), ["empty_lists"]);
    registry.dispatch_post(&mut call("web_search"));
    assert_eq!(
        log.take(),
        ["both", "empty_lists"],
        "no agent: the agents filter passes"
    );
}

#[test]
fn pre_edits_reach_the_tool_and_pre_and_post_share_tool_input() {
    let registry = HookRegistry::new();
    registry
        .register_hook(PRE_TOOL_CALL, |ctx: &mut ToolCallHookContext| {
            if let Some(Value::String(query)) = ctx.tool_input.get_mut("query") {
                *query = query.trim().to_lowercase();
            }
            ctx.tool_input.insert("_start".into(), json!(42));
        })
        .expect("fits");
    let seen_by_post = Arc::new(Mutex::new(None));
    let sink = seen_by_post.clone();
    registry
        .register_hook(POST_TOOL_CALL, move |ctx: &mut ToolCallHookContext| {
            *sink.lock().expect("lock") = ctx.tool_input.remove("_start");
        })
        .expect("fits");

    let mut ctx = ToolCallHookContext::new("web_search", input(json!({"query": "  RUST Hooks "})));
    let mut received = None;
    registry
        .run_tool_call(&mut ctx, |ctx| {
            received = Some(ctx.tool_input.clone());
            ToolOutput::text("ok")
        })
        .expect("no abort");
    assert_eq!(
        received,
        Some(input(json!({"query": "rust hooks", "_start": 42})))
    );
    assert_eq!(*seen_by_post.lock().expect("lock"), Some(json!(42)));
}

#[test]
fn human_input_error_in_a_pre_hook_blocks_the_call() {
    let registry = HookRegistry::new();
    async fn approval_gate(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
        let answer = ctx
            .request_human_input("Approve send_email?", "Type 'yes' to approve:")
            .await?;
        if answer.to_lowercase() != "yes" {
            return Err(HookAborted::new("denied by operator", "approval-gate"));
        }
        Ok(())
    }
    // Run by the synchronous `run_tool_call`, which drives the async hook
    // to its end on this thread.
    registry
        .register_async_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new()
                .name("approval-gate")
                .tools(["send_email"]),
            approval_gate,
        )
        .expect("fits");
    let source = Arc::new(ScriptedInput::new(["  YES \n", "no"]));
    let tool_runs = AtomicUsize::new(0);
    let mut outcomes = Vec::new();
    for _ in 0..3 {
        let mut ctx = call("send_email").with_human_input(source.clone());
        let report = run(&registry, &mut ctx, &tool_runs).expect("no abort");
        outcomes.push(report.blocked.map(|a| a.reason));
    }
    assert_eq!(outcomes[0], None, "a trimmed, case-folded yes approves");
    assert_eq!(outcomes[1].as_deref(), Some("denied by operator"));
    let unavailable = outcomes[2].as_deref().unwrap_or_default();
    assert!(unavailable.contains("no human approval"), "{unavailable}");
    assert_eq!(
        tool_runs.load(Ordering::SeqCst),
        1,
        "only the approved call ran"
    );
    assert_eq!(source.prompts().len(), 3);
    assert_eq!(source.prompts()[0].0, "Approve send_email?");
}

#[test]
fn blocked_call_skips_later_pre_hooks_and_the_tool_but_runs_post_hooks() {
    let registry = HookRegistry::new();
    let log = Log::default();
    registry
        .register_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("blocker").tools(["delete_file"]),
            |ctx: &mut ToolCallHookContext| -> Result<(), HookAborted> {
                Err(HookAborted::new(
                    format!("{} is not allowed", ctx.tool_name()),
                    "safety-policy",
                ))
            },
        )
        .expect("fits");
    logging_pre(&registry, &log, "later_pre", HookOptions::new());
    let post_log = log.clone();
    registry
        .register_hook(POST_TOOL_CALL, move |ctx: &mut ToolCallHookContext| {
            post_log.push(format!(
                "post saw {:?} / raw {:?}",
                ctx.tool_result,
                ctx.raw_tool_result
                    .as_ref()
                    .and_then(|r| r.as_str().map(str::to_owned))
            ));
        })
        .expect("fits");

    let tool_runs = AtomicUsize::new(0);
    let mut ctx = call("delete_file");
    let report = run(&registry, &mut ctx, &tool_runs).expect("a block is not an abort");
    let expected = "Tool execution blocked by hook. Tool: delete_file";
    assert_eq!(report.observation, expected);
    assert_eq!(
        report.blocked,
        Some(HookAborted::new(
            "delete_file is not allowed",
            "safety-policy"
        ))
    );
    assert_eq!(tool_runs.load(Ordering::SeqCst), 0);
    assert_eq!(
        log.take(),
        [format!(
            "post saw Some({expected:?}) / raw Some({expected:?})"
        )]
    );

    // The same chain lets another tool through, later PRE hook included.
    let report = run(&registry, &mut call("read_file"), &tool_runs).expect("no abort");
    assert_eq!(report.observation, "tool output");
    assert_eq!(tool_runs.load(Ordering::SeqCst), 1);
    assert_eq!(log.take()[0], "later_pre");
}

#[test]
fn legacy_false_blocks_like_an_abort() {
    let registry = HookRegistry::new();
    registry.register_before_tool_call_hook(|ctx: &mut ToolCallHookContext| {
        // Some(false) blocks; None continues.
        (ctx.tool_name() == "delete_database").then_some(false)
    });
    registry.register_before_tool_call_hook_with(
        HookOptions::new().tools(["drop_table"]),
        |_: &mut ToolCallHookContext| false,
    );
    let tool_runs = AtomicUsize::new(0);
    for tool in ["delete_database", "drop_table"] {
        let report = run(&registry, &mut call(tool), &tool_runs).expect("no abort");
        assert_eq!(
            report.observation,
            format!("Tool execution blocked by hook. Tool: {tool}")
        );
        let abort = report.blocked.expect("blocked");
        assert_eq!(abort.reason, hooks_core::LEGACY_BLOCK_REASON);
        assert!(
            !abort.source.is_empty(),
            "the hook's name stands in for a missing source"
        );
    }
    assert_eq!(tool_runs.load(Ordering::SeqCst), 0);
    run(&registry, &mut call("read_file"), &tool_runs).expect("no abort");
    assert_eq!(tool_runs.load(Ordering::SeqCst), 1);
}

#[test]
fn post_replacements_chain_and_empty_string_is_a_valid_replacement() {
    let registry = HookRegistry::new();
    registry
        .register_hook(POST_TOOL_CALL, |ctx: &mut ToolCallHookContext| {
            ctx.tool_result
                .as_deref()
                .map(|r| r.replace("hunter2", "[REDACTED]"))
        })
        .expect("fits");
    registry
        .register_hook(POST_TOOL_CALL, |ctx: &mut ToolCallHookContext| {
            ctx.tool_result.as_deref().map(|r| format!("{r}!"))
        })
        .expect("fits");
    registry
        .register_hook(POST_TOOL_CALL, |_: &mut ToolCallHookContext| None::<String>)
        .expect("fits");
    let mut ctx = call("t");
    let report = registry
        .run_tool_call(&mut ctx, |_| ToolOutput::text("pw=hunter2"))
        .expect("no abort");
    assert_eq!(report.observation, "pw=[REDACTED]!");
    assert_eq!(
        ctx.raw_tool_result.as_ref().and_then(|r| r.as_str()),
        Some("pw=hunter2"),
        "raw is never replaced"
    );

    registry.register_after_tool_call_hook(|_: &mut ToolCallHookContext| Some(String::new()));
    let report = registry
        .run_tool_call(&mut call("t"), |_| ToolOutput::text("x"))
        .expect("no abort");
    assert_eq!(report.observation, "");
}

#[test]
fn post_abort_skips_later_post_hooks_and_ends_the_run() {
    let registry = HookRegistry::new();
    let log = Log::default();
    registry
        .register_hook_with(
            POST_TOOL_CALL,
            HookOptions::new().name("leak-guard"),
            |ctx: &mut ToolCallHookContext| -> Result<Option<String>, HookAborted> {
                if ctx
                    .tool_result
                    .as_deref()
                    .is_some_and(|r| r.contains("BEGIN PRIVATE KEY"))
                {
                    return Err(HookAborted::with_reason("private key in tool output"));
                }
                Ok(None)
            },
        )
        .expect("fits");
    logging_post(&registry, &log, "later_post", HookOptions::new());
    let tool_runs = AtomicUsize::new(0);
    let abort = registry
        .run_tool_call(&mut call("read_file"), |_| {
            tool_runs.fetch_add(1, Ordering::SeqCst);
            ToolOutput::text("-----BEGIN PRIVATE KEY-----")
        })
        .expect_err("the run is aborted");
    assert_eq!(
        abort,
        HookAborted::new("private key in tool output", "leak-guard")
    );
    assert_eq!(
        tool_runs.load(Ordering::SeqCst),
        1,
        "the tool ran before the abort"
    );
    assert!(log.take().is_empty(), "later POST hooks are skipped");
}

#[test]
fn panicking_hook_fails_open_by_default_and_poisons_nothing() {
    let registry = HookRegistry::new();
    let log = Log::default();
    registry
        .register_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("buggy"),
            |_: &mut ToolCallHookContext| -> Result<(), HookAborted> {
                panic!("index out of bounds")
            },
        )
        .expect("fits");
    logging_pre(&registry, &log, "after_buggy", HookOptions::new());
    registry
        .register_hook(
            POST_TOOL_CALL,
            |_: &mut ToolCallHookContext| -> Option<String> { panic!("post bug") },
        )
        .expect("fits");
    let panics = Arc::new(Mutex::new(Vec::new()));
    let sink = panics.clone();
    registry.events().subscribe(move |event| {
        if let Event::HookPanicked(p) = event {
            sink.lock()
                .expect("lock")
                .push((p.hook.clone(), p.point, p.fail_closed));
        }
    });
    let tool_runs = AtomicUsize::new(0);
    let report = run(&registry, &mut call("t"), &tool_runs).expect("fail-open");
    assert_eq!(
        report.observation, "tool output",
        "the panicking POST hook's effect is dropped"
    );
    assert_eq!(report.blocked, None);
    assert_eq!(tool_runs.load(Ordering::SeqCst), 1);
    assert_eq!(log.take(), ["after_buggy"]);
    let panics = panics.lock().expect("lock").clone();
    assert_eq!(panics.len(), 2);
    assert_eq!(
        panics[0],
        ("buggy".to_owned(), InterceptionPoint::PRE_TOOL_CALL, false)
    );
    assert_eq!(panics[1].1, POST_TOOL_CALL);
    // The registry still works after the panics.
    logging_pre(&registry, &log, "registered_after", HookOptions::new());
    assert_eq!(registry.clear_hooks(PRE_TOOL_CALL), 3);
}

#[test]
fn fail_closed_hook_blocks_on_panic_at_pre_and_withholds_at_post() {
    let registry = HookRegistry::new();
    registry
        .register_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new()
                .name("strict-pre")
                .tools(["pay"])
                .fail_closed(),
            |_: &mut ToolCallHookContext| -> Result<(), HookAborted> {
                panic!("policy service unreachable")
            },
        )
        .expect("fits");
    registry
        .register_hook_with(
            POST_TOOL_CALL,
            HookOptions::new()
                .name("strict-post")
                .tools(["read_secret"])
                .fail_closed(),
            |_: &mut ToolCallHookContext| -> Option<String> { panic!("redactor crashed") },
        )
        .expect("fits");
    assert_eq!(
        registry.get_hooks(PRE_TOOL_CALL)[0].failure,
        FailureMode::FailClosed
    );
    let tool_runs = AtomicUsize::new(0);
    let report = run(&registry, &mut call("pay"), &tool_runs).expect("no abort");
    assert_eq!(
        report.observation,
        "Tool execution blocked by hook. Tool: pay"
    );
    let abort = report.blocked.expect("blocked");
    assert_eq!(abort.source, "strict-pre");
    assert!(
        abort.reason.contains("policy service unreachable"),
        "{}",
        abort.reason
    );
    assert_eq!(tool_runs.load(Ordering::SeqCst), 0);

    let report = registry
        .run_tool_call(&mut call("read_secret"), |_| ToolOutput::text("s3cr3t"))
        .expect("no abort");
    assert!(
        !report.observation.contains("s3cr3t"),
        "{}",
        report.observation
    );
    assert_eq!(
        report.observation,
        hooks_core::runtime::withheld_message("read_secret")
    );
}

#[test]
fn failing_tool_output_is_seen_by_post_hooks() {
    let registry = HookRegistry::new();
    let seen = Arc::new(Mutex::new(None));
    let sink = seen.clone();
    registry
        .register_hook(POST_TOOL_CALL, move |ctx: &mut ToolCallHookContext| {
            *sink.lock().expect("lock") = ctx.tool_result.clone();
        })
        .expect("fits");
    let report = registry
        .run_tool_call(&mut call("t"), |_| ToolOutput::error("disk full"))
        .expect("the run goes on");
    assert_eq!(report.observation, "Error executing tool: disk full");
    assert_eq!(
        seen.lock().expect("lock").as_deref(),
        Some("Error executing tool: disk full")
    );
}

fn noop_pre(_: &mut ToolCallHookContext) {}
fn noop_post_reader(_: &ToolCallHookContext) -> Option<String> {
    None
}

#[test]
fn register_returns_an_id_and_unregister_takes_the_id_or_the_function() {
    let registry = HookRegistry::new();
    let by_id = registry
        .register_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().tools(["a"]),
            |_: &mut ToolCallHookContext| {},
        )
        .expect("fits");
    registry
        .register_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().tools(["b"]).agents(["R"]),
            noop_pre,
        )
        .expect("fits");
    registry
        .register_hook(POST_TOOL_CALL, |ctx: &mut ToolCallHookContext| {
            noop_post_reader(ctx)
        })
        .expect("fits");
    assert_eq!(registry.get_hooks(PRE_TOOL_CALL).len(), 2);

    assert!(registry.unregister_hook(PRE_TOOL_CALL, by_id));
    assert!(
        !registry.unregister_hook(PRE_TOOL_CALL, by_id),
        "already gone"
    );
    assert!(
        !registry.unregister_hook(POST_TOOL_CALL, noop_pre),
        "wrong point"
    );
    assert!(
        registry.unregister_hook(PRE_TOOL_CALL, noop_pre),
        "a filtered hook goes by function"
    );
    assert!(registry.get_hooks(PRE_TOOL_CALL).is_empty());
    assert_eq!(registry.get_hooks(POST_TOOL_CALL).len(), 1);
}

#[test]
fn get_hooks_lists_name_filters_origin_and_order() {
    let registry = HookRegistry::new();
    let id = registry
        .register_hook_with(
            POST_TOOL_CALL,
            HookOptions::new()
                .name("scrub")
                .tools(["WebSearch"])
                .agents(["Researcher"]),
            |_: &mut ToolCallHookContext| None::<String>,
        )
        .expect("fits");
    let hooks = registry.get_hooks(POST_TOOL_CALL);
    assert_eq!(hooks.len(), 1);
    let hook = &hooks[0];
    assert_eq!(hook.id, id);
    assert_eq!(hook.point, POST_TOOL_CALL);
    assert_eq!(hook.name, "scrub");
    assert_eq!(hook.tools, ["web_search"]);
    assert_eq!(hook.agents, ["Researcher"]);
    assert_eq!(hook.origin, HookOrigin::Runtime);
    assert_eq!(hook.order, 0);
    assert_eq!(hook.failure, FailureMode::FailOpen);
}

#[test]
fn clear_hooks_returns_the_count_and_clear_all_clears_everything() {
    let registry = HookRegistry::new();
    for _ in 0..3 {
        registry
            .register_hook(PRE_TOOL_CALL, |_: &mut ToolCallHookContext| {})
            .expect("fits");
    }
    for _ in 0..2 {
        registry
            .register_hook(POST_TOOL_CALL, |_: &mut ToolCallHookContext| {})
            .expect("fits");
    }
    assert_eq!(registry.clear_hooks(POST_TOOL_CALL), 2);
    assert_eq!(registry.clear_hooks(POST_TOOL_CALL), 0);
    registry
        .register_hook(POST_TOOL_CALL, |_: &mut ToolCallHookContext| {})
        .expect("fits");
    assert_eq!(registry.clear_all_hooks(), 4);
    assert!(
        registry.get_hooks(PRE_TOOL_CALL).is_empty()
            && registry.get_hooks(POST_TOOL_CALL).is_empty()
    );
}

#[test]
fn register_hook_refuses_a_filter_its_point_does_not_take() {
    // A return type that does not fit the point does not compile (see the
    // compile_fail doctests); a filter that does not apply is refused.
    let registry = HookRegistry::new();
    let error = registry
        .register_hook_with(
            hooks_core::OUTPUT,
            HookOptions::new().agents(["Writer"]),
            |_: &mut hooks_core::OutputContext| {},
        )
        .expect_err("OUTPUT has no agent");
    assert!(matches!(
        error,
        RegisterError::FilterDoesNotApply {
            point: InterceptionPoint::OUTPUT,
            filter: "agents",
        }
    ));
    assert!(
        registry
            .register_hook_with(
                hooks_core::PRE_MODEL_CALL,
                HookOptions::new().tools(["web_search"]),
                |_: &mut hooks_core::LlmCallHookContext| {},
            )
            .is_err()
    );
    assert!(
        registry.get_hooks(InterceptionPoint::OUTPUT).is_empty()
            && registry
                .get_hooks(InterceptionPoint::PRE_MODEL_CALL)
                .is_empty()
    );
}

#[test]
fn legacy_and_new_api_manage_the_same_chains() {
    let registry = HookRegistry::new();
    let legacy = registry.register_before_tool_call_hook_with(
        HookOptions::new().tools(["x"]),
        |_: &mut ToolCallHookContext| None::<bool>,
    );
    let new = registry
        .register_hook(PRE_TOOL_CALL, |_: &mut ToolCallHookContext| {})
        .expect("fits");
    registry.register_after_tool_call_hook(|_: &mut ToolCallHookContext| None::<String>);

    assert_eq!(
        registry.get_before_tool_call_hooks(),
        registry.get_hooks(PRE_TOOL_CALL)
    );
    assert_eq!(
        registry.get_after_tool_call_hooks(),
        registry.get_hooks(POST_TOOL_CALL)
    );
    assert!(
        registry.unregister_hook(PRE_TOOL_CALL, legacy),
        "new API removes a legacy hook"
    );
    assert!(
        registry.unregister_before_tool_call_hook(new),
        "legacy API removes a new hook"
    );
    registry
        .register_hook(PRE_TOOL_CALL, |_: &mut ToolCallHookContext| {})
        .expect("fits");
    assert_eq!(registry.clear_all_tool_call_hooks(), (1, 1));
}

fn dispatched_events(registry: &HookRegistry) -> Arc<Mutex<Vec<hooks_core::HookDispatchedEvent>>> {
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    registry.events().subscribe(move |event| {
        if let Event::HookDispatched(e) = event {
            sink.lock().expect("lock").push(e.clone());
        }
    });
    events
}

#[test]
fn each_dispatch_with_a_hook_emits_one_event_with_outcome_and_abort_details() {
    let registry = HookRegistry::new();
    let events = dispatched_events(&registry);
    registry
        .register_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("blocker").tools(["drop_table"]),
            |_: &mut ToolCallHookContext| -> Result<(), HookAborted> {
                Err(HookAborted::with_reason("no DDL"))
            },
        )
        .expect("fits");
    registry
        .register_hook(PRE_TOOL_CALL, |_: &mut ToolCallHookContext| {})
        .expect("fits");
    registry
        .register_hook_with(
            POST_TOOL_CALL,
            HookOptions::new().tools(["read_file"]),
            |_: &mut ToolCallHookContext| Some("x".to_owned()),
        )
        .expect("fits");

    let tool_runs = AtomicUsize::new(0);
    run(&registry, &mut call_by("drop_table", "DBA"), &tool_runs).expect("no abort");
    run(&registry, &mut call_by("read_file", "Reader"), &tool_runs).expect("no abort");
    let events = events.lock().expect("lock").clone();
    let summary: Vec<(InterceptionPoint, &str, usize, &str)> = events
        .iter()
        .map(|e| {
            (
                e.point,
                e.outcome,
                e.hooks_run,
                e.tool_name.as_deref().unwrap_or(""),
            )
        })
        .collect();
    // drop_table: PRE aborted by the first hook; no POST hook matches it.
    // read_file: PRE proceeded through one hook; POST modified.
    assert_eq!(
        summary,
        [
            (InterceptionPoint::PRE_TOOL_CALL, "aborted", 1, "drop_table"),
            (
                InterceptionPoint::PRE_TOOL_CALL,
                "proceeded",
                1,
                "read_file"
            ),
            (
                InterceptionPoint::POST_TOOL_CALL,
                "modified",
                1,
                "read_file"
            ),
        ]
    );
    assert_eq!(events[0].abort_reason.as_deref(), Some("no DDL"));
    assert_eq!(
        events[0].abort_source.as_deref(),
        Some("blocker"),
        "the hook's name where no source was given"
    );
    assert_eq!(events[0].agent_role.as_deref(), Some("DBA"));
    assert_eq!(events[1].abort_reason, None);
}

#[test]
fn no_event_is_emitted_when_no_hook_ran() {
    let registry = HookRegistry::new();
    let events = dispatched_events(&registry);
    registry
        .register_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().tools(["other"]),
            |_: &mut ToolCallHookContext| {},
        )
        .expect("fits");
    registry.dispatch_pre(&mut call("t"));
    registry.dispatch_post(&mut call("t"));
    assert!(events.lock().expect("lock").is_empty());
}

#[test]
fn explain_lists_running_hooks_in_order_and_the_filter_that_skips_the_others() {
    let global = HookRegistry::new();
    let crew = HookRegistry::new();
    let log = Log::default();
    logging_pre(&global, &log, "everyone", HookOptions::new());
    logging_pre(
        &global,
        &log,
        "search_only",
        HookOptions::new().tools(["web_search"]),
    );
    logging_pre(&crew, &log, "crew_validator", HookOptions::new());
    logging_post(
        &global,
        &log,
        "writers_only",
        HookOptions::new().agents(["Writer"]),
    );
    let explanation = Dispatcher::new(&global)
        .with_scope(&crew)
        .explain("Read File", Some("Researcher"));
    assert_eq!(explanation.tool_name.as_deref(), Some("read_file"));
    assert_eq!(
        explanation.running(PRE_TOOL_CALL),
        ["everyone", "crew_validator"]
    );
    assert!(explanation.running(POST_TOOL_CALL).is_empty());
    let verdicts: Vec<(&str, &Verdict)> = explanation
        .hooks
        .iter()
        .map(|h| (h.hook.name.as_str(), &h.verdict))
        .collect();
    assert_eq!(
        verdicts,
        [
            ("everyone", &Verdict::Runs),
            ("search_only", &Verdict::SkippedByTools),
            ("crew_validator", &Verdict::Runs),
            ("writers_only", &Verdict::SkippedByAgents),
        ]
    );
    let text = explanation.to_string();
    assert!(
        text.contains(
            "skipped  search_only: tools = [\"web_search\"] does not include `read_file`"
        ),
        "{text}"
    );
    assert!(
        text.contains("skipped  writers_only: agents = [\"Writer\"] does not include `Researcher`"),
        "{text}"
    );
    // explain runs nothing.
    assert!(log.take().is_empty());
}

#[test]
fn dispatch_outcome_reports_modified_only_for_replacements() {
    let registry = HookRegistry::new();
    registry
        .register_hook(POST_TOOL_CALL, |_: &mut ToolCallHookContext| None::<String>)
        .expect("fits");
    let mut ctx = call("t");
    assert_eq!(registry.dispatch_post(&mut ctx), DispatchOutcome::Proceeded);
    registry
        .register_hook(POST_TOOL_CALL, |_: &mut ToolCallHookContext| {
            Some("new".to_owned())
        })
        .expect("fits");
    assert_eq!(registry.dispatch_post(&mut ctx), DispatchOutcome::Modified);
    assert_eq!(ctx.tool_result.as_deref(), Some("new"));
}

#[test]
fn spec17_an_end_hook_that_edits_the_output_in_place_is_reported_modified() {
    let registry = HookRegistry::new();
    let completed = || {
        ExecutionEndContext::completed(CrewOutput {
            raw: "done".to_owned(),
            ..CrewOutput::default()
        })
    };
    registry
        .register_hook(EXECUTION_END, |_: &mut ExecutionEndContext| {})
        .expect("fits");
    assert_eq!(
        registry.dispatch(EXECUTION_END, &mut completed()),
        DispatchOutcome::Proceeded
    );
    registry
        .register_hook(EXECUTION_END, |ctx: &mut ExecutionEndContext| {
            if let Some(output) = &mut ctx.output {
                output.raw.push_str(" [signed]");
            }
        })
        .expect("fits");
    let mut ctx = completed();
    assert_eq!(
        registry.dispatch(EXECUTION_END, &mut ctx),
        DispatchOutcome::Modified
    );
    assert_eq!(ctx.output.map(|o| o.raw).as_deref(), Some("done [signed]"));
    // A failed kickoff has no output to edit: its error stands.
    assert_eq!(
        registry.dispatch(EXECUTION_END, &mut ExecutionEndContext::failed("down")),
        DispatchOutcome::Proceeded
    );
}
