//! SPEC §17: what a CrewAI listener sees, as whole sequences. Per
//! scenario, every event and hook dispatch in order, each with the fields a
//! listener reads and its links written as positions in the sequence
//! (`parent=#3` names the third event, `started=#5` the fifth): tool events
//! in the reference's places, every start paired with one end, a nested
//! kickoff naming the tool call it runs in, a direct model call reported
//! as one; and on every event an id, a timestamp and a sequence number.

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use common::*;
use crew_runtime::events::{EventId, EventMeta};
use crew_runtime::llm::LlmError;
use crew_runtime::prelude::*;
use crew_runtime::{ChatMessage, EventBus, POST_MODEL_CALL, PRE_MODEL_CALL, TokenUsage};
use crew_runtime::{ModelCallError, call_model};

/// Every event of `bus`, in order.
fn record(bus: &EventBus) -> Log<Event> {
    let events = log();
    let sink = events.clone();
    bus.subscribe(move |event| push(&sink, event.clone()));
    events
}

/// The fields of `event` a listener reads, without its links.
fn fields(event: &Event) -> String {
    match event {
        Event::CrewKickoffStarted(e) => format!("CrewKickoffStarted {}", e.crew_name),
        Event::CrewKickoffCompleted(e) => {
            format!("CrewKickoffCompleted {} {}", e.crew_name, e.output)
        }
        Event::CrewKickoffFailed(e) => format!("CrewKickoffFailed {} {}", e.crew_name, e.error),
        Event::TaskStarted(e) => format!("TaskStarted {}", e.task_name),
        Event::TaskCompleted(e) => format!("TaskCompleted {} {}", e.task_name, e.output),
        Event::TaskFailed(e) => format!("TaskFailed {}", e.task_name),
        Event::AgentExecutionStarted(e) => format!("AgentExecutionStarted {}", e.agent_role),
        Event::AgentExecutionCompleted(e) => {
            format!("AgentExecutionCompleted {} {}", e.agent_role, e.output)
        }
        Event::AgentExecutionError(e) => format!("AgentExecutionError {}", e.agent_role),
        Event::LlmCallStarted(e) => format!("LLMCallStarted {}", e.messages.len()),
        Event::LlmCallCompleted(e) => format!(
            "LLMCallCompleted {:?} calls={:?} usage={:?}",
            e.response,
            e.tool_calls,
            e.usage.map(|usage| usage.total_tokens)
        ),
        Event::LlmCallFailed(e) => format!("LLMCallFailed {}", e.error),
        Event::ToolUsageStarted(e) => format!("ToolUsageStarted {} {}", e.tool_name, e.tool_input),
        Event::ToolExecutionStarted(e) => {
            format!("ToolExecutionStarted {} {}", e.tool_name, e.tool_input)
        }
        Event::ToolUsageFinished(e) => format!(
            "ToolUsageFinished {} {} blocked={} {:?}",
            e.tool_name, e.tool_input, e.blocked, e.result
        ),
        Event::ToolUsageError(e) => {
            format!(
                "ToolUsageError {} {} {:?}",
                e.tool_name, e.tool_input, e.error
            )
        }
        Event::ToolFailureDetected(e) => format!(
            "ToolFailureDetected {} {} retryable={} {:?}",
            e.tool_name, e.error_type, e.retryable, e.reason
        ),
        Event::HookDispatched(e) => format!("HookDispatched {} {}", e.point, e.outcome),
        other => format!("{other:?}"),
    }
}

/// The sequence as lines: position, fields, and links as positions. Checks
/// on the way what holds for every event: distinct ids, timestamps in
/// order, and (inside a kickoff) sequence numbers counting from 1.
fn lines(events: &[Event], in_kickoff: bool) -> Vec<String> {
    check_numbers(events, in_kickoff);
    linked(events)
}

/// Sequence numbers counting from 1 inside a kickoff, none outside.
fn check_numbers(events: &[Event], in_kickoff: bool) {
    let numbers: Vec<Option<u64>> = events
        .iter()
        .map(|event| event.meta().emission_sequence)
        .collect();
    let expected: Vec<Option<u64>> = (1..=events.len() as u64)
        .map(|n| in_kickoff.then_some(n))
        .collect();
    assert_eq!(numbers, expected, "sequence numbers");
}

