//! One tool call through both chains, written once: the PRE chain (and,
//! for arguments a person edited when approving, the PRE chain again on
//! exactly those), the tool unless a hook blocked the call, then the POST
//! chain. [`CallHooks::run_tool_call_async_keeping`] awaits `async` hooks
//! and the tool; [`CallHooks::run_tool_call`] is the same sequence driven
//! inline, for a synchronous caller: its steps are all ready at once, so
//! it completes in one poll.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use crate::ChainGate;
use crate::context::{RawToolResult, ToolCallHookContext, ToolCallStatus};
use crate::dispatch::{CallHooks, Dispatcher, TOOL_CALL_POINTS};
use crate::observation::{blocked_message, blocked_message_with_reason};
use crate::outcome::{DispatchOutcome, HookAborted};
use crate::point::Point;
use crate::point::points::{PostToolCall, PreToolCall};
use crate::registry::HookRegistry;

/// How the observation of a failed tool call starts (rule 15).
///
/// ```
/// use hooks_core::runtime::{ToolOutput, TOOL_ERROR_PREFIX};
///
/// let failed = ToolOutput::error("disk full");
/// assert_eq!(failed.rendered.strip_prefix(TOOL_ERROR_PREFIX), Some("disk full"));
/// ```
pub const TOOL_ERROR_PREFIX: &str = "Error executing tool: ";

/// What a tool produced, ready for the POST chain.
///
/// ```
/// use hooks_core::runtime::ToolOutput;
/// use hooks_core::ToolCallStatus;
///
/// // What a runtime's tool call produced, for the POST chain.
/// let ran = ToolOutput::text("42");
/// assert_eq!((ran.rendered.as_str(), &ran.status), ("42", &ToolCallStatus::Ran));
/// assert_eq!(ran.raw.as_str(), Some("42"));
///
/// let failed = ToolOutput::error("timeout");
/// assert_eq!(failed.rendered, "Error executing tool: timeout");
/// assert!(matches!(failed.status, ToolCallStatus::Failed { ref error } if error == "timeout"));
///
/// assert_eq!(ToolOutput::not_found("no tool named `serch`").status, ToolCallStatus::NotFound);
/// ```
#[derive(Debug, Clone)]
pub struct ToolOutput {
    /// The text the agent would see (before POST hooks).
    pub rendered: String,
    /// The tool's own value.
    pub raw: RawToolResult,
    /// What happened: the tool ran, failed, or was not found.
    pub status: ToolCallStatus,
}

impl ToolOutput {
    /// A plain-text output of a tool that ran.
    pub fn text(text: impl Into<String>) -> Self {
        let rendered = text.into();
        ToolOutput {
            raw: RawToolResult::text(rendered.clone()),
            rendered,
            status: ToolCallStatus::Ran,
        }
    }

    /// The output of a tool that failed: `Error executing tool: <message>`.
    pub fn error(message: impl std::fmt::Display) -> Self {
        let error = message.to_string();
        ToolOutput {
            status: ToolCallStatus::Failed {
                error: error.clone(),
            },
            ..ToolOutput::text(format!("{TOOL_ERROR_PREFIX}{error}"))
        }
    }

    /// The output of a call that named no tool the agent has.
    pub fn not_found(message: impl Into<String>) -> Self {
        ToolOutput {
            status: ToolCallStatus::NotFound,
            ..ToolOutput::text(message)
        }
    }
}

/// What one tool call came to after both chains.
///
/// ```
/// use hooks_core::runtime::ToolOutput;
/// use hooks_core::{HookAborted, HookOptions, HookRegistry, ToolCallHookContext, PRE_TOOL_CALL};
///
/// let registry = HookRegistry::new();
/// registry.register_hook_with(
///     PRE_TOOL_CALL,
///     HookOptions::new().tools(["shell"]),
///     |_: &mut ToolCallHookContext| -> Result<(), HookAborted> { Err(HookAborted::new("no shell", "sandbox")) },
/// )?;
///
/// let mut ctx = ToolCallHookContext::new("echo", Default::default());
/// let ran = registry.run_tool_call(&mut ctx, |_| ToolOutput::text("hi"))?;
/// assert_eq!((ran.observation.as_str(), ran.blocked), ("hi", None));
///
/// let mut ctx = ToolCallHookContext::new("shell", Default::default());
/// let blocked = registry.run_tool_call(&mut ctx, |_| unreachable!("blocked"))?;
/// assert_eq!(blocked.blocked.map(|abort| abort.source), Some("sandbox".to_owned()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCallReport {
    /// The final text the agent sees as the tool's observation.
    pub observation: String,
    /// The PRE hook's abort, when the call was blocked.
    pub blocked: Option<HookAborted>,
}

