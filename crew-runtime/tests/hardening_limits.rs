//! §8 "nothing hostile runs": limits with clear messages, and a task's
//! agent that must be the crew's own.
//!
//! - a task's agent is the crew's agent of that role (the same value), or
//!   joins the crew when no agent has its role; another agent with a crew
//!   agent's role fails the build;
//! - kickoffs started from hooks nest at most `max_kickoff_depth` deep, in
//!   the kickoff's own task and in the tasks running a turn's calls alike;
//! - an observation past `max_observation_bytes` is cut for the model after
//!   the POST chain saw it whole;
//! - calls past `max_tool_calls_per_turn` are refused, with no hook and no
//!   tool run for them;
//! - call ids are unique within a turn;
//! - `Tool not found: <name>` never echoes a control character.

mod common;

use std::sync::{Arc, Barrier, OnceLock};

use common::*;
use crew_runtime::llm::{ModelTurn, Role, ToolCallRequest};
use crew_runtime::prelude::*;
use crew_runtime::{PRE_STEP, StepContext};

// ---- a task's agent ----

/// A one-task crew builder: the crew has `crew_agent`, the task `task_agent`.
fn crew_with(crew_agent: Agent, task_agent: &Agent) -> crew_runtime::CrewBuilder {
    Crew::builder()
        .agent(crew_agent)
        .task(Task::builder("Research").agent(task_agent).build())
        .global_registry(fresh_registry())
}

#[test]
fn a_task_whose_agent_only_shares_a_crew_agents_role_fails_the_build() {
    let crew_llm = Arc::new(ScriptedLlm::new().answer("the crew's researcher"));
    let other_llm = Arc::new(ScriptedLlm::new().answer("the task's researcher"));
    let researcher = agent("Researcher", vec![search_tool(&log())], &crew_llm);
    let impostor = agent("Researcher", vec![], &other_llm);

    let error = crew_with(researcher, &impostor)
        .build()
        .expect_err("the task's agent is not the crew's");

    assert_eq!(
        error,
        BuildError::TaskAgentNotInCrew {
            index: 1,
            task: "Research".to_owned(),
            role: "Researcher".to_owned(),
            joined: false,
        }
    );
    let message = error.to_string();
    assert!(
        message.starts_with(
            "task 1 (\"Research\") is given an agent `Researcher` that is not the agent \
             `Researcher` of this crew"
        ),
        "{message}"
    );
    assert!(
        message.contains("give the task the crew's agent"),
        "{message}"
    );
    assert!(crew_llm.requests().is_empty() && other_llm.requests().is_empty());
}

#[test]
fn a_task_given_a_clone_of_the_crews_agent_runs_that_agent() {
    let llm = Arc::new(ScriptedLlm::new().answer("done"));
    let researcher = agent("Researcher", vec![search_tool(&log())], &llm);

    let crew = crew_with(researcher.clone(), &researcher.clone())
        .build()
        .expect("a clone is the same agent");

    assert_eq!(crew.agents().count(), 1);
    assert_eq!(crew.kickoff_blocking(()).expect("runs").raw, "done");
}

#[test]
fn an_identical_definition_of_the_crews_agent_is_the_same_agent() {
    // What a `#[crew_base]` `#[agent]` method returns each time it is
    // called: a new value, built the same way, sharing the model.
    let llm = Arc::new(ScriptedLlm::new().answer("done"));
    let build = || agent("Researcher", vec![search_tool(&log())], &llm);

    let crew = crew_with(build(), &build())
        .build()
        .expect("an identical definition is the crew's agent");

    assert_eq!(crew.agents().count(), 1);
    assert_eq!(crew.kickoff_blocking(()).expect("runs").raw, "done");
}

#[test]
fn an_agent_of_a_new_role_joins_the_crew_through_its_task() {
    let writer_llm = Arc::new(ScriptedLlm::new());
    let researcher_llm = Arc::new(ScriptedLlm::new().answer("researched"));
    let writer = agent("Writer", vec![], &writer_llm);
    let researcher = agent("Researcher", vec![], &researcher_llm);

    let crew = crew_with(writer, &researcher).build().expect("builds");

    let roles: Vec<&str> = crew.agents().map(Agent::role).collect();
    assert_eq!(roles, ["Writer", "Researcher"]);
    assert_eq!(crew.kickoff_blocking(()).expect("runs").raw, "researched");
    assert!(writer_llm.requests().is_empty());
}

