//! An audit trail nobody can quietly edit: every decision recorded in the
//! store, each record chained to the one before it by SHA-256.
//!
//! An [`AuditTrail`] attached to a crew ([`AuditTrail::attach`]) records,
//! from the crew's events: kickoff start and end (status, who it ran for),
//! every block at any point (point, source, reason), every policy decision
//! (policy ids, mode), every tool start, finish, failure and cancellation
//! (a tool that still ran after its kickoff was dropped included), every
//! model call with its token usage; and, through
//! [`StoreApprovals::audit`](crate::store::StoreApprovals::audit), every
//! approval asked and answered (approver, decision, edit). Each record is
//! cleaned by the crew's redaction before it is queued.
//!
//! Writing is off the call path: records go through a bounded buffer to a
//! task that writes them in batches. A store that is slow or down never
//! stalls or crashes the crew: the batch is kept and retried, records that
//! do not fit in the buffer are counted as dropped (a warning, an
//! [`AuditRecordsDroppedEvent`] on the attached crews' buses, and a
//! `records_dropped` record once the store is back).
//!
//! Each record is also a `tracing` event (level `INFO`, target
//! `crew_runtime::audit`, fields `audit.trail`, `audit.kind`, `audit.data`)
//! in the span it was recorded in: exported with the feature `otel`
//! (`crew_runtime::otel`), the decisions travel with the trace as span events.
//!
//! Each record holds the SHA-256 of the record before it in its trail, over
//! a canonical JSON encoding ([`canonical`]): [`verify`] recomputes the
//! chain and names the first record that was changed, removed, inserted or
//! reordered, stored at sequence 0 or below, or stored as other text than
//! the canonical text that was hashed. A chain cannot show records cut
//! from its end, a chain rewritten whole, nor records forged and appended
//! with correct hashes (the hash is no secret): keep its [`head`]
//! elsewhere and verify against it, which vouches for the records up to
//! that head. To read a store without changing it (no file created, no
//! migration), open it with
//! [`Store::open_read_only`](crate::store::Store::open_read_only).
//!
//! ```no_run
//! use crew_runtime::audit::{AuditTrail, head, verify};
//! use crew_runtime::store::Store;
//!
//! # async fn run(crew: crew_runtime::Crew) -> Result<(), Box<dyn std::error::Error>> {
//! let store = Store::connect("sqlite://audit.db").await?;
//! let trail = AuditTrail::open(store.clone())?;
//! trail.attach(&crew);
//! crew.kickoff(()).await?;
//! trail.flush().await?;
//!
//! let kept_elsewhere = head(&store, "default").await?;
//! let verified = verify(&store, "default", Some(&kept_elsewhere)).await?;
//! println!("{} records, intact", verified.head.count);
//! # Ok(())
//! # }
//! ```

pub mod cli;

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use hooks_core::Event;
use hooks_core::events::{IntegrationEvent, ListenerId};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use crate::store::audit::{Entry, GENESIS, Row};
pub use crate::store::audit::{canonical, record_hash};
use crate::store::{QuestionRecords, Store, StoreApprovals, StoreError, now_millis};

/// The trail records go to unless named otherwise.
///
/// ```
/// assert_eq!(crew_runtime::audit::DEFAULT_TRAIL, "default");
/// ```
pub const DEFAULT_TRAIL: &str = "default";

/// How many records wait for the writer at most before new ones are
/// dropped (and counted), unless told otherwise.
///
/// ```
/// assert_eq!(crew_runtime::audit::DEFAULT_BUFFER, 65_536);
/// ```
pub const DEFAULT_BUFFER: usize = 65_536;

/// The largest record data kept, as JSON: 1 MiB. Larger data is replaced
/// by a note of its size (the record itself is kept, so the trail shows
/// that something happened).
///
/// ```
/// assert_eq!(crew_runtime::audit::MAX_RECORD_BYTES, 1024 * 1024);
/// ```
pub const MAX_RECORD_BYTES: usize = 1024 * 1024;

/// The most records written in one transaction.
const BATCH: usize = 2_000;
/// How long a write may be under way before the trail counts as not
/// taking records (for [`AuditTrail::require`]).
const STUCK: Duration = Duration::from_secs(1);
/// How long the writer waits to gather a small batch.
const GATHER: Duration = Duration::from_millis(5);
/// Rows read at a time by [`verify`] and [`export`].
const PAGE: i64 = 10_000;

/// An audit trail could not keep up: its buffer was full, and records were
/// dropped. Sent as an [`Event::Integration`] of kind
/// [`KIND`](Self::KIND) on the buses of the crews the trail is attached
/// to, at the first drop and then at most once a second while drops go on;
/// the trail itself gets a `records_dropped` record with the count once
/// its store takes records again.
///
/// ```
/// use crew_runtime::Event;
/// use crew_runtime::audit::AuditRecordsDroppedEvent;
///
/// let event = Event::from(AuditRecordsDroppedEvent { trail: "payments".into(), dropped: 3 });
/// // A listener reads it by its type.
/// let Event::Integration(integration) = &event else { unreachable!() };
/// let dropped = integration.downcast_ref::<AuditRecordsDroppedEvent>();
/// assert_eq!(dropped.map(|dropped| dropped.dropped), Some(3));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRecordsDroppedEvent {
    /// The trail's name.
    pub trail: String,
    /// How many of its records were dropped so far, in all.
    pub dropped: u64,
}

crate::extension::integration_event!(AuditRecordsDroppedEvent, "AuditRecordsDropped");