/// How a tool call walks its chains: inline on this thread, or awaiting
/// its `async` hooks. The sequence of a call ([`tool_call`]) is written
/// once over it.
trait Walker {
    /// Runs `P`'s chain on `ctx`.
    fn walk<P: Point>(
        &self,
        point: P,
        ctx: &mut P::Context,
    ) -> impl Future<Output = DispatchOutcome>;

    /// Runs the PRE chain on `ctx` from `gate` (see
    /// [`CallHooks::dispatch_pre_from`]).
    fn walk_pre_from(
        &self,
        ctx: &mut ToolCallHookContext,
        gate: ChainGate,
    ) -> impl Future<Output = DispatchOutcome>;

    /// The tool is still running: keep the snapshots counted (see
    /// [`CallHooks::hold`]).
    fn hold(&mut self);
}

/// Every hook driven to its end on this thread (see
/// [`CallHooks::dispatch`]): each step is ready when first polled.
struct Inline<'h, 'a>(&'h CallHooks<'a>);

impl Walker for Inline<'_, '_> {
    #[inline(always)]
    fn walk<P: Point>(
        &self,
        point: P,
        ctx: &mut P::Context,
    ) -> impl Future<Output = DispatchOutcome> {
        std::future::ready(self.0.dispatch(point, ctx))
    }

    // A resumed call: its `async` hooks awaited, which the caller drives to
    // their end on this thread (see `CallHooks::run_tool_call`).
    fn walk_pre_from(
        &self,
        ctx: &mut ToolCallHookContext,
        gate: ChainGate,
    ) -> impl Future<Output = DispatchOutcome> {
        self.0.dispatch_pre_from(ctx, gate)
    }

    fn hold(&mut self) {}
}

/// `async` hooks awaited (see [`CallHooks::dispatch_async`]).
struct Awaiting<'h, 'a>(&'h mut CallHooks<'a>);

impl Walker for Awaiting<'_, '_> {
    #[inline(always)]
    fn walk<P: Point>(
        &self,
        point: P,
        ctx: &mut P::Context,
    ) -> impl Future<Output = DispatchOutcome> {
        self.0.dispatch_async(point, ctx)
    }

    fn walk_pre_from(
        &self,
        ctx: &mut ToolCallHookContext,
        gate: ChainGate,
    ) -> impl Future<Output = DispatchOutcome> {
        self.0.dispatch_pre_from(ctx, gate)
    }

    fn hold(&mut self) {
        self.0.hold();
    }
}

/// One tool call: the PRE chain, the approved edit's second round, the
/// tool (`execute`) unless a hook blocked the call, the POST chain. Gives
/// the report beside `execute`'s value (absent for a blocked call).
async fn tool_call<W, F, Fut, T>(
    walker: &mut W,
    ctx: &mut ToolCallHookContext,
    execute: F,
) -> (Result<ToolCallReport, HookAborted>, Option<T>)
where
    W: Walker,
    F: FnOnce(&mut ToolCallHookContext) -> Fut,
    Fut: Future<Output = (ToolOutput, T)>,
{
    let mut kept = None;
    // A resumed call starts where it asked a person before (see
    // `ToolCallHookContext::resume_chain_at`).
    let mut pre = match ctx.take_chain_start() {
        None => walker.walk(PreToolCall, ctx).await,
        Some(gate) => walker.walk_pre_from(ctx, gate).await,
    };
    if !matches!(pre, DispatchOutcome::Aborted(_))
        && let Some(approved) = ctx.approved_edit_to_recheck()
    {
        pre = recheck_approved_edit(walker, ctx, approved).await;
    }
    let blocked = match pre {
        DispatchOutcome::Aborted(abort) => {
            block(ctx, &abort);
            ctx.settle_approvals();
            Some(abort)
        }
        DispatchOutcome::Proceeded | DispatchOutcome::Modified => {
            let mut running = pin!(execute(ctx));
            // A tool that answers at once keeps the borrowed snapshot;
            // one that waits holds it counted (see `hold`).
            let (output, value) =
                match std::future::poll_fn(|cx| Poll::Ready(running.as_mut().poll(cx))).await {
                    Poll::Ready(ran) => ran,
                    Poll::Pending => {
                        walker.hold();
                        running.await
                    }
                };
            record(ctx, output);
            ctx.settle_approvals();
            kept = Some(value);
            None
        }
    };
    let report = match walker.walk(PostToolCall, ctx).await {
        DispatchOutcome::Aborted(abort) => Err(abort),
        DispatchOutcome::Proceeded | DispatchOutcome::Modified => Ok(ToolCallReport {
            observation: ctx.tool_result.clone().unwrap_or_default(),
            blocked,
        }),
    };
    (report, kept)
}

