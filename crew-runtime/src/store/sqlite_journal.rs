//! A durable kickoff's journal appends on an SQLite file, on a connection
//! of their own.
//!
//! An append is on the path of every tool call (SPEC §13: the intent is
//! committed before the tool starts, the result before the model sees it).
//! Through the pool, a statement crosses to the connection's worker thread
//! and its rows cross back: on a small machine each crossing is a thread
//! wake-up of 25 µs or more, several per append, and they cost more than
//! SQLite's own work (a transaction of a few rows in WAL mode with
//! `synchronous=NORMAL`: a write to the log, no `fsync`, about 25 µs).
//!
//! So an append takes this connection and runs its transaction where it
//! is called, when it can do so without waiting: the connection is free
//! (`try_lock`) and no other connection holds the file's write lock (a
//! busy timeout of zero). Otherwise (another kickoff of this process is
//! appending, or another connection is writing) the append waits on the
//! blocking pool, with the store's usual busy timeout, and never on the
//! caller's thread. The connection never checkpoints the log on commit (a
//! checkpoint `fsync`s and can take milliseconds): every
//! [`CHECKPOINT_EVERY`] writes the log is checkpointed on the blocking
//! pool, mostly beside the appends.
//!
//! The other writes of a running kickoff's own row (its creation, its
//! lease renewed or given up, its end, its journal purged) go through this
//! connection too. Through the pool, whose connections checkpoint the log
//! on commit once it is past SQLite's threshold (1,000 pages, which the
//! appends between two checkpoints of their own pass), such a write took
//! the checkpoint on the kickoff's path: 2 to 3 ms at a kickoff's end.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags, params};
use tokio::sync::OnceCell;

use super::StoreError;

/// Writes between two passive checkpoints of the write-ahead log.
const CHECKPOINT_EVERY: u32 = 512;

/// How long an append that waits on the blocking pool waits for the file's
/// write lock: the store's busy timeout.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The journal's own connection to the store's SQLite file, opened on the
/// first append.
pub(crate) struct JournalWriter {
    path: PathBuf,
    writer: OnceCell<Arc<Writer>>,
}

struct Writer {
    connection: Mutex<Connection>,
    /// Checkpoints the log beside the appends.
    checkpointer: Mutex<Connection>,
    since_checkpoint: AtomicU32,
}

/// One append: the statements (SQLite's `?N` parameters) and what they
/// take.
pub(crate) struct Append {
    /// Advances the kickoff's step: `?1` id, `?2` owner, `?3` epoch (the
    /// lease), `?4` the new step, `?5` the step expected. Changes one row
    /// when the lease is held and the count is right.
    pub advance: String,
    /// Inserts one entry: `?1` id, `?2` seq, `?3` kind, `?4` payload.
    pub insert: String,
    pub id: String,
    pub owner: String,
    pub epoch: i64,
    pub last: i64,
    pub after: i64,
    /// Each entry's sequence number, kind and sealed payload.
    pub entries: Vec<(i64, String, Vec<u8>)>,
}

impl JournalWriter {
    pub(crate) fn new(path: PathBuf) -> JournalWriter {
        JournalWriter {
            path,
            writer: OnceCell::new(),
        }
    }

    /// Runs `append` in one transaction: whether it wrote (all entries;
    /// nothing when the kickoff's row did not advance).
    pub(crate) async fn append(&self, append: Append) -> Result<bool, StoreError> {
        self.run(move |connection| write(connection, &append)).await
    }

    /// Runs `work` on the journal's connection: at once on this thread
    /// when nothing is in the way, else on the blocking pool, waiting for
    /// the file's write lock (so `work` may run twice: the first time it
    /// found the file busy and wrote nothing). A write that is not one
    /// statement makes its own transaction (`BEGIN IMMEDIATE`): none is
    /// open around it.
    pub(crate) async fn run<T, F>(&self, mut work: F) -> Result<T, StoreError>
    where
        F: FnMut(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let writer = self
            .writer
            .get_or_try_init(|| {
                let path = self.path.clone();
                async move {
                    let opened = tokio::task::spawn_blocking(move || Writer::open(&path))
                        .await
                        .map_err(|error| StoreError::Query(error.to_string()))?;
                    opened.map(Arc::new)
                }
            })
            .await?;
        // At once, on this thread, when nothing is in the way.
        if let Ok(mut connection) = writer.connection.try_lock() {
            match left_open(&connection).and_then(|()| work(&mut connection)) {
                Err(error) if busy(&error) => {}
                done => {
                    drop(connection);
                    writer.written();
                    return done.map_err(query_failed);
                }
            }
        }
        let waiting = Arc::clone(writer);
        let done = tokio::task::spawn_blocking(move || {
            let mut connection = waiting
                .connection
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            connection.busy_timeout(BUSY_TIMEOUT)?;
            let done = left_open(&connection).and_then(|()| work(&mut connection));
            connection.busy_timeout(Duration::ZERO)?;
            done
        })
        .await
        .map_err(|error| StoreError::Query(error.to_string()))?;
        writer.written();
        done.map_err(query_failed)
    }
}

