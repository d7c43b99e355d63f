//! Running the chains: the hot path of every tool call.
//!
//! A dispatch with no hooks costs one relaxed atomic load per registry. With
//! hooks it loads each registry's snapshot (lock-free), looks the tool up in
//! the snapshot's filter index, and walks the candidate hooks of the global
//! and the crew-scoped chain merged by rank. Nothing on this path allocates
//! or locks unless an event listener or `tracing` subscriber wants an event.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Instant;

use crate::context::{RawToolResult, ToolCallHookContext};
use crate::events::{Event, HookDispatchedEvent, HookPanickedEvent};
use crate::hook::{FailureMode, HookEntry, HookFn};
use crate::outcome::{DispatchOutcome, HookAborted, PostDecision, PreDecision};
use crate::point::{InterceptionPoint, POST_TOOL_CALL, PRE_TOOL_CALL};
use crate::registry::{Chain, HookRegistry, global_registry};

/// The text the agent receives when a PRE hook blocks a call.
pub fn blocked_message(tool_name: &str) -> String {
    format!("Tool execution blocked by hook. Tool: {tool_name}")
}

/// How the observation of a failed tool call starts (rule 15).
pub const TOOL_ERROR_PREFIX: &str = "Error executing tool: ";

/// The text the agent receives when a fail-closed POST hook panics.
pub fn withheld_message(tool_name: &str) -> String {
    format!("Tool result withheld: a fail-closed hook failed. Tool: {tool_name}")
}

/// What a tool produced, ready for the POST chain.
#[derive(Debug, Clone)]
pub struct ToolOutput {
    /// The text the agent would see (before POST hooks).
    pub rendered: String,
    /// The tool's own value.
    pub raw: RawToolResult,
}

impl ToolOutput {
    /// A plain-text output.
    pub fn text(text: impl Into<String>) -> Self {
        let rendered = text.into();
        ToolOutput {
            raw: RawToolResult::text(rendered.clone()),
            rendered,
        }
    }

    /// The output of a tool that failed: `Error executing tool: <message>`.
    pub fn error(message: impl std::fmt::Display) -> Self {
        ToolOutput::text(format!("{TOOL_ERROR_PREFIX}{message}"))
    }
}

/// What one tool call came to after both chains.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCallReport {
    /// The final text the agent sees as the tool's observation.
    pub observation: String,
    /// The PRE hook's abort, when the call was blocked.
    pub blocked: Option<HookAborted>,
}

/// Runs tool calls through a global registry and, for a crew, the crew's own
/// hooks, merged into one order.
#[derive(Debug, Clone, Copy)]
pub struct Dispatcher<'a> {
    global: &'a HookRegistry,
    scoped: Option<&'a HookRegistry>,
}

impl Default for Dispatcher<'static> {
    fn default() -> Self {
        Dispatcher::new(global_registry())
    }
}

impl<'a> Dispatcher<'a> {
    /// Dispatches through `global` only.
    pub fn new(global: &'a HookRegistry) -> Self {
        Dispatcher {
            global,
            scoped: None,
        }
    }

    /// Adds a crew's own hooks: they run merged with the global chain by
    /// registration order, and only for calls dispatched here.
    pub fn with_scope(mut self, scoped: &'a HookRegistry) -> Self {
        self.scoped = Some(scoped);
        self
    }