/// Why the trail cannot be written, read or trusted.
///
/// ```
/// use crew_runtime::audit::AuditError;
/// let error = AuditError::Broken { trail: "default".into(), seq: 7, problem: "it was changed".into() };
/// assert_eq!(error.to_string(), "the audit trail `default` is broken at record 7: it was changed");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuditError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The chain does not hold: `seq` is the first record that is wrong.
    #[error("the audit trail `{trail}` is broken at record {seq}: {problem}")]
    Broken {
        /// The trail.
        trail: String,
        /// The first record that is wrong (or where one is missing).
        seq: i64,
        /// What is wrong with it.
        problem: String,
    },
    /// The chain holds, but not up to the head kept elsewhere.
    #[error("the audit trail `{trail}` does not match the expected head {expected}: {problem}")]
    HeadMismatch {
        /// The trail.
        trail: String,
        /// The head given.
        expected: Head,
        /// What differs.
        problem: String,
    },
    /// A head given as text cannot be read.
    #[error("cannot read the head {0:?}: write it as COUNT:HASH (what `crew-audit head` prints)")]
    MalformedHead(String),
    /// Nothing to write with: no tokio runtime.
    #[error("an audit trail needs a tokio runtime to write from")]
    NoRuntime,
    /// The trail cannot be written now: what its store said (the records
    /// stay queued, and are retried).
    #[error("the audit trail cannot be written now: {0}")]
    Unwritten(String),
    /// The writer is gone (the runtime it ran on shut down).
    #[error("the audit trail's writer has stopped")]
    WriterStopped,
    /// Writing an export failed.
    #[error("writing the export failed: {0}")]
    Write(#[from] std::io::Error),
    /// The store has no audit tables: nothing was ever recorded to it (a
    /// store opened read-only is not migrated), or they were dropped.
    #[error(
        "the store at {url} has no audit trail: its audit tables are missing (nothing was ever recorded to it, or they were dropped)"
    )]
    NoAuditTables {
        /// The store's URL, without its password.
        url: String,
    },
    /// The store has no trail of that name: no record, no head.
    #[error("the store has no audit trail `{trail}`{}", known_trails(.known))]
    NoSuchTrail {
        /// The trail asked for.
        trail: String,
        /// The trails the store has.
        known: Vec<String>,
    },
    /// The trail has no records, though its writers' head (the row they
    /// take turns on) says it had: they were deleted.
    #[error(
        "the audit trail `{trail}` has no records, though its writers' head says it reached record {reached}: its records were deleted"
    )]
    Emptied {
        /// The trail.
        trail: String,
        /// The record the writers' head names.
        reached: i64,
    },
}

/// The end of [`AuditError::NoSuchTrail`]'s message: what the store has.
fn known_trails(known: &[String]) -> String {
    if known.is_empty() {
        " (it has no trail at all)".to_owned()
    } else {
        format!(" (its trails: {})", known.join(", "))
    }
}

/// The end of a trail: how many records it has and the hash of the last
/// one. Printed by `crew-audit head` as `COUNT:HASH`; keep it elsewhere to
/// catch records cut from the end or a chain rewritten whole.
///
/// ```
/// use crew_runtime::audit::Head;
/// let head: Head = "3:ab12".parse().unwrap();
/// assert_eq!((head.count, head.hash.as_str()), (3, "ab12"));
/// assert_eq!(head.to_string(), "3:ab12");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// The number of records (the last one's sequence number).
    pub count: i64,
    /// The last record's hash (hex), or 64 zeros for an empty trail.
    pub hash: String,
}

impl fmt::Display for Head {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.count, self.hash)
    }
}

impl std::str::FromStr for Head {
    type Err = AuditError;

    fn from_str(text: &str) -> Result<Head, AuditError> {
        let malformed = || AuditError::MalformedHead(text.to_owned());
        let (count, hash) = text.trim().split_once(':').ok_or_else(malformed)?;
        let count: i64 = count.parse().map_err(|_| malformed())?;
        if count < 0 || hash.is_empty() || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(malformed());
        }
        Ok(Head {
            count,
            hash: hash.to_ascii_lowercase(),
        })
    }
}

/// One record as read back.
///
/// ```no_run
/// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::audit::AuditError> {
/// for record in crew_runtime::audit::tail(&store, "default", 10).await? {
///     println!("{} {} {}", record.seq, record.kind, record.data);
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Record {
    /// The trail it belongs to.
    pub trail: String,
    /// Its place in the trail, from 1.
    pub seq: i64,
    /// When it was recorded, in milliseconds since the Unix epoch.
    pub at: i64,
    /// What it records: `kickoff_started`, `tool_finished`, `blocked`, …
    pub kind: String,
    /// Its data (after the crew's redaction).
    pub data: Value,
    /// The hash of the record before it (64 zeros for the first).
    pub prev_hash: String,
    /// Its own hash.
    pub hash: String,
}

impl Record {
    /// The record as one line of JSON (what `crew-audit export --format
    /// jsonl` writes).
    ///
    /// ```no_run
    /// # fn show(record: crew_runtime::audit::Record) {
    /// println!("{}", record.to_json());
    /// # }
    /// ```
    pub fn to_json(&self) -> Value {
        json!({
            "trail": self.trail,
            "seq": self.seq,
            "at": self.at,
            "kind": self.kind,
            "data": self.data,
            "prev_hash": self.prev_hash,
            "hash": self.hash,
        })
    }

    fn from_row(row: Row) -> Record {
        let data = serde_json::from_str(&row.data).unwrap_or(Value::String(row.data));
        Record {
            trail: row.trail,
            seq: row.seq,
            at: row.at,
            kind: row.kind,
            data,
            prev_hash: row.prev_hash,
            hash: row.hash,
        }
    }
}

enum Message {
    Record(Entry),
    Flush(oneshot::Sender<Result<(), String>>),
}

struct Shared {
    name: String,
    sender: mpsc::Sender<Message>,
    dropped: AtomicU64,
    /// Dropped records not yet reported on the trail.
    unreported: AtomicU64,
    written: AtomicU64,
    failing: AtomicBool,
    /// When the write under way began (milliseconds since the epoch), 0
    /// when none is.
    writing_since: std::sync::atomic::AtomicI64,
    /// Records queued and not written yet (in the buffer or the writer's
    /// batch).
    pending: AtomicU64,
    /// The buffer's size.
    buffer: u64,
    /// The scoped registries of the crews the trail is attached to, whose
    /// buses hear of dropped records.
    crews: std::sync::Mutex<Vec<std::sync::Weak<hooks_core::HookRegistry>>>,
    /// When the last [`AuditRecordsDroppedEvent`] went out
    /// (milliseconds since the epoch), 0 before the first.
    drop_reported_at: std::sync::atomic::AtomicI64,
}

/// At most one [`AuditRecordsDroppedEvent`] per trail within this long.
const DROP_EVENT_EVERY: i64 = 1_000;

/// Records written to a store's audit trail, from a crew's events and from
/// approvals; cheap to clone (clones share one writer).
///
/// ```no_run
/// use crew_runtime::audit::AuditTrail;
/// use crew_runtime::store::Store;
///
/// # async fn run(crew: crew_runtime::Crew) -> Result<(), Box<dyn std::error::Error>> {
/// let trail = AuditTrail::open(Store::connect("sqlite://audit.db").await?)?;
/// trail.attach(&crew);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct AuditTrail {
    shared: Arc<Shared>,
}

impl fmt::Debug for AuditTrail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuditTrail")
            .field("trail", &self.shared.name)
            .field("written", &self.written())
            .field("dropped", &self.dropped())
            .finish_non_exhaustive()
    }
}