/// The sequence as lines, its ids and times checked (see `lines`).
fn linked(events: &[Event]) -> Vec<String> {
    let metas: Vec<EventMeta> = events.iter().map(|event| *event.meta()).collect();
    let position: HashMap<EventId, usize> = metas
        .iter()
        .enumerate()
        .map(|(at, meta)| (meta.event_id, at + 1))
        .collect();
    assert_eq!(position.len(), events.len(), "every event has its own id");
    for pair in metas.windows(2) {
        assert!(
            pair[0].timestamp <= pair[1].timestamp,
            "timestamps in order: {pair:?}"
        );
    }
    let link = |id: Option<EventId>| match id {
        None => "-".to_owned(),
        Some(id) => position
            .get(&id)
            .map_or_else(|| "elsewhere".to_owned(), |at| format!("#{at}")),
    };
    events
        .iter()
        .zip(&metas)
        .enumerate()
        .map(|(at, (event, meta))| {
            format!(
                "#{} {} parent={} started={}",
                at + 1,
                fields(event),
                link(meta.parent_event_id),
                link(meta.started_event_id)
            )
        })
        .collect()
}

/// Kicks `crew` off; returns how it ended and the lines of what `global`'s
/// bus heard meanwhile (see `lines`).
fn kickoff_lines(
    global: &HookRegistry,
    crew: &Crew,
) -> (Result<CrewOutput, CrewError>, Vec<String>) {
    let events = record(global.events());
    let kicked_off = crew.kickoff_blocking(());
    (kicked_off, lines(&take(&events), true))
}

/// Each line's position and event name only.
fn names(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .map(|line| line.split(' ').take(2).collect::<Vec<_>>().join(" "))
        .collect()
}

/// One agent, one task, `tools`, on `global`.
fn one_task_crew(global: &Arc<HookRegistry>, tools: Vec<Tool>, llm: &Arc<ScriptedLlm>) -> Crew {
    let researcher = agent("Researcher", tools, llm);
    let task = Task::builder("Research")
        .name("research")
        .agent(&researcher)
        .build();
    Crew::builder()
        .name("desk")
        .agent(researcher)
        .task(task)
        .global_registry(global.clone())
        .build()
        .expect("builds")
}

#[test]
fn one_tool_call_is_reported_in_the_references_order_with_links() {
    let global = fresh_registry();
    global
        .register_hook(PRE_TOOL_CALL, |_: &mut ToolCallHookContext| {})
        .expect("registers");
    global
        .register_hook(POST_TOOL_CALL, |_: &mut ToolCallHookContext| {})
        .expect("registers");
    let llm = Arc::new(
        ScriptedLlm::new()
            .reporting_usage(TokenUsage::new(10, 2, 12))
            .call("web_search", json!({"query": "rust"}))
            .answer("done"),
    );
    let crew = one_task_crew(&global, vec![search_tool(&log())], &llm);
    let (kicked_off, sequence) = kickoff_lines(&global, &crew);

    kicked_off.expect("runs");
    assert_eq!(
        sequence,
        [
            "#1 CrewKickoffStarted desk parent=- started=-",
            "#2 TaskStarted research parent=#1 started=-",
            "#3 AgentExecutionStarted Researcher parent=#2 started=-",
            "#4 LLMCallStarted 2 parent=#3 started=-",
            "#5 LLMCallCompleted \"\" calls=[\"web_search\"] usage=Some(12) parent=#3 started=#4",
            "#6 ToolUsageStarted web_search {\"query\":\"rust\"} parent=#3 started=-",
            "#7 HookDispatched PRE_TOOL_CALL proceeded parent=- started=-",
            "#8 ToolExecutionStarted web_search {\"query\":\"rust\"} parent=#6 started=-",
            "#9 HookDispatched POST_TOOL_CALL proceeded parent=- started=-",
            "#10 ToolUsageFinished web_search {\"query\":\"rust\"} blocked=false \"results for rust\" parent=#3 started=#6",
            "#11 LLMCallStarted 4 parent=#3 started=-",
            "#12 LLMCallCompleted \"done\" calls=[] usage=Some(12) parent=#3 started=#11",
            "#13 AgentExecutionCompleted Researcher done parent=#2 started=#3",
            "#14 TaskCompleted research done parent=#1 started=#2",
            "#15 CrewKickoffCompleted desk done parent=- started=#1",
        ]
    );
}

