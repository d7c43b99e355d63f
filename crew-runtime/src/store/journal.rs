//! Durable kickoffs in the store (SPEC §13): a row per kickoff with its
//! status and lease, and its write-ahead journal, sealed.
//!
//! This is the store's layer of durable kickoffs; the runtime's replay and
//! resumer are built on it. What it guarantees:
//!
//! - **One writer, fenced.** A kickoff is held through a [`Lease`]: an
//!   owner and an epoch that grows by one with each claim. Every write of
//!   the holder ([`Journal::append`], [`Journal::renew`], [`Journal::park`],
//!   [`Journal::finish`], …) is one transaction, conditional on that owner
//!   and epoch still being current *and* on the lease not having run out
//!   on the **database's clock**; otherwise it writes nothing and fails with
//!   [`JournalError::LeaseLost`]. A process's own clock is never compared
//!   with a lease.
//! - **Claims are exclusive.** [`Journal::claim`] takes kickoffs whose lease
//!   ran out, or that are ready, atomically (PostgreSQL `FOR UPDATE SKIP
//!   LOCKED`; SQLite an `UPDATE … RETURNING` in an immediate transaction):
//!   exactly one of racing claimers gets each.
//! - **Sealed payloads.** Each entry's payload is encrypted with
//!   XChaCha20-Poly1305 under the [`JournalKey`], a random nonce per entry,
//!   and bound to its kickoff, sequence number and kind: an entry changed,
//!   moved or reordered does not open ([`JournalError::Corrupt`]), and a
//!   wrong key is told apart ([`JournalError::WrongKey`]).
//!
//! What needs no key is on [`Store`] (listing kickoffs, marking one ready
//! when an answer arrives, purging): the approval inbox can do it without
//! holding the journal's key.
//!
//! ```
//! use std::time::Duration;
//! use crew_runtime::store::Store;
//! use crew_runtime::store::journal::{Journal, JournalKey, KickoffStatus};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! # let url = format!("sqlite://{}", dir.path().join("store.db").display());
//! let store = Store::connect(&url).await?;
//! let journal = Journal::new(store.clone(), JournalKey::generate()?);
//!
//! let lease = journal
//!     .create_kickoff("research", "fingerprint-1", "worker-1", Duration::from_secs(15))
//!     .await?;
//! journal.append(&lease, "start", b"{\"topic\":\"rust\"}").await?;
//! journal.append(&lease, "model_answer", b"...").await?;
//! journal.finish(&lease, KickoffStatus::Completed).await?;
//!
//! let entries = journal.entries(&lease.kickoff).await?;
//! assert_eq!(entries[0].kind, "start");
//! assert_eq!(entries[1].seq, 2);
//! assert_eq!(store.kickoff(&lease.kickoff).await?.status, KickoffStatus::Completed);
//! # Ok(())
//! # }
//! ```

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use sqlx::Row as _;
use zeroize::Zeroizing;

use super::{Backend, Store, StoreError, TestClock, millis, time_of};

/// The bytes of a kickoff id: 128 random bits.
const ID_BYTES: usize = 16;
/// The length of a kickoff id's text: lowercase hex.
const ID_CHARS: usize = ID_BYTES * 2;
/// The bytes of a journal key.
const KEY_BYTES: usize = 32;
/// XChaCha20's nonce: 192 bits, safe to draw at random for every entry.
const NONCE_BYTES: usize = 24;
/// The first byte of a sealed payload: how it was sealed.
const FORMAT: u8 = 1;
/// The longest kind of entry, in bytes ([`Journal::append`]).
///
/// ```
/// assert_eq!(crew_runtime::store::journal::MAX_KIND_BYTES, 64);
/// ```
pub const MAX_KIND_BYTES: usize = 64;
/// The longest owner name, in bytes ([`Journal::create_kickoff`],
/// [`Journal::claim`]).
///
/// ```
/// assert_eq!(crew_runtime::store::journal::MAX_OWNER_BYTES, 200);
/// ```
pub const MAX_OWNER_BYTES: usize = 200;

/// Why a journal operation did not happen.
///
/// ```
/// use crew_runtime::store::journal::{JournalError, KickoffId};
///
/// let error = "not-an-id".parse::<KickoffId>().unwrap_err();
/// assert!(matches!(error, JournalError::MalformedKickoffId { .. }));
/// assert!(error.to_string().contains("32"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JournalError {
    /// The writer no longer holds the kickoff: its lease ran out (on the
    /// database's clock) or another process claimed it since (a newer
    /// epoch), or the kickoff ended. Nothing was written; the writer must
    /// stop before its next step and leave the kickoff to its holder.
    #[error(
        "kickoff {kickoff}: {owner} (epoch {epoch}) no longer holds it ({why}): nothing was written; stop before the next step"
    )]
    LeaseLost {
        /// The kickoff.
        kickoff: KickoffId,
        /// The owner that tried to write.
        owner: String,
        /// The epoch it held.
        epoch: i64,
        /// What happened instead, as far as the store tells.
        why: String,
    },
    /// The store has no kickoff with that id.
    #[error(
        "there is no durable kickoff {0} in the store: check the id (a purge keeps the kickoff's row, so it never existed here)"
    )]
    UnknownKickoff(KickoffId),
    /// The journal's key is not the one the kickoff was written with.
    #[error(
        "kickoff {kickoff}'s journal does not open with this key: it was written with another one (use the key the crew's process had when it started this kickoff)"
    )]
    WrongKey {
        /// The kickoff.
        kickoff: KickoffId,
    },
    /// An entry of the journal cannot be read: changed, moved, missing or
    /// written by another program. Nothing after it can be trusted.
    #[error("kickoff {kickoff}'s journal entry {seq} cannot be read: {why}")]
    Corrupt {
        /// The kickoff.
        kickoff: KickoffId,
        /// The entry's sequence number (0: the kickoff's row itself).
        seq: u64,
        /// What is wrong with it.
        why: String,
    },
    /// A text is not a kickoff id.
    #[error("{text:?} is not a kickoff id: {why} (a kickoff id is 32 hexadecimal digits)")]
    MalformedKickoffId {
        /// The text, cut to 80 characters.
        text: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A journal key cannot be made from what was given.
    #[error("not a journal key: {0} (a journal key is 32 random bytes, in base64: 44 characters)")]
    MalformedKey(String),
    /// An argument the store will not take (an empty owner, a kind too
    /// long, a status that is not an end, …).
    #[error("{0}")]
    Invalid(String),
    /// The kickoff is not finished: its journal is still needed.
    #[error(
        "kickoff {kickoff} is {status}, not finished: its journal is still needed and is not purged"
    )]
    NotFinished {
        /// The kickoff.
        kickoff: KickoffId,
        /// Its status.
        status: KickoffStatus,
    },
    /// The operating system gave no random bytes.
    #[error("the operating system's random source failed: {0}")]
    Randomness(String),
    /// The store failed (unreachable, a failed query, …).
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<sqlx::Error> for JournalError {
    fn from(error: sqlx::Error) -> Self {
        JournalError::Store(StoreError::from(error))
    }
}

/// The id of a durable kickoff: 128 random bits, written as 32 lowercase
/// hexadecimal digits.
///
/// ```
/// use crew_runtime::store::journal::KickoffId;
///
/// let id = KickoffId::generate()?;
/// let text = id.to_string();
/// assert_eq!(text.len(), 32);
/// assert_eq!(text.parse::<KickoffId>()?, id);
/// assert_eq!(serde_json::to_string(&id)?, format!("\"{text}\""));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KickoffId([u8; ID_BYTES]);

impl KickoffId {
    /// A new id from the operating system's random source.
    ///
    /// ```
    /// use crew_runtime::store::journal::KickoffId;
    /// assert_ne!(KickoffId::generate()?, KickoffId::generate()?);
    /// # Ok::<(), crew_runtime::store::journal::JournalError>(())
    /// ```
    pub fn generate() -> Result<KickoffId, JournalError> {
        let mut bytes = [0; ID_BYTES];
        getrandom::fill(&mut bytes).map_err(|error| JournalError::Randomness(error.to_string()))?;
        Ok(KickoffId(bytes))
    }

    /// The id's 16 bytes.
    ///
    /// ```
    /// use crew_runtime::store::journal::KickoffId;
    /// let id: KickoffId = "000102030405060708090a0b0c0d0e0f".parse()?;
    /// assert_eq!(id.as_bytes()[15], 15);
    /// # Ok::<(), crew_runtime::store::journal::JournalError>(())
    /// ```
    pub fn as_bytes(&self) -> &[u8; ID_BYTES] {
        &self.0
    }
}

impl fmt::Display for KickoffId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for byte in self.0 {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for KickoffId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KickoffId({self})")
    }
}