#[test]
fn two_tasks_with_different_agents_of_one_new_role_fail_the_build() {
    let first = agent("Researcher", vec![], &Arc::new(ScriptedLlm::new()));
    let second = agent("Researcher", vec![], &Arc::new(ScriptedLlm::new()));

    let error = Crew::builder()
        .task(Task::builder("First").agent(&first).build())
        .task(Task::builder("Second").agent(&second).build())
        .global_registry(fresh_registry())
        .build()
        .expect_err("the second task's agent is not the one that joined");

    assert!(
        matches!(
            &error,
            BuildError::TaskAgentNotInCrew {
                index: 2,
                joined: true,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .contains("not the earlier tasks' agent `Researcher`"),
        "{error}"
    );
}

// ---- nested kickoffs ----

#[test]
fn a_hook_that_kicks_off_its_own_crew_gets_an_error_at_the_depth_limit() {
    let llm = Arc::new(
        ScriptedLlm::new()
            .answer("depth 3")
            .answer("depth 2")
            .answer("depth 1"),
    );
    let writer = agent("Writer", vec![], &llm);
    let crew = Crew::builder()
        .agent(writer.clone())
        .task(Task::builder("Write").agent(&writer).build())
        .global_registry(fresh_registry())
        .max_kickoff_depth(3)
        .build()
        .expect("builds");
    let this_crew: Arc<OnceLock<Crew>> = Arc::new(OnceLock::new());
    let _ = this_crew.set(crew.clone());
    let outcomes: Log<String> = log();
    let (hook_crew, hook_outcomes) = (this_crew.clone(), outcomes.clone());
    // Before each task, the hook kicks off its own crew again: without a
    // limit this recurses until the stack overflows.
    crew.hooks()
        .register_hook(PRE_STEP, move |_: &mut StepContext| {
            let Some(crew) = hook_crew.get() else {
                return Err(HookAborted::with_reason("no crew"));
            };
            match crew.kickoff_blocking(()) {
                Ok(output) => push(&hook_outcomes, format!("ran: {}", output.raw)),
                Err(error) => push(&hook_outcomes, format!("refused: {error}")),
            }
            Ok(())
        })
        .expect("registers");

    let output = crew
        .kickoff_blocking(())
        .expect("the outermost kickoff completes");

    assert_eq!(output.raw, "depth 1");
    assert_eq!(
        take(&outcomes),
        [
            "refused: crew `crew` was kicked off from inside 3 nested kickoff(s), its limit \
             (CrewBuilder::max_kickoff_depth): a hook that kicks off a crew for every call it \
             sees recurses without end; kick off from a narrower hook, or raise the limit",
            "ran: depth 3",
            "ran: depth 2",
        ]
    );
    assert_eq!(llm.requests().len(), 3, "three kickoffs ran, no more");
}

/// The calls of a turn run as tasks of a multi-threaded runtime: a hook of
/// a call on another worker thread (whose own kickoff then runs on a
/// thread of its own) still counts the nesting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kickoff_from_a_hook_on_a_helper_thread_counts_toward_the_limit() {
    // A crew whose kickoff is refused whenever it is nested at all.
    let probe_llm = Arc::new(ScriptedLlm::new().answer("probe ran"));
    let prober = agent("Prober", vec![], &probe_llm);
    let probe = Crew::builder()
        .agent(prober.clone())
        .task(Task::builder("Probe").agent(&prober).build())
        .global_registry(fresh_registry())
        .max_kickoff_depth(1)
        .build()
        .expect("builds");

    let global = fresh_registry();
    let both_in_hooks = Arc::new(Barrier::new(2));
    let outcomes: Log<(std::thread::ThreadId, bool)> = log();
    let (barrier, hook_outcomes) = (both_in_hooks.clone(), outcomes.clone());
    global
        .register_hook(PRE_TOOL_CALL, move |_: &mut ToolCallHookContext| {
            // Both calls wait here for each other: they run on two threads.
            barrier.wait();
            let refused = matches!(
                probe.kickoff_blocking(()),
                Err(CrewError::KickoffTooDeep { limit: 1, .. })
            );
            push(&hook_outcomes, (std::thread::current().id(), refused));
        })
        .expect("registers");
    let llm = Arc::new(
        ScriptedLlm::new()
            .calls([
                ("web_search", json!({"query": "a"})),
                ("web_search", json!({"query": "b"})),
            ])
            .answer("done"),
    );
    let researcher = agent("Researcher", vec![search_tool(&log())], &llm);
    let crew = Crew::builder()
        .agent(researcher.clone())
        .task(Task::builder("Research").agent(&researcher).build())
        .global_registry(global)
        .max_concurrent_tool_calls(2)
        .build()
        .expect("builds");

    crew.kickoff(()).await.expect("runs");

    let outcomes = take(&outcomes);
    assert_eq!(outcomes.len(), 2);
    assert_ne!(outcomes[0].0, outcomes[1].0, "two threads ran the calls");
    assert!(outcomes.iter().all(|(_, refused)| *refused), "{outcomes:?}");
    assert!(probe_llm.requests().is_empty());
}

// ---- observation size ----

#[test]
fn a_long_observation_is_cut_for_the_model_after_post_hooks_saw_it_whole() {
    let global = fresh_registry();
    let seen_by_post: Log<usize> = log();
    let post_log = seen_by_post.clone();
    global
        .register_hook(POST_TOOL_CALL, move |ctx: &mut ToolCallHookContext| {
            push(&post_log, ctx.tool_result.as_deref().map_or(0, str::len));
            None::<String>
        })
        .expect("registers");
    let events = record_events(global.events());
    // 1,000 two-byte characters: a limit of 101 bytes falls mid-character.
    let text = "é".repeat(1_000);
    let dump = Tool::dynamic("dump", "Dumps", json!({"type": "object"}), move |_| {
        Ok::<_, String>(Value::String(text.clone()))
    });
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("dump", json!({}))
            .call("dump", json!({}))
            .answer("done"),
    );
    let clerk = agent("Clerk", vec![dump], &llm);
    let crew = Crew::builder()
        .agent(clerk.clone())
        .task(Task::builder("Dump").agent(&clerk).build())
        .global_registry(global.clone())
        .max_observation_bytes(101)
        .build()
        .expect("builds");

    crew.kickoff_blocking(()).expect("runs");

    // A JSON string is shown as text: 2,000 bytes. The cut keeps 50 whole
    // characters (100 bytes).
    let whole = 2_000;
    assert_eq!(take(&seen_by_post), [whole, whole]);
    let expected = format!(
        "{}\n[observation truncated: 1900 of 2000 bytes cut, past the limit of 101 bytes]",
        "é".repeat(50)
    );
    assert_eq!(llm.requests()[1].observations(), [expected.as_str()]);
    assert!(
        take(&events)
            .iter()
            .any(|e| e.starts_with("finished tool=dump") && e.contains(&expected)),
        "the ToolUsageFinished event carries what the model got"
    );
}