impl AuditTrail {
    /// A writer to the trail [`DEFAULT_TRAIL`] of `store`, with a buffer of
    /// [`DEFAULT_BUFFER`] records. Must be called inside a tokio runtime
    /// (the writer is a task of it).
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::audit::AuditError> {
    /// let trail = crew_runtime::audit::AuditTrail::open(store)?;
    /// # let _ = trail;
    /// # Ok(())
    /// # }
    /// ```
    pub fn open(store: Store) -> Result<AuditTrail, AuditError> {
        AuditTrail::open_with(store, DEFAULT_TRAIL, DEFAULT_BUFFER)
    }

    /// A writer to trail `name` of `store`, whose buffer holds `buffer`
    /// records (at least one).
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::audit::AuditError> {
    /// let trail = crew_runtime::audit::AuditTrail::open_with(store, "payments", 10_000)?;
    /// # let _ = trail;
    /// # Ok(())
    /// # }
    /// ```
    pub fn open_with(store: Store, name: &str, buffer: usize) -> Result<AuditTrail, AuditError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| AuditError::NoRuntime)?;
        let (sender, receiver) = mpsc::channel(buffer.max(1));
        let shared = Arc::new(Shared {
            name: name.to_owned(),
            sender,
            dropped: AtomicU64::new(0),
            unreported: AtomicU64::new(0),
            written: AtomicU64::new(0),
            failing: AtomicBool::new(false),
            writing_since: std::sync::atomic::AtomicI64::new(0),
            pending: AtomicU64::new(0),
            buffer: buffer.max(1) as u64,
            crews: std::sync::Mutex::new(Vec::new()),
            drop_reported_at: std::sync::atomic::AtomicI64::new(0),
        });
        runtime.spawn(write(store, Arc::downgrade(&shared), receiver));
        Ok(AuditTrail { shared })
    }

    /// The trail's name.
    ///
    /// ```no_run
    /// # fn run(trail: crew_runtime::audit::AuditTrail) {
    /// assert_eq!(trail.name(), "default");
    /// # }
    /// ```
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// Queues a record of `kind` with `data`, without waiting: when the
    /// buffer is full it is dropped and counted ([`dropped`](Self::dropped)).
    /// The data is cleaned by the redaction in scope (a crew's, when
    /// called from its hooks).
    ///
    /// ```no_run
    /// # fn run(trail: crew_runtime::audit::AuditTrail) {
    /// trail.record("deploy_started", serde_json::json!({"service": "web"}));
    /// # }
    /// ```
    pub fn record(&self, kind: &str, data: Value) {
        // The whole document as text, so that key/value rules see the
        // keys; built only when a redactor would read it.
        let data = if crate::runtime::redaction_in_scope() {
            let text = data.to_string();
            match crate::runtime::redact_in_scope(&text) {
                std::borrow::Cow::Borrowed(_) => data,
                std::borrow::Cow::Owned(cleaned) => {
                    serde_json::from_str(&cleaned).unwrap_or(Value::String(cleaned))
                }
            }
        } else {
            data
        };
        // Also an event of the span it was recorded in (`crew.kickoff`,
        // `execute_tool`, …), so that a trace exported with the `otel`
        // feature carries the decisions next to the calls. The data is the
        // redacted one, and it is only formatted when a subscriber takes
        // the event: without one, this costs a check of the callsite. Its
        // target is this module's path, `crew_runtime::audit`, to filter by.
        tracing::info!(
            audit.trail = %self.shared.name,
            audit.kind = kind,
            audit.data = %data,
            "audit record"
        );
        let data = within_record_limit(data);
        let entry = Entry {
            at: now_millis(),
            kind: kind.to_owned(),
            data,
        };
        if self.shared.sender.try_send(Message::Record(entry)).is_ok() {
            self.shared.pending.fetch_add(1, Ordering::Relaxed);
        } else {
            let dropped = self.shared.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            self.shared.unreported.fetch_add(1, Ordering::Relaxed);
            if dropped.is_power_of_two() {
                tracing::warn!(
                    trail = %self.shared.name,
                    dropped,
                    "the audit trail's buffer is full: records are dropped (the store is slow or down)"
                );
            }
            self.report_drops(dropped);
        }
    }

    /// Tells the attached crews' listeners that records were dropped, at
    /// the first drop and then at most once a [`DROP_EVENT_EVERY`].
    fn report_drops(&self, dropped: u64) {
        let now = now_millis();
        let last = self.shared.drop_reported_at.load(Ordering::Relaxed);
        if last != 0 && now.saturating_sub(last) < DROP_EVENT_EVERY {
            return;
        }
        // One thread reports; the others racing it skip.
        if self
            .shared
            .drop_reported_at
            .compare_exchange(last, now.max(1), Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return;
        }
        let crews: Vec<_> = self
            .shared
            .crews
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .filter_map(std::sync::Weak::upgrade)
            .collect();
        let event = Event::from(AuditRecordsDroppedEvent {
            trail: self.shared.name.clone(),
            dropped,
        });
        // Emitted with no lock held: a listener may record, or attach.
        for registry in crews {
            registry.events().emit(&event);
        }
    }