/// The sequence of a call blocked by `block` (a PRE_TOOL_CALL hook), from
/// the call's start to its end.
fn blocked_call(block: impl FnOnce(&HookRegistry)) -> Vec<String> {
    let global = fresh_registry();
    block(&global);
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("web_search", json!({"query": "secrets"}))
            .answer("done"),
    );
    let searched = log();
    let crew = one_task_crew(&global, vec![search_tool(&searched)], &llm);
    let events = record(global.events());

    crew.kickoff_blocking(()).expect("runs");

    assert!(take(&searched).is_empty(), "the tool did not run");
    let all = lines(&take(&events), true);
    all.into_iter()
        .skip_while(|line| !line.contains("ToolUsageStarted"))
        .take_while(|line| !line.contains("#11 "))
        .collect()
}

/// A blocked call, whichever way its hook blocks: begun before the chain,
/// finished blocked after it (the POST chain has no hook here).
const BLOCKED: [&str; 5] = [
    "#6 ToolUsageStarted web_search {\"query\":\"secrets\"} parent=#3 started=-",
    "#7 HookDispatched PRE_TOOL_CALL aborted parent=- started=-",
    "#8 ToolUsageFinished web_search {\"query\":\"secrets\"} blocked=true \"Tool execution blocked by hook. Tool: web_search\" parent=#3 started=#6",
    "#9 LLMCallStarted 4 parent=#3 started=-",
    "#10 LLMCallCompleted \"done\" calls=[] usage=None parent=#3 started=#9",
];

#[test]
fn a_call_blocked_by_a_legacy_hook_starts_before_the_chain_and_finishes_blocked() {
    let sequence = blocked_call(|registry| {
        registry.register_before_tool_call_hook(|_: &mut ToolCallHookContext| Some(false));
    });
    assert_eq!(sequence, BLOCKED);
}

#[test]
fn a_call_blocked_by_hook_aborted_starts_before_the_chain_and_finishes_blocked() {
    let sequence = blocked_call(|registry| {
        registry
            .register_hook(PRE_TOOL_CALL, |_: &mut ToolCallHookContext| {
                Err::<(), _>(HookAborted::new("no searching secrets", "guard"))
            })
            .expect("registers");
    });
    assert_eq!(sequence, BLOCKED);
}

#[test]
fn a_failing_tool_reports_its_error_before_the_post_chain_and_never_finishes() {
    let global = fresh_registry();
    global
        .register_hook(POST_TOOL_CALL, |_: &mut ToolCallHookContext| {})
        .expect("registers");
    let flaky = Tool::dynamic("fetch", "Fetches a page", json!({"type": "object"}), |_| {
        Err::<Value, _>("the server answered 503".to_owned())
    });
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("fetch", json!({"url": "https://example.com"}))
            .answer("gave up"),
    );
    let crew = one_task_crew(&global, vec![flaky], &llm);
    let (kicked_off, sequence) = kickoff_lines(&global, &crew);

    kicked_off.expect("runs");
    assert_eq!(
        sequence,
        [
            "#1 CrewKickoffStarted desk parent=- started=-",
            "#2 TaskStarted research parent=#1 started=-",
            "#3 AgentExecutionStarted Researcher parent=#2 started=-",
            "#4 LLMCallStarted 2 parent=#3 started=-",
            "#5 LLMCallCompleted \"\" calls=[\"fetch\"] usage=None parent=#3 started=#4",
            "#6 ToolUsageStarted fetch {\"url\":\"https://example.com\"} parent=#3 started=-",
            "#7 ToolExecutionStarted fetch {\"url\":\"https://example.com\"} parent=#6 started=-",
            "#8 ToolUsageError fetch {\"url\":\"https://example.com\"} \"the server answered 503\" parent=#3 started=#6",
            "#9 ToolFailureDetected fetch error retryable=false \"the server answered 503\" parent=#6 started=-",
            "#10 HookDispatched POST_TOOL_CALL proceeded parent=- started=-",
            "#11 LLMCallStarted 4 parent=#3 started=-",
            "#12 LLMCallCompleted \"gave up\" calls=[] usage=None parent=#3 started=#11",
            "#13 AgentExecutionCompleted Researcher gave up parent=#2 started=#3",
            "#14 TaskCompleted research gave up parent=#1 started=#2",
            "#15 CrewKickoffCompleted desk gave up parent=- started=#1",
        ]
    );
}

