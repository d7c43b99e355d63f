//! Telemetry: the events hooks and tool calls emit, and the bus that carries
//! them to listeners.
//!
//! Emitting costs one atomic load when no one listens: events are only built
//! when a listener is attached (or `tracing` wants them).

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use arc_swap::ArcSwap;

use crate::outcome::DispatchOutcome;
use crate::point::InterceptionPoint;

/// One dispatch of a hook chain in which at least one hook ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookDispatchedEvent {
    /// The point dispatched.
    pub point: InterceptionPoint,
    /// `proceeded`, `modified` or `aborted` (see [`DispatchOutcome::as_str`]).
    pub outcome: &'static str,
    /// How many hooks ran.
    pub hooks_run: usize,
    /// How long the chain took.
    pub duration: Duration,
    /// The abort's reason, when aborted.
    pub abort_reason: Option<String>,
    /// The abort's source (the hook's name where none was given).
    pub abort_source: Option<String>,
    /// The normalized tool name, at the tool-call points.
    pub tool_name: Option<Arc<str>>,
    /// The agent's role, where the point has an agent.
    pub agent_role: Option<Arc<str>>,
}

impl HookDispatchedEvent {
    pub(crate) fn new(
        point: InterceptionPoint,
        outcome: &DispatchOutcome,
        hooks_run: usize,
        duration: Duration,
        tool_name: Option<Arc<str>>,
        agent_role: Option<Arc<str>>,
    ) -> Self {
        let abort = outcome.aborted();
        HookDispatchedEvent {
            point,
            outcome: outcome.as_str(),
            hooks_run,
            duration,
            abort_reason: abort.map(|a| a.reason.clone()),
            abort_source: abort.map(|a| a.source.clone()),
            tool_name,
            agent_role,
        }
    }
}

/// A hook panicked; the panic was contained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookPanickedEvent {
    /// The point the hook ran at.
    pub point: InterceptionPoint,
    /// The hook's name.
    pub hook: String,
    /// The panic message.
    pub message: String,
    /// Whether the hook was fail-closed (the call was blocked or the result
    /// withheld) or fail-open (its effect was dropped).
    pub fail_closed: bool,
    /// The normalized tool name, at the tool-call points.
    pub tool_name: Option<String>,
}

/// A tool call is about to run (after the PRE chain let it through).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolUsageStartedEvent {
    /// The normalized tool name.
    pub tool_name: String,
    /// The arguments the tool receives.
    pub tool_input: serde_json::Value,
    /// The agent's role.
    pub agent_role: Option<String>,
    /// The task's description.
    pub task: Option<String>,
    /// The crew's name.
    pub crew: Option<String>,
}

/// A tool call finished; `result` is the text the agent sees (after POST
/// hooks, so redactions hold here too).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolUsageFinishedEvent {
    /// The normalized tool name.
    pub tool_name: String,
    /// The agent-facing result.
    pub result: String,
    /// Whether a PRE hook blocked the call.
    pub blocked: bool,
    /// How long the tool itself ran (zero when blocked).
    pub duration: Duration,
    /// The agent's role.
    pub agent_role: Option<String>,
    /// The task's description.
    pub task: Option<String>,
    /// The crew's name.
    pub crew: Option<String>,
}

/// A tool call failed: the tool returned an error or panicked, the tool was
/// unknown, or its arguments were malformed.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolUsageErrorEvent {
    /// The tool name as normalized (the model's spelling when unknown).
    pub tool_name: String,
    /// What went wrong.
    pub error: String,
    /// The agent's role.
    pub agent_role: Option<String>,
    /// The task's description.
    pub task: Option<String>,
    /// The crew's name.
    pub crew: Option<String>,
}

/// Everything that travels on an [`EventBus`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Event {
    /// A hook chain ran.
    HookDispatched(HookDispatchedEvent),
    /// A hook panicked.
    HookPanicked(HookPanickedEvent),
    /// A tool started.
    ToolUsageStarted(ToolUsageStartedEvent),
    /// A tool finished.
    ToolUsageFinished(ToolUsageFinishedEvent),
    /// A tool call failed.
    ToolUsageError(ToolUsageErrorEvent),
}