    /// The global registry.
    pub fn global(&self) -> &'a HookRegistry {
        self.global
    }

    /// The crew-scoped registry, if any.
    pub fn scoped(&self) -> Option<&'a HookRegistry> {
        self.scoped
    }

    /// Runs the `PRE_TOOL_CALL` chain. On [`DispatchOutcome::Aborted`] the
    /// caller must not run the tool.
    #[inline]
    pub fn dispatch_pre(&self, ctx: &mut ToolCallHookContext) -> DispatchOutcome {
        self.dispatch(PRE_TOOL_CALL, ctx)
    }

    /// Runs the `POST_TOOL_CALL` chain. On [`DispatchOutcome::Aborted`] the
    /// caller must end the run with the abort.
    #[inline]
    pub fn dispatch_post(&self, ctx: &mut ToolCallHookContext) -> DispatchOutcome {
        self.dispatch(POST_TOOL_CALL, ctx)
    }

    /// Runs one whole tool call: the PRE chain, then `execute` unless a hook
    /// blocked it, then the POST chain (also for a blocked call, whose
    /// `tool_result` is the blocked message).
    ///
    /// Returns the agent's observation, or the abort of a POST hook, which
    /// ends the run.
    pub fn run_tool_call(
        &self,
        ctx: &mut ToolCallHookContext,
        execute: impl FnOnce(&mut ToolCallHookContext) -> ToolOutput,
    ) -> Result<ToolCallReport, HookAborted> {
        let blocked = match self.dispatch_pre(ctx) {
            DispatchOutcome::Aborted(abort) => {
                let message = blocked_message(&ctx.tool_name);
                ctx.raw_tool_result = Some(RawToolResult::text(message.clone()));
                ctx.tool_result = Some(message);
                Some(abort)
            }
            DispatchOutcome::Proceeded | DispatchOutcome::Modified => {
                let output = execute(ctx);
                ctx.tool_result = Some(output.rendered);
                ctx.raw_tool_result = Some(output.raw);
                None
            }
        };
        match self.dispatch_post(ctx) {
            DispatchOutcome::Aborted(abort) => Err(abort),
            DispatchOutcome::Proceeded | DispatchOutcome::Modified => Ok(ToolCallReport {
                observation: ctx.tool_result.clone().unwrap_or_default(),
                blocked,
            }),
        }
    }

    #[inline]
    fn dispatch(&self, point: InterceptionPoint, ctx: &mut ToolCallHookContext) -> DispatchOutcome {
        let scoped = self.scoped.filter(|s| s.has_hooks(point));
        if !self.global.has_hooks(point) && scoped.is_none() {
            return DispatchOutcome::Proceeded;
        }
        self.dispatch_slow(point, scoped, ctx)
    }

    #[inline(never)]
    fn dispatch_slow(
        &self,
        point: InterceptionPoint,
        scoped: Option<&HookRegistry>,
        ctx: &mut ToolCallHookContext,
    ) -> DispatchOutcome {
        let global_snapshot = self.global.snapshot();
        let global_chain = &global_snapshot.chains[point.index()];
        match scoped {
            // Most dispatches have no crew hooks: walk the one chain directly.
            None => {
                let candidates = global_chain.candidates(&ctx.tool_name);
                let hooks = candidates
                    .iter()
                    .filter_map(|&position| global_chain.entries.get(position as usize))
                    .map(|entry| &**entry);
                self.run_chain(point, hooks, ctx)
            }
            Some(scoped) => {
                let scoped_snapshot = scoped.snapshot();
                let scoped_chain = &scoped_snapshot.chains[point.index()];
                let hooks = MergedChain::new(global_chain, Some(scoped_chain), &ctx.tool_name);
                self.run_chain(point, hooks, ctx)
            }
        }
    }

    /// Runs `hooks` (the candidates for this tool, in order) and reports the
    /// dispatch to whoever listens.
    #[inline(always)]
    fn run_chain<'c>(
        &self,
        point: InterceptionPoint,
        hooks: impl Iterator<Item = &'c HookEntry>,
        ctx: &mut ToolCallHookContext,
    ) -> DispatchOutcome {
        let listening = self.global.events().has_listeners()
            // The crew's bus hears every dispatch of its calls, also when
            // the crew has no hooks of its own at this point.
            || self.scoped.is_some_and(|s| s.events().has_listeners())
            || tracing::enabled!(target: "hooks_core::dispatch", tracing::Level::DEBUG);
        let started = listening.then(Instant::now);

        let mut state = ChainState::default();
        for entry in hooks {
            // The role is a virtual call: ask for it only when a filter needs it.
            if !entry.info.agents.is_empty() && !entry.agent_matches(ctx.agent_role()) {
                continue;
            }
            state.hooks_run += 1;
            if run_one(point, entry, ctx, &mut state, self).is_break() {
                break;
            }
        }
        let hooks_run = state.hooks_run;
        let report = started.filter(|_| hooks_run > 0);
        match state.aborted {
            Some(abort) => {
                let outcome = DispatchOutcome::Aborted(abort);
                if let Some(started) = report {
                    self.report_dispatch(point, &outcome, hooks_run, started, ctx);
                }
                outcome
            }
            None => {
                // Returned by value, never borrowed: a borrowed outcome is built
                // on the stack and copied out whole, and reading back the
                // partly written value stalls the load on every dispatch.
                let outcome = if state.modified {
                    &DispatchOutcome::Modified
                } else {
                    &DispatchOutcome::Proceeded
                };
                if let Some(started) = report {
                    self.report_dispatch(point, outcome, hooks_run, started, ctx);
                }
                if state.modified {
                    DispatchOutcome::Modified
                } else {
                    DispatchOutcome::Proceeded
                }
            }
        }
    }

    /// Emits the [`HookDispatchedEvent`] of a dispatch someone listens to.
    /// Kept out of line so that the unobserved path keeps a small frame.
    #[cold]
    #[inline(never)]
    fn report_dispatch(
        &self,
        point: InterceptionPoint,
        outcome: &DispatchOutcome,
        hooks_run: usize,
        started: Instant,
        ctx: &ToolCallHookContext,
    ) {
        let event = HookDispatchedEvent::new(
            point,
            outcome,
            hooks_run,
            started.elapsed(),
            &ctx.tool_name,
            ctx.agent_role(),
        );
        tracing::debug!(
            target: "hooks_core::dispatch",
            point = %point,
            outcome = event.outcome,
            hooks_run = event.hooks_run,
            duration_ns = event.duration.as_nanos() as u64,
            tool = %event.tool_name,
            agent = event.agent_role.as_deref().unwrap_or(""),
            abort_reason = event.abort_reason.as_deref().unwrap_or(""),
            abort_source = event.abort_source.as_deref().unwrap_or(""),
            "hook chain dispatched"
        );
        self.emit(Event::HookDispatched(event));
    }

    /// Delivers an event to the global bus and, for a crew's dispatcher, to
    /// the crew's bus (also when the crew has no hooks of its own).
    fn emit(&self, event: Event) {
        self.global.events().emit(&event);
        if let Some(scoped) = self.scoped {
            scoped.events().emit(&event);
        }
    }
}

