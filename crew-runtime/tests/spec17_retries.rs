//! SPEC §17, "Retries": a failed model call is asked again, up to the
//! agent's `max_retry_limit` (default 2), on the conversation exactly as it
//! stood: no hook runs again and no tool runs twice. Each new attempt is
//! announced as the reference announces it (`AgentExecutionStarted`, one
//! `AgentExecutionCompleted` per start once the agent finishes), the last
//! failure sends `AgentExecutionError` and fails the task. A refusal by a
//! hook is never retried.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::*;
use crew_runtime::DEFAULT_MAX_RETRY_LIMIT;
use crew_runtime::guards::SecretRedactor;
use crew_runtime::llm::{LlmRequest, ModelTurn};
use crew_runtime::prelude::*;
use crew_runtime::{
    ChatMessage, InterceptionPoint, POST_MODEL_CALL, PRE_MODEL_CALL, llm::LlmError,
};

/// The name of every lifecycle and tool event, in order.
fn names(crew: &Crew) -> Log<&'static str> {
    let seen = log();
    let sink = seen.clone();
    crew.events().subscribe(move |event| {
        let name = match event {
            Event::CrewKickoffStarted(_) => "CrewKickoffStarted",
            Event::CrewKickoffCompleted(_) => "CrewKickoffCompleted",
            Event::CrewKickoffFailed(_) => "CrewKickoffFailed",
            Event::TaskStarted(_) => "TaskStarted",
            Event::TaskCompleted(_) => "TaskCompleted",
            Event::TaskFailed(_) => "TaskFailed",
            Event::AgentExecutionStarted(_) => "AgentExecutionStarted",
            Event::AgentExecutionCompleted(_) => "AgentExecutionCompleted",
            Event::AgentExecutionError(_) => "AgentExecutionError",
            Event::LlmCallStarted(_) => "LLMCallStarted",
            Event::LlmCallCompleted(_) => "LLMCallCompleted",
            Event::LlmCallFailed(_) => "LLMCallFailed",
            Event::ToolUsageStarted(_) => "ToolUsageStarted",
            Event::ToolUsageFinished(_) => "ToolUsageFinished",
            Event::ToolUsageError(_) => "ToolUsageError",
            _ => return,
        };
        push(&sink, name);
    });
    seen
}

/// A `count` tool that counts its runs.
fn counting_tool(runs: &Arc<AtomicUsize>) -> Tool {
    let runs = Arc::clone(runs);
    Tool::dynamic(
        "count",
        "Counts its runs",
        json!({"type": "object"}),
        move |_| {
            let run = runs.fetch_add(1, Ordering::Relaxed) + 1;
            Ok::<_, String>(json!(format!("run {run}")))
        },
    )
}

/// A one-task crew for `worker` on `global`.
fn one_task_crew(global: &Arc<HookRegistry>, worker: Agent) -> Crew {
    Crew::builder()
        .name("retries")
        .agent(worker.clone())
        .task(Task::builder("Count once").agent(&worker).build())
        .global_registry(Arc::clone(global))
        .build()
        .expect("the crew builds")
}

fn down() -> LlmError {
    LlmError::Http {
        status: 503,
        body: "overloaded".into(),
    }
}

#[test]
fn a_model_that_fails_once_then_answers_completes_and_its_tool_ran_once() {
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("count", json!({}))
            .fail(down())
            .answer("counted"),
    );
    let runs = Arc::new(AtomicUsize::new(0));
    let worker = agent("Counter", vec![counting_tool(&runs)], &llm);
    let crew = one_task_crew(&fresh_registry(), worker);
    let seen = names(&crew);

    let output = crew.kickoff_blocking(()).expect("the retry answers");

    assert_eq!(output.raw, "counted");
    assert_eq!(runs.load(Ordering::Relaxed), 1);
    assert_eq!(llm.asked(), 3);
    assert_eq!(
        take(&seen),
        [
            "CrewKickoffStarted",
            "TaskStarted",
            "AgentExecutionStarted",
            "LLMCallStarted",
            "LLMCallCompleted",
            "ToolUsageStarted",
            "ToolUsageFinished",
            "LLMCallStarted",
            "LLMCallFailed",
            "AgentExecutionStarted",
            "LLMCallStarted",
            "LLMCallCompleted",
            "AgentExecutionCompleted",
            "AgentExecutionCompleted",
            "TaskCompleted",
            "CrewKickoffCompleted",
        ]
    );
}