    /// Waits until every record queued before the call is written; an
    /// error when the store cannot take them now (they stay queued).
    ///
    /// ```no_run
    /// # async fn run(trail: crew_runtime::audit::AuditTrail) -> Result<(), crew_runtime::audit::AuditError> {
    /// trail.flush().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn flush(&self) -> Result<(), AuditError> {
        let (done, written) = oneshot::channel();
        match self.shared.sender.try_send(Message::Flush(done)) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Closed(_)) => return Err(AuditError::WriterStopped),
            // A full buffer behind a store that refuses writes would hold
            // the flush until the store is back: say so instead.
            Err(mpsc::error::TrySendError::Full(_)) if self.is_failing() => {
                return Err(AuditError::Unwritten(
                    "the store refuses writes and the buffer is full".into(),
                ));
            }
            Err(mpsc::error::TrySendError::Full(message)) => self
                .shared
                .sender
                .send(message)
                .await
                .map_err(|_| AuditError::WriterStopped)?,
        }
        match written.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(AuditError::Unwritten(error)),
            Err(_) => Err(AuditError::WriterStopped),
        }
    }

    /// How many records were dropped because the buffer was full.
    ///
    /// ```no_run
    /// # fn run(trail: crew_runtime::audit::AuditTrail) {
    /// assert_eq!(trail.dropped(), 0);
    /// # }
    /// ```
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// How many records were written.
    ///
    /// ```no_run
    /// # fn run(trail: crew_runtime::audit::AuditTrail) {
    /// println!("{} records written", trail.written());
    /// # }
    /// ```
    pub fn written(&self) -> u64 {
        self.shared.written.load(Ordering::Relaxed)
    }

    /// Whether the last write failed (the store is down or read-only).
    ///
    /// ```no_run
    /// # fn run(trail: crew_runtime::audit::AuditTrail) {
    /// if trail.is_failing() { eprintln!("the audit trail cannot be written"); }
    /// # }
    /// ```
    pub fn is_failing(&self) -> bool {
        self.shared.failing.load(Ordering::Relaxed)
    }

    /// Records the events of `crew` (every kickoff of it, and of the values
    /// [`Crew::for_user`](crate::Crew::for_user) makes of it) from now on;
    /// returns the listener's id on [`crew.events()`](crate::Crew::events).
    ///
    /// ```no_run
    /// # fn run(trail: crew_runtime::audit::AuditTrail, crew: crew_runtime::Crew) {
    /// let listener = trail.attach(&crew);
    /// // … later, to stop recording:
    /// crew.events().unsubscribe(listener);
    /// # }
    /// ```
    pub fn attach(&self, crew: &crate::Crew) -> ListenerId {
        {
            let mut crews = self
                .shared
                .crews
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            crews.retain(|registry| registry.strong_count() > 0);
            let registry = crew.scoped_registry();
            if !crews
                .iter()
                .any(|known| std::ptr::eq(known.as_ptr(), Arc::as_ptr(registry)))
            {
                crews.push(Arc::downgrade(registry));
            }
        }
        let trail = self.clone();
        let names = std::sync::Mutex::new(TaskNames::default());
        crew.events().subscribe(move |event| {
            let task = names
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .of(event);
            if let Some((kind, data)) = record_of(event, task.as_deref()) {
                trail.record(kind, data);
            }
        })
    }
}

impl AuditTrail {
    /// Makes the audit a condition of `crew`'s tool calls: while the trail
    /// cannot be written (the store is down, read-only, or a write has
    /// hung for more than a second) or its buffer is full, every tool call of the crew is refused with a message that
    /// says so (a fail-closed `PRE_TOOL_CALL` hook of the crew named
    /// `audit-required`, source `audit-required`). Without it, a store
    /// that is down never stops a crew: records are kept, then dropped and
    /// counted.
    ///
    /// ```no_run
    /// # fn run(trail: crew_runtime::audit::AuditTrail, crew: crew_runtime::Crew) -> Result<(), crew_runtime::RegisterError> {
    /// trail.attach(&crew);
    /// trail.require(&crew)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn require(
        &self,
        crew: &crate::Crew,
    ) -> Result<hooks_core::HookId, hooks_core::RegisterError> {
        let trail = self.clone();
        crew.hooks().register_hook_with(
            hooks_core::PRE_TOOL_CALL,
            hooks_core::HookOptions::new()
                .name("audit-required")
                .fail_closed(),
            move |_ctx: &mut hooks_core::ToolCallHookContext| -> Result<(), hooks_core::HookAborted> {
                if trail.can_take_records() {
                    Ok(())
                } else {
                    Err(hooks_core::HookAborted::new(
                        format!(
                            "the audit trail `{}` cannot be written now, and this crew requires its audit: \
                             the call is refused until the store takes records again",
                            trail.name()
                        ),
                        "audit-required",
                    ))
                }
            },
        )
    }

    /// Whether records are being written: the last write succeeded, none
    /// has been under way for more than a second (a store that is locked
    /// or unreachable holds it), and the buffer has room.
    ///
    /// ```no_run
    /// # fn run(trail: crew_runtime::audit::AuditTrail) {
    /// assert!(trail.can_take_records());
    /// # }
    /// ```
    pub fn can_take_records(&self) -> bool {
        let since = self.shared.writing_since.load(Ordering::Relaxed);
        let stuck = since != 0 && now_millis().saturating_sub(since) > STUCK.as_millis() as i64;
        let full = self.shared.pending.load(Ordering::Relaxed) >= self.shared.buffer;
        !self.is_failing() && !stuck && !full
    }
}

impl QuestionRecords for AuditTrail {
    fn name(&self) -> &str {
        AuditTrail::name(self)
    }

    fn record(&self, kind: &str, data: Value) {
        AuditTrail::record(self, kind, data);
    }
}

impl StoreApprovals {
    /// Records every question asked (`approval_asked`) and how it ended
    /// (`approval_answered` with the approver, decision, edit and comment;
    /// `approval_closed` when it expired, was abandoned or withdrawn) on
    /// `trail`.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::audit::AuditError> {
    /// use crew_runtime::audit::AuditTrail;
    /// use crew_runtime::store::StoreApprovals;
    /// let approvals = StoreApprovals::new(store.clone()).audit(AuditTrail::open(store)?);
    /// # let _ = approvals;
    /// # Ok(())
    /// # }
    /// ```
    pub fn audit(self, trail: AuditTrail) -> Self {
        self.with_records(Arc::new(trail))
    }
}

/// How many task names a listener remembers at most (the least recently
/// used go first): enough for every run under way, bounded whatever
/// happens to runs that never end.
const REMEMBERED_TASK_NAMES: usize = 4096;

/// The task names of the runs under way, learned from their events, so
/// that every record names a task the same way: by its name (the
/// `#[task]` method's, or `Task::builder(..).name(..)`), as `model_call`
/// and the approval records do. Tool events carry the task's description
/// instead (CrewAI's field, kept as it is), and link to the agent
/// execution they belong to, whose start carries the name: an agent
/// execution's start and each tool call's start are remembered under
/// their event ids until they end.
#[derive(Default)]
struct TaskNames {
    /// By event id: the name, and when it was last used.
    names: std::collections::HashMap<hooks_core::events::EventId, (Arc<str>, u64)>,
    /// The ids by when they were last used, oldest first.
    used: std::collections::BTreeMap<u64, hooks_core::events::EventId>,
    clock: u64,
}

