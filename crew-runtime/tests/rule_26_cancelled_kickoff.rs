//! SPEC rule 26: a kickoff dropped (cancelled) after `EXECUTION_START`
//! runs its sync `EXECUTION_END` hooks with `Cancelled` during the drop,
//! spawns its async ones on the runtime, and reports `CrewKickoffFailed`;
//! a tool call it leaves behind is reported (`ToolUsageAbandoned`): an
//! async tool as stopped, a synchronous one, which cannot be stopped, with
//! what it did once its body has ended.

mod common;

use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use common::*;
use crew_runtime::SyncPlacement;
use crew_runtime::events::ToolUsageAbandonedEvent;
use crew_runtime::prelude::*;
use crew_runtime::{EXECUTION_END, ExecutionEndContext, ExecutionStatus, async_hook};

/// A crew whose agent calls `tool` once, then answers.
fn crew_calling(global: &Arc<HookRegistry>, tool: Tool) -> Crew {
    let name = tool.name().to_owned();
    let llm = Arc::new(ScriptedLlm::new().call(name, json!({})).answer("done"));
    let worker = agent("Worker", vec![tool], &llm);
    Crew::builder()
        .name("interrupted")
        .agent(worker.clone())
        .task(Task::builder("Work").agent(&worker).build())
        .global_registry(global.clone())
        .build()
        .expect("builds")
}

fn watch_ends(global: &HookRegistry) -> Log<(ExecutionStatus, Option<String>)> {
    let ends = log();
    let sink = ends.clone();
    global
        .register_hook(EXECUTION_END, move |ctx: &mut ExecutionEndContext| {
            push(&sink, (ctx.status, ctx.error.clone()));
        })
        .expect("registers");
    ends
}

fn watch_abandoned(crew: &Crew) -> Log<ToolUsageAbandonedEvent> {
    let seen = log();
    let sink = seen.clone();
    crew.events().subscribe(move |event| {
        if let Event::ToolUsageAbandoned(abandoned) = event {
            push(&sink, abandoned.clone());
        }
    });
    seen
}

