//! Execute: the tool itself, on the arguments the PRE chain left. Placed
//! where its record says (in place, on the blocking pool, or awaited),
//! within its timeout, its panic contained; a failure becomes the call's
//! status ([`ToolOutput::error`]) and is reported as it happens, before
//! the POST chain sees it.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hooks_core::events::EventSequence;
use hooks_core::runtime::{ToolOutput, contain_panic, contain_panic_async, take_panic_message};
use hooks_core::{RawToolResult, ToolCallHookContext};
use serde_json::Value;

use super::report::{Failure, Report};
use super::watch::{Abandon, CallWatch};
use crate::join::within;
use crate::placement::{self, Placement, PlacementRecord, Where};
use crate::run::KickoffDepth;
use crate::run::context::RunContext;
use crate::tool::{CurrentCall, IdempotencyKey, Tool, ToolResult, ToolRun};

/// What a tool's run tells beside its output: how long it ran (measured
/// only when someone listens) and how it failed.
#[derive(Debug, Default)]
pub(super) struct Ran {
    pub(super) ran_for: Duration,
    pub(super) failed: Option<Failure>,
    /// The arguments the tool got, cleaned (only when someone listens).
    pub(super) input: Option<Value>,
    /// Why the kickoff must stop after this call (its journal could not
    /// take the call's intent, so the tool did not run).
    pub(super) stopped: Option<Box<crate::error::CrewError>>,
}

/// Why a tool call produced no result of its own.
enum Stopped {
    /// The tool panicked (the message).
    Panicked(String),
    /// The tool did not finish within its timeout.
    TimedOut,
}

/// Runs `tool` on the input the PRE chain left in `ctx`. Says beside the
/// output how long the tool ran and whether it failed, panicked or timed
/// out (reported here, as it happens).
pub(super) fn execute<'a>(
    cx: &'a RunContext,
    report: Report<'a>,
    tool: &'a Tool,
    ctx: &ToolCallHookContext,
) -> impl Future<Output = (ToolOutput, Ran)> + Send + use<'a> {
    let ran_with = report.executing(ctx.tool_name(), &ctx.tool_input);
    let listening = ran_with.is_some();
    let tool_name = listening.then(|| ctx.tool_name().to_owned());
    let clock = listening.then(Instant::now);
    let timeout = tool.timeout().unwrap_or(cx.settings().tool_timeout);
    let run = tool.invoke(&ctx.tool_input);
    // What the tool's code reads of its call (`CurrentCall::get`); the key
    // is left in the extensions by a durable kickoff's layer.
    let (call_id, tool_name_shared) = ctx.shared_ids();
    let call = CurrentCall::new(
        call_id,
        tool_name_shared,
        ctx.extensions.get::<IdempotencyKey>().cloned(),
    );
    let placement = tool.placement();
    let watch = listening.then(|| {
        Arc::new(CallWatch::new(
            cx.hooks.clone(),
            report.abandoned(ctx.tool_name()),
        ))
    });
    async move {
        let running = call.scope(run_tool(cx, run, placement, timeout, watch));
        // A kickoff the tool starts names this call as its parent (when
        // the call has an event to name).
        let result = match report.started() {
            Some(started) => KickoffDepth::scope(cx.depth.in_call(Some(started)), running).await,
            None => running.await,
        };
        let ran_for = clock.map_or(Duration::ZERO, |clock| clock.elapsed());
        let (output, failed) = match result {
            Ok(Ok(output)) => (output, None),
            Ok(Err(failure)) => {
                let mut output = ToolOutput::error(&failure);
                if let Some(result) = failure.into_result() {
                    output.raw = RawToolResult::from_json(result);
                }
                (output, Some(Failure::Error))
            }
            Err(Stopped::Panicked(message)) => (
                ToolOutput::error(format!("the tool panicked: {message}")),
                Some(Failure::Panic),
            ),
            Err(Stopped::TimedOut) => (
                ToolOutput::error(format!("timed out after {}", format_duration(timeout))),
                Some(Failure::Timeout),
            ),
        };
        if let (Some(failure), Some(input), Some(tool_name)) = (failed, &ran_with, &tool_name) {
            report.failed(failure, tool_name, input.clone(), &output.status);
        }
        let ran = Ran {
            ran_for,
            failed,
            input: ran_with,
            stopped: None,
        };
        (output, ran)
    }
}

