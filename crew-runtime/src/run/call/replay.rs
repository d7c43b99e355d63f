//! A call a resumed kickoff finds in doubt: its intent was committed (the
//! tool was about to start, in a process now gone) and its result never
//! was. The tool may or may not have acted. SPEC §13 decides, in order:
//!
//! 1. wait until the call cannot still be running anywhere (its intent's
//!    time, plus the tool's timeout, plus one lease);
//! 2. a tool that may run again (read-only, or idempotent and not
//!    destructive) runs again with the same idempotency key, once the
//!    crew's current guards let it (a rule added since the crash stops it);
//! 3. a tool with a reconciler is asked whether the effect happened: if it
//!    did, its result stands for the call; if it did not, the call runs
//!    again as a new attempt (a new key, its intent committed first);
//! 4. otherwise, or when the reconciler cannot tell, the crew's human-input
//!    source is asked what happened: "happened" (with the call's result, if
//!    given) stands for the call, "did not happen" runs it again as a new
//!    attempt, and "stop", anything unclear or no answer ends the kickoff
//!    in doubt ([`CrewError::InDoubt`]) with nothing run.
//!
//! The PRE chain is not run again: it ran, and let the call through (a
//! person who approved it is not asked twice). The POST chain runs on the
//! result, as after any call.

use std::sync::Arc;

use hooks_core::runtime::{TOOL_CALL_POINTS, ToolOutput};
use hooks_core::{
    ApprovedCallOutcome, RawToolResult, ToolCallHookContext, ToolCallStatus, ToolInfo,
};
use serde_json::Value;

use super::execute::execute;
use super::report::Report;
use super::{context, observe};
use crate::error::CrewError;
use crate::llm::ToolCallRequest;
use crate::run::context::RunContext;
use crate::run::journal::{Intent, JournalAt, Settled};
use crate::tool::{Reconciled, Tool};