impl TaskNames {
    /// Learns what `event` says of task names, and returns the name of
    /// the task a tool event belongs to (`None` for other events, or when
    /// the start of its run was not seen).
    fn of(&mut self, event: &Event) -> Option<Arc<str>> {
        match event {
            Event::AgentExecutionStarted(e) => {
                self.remember(e.meta.event_id, Arc::from(e.task_name.as_str()));
                None
            }
            Event::AgentExecutionCompleted(e) => {
                self.forget(e.meta.started_event_id);
                None
            }
            Event::AgentExecutionError(e) => {
                self.forget(e.meta.started_event_id);
                None
            }
            Event::ToolUsageStarted(e) => {
                let name = self.get(e.meta.parent_event_id)?;
                self.remember(e.meta.event_id, Arc::clone(&name));
                Some(name)
            }
            Event::ToolExecutionStarted(e) => self.get(e.meta.parent_event_id),
            // A failed call may still be followed by its cancellation (a
            // synchronous tool past its timeout): its start is kept.
            Event::ToolUsageError(e) => self.get(e.meta.started_event_id),
            Event::ToolUsageFinished(e) => {
                let name = self.get(e.meta.started_event_id);
                self.forget(e.meta.started_event_id);
                name
            }
            Event::ToolUsageAbandoned(e) => {
                let name = self
                    .get(e.meta.started_event_id)
                    .or_else(|| self.get(e.meta.parent_event_id));
                self.forget(e.meta.started_event_id);
                name
            }
            _ => None,
        }
    }

    fn remember(&mut self, id: hooks_core::events::EventId, name: Arc<str>) {
        self.clock += 1;
        if let Some((_, used)) = self.names.insert(id, (name, self.clock)) {
            self.used.remove(&used);
        }
        self.used.insert(self.clock, id);
        while self.names.len() > REMEMBERED_TASK_NAMES {
            let Some((_, oldest)) = self.used.pop_first() else {
                break;
            };
            self.names.remove(&oldest);
        }
    }

    fn get(&mut self, id: Option<hooks_core::events::EventId>) -> Option<Arc<str>> {
        let id = id?;
        let name = Arc::clone(&self.names.get(&id)?.0);
        self.remember(id, Arc::clone(&name));
        Some(name)
    }

    fn forget(&mut self, id: Option<hooks_core::events::EventId>) {
        if let Some((_, used)) = id.and_then(|id| self.names.remove(&id)) {
            self.used.remove(&used);
        }
    }
}

/// What an event records, if anything. `task` is the name of the task a
/// tool event belongs to ([`TaskNames`]).
fn record_of(event: &Event, task: Option<&str>) -> Option<(&'static str, Value)> {
    Some(match event {
        Event::CrewKickoffStarted(e) => (
            "kickoff_started",
            json!({"crew": e.crew_name, "user": e.user, "kickoff_id": e.kickoff_id,
                   "inputs": e.inputs.iter().collect::<std::collections::BTreeMap<_, _>>()}),
        ),
        Event::CrewKickoffCompleted(e) => (
            "kickoff_ended",
            json!({"crew": e.crew_name, "user": e.user, "kickoff_id": e.kickoff_id,
                   "status": "completed", "tokens": usage(&e.token_usage)}),
        ),
        Event::CrewKickoffFailed(e) => (
            "kickoff_ended",
            json!({"crew": e.crew_name, "user": e.user, "kickoff_id": e.kickoff_id,
                   "status": if e.error.contains("cancelled") { "cancelled" } else { "failed" },
                   "error": e.error}),
        ),
        Event::HookDispatched(e) if e.abort_reason.is_some() || e.outcome == "aborted" => (
            "blocked",
            json!({"point": e.point.to_string(), "source": e.abort_source, "reason": e.abort_reason,
                   "tool": e.tool_name.as_deref(), "agent": e.agent_role.as_deref()}),
        ),
        Event::Integration(e) => return integration_record(e),
        // Where the tool really starts (after the PRE chain), with what it
        // receives; `ToolUsageStarted` comes before the hooks decide.
        Event::ToolExecutionStarted(e) => (
            "tool_started",
            json!({"tool": e.tool_name, "input": e.tool_input, "agent": e.agent_role,
                   "task": task, "task_description": e.task, "crew": e.crew}),
        ),
        Event::ToolUsageFinished(e) => (
            "tool_finished",
            json!({"tool": e.tool_name, "result": e.result, "blocked": e.blocked,
                   "duration_ms": u64::try_from(e.duration.as_millis()).unwrap_or(u64::MAX),
                   "agent": e.agent_role, "task": task, "crew": e.crew}),
        ),
        Event::ToolUsageError(e) => (
            "tool_failed",
            json!({"tool": e.tool_name, "error": e.error, "agent": e.agent_role,
                   "task": task, "crew": e.crew}),
        ),
        Event::ToolUsageAbandoned(e) => (
            "tool_cancelled",
            json!({"tool": e.tool_name, "ran_to_completion": e.completed, "result": e.result,
                   "agent": e.agent_role, "task": task, "crew": e.crew}),
        ),
        Event::LlmCallCompleted(e) => (
            "model_call",
            json!({"model": e.model, "tool_calls": e.tool_calls,
                   "tokens": e.usage.as_ref().map(usage), "agent": e.agent_role,
                   "task": e.task_name, "crew": e.crew}),
        ),
        Event::LlmCallFailed(e) => ("model_call_failed", json!({"error": e.error})),
        _ => return None,
    })
}

/// What an integration's event records, if anything: a policy set's
/// decisions (with the feature `policy`; without it none are made), a
/// durable kickoff's turns (`durable`), a budget's refusals (`budget`).
fn integration_record(event: &IntegrationEvent) -> Option<(&'static str, Value)> {
    #[cfg(feature = "policy")]
    if let Some(e) = event.downcast_ref::<crate::policy::PolicyDecidedEvent>() {
        return Some((
            "policy_decided",
            json!({"tool": e.tool_name, "agent": e.agent_role, "decision": e.decision,
                   "mode": if e.shadow { "shadow" } else { "enforced" },
                   "policies": e.policies, "reason": e.reason}),
        ));
    }
    #[cfg(feature = "durable")]
    if let Some(record) = durable_record(event) {
        return Some(record);
    }
    #[cfg(feature = "budget")]
    if let Some(e) = event.downcast_ref::<crate::budget::BudgetRefusedEvent>() {
        return Some((
            "budget_refused",
            json!({"budget": e.budget, "key": e.key, "call": e.call, "reason": e.reason,
                   "crew": e.crew, "agent": e.agent}),
        ));
    }
    let _ = event;
    None
}

