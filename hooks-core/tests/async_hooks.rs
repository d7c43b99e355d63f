//! `async` hooks (SPEC §7): registered at run time or by attribute, they
//! run in their place in the one ordered chain, their decisions and panics
//! count like a synchronous hook's, and a dispatch that awaits them is a
//! `Send` future a multi-threaded runtime can move between threads.

mod common;
use common::Log;

use std::sync::Arc;
use std::time::Duration;

use hooks_core::runtime::{Dispatcher, TOOL_CALL_POINTS, ToolOutput};
use hooks_core::{
    DispatchOutcome, HookAborted, HookOptions, HookRegistry, POST_STEP, POST_TOOL_CALL,
    PRE_TOOL_CALL, StepContext, StepKind, ToolCallHookContext, async_hook,
};
use serde_json::Map;

fn call(tool: &str) -> ToolCallHookContext {
    ToolCallHookContext::new(tool, Map::new())
}

fn sync_pre(registry: &HookRegistry, log: &Log, name: &'static str) {
    let log = log.clone();
    registry
        .register_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name(name),
            move |_: &mut ToolCallHookContext| log.push(name),
        )
        .expect("() fits PRE");
}

/// An `async` PRE hook that yields to the runtime (a timer) before it
/// logs, so that the dispatch really is suspended in the middle.
fn async_pre(registry: &HookRegistry, log: &Log, name: &'static str) {
    let log = log.clone();
    registry
        .register_async_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name(name),
            async_hook(move |_: &mut ToolCallHookContext| {
                let log = log.clone();
                Box::pin(async move {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    log.push(name);
                })
            }),
        )
        .expect("() fits PRE");
}