#[test]
fn an_observation_within_the_limit_is_untouched() {
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("web_search", json!({"query": "rust"}))
            .answer("done"),
    );
    let researcher = agent("Researcher", vec![search_tool(&log())], &llm);
    let crew = Crew::builder()
        .agent(researcher.clone())
        .task(Task::builder("Research").agent(&researcher).build())
        .global_registry(fresh_registry())
        .max_observation_bytes("results for rust".len())
        .build()
        .expect("builds");

    crew.kickoff_blocking(()).expect("runs");

    assert_eq!(llm.requests()[1].observations(), ["results for rust"]);
}

// ---- calls per turn ----

#[test]
fn calls_past_the_per_turn_limit_are_refused_without_running_hooks_or_tools() {
    let global = fresh_registry();
    let pre: Log<String> = log();
    let post: Log<String> = log();
    let (pre_log, post_log) = (pre.clone(), post.clone());
    global
        .register_hook(PRE_TOOL_CALL, move |ctx: &mut ToolCallHookContext| {
            let query = ctx.tool_input.get("query").cloned().unwrap_or_default();
            push(&pre_log, query.to_string());
        })
        .expect("registers");
    global
        .register_hook(POST_TOOL_CALL, move |ctx: &mut ToolCallHookContext| {
            push(&post_log, ctx.tool_name().to_owned());
        })
        .expect("registers");
    let events = record_events(global.events());
    let received = log();
    let llm = Arc::new(
        ScriptedLlm::new()
            .calls((1..=4).map(|n| ("web_search", json!({"query": format!("q{n}")}))))
            .answer("done"),
    );
    let researcher = agent("Researcher", vec![search_tool(&received)], &llm);
    let crew = Crew::builder()
        .agent(researcher.clone())
        .task(Task::builder("Research").agent(&researcher).build())
        .global_registry(global)
        .max_tool_calls_per_turn(2)
        .build()
        .expect("builds");

    crew.kickoff_blocking(()).expect("the run goes on");

    let refusal = "Tool call refused: this turn asked for 4 tool calls and at most 2 run per \
                   turn, so this call of `web_search` did not run. Ask for it again in a later \
                   turn if it is still needed.";
    assert_eq!(
        llm.requests()[1].observations(),
        ["results for q1", "results for q2", refusal, refusal]
    );
    // The two calls run concurrently: in either order.
    let mut queries: Vec<String> = take(&received).into_iter().map(|a| a.query).collect();
    queries.sort();
    assert_eq!(queries, ["q1", "q2"]);
    let mut seen_by_pre = take(&pre);
    seen_by_pre.sort();
    assert_eq!(seen_by_pre, ["\"q1\"", "\"q2\""]);
    assert_eq!(take(&post).len(), 2);
    let errors: Vec<String> = take(&events)
        .into_iter()
        .filter(|e| e.starts_with("error tool=web_search"))
        .collect();
    assert_eq!(errors.len(), 2, "a ToolUsageError event per refused call");
    // Every call the model made is answered, by its own id.
    let messages = &llm.requests()[1].messages;
    let answered: Vec<&str> = messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .filter_map(|m| m.tool_call_id.as_deref())
        .collect();
    assert_eq!(answered, ["call_1", "call_2", "call_3", "call_4"]);
}