/// Runs a prepared tool call: an async tool awaited here, a synchronous
/// one in place or on the runtime's blocking pool (with the kickoff's
/// redaction scope and depth on its thread), as its placement says (see
/// [`crate::placement`]). Panics are contained and silent (their message,
/// cleaned by the redaction in scope, reaches the POST chain and the
/// agent).
async fn run_tool(
    cx: &RunContext,
    run: ToolRun,
    placement: &Placement,
    timeout: Duration,
    watch: Option<Arc<CallWatch>>,
) -> Result<ToolResult, Stopped> {
    match run {
        ToolRun::Ready(result) => Ok(result),
        ToolRun::Blocking(body) => match placement.next() {
            // Quick by its record (or by its author's word): the hop to
            // the pool would cost more than the body.
            Where::InPlace(record) => {
                let ran =
                    placement::timed(record.as_deref(), PlacementRecord::ran_in_place, || {
                        contain_panic(AssertUnwindSafe(body))
                    });
                ran.map_err(|panic| {
                    if let Some(record) = &record {
                        record.overran();
                    }
                    Stopped::Panicked(take_panic_message(panic))
                })
            }
            Where::Pool(record) => run_on_pool(cx, body, record, timeout, watch).await,
        },
        ToolRun::Async(running) => {
            // Dropped before the tool ends: the kickoff was cancelled.
            let _left = watch
                .as_ref()
                .map(|watch| Abandon(Arc::clone(watch), false));
            let ran = within(timeout, contain_panic_async(AssertUnwindSafe(running))).await;
            // Ended, or timed out (reported as the call's error).
            if let Some(watch) = &watch {
                watch.settle();
            }
            match ran {
                Err(_) => Err(Stopped::TimedOut),
                Ok(Err(panic)) => Err(Stopped::Panicked(take_panic_message(panic))),
                Ok(Ok(result)) => Ok(result),
            }
        }
    }
}

/// Runs a synchronous body on the runtime's blocking pool, within
/// `timeout`, telling `record` how long it took.
async fn run_on_pool(
    cx: &RunContext,
    body: Box<dyn FnOnce() -> ToolResult + Send>,
    record: Option<Arc<PlacementRecord>>,
    timeout: Duration,
    watch: Option<Arc<CallWatch>>,
) -> Result<ToolResult, Stopped> {
    let redaction = cx.redaction().clone();
    let depth = KickoffDepth::current();
    let sequence = EventSequence::current();
    let call = CurrentCall::get();
    // Left behind (cancelled, or past its timeout), the body still runs
    // to its end: then its end is reported.
    let _left = watch.as_ref().map(|watch| Abandon(Arc::clone(watch), true));
    let thread = tokio::task::spawn_blocking(move || {
        let _scope = redaction.scope();
        let _depth = KickoffDepth::at(depth);
        let _sequence = EventSequence::enter(sequence);
        let run = || {
            placement::timed(record.as_deref(), PlacementRecord::ran_on_pool, || {
                contain_panic(AssertUnwindSafe(body))
            })
        };
        let ran = match call {
            Some(call) => call.run(run),
            None => run(),
        };
        if let Some(watch) = watch {
            watch.body_ended(&ran);
        }
        ran
    });
    // A synchronous tool cannot be stopped: past its timeout it finishes
    // on its thread, and its result is dropped.
    match tokio::time::timeout(timeout, thread).await {
        Err(_) => Err(Stopped::TimedOut),
        Ok(Err(join)) => {
            let message = format!("its thread stopped before it finished ({join})");
            if let Ok(panic) = join.try_into_panic() {
                hooks_core::runtime::drop_panic_payload(panic);
            }
            Err(Stopped::Panicked(message))
        }
        Ok(Ok(Err(panic))) => Err(Stopped::Panicked(take_panic_message(panic))),
        Ok(Ok(Ok(result))) => Ok(result),
    }
}

/// A duration as people write it: `30s`, `1.5s`, `250ms`, `2m`.
fn format_duration(duration: Duration) -> String {
    let millis = duration.as_millis();
    if millis < 1000 {
        format!("{millis}ms")
    } else if millis.is_multiple_of(60_000) {
        format!("{}m", millis / 60_000)
    } else if millis.is_multiple_of(1000) {
        format!("{}s", millis / 1000)
    } else {
        format!("{}s", duration.as_secs_f64())
    }
}