impl FromStr for KickoffId {
    type Err = JournalError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let malformed = |why| JournalError::MalformedKickoffId {
            text: text.chars().take(80).collect(),
            why,
        };
        if text.len() != ID_CHARS {
            return Err(malformed("it is not 32 characters long"));
        }
        let mut bytes = [0; ID_BYTES];
        for (byte, pair) in bytes.iter_mut().zip(text.as_bytes().chunks_exact(2)) {
            let digit = |c: u8| (c as char).to_digit(16);
            match (digit(pair[0]), digit(pair[1])) {
                // Both below 16: the byte fits.
                (Some(high), Some(low)) => *byte = (high * 16 + low) as u8,
                _ => {
                    return Err(malformed(
                        "it holds a character that is not a hexadecimal digit",
                    ));
                }
            }
        }
        Ok(KickoffId(bytes))
    }
}

impl serde::Serialize for KickoffId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for KickoffId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Where a durable kickoff stands.
///
/// ```
/// use crew_runtime::store::journal::KickoffStatus;
///
/// assert_eq!(KickoffStatus::InDoubt.as_str(), "in_doubt");
/// assert_eq!("parked".parse::<KickoffStatus>()?, KickoffStatus::Parked);
/// assert!(KickoffStatus::Cancelled.is_finished());
/// assert!(!KickoffStatus::Ready.is_finished());
/// # Ok::<(), crew_runtime::store::journal::JournalError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum KickoffStatus {
    /// Held by a process (or its lease ran out and a resumer may claim it).
    Running,
    /// Waiting for a person, held by no process.
    Parked,
    /// An answer arrived while no process held it: a resumer may claim it.
    Ready,
    /// A call's effect is in doubt and nobody said what happened: ended.
    InDoubt,
    /// Ended with its output.
    Completed,
    /// Ended with an error.
    Failed,
    /// Ended by `cancel`.
    Cancelled,
}

impl KickoffStatus {
    /// Every status, in the order a kickoff may pass through them.
    ///
    /// ```
    /// use crew_runtime::store::journal::KickoffStatus;
    /// assert_eq!(KickoffStatus::ALL.len(), 7);
    /// ```
    pub const ALL: [KickoffStatus; 7] = [
        KickoffStatus::Running,
        KickoffStatus::Parked,
        KickoffStatus::Ready,
        KickoffStatus::InDoubt,
        KickoffStatus::Completed,
        KickoffStatus::Failed,
        KickoffStatus::Cancelled,
    ];

    /// The status as stored and shown: `running`, `parked`, `ready`,
    /// `in_doubt`, `completed`, `failed`, `cancelled`.
    ///
    /// ```
    /// use crew_runtime::store::journal::KickoffStatus;
    /// assert_eq!(KickoffStatus::Running.as_str(), "running");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            KickoffStatus::Running => "running",
            KickoffStatus::Parked => "parked",
            KickoffStatus::Ready => "ready",
            KickoffStatus::InDoubt => "in_doubt",
            KickoffStatus::Completed => "completed",
            KickoffStatus::Failed => "failed",
            KickoffStatus::Cancelled => "cancelled",
        }
    }

    /// Whether the kickoff has ended (completed, failed, cancelled or in
    /// doubt): nothing more is journaled, and its journal may be purged.
    ///
    /// ```
    /// use crew_runtime::store::journal::KickoffStatus;
    /// assert!(KickoffStatus::InDoubt.is_finished());
    /// assert!(!KickoffStatus::Parked.is_finished());
    /// ```
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            KickoffStatus::InDoubt
                | KickoffStatus::Completed
                | KickoffStatus::Failed
                | KickoffStatus::Cancelled
        )
    }
}

impl fmt::Display for KickoffStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for KickoffStatus {
    type Err = JournalError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        KickoffStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == text)
            .ok_or_else(|| {
                JournalError::Invalid(format!(
                    "{text:?} is not a kickoff status: use running, parked, ready, in_doubt, completed, failed or cancelled"
                ))
            })
    }
}

/// The key that seals a journal's payloads: 32 bytes, held by the crew's
/// process and by nobody else (not the approval inbox). Its `Debug` never
/// shows it; it is wiped from memory when dropped.
///
/// Losing it makes the journals written with it unreadable
/// ([`JournalError::WrongKey`]): keep it where the process's other
/// secrets are kept, and give every process that may resume a kickoff the
/// same key.
///
/// ```
/// use crew_runtime::store::journal::JournalKey;
///
/// let key = JournalKey::generate()?;
/// let kept = key.to_base64();
/// let again = JournalKey::from_base64(&kept)?;
/// assert_eq!(again.to_base64(), kept);
/// assert!(!format!("{key:?}").contains(&kept));
/// # Ok::<(), crew_runtime::store::journal::JournalError>(())
/// ```
#[derive(Clone)]
pub struct JournalKey {
    bytes: Zeroizing<[u8; KEY_BYTES]>,
}

impl JournalKey {
    /// A key from its 32 bytes.
    ///
    /// ```
    /// use crew_runtime::store::journal::JournalKey;
    /// let key = JournalKey::from_bytes([7; 32]);
    /// # let _ = key;
    /// ```
    pub fn from_bytes(bytes: [u8; KEY_BYTES]) -> JournalKey {
        JournalKey {
            bytes: Zeroizing::new(bytes),
        }
    }

    /// A new key from the operating system's random source.
    ///
    /// ```
    /// use crew_runtime::store::journal::JournalKey;
    /// let key = JournalKey::generate()?;
    /// # let _ = key;
    /// # Ok::<(), crew_runtime::store::journal::JournalError>(())
    /// ```
    pub fn generate() -> Result<JournalKey, JournalError> {
        let mut bytes = Zeroizing::new([0; KEY_BYTES]);
        getrandom::fill(bytes.as_mut())
            .map_err(|error| JournalError::Randomness(error.to_string()))?;
        Ok(JournalKey { bytes })
    }

    /// A key from its standard base64 text (44 characters, as
    /// [`to_base64`](Self::to_base64) writes it; surrounding white space
    /// is ignored).
    ///
    /// ```
    /// use crew_runtime::store::journal::{JournalError, JournalKey};
    ///
    /// let key = JournalKey::from_base64("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")?;
    /// # let _ = key;
    /// let short = JournalKey::from_base64("AAEC").unwrap_err();
    /// assert!(matches!(short, JournalError::MalformedKey(_)));
    /// # Ok::<(), JournalError>(())
    /// ```
    pub fn from_base64(text: &str) -> Result<JournalKey, JournalError> {
        // Decoded into a buffer that is wiped too.
        let decoded = Zeroizing::new(
            base64::engine::general_purpose::STANDARD
                .decode(text.trim())
                .map_err(|error| JournalError::MalformedKey(format!("not base64 ({error})")))?,
        );
        let bytes: [u8; KEY_BYTES] = decoded.as_slice().try_into().map_err(|_| {
            JournalError::MalformedKey(format!("it holds {} bytes, not 32", decoded.len()))
        })?;
        Ok(JournalKey::from_bytes(bytes))
    }

    /// The key as standard base64 text (44 characters), to keep it where
    /// secrets are kept.
    ///
    /// ```
    /// use crew_runtime::store::journal::JournalKey;
    /// assert_eq!(JournalKey::from_bytes([0; 32]).to_base64().len(), 44);
    /// ```
    pub fn to_base64(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.bytes.as_ref())
    }

    fn cipher(&self) -> XChaCha20Poly1305 {
        XChaCha20Poly1305::new(&(*self.bytes).into())
    }

    /// `plaintext` sealed under `aad`: format byte, nonce, ciphertext.
    fn seal(&self, aad: &[u8], plaintext: &[u8]) -> Result<Vec<u8>, JournalError> {
        let mut nonce = [0; NONCE_BYTES];
        getrandom::fill(&mut nonce).map_err(|error| JournalError::Randomness(error.to_string()))?;
        let sealed = self
            .cipher()
            .encrypt(
                &XNonce::from(nonce),
                Payload {
                    msg: plaintext,
                    aad,
                },
            )
            .map_err(|_| JournalError::Invalid("the payload is too large to seal".into()))?;
        let mut out = Vec::with_capacity(1 + NONCE_BYTES + sealed.len());
        out.push(FORMAT);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        Ok(out)
    }

    /// The plaintext of `sealed` under `aad`, or why not (the words of a
    /// [`JournalError::Corrupt`]).
    fn open(&self, aad: &[u8], sealed: &[u8]) -> Result<Vec<u8>, String> {
        let Some((&format, rest)) = sealed.split_first() else {
            return Err("it is empty".into());
        };
        if format != FORMAT {
            return Err(format!(
                "it is sealed in format {format}, which this program does not know (a newer program wrote it?)"
            ));
        }
        if rest.len() < NONCE_BYTES {
            return Err("it is shorter than its nonce".into());
        }
        let (nonce, ciphertext) = rest.split_at(NONCE_BYTES);
        let nonce: [u8; NONCE_BYTES] = nonce
            .try_into()
            .map_err(|_| "it is shorter than its nonce".to_owned())?;
        self.cipher()
            .decrypt(
                &XNonce::from(nonce),
                Payload {
                    msg: ciphertext,
                    aad,
                },
            )
            .map_err(|_| {
                "it does not open with the journal's key: it was changed, or moved from another place (another sequence number, kind or kickoff)".into()
            })
    }
}

