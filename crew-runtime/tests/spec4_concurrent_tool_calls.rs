//! Several tool calls of one turn run concurrently, each in a task of its
//! own with its PRE and POST hooks; observations return in call order.

mod common;

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::ThreadId;
use std::time::Duration;

use common::*;
use crew_runtime::prelude::*;

/// Lets a call go on once `wanted` calls are inside the tool at once (or
/// after a generous safety timeout, so a regression fails an assertion
/// instead of hanging).
struct Rendezvous {
    inside: Mutex<usize>,
    changed: Condvar,
    wanted: usize,
    /// The most calls that were inside the tool at once.
    most: Mutex<usize>,
}

impl Rendezvous {
    fn new(wanted: usize) -> Self {
        Rendezvous {
            inside: Mutex::new(0),
            changed: Condvar::new(),
            wanted,
            most: Mutex::new(0),
        }
    }

    fn most(&self) -> usize {
        *self.most.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn meet(&self) {
        let mut inside = self.inside.lock().unwrap_or_else(PoisonError::into_inner);
        *inside += 1;
        {
            let mut most = self.most.lock().unwrap_or_else(PoisonError::into_inner);
            *most = (*most).max(*inside);
        }
        self.changed.notify_all();
        let (mut inside, _timeout) = self
            .changed
            .wait_timeout_while(inside, Duration::from_secs(10), |inside| {
                *inside < self.wanted
            })
            .unwrap_or_else(PoisonError::into_inner);
        *inside -= 1;
    }
}

/// A registry whose PRE hook notes its thread in `tool_input` and whose
/// POST hook records `(call number, PRE thread, POST thread)`.
fn thread_recording_registry() -> (Arc<HookRegistry>, Log<(u64, ThreadId, ThreadId)>) {
    let global = fresh_registry();
    let threads: Arc<Mutex<Vec<ThreadId>>> = Arc::new(Mutex::new(Vec::new()));
    let pre_threads = threads.clone();
    global
        .register_hook(PRE_TOOL_CALL, move |ctx: &mut ToolCallHookContext| {
            let mut list = pre_threads.lock().unwrap_or_else(PoisonError::into_inner);
            list.push(std::thread::current().id());
            ctx.tool_input
                .insert("_pre_thread".into(), json!(list.len() - 1));
        })
        .expect("registers");
    let seen = log();
    let sink = seen.clone();
    global
        .register_hook(POST_TOOL_CALL, move |ctx: &mut ToolCallHookContext| {
            let index = ctx.tool_input["_pre_thread"].as_u64().unwrap_or(u64::MAX);
            let pre = threads.lock().unwrap_or_else(PoisonError::into_inner)[index as usize];
            let call = ctx.tool_input["n"].as_u64().unwrap_or(u64::MAX);
            push(&sink, (call, pre, std::thread::current().id()));
        })
        .expect("registers");
    (global, seen)
}

fn numbered_tool(rendezvous: Arc<Rendezvous>) -> Tool {
    Tool::dynamic(
        "work",
        "Does numbered work",
        json!({"type": "object"}),
        move |args| {
            rendezvous.meet();
            Ok::<_, String>(json!(format!("result {}", args["n"])))
        },
    )
}

fn four_calls_model() -> Arc<ScriptedLlm> {
    Arc::new(
        ScriptedLlm::new()
            .calls((0..4).map(|n| ("work", json!({ "n": n }))))
            .answer("done"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_tool_calls_run_at_once_each_with_its_hooks() {
    let (global, seen) = thread_recording_registry();
    let rendezvous = Arc::new(Rendezvous::new(2));
    let llm = four_calls_model();
    let crew = crew(
        &global,
        agent("Worker", vec![numbered_tool(rendezvous.clone())], &llm),
    );

    crew.kickoff(()).await.expect("runs");

    let mut calls: Vec<u64> = take(&seen).into_iter().map(|(call, _, _)| call).collect();
    calls.sort_unstable();
    assert_eq!(calls, [0, 1, 2, 3], "each call's PRE and POST hooks ran");
    assert!(
        rendezvous.most() >= 2,
        "at most {} call(s) were inside the tool at once",
        rendezvous.most()
    );
    assert_eq!(
        llm.requests()[1].observations(),
        ["result 0", "result 1", "result 2", "result 3"],
        "observations come back in call order"
    );
}

#[test]
fn one_call_at_a_time_when_limited() {
    let (global, seen) = thread_recording_registry();
    let rendezvous = Arc::new(Rendezvous::new(1));
    let llm = four_calls_model();
    let worker = agent("Worker", vec![numbered_tool(rendezvous)], &llm);
    let crew = Crew::builder()
        .agent(worker.clone())
        .task(Task::builder("Work").agent(&worker).build())
        .global_registry(global.clone())
        .max_concurrent_tool_calls(1)
        .build()
        .expect("builds");

    crew.kickoff_blocking(()).expect("runs");

    let seen = take(&seen);
    let order: Vec<u64> = seen.iter().map(|(n, _, _)| *n).collect();
    assert_eq!(order, [0, 1, 2, 3], "one after another, in call order");
    let here = std::thread::current().id();
    assert!(
        seen.iter().all(|(_, pre, _)| *pre == here),
        "all on the kickoff thread"
    );
}

#[test]
fn an_abort_in_a_concurrent_turn_ends_the_run() {
    let global = fresh_registry();
    global
        .register_hook(
            POST_TOOL_CALL,
            |ctx: &mut ToolCallHookContext| -> Result<Option<String>, HookAborted> {
                if ctx.tool_input["n"] == 2 {
                    return Err(HookAborted::new("call 2 leaked", "dlp"));
                }
                Ok(None)
            },
        )
        .expect("registers");
    let rendezvous = Arc::new(Rendezvous::new(1));
    let llm = four_calls_model();
    let crew = crew(
        &global,
        agent("Worker", vec![numbered_tool(rendezvous)], &llm),
    );

    let error = crew
        .kickoff_blocking(())
        .expect_err("the abort ends the run");

    assert_eq!(
        error.abort(),
        Some(&HookAborted::new("call 2 leaked", "dlp"))
    );
    assert_eq!(llm.asked(), 1, "the model is not asked again");
}
