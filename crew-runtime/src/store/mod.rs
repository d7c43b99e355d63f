//! Approvals that outlive the process: questions to people and their
//! answers, as rows of one store behind one URL.
//!
//! - `sqlite://path` — SQLite, embedded: nothing to install or start, the
//!   file is created when missing. One machine.
//! - `postgres://…` — PostgreSQL, for several processes or replicas that
//!   share their approvals: a waiting call hears of its answer through
//!   `LISTEN`/`NOTIFY`.
//!
//! Each backend is a feature of crew-runtime, `sqlite` and `postgres`
//! (`store` is both): a program builds the database drivers it uses, and
//! a URL of a backend it was built without is refused
//! ([`StoreError::BackendNotBuilt`]).
//!
//! [`Store::connect`] opens it and brings its schema up to date (the
//! migrations are embedded in the program); a database whose schema is
//! newer than the program is refused, never written to.
//! [`Store::open_read_only`] opens a store to read it and changes nothing:
//! no file created, no migration, no write (what `crew-audit` uses).
//! [`StoreApprovals`] is a [`HumanInputSource`](crate::HumanInputSource)
//! whose questions are rows: give it to a crew with
//! [`CrewBuilder::human_input`](crate::CrewBuilder::human_input), and the
//! approval inbox (or your code, through [`Store::decide`]) answers them.
//!
//! ```no_run
//! use std::sync::Arc;
//! use crew_runtime::prelude::*;
//! use crew_runtime::store::{Answer, Decision, Store, StoreApprovals};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let store = Store::connect("sqlite:///var/lib/my-agent/approvals.db").await?;
//! let approvals = Arc::new(StoreApprovals::new(store.clone()));
//! // … `Crew::builder().human_input(approvals)` …
//!
//! // Elsewhere (another process on the same store): answer what waits.
//! for question in store.pending().await? {
//!     store.decide(&question.id, Answer::new("alice", Decision::Deny)).await?;
//! }
//! # Ok(())
//! # }
//! ```

// Accounts hash passwords with argon2: only the inbox needs them.
#[cfg(feature = "inbox")]
mod accounts;
#[cfg(feature = "channels")]
mod announcements;
mod approvals;
#[cfg(feature = "audit")]
pub(crate) mod audit;
#[cfg(feature = "budget")]
mod budget;
// Durable kickoffs' rows and their sealed write-ahead journal (SPEC §13).
#[cfg(feature = "channels")]
mod email;
mod identity;
#[cfg(feature = "durable")]
pub mod journal;
#[cfg(feature = "channels")]
mod links;
#[cfg(feature = "channels")]
mod slack;
#[cfg(all(feature = "sqlite", feature = "durable"))]
pub(crate) mod sqlite_journal;

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqlx::migrate::{Migration, MigrationSource, MigrationType, Migrator};
#[cfg(feature = "postgres")]
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
#[cfg(feature = "sqlite")]
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use tokio::sync::broadcast;

#[cfg(feature = "inbox")]
pub(crate) use accounts::ThrottleRule;
#[cfg(feature = "inbox")]
pub(crate) use accounts::same_secret;
#[cfg(feature = "inbox")]
pub use accounts::{Approver, ApproverScope, Credential, Which};
#[cfg(feature = "channels")]
pub use announcements::Announcement;
#[cfg(feature = "channels")]
pub(crate) use announcements::{Due, told_state};
#[cfg(feature = "audit")]
pub(crate) use approvals::QuestionRecords;
pub use approvals::{
    Answer, CallOutcome, Decision, DecisionError, MAX_EDIT_BYTES, Question, QuestionStatus,
    RecordedAnswer, Refusal, StoreApprovals,
};
#[cfg(feature = "inbox")]
pub(crate) use identity::{identity_key, same_identity};
#[cfg(feature = "channels")]
pub use slack::SlackIdentity;

/// The migrations, in order: the schema this program knows.
const MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "approvals",
        include_str!("migrations/0001_approvals.sql"),
    ),
    (2, "accounts", include_str!("migrations/0002_accounts.sql")),
    (3, "audit", include_str!("migrations/0003_audit.sql")),
    (
        4,
        "approval outcomes",
        include_str!("migrations/0004_approval_outcomes.sql"),
    ),
    (
        5,
        "sign_in_throttle",
        include_str!("migrations/0005_sign_in_throttle.sql"),
    ),
    (
        6,
        "question_reason",
        include_str!("migrations/0006_question_reason.sql"),
    ),
    (7, "kickoffs", include_str!("migrations/0007_kickoffs.sql")),
    (
        8,
        "kickoff_questions",
        include_str!("migrations/0008_kickoff_questions.sql"),
    ),
    (
        9,
        "announcements",
        include_str!("migrations/0009_announcements.sql"),
    ),
    (
        10,
        "approver_email",
        include_str!("migrations/0010_approver_email.sql"),
    ),
    (
        11,
        "question_policies",
        include_str!("migrations/0011_question_policies.sql"),
    ),
    (12, "outbox", include_str!("migrations/0012_outbox.sql")),
    (13, "budgets", include_str!("migrations/0013_budgets.sql")),
    (
        14,
        "budget_purge",
        include_str!("migrations/0014_budget_purge.sql"),
    ),
];

/// The migrations whose text differs on PostgreSQL (triggers are written
/// in each database's own language): version and PostgreSQL's text, which
/// replaces the one in [`MIGRATIONS`] there.
#[cfg(feature = "postgres")]
const POSTGRES_MIGRATIONS: &[(i64, &str)] =
    &[(12, include_str!("migrations/0012_outbox.postgres.sql"))];

/// The newest schema version this program knows.
///
/// ```
/// assert!(crew_runtime::store::SCHEMA_VERSION >= 1);
/// ```
pub const SCHEMA_VERSION: i64 = MIGRATIONS[MIGRATIONS.len() - 1].0;

/// The `NOTIFY` channel on PostgreSQL: its payload is the id of the
/// question that changed.
#[cfg(feature = "postgres")]
pub(crate) const CHANNEL: &str = "crew_approvals";