/// Settles the call `call` of `turn`, found in doubt with `intent`, and
/// gives the observation the model gets (committed as the call's result).
pub(super) async fn in_doubt(
    cx: &RunContext,
    at: &JournalAt,
    turn: usize,
    call: &ToolCallRequest,
    intent: Intent,
) -> Result<String, CrewError> {
    let place = at.place(turn, &call.id);
    let report = |settled: Settled| {
        for event in at
            .journal
            .settled_events(place, &intent.tool, &intent.key, settled)
        {
            if cx.listening() {
                cx.emit(event);
            }
        }
    };
    // What became of the call, for the question that approved it, if any.
    let settled = |outcome: ApprovedCallOutcome| at.journal.settle_call(place, outcome);
    let in_doubt = |why: String| {
        report(Settled::LeftInDoubt);
        settled(ApprovedCallOutcome::InDoubt { why: why.clone() });
        Err(CrewError::InDoubt {
            kickoff: Arc::from(at.journal.kickoff_id()),
            tool: intent.tool.clone(),
            call_id: call.id.clone(),
            key: intent.key.as_str().to_owned(),
            why: why.into_boxed_str(),
        })
    };
    let Some(tool) = cx.agent().find_tool(&intent.tool).cloned() else {
        return in_doubt(format!(
            "the agent no longer has the tool `{}`, so nothing can tell whether its call acted",
            intent.tool
        ));
    };
    // Until then, the process that began the call could still be running it.
    let timeout = tool.timeout().unwrap_or(cx.settings().tool_timeout);
    let wait = at.journal.in_doubt_in(&intent, timeout).await?;
    if !wait.is_zero() {
        tokio::time::sleep(wait).await;
        at.go_on()?;
    }
    let mut ctx = context(cx, turn, call, intent.input.clone(), None);
    ctx.tool = Some(Arc::clone(&tool) as Arc<dyn ToolInfo>);
    if tool.may_run_again() {
        if let Some(refused) = refused_now(cx, &ctx) {
            report(Settled::Refused);
            settled(ApprovedCallOutcome::Refused {
                source: "durable".to_owned(),
                reason: format!("running it again after the interruption is refused: {refused}"),
            });
            let message = format!(
                "Tool execution blocked: `{}` was interrupted before its result was recorded, \
                 and running it again is now refused: {refused}",
                intent.tool
            );
            return settle(cx, at, turn, call, ctx, ToolOutput::text(message)).await;
        }
        report(Settled::RanAgain);
        ctx.extensions.insert(intent.key.clone());
        return run_again(cx, at, turn, call, &tool, ctx).await;
    }
    match tool.reconciled(&intent.key, &intent.input).await {
        Some(Ok(Reconciled::Happened { result })) => {
            report(Settled::Happened);
            settled(ApprovedCallOutcome::Ran);
            let output = match result {
                Some(result) => {
                    let mut output = ToolOutput::text(render(&result));
                    output.raw = RawToolResult::from_json(result);
                    output
                }
                None => ToolOutput::text(format!(
                    "The call of `{}` had already taken effect before the run was interrupted.",
                    intent.tool
                )),
            };
            settle(cx, at, turn, call, ctx, output).await
        }
        Some(Ok(Reconciled::DidNotHappen)) => {
            report(Settled::DidNotHappen);
            run_as_new_attempt(cx, at, turn, call, &tool, &intent, ctx).await
        }
        reconciled => {
            let why = match reconciled {
                Some(Err(error)) => error.to_string(),
                _ => format!(
                    "`{}` is neither read-only nor idempotent and has no reconciler, so running \
                     it again could repeat its effect",
                    intent.tool
                ),
            };
            // Never run again blind: a person says what happened.
            let question = format!(
                "A call of `{}` was interrupted before its result was recorded ({why}). Check its \
                 effect (idempotency key {}): did it happen?",
                intent.tool,
                intent.key.as_str()
            );
            let answer = ctx
                .request_human_input(&question, "happened [its result] / did not happen / stop")
                .await;
            match answer.as_deref().map(PersonSays::read) {
                Ok(PersonSays::Happened(result)) => {
                    report(Settled::Happened);
                    settled(ApprovedCallOutcome::Ran);
                    let result = result.unwrap_or_else(|| {
                        format!(
                            "The call of `{}` had already taken effect before the run was \
                             interrupted (a person checked).",
                            intent.tool
                        )
                    });
                    settle(cx, at, turn, call, ctx, ToolOutput::text(result)).await
                }
                Ok(PersonSays::DidNotHappen) => {
                    report(Settled::DidNotHappen);
                    run_as_new_attempt(cx, at, turn, call, &tool, &intent, ctx).await
                }
                Ok(PersonSays::Stop) => in_doubt(format!("{why}; a person said to stop")),
                Err(error) => in_doubt(format!("{why}; nobody said what happened ({error})")),
            }
        }
    }
}

/// What a person said of a call in doubt.
#[derive(Debug, PartialEq, Eq)]
enum PersonSays {
    /// "happened", with the call's result if they gave one.
    Happened(Option<String>),
    /// "did not happen": it runs again.
    DidNotHappen,
    /// "stop", or anything unclear: nothing runs.
    Stop,
}

impl PersonSays {
    fn read(answer: &str) -> PersonSays {
        let answer = answer.trim();
        let lower = answer.to_lowercase();
        for negative in ["did not happen", "didn't happen", "not happened"] {
            if lower.starts_with(negative) {
                return PersonSays::DidNotHappen;
            }
        }
        match lower.strip_prefix("happened") {
            Some(_) => {
                let rest = answer
                    .get("happened".len()..)
                    .unwrap_or_default()
                    .trim_start_matches([':', '-', ' ', '\t'])
                    .trim();
                PersonSays::Happened((!rest.is_empty()).then(|| rest.to_owned()))
            }
            None => PersonSays::Stop,
        }
    }
}

