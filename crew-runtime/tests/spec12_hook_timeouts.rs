//! SPEC §12 (hooks have a timeout) and §7 (approval gates fail closed): an
//! answer after `request_human_input`'s deadline never approves, even from
//! a source that blocks its thread, and such a source stalls nothing else;
//! an `async` hook that never finishes is cut short as if it had panicked,
//! time spent waiting for a person does not count toward its limit, and a
//! hook cut short after it asked a person blocks the call whatever its
//! failure mode.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::time::Duration;

use common::*;
use crew_runtime::CrewBuilder;
use crew_runtime::events::HookPanickedEvent;
use crew_runtime::prelude::*;
use crew_runtime::{
    CallbackInput, HumanInputError, HumanInputRequest, HumanInputSource, InterceptionPoint,
    ScriptedInput,
};

const BLOCKED: &str = "Tool execution blocked by hook. Tool: send_email";

/// The guide's gate: ask, and let the call through only on `yes`.
async fn approval_gate(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
    let answer = ctx.request_human_input("Send it?", "yes/no").await?;
    if answer == "yes" {
        Ok(())
    } else {
        Err(HookAborted::new(
            format!("refused: {answer}"),
            "approval-gate",
        ))
    }
}

/// A source that answers `yes`, but only after a synchronous wait that
/// blocks its thread (a blocking read inside the async `ask`): the test
/// releases it. Says when it has answered.
struct BlockingSource {
    release: Mutex<mpsc::Receiver<()>>,
    answered: Arc<AtomicBool>,
}

#[crew_runtime::async_trait]
impl HumanInputSource for BlockingSource {
    async fn ask(&self, _: HumanInputRequest) -> Result<String, HumanInputError> {
        // Deliberately synchronous: this holds whatever thread polls it.
        let released = self
            .release
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .recv_timeout(Duration::from_secs(60));
        self.answered.store(true, Ordering::SeqCst);
        released
            .map(|()| "yes".to_owned())
            .map_err(|_| HumanInputError::Closed)
    }
}

fn blocking_source() -> (Arc<BlockingSource>, mpsc::Sender<()>, Arc<AtomicBool>) {
    let (release, released) = mpsc::channel();
    let answered = Arc::new(AtomicBool::new(false));
    let source = Arc::new(BlockingSource {
        release: Mutex::new(released),
        answered: answered.clone(),
    });
    (source, release, answered)
}

fn one_email() -> Arc<ScriptedLlm> {
    Arc::new(
        ScriptedLlm::new()
            .call("send_email", json!({"to": "team@example.com"}))
            .answer("done"),
    )
}

fn email_crew(
    global: &Arc<HookRegistry>,
    sent: &Log<String>,
    llm: &Arc<ScriptedLlm>,
) -> CrewBuilder {
    let assistant = agent("Assistant", vec![send_email_tool(sent)], llm);
    Crew::builder()
        .agent(assistant.clone())
        .task(Task::builder("Email the team").agent(&assistant).build())
        .global_registry(global.clone())
}

/// Records every contained hook panic (a timeout is reported as one).
fn panics(crew: &Crew) -> Log<HookPanickedEvent> {
    let seen = log();
    let sink = seen.clone();
    crew.events().subscribe(move |event| {
        if let Event::HookPanicked(panic) = event {
            push(&sink, panic.clone());
        }
    });
    seen
}