/// How often a process on SQLite looks for answers (there is no
/// notification between SQLite connections).
#[cfg(feature = "sqlite")]
pub(crate) const SQLITE_POLL: Duration = Duration::from_millis(100);

/// Why the store cannot be used.
///
/// ```
/// use crew_runtime::store::StoreError;
///
/// let error = StoreError::UnsupportedUrl("mysql://db".into());
/// assert!(error.to_string().contains("sqlite://"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The URL names no store this program can open.
    #[error(
        "cannot open the store at {0:?}: use sqlite://PATH (a file, created when missing) or postgres://USER@HOST/DATABASE"
    )]
    UnsupportedUrl(String),
    /// The URL names a backend this program was built without: the
    /// feature `sqlite` or `postgres` of crew-runtime is off. Nothing was
    /// opened.
    #[error(
        "cannot open the store at {url}: this program was built without the `{feature}` feature of crew-runtime; add it (or `store`, for both backends) to crew-runtime's features to use {scheme}… URLs",
        feature = .backend.feature(),
        scheme = .backend.scheme()
    )]
    BackendNotBuilt {
        /// The URL, without its password.
        url: String,
        /// The backend it names.
        backend: Backend,
    },
    /// The URL is of a known kind but cannot be read.
    #[error("the store URL {url:?} is malformed: {reason}")]
    MalformedUrl {
        /// The URL, without its password.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The database could not be reached or opened.
    #[error("cannot connect to the store at {url}: {reason}")]
    Unreachable {
        /// The URL, without its password.
        url: String,
        /// What the driver said.
        reason: String,
    },
    /// The database was written by a newer program: its schema has
    /// versions this one does not know. Nothing was changed.
    #[error(
        "the store's schema is newer than this program (it has version {found}, this program knows up to {known}): upgrade the program"
    )]
    SchemaTooNew {
        /// A version the database has and the program does not know.
        found: i64,
        /// The newest version the program knows.
        known: i64,
    },
    /// The schema could not be brought up to date (a read-only database,
    /// a migration changed since it ran, …).
    #[error("cannot bring the store's schema up to date: {0}")]
    Migration(String),
    /// A query failed.
    #[error("the store failed: {0}")]
    Query(String),
    /// The SQLite file was removed or replaced while the store had it
    /// open: what is written now would go to a file nobody can open
    /// again, so nothing is written. Open the store again.
    #[error(
        "the store's SQLite file {path} was removed or replaced while it was open: nothing more is written to it; open the store again"
    )]
    FileGone {
        /// The file's path.
        path: String,
    },
    /// An approver account or its secrets cannot be made, changed or
    /// found as asked (a bad or taken name, a short password, no such
    /// approver).
    #[error("{0}")]
    Account(String),
    /// A row holds something this program cannot read.
    #[error("the store holds a row this program cannot read: {0}")]
    Corrupt(String),
    /// Opening read-only ([`Store::open_read_only`]): there is no SQLite
    /// file at the path. Nothing was created.
    #[error(
        "there is no SQLite store at {path}: check the path (nothing was created there; reading a store never creates one)"
    )]
    NoSuchFile {
        /// The path, made absolute.
        path: String,
    },
    /// Opening read-only ([`Store::open_read_only`]): the database holds
    /// no store's schema (no program of this crate ever opened it to
    /// write). Nothing was created or migrated.
    #[error(
        "the database at {url} is not a crew store: it has no schema (check the URL; reading a store never creates or migrates one)"
    )]
    NotAStore {
        /// The URL, without its password.
        url: String,
    },
}

impl From<sqlx::Error> for StoreError {
    fn from(error: sqlx::Error) -> Self {
        StoreError::Query(error.to_string())
    }
}

/// Which database a [`Store`] is on.
///
/// ```
/// use crew_runtime::store::Backend;
/// assert_eq!(Backend::Sqlite.to_string(), "SQLite");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Backend {
    /// SQLite, embedded.
    Sqlite,
    /// PostgreSQL.
    Postgres,
}

impl Backend {
    /// The backend a store URL names, built in or not.
    fn of_url(url: &str) -> Option<Backend> {
        if url.starts_with("sqlite:") {
            Some(Backend::Sqlite)
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            Some(Backend::Postgres)
        } else {
            None
        }
    }

    /// The feature of crew-runtime that builds this backend.
    fn feature(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }

    /// The start of this backend's URLs.
    fn scheme(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite://",
            Backend::Postgres => "postgres://",
        }
    }
}

/// The backends this program was built with.
const BUILT: &[Backend] = &[
    #[cfg(feature = "sqlite")]
    Backend::Sqlite,
    #[cfg(feature = "postgres")]
    Backend::Postgres,
];

/// The backend `url` names, when it is one of `built`: a URL of no known
/// backend, or of one left out of the build, is refused. `shown` is the
/// URL without its password, for the error.
fn backend_for(url: &str, built: &[Backend], shown: &str) -> Result<Backend, StoreError> {
    match Backend::of_url(url) {
        Some(backend) if built.contains(&backend) => Ok(backend),
        Some(backend) => Err(StoreError::BackendNotBuilt {
            url: shown.to_owned(),
            backend,
        }),
        None => Err(StoreError::UnsupportedUrl(shown.to_owned())),
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Sqlite => "SQLite",
            Backend::Postgres => "PostgreSQL",
        })
    }
}

#[derive(Clone)]
pub(crate) enum Pool {
    #[cfg(feature = "sqlite")]
    Sqlite(SqlitePool),
    #[cfg(feature = "postgres")]
    Postgres(PgPool),
}

impl Pool {
    /// The backend this pool is of.
    fn backend(&self) -> Backend {
        match self {
            #[cfg(feature = "sqlite")]
            Pool::Sqlite(_) => Backend::Sqlite,
            #[cfg(feature = "postgres")]
            Pool::Postgres(_) => Backend::Postgres,
        }
    }
}

