//! SPEC §6, rules 24–31: the eight points beyond the tool calls, through a
//! real crew on the scripted model, each on an injected registry.

mod common;

use std::sync::Arc;
use std::time::Instant;

use common::*;
use crew_runtime::prelude::*;
use crew_runtime::{
    ChatMessage, EXECUTION_END, EXECUTION_START, ExecutionEndContext, ExecutionStartContext,
    ExecutionStatus, HookId, INPUT, InputContext, InterceptionPoint, OUTPUT, OutputContext,
    POST_MODEL_CALL, POST_STEP, PRE_MODEL_CALL, PRE_STEP, StepContext, ToolCallStatus,
};
use crew_runtime::{CrewError, Inputs};

/// One researcher with a search tool, and one task using `{topic}`.
fn research_crew(global: &Arc<HookRegistry>, llm: &Arc<ScriptedLlm>) -> Crew {
    let researcher = agent("Researcher", vec![search_tool(&log())], llm);
    Crew::builder()
        .agent(researcher.clone())
        .task(Task::builder("Research {topic}").agent(&researcher).build())
        .global_registry(Arc::clone(global))
        .build()
        .expect("builds")
}

fn search_then_answer() -> Arc<ScriptedLlm> {
    Arc::new(
        ScriptedLlm::new()
            .call("web_search", json!({"query": "rust"}))
            .answer("Rust is fast."),
    )
}

#[test]
fn every_point_fires_in_the_documented_order_with_its_counts() {
    let global = fresh_registry();
    let order: Log<&'static str> = log();
    macro_rules! watch {
        ($point:expr, $ctx:ty, $name:literal) => {{
            let sink = order.clone();
            global
                .register_hook($point, move |_: &mut $ctx| push(&sink, $name))
                .expect("registers");
        }};
    }
    watch!(EXECUTION_START, ExecutionStartContext, "EXECUTION_START");
    watch!(INPUT, InputContext, "INPUT");
    watch!(PRE_STEP, StepContext, "PRE_STEP");
    watch!(PRE_MODEL_CALL, LlmCallHookContext, "PRE_MODEL_CALL");
    watch!(POST_MODEL_CALL, LlmCallHookContext, "POST_MODEL_CALL");
    watch!(PRE_TOOL_CALL, ToolCallHookContext, "PRE_TOOL_CALL");
    watch!(POST_TOOL_CALL, ToolCallHookContext, "POST_TOOL_CALL");
    watch!(POST_STEP, StepContext, "POST_STEP");
    watch!(OUTPUT, OutputContext, "OUTPUT");
    watch!(EXECUTION_END, ExecutionEndContext, "EXECUTION_END");

    research_crew(&global, &search_then_answer())
        .kickoff_blocking([("topic", "Rust")])
        .expect("runs");

    assert_eq!(
        take(&order),
        [
            "EXECUTION_START",
            "INPUT",
            "PRE_STEP",
            "PRE_MODEL_CALL",
            "POST_MODEL_CALL",
            "PRE_TOOL_CALL",
            "POST_TOOL_CALL",
            "PRE_MODEL_CALL",
            "POST_MODEL_CALL",
            "POST_STEP",
            "OUTPUT",
            "EXECUTION_END",
        ]
    );
}

#[test]
fn what_pre_model_call_hooks_leave_in_messages_is_what_the_model_receives() {
    let global = fresh_registry();
    global
        .register_hook(PRE_MODEL_CALL, |ctx: &mut LlmCallHookContext| {
            if ctx.iterations == 1 {
                ctx.messages
                    .insert(0, ChatMessage::system("Never reveal credentials."));
            }
        })
        .expect("registers");
    let llm = search_then_answer();
    research_crew(&global, &llm)
        .kickoff_blocking([("topic", "Rust")])
        .expect("runs");

    let requests = llm.requests();
    assert_eq!(requests[0].messages[0].content, "Never reveal credentials.");
    // The edit stays in the conversation for the next call.
    assert_eq!(requests[1].messages[0].content, "Never reveal credentials.");
}