/// Waits (boundedly) for the blocked source to finish answering.
fn wait_answered(answered: &AtomicBool) {
    for _ in 0..600 {
        if answered.load(Ordering::SeqCst) {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("the blocked source never finished");
}

#[test]
fn an_answer_after_the_deadline_from_a_source_that_blocks_its_thread_never_approves() {
    let global = fresh_registry();
    global
        .register_async_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("gate"),
            approval_gate,
        )
        .expect("registers");
    let (source, release, answered) = blocking_source();
    let sent = log();
    let llm = one_email();
    let crew = email_crew(&global, &sent, &llm)
        .human_input(source)
        .human_input_timeout(Duration::from_millis(200))
        .build()
        .expect("builds");

    let output = crew.kickoff_blocking(()).expect("the run goes on");

    // The kickoff ended while the source still held its thread: it waited
    // for the deadline, not for the source.
    assert!(
        !answered.load(Ordering::SeqCst),
        "the kickoff waited for the blocked source"
    );
    assert_eq!(output.raw, "done");
    assert_eq!(llm.requests()[1].observations(), [BLOCKED]);
    // The source answers `yes` now, long after the deadline: nothing runs.
    release.send(()).expect("the source waits");
    wait_answered(&answered);
    assert!(take(&sent).is_empty(), "a late yes approved the call");
}

#[tokio::test(flavor = "current_thread")]
async fn a_source_that_blocks_its_thread_does_not_stall_a_current_thread_runtime() {
    let global = fresh_registry();
    global
        .register_async_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("gate"),
            approval_gate,
        )
        .expect("registers");
    let (source, release, answered) = blocking_source();
    let sent = log();
    let llm = one_email();
    let crew = email_crew(&global, &sent, &llm)
        .human_input(source)
        .human_input_timeout(Duration::from_millis(100))
        .build()
        .expect("builds");
    // Other work of the same (only) runtime thread keeps running while
    // the question is open.
    let ticks = Arc::new(Mutex::new(0u32));
    let ticker = tokio::spawn({
        let ticks = ticks.clone();
        async move {
            loop {
                tokio::time::sleep(Duration::from_millis(5)).await;
                *ticks.lock().unwrap_or_else(PoisonError::into_inner) += 1;
            }
        }
    });

    crew.kickoff(()).await.expect("the run goes on");

    assert!(!answered.load(Ordering::SeqCst));
    assert!(
        *ticks.lock().unwrap_or_else(PoisonError::into_inner) > 0,
        "the runtime's other task never ran while the question was open"
    );
    ticker.abort();
    assert_eq!(llm.requests()[1].observations(), [BLOCKED]);
    release.send(()).expect("the source waits");
    wait_answered(&answered);
    assert!(take(&sent).is_empty());
}

#[test]
fn request_human_input_refuses_an_answer_the_source_gives_after_the_deadline() {
    // Outside any crew, on a context of its own: the same guarantee.
    let (source, release, answered) = blocking_source();
    let ctx = ToolCallHookContext::new("send_email", Default::default())
        .with_human_input(source)
        .with_human_input_timeout(Duration::from_millis(50));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime");

    let answer = runtime.block_on(ctx.request_human_input("Send?", "yes/no"));

    assert_eq!(
        answer,
        Err(HumanInputError::TimedOut(Duration::from_millis(50)))
    );
    release.send(()).expect("the source waits");
    wait_answered(&answered);
}

/// A hook that never finishes.
async fn stuck(_: &mut ToolCallHookContext) -> Result<(), HookAborted> {
    std::future::pending().await
}

#[test]
fn an_async_hook_that_never_finishes_is_cut_short_and_fails_open_by_default() {
    let global = fresh_registry();
    global
        .register_async_hook_with(PRE_TOOL_CALL, HookOptions::new().name("stuck"), stuck)
        .expect("registers");
    let sent = log();
    let llm = one_email();
    let crew = email_crew(&global, &sent, &llm)
        .hook_timeout(Duration::from_millis(50))
        .build()
        .expect("builds");
    let seen = panics(&crew);

    crew.kickoff_blocking(()).expect("the run goes on");

    // Fail-open: its effect is dropped, the call runs.
    assert_eq!(take(&sent), ["team@example.com"]);
    let seen = take(&seen);
    assert_eq!(seen.len(), 1, "reported like a panic: {seen:?}");
    assert_eq!(seen[0].hook, "stuck");
    assert_eq!(seen[0].point, InterceptionPoint::PRE_TOOL_CALL);
    assert!(!seen[0].fail_closed);
    assert_eq!(seen[0].message, "timed out: still running after 50ms");
}

#[test]
fn a_fail_closed_async_hook_cut_short_blocks_the_call() {
    let global = fresh_registry();
    global
        .register_async_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("stuck").fail_closed(),
            stuck,
        )
        .expect("registers");
    let sent = log();
    let llm = one_email();
    let crew = email_crew(&global, &sent, &llm)
        .hook_timeout(Duration::from_millis(50))
        .build()
        .expect("builds");
    let aborts = log();
    let sink = aborts.clone();
    crew.events().subscribe(move |event| {
        if let Event::HookDispatched(dispatch) = event
            && let Some(reason) = &dispatch.abort_reason
        {
            push(&sink, (dispatch.abort_source.clone(), reason.clone()));
        }
    });

    crew.kickoff_blocking(()).expect("the run goes on");

    assert!(take(&sent).is_empty());
    assert_eq!(llm.requests()[1].observations(), [BLOCKED]);
    assert_eq!(
        take(&aborts),
        [(
            Some("stuck".to_owned()),
            "fail-closed hook timed out: still running after 50ms".to_owned()
        )]
    );
}