/// Runs `$body` with `$pool` bound to the concrete pool of either backend:
/// the same query text serves both (portable SQL, `$1`-style parameters).
/// Only the backends built in have an arm.
macro_rules! on_pool {
    ($store:expr, |$pool:ident| $body:expr) => {
        match &$store.inner.pool {
            #[cfg(feature = "sqlite")]
            $crate::store::Pool::Sqlite($pool) => $body,
            #[cfg(feature = "postgres")]
            $crate::store::Pool::Postgres($pool) => $body,
        }
    };
}
pub(crate) use on_pool;

struct StoreInner {
    pool: Pool,
    /// The URL without its password, for messages.
    url: String,
    /// Ids of questions that changed, from any process on the store.
    changes: broadcast::Sender<String>,
    /// Stops the watcher of changes with the last handle.
    _watcher: tokio::task::AbortHandle,
    /// The SQLite file the pool opened (none for PostgreSQL or an
    /// in-memory database).
    file: Option<SqliteFile>,
    /// The connection a durable kickoff's journal appends through, on a
    /// writable SQLite file.
    #[cfg(all(feature = "sqlite", feature = "durable"))]
    journal_writer: Option<sqlite_journal::JournalWriter>,
    /// How far this store's clock is ahead of the real one, in ms, or the
    /// time it stands at ([`FROZEN`] set): moved only by tests
    /// (`Store::advance_clock`, `Store::freeze_clock`).
    clock: std::sync::atomic::AtomicI64,
    /// On SQLite, where this process's busiest writers take turns (see
    /// [`Store::write_turn`]).
    #[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
    write_turns: WriteTurns,
    /// When this process next purges budgets' old reservations (ms on the
    /// store's clock).
    #[cfg(feature = "budget")]
    budget_purge_at: std::sync::atomic::AtomicI64,
}

/// The hex SHA-256 of `bytes` (a secret as stored, a policy set's key).
pub(crate) fn hex_sha256(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Turns to write, on SQLite (see [`Store::write_turn`]): questions first,
/// background work while none waits.
#[derive(Default)]
#[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
struct WriteTurns {
    lock: tokio::sync::Mutex<()>,
    /// Question writers waiting for a turn.
    asking: std::sync::atomic::AtomicUsize,
    /// Told when no question writer waits.
    idle: tokio::sync::Notify,
}

impl WriteTurns {
    /// A question's turn: counted from when it starts waiting until it
    /// is done writing; `exclusive`, one writer at a time (SQLite).
    async fn asking(&self, exclusive: bool) -> WriteTurn<'_> {
        use std::sync::atomic::Ordering;
        self.asking.fetch_add(1, Ordering::AcqRel);
        // Counted off when the turn drops, even if this wait is dropped.
        let counted = Asking(self);
        let turn = if exclusive {
            Some(self.lock.lock().await)
        } else {
            None
        };
        WriteTurn {
            _turn: turn,
            _asking: Some(counted),
        }
    }

    /// A turn for background work, once no question waits or writes;
    /// `exclusive`, one writer at a time (SQLite).
    async fn background(&self, exclusive: bool) -> WriteTurn<'_> {
        use std::sync::atomic::Ordering;
        loop {
            let idle = self.idle.notified();
            if self.asking.load(Ordering::Acquire) == 0 {
                let turn = if exclusive {
                    Some(self.lock.lock().await)
                } else {
                    None
                };
                return WriteTurn {
                    _turn: turn,
                    _asking: None,
                };
            }
            idle.await;
        }
    }
}

/// A turn to write (see [`Store::write_turn`]), given back when dropped.
pub(crate) struct WriteTurn<'a> {
    _turn: Option<tokio::sync::MutexGuard<'a, ()>>,
    _asking: Option<Asking<'a>>,
}

/// A question counted among those waiting or writing.
struct Asking<'a>(&'a WriteTurns);

impl Drop for Asking<'_> {
    fn drop(&mut self) {
        use std::sync::atomic::Ordering;
        if self.0.asking.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

/// The bit of [`StoreInner::clock`] that says the clock stands still (at
/// the time in the other bits).
const FROZEN: i64 = 1 << 62;

/// A store's clock as a test left it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TestClock {
    /// The real time.
    Real,
    /// The real time and this many ms.
    Ahead(i64),
    /// This time (ms since the Unix epoch), standing still.
    At(i64),
}

/// An SQLite file as it was when the store opened it. A file removed (or
/// replaced) under an open connection still takes writes, into a file that
/// no longer has a name: the store checks around its writes that must not
/// be lost, and fails them instead. Never made without the `sqlite`
/// feature.
#[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
struct SqliteFile {
    path: std::path::PathBuf,
    identity: (u64, u64),
}

#[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
impl SqliteFile {
    fn identity(path: &std::path::Path) -> Option<(u64, u64)> {
        let metadata = std::fs::metadata(path).ok()?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            Some((metadata.dev(), metadata.ino()))
        }
        #[cfg(not(unix))]
        {
            let _ = metadata;
            Some((0, 0))
        }
    }

    fn still_there(&self) -> Result<(), StoreError> {
        if Self::identity(&self.path) == Some(self.identity) {
            Ok(())
        } else {
            Err(StoreError::FileGone {
                path: self.path.display().to_string(),
            })
        }
    }
}

impl Drop for StoreInner {
    fn drop(&mut self) {
        self._watcher.abort();
    }
}