fn wait_for<T: Clone>(log: &Log<T>, count: usize) -> Vec<T> {
    for _ in 0..500 {
        let seen = take(log);
        if seen.len() >= count {
            return seen;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    take(log)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kickoff_dropped_while_a_sync_tool_runs_ends_cancelled_and_reports_what_the_tool_did() {
    let global = fresh_registry();
    let ends = watch_ends(&global);
    let (release, released) = mpsc::channel::<()>();
    let released = std::sync::Mutex::new(released);
    let (entered, in_tool) = mpsc::channel::<()>();
    let entered = std::sync::Mutex::new(entered);
    let write = Tool::dynamic(
        "write_file",
        "Writes",
        json!({"type": "object"}),
        move |_| {
            let _ = entered.lock().map(|entered| entered.send(()));
            let _ = released
                .lock()
                .map(|released| released.recv_timeout(Duration::from_secs(30)));
            Ok::<_, String>(json!("written"))
        },
    )
    .with_sync_placement(SyncPlacement::BlockingPool);
    let crew = crew_calling(&global, write);
    let abandoned = watch_abandoned(&crew);
    let failed = log();
    let sink = failed.clone();
    crew.events().subscribe(move |event| {
        if let Event::CrewKickoffFailed(e) = event {
            push(&sink, e.error.clone());
        }
    });

    let kickoff = tokio::spawn({
        let crew = crew.clone();
        async move { crew.kickoff(()).await }
    });
    tokio::task::spawn_blocking(move || in_tool.recv_timeout(Duration::from_secs(30)))
        .await
        .expect("joins")
        .expect("the tool started");
    kickoff.abort();
    let _ = kickoff.await;

    // During the drop: END with Cancelled, once, and the kickoff failed.
    assert_eq!(
        take(&ends),
        [(
            ExecutionStatus::Cancelled,
            Some("the kickoff was cancelled".to_owned())
        )]
    );
    assert_eq!(take(&failed), ["the kickoff was cancelled"]);
    assert!(take(&abandoned).is_empty(), "the tool is still running");
    // The tool ends on its thread: what it did is on record.
    release.send(()).expect("the tool waits");
    let abandoned = wait_for(&abandoned, 1);
    assert_eq!(abandoned.len(), 1);
    assert_eq!(abandoned[0].tool_name, "write_file");
    assert!(abandoned[0].completed);
    assert_eq!(abandoned[0].result.as_deref(), Some("written"));
    assert_eq!(abandoned[0].agent_role.as_deref(), Some("Worker"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kickoff_dropped_while_an_async_tool_waits_reports_it_stopped() {
    let global = fresh_registry();
    let ends = watch_ends(&global);
    let hang = Tool::dynamic(
        "fetch",
        "Never answers",
        json!({"type": "object"}),
        |_| async {
            std::future::pending::<()>().await;
            Ok::<_, String>(json!("unreachable"))
        },
    );
    let crew = crew_calling(&global, hang);
    let abandoned = watch_abandoned(&crew);

    let timed_out = tokio::time::timeout(Duration::from_millis(100), crew.kickoff(())).await;

    assert!(timed_out.is_err(), "the kickoff was still running");
    let abandoned = take(&abandoned);
    assert_eq!(abandoned.len(), 1);
    assert!(!abandoned[0].completed);
    assert_eq!(abandoned[0].result, None);
    assert_eq!(take(&ends).len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_execution_end_hooks_of_a_cancelled_kickoff_run_on_the_runtime() {
    let global = fresh_registry();
    let seen = log();
    let sink = seen.clone();
    global
        .register_async_hook(
            EXECUTION_END,
            async_hook(move |ctx: &mut ExecutionEndContext| {
                let sink = sink.clone();
                let status = ctx.status;
                Box::pin(async move {
                    tokio::task::yield_now().await;
                    push(&sink, status);
                })
            }),
        )
        .expect("registers");
    let hang = Tool::dynamic(
        "fetch",
        "Never answers",
        json!({"type": "object"}),
        |_| async {
            std::future::pending::<()>().await;
            Ok::<_, String>(json!("unreachable"))
        },
    );
    let crew = crew_calling(&global, hang);

    let _ = tokio::time::timeout(Duration::from_millis(100), crew.kickoff(())).await;

    assert_eq!(wait_for(&seen, 1), [ExecutionStatus::Cancelled]);
}

#[test]
fn a_completed_kickoff_ends_once_and_reports_nothing_abandoned() {
    let global = fresh_registry();
    let ends = watch_ends(&global);
    let quick = Tool::dynamic("quick", "Answers", json!({"type": "object"}), |_| {
        Ok::<_, String>(json!("ok"))
    });
    let crew = crew_calling(&global, quick);
    let abandoned = watch_abandoned(&crew);

    crew.kickoff_blocking(()).expect("runs");

    assert_eq!(take(&ends), [(ExecutionStatus::Completed, None)]);
    assert!(take(&abandoned).is_empty());
}

#[test]
fn a_sync_tool_past_its_timeout_reports_what_it_did_when_it_ends() {
    let global = fresh_registry();
    let slow = Tool::dynamic("slow", "Takes its time", json!({"type": "object"}), |_| {
        std::thread::sleep(Duration::from_millis(200));
        Ok::<_, String>(json!("finally"))
    })
    .with_timeout(Duration::from_millis(20));
    let crew = crew_calling(&global, slow);
    let abandoned = watch_abandoned(&crew);

    crew.kickoff_blocking(()).expect("the run goes on");

    let abandoned = wait_for(&abandoned, 1);
    assert_eq!(abandoned.len(), 1);
    assert!(abandoned[0].completed);
    assert_eq!(abandoned[0].result.as_deref(), Some("finally"));
}