impl fmt::Debug for JournalKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("JournalKey(<secret>)")
    }
}

/// What an entry's seal is bound to: its kickoff, sequence number and
/// kind (length-prefixed, so that no two bindings read alike).
fn entry_binding(kickoff: &KickoffId, seq: u64, kind: &str) -> Vec<u8> {
    let mut aad = Vec::with_capacity(32 + kind.len());
    aad.extend_from_slice(b"crew-journal/1/entry\0");
    aad.extend_from_slice(kickoff.as_bytes());
    aad.extend_from_slice(&seq.to_be_bytes());
    aad.extend_from_slice(&(kind.len() as u64).to_be_bytes());
    aad.extend_from_slice(kind.as_bytes());
    aad
}

/// What a kickoff's key check is bound to.
fn key_check_binding(kickoff: &KickoffId) -> Vec<u8> {
    let mut aad = b"crew-journal/1/key-check\0".to_vec();
    aad.extend_from_slice(kickoff.as_bytes());
    aad
}

/// A process's hold on a kickoff: the owner and the epoch it claimed.
/// Every journal write presents it, and is refused once another claim made
/// a newer epoch or the lease ran out on the database's clock.
///
/// ```
/// use crew_runtime::store::journal::{KickoffId, Lease};
///
/// let lease = Lease { kickoff: KickoffId::generate()?, owner: "worker-1".into(), epoch: 1 };
/// assert_eq!(lease.epoch, 1);
/// # Ok::<(), crew_runtime::store::journal::JournalError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Lease {
    /// The kickoff held.
    pub kickoff: KickoffId,
    /// Who holds it (a process's name, unique among the processes).
    pub owner: String,
    /// The claim's epoch: 1 at creation, one more with each claim.
    pub epoch: i64,
}

/// One entry of a kickoff's journal, opened.
///
/// ```no_run
/// # async fn run(journal: crew_runtime::store::journal::Journal, lease: crew_runtime::store::journal::Lease) -> Result<(), crew_runtime::store::journal::JournalError> {
/// for entry in journal.entries(&lease.kickoff).await? {
///     println!("{} {} ({} bytes)", entry.seq, entry.kind, entry.payload.len());
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct JournalEntry {
    /// Its sequence number: 1, 2, 3, … within its kickoff.
    pub seq: u64,
    /// What it records (the runtime's word: `start`, `model_answer`, …).
    pub kind: String,
    /// What it holds, as appended.
    pub payload: Vec<u8>,
    /// When it was written, on the database's clock.
    pub written_at: SystemTime,
}

/// A durable kickoff as the store has it: what [`Store::kickoffs`] lists.
///
/// ```no_run
/// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::store::journal::JournalError> {
/// for kickoff in store.kickoffs().await? {
///     println!("{} {} {} step {} held by {}", kickoff.id, kickoff.crew, kickoff.status, kickoff.step, kickoff.owner);
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct KickoffSummary {
    /// Its id.
    pub id: KickoffId,
    /// The crew's name.
    pub crew: String,
    /// Where it stands.
    pub status: KickoffStatus,
    /// Who holds (or last held) it.
    pub owner: String,
    /// The epoch of the last claim.
    pub epoch: i64,
    /// The sequence number of its last journal entry (0: none yet).
    pub step: u64,
    /// When it started, on the database's clock.
    pub created_at: SystemTime,
    /// When its status or journal last changed.
    pub updated_at: SystemTime,
    /// Until when its holder's lease runs (in the past: nobody holds it).
    /// For showing only: a process must never compare it with its own clock.
    pub lease_until: SystemTime,
    /// When it ended, if it has.
    pub finished_at: Option<SystemTime>,
    /// When its journal was purged, if it was.
    pub purged_at: Option<SystemTime>,
}

/// The journal of durable kickoffs on a store, with the key that seals
/// their payloads: what a durable crew's process (and a resumer) uses.
/// Cloning is cheap.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use crew_runtime::store::Store;
/// use crew_runtime::store::journal::{Journal, JournalKey};
///
/// let store = Store::connect("postgres://agents@db.internal/crew").await?;
/// let key = JournalKey::from_base64(&std::env::var("CREW_JOURNAL_KEY")?)?;
/// let journal = Journal::new(store, key);
/// # let _ = journal;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Journal {
    store: Store,
    key: Arc<JournalKey>,
}

impl fmt::Debug for Journal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Journal")
            .field("store", &self.store)
            .field("key", &self.key)
            .finish()
    }
}

/// The database's clock, in milliseconds since the Unix epoch, as an SQL
/// expression. SQLite: `julianday('now')` holds milliseconds and stays the
/// same within one statement. PostgreSQL: `clock_timestamp()`, the time of
/// the statement itself (not of its transaction's start, which may have
/// waited for a lock).
fn clock(backend: Backend) -> &'static str {
    match backend {
        Backend::Sqlite => "CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)",
        Backend::Postgres => "CAST(ROUND(EXTRACT(EPOCH FROM clock_timestamp()) * 1000) AS BIGINT)",
    }
}

impl Store {
    /// The store's clock as SQL: the database's, or as a test left it
    /// (`Store::advance_clock`, `Store::freeze_clock`).
    fn clock_sql(&self) -> String {
        match self.test_clock() {
            TestClock::Real => clock(self.backend()).to_owned(),
            TestClock::Ahead(offset) => format!("({} + {offset})", clock(self.backend())),
            TestClock::At(at) => format!("CAST({at} AS BIGINT)"),
        }
    }
}

/// How a write transaction begins: on SQLite, with the write lock taken at
/// once (a transaction that read first could not upgrade under a racing
/// writer without failing).
fn begin(backend: Backend) -> &'static str {
    match backend {
        Backend::Sqlite => "BEGIN IMMEDIATE",
        Backend::Postgres => "BEGIN",
    }
}

/// A duration in milliseconds, as stored.
fn duration_millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX / 4)
}

/// Which kickoffs a claim may take.
#[derive(Clone, Copy)]
enum Claimable<'a> {
    Any,
    OfCrew(&'a str, &'a str),
    Kickoff(&'a str),
}

/// The condition that a lease `($1 id, $2 owner, $3 epoch)` still holds.
const HELD: &str =
    "id = $1 AND owner = $2 AND epoch = $3 AND status = 'running' AND lease_until > {now}";

const SUMMARY_COLUMNS: &str = "id, crew, status, owner, epoch, step, created_at, updated_at, lease_until, finished_at, purged_at";

impl Journal {
    /// The journal of kickoffs on `store`, sealed with `key`.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::store::journal::JournalError> {
    /// use crew_runtime::store::journal::{Journal, JournalKey};
    /// let journal = Journal::new(store, JournalKey::generate()?);
    /// # let _ = journal;
    /// # Ok(())
    /// # }
    /// ```
    pub fn new(store: Store, key: JournalKey) -> Journal {
        Journal {
            store,
            key: Arc::new(key),
        }
    }

    /// The store it writes to.
    ///
    /// ```no_run
    /// # fn run(journal: crew_runtime::store::journal::Journal) {
    /// println!("journal on {}", journal.store().url());
    /// # }
    /// ```
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The SQL `template` with `{now}` as the database's clock.
    fn sql(&self, template: &str) -> String {
        template
            .replace("{held}", HELD)
            .replace("{now}", &self.store.clock_sql())
    }