/// The second round of a call whose arguments a person edited when
/// approving it: the whole PRE chain again, on exactly the approved
/// arguments, so that the edit cannot carry the call past a guard that
/// ran before the question. An ask on this round about the same
/// arguments is answered at once (see `request_approval`); a guard
/// that changes them refuses the edit.
async fn recheck_approved_edit<W: Walker>(
    walker: &W,
    ctx: &mut ToolCallHookContext,
    approved: serde_json::Map<String, serde_json::Value>,
) -> DispatchOutcome {
    let input = begin_recheck(ctx, approved);
    let outcome = walker.walk(PreToolCall, ctx).await;
    end_recheck(ctx, outcome, &input)
}

/// Puts the approved arguments in place for the second round; returns
/// them.
fn begin_recheck(
    ctx: &mut ToolCallHookContext,
    approved: serde_json::Map<String, serde_json::Value>,
) -> serde_json::Map<String, serde_json::Value> {
    ctx.tool_input = approved.clone();
    ctx.set_recheck(true);
    approved
}

/// What the second round decided: its abort, or a refusal when a guard
/// changed the approved arguments (or a person edited them again).
fn end_recheck(
    ctx: &mut ToolCallHookContext,
    outcome: DispatchOutcome,
    approved: &serde_json::Map<String, serde_json::Value>,
) -> DispatchOutcome {
    ctx.set_recheck(false);
    // Answers given on this round count as checked: one round only.
    let edited_again = ctx.approved_edit_to_recheck().is_some();
    match outcome {
        DispatchOutcome::Aborted(abort) => DispatchOutcome::Aborted(abort),
        _ if edited_again || ctx.tool_input != *approved => {
            DispatchOutcome::Aborted(HookAborted::new(
                "a guard changed the arguments the approver approved: the edit is refused \
                 (an approved call runs with exactly what was approved)",
                crate::APPROVAL_RECHECK_SOURCE,
            ))
        }
        other => other,
    }
}

fn block(ctx: &mut ToolCallHookContext, abort: &HookAborted) {
    let message = if abort.tells_model() || ctx.block_reasons_shown() {
        blocked_message_with_reason(ctx.tool_name(), &abort.reason)
    } else {
        blocked_message(ctx.tool_name())
    };
    ctx.raw_tool_result = Some(RawToolResult::text(message.clone()));
    ctx.tool_result = Some(message);
    ctx.set_status(ToolCallStatus::Blocked(abort.clone()));
}

fn record(ctx: &mut ToolCallHookContext, output: ToolOutput) {
    ctx.tool_result = Some(output.rendered);
    ctx.raw_tool_result = Some(output.raw);
    ctx.set_status(output.status);
}

impl<'a> CallHooks<'a> {
    /// Runs one whole tool call, awaiting the tool and any `async` hook:
    /// the PRE chain, then the future `execute` returns unless a hook
    /// blocked the call, then the POST chain (also for a blocked call).
    /// `execute` reads what it needs of the context (the input the PRE
    /// chain left) and returns a future that does not borrow it.
    ///
    /// Returns the agent's observation, or the abort of a POST hook.
    pub async fn run_tool_call_async<F, Fut>(
        &mut self,
        ctx: &mut ToolCallHookContext,
        execute: F,
    ) -> Result<ToolCallReport, HookAborted>
    where
        F: FnOnce(&mut ToolCallHookContext) -> Fut,
        Fut: Future<Output = ToolOutput>,
    {
        let (report, _) = self
            .run_tool_call_async_keeping(ctx, |ctx| {
                let running = execute(ctx);
                async move { (running.await, ()) }
            })
            .await;
        report
    }