/// A store of approvals: SQLite or PostgreSQL behind one URL. Cloning is
/// cheap (the clones share one connection pool).
///
/// ```no_run
/// # async fn run() -> Result<(), crew_runtime::store::StoreError> {
/// use crew_runtime::store::Store;
///
/// let embedded = Store::connect("sqlite://approvals.db").await?;
/// let shared = Store::connect("postgres://agents@db.internal/approvals").await?;
/// # let _ = (embedded, shared);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Store {
    inner: Arc<StoreInner>,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("url", &self.inner.url)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// An error when the SQLite file was removed or replaced since the
    /// store opened it (always fine on PostgreSQL).
    /// The store's clock now, in ms since the Unix epoch: what questions'
    /// deadlines are set from and compared with.
    pub(crate) fn now(&self) -> i64 {
        match self.test_clock() {
            TestClock::Real => now_millis(),
            TestClock::Ahead(offset) => now_millis().saturating_add(offset),
            TestClock::At(at) => at,
        }
    }

    /// The store's clock now, in whole seconds since the Unix epoch.
    #[cfg(feature = "channels")]
    pub(crate) fn now_secs(&self) -> i64 {
        self.now().div_euclid(1_000)
    }

    /// What a test did to the store's clock.
    pub(crate) fn test_clock(&self) -> TestClock {
        let clock = self.inner.clock.load(std::sync::atomic::Ordering::Acquire);
        if clock & FROZEN != 0 {
            TestClock::At(clock & !FROZEN)
        } else if clock == 0 {
            TestClock::Real
        } else {
            TestClock::Ahead(clock)
        }
    }

    /// Moves this store's clock forward by `by`, for this handle and its
    /// clones (not for another process's): questions' deadlines, and on a
    /// durable kickoff's journal the leases and entries' times, are then
    /// compared with the moved clock. A clock made to stand still
    /// ([`freeze_clock`](Self::freeze_clock)) stands `by` later. For tests
    /// only ("parked for a week"), built with the test-only feature
    /// `test-clock`, which no default or documented feature enables.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) {
    /// store.advance_clock(std::time::Duration::from_secs(7 * 24 * 3600));
    /// # }
    /// ```
    #[cfg(feature = "test-clock")]
    pub fn advance_clock(&self, by: Duration) {
        let by = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        let clock = &self.inner.clock;
        let _ = clock.fetch_update(
            std::sync::atomic::Ordering::AcqRel,
            std::sync::atomic::Ordering::Acquire,
            |clock| {
                Some(if clock & FROZEN != 0 {
                    ((clock & !FROZEN).saturating_add(by) & !FROZEN) | FROZEN
                } else {
                    clock.saturating_add(by) & !FROZEN
                })
            },
        );
    }

    /// Makes this store's clock stand at `at` (for this handle and its
    /// clones) until advanced: "answered exactly at the deadline". For
    /// tests only, as [`advance_clock`](Self::advance_clock). Leases do
    /// not run out while it stands.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store, question: crew_runtime::store::Question) {
    /// store.freeze_clock(question.deadline);
    /// # }
    /// ```
    #[cfg(feature = "test-clock")]
    pub fn freeze_clock(&self, at: SystemTime) {
        self.inner.clock.store(
            (millis(at) & !FROZEN) | FROZEN,
            std::sync::atomic::Ordering::Release,
        );
    }

    pub(crate) fn file_still_there(&self) -> Result<(), StoreError> {
        self.inner
            .file
            .as_ref()
            .map_or(Ok(()), SqliteFile::still_there)
    }

    /// Opens the store at `url` and brings its schema up to date: an
    /// SQLite file is created when missing. Must be called inside a tokio
    /// runtime.
    ///
    /// Errors: a URL of another kind or malformed, or of a backend this
    /// program was built without ([`StoreError::BackendNotBuilt`]), a
    /// database that cannot be reached or written, a schema newer than
    /// this program ([`StoreError::SchemaTooNew`]; the database is left as
    /// it is).
    ///
    /// ```
    /// use crew_runtime::store::{Store, StoreError};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let error = Store::connect("mysql://db/approvals").await.unwrap_err();
    /// assert!(matches!(error, StoreError::UnsupportedUrl(_)));
    ///
    /// let dir = std::env::temp_dir().join(format!("crew-store-doc-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir).unwrap();
    /// let store = Store::connect(&format!("sqlite://{}", dir.join("a.db").display())).await.unwrap();
    /// assert!(store.pending().await.unwrap().is_empty());
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # }
    /// ```
    pub async fn connect(url: &str) -> Result<Store, StoreError> {
        let shown = without_password(url);
        let (pool, file) = match backend_for(url, BUILT, &shown)? {
            #[cfg(feature = "sqlite")]
            Backend::Sqlite => connect_sqlite(url, &shown).await?,
            #[cfg(feature = "postgres")]
            Backend::Postgres => (connect_postgres(url, &shown).await?, None),
            // Refused by `backend_for` already.
            #[cfg(not(all(feature = "sqlite", feature = "postgres")))]
            backend => {
                return Err(StoreError::BackendNotBuilt {
                    url: shown,
                    backend,
                });
            }
        };
        migrate(&pool).await?;
        Ok(Store::on(pool, url, shown, file, true))
    }

    /// Opens the store at `url` to read it, and changes nothing: an SQLite
    /// file must exist (it is never created) and is opened read-only; a
    /// PostgreSQL session refuses writes; no migration runs. A database
    /// that holds no store's schema is refused ([`StoreError::NotAStore`]),
    /// as is one newer than the program. What `crew-audit` opens.
    ///
    /// It works on a read-only copy of a store: a file of mode 0444, or a
    /// file in a directory nobody may write. SQLite reads a database in
    /// WAL mode through a shared-memory file beside it; where that cannot
    /// be made, the file is opened as immutable instead, which is done
    /// only when no write-ahead log (`-wal`) beside it holds changes
    /// (immutable reading would skip them). In a directory it may write,
    /// SQLite may leave its `-shm` and `-wal` files beside the file; the
    /// file itself is never written.
    ///
    /// Errors: as [`connect`](Self::connect), and
    /// [`StoreError::NoSuchFile`] for an SQLite file that is not there.
    ///
    /// ```
    /// use crew_runtime::store::{Store, StoreError};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), StoreError> {
    /// let dir = std::env::temp_dir().join(format!("crew-store-ro-doc-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir).expect("a directory");
    /// let path = dir.join("approvals.db");
    /// let url = format!("sqlite://{}", path.display());
    ///
    /// // A mistyped path is refused, and nothing is created there.
    /// let error = Store::open_read_only(&url).await.unwrap_err();
    /// assert!(matches!(error, StoreError::NoSuchFile { .. }));
    /// assert!(!path.exists());
    ///
    /// // A store made (and migrated) by `connect` reads as it is.
    /// drop(Store::connect(&url).await?);
    /// let store = Store::open_read_only(&url).await?;
    /// assert!(store.pending().await?.is_empty());
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok(())
    /// # }
    /// ```
    pub async fn open_read_only(url: &str) -> Result<Store, StoreError> {
        let shown = without_password(url);
        let (pool, file) = match backend_for(url, BUILT, &shown)? {
            #[cfg(feature = "sqlite")]
            Backend::Sqlite => open_sqlite_read_only(url, &shown).await?,
            #[cfg(feature = "postgres")]
            Backend::Postgres => (open_postgres_read_only(url, &shown).await?, None),
            // Refused by `backend_for` already.
            #[cfg(not(all(feature = "sqlite", feature = "postgres")))]
            backend => {
                return Err(StoreError::BackendNotBuilt {
                    url: shown,
                    backend,
                });
            }
        };
        check_schema(&pool, &shown).await?;
        Ok(Store::on(pool, url, shown, file, false))
    }

    /// A store on `pool`, its watcher of changes started; `writable`
    /// unless opened to read.
    fn on(pool: Pool, url: &str, shown: String, file: Option<SqliteFile>, writable: bool) -> Store {
        #[cfg(all(feature = "sqlite", feature = "durable"))]
        let journal_writer = file
            .as_ref()
            .filter(|_| writable)
            .map(|file| sqlite_journal::JournalWriter::new(file.path.clone()));
        #[cfg(not(all(feature = "sqlite", feature = "durable")))]
        let _ = writable;
        let (changes, _) = broadcast::channel(1024);
        let watcher = tokio::spawn(watch_changes(pool.clone(), url.to_owned(), changes.clone()));
        Store {
            inner: Arc::new(StoreInner {
                pool,
                url: shown,
                changes,
                _watcher: watcher.abort_handle(),
                file,
                #[cfg(all(feature = "sqlite", feature = "durable"))]
                journal_writer,
                clock: std::sync::atomic::AtomicI64::new(0),
                write_turns: WriteTurns::default(),
                #[cfg(feature = "budget")]
                budget_purge_at: std::sync::atomic::AtomicI64::new(0),
            }),
        }
    }

    /// A turn to write a question. On SQLite this process's writers of
    /// questions and announcements queue here, each taking the file's
    /// write lock as the one before lets it go, rather than in SQLite's
    /// busy handler, which sleeps in steps of up to 100 ms (a burst of
    /// questions would wait in those steps). On PostgreSQL, whose writers
    /// do not exclude each other, the turn is not exclusive: it only holds
    /// background writes back while it lasts.
    pub(crate) async fn write_turn(&self) -> WriteTurn<'_> {
        let exclusive = self.backend() == Backend::Sqlite;
        self.inner.write_turns.asking(exclusive).await
    }

    /// A turn for background work (delivering announcements): given only
    /// while no question of this process waits for a turn or writes, so
    /// that announcing never slows asking.
    #[cfg_attr(not(feature = "channels"), allow(dead_code))]
    pub(crate) async fn background_write_turn(&self) -> WriteTurn<'_> {
        let exclusive = self.backend() == Backend::Sqlite;
        self.inner.write_turns.background(exclusive).await
    }

    /// Which database the store is on.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), crew_runtime::store::StoreError> {
    /// use crew_runtime::store::{Backend, Store};
    /// let store = Store::connect("sqlite://approvals.db").await?;
    /// assert_eq!(store.backend(), Backend::Sqlite);
    /// # Ok(())
    /// # }
    /// ```
    pub fn backend(&self) -> Backend {
        self.inner.pool.backend()
    }

    /// The store's URL, without its password.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), crew_runtime::store::StoreError> {
    /// let store = crew_runtime::store::Store::connect("postgres://ops:secret@db/approvals").await?;
    /// assert_eq!(store.url(), "postgres://ops:***@db/approvals");
    /// # Ok(())
    /// # }
    /// ```
    pub fn url(&self) -> &str {
        &self.inner.url
    }

    /// The ids of questions as they change (asked, answered, expired), in
    /// this process or any other on the store: what an inbox listens to.
    /// On PostgreSQL each change is announced with `NOTIFY`; on SQLite a
    /// change made by another process is seen within 100 ms and announced
    /// with an empty id ("something changed").
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) {
    /// let mut changes = store.changes();
    /// while let Ok(id) = changes.recv().await {
    ///     println!("question {id} changed");
    /// }
    /// # }
    /// ```
    pub fn changes(&self) -> broadcast::Receiver<String> {
        self.inner.changes.subscribe()
    }

    /// Announces that question `id` changed, to this process and, on
    /// PostgreSQL, to every other.
    pub(crate) async fn announce(&self, id: &str) {
        let _ = self.inner.changes.send(id.to_owned());
        match &self.inner.pool {
            #[cfg(feature = "postgres")]
            Pool::Postgres(pool) => {
                // Others fall back to polling if this is lost.
                let _ = sqlx::query("SELECT pg_notify($1, $2)")
                    .bind(CHANNEL)
                    .bind(id)
                    .execute(pool)
                    .await;
            }
            // Other processes on SQLite see the change by polling.
            #[cfg(feature = "sqlite")]
            Pool::Sqlite(_) => {}
        }
    }
}