#[test]
fn a_model_that_always_fails_is_tried_three_times_then_the_task_fails() {
    let llm = Arc::new(ScriptedLlm::new());
    let worker = agent("Counter", Vec::new(), &llm);
    assert_eq!(worker.max_retry_limit(), DEFAULT_MAX_RETRY_LIMIT);
    let crew = one_task_crew(&fresh_registry(), worker);
    let seen = names(&crew);

    let error = crew
        .kickoff_blocking(())
        .expect_err("the model never answers");

    assert!(
        matches!(
            error,
            CrewError::Model {
                source: LlmError::ScriptExhausted { asked: 3 },
                ..
            }
        ),
        "{error:?}"
    );
    assert_eq!(llm.asked(), 3);
    assert_eq!(
        take(&seen),
        [
            "CrewKickoffStarted",
            "TaskStarted",
            "AgentExecutionStarted",
            "LLMCallStarted",
            "LLMCallFailed",
            "AgentExecutionStarted",
            "LLMCallStarted",
            "LLMCallFailed",
            "AgentExecutionStarted",
            "LLMCallStarted",
            "LLMCallFailed",
            "AgentExecutionError",
            "TaskFailed",
            "CrewKickoffFailed",
        ]
    );
}

#[test]
fn max_retry_limit_zero_means_no_retry() {
    let llm = Arc::new(ScriptedLlm::new().fail(down()).answer("too late"));
    let worker = Agent::builder("Counter")
        .llm(llm.clone())
        .max_retry_limit(0)
        .build();
    let crew = one_task_crew(&fresh_registry(), worker);
    let seen = names(&crew);

    let error = crew.kickoff_blocking(()).expect_err("no second attempt");

    assert!(
        matches!(
            error,
            CrewError::Model {
                source: LlmError::Http { status: 503, .. },
                ..
            }
        ),
        "{error:?}"
    );
    assert_eq!(llm.asked(), 1);
    assert_eq!(llm.remaining(), 1);
    assert_eq!(
        take(&seen),
        [
            "CrewKickoffStarted",
            "TaskStarted",
            "AgentExecutionStarted",
            "LLMCallStarted",
            "LLMCallFailed",
            "AgentExecutionError",
            "TaskFailed",
            "CrewKickoffFailed",
        ]
    );
}

#[test]
fn a_refusal_by_a_hook_is_never_retried() {
    let global = fresh_registry();
    let refusals = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&refusals);
    global
        .register_hook(
            PRE_MODEL_CALL,
            move |_: &mut LlmCallHookContext| -> Result<(), HookAborted> {
                counted.fetch_add(1, Ordering::Relaxed);
                Err(HookAborted::new("no model calls today", "budget"))
            },
        )
        .expect("registers");
    let llm = Arc::new(ScriptedLlm::new().answer("never asked"));
    let crew = one_task_crew(&global, agent("Counter", Vec::new(), &llm));
    let seen = names(&crew);

    let error = crew.kickoff_blocking(()).expect_err("the hook refuses");

    assert!(
        matches!(
            error,
            CrewError::AbortedAt {
                point: InterceptionPoint::PRE_MODEL_CALL,
                ..
            }
        ),
        "{error:?}"
    );
    assert_eq!(llm.asked(), 0);
    assert_eq!(refusals.load(Ordering::Relaxed), 1);
    assert_eq!(
        take(&seen),
        [
            "CrewKickoffStarted",
            "TaskStarted",
            "AgentExecutionStarted",
            // The refused work ends, once: no retry.
            "AgentExecutionError",
            "TaskFailed",
            "CrewKickoffFailed",
        ]
    );
}

#[test]
fn retries_happen_on_the_conversation_as_it_stood() {
    // A PRE_MODEL_CALL hook that adds a note each time it runs: were the
    // retry to run it again, the retried request would carry one more.
    let global = fresh_registry();
    let pre = Arc::new(AtomicUsize::new(0));
    let post = Arc::new(AtomicUsize::new(0));
    let (pre_runs, post_runs) = (Arc::clone(&pre), Arc::clone(&post));
    global
        .register_hook(PRE_MODEL_CALL, move |ctx: &mut LlmCallHookContext| {
            let run = pre_runs.fetch_add(1, Ordering::Relaxed) + 1;
            ctx.messages.push(ChatMessage::user(format!("note {run}")));
        })
        .expect("registers");
    global
        .register_hook(POST_MODEL_CALL, move |_: &mut LlmCallHookContext| {
            post_runs.fetch_add(1, Ordering::Relaxed);
        })
        .expect("registers");
    let llm = Arc::new(
        ScriptedLlm::new()
            .call("count", json!({}))
            .fail(LlmError::Transport("connection reset".into()))
            .fail(LlmError::Timeout(std::time::Duration::from_secs(60)))
            .answer("counted"),
    );
    let runs = Arc::new(AtomicUsize::new(0));
    let crew = one_task_crew(&global, agent("Counter", vec![counting_tool(&runs)], &llm));

    crew.kickoff_blocking(()).expect("the second retry answers");

    let requests = llm.requests();
    assert_eq!(requests.len(), 4);
    assert_eq!(requests[2], requests[1]);
    assert_eq!(requests[3], requests[1]);
    // The turn after the tool's: its observation, then the hook's note.
    let contents: Vec<&str> = requests[1]
        .messages
        .iter()
        .rev()
        .take(2)
        .map(|message| message.content.as_str())
        .collect();
    assert_eq!(contents, ["note 2", "run 1"]);
    // Two turns, each through its hooks once.
    assert_eq!(pre.load(Ordering::Relaxed), 2);
    assert_eq!(post.load(Ordering::Relaxed), 2);
    assert_eq!(runs.load(Ordering::Relaxed), 1);
}