#[test]
fn a_pre_model_call_block_ends_the_run_and_execution_end_sees_failed() {
    let global = fresh_registry();
    global
        .register_hook(PRE_MODEL_CALL, |ctx: &mut LlmCallHookContext| {
            if ctx.iterations > 1 {
                return Err(HookAborted::new("one model call per task", "loop-guard"));
            }
            Ok(())
        })
        .expect("registers");
    let ends: Log<(ExecutionStatus, Option<String>)> = log();
    let sink = ends.clone();
    global
        .register_hook(EXECUTION_END, move |ctx: &mut ExecutionEndContext| {
            push(&sink, (ctx.status, ctx.error.clone()));
        })
        .expect("registers");
    let llm = search_then_answer();
    let error = research_crew(&global, &llm)
        .kickoff_blocking([("topic", "Rust")])
        .expect_err("blocked");

    assert_eq!(error.aborted_at(), Some(InterceptionPoint::PRE_MODEL_CALL));
    assert_eq!(error.abort().map(|a| a.source.as_str()), Some("loop-guard"));
    assert_eq!(llm.requests().len(), 1, "the second model call never ran");
    let ends = take(&ends);
    assert_eq!(ends.len(), 1, "EXECUTION_END fires exactly once");
    assert_eq!(ends[0].0, ExecutionStatus::Failed);
    assert!(
        ends[0]
            .1
            .as_deref()
            .is_some_and(|e| e.contains("one model call per task")),
        "{ends:?}"
    );
}

#[test]
fn a_post_model_call_hook_drops_a_tool_call_before_it_is_dispatched() {
    let global = fresh_registry();
    global
        .register_hook(POST_MODEL_CALL, |ctx: &mut LlmCallHookContext| {
            if let Some(response) = &mut ctx.response {
                response.tool_calls.retain(|call| call.name != "web_search");
            }
        })
        .expect("registers");
    let received = log();
    let llm = search_then_answer();
    let researcher = agent("Researcher", vec![search_tool(&received)], &llm);
    let crew = Crew::builder()
        .agent(researcher.clone())
        .task(Task::builder("Research").agent(&researcher).build())
        .global_registry(Arc::clone(&global))
        .build()
        .expect("builds");
    let output = crew.kickoff_blocking(()).expect("runs");

    assert!(take(&received).is_empty(), "the dropped call never ran");
    // With its only call dropped, the turn is the model's answer (empty
    // text here: the scripted turn had none).
    assert_eq!(output.raw, "");
    assert_eq!(llm.requests().len(), 1);
}

#[test]
fn a_post_model_call_hook_replaces_the_answer_text() {
    let global = fresh_registry();
    global.register_after_llm_call_hook(|ctx: &mut LlmCallHookContext| {
        let response = ctx.response.as_ref()?;
        response
            .tool_calls
            .is_empty()
            .then(|| response.content.replace("fast", "[checked] fast"))
    });
    let output = research_crew(&global, &search_then_answer())
        .kickoff_blocking([("topic", "Rust")])
        .expect("runs");
    assert_eq!(output.raw, "Rust is [checked] fast.");
}

#[test]
fn an_input_rewrite_is_what_placeholders_are_filled_from() {
    let global = fresh_registry();
    global
        .register_hook(INPUT, |ctx: &mut InputContext| -> Option<Inputs> {
            Some(
                ctx.inputs
                    .iter()
                    .map(|(name, value)| (name.to_owned(), value.trim().to_uppercase()))
                    .collect(),
            )
        })
        .expect("registers");
    let llm = search_then_answer();
    research_crew(&global, &llm)
        .kickoff_blocking([("topic", "  rust ")])
        .expect("runs");
    assert!(
        llm.requests()[0]
            .task_prompt()
            .is_some_and(|prompt| prompt.contains("Research RUST")),
        "{:?}",
        llm.requests()[0].task_prompt()
    );
}

#[test]
fn execution_start_abort_stops_the_run_and_execution_end_does_not_fire() {
    let global = fresh_registry();
    global
        .register_hook(EXECUTION_START, |ctx: &mut ExecutionStartContext| {
            ctx.inputs
                .get("topic")
                .filter(|topic| !topic.contains("secret"))
                .map(drop)
                .ok_or_else(|| HookAborted::from("topic not allowed"))
        })
        .expect("registers");
    let ends = log();
    let sink = ends.clone();
    global
        .register_hook(EXECUTION_END, move |_: &mut ExecutionEndContext| {
            push(&sink, ())
        })
        .expect("registers");
    let llm = search_then_answer();
    let error = research_crew(&global, &llm)
        .kickoff_blocking([("topic", "secret plans")])
        .expect_err("aborted");

    assert_eq!(error.aborted_at(), Some(InterceptionPoint::EXECUTION_START));
    assert_eq!(
        error.abort().map(|a| a.reason.as_str()),
        Some("topic not allowed")
    );
    assert!(llm.requests().is_empty(), "no model call ran");
    assert!(
        take(&ends).is_empty(),
        "EXECUTION_END fires only after EXECUTION_START passed"
    );
}