/// `error`, from the driver, as a malformed URL `shown`.
fn malformed(shown: &str) -> impl Fn(sqlx::Error) -> StoreError + '_ {
    move |error| StoreError::MalformedUrl {
        url: shown.to_owned(),
        reason: error.to_string(),
    }
}

/// `error`, from the driver, as a store `shown` that cannot be reached.
fn unreachable(shown: &str) -> impl Fn(sqlx::Error) -> StoreError + '_ {
    move |error| StoreError::Unreachable {
        url: shown.to_owned(),
        reason: error.to_string(),
    }
}

/// Opens (creating it when missing) the SQLite file of `url`, and the
/// file's identity to watch.
#[cfg(feature = "sqlite")]
async fn connect_sqlite(url: &str, shown: &str) -> Result<(Pool, Option<SqliteFile>), StoreError> {
    let options = SqliteConnectOptions::from_str(url)
        .map_err(malformed(shown))?
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        // SPEC §13's durability level: in WAL mode, a commit survives the
        // process being killed, not a power loss (`FULL` would).
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(Duration::from_secs(10))
        .foreign_keys(true);
    // Absolute: the program may change its directory later.
    let path = std::path::absolute(options.get_filename())
        .unwrap_or_else(|_| options.get_filename().to_owned());
    // Sixteen: one is the change watcher's for good, and sixteen durable
    // kickoffs parking at once in one process stalled for the acquire
    // timeout about one run in five with four connections (none with
    // eight or more). A connection costs little until used (its page
    // cache grows as it reads).
    let pool = SqlitePoolOptions::new()
        .max_connections(16)
        // A connection to a local file does not go stale: no ping before
        // each use (a round trip to the connection's worker, as long as
        // the statement itself on a durable kickoff's path).
        .test_before_acquire(false)
        .connect_with(options)
        .await
        .map_err(unreachable(shown))?;
    // Only a file on disk is watched (an in-memory database has no path
    // that exists).
    let file = SqliteFile::identity(&path).map(|identity| SqliteFile { path, identity });
    Ok((Pool::Sqlite(pool), file))
}

