//! What every event carries besides its payload, with the reference's
//! field names: an id, a wall-clock time, a sequence number per kickoff,
//! the id of the event that opened its scope and, on an end, of the
//! event that started it.

use std::cell::Cell;
use std::fmt;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

use uuid::Uuid;

/// Identifies one event: a UUID (version 4 in form), printed as one.
///
/// Ids are unique in a process (a counter under a random prefix drawn
/// once per process), so making one costs an atomic add, not a draw from
/// the system's randomness.
///
/// ```
/// use hooks_core::events::EventId;
///
/// let (first, second) = (EventId::new(), EventId::new());
/// assert_ne!(first, second);
/// let printed = first.to_string();
/// assert_eq!(printed.len(), 36);
/// assert_eq!(printed.parse::<EventId>()?, first);
/// # Ok::<(), hooks_core::events::EventIdError>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EventId(Uuid);

static PREFIX: OnceLock<u128> = OnceLock::new();
static NEXT_EVENT: AtomicU64 = AtomicU64::new(1);

impl EventId {
    /// A new id, unique in this process and unlikely to meet one of
    /// another process.
    pub fn new() -> EventId {
        let prefix = *PREFIX.get_or_init(|| Uuid::new_v4().as_u128());
        // Below bit 62: the version and variant bits stay as drawn.
        let count = NEXT_EVENT.fetch_add(1, Ordering::Relaxed) & ((1 << 62) - 1);
        EventId(Uuid::from_u128(prefix ^ u128::from(count)))
    }

    /// The id as a [`Uuid`].
    ///
    /// ```
    /// use hooks_core::events::EventId;
    /// assert_eq!(EventId::new().as_uuid().get_version_num(), 4);
    /// ```
    pub fn as_uuid(&self) -> Uuid {
        self.0
    }
}

impl Default for EventId {
    fn default() -> Self {
        EventId::new()
    }
}

impl From<Uuid> for EventId {
    fn from(id: Uuid) -> Self {
        EventId(id)
    }
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0.hyphenated(), f)
    }
}

impl fmt::Debug for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EventId({self})")
    }
}

/// A text that is not an event id (a UUID).
///
/// ```
/// use hooks_core::events::EventId;
/// assert!("not an id".parse::<EventId>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` is not an event id (a UUID such as 67e55044-10b1-426f-9247-bb680e5fe0c8)")]
pub struct EventIdError {
    text: String,
}

impl std::str::FromStr for EventId {
    type Err = EventIdError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Uuid::parse_str(text)
            .map(EventId)
            .map_err(|_| EventIdError {
                text: text.chars().take(80).collect(),
            })
    }
}

/// The wall clock when the process made its first event, and the
/// monotonic reading then.
struct Anchor {
    wall: SystemTime,
    at: quanta::Instant,
}

static ANCHOR: OnceLock<Anchor> = OnceLock::new();

/// The wall-clock time of the monotonic reading `at`: the wall clock at
/// the process's first event plus the monotonic time since. Reading the
/// fast monotonic clock costs a third of reading the system's wall clock,
/// and the times never go back, even when the system clock is set back.
fn wall_clock(at: quanta::Instant) -> SystemTime {
    let anchor = ANCHOR.get_or_init(|| Anchor {
        wall: SystemTime::now(),
        at: quanta::Instant::now(),
    });
    anchor.wall + at.saturating_duration_since(anchor.at)
}

/// What every event carries besides its payload: its id, when it was
/// sent, its place in its kickoff's order, and its links to other events
/// (the reference's field names).
///
/// A runtime makes one per event with [`EventMeta::new`] and links it;
/// an event sent inside a kickoff takes the kickoff's next sequence number
/// (see [`EventSequence`]).
///
/// ```
/// use hooks_core::events::EventMeta;
///
/// let started = EventMeta::new();
/// let ended = EventMeta::new().with_parent(started.parent_event_id).with_started(Some(started.event_id));
/// assert_eq!(ended.started_event_id, Some(started.event_id));
/// assert!(ended.timestamp >= started.timestamp);
/// // Outside a kickoff there is no sequence.
/// assert_eq!(ended.emission_sequence, None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct EventMeta {
    /// The event's own id.
    pub event_id: EventId,
    /// When the event was made: the wall clock, read as the system's wall
    /// clock at the process's first event plus the monotonic time since (so
    /// times within a process never go back).
    pub timestamp: SystemTime,
    /// Its place among the events of its kickoff, from 1: orders events
    /// whose timestamps tie. `None` outside a kickoff.
    pub emission_sequence: Option<u64>,
    /// The event that opened the scope it belongs to: a task's events name
    /// its kickoff's start, a model call's its agent execution's start, a
    /// nested kickoff's start the tool call it runs in.
    pub parent_event_id: Option<EventId>,
    /// On an end (`…Completed`, `…Failed`, `…Error`, `ToolUsageFinished`):
    /// the event that started it.
    pub started_event_id: Option<EventId>,
}