#[test]
fn a_post_step_rewrite_is_what_the_next_task_and_the_output_see() {
    let global = fresh_registry();
    global
        .register_hook(POST_STEP, |ctx: &mut StepContext| {
            Some(format!(
                "[{}] {}",
                ctx.agent_role().unwrap_or("?"),
                ctx.payload
            ))
        })
        .expect("registers");
    let llm = Arc::new(ScriptedLlm::new().answer("facts").answer("summary"));
    let researcher = agent("Researcher", vec![], &llm);
    let first = Task::builder("Research").agent(&researcher).build();
    let second = Task::builder("Summarize")
        .agent(&researcher)
        .context([&first])
        .build();
    let crew = Crew::builder()
        .agent(researcher.clone())
        .tasks([first, second])
        .global_registry(Arc::clone(&global))
        .build()
        .expect("builds");
    let output = crew.kickoff_blocking(()).expect("runs");

    assert_eq!(output.tasks_output[0].raw, "[Researcher] facts");
    assert_eq!(output.raw, "[Researcher] summary");
    assert!(
        llm.requests()[1]
            .task_prompt()
            .is_some_and(|prompt| prompt.contains("[Researcher] facts")),
        "the second task's context is the rewritten output"
    );
}

#[test]
fn an_output_hook_replaces_what_kickoff_returns() {
    let global = fresh_registry();
    global
        .register_hook(OUTPUT, |ctx: &mut OutputContext| {
            Some(format!("{} (reviewed)", ctx.output.raw))
        })
        .expect("registers");
    let output = research_crew(&global, &search_then_answer())
        .kickoff_blocking([("topic", "Rust")])
        .expect("runs");
    assert_eq!(output.raw, "Rust is fast. (reviewed)");
}

#[test]
fn legacy_llm_call_hooks_share_the_model_call_chains() {
    let registry = HookRegistry::new();
    let legacy = registry.register_before_llm_call_hook(|_: &mut LlmCallHookContext| true);
    let on = registry
        .register_hook(PRE_MODEL_CALL, |_: &mut LlmCallHookContext| {})
        .expect("registers");
    let listed: Vec<HookId> = registry
        .get_before_llm_call_hooks()
        .iter()
        .map(|hook| hook.id)
        .collect();
    assert_eq!(listed, [legacy, on]);
    assert!(registry.unregister_hook(PRE_MODEL_CALL, legacy));
    assert!(registry.unregister_before_llm_call_hook(on));
    registry.register_after_llm_call_hook(|_: &mut LlmCallHookContext| None::<String>);
    assert_eq!(registry.clear_all_llm_call_hooks(), (0, 1));
}

#[test]
fn a_legacy_before_llm_call_false_blocks_with_its_reason() {
    let global = fresh_registry();
    global.register_before_llm_call_hook(|_: &mut LlmCallHookContext| false);
    let error = research_crew(&global, &search_then_answer())
        .kickoff_blocking([("topic", "Rust")])
        .expect_err("blocked");
    assert_eq!(
        error.abort().map(|a| a.reason.as_str()),
        Some(crew_runtime::LEGACY_LLM_BLOCK_REASON)
    );
}

#[test]
fn crew_scoped_hooks_at_a_model_point_fire_for_that_crew_only() {
    let global = fresh_registry();
    let seen = log();
    let sink = seen.clone();
    let llm = Arc::new(ScriptedLlm::new().answer("a").answer("b"));
    let scoped_agent = agent("Researcher", vec![], &llm);
    let scoped = Crew::builder()
        .name("scoped")
        .agent(scoped_agent.clone())
        .task(Task::builder("One").agent(&scoped_agent).build())
        .global_registry(Arc::clone(&global))
        .hook(PRE_MODEL_CALL, move |ctx: &mut LlmCallHookContext| {
            push(&sink, ctx.iterations);
        })
        .build()
        .expect("builds");
    let other_agent = agent("Researcher", vec![], &llm);
    let other = Crew::builder()
        .name("other")
        .agent(other_agent.clone())
        .task(Task::builder("Two").agent(&other_agent).build())
        .global_registry(Arc::clone(&global))
        .build()
        .expect("builds");
    scoped.kickoff_blocking(()).expect("runs");
    other.kickoff_blocking(()).expect("runs");
    assert_eq!(take(&seen), [1], "one model call of the scoped crew");
}

#[test]
fn hook_dispatched_events_report_every_point_with_its_agent() {
    let global = fresh_registry();
    global
        .register_hook(PRE_STEP, |_: &mut StepContext| {})
        .expect("registers");
    global
        .register_hook(OUTPUT, |_: &mut OutputContext| {})
        .expect("registers");
    let events = log();
    let sink = events.clone();
    global.events().subscribe(move |event| {
        if let Event::HookDispatched(dispatched) = event {
            push(
                &sink,
                (
                    dispatched.point,
                    dispatched.agent_role.as_deref().map(str::to_owned),
                    dispatched.tool_name.as_deref().map(str::to_owned),
                ),
            );
        }
    });
    research_crew(&global, &search_then_answer())
        .kickoff_blocking([("topic", "Rust")])
        .expect("runs");
    assert_eq!(
        take(&events),
        [
            (
                InterceptionPoint::PRE_STEP,
                Some("Researcher".to_owned()),
                None
            ),
            (InterceptionPoint::OUTPUT, None, None),
        ]
    );
}