#[derive(Default)]
struct ChainState {
    hooks_run: usize,
    modified: bool,
    aborted: Option<HookAborted>,
}

/// Runs one hook with its panic contained; `Break` stops the chain.
fn run_one(
    point: InterceptionPoint,
    entry: &HookEntry,
    ctx: &mut ToolCallHookContext,
    state: &mut ChainState,
    dispatcher: &Dispatcher<'_>,
) -> std::ops::ControlFlow<()> {
    use std::ops::ControlFlow::{Break, Continue};
    let name = || entry.info.name.as_str();
    match &entry.call {
        HookFn::Pre(call) => match catch_unwind(AssertUnwindSafe(|| call(ctx))) {
            Ok(PreDecision::Proceed) => Continue(()),
            Ok(PreDecision::Block(mut abort)) => {
                if abort.source.is_empty() {
                    abort.source = name().to_owned();
                }
                state.aborted = Some(abort);
                Break(())
            }
            Err(panic) => {
                let closed = entry.info.failure == FailureMode::FailClosed;
                let message = report_panic(point, entry, ctx, &*panic, dispatcher);
                if closed {
                    state.aborted = Some(HookAborted::new(
                        format!("fail-closed hook panicked: {message}"),
                        name(),
                    ));
                    Break(())
                } else {
                    Continue(())
                }
            }
        },
        HookFn::Post(call) => match catch_unwind(AssertUnwindSafe(|| call(ctx))) {
            Ok(PostDecision::Keep) => Continue(()),
            Ok(PostDecision::Replace(text)) => {
                ctx.tool_result = Some(text);
                state.modified = true;
                Continue(())
            }
            Ok(PostDecision::Abort(mut abort)) => {
                if abort.source.is_empty() {
                    abort.source = name().to_owned();
                }
                state.aborted = Some(abort);
                Break(())
            }
            Err(panic) => {
                report_panic(point, entry, ctx, &*panic, dispatcher);
                if entry.info.failure == FailureMode::FailClosed {
                    ctx.tool_result = Some(withheld_message(&ctx.tool_name));
                    state.modified = true;
                }
                Continue(())
            }
        },
    }
}