impl EventMeta {
    /// A new id, the time now, and the next sequence number of the
    /// kickoff in scope (see [`EventSequence`]); no links.
    ///
    /// ```
    /// use hooks_core::events::EventMeta;
    /// let meta = EventMeta::new();
    /// assert_eq!((meta.parent_event_id, meta.started_event_id), (None, None));
    /// ```
    pub fn new() -> EventMeta {
        EventMeta::at(quanta::Instant::now())
    }

    /// [`EventMeta::new`] for an event made at `at` (a dispatch's event
    /// reuses the reading that timed its chain).
    pub(crate) fn at(at: quanta::Instant) -> EventMeta {
        EventMeta {
            event_id: EventId::new(),
            timestamp: wall_clock(at),
            emission_sequence: EventSequence::next_in_scope(),
            parent_event_id: None,
            started_event_id: None,
        }
    }

    /// With `id` as its id: for an event whose id was handed out before it
    /// was sent (a start its scope's events already name).
    ///
    /// ```
    /// use hooks_core::events::{EventId, EventMeta};
    /// let id = EventId::new();
    /// assert_eq!(EventMeta::new().with_event_id(id).event_id, id);
    /// ```
    pub fn with_event_id(mut self, id: EventId) -> EventMeta {
        self.event_id = id;
        self
    }

    /// With `parent` as the event that opened its scope.
    ///
    /// ```
    /// use hooks_core::events::{EventId, EventMeta};
    /// let kickoff = EventId::new();
    /// assert_eq!(EventMeta::new().with_parent(Some(kickoff)).parent_event_id, Some(kickoff));
    /// ```
    pub fn with_parent(mut self, parent: Option<EventId>) -> EventMeta {
        self.parent_event_id = parent;
        self
    }

    /// With `started` as the event that started what this event ends.
    ///
    /// ```
    /// use hooks_core::events::{EventId, EventMeta};
    /// let start = EventId::new();
    /// assert_eq!(EventMeta::new().with_started(Some(start)).started_event_id, Some(start));
    /// ```
    pub fn with_started(mut self, started: Option<EventId>) -> EventMeta {
        self.started_event_id = started;
        self
    }
}

impl Default for EventMeta {
    /// [`EventMeta::new`].
    fn default() -> Self {
        EventMeta::new()
    }
}

/// The sequence numbers of one kickoff's events.
///
/// A runtime makes one per kickoff and puts it in scope while the kickoff
/// runs ([`EventSequence::instrument`] for its future, [`EventSequence::enter`]
/// on a thread working for it): every event made there
/// ([`EventMeta::new`]) takes the next number, from 1. A kickoff resumed
/// elsewhere continues its numbers with [`EventSequence::starting_after`].
///
/// ```
/// use std::sync::Arc;
/// use hooks_core::events::{EventMeta, EventSequence};
///
/// let sequence = Arc::new(EventSequence::new());
/// let numbers = futures_executor::block_on(EventSequence::instrument(Arc::clone(&sequence), async {
///     [EventMeta::new().emission_sequence, EventMeta::new().emission_sequence]
/// }));
/// assert_eq!(numbers, [Some(1), Some(2)]);
/// assert_eq!(sequence.last(), 2);
/// ```
#[derive(Debug, Default)]
pub struct EventSequence {
    last: AtomicU64,
}

thread_local! {
    static SEQUENCE: Cell<Option<Arc<EventSequence>>> = const { Cell::new(None) };
}

impl EventSequence {
    /// A sequence whose first event is number 1.
    pub fn new() -> EventSequence {
        EventSequence::default()
    }