#[test]
fn a_listener_pairing_starts_with_ends_pairs_every_call_once() {
    let global = fresh_registry();
    global
        .register_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().tools(["send_email"]),
            |_: &mut ToolCallHookContext| Err::<(), _>(HookAborted::new("no mail", "guard")),
        )
        .expect("registers");
    let flaky = Tool::dynamic("fetch", "Fetches", json!({"type": "object"}), |_| {
        Err::<Value, _>("down".to_owned())
    });
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("web_search", json!({"query": "rust"}))
            .call("send_email", json!({"to": "a@example.com"}))
            .call("fetch", json!({}))
            .call("serch", json!({}))
            .call_raw("web_search", "{not json")
            .answer("done"),
    );
    let crew = one_task_crew(
        &global,
        vec![search_tool(&log()), send_email_tool(&log()), flaky],
        &llm,
    );
    let events = record(global.events());

    crew.kickoff_blocking(()).expect("runs");

    let events = take(&events);
    let starts: Vec<EventId> = events
        .iter()
        .filter(|event| matches!(event, Event::ToolUsageStarted(_)))
        .map(|event| event.meta().event_id)
        .collect();
    let ends: Vec<Option<EventId>> = events
        .iter()
        .filter(|event| {
            matches!(
                event,
                Event::ToolUsageFinished(_)
                    | Event::ToolUsageError(_)
                    | Event::ToolUsageAbandoned(_)
            )
        })
        .map(|event| event.meta().started_event_id)
        .collect();
    assert_eq!(starts.len(), 5, "five calls began");
    assert_eq!(
        ends,
        starts.iter().copied().map(Some).collect::<Vec<_>>(),
        "each call ended once, in order, naming its start"
    );
}

#[test]
fn a_nested_kickoff_names_the_tool_call_it_runs_in_and_counts_from_one() {
    let global = fresh_registry();
    let inner_llm = Arc::new(ScriptedLlm::new().answer("inner report"));
    let writer = agent("Writer", vec![], &inner_llm);
    let inner = Crew::builder()
        .name("inner")
        .agent(writer.clone())
        .task(Task::builder("Write").name("write").agent(&writer).build())
        .global_registry(global.clone())
        .build()
        .expect("builds");
    let delegate = Tool::dynamic(
        "delegate",
        "Asks the inner crew",
        json!({"type": "object"}),
        {
            move |_| {
                inner
                    .kickoff_blocking(())
                    .map(|output| json!(output.raw))
                    .map_err(|error| error.to_string())
            }
        },
    );
    let outer_llm = Arc::new(
        ScriptedLlm::new()
            .call("delegate", json!({}))
            .answer("outer done"),
    );
    let outer = one_task_crew(&global, vec![delegate], &outer_llm);
    let events = record(global.events());

    outer.kickoff_blocking(()).expect("runs");

    let events = take(&events);
    // Each kickoff counts its own events from 1: the inner one's start is
    // its first, while the outer one's numbers go on around it.
    let numbers: Vec<Option<u64>> = events
        .iter()
        .map(|event| event.meta().emission_sequence)
        .collect();
    assert_eq!(
        numbers,
        [
            1, 2, 3, 4, 5, 6, 7, 1, 2, 3, 4, 5, 6, 7, 8, 8, 9, 10, 11, 12, 13
        ]
        .map(Some),
        "the outer kickoff's numbers, the inner one's, then the outer's again"
    );
    assert_eq!(
        linked(&events),
        [
            "#1 CrewKickoffStarted desk parent=- started=-",
            "#2 TaskStarted research parent=#1 started=-",
            "#3 AgentExecutionStarted Researcher parent=#2 started=-",
            "#4 LLMCallStarted 2 parent=#3 started=-",
            "#5 LLMCallCompleted \"\" calls=[\"delegate\"] usage=None parent=#3 started=#4",
            "#6 ToolUsageStarted delegate {} parent=#3 started=-",
            "#7 ToolExecutionStarted delegate {} parent=#6 started=-",
            "#8 CrewKickoffStarted inner parent=#6 started=-",
            "#9 TaskStarted write parent=#8 started=-",
            "#10 AgentExecutionStarted Writer parent=#9 started=-",
            "#11 LLMCallStarted 2 parent=#10 started=-",
            "#12 LLMCallCompleted \"inner report\" calls=[] usage=None parent=#10 started=#11",
            "#13 AgentExecutionCompleted Writer inner report parent=#9 started=#10",
            "#14 TaskCompleted write inner report parent=#8 started=#9",
            "#15 CrewKickoffCompleted inner inner report parent=#6 started=#8",
            "#16 ToolUsageFinished delegate {} blocked=false \"inner report\" parent=#3 started=#6",
            "#17 LLMCallStarted 4 parent=#3 started=-",
            "#18 LLMCallCompleted \"outer done\" calls=[] usage=None parent=#3 started=#17",
            "#19 AgentExecutionCompleted Researcher outer done parent=#2 started=#3",
            "#20 TaskCompleted research outer done parent=#1 started=#2",
            "#21 CrewKickoffCompleted desk outer done parent=- started=#1",
        ]
    );
}