/// What a durable kickoff's event records: `kickoff_parked`,
/// `kickoff_resumed`, `call_in_doubt`, `call_reconciled`.
#[cfg(feature = "durable")]
fn durable_record(event: &IntegrationEvent) -> Option<(&'static str, Value)> {
    use crate::durable::{
        CrewKickoffParkedEvent, CrewKickoffResumedEvent, ToolCallInDoubtEvent,
        ToolCallReconciledEvent,
    };
    if let Some(e) = event.downcast_ref::<CrewKickoffParkedEvent>() {
        return Some((
            "kickoff_parked",
            json!({"kickoff": e.kickoff_id, "owner": e.owner, "ready": e.ready}),
        ));
    }
    if let Some(e) = event.downcast_ref::<CrewKickoffResumedEvent>() {
        return Some((
            "kickoff_resumed",
            json!({"kickoff": e.kickoff_id, "step": e.step, "owner": e.owner, "epoch": e.epoch}),
        ));
    }
    if let Some(e) = event.downcast_ref::<ToolCallInDoubtEvent>() {
        return Some((
            "call_in_doubt",
            json!({"kickoff": e.kickoff_id, "tool": e.tool_name, "call_id": e.call_id,
                   "idempotency_key": e.idempotency_key, "outcome": e.outcome.as_str()}),
        ));
    }
    event.downcast_ref::<ToolCallReconciledEvent>().map(|e| {
        (
            "call_reconciled",
            json!({"kickoff": e.kickoff_id, "tool": e.tool_name, "call_id": e.call_id,
                   "idempotency_key": e.idempotency_key, "happened": e.happened}),
        )
    })
}

fn usage(usage: &hooks_core::TokenUsage) -> Value {
    json!({
        "prompt": usage.prompt_tokens,
        "completion": usage.completion_tokens,
        "total": usage.total_tokens,
    })
}

/// The writer: batches what is queued, writes it, keeps and retries a
/// batch the store refused, reports drops once the store takes records
/// again. Ends when every handle is gone and the queue is written.
async fn write(store: Store, shared: std::sync::Weak<Shared>, mut queue: mpsc::Receiver<Message>) {
    let mut batch: Vec<Entry> = Vec::new();
    let mut waiting: Vec<oneshot::Sender<Result<(), String>>> = Vec::new();
    let mut backoff = Duration::from_millis(50);
    // Drop notices in `batch` (written, never queued).
    let mut notices = 0usize;
    let name = match shared.upgrade() {
        Some(shared) => shared.name.clone(),
        None => return,
    };
    loop {
        if batch.is_empty() && waiting.is_empty() {
            match queue.recv().await {
                Some(Message::Record(entry)) => batch.push(entry),
                Some(Message::Flush(done)) => waiting.push(done),
                None => return,
            }
        }
        drain(&mut queue, &mut batch, &mut waiting);
        // Records trickle in one call at a time: a moment's wait gathers
        // them into one transaction instead of one each (nobody waits on
        // it unless a flush asked, and then it is not taken).
        if batch.len() < BATCH / 8 && waiting.is_empty() {
            tokio::time::sleep(GATHER).await;
            drain(&mut queue, &mut batch, &mut waiting);
        }
        if let Some(shared) = shared.upgrade() {
            let dropped = shared.unreported.swap(0, Ordering::Relaxed);
            if dropped > 0 {
                notices += 1;
                batch.insert(
                    0,
                    Entry {
                        at: now_millis(),
                        kind: "records_dropped".into(),
                        data: json!({"count": dropped, "total": shared.dropped.load(Ordering::Relaxed)}),
                    },
                );
            }
        }
        if batch.is_empty() {
            for done in waiting.drain(..) {
                let _ = done.send(Ok(()));
            }
            continue;
        }
        if let Some(shared) = shared.upgrade() {
            shared.writing_since.store(now_millis(), Ordering::Relaxed);
        }
        let appended = store.append_audit(&name, &batch).await;
        if let Some(shared) = shared.upgrade() {
            shared.writing_since.store(0, Ordering::Relaxed);
        }
        match appended {
            Ok(_) => {
                if let Some(shared) = shared.upgrade() {
                    shared
                        .written
                        .fetch_add(batch.len() as u64, Ordering::Relaxed);
                    // Drop notices were never queued: not counted.
                    let queued = (batch.len() - notices) as u64;
                    shared.pending.fetch_sub(queued, Ordering::Relaxed);
                    shared.failing.store(false, Ordering::Relaxed);
                }
                batch.clear();
                notices = 0;
                backoff = Duration::from_millis(50);
                for done in waiting.drain(..) {
                    let _ = done.send(Ok(()));
                }
            }
            Err(error) => {
                if let Some(shared) = shared.upgrade()
                    && !shared.failing.swap(true, Ordering::Relaxed)
                {
                    tracing::warn!(trail = %name, %error, "the audit trail cannot be written; retrying");
                }
                for done in waiting.drain(..) {
                    let _ = done.send(Err(error.to_string()));
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
                if shared.strong_count() == 0 && queue.is_closed() {
                    tracing::warn!(trail = %name, lost = batch.len(), "the audit trail was dropped while its store failed");
                    return;
                }
            }
        }
    }
}

/// `data`, or in its place a note of its size when its JSON is larger than
/// [`MAX_RECORD_BYTES`]: a record the store would refuse (or choke on)
/// must not stop the trail.
fn within_record_limit(data: Value) -> Value {
    // Most records are small: measure only what could be large.
    let bytes = serde_json::to_vec(&data).map_or(usize::MAX, |text| text.len());
    if bytes <= MAX_RECORD_BYTES {
        return data;
    }
    json!({
        "omitted": "the record's data was larger than the trail takes",
        "bytes": bytes,
        "limit": MAX_RECORD_BYTES,
    })
}

/// Moves what is queued into `batch` (up to [`BATCH`]), stopping after a
/// flush request.
fn drain(
    queue: &mut mpsc::Receiver<Message>,
    batch: &mut Vec<Entry>,
    waiting: &mut Vec<oneshot::Sender<Result<(), String>>>,
) {
    while batch.len() < BATCH {
        match queue.try_recv() {
            Ok(Message::Record(entry)) => batch.push(entry),
            Ok(Message::Flush(done)) => {
                waiting.push(done);
                break;
            }
            Err(_) => break,
        }
    }
}

/// What [`verify`] found: the trail's head, and where its clock went back
/// (not a break: the chain's order is its sequence, not its times).
///
/// ```no_run
/// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::audit::AuditError> {
/// let verified = crew_runtime::audit::verify(&store, "default", None).await?;
/// println!("intact up to {}", verified.head);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Verified {
    /// The trail.
    pub trail: String,
    /// Its head: count and last hash.
    pub head: Head,
    /// Records whose time is earlier than the record before them.
    pub clock_went_back_at: Vec<i64>,
}