    /// Starts a durable kickoff of `crew`: status running, held by `owner`
    /// at epoch 1 for `lease` (from now, on the database's clock). The
    /// crew's `fingerprint` is kept as given ([`Store::fingerprint`]).
    ///
    /// ```no_run
    /// # async fn run(journal: crew_runtime::store::journal::Journal) -> Result<(), crew_runtime::store::journal::JournalError> {
    /// use std::time::Duration;
    /// let lease = journal.create_kickoff("research", "sha256:…", "worker-1", Duration::from_secs(15)).await?;
    /// assert_eq!(lease.epoch, 1);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn create_kickoff(
        &self,
        crew_name: &str,
        fingerprint: &str,
        owner: &str,
        lease: Duration,
    ) -> Result<Lease, JournalError> {
        check_owner(owner)?;
        let id = KickoffId::generate()?;
        let key_check = self.key.seal(&key_check_binding(&id), b"")?;
        let sql = self.sql(
            "INSERT INTO crew_kickoffs (id, crew, fingerprint, status, owner, epoch, lease_until, \
             step, wake, key_check, created_at, updated_at) \
             VALUES ($1, $2, $3, 'running', $4, 1, {now} + $5, 0, 0, $6, {now}, {now})",
        );
        #[cfg(feature = "sqlite")]
        if let Some(writer) = &self.store.inner.journal_writer {
            // On the journal's own connection, as its appends (see
            // `held_update`).
            let sql = sql.replace('$', "?");
            let values = (
                id.to_string(),
                crew_name.to_owned(),
                fingerprint.to_owned(),
                owner.to_owned(),
                duration_millis(lease),
                key_check,
            );
            writer
                .run(move |connection| {
                    let (id, crew_name, fingerprint, owner, lease, key_check) = &values;
                    connection.prepare_cached(&sql)?.execute(rusqlite::params![
                        id,
                        crew_name,
                        fingerprint,
                        owner,
                        lease,
                        key_check
                    ])
                })
                .await?;
            self.store.file_still_there()?;
            return Ok(Lease {
                kickoff: id,
                owner: owner.to_owned(),
                epoch: 1,
            });
        }
        super::on_pool!(self.store, |pool| {
            sqlx::query(&sql)
                .bind(id.to_string())
                .bind(crew_name)
                .bind(fingerprint)
                .bind(owner)
                .bind(duration_millis(lease))
                .bind(&key_check)
                .execute(pool)
                .await?;
        });
        self.store.file_still_there()?;
        Ok(Lease {
            kickoff: id,
            owner: owner.to_owned(),
            epoch: 1,
        })
    }

    /// Appends an entry to the journal of the kickoff `lease` holds, and
    /// commits it: its sequence number (1, 2, 3, … without gaps). One
    /// transaction, which writes only if `lease` is still current (same
    /// owner and epoch, the lease not run out on the database's clock);
    /// otherwise [`JournalError::LeaseLost`] and nothing is written.
    ///
    /// `kind` (1 to 64 bytes) is stored in clear; `payload` is sealed.
    ///
    /// ```no_run
    /// # async fn run(journal: crew_runtime::store::journal::Journal, lease: crew_runtime::store::journal::Lease) -> Result<(), crew_runtime::store::journal::JournalError> {
    /// let seq = journal.append(&lease, "tool_intent", br#"{"tool":"pay","amount":10}"#).await?;
    /// // Only now may the tool start.
    /// # let _ = seq;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn append(
        &self,
        lease: &Lease,
        kind: &str,
        payload: &[u8],
    ) -> Result<u64, JournalError> {
        self.append_all(lease, &[(kind, payload)]).await
    }

    /// Appends `entries` to the journal of the kickoff `lease` holds, in
    /// order, in one transaction: all of them or none, as
    /// [`Journal::append`] one. The sequence number of the last. What a
    /// writer uses to commit a step it deferred with the step that must not
    /// start before it (a model's answer with its first call's intent).
    ///
    /// ```no_run
    /// # async fn run(journal: crew_runtime::store::journal::Journal, lease: crew_runtime::store::journal::Lease) -> Result<(), crew_runtime::store::journal::JournalError> {
    /// let last = journal
    ///     .append_all(&lease, &[("answer", b"..."), ("intent", br#"{"tool":"pay"}"#)])
    ///     .await?;
    /// # let _ = last;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn append_all(
        &self,
        lease: &Lease,
        entries: &[(&str, &[u8])],
    ) -> Result<u64, JournalError> {
        check_entries(entries)?;
        let count = i64::try_from(entries.len()).unwrap_or(i64::MAX);
        let advance = self.sql(
            "UPDATE crew_kickoffs SET step = step + $4, updated_at = {now} WHERE {held} RETURNING step",
        );
        let insert = self.sql(
            "INSERT INTO crew_journal (kickoff_id, seq, kind, payload, at) VALUES ($1, $2, $3, $4, {now})",
        );
        let id = lease.kickoff.to_string();
        let begin = begin(self.store.backend());
        let written: Option<u64> = super::on_pool!(self.store, |pool| {
            let mut transaction = pool.begin_with(begin).await?;
            let step: Option<i64> = sqlx::query_scalar(&advance)
                .bind(&id)
                .bind(&lease.owner)
                .bind(lease.epoch)
                .bind(count)
                .fetch_optional(&mut *transaction)
                .await?;
            match step {
                None => {
                    transaction.rollback().await?;
                    None
                }
                Some(last) => {
                    let last = u64::try_from(last).map_err(|_| JournalError::Corrupt {
                        kickoff: lease.kickoff,
                        seq: 0,
                        why: format!("its step is {last}"),
                    })?;
                    let first = last + 1 - entries.len() as u64;
                    for (seq, (kind, payload)) in (first..).zip(entries) {
                        let sealed = self
                            .key
                            .seal(&entry_binding(&lease.kickoff, seq, kind), payload)?;
                        sqlx::query(&insert)
                            .bind(&id)
                            .bind(i64::try_from(seq).unwrap_or(i64::MAX))
                            .bind(*kind)
                            .bind(sealed)
                            .execute(&mut *transaction)
                            .await?;
                    }
                    transaction.commit().await?;
                    Some(last)
                }
            }
        });
        match written {
            Some(seq) => {
                self.store.file_still_there()?;
                Ok(seq)
            }
            None => Err(self.lease_lost(lease).await),
        }
    }

    /// Appends `entries` after entry `after`, for a writer that counts its
    /// kickoff's entries (it holds the lease: nobody else appends): as
    /// [`Journal::append_all`], all or none, fenced the same way, and
    /// conditional on the journal holding exactly `after` entries. One
    /// round trip to the store: a durable kickoff's append on the path of
    /// every tool call. The sequence number of the last.
    ///
    /// Errors: [`JournalError::LeaseLost`]; [`JournalError::Corrupt`] when
    /// the journal does not hold `after` entries (the writer's count is
    /// wrong).
    ///
    /// ```no_run
    /// # async fn run(journal: crew_runtime::store::journal::Journal, lease: crew_runtime::store::journal::Lease) -> Result<(), crew_runtime::store::journal::JournalError> {
    /// // The kickoff's journal holds its start (entry 1); the next two:
    /// let last = journal.append_after(&lease, 1, &[("answer", b"..."), ("intent", b"...")]).await?;
    /// assert_eq!(last, 3);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn append_after(
        &self,
        lease: &Lease,
        after: u64,
        entries: &[(&str, &[u8])],
    ) -> Result<u64, JournalError> {
        check_entries(entries)?;
        let last = after + entries.len() as u64;
        let mut sealed = Vec::with_capacity(entries.len());
        for (seq, (kind, payload)) in (after + 1..).zip(entries) {
            sealed.push(
                self.key
                    .seal(&entry_binding(&lease.kickoff, seq, kind), payload)?,
            );
        }
        let as_i64 = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        let id = lease.kickoff.to_string();
        // $1 id, $2 owner, $3 epoch (the lease), $4 the new step, $5 the
        // step expected; then seq, kind, payload for each entry.
        let placeholders = |i: usize| (6 + 3 * i, 7 + 3 * i, 8 + 3 * i);
        let advance =
            "UPDATE crew_kickoffs SET step = $4, updated_at = {now} WHERE {held} AND step = $5";
        let written = match &self.store.inner.pool {
            #[cfg(feature = "sqlite")]
            super::Pool::Sqlite(_) if self.store.inner.journal_writer.is_some() => {
                let to_sqlite = |sql: String| sql.replace('$', "?");
                let append = super::sqlite_journal::Append {
                    advance: to_sqlite(self.sql(advance)),
                    insert: to_sqlite(self.sql(
                        "INSERT INTO crew_journal (kickoff_id, seq, kind, payload, at) VALUES ($1, $2, $3, $4, {now})",
                    )),
                    id: id.clone(),
                    owner: lease.owner.clone(),
                    epoch: lease.epoch,
                    last: as_i64(last),
                    after: as_i64(after),
                    entries: (after + 1..)
                        .zip(entries)
                        .zip(sealed)
                        .map(|((seq, (kind, _)), sealed)| (as_i64(seq), (*kind).to_owned(), sealed))
                        .collect(),
                };
                let writer = self.store.inner.journal_writer.as_ref();
                match writer {
                    Some(writer) if writer.append(append).await? => 1 + entries.len() as u64,
                    _ => 0,
                }
            }
            #[cfg(feature = "sqlite")]
            super::Pool::Sqlite(pool) => {
                // An SQLite database in memory (no file for a connection of
                // the journal's own). One round trip: the statements run together on the
                // connection's worker; each insert writes only if the
                // statement before it changed one row (so none, unless
                // the lease held and the count was right).
                let mut sql = String::from("BEGIN IMMEDIATE;\n");
                sql.push_str(&self.sql(advance));
                sql.push_str(";\n");
                for i in 0..entries.len() {
                    let (seq, kind, payload) = placeholders(i);
                    sql.push_str(&self.sql(&format!(
                        "INSERT INTO crew_journal (kickoff_id, seq, kind, payload, at) \
                         SELECT $1, ${seq}, ${kind}, ${payload}, {{now}} WHERE changes() = 1;\n"
                    )));
                }
                // Whether the last insert wrote (so every one did).
                sql.push_str("SELECT changes();\nCOMMIT;");
                let mut connection = pool.acquire().await?;
                let mut query = sqlx::query(&sql)
                    .bind(&id)
                    .bind(&lease.owner)
                    .bind(lease.epoch)
                    .bind(as_i64(last))
                    .bind(as_i64(after));
                for ((seq, (kind, _)), sealed) in (after + 1..).zip(entries).zip(&sealed) {
                    query = query.bind(as_i64(seq)).bind(*kind).bind(sealed.as_slice());
                }
                match query.fetch_all(&mut *connection).await {
                    Ok(rows) => {
                        let wrote: i64 = match rows.first() {
                            Some(row) => row.try_get(0)?,
                            None => 0,
                        };
                        if wrote == 1 {
                            1 + entries.len() as u64
                        } else {
                            0
                        }
                    }
                    Err(error) => {
                        // Never leave the connection inside the transaction.
                        let _ = sqlx::query("ROLLBACK").execute(&mut *connection).await;
                        return Err(error.into());
                    }
                }
            }
            #[cfg(feature = "postgres")]
            super::Pool::Postgres(pool) => {
                let mut sql = format!("WITH held AS ({} RETURNING id) ", self.sql(advance));
                sql.push_str("INSERT INTO crew_journal (kickoff_id, seq, kind, payload, at) ");
                for i in 0..entries.len() {
                    let (seq, kind, payload) = placeholders(i);
                    if i > 0 {
                        sql.push_str(" UNION ALL ");
                    }
                    sql.push_str(&self.sql(&format!(
                        "SELECT id, ${seq}::BIGINT, ${kind}::TEXT, ${payload}::BYTEA, {{now}} FROM held"
                    )));
                }
                let mut query = sqlx::query(&sql)
                    .bind(&id)
                    .bind(&lease.owner)
                    .bind(lease.epoch)
                    .bind(as_i64(last))
                    .bind(as_i64(after));
                for ((seq, (kind, _)), sealed) in (after + 1..).zip(entries).zip(&sealed) {
                    query = query.bind(as_i64(seq)).bind(*kind).bind(sealed.as_slice());
                }
                query.execute(pool).await?.rows_affected() + 1
            }
        };
        // The advance and every insert, or nothing.
        if written == 1 + entries.len() as u64 {
            self.store.file_still_there()?;
            return Ok(last);
        }
        if self.held_now(lease).await? {
            let step = self.store.kickoff(&lease.kickoff).await?.step;
            return Err(JournalError::Corrupt {
                kickoff: lease.kickoff,
                seq: after + 1,
                why: format!(
                    "the journal holds {step} entries, not the {after} its writer counted"
                ),
            });
        }
        Err(self.lease_lost(lease).await)
    }

    /// The database's clock now: what a journal entry's time
    /// ([`JournalEntry::written_at`]) is compared with.
    ///
    /// ```no_run
    /// # async fn run(journal: crew_runtime::store::journal::Journal) -> Result<(), crew_runtime::store::journal::JournalError> {
    /// let now = journal.database_now().await?;
    /// # let _ = now;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn database_now(&self) -> Result<SystemTime, JournalError> {
        let sql = self.sql("SELECT {now}");
        let now: i64 = super::on_pool!(self.store, |pool| {
            sqlx::query_scalar(&sql).fetch_one(pool).await?
        });
        Ok(time_of(now))
    }

    /// Whether `lease` is held now (on the database's clock).
    async fn held_now(&self, lease: &Lease) -> Result<bool, JournalError> {
        let sql = self.sql("SELECT COUNT(*) FROM crew_kickoffs WHERE {held}");
        let id = lease.kickoff.to_string();
        let count: i64 = super::on_pool!(self.store, |pool| {
            sqlx::query_scalar(&sql)
                .bind(&id)
                .bind(&lease.owner)
                .bind(lease.epoch)
                .fetch_one(pool)
                .await?
        });
        Ok(count > 0)
    }

    /// Extends the lease to `lease` from now (on the database's clock),
    /// if it is still held; otherwise [`JournalError::LeaseLost`].
    ///
    /// ```no_run
    /// # async fn run(journal: crew_runtime::store::journal::Journal, lease: crew_runtime::store::journal::Lease) -> Result<(), crew_runtime::store::journal::JournalError> {
    /// journal.renew(&lease, std::time::Duration::from_secs(15)).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn renew(&self, lease: &Lease, duration: Duration) -> Result<(), JournalError> {
        let sql = self.sql("UPDATE crew_kickoffs SET lease_until = {now} + $4 WHERE {held}");
        self.held_update(lease, &sql, Some(duration_millis(duration)), None)
            .await
            .map(drop)
    }

    /// Gives the lease up: the kickoff stays running and a resumer may
    /// claim it at once (a caller that went away, a process shutting down).
    /// [`JournalError::LeaseLost`] if it was no longer held.
    ///
    /// ```no_run
    /// # async fn run(journal: crew_runtime::store::journal::Journal, lease: crew_runtime::store::journal::Lease) -> Result<(), crew_runtime::store::journal::JournalError> {
    /// journal.release(&lease).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn release(&self, lease: &Lease) -> Result<(), JournalError> {
        let sql = self.sql("UPDATE crew_kickoffs SET lease_until = {now} WHERE {held}");
        self.held_update(lease, &sql, None, None).await.map(drop)
    }

    /// Parks the kickoff (it waits for a person, held by no process): its
    /// status is then parked, or ready at once if an answer arrived while
    /// it ran ([`Store::set_ready`]) or one of its questions holds an
    /// answer not yet taken. Returns that status.
    /// [`JournalError::LeaseLost`] if the lease was no longer held.
    ///
    /// ```no_run
    /// # async fn run(journal: crew_runtime::store::journal::Journal, lease: crew_runtime::store::journal::Lease) -> Result<(), crew_runtime::store::journal::JournalError> {
    /// use crew_runtime::store::journal::KickoffStatus;
    /// if journal.park(&lease).await? == KickoffStatus::Ready {
    ///     // An answer is already there: a resumer takes it up.
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn park(&self, lease: &Lease) -> Result<KickoffStatus, JournalError> {
        // Ready at once when one of its questions was answered (or
        // expired) and its answer not yet taken, or an answer marked it
        // so while it ran.
        let sql = self.sql(
            "UPDATE crew_kickoffs SET status = CASE WHEN wake = 1 OR EXISTS \
             (SELECT 1 FROM crew_approvals a WHERE a.kickoff_id = crew_kickoffs.id \
             AND a.status IN ('approved', 'denied', 'expired') AND a.taken_at IS NULL) \
             THEN 'ready' ELSE 'parked' END, \
             wake = 0, lease_until = {now}, updated_at = {now} WHERE {held} RETURNING status",
        );
        let status = self.held_update(lease, &sql, None, None).await?;
        status
            .unwrap_or_default()
            .parse()
            .map_err(|_| self.corrupt_status(lease.kickoff))
    }

    /// Ends the kickoff with `status` (completed, failed, cancelled or
    /// in_doubt) and gives up its lease, if it is still held; otherwise
    /// [`JournalError::LeaseLost`] and nothing changes.
    ///
    /// ```no_run
    /// # async fn run(journal: crew_runtime::store::journal::Journal, lease: crew_runtime::store::journal::Lease) -> Result<(), crew_runtime::store::journal::JournalError> {
    /// use crew_runtime::store::journal::KickoffStatus;
    /// journal.append(&lease, "end", b"{\"output\":\"done\"}").await?;
    /// journal.finish(&lease, KickoffStatus::Completed).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn finish(&self, lease: &Lease, status: KickoffStatus) -> Result<(), JournalError> {
        if !status.is_finished() {
            return Err(JournalError::Invalid(format!(
                "a kickoff finishes as completed, failed, cancelled or in_doubt, not {status}"
            )));
        }
        let sql = self.sql(
            "UPDATE crew_kickoffs SET status = $4, lease_until = {now}, finished_at = {now}, \
             updated_at = {now} WHERE {held}",
        );
        self.held_update(lease, &sql, None, Some(status.as_str()))
            .await
            .map(drop)
    }

    /// Runs `sql` (conditional on `lease` being held; `$4` bound to
    /// `number` or `text` when given), or tells why the lease is lost. The
    /// first column returned, if any.
    async fn held_update(
        &self,
        lease: &Lease,
        sql: &str,
        number: Option<i64>,
        text: Option<&str>,
    ) -> Result<Option<String>, JournalError> {
        let id = lease.kickoff.to_string();
        let returns = sql.contains("RETURNING");
        #[cfg(feature = "sqlite")]
        if let Some(writer) = &self.store.inner.journal_writer {
            // On the journal's own connection, as its appends: a write
            // through the pool may checkpoint the log the appends leave
            // (milliseconds, an `fsync`) on the caller's path.
            let sql = sql.replace('$', "?");
            let owner = lease.owner.clone();
            let epoch = lease.epoch;
            let text = text.map(str::to_owned);
            let changed = writer
                .run(move |connection| {
                    let mut statement = connection.prepare_cached(&sql)?;
                    let mut rows = match (number, &text) {
                        (Some(number), _) => {
                            statement.query(rusqlite::params![id, owner, epoch, number])?
                        }
                        (None, Some(text)) => {
                            statement.query(rusqlite::params![id, owner, epoch, text])?
                        }
                        (None, None) => statement.query(rusqlite::params![id, owner, epoch])?,
                    };
                    match rows.next()? {
                        Some(row) if returns => Ok(Some(Some(row.get::<_, String>(0)?))),
                        Some(_) => Ok(Some(None)),
                        None if returns => Ok(None),
                        None => {
                            drop(rows);
                            Ok((connection.changes() == 1).then_some(None))
                        }
                    }
                })
                .await?;
            return match changed {
                Some(first) => {
                    self.store.file_still_there()?;
                    Ok(first)
                }
                None => Err(self.lease_lost(lease).await),
            };
        }
        let changed: Option<Option<String>> = super::on_pool!(self.store, |pool| {
            let mut query = sqlx::query(sql)
                .bind(&id)
                .bind(&lease.owner)
                .bind(lease.epoch);
            if let Some(number) = number {
                query = query.bind(number);
            }
            if let Some(text) = text {
                query = query.bind(text);
            }
            if returns {
                match query.fetch_optional(pool).await? {
                    Some(row) => Some(Some(row.try_get::<String, _>(0)?)),
                    None => None,
                }
            } else {
                (query.execute(pool).await?.rows_affected() == 1).then_some(None)
            }
        });
        match changed {
            Some(first) => {
                self.store.file_still_there()?;
                Ok(first)
            }
            None => Err(self.lease_lost(lease).await),
        }
    }

    /// Why `lease` is not held: [`JournalError::LeaseLost`] with what the
    /// store shows, or [`JournalError::UnknownKickoff`].
    async fn lease_lost(&self, lease: &Lease) -> JournalError {
        let sql = self.sql(
            "SELECT status, owner, epoch, CASE WHEN lease_until > {now} THEN 1 ELSE 0 END \
             FROM crew_kickoffs WHERE id = $1",
        );
        let id = lease.kickoff.to_string();
        let row: Result<Option<(String, String, i64, i32)>, sqlx::Error> =
            super::on_pool!(self.store, |pool| {
                sqlx::query_as(&sql).bind(&id).fetch_optional(pool).await
            });
        let why = match row {
            Err(error) => return JournalError::from(error),
            Ok(None) => return JournalError::UnknownKickoff(lease.kickoff),
            Ok(Some((status, owner, epoch, _))) if epoch != lease.epoch || owner != lease.owner => {
                format!("{owner} claimed it since, at epoch {epoch}; it is {status}")
            }
            Ok(Some((status, ..))) if status != "running" => format!("it is {status}"),
            Ok(Some(_)) => "its lease ran out".to_owned(),
        };
        JournalError::LeaseLost {
            kickoff: lease.kickoff,
            owner: lease.owner.clone(),
            epoch: lease.epoch,
            why,
        }
    }

    fn corrupt_status(&self, kickoff: KickoffId) -> JournalError {
        JournalError::Corrupt {
            kickoff,
            seq: 0,
            why: "its status is not one this program knows".into(),
        }
    }

    /// Claims up to `limit` kickoffs for `owner`, for `lease` from now:
    /// those whose lease ran out while running, and those that are ready,
    /// oldest change first. Each claim makes it running and adds one to its
    /// epoch, which fences off any previous holder. Atomic: of claimers
    /// racing (in any processes), exactly one gets each kickoff.
    ///
    /// ```no_run
    /// # async fn run(journal: crew_runtime::store::journal::Journal) -> Result<(), crew_runtime::store::journal::JournalError> {
    /// use std::time::Duration;
    /// for lease in journal.claim("resumer-2", Duration::from_secs(15), 16).await? {
    ///     let entries = journal.entries(&lease.kickoff).await?;
    ///     // … rebuild the run from its entries, go on under `lease` …
    ///     # let _ = entries;
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn claim(
        &self,
        owner: &str,
        lease: Duration,
        limit: usize,
    ) -> Result<Vec<Lease>, JournalError> {
        self.claim_where(owner, lease, limit, Claimable::Any).await
    }

    /// [`Journal::claim`], of the kickoffs of the crew named `crew` started
    /// with the crew's shape `fingerprint` only: what a crew's resumer
    /// takes. A store may hold the kickoffs of many crews, and during a
    /// deploy those of two versions of one crew: each version resumes its
    /// own.
    ///
    /// ```no_run
    /// # async fn run(journal: crew_runtime::store::journal::Journal) -> Result<(), crew_runtime::store::journal::JournalError> {
    /// use std::time::Duration;
    /// let leases = journal
    ///     .claim_of_crew("refunds", "sha256:…", "resumer-2", Duration::from_secs(15), 16)
    ///     .await?;
    /// # let _ = leases;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn claim_of_crew(
        &self,
        crew: &str,
        fingerprint: &str,
        owner: &str,
        lease: Duration,
        limit: usize,
    ) -> Result<Vec<Lease>, JournalError> {
        self.claim_where(owner, lease, limit, Claimable::OfCrew(crew, fingerprint))
            .await
    }

    /// Claims the kickoff `kickoff` for `owner`, if it can be claimed (its
    /// lease ran out, or it is ready): `None` when it is held by a live
    /// lease or has ended. Atomic, as [`Journal::claim`].
    ///
    /// ```no_run
    /// # async fn run(journal: crew_runtime::store::journal::Journal, id: crew_runtime::store::journal::KickoffId) -> Result<(), crew_runtime::store::journal::JournalError> {
    /// use std::time::Duration;
    /// if let Some(lease) = journal.claim_kickoff(&id, "worker-1", Duration::from_secs(15)).await? {
    ///     assert!(lease.epoch > 1);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn claim_kickoff(
        &self,
        kickoff: &KickoffId,
        owner: &str,
        lease: Duration,
    ) -> Result<Option<Lease>, JournalError> {
        let id = kickoff.to_string();
        let mut claimed = self
            .claim_where(owner, lease, 1, Claimable::Kickoff(&id))
            .await?;
        Ok(claimed.pop())
    }

    async fn claim_where(
        &self,
        owner: &str,
        lease: Duration,
        limit: usize,
        which: Claimable<'_>,
    ) -> Result<Vec<Lease>, JournalError> {
        check_owner(owner)?;
        if limit == 0 {
            return Ok(Vec::new());
        }
        let claimable = match which {
            Claimable::Any => "(status = 'ready' OR (status = 'running' AND lease_until <= {now}))",
            Claimable::OfCrew(..) => {
                "(status = 'ready' OR (status = 'running' AND lease_until <= {now})) AND crew = $4 \
                 AND fingerprint = $5"
            }
            Claimable::Kickoff(_) => {
                "(status = 'ready' OR (status = 'running' AND lease_until <= {now})) AND id = $4"
            }
        };
        let sql = self.sql(&match self.store.backend() {
            Backend::Postgres => format!(
                "UPDATE crew_kickoffs AS k SET owner = $1, epoch = k.epoch + 1, status = 'running', \
                 wake = 0, lease_until = {{now}} + $2, updated_at = {{now}} \
                 FROM (SELECT id FROM crew_kickoffs WHERE {claimable} ORDER BY updated_at, id \
                 LIMIT $3 FOR UPDATE SKIP LOCKED) AS c WHERE k.id = c.id RETURNING k.id, k.epoch"
            ),
            Backend::Sqlite => format!(
                "UPDATE crew_kickoffs SET owner = $1, epoch = epoch + 1, status = 'running', \
                 wake = 0, lease_until = {{now}} + $2, updated_at = {{now}} \
                 WHERE id IN (SELECT id FROM crew_kickoffs WHERE {claimable} \
                 ORDER BY updated_at, id LIMIT $3) RETURNING id, epoch"
            ),
        });
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        // One statement, atomic on its own: on SQLite an `UPDATE` takes the
        // write lock as it starts, and holds it only while it runs (an
        // explicit transaction would hold it across three round trips);
        // on PostgreSQL, `FOR UPDATE SKIP LOCKED` in the statement.
        let rows: Vec<(String, i64)> = super::on_pool!(self.store, |pool| {
            let mut query = sqlx::query_as(&sql)
                .bind(owner)
                .bind(duration_millis(lease))
                .bind(limit);
            match which {
                Claimable::Any => {}
                Claimable::OfCrew(crew, fingerprint) => query = query.bind(crew).bind(fingerprint),
                Claimable::Kickoff(id) => query = query.bind(id),
            }
            query.fetch_all(pool).await?
        });
        self.store.file_still_there()?;
        rows.into_iter()
            .map(|(id, epoch)| {
                Ok(Lease {
                    kickoff: parse_stored_id(&id)?,
                    owner: owner.to_owned(),
                    epoch,
                })
            })
            .collect()
    }

    /// The journal of `kickoff`, opened, in order (empty once purged).
    ///
    /// Errors: [`JournalError::UnknownKickoff`]; [`JournalError::WrongKey`]
    /// when this journal's key is not the one the kickoff was written with;
    /// [`JournalError::Corrupt`], naming the entry, when one does not open
    /// (changed, moved to another place) or is missing.
    ///
    /// ```no_run
    /// # async fn run(journal: crew_runtime::store::journal::Journal, lease: crew_runtime::store::journal::Lease) -> Result<(), crew_runtime::store::journal::JournalError> {
    /// let entries = journal.entries(&lease.kickoff).await?;
    /// assert!(entries.iter().zip(1..).all(|(entry, seq)| entry.seq == seq));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn entries(&self, kickoff: &KickoffId) -> Result<Vec<JournalEntry>, JournalError> {
        let id = kickoff.to_string();
        // One statement, so one snapshot: the head and its entries agree
        // (entries appended later, beyond the head's step, are left out).
        type Joined = (
            i64,
            Vec<u8>,
            Option<i64>,
            Option<i64>,
            Option<String>,
            Option<Vec<u8>>,
            Option<i64>,
        );
        let joined: Vec<Joined> = super::on_pool!(self.store, |pool| {
            sqlx::query_as(
                "SELECT k.step, k.key_check, k.purged_at, j.seq, j.kind, j.payload, j.at \
                 FROM crew_kickoffs k LEFT JOIN crew_journal j \
                 ON j.kickoff_id = k.id AND j.seq <= k.step \
                 WHERE k.id = $1 ORDER BY j.seq",
            )
            .bind(&id)
            .fetch_all(pool)
            .await?
        });
        let Some((step, key_check, purged_at)) =
            joined.first().map(|row| (row.0, row.1.clone(), row.2))
        else {
            return Err(JournalError::UnknownKickoff(*kickoff));
        };
        if self
            .key
            .open(&key_check_binding(kickoff), &key_check)
            .is_err()
        {
            return Err(JournalError::WrongKey { kickoff: *kickoff });
        }
        if purged_at.is_some() {
            return Ok(Vec::new());
        }
        let rows = joined
            .into_iter()
            .filter_map(|(.., seq, kind, payload, at)| Some((seq?, kind?, payload?, at?)));
        let step = u64::try_from(step).unwrap_or(0);
        let mut entries = Vec::new();
        for (expected, (seq, kind, sealed, at)) in (1..).zip(rows) {
            let seq = u64::try_from(seq).unwrap_or(0);
            if seq != expected {
                return Err(JournalError::Corrupt {
                    kickoff: *kickoff,
                    seq: expected,
                    why: "it is missing from the journal".into(),
                });
            }
            let payload = self
                .key
                .open(&entry_binding(kickoff, seq, &kind), &sealed)
                .map_err(|why| JournalError::Corrupt {
                    kickoff: *kickoff,
                    seq,
                    why,
                })?;
            entries.push(JournalEntry {
                seq,
                kind,
                payload,
                written_at: time_of(at),
            });
        }
        let read = entries.len() as u64;
        if read < step {
            return Err(JournalError::Corrupt {
                kickoff: *kickoff,
                seq: read + 1,
                why: format!("it is missing from the journal (the kickoff is at step {step})"),
            });
        }
        Ok(entries)
    }
}

