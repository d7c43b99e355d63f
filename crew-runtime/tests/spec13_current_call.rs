//! SPEC §13 "Effect once", the tool's side: a running tool reads its call
//! (id, tool name, idempotency key) through `CurrentCall::get()`, whatever
//! kind of tool it is and wherever its body runs; a key left in the call's
//! extensions by a PRE hook (as a durable kickoff's layer will) reaches
//! the tool; outside a tool's run there is no current call.

mod common;

use std::sync::Arc;
use std::thread::ThreadId;

use common::*;
use crew_runtime::prelude::*;
use crew_runtime::{CrewBuilder, CurrentCall, ScriptedCall, SyncPlacement};
use schemars::JsonSchema;
use serde::Deserialize;

/// What a tool read of its call: call id, tool name, key.
type Read = (String, String, Option<String>);

/// What `CurrentCall::get()` gives where it is called.
fn read_current() -> Option<Read> {
    CurrentCall::get().map(|call| {
        (
            call.call_id().to_owned(),
            call.tool_name().to_owned(),
            call.idempotency_key().map(|key| key.as_str().to_owned()),
        )
    })
}

/// Runs `tool` through a crew whose model calls `calls` (one turn, in
/// order), on the calling thread; `configure` adds hooks.
fn run(tool: Tool, calls: &[&str], configure: impl FnOnce(CrewBuilder) -> CrewBuilder) {
    let llm = Arc::new(
        ScriptedLlm::new()
            .calls(
                calls
                    .iter()
                    .map(|name| ScriptedCall::new(*name, json!({"text": "hi"}))),
            )
            .answer("done"),
    );
    let worker = Agent::builder("Worker").tool(tool).llm(llm.clone()).build();
    let builder = Crew::builder()
        .agent(worker.clone())
        .task(Task::builder("Work").agent(&worker).build())
        .global_registry(fresh_registry());
    let crew = configure(builder).build().expect("the crew builds");
    let output = crew.kickoff_blocking(()).expect("the crew runs");
    assert_eq!(output.raw, "done");
    // Each call's observation is what the tool returned: no call failed.
    for observation in llm.observations() {
        assert_eq!(observation, "read", "{:?}", llm.observations());
    }
}

#[derive(Deserialize, JsonSchema)]
struct Text {
    #[allow(dead_code)]
    text: String,
}

/// A plain `fn` tool, placed as `placement` says, recording what it read
/// and the thread it ran on.
fn sync_tool(reads: &Log<Option<Read>>, threads: &Log<ThreadId>, placement: SyncPlacement) -> Tool {
    let (reads, threads) = (reads.clone(), threads.clone());
    Tool::dynamic(
        "probe",
        "Reads its call",
        json!({"type": "object"}),
        move |_| {
            push(&reads, read_current());
            push(&threads, std::thread::current().id());
            Ok::<_, String>(json!("read"))
        },
    )
    .with_sync_placement(placement)
}

#[test]
fn a_typed_tool_reads_its_call_id_and_tool_name() {
    let reads = log();
    let sink = reads.clone();
    let tool = Tool::typed("Look Up", "Reads its call", move |_: Text| {
        push(&sink, read_current());
        Ok::<_, String>("read")
    });
    run(tool.into(), &["look_up"], |crew| crew);
    assert_eq!(
        take(&reads),
        [Some(("call_1".to_owned(), "look_up".to_owned(), None))]
    );
}

#[test]
fn an_async_typed_tool_reads_its_call_across_awaits() {
    let reads = log();
    let sink = reads.clone();
    let tool = Tool::typed("probe", "Reads its call", move |_: Text| {
        let sink = sink.clone();
        async move {
            let before = read_current();
            tokio::task::yield_now().await;
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            push(&sink, before);
            push(&sink, read_current());
            Ok::<_, String>("read")
        }
    });
    run(tool.into(), &["probe"], |crew| crew);
    let call = Some(("call_1".to_owned(), "probe".to_owned(), None));
    assert_eq!(take(&reads), [call.clone(), call]);
}