/// A model client that panics on its first request, then answers.
struct PanicsOnce {
    asked: AtomicUsize,
}

#[crew_runtime::async_trait]
impl Llm for PanicsOnce {
    fn name(&self) -> &str {
        "panics-once"
    }

    async fn complete(&self, _: &LlmRequest<'_>) -> Result<ModelTurn, LlmError> {
        if self.asked.fetch_add(1, Ordering::Relaxed) == 0 {
            panic!("the client's parser broke");
        }
        Ok(ModelTurn::FinalAnswer("recovered".into()))
    }
}

#[test]
fn a_panicking_model_client_is_a_failure_and_is_retried() {
    let model = Arc::new(PanicsOnce {
        asked: AtomicUsize::new(0),
    });
    let worker = Agent::builder("Counter").llm(model.clone()).build();
    let crew = one_task_crew(&fresh_registry(), worker);
    let failures = log();
    let sink = failures.clone();
    crew.events().subscribe(move |event| {
        if let Event::LlmCallFailed(e) = event {
            push(&sink, e.error.clone());
        }
    });

    let output = crew.kickoff_blocking(()).expect("the retry answers");

    assert_eq!(output.raw, "recovered");
    assert_eq!(model.asked.load(Ordering::Relaxed), 2);
    assert_eq!(
        take(&failures),
        ["the model panicked: the client's parser broke"]
    );
}

#[test]
fn the_agent_execution_error_passes_the_crews_redaction() {
    let secret = "ghp_8bT4kLq9ZrX2mN7vC1wE5yH3jP6sD0fA9gQw";
    let llm = Arc::new(ScriptedLlm::new().fail(LlmError::Http {
        status: 401,
        body: format!("bad token {secret}"),
    }));
    let worker = Agent::builder("Counter")
        .llm(llm.clone())
        .max_retry_limit(0)
        .build();
    let crew = Crew::builder()
        .agent(worker.clone())
        .task(Task::builder("Count once").agent(&worker).build())
        .global_registry(fresh_registry())
        .redact_with(SecretRedactor::new())
        .build()
        .expect("the crew builds");
    let errors = log();
    let sink = errors.clone();
    crew.events().subscribe(move |event| {
        if let Event::AgentExecutionError(e) = event {
            push(&sink, (e.agent_role.clone(), e.error.clone()));
        }
    });

    crew.kickoff_blocking(())
        .expect_err("the model refuses the token");

    let errors = take(&errors);
    assert_eq!(errors.len(), 1, "{errors:?}");
    let (role, error) = &errors[0];
    assert_eq!(role, "Counter");
    assert!(error.contains("HTTP 401: bad token"), "{error}");
    assert!(!error.contains(secret), "leaked in {error}");
}

const VERBOSE_CHILD: &str = "SPEC17_RETRIES_VERBOSE_CHILD";

#[test]
fn the_verbose_console_says_when_a_model_call_is_retried() {
    if is_child(VERBOSE_CHILD) {
        let llm = Arc::new(ScriptedLlm::new().fail(down()).answer("counted"));
        let worker = Agent::builder("Counter").llm(llm).verbose(true).build();
        one_task_crew(&fresh_registry(), worker)
            .kickoff_blocking(())
            .expect("the retry answers");
        return;
    }
    let stdout = run_in_child(
        "the_verbose_console_says_when_a_model_call_is_retried",
        VERBOSE_CHILD,
    );
    assert!(
        stdout.contains(
            "[Counter] turn 1: the model call failed (the model server answered HTTP 503: \
             overloaded); retrying (1 of 2)"
        ),
        "the child printed:\n{stdout}"
    );
}