/// Checks trail `trail` of `store` from its first record to its last:
/// sequence numbers run 1, 2, 3, … without gaps, with nothing at 0 or
/// below; every record's stored data is byte for byte the canonical JSON
/// ([`canonical`]) its hash was taken over (no repeated key, whitespace,
/// other escape or number form: nothing another JSON reader could read
/// otherwise); its hash is recomputed from its content, and must be named
/// by the record after it. With `expect` (a head kept elsewhere), the
/// trail must also reach that record with that hash: what catches records
/// cut from the end, a chain rewritten whole, or records forged after it.
/// Reads the trail a page at a time: linear in its records, bounded
/// memory.
///
/// A trail without records is refused: [`AuditError::NoSuchTrail`] for a
/// name the store does not have, [`AuditError::Emptied`] for one whose
/// records were deleted, [`AuditError::NoAuditTables`] for a store that
/// has none.
///
/// ```no_run
/// # async fn run(store: crew_runtime::store::Store) {
/// match crew_runtime::audit::verify(&store, "default", None).await {
///     Ok(verified) => println!("intact: {}", verified.head),
///     Err(error) => eprintln!("{error}"),
/// }
/// # }
/// ```
pub async fn verify(
    store: &Store,
    trail: &str,
    expect: Option<&Head>,
) -> Result<Verified, AuditError> {
    let broken = |seq: i64, problem: String| AuditError::Broken {
        trail: trail.to_owned(),
        seq,
        problem,
    };
    require_tables(store).await?;
    // Read a page at a time from 1 up, such a record would never be seen.
    if let Some(&seq) = store.audit_seqs_outside_the_chain(trail, 1).await?.first() {
        return Err(broken(
            seq,
            format!(
                "it is stored at sequence {seq}: sequence numbers run 1, 2, 3, … and no writer puts a record at 0 or below (it was put there by hand)"
            ),
        ));
    }
    let mut prev_seq = 0i64;
    let mut prev_hash = GENESIS.to_owned();
    // The hash of the record before the previous one: tells an inserted
    // record from other breaks.
    let mut prev2_hash = String::new();
    let mut prev_at = i64::MIN;
    let mut clock_went_back_at = Vec::new();
    let mut expected_seen = false;
    loop {
        let rows = store.audit_rows(trail, prev_seq, PAGE).await?;
        if rows.is_empty() {
            break;
        }
        for row in rows {
            if row.seq != prev_seq + 1 {
                let problem = if prev_seq == 0 {
                    format!(
                        "the trail starts at record {} (record 1 was removed)",
                        row.seq
                    )
                } else {
                    format!(
                        "records {} to {} were removed (record {prev_seq} is followed by record {})",
                        prev_seq + 1,
                        row.seq - 1,
                        row.seq
                    )
                };
                return Err(broken(prev_seq + 1, problem));
            }
            // The link first: a record out of place names the place.
            if row.prev_hash != prev_hash {
                let problem = if prev_seq >= 2 && row.prev_hash == prev2_hash {
                    format!(
                        "record {prev_seq} was inserted: record {} follows record {} in the chain",
                        row.seq,
                        prev_seq - 1
                    )
                } else {
                    format!(
                        "it does not follow record {prev_seq}: a record was inserted, removed or reordered before it, or record {prev_seq} was changed"
                    )
                };
                return Err(broken(row.seq, problem));
            }
            let data: Value = serde_json::from_str(&row.data).map_err(|error| {
                broken(
                    row.seq,
                    format!("its data is not JSON any more ({error}): it was changed"),
                )
            })?;
            // The hash was taken over the canonical text: a stored text
            // that only reads the same to serde_json (a repeated key,
            // whitespace, another escape or number form) is another text,
            // which another reader may read otherwise.
            let canonical_text = canonical(&data);
            if canonical_text != row.data {
                return Err(broken(row.seq, not_canonical(&row.data, &canonical_text)));
            }
            let recomputed =
                record_hash(trail, row.seq, row.at, &row.kind, &row.data, &row.prev_hash);
            if recomputed != row.hash {
                return Err(broken(
                    row.seq,
                    "its content does not match its hash: it was changed".into(),
                ));
            }
            if row.at < prev_at {
                clock_went_back_at.push(row.seq);
            }
            if let Some(expect) = expect
                && row.seq == expect.count
            {
                if row.hash != expect.hash {
                    return Err(AuditError::HeadMismatch {
                        trail: trail.to_owned(),
                        expected: expect.clone(),
                        problem: format!(
                            "record {} has hash {}: the chain was rewritten",
                            row.seq, row.hash
                        ),
                    });
                }
                expected_seen = true;
            }
            prev_at = row.at;
            prev_seq = row.seq;
            prev2_hash = std::mem::replace(&mut prev_hash, row.hash);
        }
    }
    if prev_seq == 0 {
        return Err(missing(store, trail).await);
    }
    if let Some(expect) = expect
        && !expected_seen
        && !(expect.count == 0 && expect.hash == GENESIS)
    {
        return Err(AuditError::HeadMismatch {
            trail: trail.to_owned(),
            expected: expect.clone(),
            problem: format!(
                "the trail ends at record {prev_seq}: records after it were cut from the end"
            ),
        });
    }
    Ok(Verified {
        trail: trail.to_owned(),
        head: Head {
            count: prev_seq,
            hash: prev_hash,
        },
        clock_went_back_at,
    })
}

/// The first records of `trail` not taken as part of it (not by [`head`],
/// [`tail`] nor [`export`]): the sequence numbers of those stored at 0 or
/// below, lowest first, ten at most. No writer puts a record there: one
/// was put there by hand, and [`verify`] refuses the trail.
///
/// ```no_run
/// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::audit::AuditError> {
/// let stray = crew_runtime::audit::outside_the_chain(&store, "default").await?;
/// if let Some(first) = stray.first() {
///     eprintln!("a record at sequence {first} was put in the trail by hand");
/// }
/// # Ok(())
/// # }
/// ```
pub async fn outside_the_chain(store: &Store, trail: &str) -> Result<Vec<i64>, AuditError> {
    require_tables(store).await?;
    Ok(store.audit_seqs_outside_the_chain(trail, 10).await?)
}

/// Refuses a trail without records (at sequence 1 and up):
/// [`AuditError::NoSuchTrail`] for a name the store does not have,
/// [`AuditError::Emptied`] for a trail whose records were deleted,
/// [`AuditError::NoAuditTables`] for a store without an audit trail.
/// [`verify`] refuses such a trail itself; [`head`], [`tail`] and
/// [`export`] take it as empty, so call this first where an empty trail
/// is a mistake (as `crew-audit` does).
///
/// ```no_run
/// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::audit::AuditError> {
/// crew_runtime::audit::require_records(&store, "payments").await?;
/// # Ok(())
/// # }
/// ```
pub async fn require_records(store: &Store, trail: &str) -> Result<(), AuditError> {
    require_tables(store).await?;
    if store.audit_tail_rows(trail, 1).await?.is_empty() {
        return Err(missing(store, trail).await);
    }
    Ok(())
}