#[test]
fn a_dynamic_async_tool_reads_its_call_and_concurrent_calls_each_read_their_own() {
    let reads = log();
    let sink = reads.clone();
    let tool = Tool::dynamic(
        "probe",
        "Reads its call",
        json!({"type": "object"}),
        move |_| {
            let sink = sink.clone();
            async move {
                tokio::task::yield_now().await;
                push(&sink, read_current());
                Ok::<_, String>(json!("read"))
            }
        },
    );
    run(tool, &["probe", "probe", "probe"], |crew| crew);
    let mut read = take(&reads);
    read.sort();
    let expected: Vec<Option<Read>> = (1..=3)
        .map(|n| Some((format!("call_{n}"), "probe".to_owned(), None)))
        .collect();
    assert_eq!(read, expected);
}

#[test]
fn a_sync_tool_on_the_blocking_pool_reads_its_call() {
    let (reads, threads) = (log(), log());
    run(
        sync_tool(&reads, &threads, SyncPlacement::BlockingPool),
        &["probe", "probe"],
        |crew| crew,
    );
    let here = std::thread::current().id();
    assert!(
        take(&threads).iter().all(|thread| *thread != here),
        "the body ran on the blocking pool"
    );
    let mut read = take(&reads);
    read.sort();
    assert_eq!(
        read,
        [
            Some(("call_1".to_owned(), "probe".to_owned(), None)),
            Some(("call_2".to_owned(), "probe".to_owned(), None)),
        ]
    );
}

#[test]
fn a_sync_tool_run_in_place_reads_its_call() {
    let (reads, threads) = (log(), log());
    run(
        sync_tool(&reads, &threads, SyncPlacement::InPlace),
        &["probe"],
        |crew| crew,
    );
    // `kickoff_blocking` drives its runtime on this thread: in place is here.
    assert_eq!(take(&threads), [std::thread::current().id()]);
    assert_eq!(
        take(&reads),
        [Some(("call_1".to_owned(), "probe".to_owned(), None))]
    );
}

#[test]
fn no_call_is_current_in_hooks_or_outside_a_run() {
    let seen = log();
    let (pre, post) = (seen.clone(), seen.clone());
    let reads = log();
    let sink = reads.clone();
    let tool = Tool::dynamic(
        "probe",
        "Reads its call",
        json!({"type": "object"}),
        move |_| {
            push(&sink, read_current());
            Ok::<_, String>(json!("read"))
        },
    );
    run(tool, &["probe"], |crew| {
        crew.hook(PRE_TOOL_CALL, move |_: &mut ToolCallHookContext| {
            push(&pre, ("pre", read_current()));
        })
        .hook(POST_TOOL_CALL, move |_: &mut ToolCallHookContext| {
            push(&post, ("post", read_current()));
        })
    });
    assert_eq!(take(&seen), [("pre", None), ("post", None)]);
    assert!(take(&reads)[0].is_some(), "the tool itself read its call");
    assert!(CurrentCall::get().is_none());
}

/// How the durable layer will hand a call its key: a PRE hook (here, the
/// test's stand-in for that layer) leaves it in the call's extensions.
#[cfg(feature = "durable")]
#[test]
fn a_key_left_in_the_extensions_by_a_pre_hook_reaches_the_tool() {
    use crew_runtime::IdempotencyKey;

    let key = IdempotencyKey::derive(b"a random kickoff id", "task 0/turn 1/call_1", 0);
    let expected = key.as_str().to_owned();
    for placement in [SyncPlacement::BlockingPool, SyncPlacement::InPlace] {
        let (reads, threads) = (log(), log());
        let given = key.clone();
        run(sync_tool(&reads, &threads, placement), &["probe"], |crew| {
            crew.hook(PRE_TOOL_CALL, move |ctx: &mut ToolCallHookContext| {
                ctx.extensions.insert(given.clone());
            })
        });
        assert_eq!(
            take(&reads),
            [Some((
                "call_1".to_owned(),
                "probe".to_owned(),
                Some(expected.clone())
            ))],
            "{placement:?}"
        );
    }

    let reads = log();
    let sink = reads.clone();
    let tool = Tool::dynamic(
        "probe",
        "Reads its call",
        json!({"type": "object"}),
        move |_| {
            let sink = sink.clone();
            async move {
                push(&sink, read_current());
                Ok::<_, String>(json!("read"))
            }
        },
    );
    run(tool, &["probe"], |crew| {
        crew.hook(PRE_TOOL_CALL, move |ctx: &mut ToolCallHookContext| {
            ctx.extensions.insert(key.clone());
        })
    });
    assert_eq!(
        take(&reads),
        [Some((
            "call_1".to_owned(),
            "probe".to_owned(),
            Some(expected)
        ))]
    );
}