/// The text of a panic payload (a `&str` or `String` message), as contained
/// panics of hooks are reported; tools run by a runtime can be reported the
/// same way.
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "a non-text panic payload".to_owned()
    }
}

#[cold]
fn report_panic(
    point: InterceptionPoint,
    entry: &HookEntry,
    ctx: &ToolCallHookContext,
    panic: &(dyn std::any::Any + Send),
    dispatcher: &Dispatcher<'_>,
) -> String {
    let message = panic_message(panic);
    let fail_closed = entry.info.failure == FailureMode::FailClosed;
    tracing::warn!(
        target: "hooks_core::dispatch",
        hook = %entry.info.name,
        point = %point,
        tool = %ctx.tool_name,
        fail_closed,
        "hook panicked: {message}; {}",
        if fail_closed {
            "fail-closed, so the call is refused"
        } else {
            "fail-open, so its effect is dropped"
        }
    );
    dispatcher.emit(Event::HookPanicked(HookPanickedEvent {
        point,
        hook: entry.info.name.clone(),
        message: message.clone(),
        fail_closed,
        tool_name: ctx.tool_name.clone(),
    }));
    message
}

/// Walks the candidate hooks of up to two chains in rank order.
struct MergedChain<'c> {
    first: (&'c [std::sync::Arc<HookEntry>], &'c [u32]),
    second: (&'c [std::sync::Arc<HookEntry>], &'c [u32]),
}

impl<'c> MergedChain<'c> {
    #[inline]
    fn new(first: &'c Chain, second: Option<&'c Chain>, tool: &str) -> Self {
        let part = |chain: &'c Chain| (&*chain.entries, chain.candidates(tool));
        MergedChain {
            first: part(first),
            second: second.map_or((&[][..], &[][..]), part),
        }
    }

    #[inline]
    fn peek(part: &(&'c [std::sync::Arc<HookEntry>], &'c [u32])) -> Option<&'c HookEntry> {
        let (&position, _) = part.1.split_first()?;
        part.0.get(position as usize).map(|entry| &**entry)
    }
}

impl<'c> Iterator for MergedChain<'c> {
    type Item = &'c HookEntry;

    #[inline]
    fn next(&mut self) -> Option<&'c HookEntry> {
        let take_first = match (Self::peek(&self.first), Self::peek(&self.second)) {
            (None, None) => return None,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(a), Some(b)) => a.rank <= b.rank,
        };
        let part = if take_first {
            &mut self.first
        } else {
            &mut self.second
        };
        let entry = Self::peek(part);
        part.1 = &part.1[1..];
        entry
    }
}

impl HookRegistry {
    /// A dispatcher over this registry alone.
    pub fn dispatcher(&self) -> Dispatcher<'_> {
        Dispatcher::new(self)
    }

    /// Runs this registry's `PRE_TOOL_CALL` chain.
    pub fn dispatch_pre(&self, ctx: &mut ToolCallHookContext) -> DispatchOutcome {
        self.dispatcher().dispatch_pre(ctx)
    }

    /// Runs this registry's `POST_TOOL_CALL` chain.
    pub fn dispatch_post(&self, ctx: &mut ToolCallHookContext) -> DispatchOutcome {
        self.dispatcher().dispatch_post(ctx)
    }

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