/// Refuses a store without the audit trail's tables.
async fn require_tables(store: &Store) -> Result<(), AuditError> {
    if store.audit_tables_present().await? {
        Ok(())
    } else {
        Err(AuditError::NoAuditTables {
            url: store.url().to_owned(),
        })
    }
}

/// Why trail `trail`, which has no records, is refused.
async fn missing(store: &Store, trail: &str) -> AuditError {
    match store.audit_head_seq(trail).await {
        Ok(Some(reached)) => AuditError::Emptied {
            trail: trail.to_owned(),
            reached,
        },
        Ok(None) => match store.audit_trail_names().await {
            Ok(known) => AuditError::NoSuchTrail {
                trail: trail.to_owned(),
                known,
            },
            Err(error) => error.into(),
        },
        Err(error) => error.into(),
    }
}

/// What is wrong with `stored`, a record's data that is valid JSON but not
/// its canonical text `canonical`.
fn not_canonical(stored: &str, canonical: &str) -> String {
    if let Some(key) = repeated_key(stored) {
        return format!(
            "its stored data repeats the key {key:?} in one object, which JSON readers resolve differently (the first, the last, or a refusal): it is not the canonical text its hash was taken over; it was changed"
        );
    }
    let at = stored
        .bytes()
        .zip(canonical.bytes())
        .position(|(stored, canonical)| stored != canonical)
        .unwrap_or(stored.len().min(canonical.len()));
    format!(
        "its stored data is not byte for byte the canonical text its hash was taken over: they differ from byte {at} (stored {}, canonical {}): whitespace, an escape or a number written otherwise, which another reader may read otherwise; it was changed",
        excerpt(stored, at),
        excerpt(canonical, at)
    )
}

/// Up to 24 characters of `text` from byte `at` (or the character holding
/// it), quoted.
fn excerpt(text: &str, at: usize) -> String {
    let mut start = at.min(text.len());
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let shown: String = text[start..].chars().take(24).collect();
    if shown.is_empty() {
        "ends there".to_owned()
    } else {
        format!("{shown:?}")
    }
}

/// The first key that appears twice in one object of `text` (JSON), if
/// any: a reading of it as [`Value`] keeps one of them silently.
fn repeated_key(text: &str) -> Option<String> {
    use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};

    /// Walks a JSON value, noting the first key repeated in an object.
    struct Walk<'a>(&'a mut Option<String>);

    impl<'de> DeserializeSeed<'de> for Walk<'_> {
        type Value = ();
        fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
            deserializer.deserialize_any(self)
        }
    }

    impl<'de> Visitor<'de> for Walk<'_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("JSON")
        }
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<(), A::Error> {
            while items.next_element_seed(Walk(&mut *self.0))?.is_some() {}
            Ok(())
        }
        fn visit_map<A: MapAccess<'de>>(self, mut entries: A) -> Result<(), A::Error> {
            let mut seen = std::collections::HashSet::new();
            while let Some(key) = entries.next_key::<String>()? {
                if !seen.insert(key.clone()) {
                    *self.0 = Some(key);
                    // Found: the rest need not be read.
                    return Err(de::Error::custom("a repeated key"));
                }
                entries.next_value_seed(Walk(&mut *self.0))?;
            }
            Ok(())
        }
    }

    let mut found = None;
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let _ = Walk(&mut found).deserialize(&mut deserializer);
    found
}

/// The head of trail `trail`: its record count and last hash, as the
/// records say (not checked: [`verify`] checks).
///
/// ```no_run
/// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::audit::AuditError> {
/// println!("{}", crew_runtime::audit::head(&store, "default").await?);
/// # Ok(())
/// # }
/// ```
pub async fn head(store: &Store, trail: &str) -> Result<Head, AuditError> {
    let last = store.audit_tail_rows(trail, 1).await?;
    Ok(match last.into_iter().next() {
        Some(row) => Head {
            count: row.seq,
            hash: row.hash,
        },
        None => Head {
            count: 0,
            hash: GENESIS.to_owned(),
        },
    })
}

/// The last `count` records of trail `trail`, oldest first (none stored
/// at sequence 0 or below: see [`outside_the_chain`]).
///
/// ```no_run
/// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::audit::AuditError> {
/// let last = crew_runtime::audit::tail(&store, "default", 20).await?;
/// # let _ = last;
/// # Ok(())
/// # }
/// ```
pub async fn tail(store: &Store, trail: &str, count: usize) -> Result<Vec<Record>, AuditError> {
    let count = i64::try_from(count).unwrap_or(i64::MAX);
    Ok(store
        .audit_tail_rows(trail, count)
        .await?
        .into_iter()
        .map(Record::from_row)
        .collect())
}

/// The trails of `store`: those that have records, and those whose
/// writers left a head though their records are gone (which [`verify`]
/// refuses).
///
/// ```no_run
/// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::audit::AuditError> {
/// for trail in crew_runtime::audit::trails(&store).await? {
///     println!("{trail}");
/// }
/// # Ok(())
/// # }
/// ```
pub async fn trails(store: &Store) -> Result<Vec<String>, AuditError> {
    require_tables(store).await?;
    Ok(store.audit_trail_names().await?)
}

/// Writes every record of trail `trail` to `out`, one JSON object per line
/// ([`Record::to_json`]), a page at a time; returns how many. Records
/// stored at sequence 0 or below are not part of the trail and are left
/// out (see [`outside_the_chain`]).
///
/// ```no_run
/// # async fn run(store: crew_runtime::store::Store) -> Result<(), Box<dyn std::error::Error>> {
/// let written = crew_runtime::audit::export(&store, "default", &mut std::io::stdout().lock()).await?;
/// eprintln!("{written} records");
/// # Ok(())
/// # }
/// ```
pub async fn export(
    store: &Store,
    trail: &str,
    out: &mut impl std::io::Write,
) -> Result<u64, AuditError> {
    let mut after = 0i64;
    let mut written = 0u64;
    loop {
        let rows = store.audit_rows(trail, after, PAGE).await?;
        if rows.is_empty() {
            return Ok(written);
        }
        for row in rows {
            after = row.seq;
            writeln!(out, "{}", Record::from_row(row).to_json())?;
            written += 1;
        }
    }
}