#[test]
fn a_standalone_agent_reports_no_kickoff_and_links_its_events() {
    let llm = Arc::new(ScriptedLlm::new().answer("hello"));
    let global = fresh_registry();
    let assistant = Agent::builder("Assistant")
        .llm(llm.clone())
        .global_registry(global.clone())
        .build();
    let events = record(global.events());

    assistant.kickoff_blocking("Say hello").expect("answers");

    assert_eq!(
        lines(&take(&events), true),
        [
            "#1 TaskStarted Say hello parent=- started=-",
            "#2 AgentExecutionStarted Assistant parent=#1 started=-",
            "#3 LLMCallStarted 2 parent=#2 started=-",
            "#4 LLMCallCompleted \"hello\" calls=[] usage=None parent=#2 started=#3",
            "#5 AgentExecutionCompleted Assistant hello parent=#1 started=#2",
            "#6 TaskCompleted Say hello hello parent=- started=#1",
        ]
    );
}

#[tokio::test]
async fn a_direct_model_call_is_reported_as_a_model_call_with_its_usage() {
    let registry = HookRegistry::new();
    registry
        .register_hook(PRE_MODEL_CALL, |_: &mut LlmCallHookContext| {})
        .expect("registers");
    registry
        .register_hook(POST_MODEL_CALL, |ctx: &mut LlmCallHookContext| {
            ctx.response
                .as_ref()
                .map(|answer| answer.content.to_uppercase())
        })
        .expect("registers");
    let model = Arc::new(
        ScriptedLlm::new()
            .reporting_usage(TokenUsage::new(7, 3, 10))
            .answer("bonjour"),
    );
    let events = record(registry.events());

    let answer = call_model(&registry, model, vec![ChatMessage::user("Hello")], &[])
        .await
        .expect("answers");

    assert_eq!(answer.content, "BONJOUR");
    assert_eq!(answer.usage, Some(TokenUsage::new(7, 3, 10)));
    assert_eq!(
        lines(&take(&events), false),
        [
            "#1 LLMCallStarted 1 parent=- started=-",
            "#2 HookDispatched PRE_MODEL_CALL proceeded parent=- started=-",
            "#3 HookDispatched POST_MODEL_CALL modified parent=- started=-",
            "#4 LLMCallCompleted \"BONJOUR\" calls=[] usage=Some(10) parent=- started=#1",
        ]
    );
}

#[tokio::test]
async fn a_direct_model_call_blocked_at_pre_model_call_ends_with_llm_call_failed() {
    let registry = HookRegistry::new();
    registry
        .register_hook(PRE_MODEL_CALL, |_: &mut LlmCallHookContext| {
            Err::<(), _>(HookAborted::new("the model budget is spent", "budget"))
        })
        .expect("registers");
    let model = Arc::new(ScriptedLlm::new().answer("never"));
    let events = record(registry.events());

    let refused = call_model(&registry, model.clone(), vec![ChatMessage::user("Hi")], &[]).await;

    assert!(matches!(refused, Err(ModelCallError::Blocked(_))));
    assert_eq!(model.asked(), 0);
    assert_eq!(
        lines(&take(&events), false),
        [
            "#1 LLMCallStarted 1 parent=- started=-",
            "#2 HookDispatched PRE_MODEL_CALL aborted parent=- started=-",
            "#3 LLMCallFailed a PRE_MODEL_CALL hook blocked the model call: hook aborted by budget: the model budget is spent parent=- started=#1",
        ]
    );
}