// ---- call ids ----

fn call(id: &str, query: &str) -> ToolCallRequest {
    ToolCallRequest {
        id: id.to_owned(),
        name: "web_search".to_owned(),
        arguments: json!({ "query": query }).to_string(),
    }
}

#[test]
fn duplicate_and_empty_call_ids_get_generated_ids_that_never_collide() {
    // The first call's generated id would be `call_1`, which the model
    // gives to a later call.
    let calls = vec![
        call("", "a"),
        call("call_2", "b"),
        call("call_2", "c"),
        call("call_1", "d"),
        call("  ", "e"),
    ];
    let llm = Arc::new(
        ScriptedLlm::new()
            .turn(ModelTurn::ToolCalls {
                content: String::new(),
                calls,
            })
            .answer("done"),
    );
    let researcher = agent("Researcher", vec![search_tool(&log())], &llm);
    let crew = Crew::builder()
        .agent(researcher.clone())
        .task(Task::builder("Research").agent(&researcher).build())
        .global_registry(fresh_registry())
        .build()
        .expect("builds");

    crew.kickoff_blocking(()).expect("runs");

    let messages = &llm.requests()[1].messages;
    let asked: Vec<&str> = messages
        .iter()
        .flat_map(|m| &m.tool_calls)
        .map(|c| c.id.as_str())
        .collect();
    assert_eq!(asked, ["call_1_2", "call_2", "call_3", "call_1", "call_5"]);
    let answers: Vec<(&str, &str)> = messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| (m.tool_call_id.as_deref().unwrap_or("-"), m.content.as_str()))
        .collect();
    assert_eq!(
        answers,
        [
            ("call_1_2", "results for a"),
            ("call_2", "results for b"),
            ("call_3", "results for c"),
            ("call_1", "results for d"),
            ("call_5", "results for e"),
        ]
    );
}

// ---- unknown tool names ----

#[test]
fn tool_not_found_never_echoes_control_characters() {
    let name = "web\u{1b}[2J\nsearch\u{7}\u{202e}txt.exe";
    let llm = Arc::new(
        ScriptedLlm::new()
            .call(name, json!({"query": "rust"}))
            .answer("done"),
    );
    let researcher = agent("Researcher", vec![search_tool(&log())], &llm);
    let crew = Crew::builder()
        .agent(researcher.clone())
        .task(Task::builder("Research").agent(&researcher).build())
        .global_registry(fresh_registry())
        .build()
        .expect("builds");

    crew.kickoff_blocking(()).expect("runs");

    let observations = llm.requests()[1]
        .observations()
        .iter()
        .map(|o| (*o).to_owned())
        .collect::<Vec<_>>();
    assert_eq!(
        observations,
        [r"Tool not found: web\u{1b}[2J\nsearch\u{7}\u{202e}txt.exe. Available tools: web_search"]
    );
    assert!(!observations[0].chars().any(char::is_control));
}