/// Entries to append: at least one, each kind 1 to `MAX_KIND_BYTES` bytes.
fn check_entries(entries: &[(&str, &[u8])]) -> Result<(), JournalError> {
    if entries.is_empty() {
        return Err(JournalError::Invalid("no journal entry to append".into()));
    }
    match entries
        .iter()
        .find(|(kind, _)| kind.is_empty() || kind.len() > MAX_KIND_BYTES)
    {
        Some((kind, _)) => Err(JournalError::Invalid(format!(
            "a journal entry's kind is 1 to {MAX_KIND_BYTES} bytes, not {}",
            kind.len()
        ))),
        None => Ok(()),
    }
}

/// An owner's name must say who holds a kickoff.
fn check_owner(owner: &str) -> Result<(), JournalError> {
    if owner.trim().is_empty() || owner.len() > MAX_OWNER_BYTES {
        return Err(JournalError::Invalid(format!(
            "a kickoff's owner is a name of 1 to {MAX_OWNER_BYTES} bytes (the process's), not {owner:?}"
        )));
    }
    Ok(())
}

/// A kickoff id as the store holds it.
fn parse_stored_id(text: &str) -> Result<KickoffId, JournalError> {
    text.parse().map_err(|_| {
        JournalError::Store(StoreError::Corrupt(format!(
            "the kickoff id {text:?} is not 32 hexadecimal digits"
        )))
    })
}