async fn dispatch_pre(registry: &HookRegistry, ctx: &mut ToolCallHookContext) -> DispatchOutcome {
    let hooks = Dispatcher::new(registry).begin_call(&TOOL_CALL_POINTS);
    hooks.dispatch_async(PRE_TOOL_CALL, ctx).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_02_async_and_sync_hooks_share_one_registration_order() {
    let registry = HookRegistry::new();
    let log = Log::default();
    sync_pre(&registry, &log, "first");
    async_pre(&registry, &log, "second");
    sync_pre(&registry, &log, "third");
    async_pre(&registry, &log, "fourth");
    let outcome = dispatch_pre(&registry, &mut call("search")).await;
    assert_eq!(outcome, DispatchOutcome::Proceeded);
    assert_eq!(log.take(), ["first", "second", "third", "fourth"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_11_an_async_abort_blocks_and_stops_the_chain() {
    async fn deny(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
        tokio::task::yield_now().await;
        Err(format!("no {}", ctx.tool_name()).into())
    }
    let registry = HookRegistry::new();
    let log = Log::default();
    registry
        .register_async_hook_with(PRE_TOOL_CALL, HookOptions::new().name("deny"), deny)
        .expect("Result fits PRE");
    sync_pre(&registry, &log, "after");
    let mut ctx = call("drop_table");
    let report = Dispatcher::new(&registry)
        .begin_call(&TOOL_CALL_POINTS)
        .run_tool_call_async(&mut ctx, |_| async { panic!("a blocked tool never runs") })
        .await
        .expect("no POST hook aborts");
    let blocked = report.blocked.expect("the call is blocked");
    assert_eq!(blocked.reason, "no drop_table");
    assert_eq!(blocked.source, "deny", "the hook's name fills the source");
    assert!(log.take().is_empty(), "the chain stops at the abort");
    assert!(
        report
            .observation
            .starts_with("Tool execution blocked by hook")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_13_an_async_post_hook_replaces_the_result_the_tool_gave() {
    let registry = HookRegistry::new();
    registry
        .register_async_hook(
            POST_TOOL_CALL,
            async_hook(|ctx: &mut ToolCallHookContext| {
                Box::pin(async move {
                    tokio::task::yield_now().await;
                    ctx.tool_result
                        .as_deref()
                        .map(|r| r.replace("hunter2", "***"))
                })
            }),
        )
        .expect("Option<String> fits POST");
    let mut ctx = call("lookup");
    let report = Dispatcher::new(&registry)
        .begin_call(&TOOL_CALL_POINTS)
        .run_tool_call_async(&mut ctx, |_| async {
            tokio::time::sleep(Duration::from_millis(1)).await;
            ToolOutput::text("password hunter2")
        })
        .await
        .expect("no POST hook aborts");
    assert_eq!(report.observation, "password ***");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_14_a_panicking_async_hook_is_contained() {
    let registry = HookRegistry::new();
    let log = Log::default();
    registry
        .register_async_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("open"),
            async_hook(|_: &mut ToolCallHookContext| {
                Box::pin(async {
                    tokio::task::yield_now().await;
                    if true {
                        panic!("fail-open hook broke after an await");
                    }
                })
            }),
        )
        .expect("() fits PRE");
    sync_pre(&registry, &log, "next");
    let outcome = dispatch_pre(&registry, &mut call("search")).await;
    assert_eq!(
        outcome,
        DispatchOutcome::Proceeded,
        "fail-open: the call goes on"
    );
    assert_eq!(log.take(), ["next"]);

    let closed = HookRegistry::new();
    closed
        .register_async_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("closed").fail_closed(),
            async_hook(|_: &mut ToolCallHookContext| {
                Box::pin(async {
                    tokio::task::yield_now().await;
                    if true {
                        panic!("fail-closed hook broke");
                    }
                })
            }),
        )
        .expect("() fits PRE");
    match dispatch_pre(&closed, &mut call("search")).await {
        DispatchOutcome::Aborted(abort) => {
            assert_eq!(abort.source, "closed");
            assert!(abort.reason.contains("fail-closed hook broke"), "{abort:?}");
        }
        other => panic!("a fail-closed panic blocks, got {other:?}"),
    }
}

#[test]
fn a_synchronous_dispatch_drives_an_async_hook_to_completion() {
    let registry = HookRegistry::new();
    registry
        .register_async_hook(
            POST_STEP,
            async_hook(|ctx: &mut StepContext| {
                Box::pin(async move {
                    std::future::ready(()).await;
                    Some(format!("{} (reviewed)", ctx.payload))
                })
            }),
        )
        .expect("Option<String> fits POST_STEP");
    let mut ctx = StepContext::new(StepKind::Task, "write", "draft");
    assert_eq!(
        registry.dispatch(POST_STEP, &mut ctx),
        DispatchOutcome::Modified
    );
    assert_eq!(ctx.payload, "draft (reviewed)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dispatch_awaiting_async_hooks_is_a_send_future() {
    let registry = Arc::new(HookRegistry::new());
    let log = Log::default();
    async_pre(&registry, &log, "spawned");
    let shared = Arc::clone(&registry);
    // `tokio::spawn` only takes `Send` futures: this compiles only if the
    // dispatch future (snapshot, chain walk, hook future) is `Send`.
    let outcome = tokio::spawn(async move { dispatch_pre(&shared, &mut call("search")).await })
        .await
        .expect("the task completes");
    assert_eq!(outcome, DispatchOutcome::Proceeded);
    assert_eq!(log.take(), ["spawned"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_snapshot_holds_across_the_await_of_the_tool() {
    let registry = Arc::new(HookRegistry::new());
    let log = Log::default();
    let post_log = log.clone();
    registry
        .register_hook(POST_TOOL_CALL, move |_: &mut ToolCallHookContext| {
            post_log.push("post")
        })
        .expect("() fits POST");
    let mut ctx = call("slow");
    let changer = Arc::clone(&registry);
    let report = Dispatcher::new(&registry)
        .begin_call(&TOOL_CALL_POINTS)
        .run_tool_call_async(&mut ctx, |_| async move {
            // The POST hook is removed while the tool runs: the call keeps
            // the hooks it started with.
            changer.clear_hooks(POST_TOOL_CALL);
            tokio::time::sleep(Duration::from_millis(1)).await;
            ToolOutput::text("done")
        })
        .await
        .expect("no POST hook aborts");
    assert_eq!(report.observation, "done");
    assert_eq!(log.take(), ["post"]);
    assert!(registry.get_hooks(POST_TOOL_CALL).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_fn_items_unregister_by_function() {
    async fn gate(_: &mut ToolCallHookContext) {}
    let registry = HookRegistry::new();
    registry
        .register_async_hook(PRE_TOOL_CALL, gate)
        .expect("() fits PRE");
    assert_eq!(registry.get_hooks(PRE_TOOL_CALL).len(), 1);
    assert!(registry.unregister_hook(PRE_TOOL_CALL, gate));
    assert!(registry.get_hooks(PRE_TOOL_CALL).is_empty());
}

/// A runtime that keeps what a tool's run told beside its output (how long
/// it ran, how it failed) gets it back whatever the chains did after the
/// tool, and nothing when a PRE hook blocked the call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_tool_run_told_comes_back_beside_the_report() {
    let registry = HookRegistry::new();
    let mut ctx = call("lookup");
    let (report, told) = Dispatcher::new(&registry)
        .begin_call(&TOOL_CALL_POINTS)
        .run_tool_call_async_keeping(&mut ctx, |_| async {
            tokio::time::sleep(Duration::from_millis(1)).await;
            (ToolOutput::error("the index is down"), "failed")
        })
        .await;
    assert_eq!(told, Some("failed"));
    let report = report.expect("no POST hook aborts");
    assert_eq!(
        report.observation,
        "Error executing tool: the index is down"
    );

    // A POST hook's abort ends the run: what the tool told still comes back.
    registry
        .register_async_hook(
            POST_TOOL_CALL,
            async_hook(|_: &mut ToolCallHookContext| {
                Box::pin(async {
                    tokio::task::yield_now().await;
                    Err::<(), HookAborted>("stop the run".into())
                })
            }),
        )
        .expect("Result fits POST");
    let mut ctx = call("lookup");
    let (report, told) = Dispatcher::new(&registry)
        .begin_call(&TOOL_CALL_POINTS)
        .run_tool_call_async_keeping(&mut ctx, |_| async { (ToolOutput::text("ok"), 7) })
        .await;
    assert_eq!(
        report.map_err(|abort| abort.reason),
        Err("stop the run".to_owned())
    );
    assert_eq!(told, Some(7));

    // Blocked before the tool: no run, nothing told.
    registry
        .register_hook(PRE_TOOL_CALL, |_: &mut ToolCallHookContext| {
            Err::<(), HookAborted>("not today".into())
        })
        .expect("Result fits PRE");
    let mut ctx = call("lookup");
    let (report, told) = Dispatcher::new(&registry)
        .begin_call(&TOOL_CALL_POINTS)
        .run_tool_call_async_keeping(&mut ctx, |_| async { never_runs() })
        .await;
    assert_eq!(told, None);
    assert!(report.is_err(), "the POST hook still aborts a blocked call");
}

fn never_runs() -> (ToolOutput, i32) {
    panic!("a blocked tool never runs")
}