/// Identifies one listener on a bus.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ListenerId(u64);

type Listener = Arc<dyn Fn(&Event) + Send + Sync>;

/// Delivers events to listeners, synchronously, on the emitting thread.
///
/// Listeners are kept in a lock-free snapshot: emitting takes no lock, and a
/// listener may subscribe or unsubscribe listeners from inside a callback. A
/// panicking listener is contained and reported through `tracing`.
pub struct EventBus {
    listeners: ArcSwap<Vec<(ListenerId, Listener)>>,
    count: AtomicUsize,
    write: Mutex<()>,
}

static NEXT_LISTENER: AtomicU64 = AtomicU64::new(1);

impl EventBus {
    /// A bus with no listeners.
    pub fn new() -> Self {
        EventBus {
            listeners: ArcSwap::from_pointee(Vec::new()),
            count: AtomicUsize::new(0),
            write: Mutex::new(()),
        }
    }

    /// Adds a listener; it receives every event emitted from now on.
    pub fn subscribe(&self, listener: impl Fn(&Event) + Send + Sync + 'static) -> ListenerId {
        let id = ListenerId(NEXT_LISTENER.fetch_add(1, Ordering::Relaxed));
        self.update(|list| list.push((id, Arc::new(listener))));
        id
    }

    /// Removes a listener; returns whether it was there.
    pub fn unsubscribe(&self, id: ListenerId) -> bool {
        self.update(|list| {
            let before = list.len();
            list.retain(|(other, _)| *other != id);
            before != list.len()
        })
    }

    /// Removes every listener; returns how many there were.
    pub fn clear(&self) -> usize {
        self.update(|list| std::mem::take(list).len())
    }

    /// Whether anyone listens. One relaxed atomic load.
    #[inline]
    pub fn has_listeners(&self) -> bool {
        self.count.load(Ordering::Relaxed) != 0
    }

    /// Delivers `event` to every listener.
    pub fn emit(&self, event: &Event) {
        if !self.has_listeners() {
            return;
        }
        let listeners = self.listeners.load();
        for (_, listener) in listeners.iter() {
            if catch_unwind(AssertUnwindSafe(|| listener(event))).is_err() {
                tracing::warn!(target: "hooks_core::events", "an event listener panicked; the panic was contained");
            }
        }
    }

    pub(crate) fn listeners_snapshot(&self) -> Arc<Vec<(ListenerId, Listener)>> {
        self.listeners.load_full()
    }

    /// Puts back a saved list of listeners; returns the list it replaces,
    /// for the caller to drop once its own locks are released.
    pub(crate) fn restore_listeners(
        &self,
        saved: Arc<Vec<(ListenerId, Listener)>>,
    ) -> Arc<Vec<(ListenerId, Listener)>> {
        let _write = self.write.lock().unwrap_or_else(PoisonError::into_inner);
        self.count.store(saved.len(), Ordering::Relaxed);
        self.listeners.swap(saved)
    }

    fn update<T>(&self, change: impl FnOnce(&mut Vec<(ListenerId, Listener)>) -> T) -> T {
        let (result, old) = {
            // The lock only orders writers; it guards no data a panic could
            // leave half-changed, so poisoning is ignored.
            let _write = self.write.lock().unwrap_or_else(PoisonError::into_inner);
            let mut list = Vec::clone(&self.listeners.load());
            let result = change(&mut list);
            self.count.store(list.len(), Ordering::Relaxed);
            (result, self.listeners.swap(Arc::new(list)))
        };
        // A removed listener's captured state is dropped here, outside the
        // lock: its `Drop` may subscribe or unsubscribe without deadlock.
        drop(old);
        result
    }
}

impl Default for EventBus {
    fn default() -> Self {
        EventBus::new()
    }
}

impl fmt::Debug for EventBus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventBus")
            .field("listeners", &self.count.load(Ordering::Relaxed))
            .finish()
    }
}