#[test]
fn a_hook_of_its_own_limit_is_cut_short_at_that_limit() {
    let global = fresh_registry();
    global
        .register_async_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new()
                .name("stuck")
                .timeout(Duration::from_millis(30))
                .fail_closed(),
            stuck,
        )
        .expect("registers");
    let sent = log();
    let llm = one_email();
    // The crew's own limit would never be reached in a test.
    let crew = email_crew(&global, &sent, &llm)
        .hook_timeout(Duration::from_secs(3600))
        .build()
        .expect("builds");
    let seen = panics(&crew);

    crew.kickoff_blocking(()).expect("the run goes on");

    assert!(take(&sent).is_empty());
    assert_eq!(
        take(&seen)[0].message,
        "timed out: still running after 30ms"
    );
    assert_eq!(
        global.get_hooks(PRE_TOOL_CALL)[0].timeout,
        Some(Duration::from_millis(30))
    );
}

#[test]
fn time_spent_waiting_for_a_person_does_not_count_toward_the_hook_timeout() {
    let global = fresh_registry();
    global
        .register_async_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("gate"),
            approval_gate,
        )
        .expect("registers");
    // The person takes six times the hook's limit to say yes.
    let slow_yes = CallbackInput::new(|_: HumanInputRequest| async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        Ok("yes".to_owned())
    });
    let sent = log();
    let llm = one_email();
    let crew = email_crew(&global, &sent, &llm)
        .human_input(Arc::new(slow_yes))
        .hook_timeout(Duration::from_millis(50))
        .build()
        .expect("builds");
    let seen = panics(&crew);

    crew.kickoff_blocking(()).expect("the run goes on");

    assert_eq!(take(&sent), ["team@example.com"], "the approval stands");
    assert!(take(&seen).is_empty());
}

/// Asks, gets an answer, then never finishes.
async fn asks_then_hangs(ctx: &mut ToolCallHookContext) -> Result<(), HookAborted> {
    let _ = ctx.request_human_input("Send it?", "yes/no").await?;
    std::future::pending().await
}

#[test]
fn a_fail_open_hook_cut_short_after_asking_a_person_blocks_the_call() {
    let global = fresh_registry();
    global
        .register_async_hook_with(
            PRE_TOOL_CALL,
            HookOptions::new().name("asks-then-hangs"),
            asks_then_hangs,
        )
        .expect("registers");
    let sent = log();
    let llm = one_email();
    let crew = email_crew(&global, &sent, &llm)
        .human_input(Arc::new(ScriptedInput::new(["yes"])))
        .hook_timeout(Duration::from_millis(50))
        .build()
        .expect("builds");
    let seen = panics(&crew);

    crew.kickoff_blocking(()).expect("the run goes on");

    assert!(take(&sent).is_empty(), "an approval hook failed open");
    assert_eq!(llm.requests()[1].observations(), [BLOCKED]);
    let seen = take(&seen);
    assert!(seen[0].fail_closed, "reported as a refusal: {seen:?}");
}

#[test]
fn a_post_hook_cut_short_fails_open_and_the_result_stands() {
    async fn stuck_post(_: &mut ToolCallHookContext) -> Option<String> {
        std::future::pending().await
    }
    let global = fresh_registry();
    global
        .register_async_hook_with(
            POST_TOOL_CALL,
            HookOptions::new().name("stuck-post"),
            stuck_post,
        )
        .expect("registers");
    let sent = log();
    let llm = one_email();
    let crew = email_crew(&global, &sent, &llm)
        .hook_timeout(Duration::from_millis(30))
        .build()
        .expect("builds");

    crew.kickoff_blocking(()).expect("the run goes on");

    assert_eq!(
        llm.requests()[1].observations(),
        ["sent to team@example.com"]
    );
}