/// Why the crew's rules refuse the call now, if they do (a `forbid` added
/// since the call began); no person is asked again.
fn refused_now(cx: &RunContext, ctx: &ToolCallHookContext) -> Option<String> {
    cx.settings()
        .extensions
        .iter()
        .find_map(|extension| extension.refuses_again(ctx))
}

/// Runs a call whose effect did not happen as a new attempt: a new key,
/// its intent committed first, then the tool and the POST chain.
async fn run_as_new_attempt(
    cx: &RunContext,
    at: &JournalAt,
    turn: usize,
    call: &ToolCallRequest,
    tool: &Tool,
    intent: &Intent,
    mut ctx: ToolCallHookContext,
) -> Result<String, CrewError> {
    let place = at.place(turn, &call.id);
    let attempt = intent.attempt.saturating_add(1);
    ctx.extensions.insert(at.journal.key(place, attempt));
    at.journal
        .record_intent(place, &intent.tool, &intent.input, attempt)
        .await?;
    run_again(cx, at, turn, call, tool, ctx).await
}

/// Runs the tool again (its key already in `ctx`), then the POST chain.
async fn run_again(
    cx: &RunContext,
    at: &JournalAt,
    turn: usize,
    call: &ToolCallRequest,
    tool: &Tool,
    ctx: ToolCallHookContext,
) -> Result<String, CrewError> {
    let report = Report::begin(cx, &call.name, &ctx.tool_input);
    let (output, ran) = execute(cx, report, tool, &ctx).await;
    // What became of it, for the question that approved it, if any.
    let outcome = match &output.status {
        ToolCallStatus::Failed { error } => ApprovedCallOutcome::Failed {
            error: error.clone(),
        },
        _ => ApprovedCallOutcome::Ran,
    };
    at.journal.settle_call(at.place(turn, &call.id), outcome);
    let name = ctx.tool_name().to_owned();
    let observation = settle(cx, at, turn, call, ctx, output).await?;
    // A failed call ended with its `ToolUsageError`.
    if cx.listening() && ran.failed.is_none() {
        let input = ran.input.unwrap_or(Value::Null);
        report.finished(&name, input, observation.clone(), false, ran.ran_for);
    }
    Ok(observation)
}

/// The POST chain on `output`, the observation made as for any call, and
/// committed as the call's result.
async fn settle(
    cx: &RunContext,
    at: &JournalAt,
    turn: usize,
    call: &ToolCallRequest,
    mut ctx: ToolCallHookContext,
    output: ToolOutput,
) -> Result<String, CrewError> {
    let report = cx
        .dispatcher()
        .begin_call(&TOOL_CALL_POINTS)
        .finish_tool_call_async(&mut ctx, output)
        .await
        .map_err(|abort| CrewError::Aborted {
            tool: ctx.tool_name().to_owned(),
            agent: cx.role().to_owned(),
            abort,
        })?;
    let observation = observe::observation(cx, report).observation;
    at.journal
        .record_result(at.place(turn, &call.id), &observation)
        .await?;
    Ok(observation)
}

/// A reconciler's result as the model reads it.
fn render(result: &Value) -> String {
    match result {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::PersonSays;

    #[test]
    fn a_persons_word_on_a_call_in_doubt_is_read_strictly() {
        assert_eq!(PersonSays::read("happened"), PersonSays::Happened(None));
        assert_eq!(
            PersonSays::read("Happened: refund R-17 issued"),
            PersonSays::Happened(Some("refund R-17 issued".into()))
        );
        assert_eq!(
            PersonSays::read(" did not happen "),
            PersonSays::DidNotHappen
        );
        assert_eq!(PersonSays::read("Didn't happen"), PersonSays::DidNotHappen);
        for unclear in ["stop", "yes", "", "maybe happened", "no"] {
            assert_eq!(PersonSays::read(unclear), PersonSays::Stop, "{unclear:?}");
        }
    }
}