    /// A sequence whose first event is number `last + 1`: a resumed
    /// kickoff's.
    ///
    /// ```
    /// use hooks_core::events::EventSequence;
    /// assert_eq!(EventSequence::starting_after(41).next(), 42);
    /// ```
    pub fn starting_after(last: u64) -> EventSequence {
        EventSequence {
            last: AtomicU64::new(last),
        }
    }

    /// Takes the next number.
    pub fn next(&self) -> u64 {
        self.last.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The last number taken (0 before any).
    pub fn last(&self) -> u64 {
        self.last.load(Ordering::Relaxed)
    }

    /// The sequence in scope on this thread, if any.
    ///
    /// ```
    /// use hooks_core::events::EventSequence;
    /// assert!(EventSequence::current().is_none());
    /// ```
    pub fn current() -> Option<Arc<EventSequence>> {
        let current = SEQUENCE.take();
        SEQUENCE.set(current.clone());
        current
    }

    fn next_in_scope() -> Option<u64> {
        let current = SEQUENCE.take();
        let number = current.as_ref().map(|sequence| sequence.next());
        SEQUENCE.set(current);
        number
    }

    /// Puts `sequence` in scope on this thread until the guard is dropped
    /// (a thread working for a kickoff, such as a synchronous tool's).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use hooks_core::events::{EventMeta, EventSequence};
    ///
    /// let sequence = Arc::new(EventSequence::starting_after(6));
    /// {
    ///     let _scope = EventSequence::enter(Some(sequence));
    ///     assert_eq!(EventMeta::new().emission_sequence, Some(7));
    /// }
    /// assert_eq!(EventMeta::new().emission_sequence, None);
    /// ```
    pub fn enter(sequence: Option<Arc<EventSequence>>) -> SequenceScope {
        SequenceScope {
            previous: SEQUENCE.replace(sequence),
            _thread: PhantomData,
        }
    }

    /// `future`, each poll of it run with `sequence` in scope on the
    /// polling thread: for async work, which may move between threads at
    /// every await.
    pub fn instrument<F: std::future::Future>(
        sequence: Arc<EventSequence>,
        future: F,
    ) -> InSequence<F> {
        InSequence {
            future,
            sequence: Some(sequence),
        }
    }

    /// `future`, polled with the sequence in scope where this is called
    /// (none if none): for work spawned as a task of its own.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use hooks_core::events::{EventMeta, EventSequence};
    ///
    /// let _scope = EventSequence::enter(Some(Arc::new(EventSequence::new())));
    /// let spawned = EventSequence::inherit(async { EventMeta::new().emission_sequence });
    /// drop(_scope);
    /// assert_eq!(futures_executor::block_on(spawned), Some(1));
    /// ```
    pub fn inherit<F: std::future::Future>(future: F) -> InSequence<F> {
        InSequence {
            future,
            sequence: EventSequence::current(),
        }
    }
}

/// Holds a thread's [`EventSequence`] in scope; puts the previous one back
/// when dropped.
///
/// ```
/// use hooks_core::events::{EventSequence, SequenceScope};
/// let scope: SequenceScope = EventSequence::enter(None);
/// drop(scope);
/// ```
#[must_use = "the sequence leaves the scope as soon as the guard is dropped"]
pub struct SequenceScope {
    previous: Option<Arc<EventSequence>>,
    _thread: PhantomData<*const ()>,
}

impl Drop for SequenceScope {
    fn drop(&mut self) {
        SEQUENCE.set(self.previous.take());
    }
}

impl fmt::Debug for SequenceScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SequenceScope").finish_non_exhaustive()
    }
}

pin_project_lite::pin_project! {
    /// A future polled with an [`EventSequence`] in scope (see
    /// [`EventSequence::instrument`]).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use hooks_core::events::{EventSequence, InSequence};
    /// let work: InSequence<_> = EventSequence::instrument(Arc::new(EventSequence::new()), async {});
    /// futures_executor::block_on(work);
    /// ```
    pub struct InSequence<F> {
        #[pin]
        future: F,
        sequence: Option<Arc<EventSequence>>,
    }
}

impl<F: std::future::Future> std::future::Future for InSequence<F> {
    type Output = F::Output;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        let this = self.project();
        // Lent to the thread for the poll, taken back after it.
        crate::lend::lend_for_poll(&SEQUENCE, this.sequence, || this.future.poll(cx))
    }
}

impl<F> fmt::Debug for InSequence<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InSequence").finish_non_exhaustive()
    }
}