/// Reads a summary row.
fn summary<R>(row: &R) -> Result<KickoffSummary, JournalError>
where
    R: sqlx::Row,
    for<'r> &'r str: sqlx::ColumnIndex<R>,
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Option<i64>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let id = parse_stored_id(&row.try_get::<String, _>("id")?)?;
    let status: String = row.try_get("status")?;
    Ok(KickoffSummary {
        id,
        crew: row.try_get("crew")?,
        status: status.parse().map_err(|_| JournalError::Corrupt {
            kickoff: id,
            seq: 0,
            why: format!("its status {status:?} is not one this program knows"),
        })?,
        owner: row.try_get("owner")?,
        epoch: row.try_get("epoch")?,
        step: u64::try_from(row.try_get::<i64, _>("step")?).unwrap_or(0),
        created_at: time_of(row.try_get("created_at")?),
        updated_at: time_of(row.try_get("updated_at")?),
        lease_until: time_of(row.try_get("lease_until")?),
        finished_at: row.try_get::<Option<i64>, _>("finished_at")?.map(time_of),
        purged_at: row.try_get::<Option<i64>, _>("purged_at")?.map(time_of),
    })
}

/// What needs no journal key: the status of durable kickoffs from outside,
/// marking one ready, purging finished journals.
impl Store {
    /// Every durable kickoff in the store, oldest first (SPEC §13, "status
    /// of a kickoff from outside").
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::store::journal::JournalError> {
    /// use crew_runtime::store::journal::KickoffStatus;
    /// let parked = store.kickoffs().await?.into_iter().filter(|k| k.status == KickoffStatus::Parked).count();
    /// println!("{parked} kickoffs wait for a person");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn kickoffs(&self) -> Result<Vec<KickoffSummary>, JournalError> {
        let sql = format!("SELECT {SUMMARY_COLUMNS} FROM crew_kickoffs ORDER BY created_at, id");
        super::on_pool!(self, |pool| {
            sqlx::query(&sql)
                .fetch_all(pool)
                .await?
                .iter()
                .map(summary)
                .collect::<Result<Vec<_>, _>>()
        })
    }