impl Writer {
    fn open(path: &std::path::Path) -> Result<Writer, StoreError> {
        let open = || -> rusqlite::Result<Connection> {
            // The file was made (and migrated) by the pool; never created
            // here.
            let connection = Connection::open_with_flags(
                path,
                OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )?;
            // The pool's settings (SPEC §13's durability level), but for
            // the two that would make an append wait on the caller's
            // thread.
            connection.pragma_update(None, "synchronous", "NORMAL")?;
            connection.pragma_update(None, "foreign_keys", "ON")?;
            connection.pragma_update(None, "wal_autocheckpoint", 0)?;
            connection.busy_timeout(Duration::ZERO)?;
            Ok(connection)
        };
        let unreachable = |error: rusqlite::Error| StoreError::Unreachable {
            url: format!("sqlite://{}", path.display()),
            reason: error.to_string(),
        };
        Ok(Writer {
            connection: Mutex::new(open().map_err(unreachable)?),
            checkpointer: Mutex::new(open().map_err(unreachable)?),
            since_checkpoint: AtomicU32::new(0),
        })
    }

    /// Counts an append, and every [`CHECKPOINT_EVERY`] of them
    /// checkpoints the log on the blocking pool, in two passes. The first,
    /// on a connection of its own, copies the bulk of the log into the
    /// database beside the appends. The second, holding the appends'
    /// connection (appends that come meanwhile wait for it on the blocking
    /// pool), copies the little written during the first: the next append
    /// then writes the log from its start again. A log checkpointed only
    /// beside the appends would never restart while they go on, and would
    /// grow without end.
    fn written(self: &Arc<Self>) {
        if self.since_checkpoint.fetch_add(1, Ordering::Relaxed) + 1 < CHECKPOINT_EVERY {
            return;
        }
        self.since_checkpoint.store(0, Ordering::Relaxed);
        let writer = Arc::clone(self);
        tokio::task::spawn_blocking(move || {
            for connection in [&writer.checkpointer, &writer.connection] {
                checkpoint(&connection.lock().unwrap_or_else(PoisonError::into_inner));
            }
        });
    }
}

/// A passive checkpoint: copies what no reader still needs and waits for
/// nobody. A failure only leaves the log longer until the next.
fn checkpoint(connection: &Connection) {
    if let Err(error) = connection.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
        tracing::debug!(target: "crew_runtime::store", %error, "a passive checkpoint of the journal's log failed");
    }
}

/// The transaction: the kickoff's row advances (only if the lease is held
/// and the count is right), then the entries are inserted; all or nothing.
fn write(connection: &mut Connection, append: &Append) -> rusqlite::Result<bool> {
    let written = transaction(connection, |connection| {
        let advanced = connection
            .prepare_cached(&append.advance)?
            .execute(params![
                append.id,
                append.owner,
                append.epoch,
                append.last,
                append.after
            ])?;
        if advanced != 1 {
            return Ok(None);
        }
        let mut insert = connection.prepare_cached(&append.insert)?;
        for (seq, kind, payload) in &append.entries {
            insert.execute(params![append.id, seq, kind, payload])?;
        }
        Ok(Some(()))
    })?;
    Ok(written.is_some())
}

/// Runs `work` in a transaction that takes the file's write lock at once
/// (`BEGIN IMMEDIATE`), and commits what it did when it returns `Some`;
/// rolls back on `None` or an error. Its `BEGIN` and `COMMIT` are cached
/// statements (a transaction of rusqlite's would parse them each time).
pub(crate) fn transaction<T>(
    connection: &mut Connection,
    work: impl FnOnce(&Connection) -> rusqlite::Result<Option<T>>,
) -> rusqlite::Result<Option<T>> {
    left_open(connection)?;
    connection.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
    let done = work(connection).and_then(|done| {
        if done.is_some() {
            connection.prepare_cached("COMMIT")?.execute([])?;
        }
        Ok(done)
    });
    if !matches!(done, Ok(Some(_))) && !connection.is_autocommit() {
        // Nothing written: refused, or failed on the way. Should this fail
        // too, the next write rolls back first.
        let _ = connection
            .prepare_cached("ROLLBACK")
            .and_then(|mut rollback| rollback.execute([]));
    }
    done
}

/// Rolls back a transaction an earlier write could not roll back: a
/// statement run inside it would never be committed.
fn left_open(connection: &Connection) -> rusqlite::Result<()> {
    if !connection.is_autocommit() {
        connection.prepare_cached("ROLLBACK")?.execute([])?;
    }
    Ok(())
}

/// Whether `error` is another connection holding the file's write lock.
fn busy(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

fn query_failed(error: rusqlite::Error) -> StoreError {
    StoreError::Query(error.to_string())
}

impl From<rusqlite::Error> for StoreError {
    fn from(error: rusqlite::Error) -> Self {
        query_failed(error)
    }
}
