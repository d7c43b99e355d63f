//! A call left behind: dropped while its tool ran (the kickoff was
//! cancelled) or past its timeout while a synchronous body still runs on
//! the blocking pool. Its end is reported once, as `ToolUsageAbandoned`,
//! when someone listened as the call started.

use std::sync::Arc;

use hooks_core::Event;
use hooks_core::events::{EventMeta, ToolUsageAbandonedEvent};
use hooks_core::runtime::ToolOutput;

use crate::run::CrewHooks;
use crate::tool::ToolResult;

/// Where one watched tool call is: running, settled (its result reached
/// the call, or its end was already reported), or left behind.
enum CallState {
    Running,
    Settled,
    Abandoned,
}

/// What reports a tool call left behind ([`ToolUsageAbandonedEvent`]):
/// made only when someone listens when the call starts.
pub(super) struct CallWatch {
    state: std::sync::Mutex<CallState>,
    hooks: CrewHooks,
    event: ToolUsageAbandonedEvent,
}

impl CallWatch {
    /// A running call, whose end, should it be left behind, is `event`.
    pub(super) fn new(hooks: CrewHooks, event: ToolUsageAbandonedEvent) -> Self {
        CallWatch {
            state: std::sync::Mutex::new(CallState::Running),
            hooks,
            event,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, CallState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The call has its result, or its failure is reported already.
    pub(super) fn settle(&self) {
        *self.state() = CallState::Settled;
    }

    /// The call was left behind while the tool ran: an async tool stops
    /// here; a synchronous one, `on_pool`, reports when its body ends (see
    /// `body_ended`).
    fn abandon(&self, on_pool: bool) {
        let mut state = self.state();
        if let CallState::Running = *state {
            *state = CallState::Abandoned;
            drop(state);
            if !on_pool {
                self.report(false, None);
            }
        }
    }

    /// A synchronous body ended on the pool with `ran`.
    pub(super) fn body_ended(&self, ran: &std::thread::Result<ToolResult>) {
        let mut state = self.state();
        match *state {
            CallState::Abandoned => {
                drop(state);
                let result = match ran {
                    Ok(Ok(output)) => output.rendered.clone(),
                    Ok(Err(failure)) => ToolOutput::error(failure).rendered,
                    Err(_) => ToolOutput::error("the tool panicked").rendered,
                };
                self.report(true, Some(result));
            }
            _ => *state = CallState::Settled,
        }
    }

    fn report(&self, completed: bool, result: Option<String>) {
        let mut event = self.event.clone();
        event.meta = EventMeta::new()
            .with_parent(event.meta.parent_event_id)
            .with_started(event.meta.started_event_id);
        event.completed = completed;
        event.result = result;
        self.hooks.emit(Event::ToolUsageAbandoned(event));
    }
}

/// Marks a watched call left behind when dropped before it settled; the
/// flag says whether its body runs on the blocking pool.
pub(super) struct Abandon(pub(super) Arc<CallWatch>, pub(super) bool);

impl Drop for Abandon {
    fn drop(&mut self) {
        self.0.abandon(self.1);
    }
}