    /// The tail of a tool call whose PRE chain ran earlier (in another
    /// process, say, before a crash): `output` recorded as the tool's, then
    /// the POST chain, which sees it as after any call. What a durable
    /// runtime uses to finish a call it ran again, or whose effect it found
    /// already done, without asking the PRE chain (and a person) again.
    ///
    /// ```
    /// use hooks_core::runtime::{TOOL_CALL_POINTS, ToolOutput};
    /// use hooks_core::{HookRegistry, ToolCallHookContext};
    ///
    /// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
    /// let registry = HookRegistry::new();
    /// let mut ctx = ToolCallHookContext::new("refund", serde_json::Map::new());
    /// let report = registry
    ///     .dispatcher()
    ///     .begin_call(&TOOL_CALL_POINTS)
    ///     .finish_tool_call_async(&mut ctx, ToolOutput::text("refunded"))
    ///     .await?;
    /// assert_eq!(report.observation, "refunded");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn finish_tool_call_async(
        &mut self,
        ctx: &mut ToolCallHookContext,
        output: ToolOutput,
    ) -> Result<ToolCallReport, HookAborted> {
        record(ctx, output);
        match Awaiting(self).walk(PostToolCall, ctx).await {
            DispatchOutcome::Aborted(abort) => Err(abort),
            DispatchOutcome::Proceeded | DispatchOutcome::Modified => Ok(ToolCallReport {
                observation: ctx.tool_result.clone().unwrap_or_default(),
                blocked: None,
            }),
        }
    }

    /// [`run_tool_call_async`](Self::run_tool_call_async) for a runtime
    /// that learns more of the tool's run than its output (how long it
    /// ran, how it failed): `execute`'s future gives the output and that
    /// value, which comes back beside the report, or `None` when a PRE
    /// hook blocked the call and the tool never ran. The value is there
    /// whatever the POST chain does, an abort included.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use hooks_core::runtime::{TOOL_CALL_POINTS, ToolOutput};
    /// use hooks_core::{HookRegistry, ToolCallHookContext};
    ///
    /// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
    /// let registry = HookRegistry::new();
    /// let mut ctx = ToolCallHookContext::new("search", serde_json::Map::new());
    /// let (report, took) = registry
    ///     .dispatcher()
    ///     .begin_call(&TOOL_CALL_POINTS)
    ///     .run_tool_call_async_keeping(&mut ctx, |_| async {
    ///         let started = Instant::now();
    ///         let output = ToolOutput::text("3 results");
    ///         (output, started.elapsed())
    ///     })
    ///     .await;
    /// assert_eq!(report?.observation, "3 results");
    /// assert!(took.is_some_and(|took| took < Duration::from_secs(60)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn run_tool_call_async_keeping<F, Fut, T>(
        &mut self,
        ctx: &mut ToolCallHookContext,
        execute: F,
    ) -> (Result<ToolCallReport, HookAborted>, Option<T>)
    where
        F: FnOnce(&mut ToolCallHookContext) -> Fut,
        Fut: Future<Output = (ToolOutput, T)>,
    {
        tool_call(&mut Awaiting(self), ctx, execute).await
    }

    /// Runs one whole tool call (see [`Dispatcher::run_tool_call`]) on this
    /// snapshot.
    ///
    /// The same sequence as [`run_tool_call_async`](Self::run_tool_call_async),
    /// driven inline: an `async` hook met here is driven to its end on this
    /// thread, as [`dispatch`](Self::dispatch) drives it.
    pub fn run_tool_call(
        &self,
        ctx: &mut ToolCallHookContext,
        execute: impl FnOnce(&mut ToolCallHookContext) -> ToolOutput,
    ) -> Result<ToolCallReport, HookAborted> {
        let mut walker = Inline(self);
        let mut call = pin!(tool_call(&mut walker, ctx, |ctx| {
            std::future::ready((execute(ctx), ()))
        }));
        // Every step is ready at once, so one poll ends the call; should a
        // step ever wait, it is driven to its end here all the same.
        let (report, _) = match call.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(done) => done,
            Poll::Pending => futures_executor::block_on(call),
        };
        report
    }
}

impl Dispatcher<'_> {
    /// Runs one whole tool call on one snapshot: the PRE chain, then
    /// `execute` unless a hook blocked it, then the POST chain (also for a
    /// blocked call, whose `tool_result` is the blocked message).
    ///
    /// Returns the agent's observation, or the abort of a POST hook, which
    /// ends the run.
    pub fn run_tool_call(
        &self,
        ctx: &mut ToolCallHookContext,
        execute: impl FnOnce(&mut ToolCallHookContext) -> ToolOutput,
    ) -> Result<ToolCallReport, HookAborted> {
        self.begin_call(&TOOL_CALL_POINTS)
            .run_tool_call(ctx, execute)
    }
}

impl HookRegistry {
    /// Runs one whole tool call through this registry (see
    /// [`Dispatcher::run_tool_call`]).
    pub fn run_tool_call(
        &self,
        ctx: &mut ToolCallHookContext,
        execute: impl FnOnce(&mut ToolCallHookContext) -> ToolOutput,
    ) -> Result<ToolCallReport, HookAborted> {
        self.dispatcher().run_tool_call(ctx, execute)
    }
}
