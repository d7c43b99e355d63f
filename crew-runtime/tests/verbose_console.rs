//! What the verbose console prints of a crew's work, line by line: the
//! task, each turn, each call's start and observation, a call a hook
//! blocked (by whom and why), a result a POST hook replaced, a failing
//! tool, arguments that are not JSON, a retried model call and the final
//! answer. The console is standard output, so the crew runs in a child
//! process of this test and the parent reads what it printed.

mod common;

use common::*;
use crew_runtime::ScriptedCall;
use crew_runtime::llm::LlmError;
use crew_runtime::prelude::*;

const CHILD: &str = "VERBOSE_CONSOLE_CHILD";

/// A crew whose one task meets every kind of line.
fn crew_of_every_line() -> Crew {
    let global = fresh_registry();
    global
        .register_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("no-deletes").tools(["delete_file"]),
            |_: &mut ToolCallHookContext| -> Result<(), HookAborted> {
                Err(HookAborted::new("deleting is off today", "no-deletes"))
            },
        )
        .expect("registers");
    global
        .register_hook_with(
            POST_TOOL_CALL,
            HookOptions::new().tools(["lookup"]),
            |_: &mut ToolCallHookContext| Some("[looked up]".to_owned()),
        )
        .expect("registers");
    let tools = vec![
        Tool::dynamic("lookup", "Looks up", json!({"type": "object"}), |_| {
            Ok::<_, String>(json!("order 7 shipped"))
        }),
        Tool::dynamic("delete_file", "Deletes", json!({"type": "object"}), |_| {
            Ok::<_, String>(json!("deleted"))
        }),
        Tool::dynamic("flaky", "Fails", json!({"type": "object"}), |_| {
            Err::<Value, _>("the disk is full")
        }),
    ];
    let llm = std::sync::Arc::new(
        ScriptedLlm::new()
            .calls([
                ScriptedCall::new("lookup", json!({"order": 7})),
                ScriptedCall::new("delete_file", json!({"path": "a.txt"})),
            ])
            .call("flaky", json!({}))
            .call_raw("lookup", "{not json")
            .fail(LlmError::Timeout(std::time::Duration::from_millis(5)))
            .answer("All done."),
    );
    let clerk = agent("Clerk", tools, &llm);
    Crew::builder()
        .name("console")
        .agent(clerk.clone())
        .task(Task::builder("Check order {order}").agent(&clerk).build())
        .global_registry(global)
        .max_concurrent_tool_calls(1)
        .verbose(true)
        .build()
        .expect("builds")
}

#[test]
fn the_verbose_console_says_what_each_call_came_to() {
    if is_child(CHILD) {
        let output = crew_of_every_line().kickoff_blocking([("order", "7")]);
        assert_eq!(output.expect("the run finishes").raw, "All done.");
        return;
    }
    let stdout = run_in_child("the_verbose_console_says_what_each_call_came_to", CHILD);
    let expected = [
        "[console] task 1/1 for Clerk: Check order 7",
        "[Clerk] turn 1: asks for 2 tool call(s)",
        "[Clerk] → lookup {\"order\":7}",
        "[Clerk]   result replaced by a POST_TOOL_CALL hook",
        "[Clerk] ← lookup: [looked up]",
        "[Clerk] → delete_file {\"path\":\"a.txt\"}",
        "[Clerk]   blocked by no-deletes: deleting is off today",
        "[Clerk] ← delete_file: Tool execution blocked by hook. Tool: delete_file",
        "[Clerk] turn 2: asks for 1 tool call(s)",
        "[Clerk] → flaky {}",
        "[Clerk] ✗ flaky: the disk is full",
        "[Clerk] turn 3: asks for 1 tool call(s)",
        "[Clerk] ✗ lookup: Invalid arguments for tool `lookup`: they are not valid JSON",
        "[Clerk] turn 4: the model call failed",
        "[Clerk] final answer: All done.",
    ];
    // Each expected text is on a line of the console, in this order (the
    // first shares its line with the test harness's own words).
    let lines: Vec<&str> = stdout.lines().collect();
    let mut from = 0;
    for want in expected {
        let found = lines[from..].iter().position(|line| line.contains(want));
        match found {
            Some(at) => from += at + 1,
            None => panic!("no line with {want:?} after line {from}:\n{stdout}"),
        }
    }
}

const ONE_AGENT_CHILD: &str = "VERBOSE_CONSOLE_ONE_AGENT_CHILD";

/// Two agents, one of them verbose: the console (a listener on the crew's
/// bus) prints that agent's work and nothing of the other's.
#[test]
fn a_verbose_agent_shows_its_own_work_only() {
    if is_child(ONE_AGENT_CHILD) {
        let lookup = || {
            vec![Tool::dynamic(
                "lookup",
                "Looks up",
                json!({"type": "object"}),
                |_| Ok::<_, String>(json!("found")),
            )]
        };
        let quiet_llm = std::sync::Arc::new(
            ScriptedLlm::new()
                .call("lookup", json!({"who": "quiet"}))
                .answer("quiet done"),
        );
        let loud_llm = std::sync::Arc::new(
            ScriptedLlm::new()
                .call("lookup", json!({"who": "loud"}))
                .answer("loud done"),
        );
        let quiet = agent("Quiet", lookup(), &quiet_llm);
        let loud = Agent::builder("Loud")
            .goal("Get the task done")
            .backstory("A test agent")
            .tools(lookup())
            .llm(loud_llm)
            .verbose(true)
            .build();
        let crew = Crew::builder()
            .name("pair")
            .agents([quiet.clone(), loud.clone()])
            .task(Task::builder("First").agent(&quiet).build())
            .task(Task::builder("Second").agent(&loud).build())
            .global_registry(fresh_registry())
            .build()
            .expect("builds");
        crew.kickoff_blocking(()).expect("the run finishes");
        return;
    }
    let stdout = run_in_child("a_verbose_agent_shows_its_own_work_only", ONE_AGENT_CHILD);
    for want in [
        "[pair] task 2/2 for Loud: Second",
        "[Loud] turn 1: asks for 1 tool call(s)",
        "[Loud] → lookup {\"who\":\"loud\"}",
        "[Loud] ← lookup: found",
        "[Loud] final answer: loud done",
    ] {
        assert!(stdout.contains(want), "no line with {want:?}:\n{stdout}");
    }
    assert!(
        !stdout.contains("Quiet") && !stdout.contains("quiet"),
        "the quiet agent's work was printed:\n{stdout}"
    );
}