#[test]
fn a_model_that_fails_once_is_asked_again_inside_the_failed_attempt() {
    let global = fresh_registry();
    let llm = Arc::new(
        ScriptedLlm::new()
            .fail(LlmError::Transport("overloaded".into()))
            .answer("done"),
    );
    let crew = one_task_crew(&global, Vec::new(), &llm);
    let (kicked_off, sequence) = kickoff_lines(&global, &crew);

    kicked_off.expect("the retry answers");
    assert_eq!(
        sequence,
        [
            "#1 CrewKickoffStarted desk parent=- started=-",
            "#2 TaskStarted research parent=#1 started=-",
            "#3 AgentExecutionStarted Researcher parent=#2 started=-",
            "#4 LLMCallStarted 2 parent=#3 started=-",
            "#5 LLMCallFailed could not reach the model server: overloaded parent=#3 started=#4",
            "#6 AgentExecutionStarted Researcher parent=#3 started=-",
            "#7 LLMCallStarted 2 parent=#6 started=-",
            "#8 LLMCallCompleted \"done\" calls=[] usage=None parent=#6 started=#7",
            "#9 AgentExecutionCompleted Researcher done parent=#3 started=#6",
            "#10 AgentExecutionCompleted Researcher done parent=#2 started=#3",
            "#11 TaskCompleted research done parent=#1 started=#2",
            "#12 CrewKickoffCompleted desk done parent=- started=#1",
        ]
    );
}

#[test]
fn a_model_that_always_fails_ends_the_last_attempt_with_its_error() {
    let global = fresh_registry();
    let mut script = ScriptedLlm::new();
    for _ in 0..3 {
        script = script.fail(LlmError::Transport("overloaded".into()));
    }
    let llm = Arc::new(script);
    let crew = one_task_crew(&global, Vec::new(), &llm);
    let (kicked_off, all) = kickoff_lines(&global, &crew);

    kicked_off.expect_err("every attempt fails");
    assert_eq!(llm.asked(), 3);
    assert_eq!(
        names(&all),
        [
            "#1 CrewKickoffStarted",
            "#2 TaskStarted",
            "#3 AgentExecutionStarted",
            "#4 LLMCallStarted",
            "#5 LLMCallFailed",
            "#6 AgentExecutionStarted",
            "#7 LLMCallStarted",
            "#8 LLMCallFailed",
            "#9 AgentExecutionStarted",
            "#10 LLMCallStarted",
            "#11 LLMCallFailed",
            "#12 AgentExecutionError",
            "#13 TaskFailed",
            "#14 CrewKickoffFailed",
        ]
    );
    // The error ends the last attempt, which ran inside the one before.
    assert!(all[8].ends_with("parent=#6 started=-"), "{}", all[8]);
    assert!(all[11].ends_with("parent=#6 started=#9"), "{}", all[11]);
    assert!(all[12].ends_with("parent=#1 started=#2"), "{}", all[12]);
}

#[test]
fn a_post_hook_that_aborts_the_run_ends_its_call_with_an_error() {
    let global = fresh_registry();
    global
        .register_hook(POST_TOOL_CALL, |_: &mut ToolCallHookContext| {
            Err::<(), _>(HookAborted::new("the result leaks a key", "guard"))
        })
        .expect("registers");
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("web_search", json!({"query": "rust"}))
            .answer("never"),
    );
    let crew = one_task_crew(&global, vec![search_tool(&log())], &llm);
    let (kicked_off, all) = kickoff_lines(&global, &crew);

    kicked_off.expect_err("the POST hook ends the run");
    assert_eq!(
        names(&all),
        [
            "#1 CrewKickoffStarted",
            "#2 TaskStarted",
            "#3 AgentExecutionStarted",
            "#4 LLMCallStarted",
            "#5 LLMCallCompleted",
            "#6 ToolUsageStarted",
            "#7 ToolExecutionStarted",
            "#8 HookDispatched",
            "#9 ToolUsageError",
            "#10 AgentExecutionError",
            "#11 TaskFailed",
            "#12 CrewKickoffFailed",
        ]
    );
    assert_eq!(
        all[8],
        "#9 ToolUsageError web_search {\"query\":\"rust\"} \"the run was aborted after the call by \
         guard: the result leaks a key\" parent=#3 started=#6"
    );
    assert!(all[9].ends_with("parent=#2 started=#3"), "{}", all[9]);
}