/// Connects to the PostgreSQL database of `url`.
#[cfg(feature = "postgres")]
async fn connect_postgres(url: &str, shown: &str) -> Result<Pool, StoreError> {
    let options = PgConnectOptions::from_str(url).map_err(malformed(shown))?;
    let pool = PgPoolOptions::new()
        .max_connections(8)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(options)
        .await
        .map_err(unreachable(shown))?;
    Ok(Pool::Postgres(pool))
}

/// Opens the SQLite file of `url`, which must exist, read-only, and the
/// file's identity to watch.
#[cfg(feature = "sqlite")]
async fn open_sqlite_read_only(
    url: &str,
    shown: &str,
) -> Result<(Pool, Option<SqliteFile>), StoreError> {
    // Set after the URL's own options: a `mode=rwc` in it must not create
    // or write the file.
    let options = SqliteConnectOptions::from_str(url)
        .map_err(malformed(shown))?
        .create_if_missing(false)
        .read_only(true)
        .busy_timeout(Duration::from_secs(10))
        .foreign_keys(true);
    let path = std::path::absolute(options.get_filename())
        .unwrap_or_else(|_| options.get_filename().to_owned());
    // Checked first: SQLite's own refusal ("unable to open database file")
    // does not say that the file is missing.
    if !path.is_file() {
        return Err(StoreError::NoSuchFile {
            path: path.display().to_string(),
        });
    }
    let pool = sqlite_read_only_pool(options, &path)
        .await
        .map_err(|(error, advice)| StoreError::Unreachable {
            url: shown.to_owned(),
            reason: format!("{error}{advice}"),
        })?;
    let file = SqliteFile::identity(&path).map(|identity| SqliteFile { path, identity });
    Ok((Pool::Sqlite(pool), file))
}

/// Connects to the PostgreSQL database of `url` in sessions that refuse
/// writes.
#[cfg(feature = "postgres")]
async fn open_postgres_read_only(url: &str, shown: &str) -> Result<Pool, StoreError> {
    let options = PgConnectOptions::from_str(url)
        .map_err(malformed(shown))?
        .options([("default_transaction_read_only", "on")]);
    let pool = PgPoolOptions::new()
        .max_connections(4)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(options)
        .await
        .map_err(unreachable(shown))?;
    Ok(Pool::Postgres(pool))
}

/// Brings the schema up to date, refusing a database newer than the program.
async fn migrate(pool: &Pool) -> Result<(), StoreError> {
    let migrator = Migrator::new(Embedded(pool.backend()))
        .await
        .map_err(|error| StoreError::Migration(error.to_string()))?;
    let ran = match pool {
        #[cfg(feature = "sqlite")]
        Pool::Sqlite(pool) => migrator.run(pool).await,
        #[cfg(feature = "postgres")]
        Pool::Postgres(pool) => migrator.run(pool).await,
    };
    ran.map_err(|error| match error {
        sqlx::migrate::MigrateError::VersionMissing(found) => StoreError::SchemaTooNew {
            found,
            known: SCHEMA_VERSION,
        },
        other => StoreError::Migration(other.to_string()),
    })
}

/// A read-only pool on the SQLite file at `path` (which exists), or why
/// not with advice to add to the driver's words.
///
/// A database in WAL mode is read through a shared-memory file (`-shm`)
/// that SQLite makes beside it; in a directory nobody may write it cannot,
/// and the file is opened as immutable instead (no locks, no log). Only
/// when no write-ahead log (`-wal`) beside it holds changes, which
/// immutable reading would skip (a store being written has such a log, and
/// is read through the first way, from a directory SQLite may write).
#[cfg(feature = "sqlite")]
async fn sqlite_read_only_pool(
    options: SqliteConnectOptions,
    path: &std::path::Path,
) -> Result<SqlitePool, (sqlx::Error, &'static str)> {
    // SQLite opens lazily: a first read tells whether reading works.
    async fn opened(options: SqliteConnectOptions) -> Result<SqlitePool, sqlx::Error> {
        let pool = SqlitePoolOptions::new()
            .max_connections(3)
            .connect_with(options)
            .await?;
        sqlx::query("SELECT count(*) FROM sqlite_master")
            .fetch_one(&pool)
            .await?;
        Ok(pool)
    }
    let error = match opened(options.clone()).await {
        Ok(pool) => return Ok(pool),
        Err(error) => error,
    };
    let mut log = path.as_os_str().to_owned();
    log.push("-wal");
    if std::fs::metadata(&log).is_ok_and(|log| log.len() > 0) {
        return Err((
            error,
            " (its write-ahead log beside it holds changes, which SQLite reads only where it may write beside the file: copy the file with its -wal into a writable directory)",
        ));
    }
    opened(options.immutable(true))
        .await
        .map_err(|error| (error, ""))
}