    /// The durable kickoff `id`, or [`JournalError::UnknownKickoff`].
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store, id: crew_runtime::store::journal::KickoffId) -> Result<(), crew_runtime::store::journal::JournalError> {
    /// let kickoff = store.kickoff(&id).await?;
    /// println!("{} is {} at step {}", kickoff.id, kickoff.status, kickoff.step);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn kickoff(&self, id: &KickoffId) -> Result<KickoffSummary, JournalError> {
        let sql = format!("SELECT {SUMMARY_COLUMNS} FROM crew_kickoffs WHERE id = $1");
        let text = id.to_string();
        super::on_pool!(self, |pool| {
            match sqlx::query(&sql).bind(&text).fetch_optional(pool).await? {
                Some(row) => summary(&row),
                None => Err(JournalError::UnknownKickoff(*id)),
            }
        })
    }

    /// The crew fingerprint kickoff `id` was started with, as stored.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store, id: crew_runtime::store::journal::KickoffId) -> Result<(), crew_runtime::store::journal::JournalError> {
    /// let started_with = store.fingerprint(&id).await?;
    /// # let _ = started_with;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn fingerprint(&self, id: &KickoffId) -> Result<String, JournalError> {
        let text = id.to_string();
        let found: Option<String> = super::on_pool!(self, |pool| {
            sqlx::query_scalar("SELECT fingerprint FROM crew_kickoffs WHERE id = $1")
                .bind(&text)
                .fetch_optional(pool)
                .await?
        });
        found.ok_or(JournalError::UnknownKickoff(*id))
    }

    /// Runs `sql`, an update of kickoff `id` (`$1`) returning its status:
    /// the status, or `None` when no row matched.
    async fn status_update(
        &self,
        sql: &str,
        id: &KickoffId,
    ) -> Result<Option<String>, JournalError> {
        let text = id.to_string();
        let changed: Option<String> = super::on_pool!(self, |pool| {
            sqlx::query_scalar(sql)
                .bind(&text)
                .fetch_optional(pool)
                .await?
        });
        self.file_still_there()?;
        Ok(changed)
    }

    /// Cancels the kickoff `id` wherever it stands (running, ready or
    /// parked): its status becomes cancelled at once, and its holder, if
    /// any, finds its next write refused and stops before its next step.
    /// Returns the status it now has: cancelled, or the end it had reached
    /// before (a finished kickoff stays as it ended).
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store, id: crew_runtime::store::journal::KickoffId) -> Result<(), crew_runtime::store::journal::JournalError> {
    /// use crew_runtime::store::journal::KickoffStatus;
    /// assert!(store.cancel_kickoff(&id).await?.is_finished());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn cancel_kickoff(&self, id: &KickoffId) -> Result<KickoffStatus, JournalError> {
        let now = self.clock_sql();
        let sql = format!(
            "UPDATE crew_kickoffs SET status = 'cancelled', lease_until = {now}, \
             finished_at = {now}, updated_at = {now} \
             WHERE id = $1 AND status IN ('running', 'ready', 'parked') RETURNING status"
        );
        match self.status_update(&sql, id).await? {
            Some(_) => Ok(KickoffStatus::Cancelled),
            None => Ok(self.kickoff(id).await?.status),
        }
    }

    /// An answer arrived for kickoff `id` while it may be held by nobody:
    /// a parked kickoff becomes ready (a resumer claims it at once); a
    /// running one becomes ready when it parks. Returns its status after.
    /// A finished kickoff is left as it is.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store, id: crew_runtime::store::journal::KickoffId) -> Result<(), crew_runtime::store::journal::JournalError> {
    /// use crew_runtime::store::journal::KickoffStatus;
    /// assert_eq!(store.set_ready(&id).await?, KickoffStatus::Ready);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn set_ready(&self, id: &KickoffId) -> Result<KickoffStatus, JournalError> {
        let now = self.clock_sql();
        let sql = format!(
            "UPDATE crew_kickoffs SET status = CASE WHEN status = 'parked' THEN 'ready' ELSE status END, \
             wake = CASE WHEN status = 'running' THEN 1 ELSE wake END, \
             updated_at = CASE WHEN status = 'parked' THEN {now} ELSE updated_at END \
             WHERE id = $1 AND status IN ('parked', 'running') RETURNING status"
        );
        match self.status_update(&sql, id).await? {
            Some(status) => status.parse().map_err(|_| JournalError::Corrupt {
                kickoff: *id,
                seq: 0,
                why: format!("its status {status:?} is not one this program knows"),
            }),
            None => Ok(self.kickoff(id).await?.status),
        }
    }

    /// Removes the journal of finished kickoff `id` (its row stays, with
    /// its status): the number of entries removed.
    /// [`JournalError::NotFinished`] while it has not ended.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store, id: crew_runtime::store::journal::KickoffId) -> Result<(), crew_runtime::store::journal::JournalError> {
    /// let removed = store.purge(&id).await?;
    /// println!("{removed} entries removed");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn purge(&self, id: &KickoffId) -> Result<u64, JournalError> {
        #[cfg(feature = "sqlite")]
        if let Some(writer) = &self.inner.journal_writer {
            return self.purge_on(writer, id).await;
        }
        let status = self.kickoff(id).await?.status;
        if !status.is_finished() {
            return Err(JournalError::NotFinished {
                kickoff: *id,
                status,
            });
        }
        let now = self.clock_sql();
        let mark = format!(
            "UPDATE crew_kickoffs SET purged_at = COALESCE(purged_at, {now}) WHERE id = $1"
        );
        let text = id.to_string();
        let removed = super::on_pool!(self, |pool| {
            let mut transaction = pool.begin().await?;
            let removed = sqlx::query("DELETE FROM crew_journal WHERE kickoff_id = $1")
                .bind(&text)
                .execute(&mut *transaction)
                .await?
                .rows_affected();
            sqlx::query(&mark)
                .bind(&text)
                .execute(&mut *transaction)
                .await?;
            transaction.commit().await?;
            removed
        });
        self.file_still_there()?;
        Ok(removed)
    }

    /// [`Store::purge`] on the journal's own connection (an SQLite file):
    /// the status read, the entries removed and the row marked in one
    /// transaction.
    #[cfg(feature = "sqlite")]
    async fn purge_on(
        &self,
        writer: &super::sqlite_journal::JournalWriter,
        id: &KickoffId,
    ) -> Result<u64, JournalError> {
        let now = self.clock_sql();
        let mark = format!(
            "UPDATE crew_kickoffs SET purged_at = COALESCE(purged_at, {now}) WHERE id = ?1"
        );
        let text = id.to_string();
        // Ok(removed); Err(None): no such kickoff; Err(Some(status)): it
        // has not ended.
        let purged = writer
            .run(move |connection| {
                let purged = super::sqlite_journal::transaction(connection, |connection| {
                    let status: Option<String> = connection
                        .prepare_cached("SELECT status FROM crew_kickoffs WHERE id = ?1")?
                        .query_row([&text], |row| row.get(0))
                        .map(Some)
                        .or_else(|error| match error {
                            rusqlite::Error::QueryReturnedNoRows => Ok(None),
                            other => Err(other),
                        })?;
                    let Some(status) = status else {
                        return Ok(None);
                    };
                    let finished = status
                        .parse::<KickoffStatus>()
                        .is_ok_and(KickoffStatus::is_finished);
                    if !finished {
                        return Ok(Some(Err(Some(status))));
                    }
                    let removed = connection
                        .prepare_cached("DELETE FROM crew_journal WHERE kickoff_id = ?1")?
                        .execute([&text])?;
                    connection.prepare_cached(&mark)?.execute([&text])?;
                    Ok(Some(Ok(removed as u64)))
                })?;
                Ok(purged.unwrap_or(Err(None)))
            })
            .await?;
        match purged {
            Ok(removed) => {
                self.file_still_there()?;
                Ok(removed)
            }
            Err(None) => Err(JournalError::UnknownKickoff(*id)),
            Err(Some(status)) => Err(JournalError::NotFinished {
                kickoff: *id,
                status: status.parse().map_err(|_| JournalError::Corrupt {
                    kickoff: *id,
                    seq: 0,
                    why: format!("its status {status:?} is not one this program knows"),
                })?,
            }),
        }
    }

    /// Purges the journals of every kickoff that finished before `before`
    /// (as the database's clock recorded their end): the number of
    /// kickoffs purged. Their rows stay, with their status.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::store::journal::JournalError> {
    /// use std::time::{Duration, SystemTime};
    /// let week_ago = SystemTime::now() - Duration::from_secs(7 * 24 * 3600);
    /// store.purge_finished_before(week_ago).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn purge_finished_before(&self, before: SystemTime) -> Result<u64, JournalError> {
        let now = self.clock_sql();
        let finished = "finished_at IS NOT NULL AND finished_at < $1";
        let remove = format!(
            "DELETE FROM crew_journal WHERE kickoff_id IN (SELECT id FROM crew_kickoffs WHERE {finished})"
        );
        let mark = format!(
            "UPDATE crew_kickoffs SET purged_at = {now} WHERE {finished} AND purged_at IS NULL"
        );
        let before = millis(before);
        let purged = super::on_pool!(self, |pool| {
            let mut transaction = pool.begin().await?;
            sqlx::query(&remove)
                .bind(before)
                .execute(&mut *transaction)
                .await?;
            let purged = sqlx::query(&mark)
                .bind(before)
                .execute(&mut *transaction)
                .await?
                .rows_affected();
            transaction.commit().await?;
            purged
        });
        self.file_still_there()?;
        Ok(purged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kickoff_ids_read_back_and_refuse_what_is_not_one() {
        let id = KickoffId([0xab; ID_BYTES]);
        assert_eq!(id.to_string(), "ab".repeat(16));
        assert_eq!(id.to_string().parse::<KickoffId>().ok(), Some(id));
        assert_eq!("AB".repeat(16).parse::<KickoffId>().ok(), Some(id));
        for bad in [
            "",
            "ab",
            &"ab".repeat(17),
            &format!("{}zz", "ab".repeat(15)),
            "é".repeat(16).as_str(),
        ] {
            assert!(
                matches!(
                    bad.parse::<KickoffId>(),
                    Err(JournalError::MalformedKickoffId { .. })
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_sealed_payload_opens_only_where_it_was_sealed() {
        let key = JournalKey::from_bytes([1; KEY_BYTES]);
        let kickoff = KickoffId([2; ID_BYTES]);
        let sealed = key
            .seal(&entry_binding(&kickoff, 3, "tool_intent"), b"pay 10")
            .expect("sealed");
        let opened = key.open(&entry_binding(&kickoff, 3, "tool_intent"), &sealed);
        assert_eq!(opened.as_deref(), Ok(&b"pay 10"[..]));
        assert!(
            key.open(&entry_binding(&kickoff, 4, "tool_intent"), &sealed)
                .is_err()
        );
        assert!(
            key.open(&entry_binding(&kickoff, 3, "tool_result"), &sealed)
                .is_err()
        );
        assert!(
            key.open(
                &entry_binding(&KickoffId([9; ID_BYTES]), 3, "tool_intent"),
                &sealed
            )
            .is_err()
        );
        let other = JournalKey::from_bytes([5; KEY_BYTES]);
        assert!(
            other
                .open(&entry_binding(&kickoff, 3, "tool_intent"), &sealed)
                .is_err()
        );
    }
}