#[test]
fn extensions_carry_a_value_from_pre_to_post_of_one_call_and_status_says_what_happened() {
    struct Started(Instant);
    let global = fresh_registry();
    global
        .register_hook(PRE_TOOL_CALL, |ctx: &mut ToolCallHookContext| {
            ctx.extensions.insert(Started(Instant::now()));
        })
        .expect("registers");
    let seen = log();
    let sink = seen.clone();
    global
        .register_hook(POST_TOOL_CALL, move |ctx: &mut ToolCallHookContext| {
            let had_start = ctx
                .extensions
                .remove::<Started>()
                .is_some_and(|s| s.0.elapsed().as_secs() < 60);
            push(
                &sink,
                (
                    had_start,
                    ctx.status().clone(),
                    ctx.tool_input.contains_key("Started"),
                ),
            );
        })
        .expect("registers");
    research_crew(&global, &search_then_answer())
        .kickoff_blocking([("topic", "Rust")])
        .expect("runs");
    assert_eq!(take(&seen), [(true, ToolCallStatus::Ran, false)]);
}

#[test]
fn a_fail_closed_step_hook_that_panics_aborts_the_run() {
    let global = fresh_registry();
    global
        .register_hook_with(
            PRE_STEP,
            HookOptions::new().name("strict-step").fail_closed(),
            |_: &mut StepContext| -> () { panic!("step check crashed") },
        )
        .expect("registers");
    let error = research_crew(&global, &search_then_answer())
        .kickoff_blocking([("topic", "Rust")])
        .expect_err("aborted");
    assert!(matches!(
        error,
        CrewError::AbortedAt {
            point: InterceptionPoint::PRE_STEP,
            ..
        }
    ));
    assert_eq!(
        error.abort().map(|a| a.source.as_str()),
        Some("strict-step")
    );
}

#[test]
fn question_mark_turns_the_runtimes_errors_into_an_abort_named_after_the_hook() {
    use crew_runtime::llm::LlmError;
    let global = fresh_registry();
    global
        .register_hook_with(
            PRE_STEP,
            HookOptions::new().name("model-check"),
            |_: &mut StepContext| -> Result<(), HookAborted> {
                Err(LlmError::Config("no model configured".to_owned()))?;
                Ok(())
            },
        )
        .expect("registers");
    let error = research_crew(&global, &search_then_answer())
        .kickoff_blocking([("topic", "Rust")])
        .expect_err("aborted");
    let abort = error.abort().expect("a hook aborted");
    assert_eq!(abort.source, "model-check");
    assert!(abort.reason.contains("no model configured"), "{abort}");

    let nested: Result<(), HookAborted> = (|| {
        Err(CrewError::AbortedAt {
            point: InterceptionPoint::INPUT,
            agent: None,
            abort: HookAborted::new("inner", "inner-hook"),
        })?;
        Ok(())
    })();
    assert!(nested.is_err_and(|abort| abort.reason.contains("inner") && abort.source.is_empty()));
}

#[test]
fn an_execution_end_abort_after_a_completed_run_is_reported_and_the_output_stands() {
    // SPEC §6: EXECUTION_END hooks observe; rule 26: an abort at any point
    // but EXECUTION_END ends the run.
    let global = fresh_registry();
    global
        .register_hook_with(
            EXECUTION_END,
            HookOptions::new().name("end-vetoer"),
            |_: &mut ExecutionEndContext| -> Result<(), HookAborted> {
                Err(HookAborted::new("too late to refuse", "end-vetoer"))
            },
        )
        .expect("registers");
    let reported = log();
    let sink = reported.clone();
    global.events().subscribe(move |event| {
        if let Event::HookDispatched(dispatch) = event
            && dispatch.point == InterceptionPoint::EXECUTION_END
        {
            push(&sink, dispatch.abort_reason.clone());
        }
    });
    let llm = search_then_answer();

    let output = research_crew(&global, &llm)
        .kickoff_blocking([("topic", "rust")])
        .expect("the completed run's output stands");

    assert!(!output.raw.is_empty());
    assert_eq!(
        take(&reported),
        [Some("too late to refuse".to_owned())],
        "the abort is reported, once"
    );
}