/// For a store opened read-only: refuses a database without a store's
/// schema, or with a schema newer than the program. Migrates nothing.
async fn check_schema(pool: &Pool, url: &str) -> Result<(), StoreError> {
    if !has_table(pool, "_sqlx_migrations").await? {
        return Err(StoreError::NotAStore {
            url: url.to_owned(),
        });
    }
    let sql = "SELECT MAX(version) FROM _sqlx_migrations";
    let newest: Option<i64> = match pool {
        #[cfg(feature = "sqlite")]
        Pool::Sqlite(pool) => sqlx::query_scalar(sql).fetch_one(pool).await?,
        #[cfg(feature = "postgres")]
        Pool::Postgres(pool) => sqlx::query_scalar(sql).fetch_one(pool).await?,
    };
    match newest {
        Some(found) if found > SCHEMA_VERSION => Err(StoreError::SchemaTooNew {
            found,
            known: SCHEMA_VERSION,
        }),
        _ => Ok(()),
    }
}

/// Whether the database on `pool` has a table called `name` (in the
/// schemas its queries see).
pub(crate) async fn has_table(pool: &Pool, name: &str) -> Result<bool, StoreError> {
    Ok(match pool {
        #[cfg(feature = "sqlite")]
        Pool::Sqlite(pool) => {
            sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = $1)",
            )
            .bind(name)
            .fetch_one(pool)
            .await?
        }
        #[cfg(feature = "postgres")]
        Pool::Postgres(pool) => {
            sqlx::query_scalar("SELECT to_regclass($1) IS NOT NULL")
                .bind(name)
                .fetch_one(pool)
                .await?
        }
    })
}

/// The migrations compiled into the program, as the backend runs them.
#[derive(Debug)]
struct Embedded(Backend);

impl MigrationSource<'static> for Embedded {
    fn resolve(
        self,
    ) -> futures_util::future::BoxFuture<
        'static,
        Result<Vec<Migration>, Box<dyn std::error::Error + Send + Sync>>,
    > {
        let Embedded(backend) = self;
        Box::pin(async move {
            Ok(MIGRATIONS
                .iter()
                .map(|&(version, description, sql)| {
                    let sql = match backend {
                        #[cfg(feature = "postgres")]
                        Backend::Postgres => POSTGRES_MIGRATIONS
                            .iter()
                            .find(|(changed, _)| *changed == version)
                            .map_or(sql, |(_, text)| text),
                        _ => sql,
                    };
                    Migration::new(
                        version,
                        Cow::Borrowed(description),
                        MigrationType::Simple,
                        Cow::Borrowed(sql),
                        false,
                    )
                })
                .collect())
        })
    }
}

/// Announces the changes other processes make: PostgreSQL's `NOTIFY`, or
/// SQLite's data version read every [`SQLITE_POLL`] (100 ms). `url` names
/// the store in the log of a failing listener (PostgreSQL only).
#[cfg_attr(not(feature = "postgres"), allow(unused_variables))]
async fn watch_changes(pool: Pool, url: String, changes: broadcast::Sender<String>) {
    match pool {
        #[cfg(feature = "postgres")]
        Pool::Postgres(pool) => loop {
            let listener = async {
                let mut listener = sqlx::postgres::PgListener::connect_with(&pool).await?;
                listener.listen(CHANNEL).await?;
                // Listening (again): what was announced while nobody
                // listened (the server restarted, say) is lost, so say
                // something may have changed.
                let _ = changes.send(String::new());
                loop {
                    let notification = listener.recv().await?;
                    let _ = changes.send(notification.payload().to_owned());
                }
                #[allow(unreachable_code)]
                Ok::<(), sqlx::Error>(())
            };
            if let Err(error) = listener.await {
                tracing::warn!(store = %without_password(&url), %error, "listening for approvals failed; retrying");
                // Waiters poll meanwhile; say something may have changed.
                let _ = changes.send(String::new());
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        },
        #[cfg(feature = "sqlite")]
        Pool::Sqlite(pool) => {
            let mut seen: Option<i64> = None;
            let mut connection = None;
            let mut first = true;
            loop {
                // The first look is at once: a change made before it (an
                // answer given while the store was opening) is announced
                // rather than taken as the starting point.
                if !std::mem::take(&mut first) {
                    tokio::time::sleep(SQLITE_POLL).await;
                }
                // `data_version` is per connection: keep one.
                if connection.is_none() {
                    connection = pool.acquire().await.ok();
                }
                let Some(conn) = connection.as_mut() else {
                    continue;
                };
                match sqlx::query_scalar::<_, i64>("PRAGMA data_version")
                    .fetch_one(&mut **conn)
                    .await
                {
                    Ok(version) => {
                        // A first reading (of a new connection too) cannot
                        // tell what changed before it: say something may have.
                        if seen != Some(version) {
                            let _ = changes.send(String::new());
                        }
                        seen = Some(version);
                    }
                    Err(_) => connection = None,
                }
            }
        }
    }
}

/// `url` with its password, if any, replaced by `***`.
fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, path) = match rest.find('/') {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    match authority.rsplit_once('@') {
        Some((credentials, host)) => match credentials.split_once(':') {
            Some((user, _password)) => format!("{scheme}://{user}:***@{host}{path}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

/// Milliseconds since the Unix epoch, as stored.
pub(crate) fn millis(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |since| {
        i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
    })
}

/// The time stored as `millis`.
pub(crate) fn time_of(millis: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(u64::try_from(millis).unwrap_or(0))
}

/// Now, as stored.
pub(crate) fn now_millis() -> i64 {
    millis(SystemTime::now())
}

/// A new unguessable id: a UUID v4 (122 random bits).
pub(crate) fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_question_waiting_to_write_goes_before_background_work() {
        let turns = Arc::new(WriteTurns::default());
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        let first = turns.asking(true).await;
        let spawn = |background: bool| {
            let (turns, order) = (Arc::clone(&turns), Arc::clone(&order));
            tokio::spawn(async move {
                let _turn = if background {
                    turns.background(true).await
                } else {
                    turns.asking(true).await
                };
                order
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(if background { "background" } else { "asking" });
            })
        };
        // The background work comes first, then a question: the question
        // writes first all the same.
        let background = spawn(true);
        tokio::task::yield_now().await;
        let asking = spawn(false);
        // Both wait: the question counted beside the one writing.
        while turns.asking.load(std::sync::atomic::Ordering::Acquire) < 2 {
            tokio::task::yield_now().await;
        }
        drop(first);
        let (background, asking) = tokio::join!(background, asking);
        background.expect("no panic");
        asking.expect("no panic");
        let order = order
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        assert_eq!(order, ["asking", "background"]);
    }

    #[tokio::test]
    async fn questions_write_together_on_postgres_and_background_work_waits_for_them() {
        let turns = WriteTurns::default();
        // Not exclusive: a second question gets its turn beside the first.
        let first = turns.asking(false).await;
        let second = tokio::time::timeout(Duration::from_secs(5), turns.asking(false))
            .await
            .expect("a turn beside the first");
        let mut background = Box::pin(turns.background(false));
        assert!(
            futures_util::poll!(background.as_mut()).is_pending(),
            "background work waits while questions write"
        );
        drop(first);
        assert!(futures_util::poll!(background.as_mut()).is_pending());
        drop(second);
        tokio::time::timeout(Duration::from_secs(5), background)
            .await
            .expect("its turn once no question writes");
    }

    #[test]
    fn passwords_never_show_in_urls() {
        assert_eq!(
            without_password("postgres://ops:s3cret@db:5432/approvals?sslmode=disable"),
            "postgres://ops:***@db:5432/approvals?sslmode=disable"
        );
        assert_eq!(
            without_password("postgres://ops@db/approvals"),
            "postgres://ops@db/approvals"
        );
        assert_eq!(without_password("sqlite://a.db"), "sqlite://a.db");
        assert_eq!(without_password("postgres://a:b@c"), "postgres://a:***@c");
    }

    #[test]
    fn a_url_of_a_backend_left_out_of_the_build_is_refused_naming_the_feature() {
        let only_sqlite = [Backend::Sqlite];
        let error = backend_for(
            "postgres://ops:s3cret@db/approvals",
            &only_sqlite,
            "postgres://ops:***@db/approvals",
        )
        .expect_err("postgres is not built");
        assert!(matches!(
            error,
            StoreError::BackendNotBuilt {
                backend: Backend::Postgres,
                ..
            }
        ));
        let message = error.to_string();
        assert!(
            message.contains("built without the `postgres` feature of crew-runtime"),
            "{message}"
        );
        assert!(message.contains("postgres://…"), "{message}");
        assert!(
            message.contains("postgres://ops:***@db/approvals"),
            "{message}"
        );
        assert!(!message.contains("s3cret"), "{message}");

        let only_postgres = [Backend::Postgres];
        let error = backend_for("sqlite://a.db", &only_postgres, "sqlite://a.db")
            .expect_err("sqlite is not built");
        let message = error.to_string();
        assert!(message.contains("the `sqlite` feature"), "{message}");
        assert!(message.contains("sqlite://…"), "{message}");
    }

    #[test]
    fn a_url_of_a_backend_built_in_is_accepted_and_an_unknown_one_is_not() {
        let both = [Backend::Sqlite, Backend::Postgres];
        for (url, backend) in [
            ("sqlite://a.db", Backend::Sqlite),
            ("sqlite::memory:", Backend::Sqlite),
            ("postgres://db/approvals", Backend::Postgres),
            ("postgresql://db/approvals", Backend::Postgres),
        ] {
            assert_eq!(backend_for(url, &both, url).ok(), Some(backend), "{url}");
        }
        assert!(matches!(
            backend_for("mysql://db", &both, "mysql://db"),
            Err(StoreError::UnsupportedUrl(_))
        ));
        // What this build has: at least one backend.
        assert!(!BUILT.is_empty());
    }

    #[cfg(not(feature = "postgres"))]
    #[tokio::test]
    async fn connecting_to_postgres_without_the_feature_says_to_add_it() {
        // Port 1 on the loopback: nothing is (or would be) contacted.
        for result in [
            Store::connect("postgres://ops@127.0.0.1:1/approvals").await,
            Store::open_read_only("postgres://ops@127.0.0.1:1/approvals").await,
        ] {
            let error = result.expect_err("postgres is not built");
            assert!(
                matches!(
                    error,
                    StoreError::BackendNotBuilt {
                        backend: Backend::Postgres,
                        ..
                    }
                ),
                "{error}"
            );
        }
    }

    #[cfg(not(feature = "sqlite"))]
    #[tokio::test]
    async fn opening_sqlite_without_the_feature_says_to_add_it() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let url = format!("sqlite://{}", dir.path().join("a.db").display());
        for result in [
            Store::connect(&url).await,
            Store::open_read_only(&url).await,
        ] {
            let error = result.expect_err("sqlite is not built");
            assert!(
                matches!(
                    error,
                    StoreError::BackendNotBuilt {
                        backend: Backend::Sqlite,
                        ..
                    }
                ),
                "{error}"
            );
        }
        // Nothing was created.
        assert!(!dir.path().join("a.db").exists());
    }

    #[test]
    fn times_round_trip_in_milliseconds() {
        let now = now_millis();
        assert_eq!(millis(time_of(now)), now);
    }

    /// SPEC §13's durability level on SQLite: WAL, `synchronous=NORMAL`.
    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn a_sqlite_store_runs_in_wal_mode_with_synchronous_normal() {
        let dir = std::env::temp_dir().join(format!("crew-sync-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let url = format!("sqlite://{}", dir.join("store.db").display());
        let store = Store::connect(&url).await.expect("connects");
        let Pool::Sqlite(pool) = &store.inner.pool else {
            panic!("a sqlite:// URL opens SQLite")
        };
        let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
            .fetch_one(pool)
            .await
            .expect("reads");
        let synchronous: i64 = sqlx::query_scalar("PRAGMA synchronous")
            .fetch_one(pool)
            .await
            .expect("reads");
        assert_eq!((mode.as_str(), synchronous), ("wal", 1), "1 is NORMAL");
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
