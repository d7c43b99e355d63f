//! Durable kickoffs (feature `durable`, SPEC §13): a crew's run that
//! survives its process, resumes on any replica, and runs an approved
//! effect at most once.
//!
//! A durable crew ([`CrewBuilder::durable`]) commits each step of a kickoff
//! to a write-ahead journal in the store before the step acts: the inputs
//! the tasks begin with, what `PRE_STEP` left, each model answer (before
//! any of its calls runs), each tool call's intent (before the tool starts)
//! and its observation, each task's output, the end. A kickoff whose
//! process went away is claimed by another process ([`Crew::resume`], or a
//! [`Resumer`] in the background) once its lease ran out, and replayed from
//! its journal: a recorded step is not done again (no model asked, no hook
//! run, no tool called); the run goes on live from the first step the
//! journal does not hold.
//!
//! A call whose intent was committed and whose result was not is **in
//! doubt**: its tool may have acted. It runs again only if the tool may
//! (read-only, or idempotent and not destructive), with the same
//! idempotency key and once the crew's rules still allow it; else the
//! tool's reconciler is asked whether the effect happened; else the
//! kickoff ends in doubt ([`CrewError::InDoubt`]) and nothing runs again.
//! A tool that is neither read-only nor idempotent must have a timeout
//! (the build says so otherwise): a call in doubt is only judged once it
//! cannot still be running anywhere.
//!
//! Fencing: a process holds a kickoff through a lease (owner + epoch, on
//! the database's clock), renewed every third of its length; every journal
//! write is conditional on it. A process that lost its lease (paused past
//! it, cut off from the store) writes nothing more and stops before its
//! next step; its in-flight tool call is then in doubt for whoever resumes.
//!
//! ```
//! use std::sync::Arc;
//! use crew_runtime::prelude::*;
//! use crew_runtime::durable::Durable;
//! use crew_runtime::store::Store;
//! use crew_runtime::store::journal::{JournalKey, KickoffStatus};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! # let url = format!("sqlite://{}", dir.path().join("store.db").display());
//! let store = Store::connect(&url).await?;
//! let key = JournalKey::generate()?; // in a service: from a secret, shared by the replicas
//! let writer = Agent::builder("Writer")
//!     .llm(Arc::new(ScriptedLlm::new().answer("a short story")))
//!     .build();
//! let crew = Crew::builder()
//!     .agent(writer.clone())
//!     .task(Task::builder("Write about {topic}").agent(&writer).build())
//!     .global_registry(Arc::new(HookRegistry::new()))
//!     .durable(Durable::new(store.clone()).journal_key(key))
//!     .build()?;
//!
//! // Started here; resumed by whichever process claims it.
//! let id = crew.start([("topic", "rust")]).await?;
//! let output = crew.resume(&id).await?;
//! assert_eq!(output.raw, "a short story");
//! assert_eq!(store.kickoff(&id).await?.status, KickoffStatus::Completed);
//! # Ok(())
//! # }
//! ```

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use hooks_core::events::{EventId, EventSequence, IntegrationEvent};
use hooks_core::{
    ChainGate, ChatMessage, CrewOutput, Event, Inputs, ModelResponse, Role, TaskOutput, TokenUsage,
    ToolCallRequest,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::Digest as _;

use crate::crew::{Crew, CrewBuilder};
use crate::error::{BuildError, CrewError, IntegrationError};
use crate::extension::{BuildScope, CrewExtension};
use crate::run::journal::{
    Intent, JournalFuture, KickoffJournal, Place, RecordedAnswer, RecordedCall, Settled,
};
use crate::store::Store;
use crate::store::journal::{
    Journal, JournalEntry, JournalError, JournalKey, KickoffId, KickoffStatus, Lease,
};
use crate::tool::IdempotencyKey;

/// The integration's name, in its errors.
const INTEGRATION: &str = "durable";
/// A lease's length unless set ([`Durable::lease`]).
const DEFAULT_LEASE: Duration = Duration::from_secs(15);
/// The shortest lease taken: renewals come every third of it.
const SHORTEST_LEASE: Duration = Duration::from_millis(300);
/// How long a question of a kickoff that parks stays open unless set
/// ([`Durable::approval_deadline`]).
const DEFAULT_APPROVAL_DEADLINE: Duration = Duration::from_secs(24 * 3600);
/// How soon a kickoff due to park looks again for its question in the
/// store, when it was not there yet.
const PARK_RECHECK: Duration = Duration::from_millis(100);

/// What makes a crew durable: the store its kickoffs are journaled in, the
/// key that seals the journal, and how long a process holds a kickoff
/// between renewals. Give it to [`CrewBuilder::durable`].
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use crew_runtime::durable::Durable;
/// use crew_runtime::store::Store;
/// use crew_runtime::store::journal::JournalKey;
///
/// let store = Store::connect("postgres://agents@db.internal/crew").await?;
/// let key = JournalKey::from_base64(&std::env::var("CREW_JOURNAL_KEY")?)?;
/// let durable = Durable::new(store)
///     .journal_key(key)
///     .lease(Duration::from_secs(30))
///     .owner(format!("api-{}", std::process::id()));
/// # let _ = durable;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Durable {
    store: Store,
    key: Option<JournalKey>,
    lease: Duration,
    owner: Arc<str>,
    retention: Duration,
    park_after: Option<Duration>,
    approval_deadline: Duration,
}

impl fmt::Debug for Durable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Durable")
            .field("store", &self.store)
            .field("key", &self.key)
            .field("lease", &self.lease)
            .field("owner", &self.owner)
            .field("retention", &self.retention)
            .field("park_after", &self.park_after)
            .field("approval_deadline", &self.approval_deadline)
            .finish()
    }
}

impl Durable {
    /// Kickoffs journaled in `store`: a lease of 15 seconds, this process
    /// named by a random owner id, each journal purged as soon as its
    /// kickoff ends. The journal's key must be given
    /// ([`journal_key`](Self::journal_key)): the build refuses a durable
    /// crew without one.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::store::journal::JournalError> {
    /// use crew_runtime::durable::Durable;
    /// use crew_runtime::store::journal::JournalKey;
    /// let durable = Durable::new(store).journal_key(JournalKey::generate()?);
    /// # let _ = durable;
    /// # Ok(())
    /// # }
    /// ```
    pub fn new(store: Store) -> Durable {
        Durable {
            store,
            key: None,
            lease: DEFAULT_LEASE,
            owner: Arc::from(format!("process-{}", crate::store::new_id())),
            retention: Duration::ZERO,
            park_after: None,
            approval_deadline: DEFAULT_APPROVAL_DEADLINE,
        }
    }

    /// The key the journal's payloads are sealed with (XChaCha20-Poly1305).
    /// Every replica of a service must be given the same key, kept outside
    /// the store, as a secret: the journal holds what the run needs to go
    /// on, unredacted (a re-run tool must get exactly its arguments).
    ///
    /// ```no_run
    /// # fn run(durable: crew_runtime::durable::Durable) -> Result<(), Box<dyn std::error::Error>> {
    /// use crew_runtime::store::journal::JournalKey;
    /// let key = JournalKey::from_base64(&std::env::var("CREW_JOURNAL_KEY")?)?;
    /// let durable = durable.journal_key(key);
    /// # let _ = durable;
    /// # Ok(())
    /// # }
    /// ```
    pub fn journal_key(mut self, key: JournalKey) -> Durable {
        self.key = Some(key);
        self
    }

    /// How long a process holds a kickoff without renewing (renewed every
    /// third of it): how long a crashed process's kickoff waits before
    /// another process may take it over. At least 300 ms.
    ///
    /// ```no_run
    /// # fn run(durable: crew_runtime::durable::Durable) {
    /// let durable = durable.lease(std::time::Duration::from_secs(5));
    /// # let _ = durable;
    /// # }
    /// ```
    pub fn lease(mut self, lease: Duration) -> Durable {
        self.lease = lease.max(SHORTEST_LEASE);
        self
    }

    /// The name this process holds kickoffs under (unique among the
    /// processes; shown by [`Store::kickoffs`]).
    ///
    /// ```no_run
    /// # fn run(durable: crew_runtime::durable::Durable) {
    /// let durable = durable.owner("worker-3");
    /// # let _ = durable;
    /// # }
    /// ```
    pub fn owner(mut self, owner: impl Into<String>) -> Durable {
        self.owner = Arc::from(owner.into());
        self
    }

    /// How long an ended kickoff's journal is kept before it is purged
    /// (by [`Resumer`], at each pass); zero, the default, purges it as the
    /// kickoff ends. The kickoff's row (status, owner, times) stays.
    ///
    /// ```no_run
    /// # fn run(durable: crew_runtime::durable::Durable) {
    /// let durable = durable.retention(std::time::Duration::from_secs(7 * 24 * 3600));
    /// # let _ = durable;
    /// # }
    /// ```
    pub fn retention(mut self, retention: Duration) -> Durable {
        self.retention = retention;
        self
    }

    /// Parks a kickoff that waits for a person longer than `after` (zero:
    /// as soon as a person is asked), or than the crew's human-input
    /// timeout, whichever comes first: its question stays open until its
    /// deadline ([`approval_deadline`](Self::approval_deadline)), no
    /// process holds it, and [`Crew::kickoff`] returns
    /// [`CrewError::Parked`]. Once the question is answered, or its
    /// deadline passes (which denies the call), the kickoff is ready, and
    /// a [`Resumer`] in any process runs it on. Without it, a kickoff
    /// waits for its answer in its process, as any other.
    ///
    /// Parking needs the questions kept in the store: the crew's human
    /// input is [`StoreApprovals`](crate::store::StoreApprovals) on the
    /// same store.
    ///
    /// ```no_run
    /// # fn run(durable: crew_runtime::durable::Durable) {
    /// // Requests return at once; the refund goes on when ops answers.
    /// let durable = durable.park_after(std::time::Duration::ZERO);
    /// # let _ = durable;
    /// # }
    /// ```
    pub fn park_after(mut self, after: Duration) -> Durable {
        self.park_after = Some(after);
        self
    }

    /// How long a question of a kickoff that parks stays open (24 hours
    /// unless set): once it passed, the question is closed and the call it
    /// asked about is denied, whether the kickoff waits in a process or is
    /// parked. Only for a crew that parks ([`park_after`](Self::park_after)).
    ///
    /// ```no_run
    /// # fn run(durable: crew_runtime::durable::Durable) {
    /// let durable = durable
    ///     .park_after(std::time::Duration::from_secs(60))
    ///     .approval_deadline(std::time::Duration::from_secs(3 * 24 * 3600));
    /// # let _ = durable;
    /// # }
    /// ```
    pub fn approval_deadline(mut self, deadline: Duration) -> Durable {
        self.approval_deadline = deadline;
        self
    }

    /// The store the kickoffs are journaled in.
    ///
    /// ```no_run
    /// # async fn run(durable: crew_runtime::durable::Durable) -> Result<(), crew_runtime::store::journal::JournalError> {
    /// for kickoff in durable.store().kickoffs().await? {
    ///     println!("{} {}", kickoff.id, kickoff.status);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn store(&self) -> &Store {
        &self.store
    }
}

impl From<Store> for Durable {
    /// [`Durable::new`].
    fn from(store: Store) -> Durable {
        Durable::new(store)
    }
}

/// Why a durable kickoff could not be started, resumed or go on. Carried by
/// [`CrewError::Integration`] (read it with
/// [`IntegrationError::downcast_ref`]) and, at the build, by
/// [`BuildError::Integration`].
///
/// ```
/// use crew_runtime::durable::DurableError;
/// let error = DurableError::NoTimeout { tool: "refund".into() };
/// assert!(error.to_string().contains("refund"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DurableError {
    /// A tool of a durable crew is neither read-only nor idempotent and
    /// has no timeout of its own: a call of it cut short by a crash could
    /// never be judged finished.
    #[error(
        "the tool `{tool}` of a durable crew is neither read-only nor idempotent and has no \
         timeout: give it one (`.timeout(..)`), or declare it idempotent if running it twice \
         does no harm"
    )]
    NoTimeout {
        /// The tool.
        tool: String,
    },
    /// A durable crew was given no journal key ([`Durable::journal_key`]).
    #[error(
        "a durable crew needs a journal key to seal its journal: give it one with \
         `Durable::journal_key` (the same key in every replica, kept outside the store)"
    )]
    NoJournalKey,
    /// A crew was told to park ([`CrewBuilder::park_after`]) but is not
    /// durable: only a durable kickoff can wait without its process.
    #[error(
        "`park_after` needs a durable crew: only a journaled kickoff can wait for a person \
         without its process (add `CrewBuilder::durable`)"
    )]
    ParkingNotDurable,
    /// The journal refused a write or a read (the lease lost, the store
    /// unreachable, an entry that does not open, a wrong key): the message
    /// of the store's error.
    #[error("{0}")]
    Journal(String),
    /// This process no longer holds the kickoff (another took it over, its
    /// lease ran out, or it was cancelled): it stopped before its next step.
    #[error("{0}")]
    LeaseLost(String),
    /// The crew is not the one that started the kickoff: resuming it would
    /// replay its journal on other agents, tasks or tools.
    #[error(
        "kickoff {kickoff} was started by a crew that differs from this one ({difference}): \
         it is resumed only by the crew that started it"
    )]
    FingerprintChanged {
        /// The kickoff.
        kickoff: String,
        /// The first difference, named.
        difference: String,
    },
    /// The kickoff cannot be resumed: it has ended, or another process
    /// holds it.
    #[error("kickoff {kickoff} cannot be resumed: it is {status}")]
    NotResumable {
        /// The kickoff.
        kickoff: String,
        /// Where it stands (with its holder, if one holds it).
        status: String,
    },
    /// The kickoff was started by another crew (its name is recorded).
    #[error("kickoff {kickoff} belongs to the crew `{owner}`, not to `{crew}`")]
    OtherCrew {
        /// The kickoff.
        kickoff: String,
        /// The crew that started it.
        owner: String,
        /// This crew.
        crew: String,
    },
}

impl DurableError {
    fn from_journal(error: &JournalError) -> DurableError {
        match error {
            JournalError::LeaseLost { .. } => DurableError::LeaseLost(error.to_string()),
            other => DurableError::Journal(other.to_string()),
        }
    }

    fn into_crew(self, refused: &'static str) -> CrewError {
        CrewError::Integration(IntegrationError::new(INTEGRATION, refused, self))
    }
}

fn journal_failed(error: &JournalError) -> CrewError {
    DurableError::from_journal(error)
        .into_crew("the kickoff's journal failed; the kickoff stopped before its next step")
}

impl CrewBuilder {
    /// Makes the crew durable: its kickoffs are journaled in `durable`'s
    /// store and resumed from it after a crash (see [`crate::durable`]).
    /// [`Crew::kickoff`] runs a durable kickoff to its end as before;
    /// [`Crew::start`] and [`Crew::resume`] split it across processes.
    ///
    /// The build refuses a tool that is neither read-only nor idempotent
    /// and has no timeout ([`DurableError::NoTimeout`]).
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store, key: crew_runtime::store::journal::JournalKey) -> Result<(), Box<dyn std::error::Error>> {
    /// use crew_runtime::durable::Durable;
    /// use crew_runtime::prelude::*;
    ///
    /// let writer = Agent::builder("Writer").build();
    /// let crew = Crew::builder()
    ///     .agent(writer.clone())
    ///     .task(Task::builder("Write").agent(&writer).build())
    ///     .durable(Durable::new(store).journal_key(key))
    ///     .build()?;
    /// # let _ = crew;
    /// # Ok(())
    /// # }
    /// ```
    pub fn durable(self, durable: impl Into<Durable>) -> Self {
        let durable = durable.into();
        self.pending_hook(Box::new(move |scope| {
            let refused = |error: DurableError| {
                BuildError::Integration(IntegrationError::new(
                    INTEGRATION,
                    "the crew cannot be durable",
                    error,
                ))
            };
            let Some(key) = durable.key.clone() else {
                return Err(refused(DurableError::NoJournalKey));
            };
            for tool in &scope.tools {
                if !tool.may_run_again() && tool.timeout().is_none() {
                    return Err(refused(DurableError::NoTimeout {
                        tool: tool.name().to_owned(),
                    }));
                }
            }
            let journal = Journal::new(durable.store.clone(), key);
            // What the builder itself was told of parking comes over the
            // durable setting's.
            let parking = scope.with_state(|parking: &mut Parking| parking.clone());
            let crew = DurableCrew {
                journal,
                lease: durable.lease,
                owner: Arc::clone(&durable.owner),
                retention: durable.retention,
                park_after: parking.after.or(durable.park_after),
                approval_deadline: parking.deadline.unwrap_or(durable.approval_deadline),
            };
            scope.with_state(|given: &mut Given| given.0 = Some(crew));
            Ok(())
        }))
    }

    /// Parks this durable crew's kickoffs that wait for a person longer
    /// than `after` (zero: at once), as [`Durable::park_after`] does; the
    /// build refuses it on a crew that is not durable
    /// ([`DurableError::ParkingNotDurable`]). Called before or after
    /// [`durable`](Self::durable), it wins over the durable setting's.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store, key: crew_runtime::store::journal::JournalKey) -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use crew_runtime::durable::Durable;
    /// use crew_runtime::prelude::*;
    ///
    /// let writer = Agent::builder("Writer").build();
    /// let crew = Crew::builder()
    ///     .agent(writer.clone())
    ///     .task(Task::builder("Write").agent(&writer).build())
    ///     .durable(Durable::new(store).journal_key(key))
    ///     .park_after(Duration::ZERO)
    ///     .approval_deadline(Duration::from_secs(3 * 24 * 3600))
    ///     .build()?;
    /// # let _ = crew;
    /// # Ok(())
    /// # }
    /// ```
    pub fn park_after(self, after: Duration) -> Self {
        self.parking(move |parking| parking.after = Some(after))
    }

    /// How long each question of this durable crew's kickoffs stays open
    /// (24 hours unless set), as [`Durable::approval_deadline`] says; the
    /// build refuses it on a crew that is not durable.
    ///
    /// ```no_run
    /// # fn run(builder: crew_runtime::CrewBuilder) {
    /// let builder = builder.approval_deadline(std::time::Duration::from_secs(3600));
    /// # let _ = builder;
    /// # }
    /// ```
    pub fn approval_deadline(self, deadline: Duration) -> Self {
        self.parking(move |parking| parking.deadline = Some(deadline))
    }

    /// Keeps what the builder was told of parking, for the durable
    /// extension (whichever of the two is called first).
    fn parking(self, set: impl Fn(&mut Parking) + Send + Sync + 'static) -> Self {
        self.pending_hook(Box::new(move |scope| {
            scope.with_state(|parking: &mut Parking| {
                set(parking);
                parking.told = true;
            });
            // Given already (`durable` was called before): set it there.
            let parking = scope.with_state(|parking: &mut Parking| parking.clone());
            scope.with_state(|given: &mut Given| {
                if let Some(crew) = &mut given.0 {
                    if let Some(after) = parking.after {
                        crew.park_after = Some(after);
                    }
                    if let Some(deadline) = parking.deadline {
                        crew.approval_deadline = deadline;
                    }
                }
            });
            Ok(())
        }))
    }
}

/// What the crew's builder was told of parking.
#[derive(Default, Clone)]
struct Parking {
    after: Option<Duration>,
    deadline: Option<Duration>,
    /// Whether it was told anything (a crew that is not durable is then
    /// refused).
    told: bool,
}

/// The durable extension a crew's build made.
#[derive(Default)]
struct Given(Option<DurableCrew>);

/// At every crew's build: the durable extension, for a crew given one.
pub(crate) fn at_build(
    scope: &BuildScope<'_>,
) -> Result<Option<Arc<dyn CrewExtension>>, BuildError> {
    let given = scope.with_state(|given: &mut Given| given.0.take());
    let told = scope.with_state(|parking: &mut Parking| parking.told);
    if told && given.is_none() {
        return Err(BuildError::Integration(IntegrationError::new(
            INTEGRATION,
            "the crew cannot park",
            DurableError::ParkingNotDurable,
        )));
    }
    Ok(given.map(|crew| Arc::new(crew) as Arc<dyn CrewExtension>))
}

/// A durable crew's extension: it runs the crew's kickoffs journaled.
struct DurableCrew {
    journal: Journal,
    lease: Duration,
    owner: Arc<str>,
    retention: Duration,
    park_after: Option<Duration>,
    approval_deadline: Duration,
}

impl CrewExtension for DurableCrew {
    fn runs_kickoffs(&self) -> bool {
        true
    }

    fn kickoff<'a>(&'a self, crew: &'a Crew, inputs: Inputs) -> JournalFuture<'a, CrewOutput> {
        Box::pin(async move {
            let run = DurableRun::create(self, crew, &inputs).await?;
            run.run(crew, inputs).await
        })
    }

    fn explain(&self, _tool: &str, _role: Option<&str>, notes: &mut Vec<String>) {
        notes.push(format!(
            "durable: each step journaled before it acts (lease {} ms)",
            self.lease.as_millis()
        ));
    }
}

impl Crew {
    fn durable(&self) -> Result<&DurableCrew, CrewError> {
        self.extension::<DurableCrew>().ok_or_else(|| {
            CrewError::Integration(IntegrationError::new(
                INTEGRATION,
                "the crew is not durable",
                DurableError::Journal(
                    "the crew was built without `CrewBuilder::durable`".to_owned(),
                ),
            ))
        })
    }

    /// Starts a durable kickoff on `inputs` and returns its id at once,
    /// without running it: its inputs are journaled and it is left for
    /// [`Crew::resume`] or a [`Resumer`], in this process or another. What
    /// a request handler of a service does.
    ///
    /// Errors: the crew is not durable; the store cannot be written.
    ///
    /// ```no_run
    /// # async fn run(crew: crew_runtime::Crew) -> Result<(), crew_runtime::CrewError> {
    /// let id = crew.start([("order", "A-1042")]).await?;
    /// println!("kickoff {id}");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn start(&self, inputs: impl Into<Inputs>) -> Result<KickoffId, CrewError> {
        let durable = self.durable()?;
        let inputs = inputs.into();
        let run = DurableRun::create(durable, self, &inputs).await?;
        let id = run.lease.kickoff;
        // Given up at once: any process may claim it now.
        run.release().await;
        Ok(id)
    }

    /// Starts a durable kickoff on `inputs` held by this process: its
    /// inputs are journaled and its id known before it runs (a service
    /// tells its caller), and no resumer takes it up meanwhile, as one
    /// could between [`Crew::start`] and [`Crew::resume`]. Run it with
    /// [`HeldKickoff::run`]; dropped unrun, it is given up to a resumer.
    ///
    /// Errors: the crew is not durable; the store cannot be written.
    ///
    /// ```no_run
    /// # async fn run(crew: crew_runtime::Crew) -> Result<(), crew_runtime::CrewError> {
    /// let held = crew.start_held([("order", "A-1042")]).await?;
    /// println!("kickoff {}", held.id());
    /// let output = held.run().await?;
    /// println!("{}", output.raw);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn start_held(&self, inputs: impl Into<Inputs>) -> Result<HeldKickoff, CrewError> {
        let durable = self.durable()?;
        let inputs = inputs.into();
        let run = DurableRun::create(durable, self, &inputs).await?;
        Ok(HeldKickoff {
            crew: self.clone(),
            id: run.lease.kickoff,
            inputs: Some(inputs),
            run: Some(run),
        })
    }

    /// Runs a kickoff as [`Crew::kickoff`] does, but on a durable crew that
    /// parks ([`Durable::park_after`]) the caller waits here for a person's
    /// answer (up to the question's deadline,
    /// [`Durable::approval_deadline`]) instead of getting
    /// [`CrewError::Parked`]: for a caller that has nothing better to do
    /// meanwhile. The kickoff is journaled all the same: dropped while it
    /// waits (the process going), it parks, and a resumer takes it up once
    /// answered.
    ///
    /// ```no_run
    /// # async fn run(crew: crew_runtime::Crew) -> Result<(), crew_runtime::CrewError> {
    /// let output = crew.kickoff_waiting([("order", "A-1042")]).await?;
    /// println!("{}", output.raw);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn kickoff_waiting(
        &self,
        inputs: impl Into<Inputs>,
    ) -> Result<CrewOutput, CrewError> {
        let Some(durable) = self.extension::<DurableCrew>() else {
            return self.kickoff(inputs).await;
        };
        let inputs = inputs.into();
        let run = DurableRun::create(durable, self, &inputs).await?;
        run.waiting.store(true, Ordering::Release);
        run.run(self, inputs).await
    }

    /// Resumes the durable kickoff `id` and runs it to its end, from its
    /// journal: what was recorded is replayed (no model asked, no hook or
    /// tool run again), the rest runs live. The kickoff must be claimable:
    /// started and not running elsewhere (its holder's lease ran out, or it
    /// was given up), not ended. It runs for the user and the tenant it
    /// started for ([`Crew::for_user`], [`Crew::for_tenant`]), whichever
    /// value of the crew resumes it.
    ///
    /// Errors: the crew is not durable; no such kickoff; another crew's
    /// kickoff or a crew that changed since
    /// ([`DurableError::FingerprintChanged`], naming the difference); a
    /// kickoff held or ended ([`DurableError::NotResumable`]); a call in
    /// doubt ([`CrewError::InDoubt`]); whatever ends a kickoff.
    ///
    /// ```no_run
    /// # async fn run(crew: crew_runtime::Crew, id: crew_runtime::store::journal::KickoffId) -> Result<(), crew_runtime::CrewError> {
    /// let output = crew.resume(&id).await?;
    /// println!("{}", output.raw);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn resume(&self, id: &KickoffId) -> Result<CrewOutput, CrewError> {
        let durable = self.durable()?;
        let journal = &durable.journal;
        let claimed = journal
            .claim_kickoff(id, &durable.owner, durable.lease)
            .await
            .map_err(|error| journal_failed(&error))?;
        let Some(lease) = claimed else {
            let summary = journal
                .store()
                .kickoff(id)
                .await
                .map_err(|error| journal_failed(&error))?;
            let status = if summary.status == KickoffStatus::Running {
                format!("running, held by {}", summary.owner)
            } else {
                summary.status.to_string()
            };
            return Err(DurableError::NotResumable {
                kickoff: id.to_string(),
                status,
            }
            .into_crew("the kickoff cannot be resumed"));
        };
        self.resume_claimed(durable, lease).await
    }

    /// Runs a kickoff this process just claimed under `lease`.
    async fn resume_claimed(
        &self,
        durable: &DurableCrew,
        lease: Lease,
    ) -> Result<CrewOutput, CrewError> {
        crate::crash_point::reached("after_claim");
        let run = match DurableRun::open(durable, self, lease).await {
            Ok(run) => run,
            Err(Refused { run, error, end }) => {
                // Nothing of it runs. A journal that cannot be trusted ends
                // it, failed; a crew of another shape, or a key that does
                // not open it, leaves it to a process that can.
                if end {
                    run.end(KickoffStatus::Failed, None).await;
                } else {
                    run.release().await;
                }
                return Err(error);
            }
        };
        if let Some((status, ended)) = run.recorded.end.clone() {
            // It ran to its end (its `EXECUTION_END` too) before its process
            // went: it is only marked so, and gives the result it had.
            run.end(status, None).await;
            return match ended {
                Some(ended) => ended.into_result(&run.lease.kickoff),
                None => Err(DurableError::NotResumable {
                    kickoff: run.lease.kickoff.to_string(),
                    status: status.to_string(),
                }
                .into_crew("the kickoff had ended")),
            };
        }
        // It runs for whom it started for, whatever value resumes it.
        let crew = self.as_started_for(run.start.user.as_deref(), run.start.tenant.as_deref());
        let inputs = run.start.inputs.clone().into_inputs();
        tracing::info!(
            target: "crew_runtime::durable",
            kickoff = %run.lease.kickoff,
            owner = %run.lease.owner,
            epoch = run.lease.epoch,
            replayed = run.replayed,
            "resuming a durable kickoff"
        );
        run.run(&crew, inputs).await
    }

    /// Cancels the durable kickoff `id` wherever it stands: its status
    /// becomes cancelled at once, its pending questions are withdrawn, and
    /// a process running it stops before its next step (its
    /// `EXECUTION_END` hooks do not run). A kickoff that has ended stays as
    /// it ended. Returns the status it now has.
    ///
    /// ```no_run
    /// # async fn run(crew: crew_runtime::Crew, id: crew_runtime::store::journal::KickoffId) -> Result<(), crew_runtime::CrewError> {
    /// let status = crew.cancel(&id).await?;
    /// assert!(status.is_finished());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn cancel(&self, id: &KickoffId) -> Result<KickoffStatus, CrewError> {
        let durable = self.durable()?;
        let status = durable
            .journal
            .store()
            .cancel_kickoff(id)
            .await
            .map_err(|error| journal_failed(&error))?;
        if status == KickoffStatus::Cancelled {
            // Its questions belong to it: nothing will take their answers.
            let store = durable.journal.store();
            if let Err(error) = store.withdraw_kickoff_questions(&id.to_string()).await {
                tracing::warn!(target: "crew_runtime::durable", kickoff = %id, %error, "withdrawing a cancelled kickoff's questions failed");
            }
            if durable.retention.is_zero() {
                purge(&durable.journal, id).await;
            }
        }
        Ok(status)
    }
}

/// Purges an ended kickoff's journal, saying so if it cannot.
async fn purge(journal: &Journal, id: &KickoffId) {
    if let Err(error) = journal.store().purge(id).await {
        tracing::warn!(target: "crew_runtime::durable", kickoff = %id, %error, "purging an ended kickoff's journal failed");
    }
}

/// A durable kickoff started and held by this process, not yet run (see
/// [`Crew::start_held`]).
///
/// ```no_run
/// # async fn run(crew: crew_runtime::Crew) -> Result<(), crew_runtime::CrewError> {
/// let held = crew.start_held([("order", "A-1042")]).await?;
/// let id = held.id();
/// match held.run().await {
///     Ok(output) => println!("{id}: {}", output.raw),
///     Err(crew_runtime::CrewError::Parked { .. }) => println!("{id} waits for a person"),
///     Err(error) => println!("{id} ended: {error}"),
/// }
/// # Ok(())
/// # }
/// ```
pub struct HeldKickoff {
    crew: Crew,
    id: KickoffId,
    /// Taken when it runs.
    inputs: Option<Inputs>,
    /// Taken when it runs; given up if it never does.
    run: Option<Arc<DurableRun>>,
}

impl HeldKickoff {
    /// The kickoff's id.
    ///
    /// ```no_run
    /// # fn run(held: crew_runtime::durable::HeldKickoff) {
    /// println!("kickoff {}", held.id());
    /// # }
    /// ```
    pub fn id(&self) -> KickoffId {
        self.id
    }

    /// Runs the kickoff to its end, as [`Crew::kickoff`] runs a durable
    /// kickoff: it may park ([`CrewError::Parked`]); dropped while it
    /// runs, it is given up (or parks, when it waits for a person).
    ///
    /// ```no_run
    /// # async fn run(held: crew_runtime::durable::HeldKickoff) -> Result<(), crew_runtime::CrewError> {
    /// let output = held.run().await?;
    /// println!("{}", output.raw);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn run(mut self) -> Result<CrewOutput, CrewError> {
        match (self.run.take(), self.inputs.take()) {
            (Some(run), Some(inputs)) => run.run(&self.crew, inputs).await,
            // Only `run` takes them, and it takes `self`.
            _ => Err(DurableError::NotResumable {
                kickoff: self.id.to_string(),
                status: "already run".to_owned(),
            }
            .into_crew("the held kickoff ran before")),
        }
    }
}

impl fmt::Debug for HeldKickoff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HeldKickoff")
            .field("crew", &self.crew.name())
            .field("kickoff", &self.id)
            .finish_non_exhaustive()
    }
}

impl Drop for HeldKickoff {
    fn drop(&mut self) {
        // Dropped unrun: given up at once, for a resumer to take.
        if let Some(run) = self.run.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(async move { run.release().await });
        }
    }
}

/// A process's background resumer: it claims the kickoffs of its crews
/// that nobody holds (their process went away, or they were started with
/// [`Crew::start`]) and runs each to its end. Run one in every replica of a
/// service; of racing resumers, exactly one gets each kickoff. A resumer
/// takes only the kickoffs its crews started in their present shape: during
/// a deploy, each version resumes its own.
///
/// ```no_run
/// # async fn run(store: crew_runtime::store::Store, crew: crew_runtime::Crew) {
/// use std::time::Duration;
/// use crew_runtime::durable::Resumer;
///
/// let resumer = Resumer::new(store).crew(&crew).every(Duration::from_secs(1));
/// tokio::spawn(async move { resumer.run().await });
/// # }
/// ```
#[derive(Clone)]
pub struct Resumer {
    store: Store,
    crews: Vec<(Crew, String)>,
    every: Duration,
    batch: usize,
}

impl fmt::Debug for Resumer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let crews: Vec<&str> = self.crews.iter().map(|(crew, _)| crew.name()).collect();
        f.debug_struct("Resumer")
            .field("store", &self.store)
            .field("crews", &crews)
            .field("every", &self.every)
            .field("batch", &self.batch)
            .finish()
    }
}

/// A kickoff a [`Resumer`] took up, and how it ended.
///
/// ```no_run
/// # async fn run(resumer: crew_runtime::durable::Resumer) -> Result<(), crew_runtime::CrewError> {
/// for resumed in resumer.resume_claimable().await? {
///     match resumed.result {
///         Ok(_) => println!("completed {}", resumed.kickoff),
///         Err(error) => println!("{}: {error}", resumed.kickoff),
///     }
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub struct Resumed {
    /// The kickoff.
    pub kickoff: KickoffId,
    /// How it ended.
    pub result: Result<CrewOutput, CrewError>,
}

impl Resumer {
    /// A resumer on `store` (its crews' store), looking every second, up
    /// to 16 kickoffs at a time; give it its crews with
    /// [`crew`](Self::crew).
    ///
    /// ```no_run
    /// # fn run(store: crew_runtime::store::Store, crew: crew_runtime::Crew) {
    /// let resumer = crew_runtime::durable::Resumer::new(store).crew(&crew);
    /// # let _ = resumer;
    /// # }
    /// ```
    pub fn new(store: Store) -> Resumer {
        Resumer {
            store,
            crews: Vec::new(),
            every: Duration::from_secs(1),
            batch: 16,
        }
    }

    /// Resumes the kickoffs of `crew` too (a durable crew; a crew that is
    /// not is refused at each look).
    ///
    /// ```no_run
    /// # fn run(resumer: crew_runtime::durable::Resumer, refunds: crew_runtime::Crew, research: crew_runtime::Crew) {
    /// let resumer = resumer.crew(&refunds).crew(&research);
    /// # let _ = resumer;
    /// # }
    /// ```
    pub fn crew(mut self, crew: &Crew) -> Resumer {
        let fingerprint = fingerprint(&shape(crew));
        self.crews.push((crew.clone(), fingerprint));
        self
    }

    /// How long [`Resumer::run`] waits between looks when nothing was
    /// claimable.
    ///
    /// ```no_run
    /// # fn run(resumer: crew_runtime::durable::Resumer) {
    /// let resumer = resumer.every(std::time::Duration::from_millis(200));
    /// # let _ = resumer;
    /// # }
    /// ```
    pub fn every(mut self, every: Duration) -> Resumer {
        self.every = every.max(Duration::from_millis(10));
        self
    }

    /// How many kickoffs of each crew one look claims at most (they then
    /// run at once).
    ///
    /// ```no_run
    /// # fn run(resumer: crew_runtime::durable::Resumer) {
    /// let resumer = resumer.batch(4);
    /// # let _ = resumer;
    /// # }
    /// ```
    pub fn batch(mut self, batch: usize) -> Resumer {
        self.batch = batch.max(1);
        self
    }

    /// One look: claims its crews' claimable kickoffs (up to the batch
    /// each), runs them to their ends at once, and says how each ended.
    /// First closes the questions whose deadline passed, and makes ready
    /// the parked kickoffs whose question was answered or closed so; also
    /// purges the journals past their retention. Empty when there was
    /// nothing to do.
    ///
    /// Errors: a crew that is not durable; the store cannot be read.
    ///
    /// ```no_run
    /// # async fn run(resumer: crew_runtime::durable::Resumer) -> Result<(), crew_runtime::CrewError> {
    /// while !resumer.resume_claimable().await?.is_empty() {}
    /// # Ok(())
    /// # }
    /// ```
    pub async fn resume_claimable(&self) -> Result<Vec<Resumed>, CrewError> {
        self.wake_answered().await;
        let mut runs = Vec::new();
        for (crew, fingerprint) in &self.crews {
            let durable = crew.durable()?;
            let journal = &durable.journal;
            if !durable.retention.is_zero() {
                let before = SystemTime::now()
                    .checked_sub(durable.retention)
                    .unwrap_or(SystemTime::UNIX_EPOCH);
                if let Err(error) = journal.store().purge_finished_before(before).await {
                    tracing::warn!(target: "crew_runtime::durable", %error, "purging ended kickoffs' journals failed");
                }
            }
            let leases = journal
                .claim_of_crew(
                    crew.name(),
                    fingerprint,
                    &durable.owner,
                    durable.lease,
                    self.batch,
                )
                .await
                .map_err(|error| journal_failed(&error))?;
            runs.extend(leases.into_iter().map(|lease| async move {
                let kickoff = lease.kickoff;
                let result = crew.resume_claimed(durable, lease).await;
                Resumed { kickoff, result }
            }));
        }
        Ok(futures_util::future::join_all(runs).await)
    }

    /// Looks for claimable kickoffs until dropped (at once when the store
    /// tells of a change, such as an answer; else every
    /// [`every`](Self::every) when there was nothing to do), running each
    /// it claims; a failing store is reported and looked at again. Run it
    /// as a task of its own; dropping the task gives up the kickoffs it
    /// held (another resumer takes them over).
    ///
    /// ```no_run
    /// # async fn run(resumer: crew_runtime::durable::Resumer) {
    /// let task = tokio::spawn(async move { resumer.run().await });
    /// // … at shutdown:
    /// task.abort();
    /// # }
    /// ```
    pub async fn run(&self) {
        // Told of answers: from this process, other processes on
        // PostgreSQL (`NOTIFY`), or a change of an SQLite file.
        let mut changes = self.store.changes();
        loop {
            match self.resume_claimable().await {
                Ok(resumed) if !resumed.is_empty() => {
                    for Resumed { kickoff, result } in resumed {
                        match result {
                            Ok(_) => {
                                tracing::info!(target: "crew_runtime::durable", %kickoff, "a resumed kickoff completed")
                            }
                            Err(error) => {
                                tracing::warn!(target: "crew_runtime::durable", %kickoff, %error, "a resumed kickoff ended without completing")
                            }
                        }
                    }
                    continue;
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(target: "crew_runtime::durable", %error, "looking for kickoffs to resume failed");
                }
            }
            let changed = async {
                // Behind (lagged): look again all the same.
                if let Err(tokio::sync::broadcast::error::RecvError::Closed) = changes.recv().await
                {
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                () = tokio::time::sleep(self.every) => {}
                () = changed => {}
            }
        }
    }

    /// Closes the questions past their deadline, and makes ready the
    /// parked kickoffs a question of which was answered or closed so. A
    /// failure is logged: the next look tries again.
    async fn wake_answered(&self) {
        if let Err(error) = self.store.close_lapsed().await {
            tracing::warn!(target: "crew_runtime::durable", %error, "closing lapsed questions failed");
        }
        match self.store.wake_kickoffs(None).await {
            Ok(woken) if !woken.is_empty() => {
                tracing::debug!(target: "crew_runtime::durable", woken = woken.len(), "parked kickoffs made ready");
            }
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(target: "crew_runtime::durable", %error, "waking answered kickoffs failed");
            }
        }
    }
}

// ---------------------------------------------------------------------
// The events of durable kickoffs.

/// A durable kickoff resumed from its journal, in this process (SPEC §13).
/// Sent on the crew's bus as an [`Event::Integration`] of kind
/// `CrewKickoffResumed`, before anything of the resumed run; the audit
/// trail records it as `kickoff_resumed`.
///
/// ```
/// use crew_runtime::Event;
/// use crew_runtime::durable::CrewKickoffResumedEvent;
///
/// # fn read(event: &Event) {
/// if let Event::Integration(integration) = event
///     && let Some(resumed) = integration.downcast_ref::<CrewKickoffResumedEvent>()
/// {
///     println!("{} resumed by {} after step {}", resumed.kickoff_id, resumed.owner, resumed.step);
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CrewKickoffResumedEvent {
    /// The crew's name.
    pub crew_name: String,
    /// The kickoff's id.
    pub kickoff_id: String,
    /// How many journal entries it resumes after (the steps replayed).
    pub step: u64,
    /// The process that resumed it (its owner name).
    pub owner: String,
    /// The claim's epoch.
    pub epoch: i64,
}

impl From<CrewKickoffResumedEvent> for Event {
    /// As an [`Event::Integration`] of kind `CrewKickoffResumed`.
    fn from(event: CrewKickoffResumedEvent) -> Event {
        Event::Integration(IntegrationEvent::new("CrewKickoffResumed", event))
    }
}

/// A durable kickoff parked (SPEC §13): it waited for a person longer
/// than its crew parks after, and no process holds it now. Sent on the
/// crew's bus as an [`Event::Integration`] of kind `CrewKickoffParked`;
/// the audit trail records it as `kickoff_parked`.
///
/// ```
/// use crew_runtime::Event;
/// use crew_runtime::durable::CrewKickoffParkedEvent;
///
/// # fn read(event: &Event) {
/// if let Event::Integration(integration) = event
///     && let Some(parked) = integration.downcast_ref::<CrewKickoffParkedEvent>()
/// {
///     println!("{} parked by {}", parked.kickoff_id, parked.owner);
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CrewKickoffParkedEvent {
    /// The crew's name.
    pub crew_name: String,
    /// The kickoff's id.
    pub kickoff_id: String,
    /// The process that parked it (its owner name).
    pub owner: String,
    /// Whether an answer was already there: the kickoff is ready, not
    /// parked, and a resumer takes it up at once.
    pub ready: bool,
}

impl From<CrewKickoffParkedEvent> for Event {
    /// As an [`Event::Integration`] of kind `CrewKickoffParked`.
    fn from(event: CrewKickoffParkedEvent) -> Event {
        Event::Integration(IntegrationEvent::new("CrewKickoffParked", event))
    }
}

/// What became of a tool call found in doubt ([`ToolCallInDoubtEvent`]).
///
/// ```
/// use crew_runtime::durable::InDoubtOutcome;
/// assert_eq!(InDoubtOutcome::RanAgain.as_str(), "ran_again");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum InDoubtOutcome {
    /// The tool may run again (read-only, or idempotent) and did, with the
    /// same idempotency key.
    RanAgain,
    /// The tool may run again, but the crew's rules refuse the call now.
    Refused,
    /// Its reconciler says the effect happened: that result stands.
    Happened,
    /// Its reconciler says the effect did not happen: it ran again as a
    /// new attempt, with a new key.
    DidNotHappen,
    /// Nothing could tell: the kickoff ended in doubt.
    LeftInDoubt,
}

impl InDoubtOutcome {
    /// Its name in records: `ran_again`, `refused`, `happened`,
    /// `did_not_happen`, `left_in_doubt`.
    ///
    /// ```
    /// use crew_runtime::durable::InDoubtOutcome;
    /// assert_eq!(InDoubtOutcome::LeftInDoubt.as_str(), "left_in_doubt");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            InDoubtOutcome::RanAgain => "ran_again",
            InDoubtOutcome::Refused => "refused",
            InDoubtOutcome::Happened => "happened",
            InDoubtOutcome::DidNotHappen => "did_not_happen",
            InDoubtOutcome::LeftInDoubt => "left_in_doubt",
        }
    }
}

/// A resumed kickoff found a tool call in doubt: its intent was journaled
/// and its result was not (SPEC §13). Sent as an [`Event::Integration`] of
/// kind `ToolCallInDoubt`; the audit trail records `call_in_doubt`.
///
/// ```
/// use crew_runtime::Event;
/// use crew_runtime::durable::{InDoubtOutcome, ToolCallInDoubtEvent};
///
/// # fn read(event: &Event) {
/// if let Event::Integration(integration) = event
///     && let Some(call) = integration.downcast_ref::<ToolCallInDoubtEvent>()
///     && call.outcome == InDoubtOutcome::LeftInDoubt
/// {
///     eprintln!("check {} by hand (key {})", call.tool_name, call.idempotency_key);
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolCallInDoubtEvent {
    /// The kickoff's id.
    pub kickoff_id: String,
    /// The tool.
    pub tool_name: String,
    /// The call's id.
    pub call_id: String,
    /// The call's idempotency key (as the tool got it).
    pub idempotency_key: String,
    /// What became of it.
    pub outcome: InDoubtOutcome,
}

impl From<ToolCallInDoubtEvent> for Event {
    /// As an [`Event::Integration`] of kind `ToolCallInDoubt`.
    fn from(event: ToolCallInDoubtEvent) -> Event {
        Event::Integration(IntegrationEvent::new("ToolCallInDoubt", event))
    }
}

/// A tool's reconciler said whether the effect of a call in doubt
/// happened (SPEC §13). Sent as an [`Event::Integration`] of kind
/// `ToolCallReconciled`, after its [`ToolCallInDoubtEvent`]; the audit
/// trail records `call_reconciled`.
///
/// ```
/// use crew_runtime::Event;
/// use crew_runtime::durable::ToolCallReconciledEvent;
///
/// # fn read(event: &Event) {
/// if let Event::Integration(integration) = event
///     && let Some(call) = integration.downcast_ref::<ToolCallReconciledEvent>()
/// {
///     println!("{}: happened = {}", call.tool_name, call.happened);
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolCallReconciledEvent {
    /// The kickoff's id.
    pub kickoff_id: String,
    /// The tool.
    pub tool_name: String,
    /// The call's id.
    pub call_id: String,
    /// The call's idempotency key (of the attempt in doubt).
    pub idempotency_key: String,
    /// Whether the effect had happened.
    pub happened: bool,
}

impl From<ToolCallReconciledEvent> for Event {
    /// As an [`Event::Integration`] of kind `ToolCallReconciled`.
    fn from(event: ToolCallReconciledEvent) -> Event {
        Event::Integration(IntegrationEvent::new("ToolCallReconciled", event))
    }
}

// ---------------------------------------------------------------------
// The journal's entries.

/// One journal entry, as its payload holds it (JSON, then sealed). The
/// `kind` the store keeps in clear is the variant's name.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Entry {
    /// The kickoff as started: the crew's shape, the inputs given, who it
    /// runs for, and for which tenant.
    Start {
        crew: Value,
        inputs: SavedInputs,
        user: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tenant: Option<String>,
    },
    /// The inputs the tasks begin with (after `EXECUTION_START`, `INPUT`),
    /// and the id of the kickoff's start event.
    Inputs {
        inputs: SavedInputs,
        started: String,
    },
    /// What `PRE_STEP` left for a task.
    Step { task: usize, context: String },
    /// A model's answer in a turn of a task.
    Answer {
        task: usize,
        turn: usize,
        content: String,
        tool_calls: Vec<SavedCall>,
        messages: Option<Vec<SavedMessage>>,
        usage: Option<SavedUsage>,
    },
    /// A hook of a call's PRE chain is about to ask a person about it:
    /// which hook, where, and the arguments the hooks before it left (a
    /// resumed call starts its chain there, with those).
    Gate {
        task: usize,
        turn: usize,
        call: String,
        position: usize,
        hook: String,
        input: Map<String, Value>,
        /// The id its question gets (none in entries of earlier versions).
        #[serde(default)]
        question: Option<String>,
    },
    /// A tool is about to start.
    Intent {
        task: usize,
        turn: usize,
        call: String,
        tool: String,
        input: Map<String, Value>,
        attempt: u32,
    },
    /// A call's observation.
    Result {
        task: usize,
        turn: usize,
        call: String,
        observation: String,
    },
    /// A task's output, and the tokens used so far.
    Task {
        task: usize,
        output: SavedOutput,
        usage: SavedUsage,
    },
    /// The kickoff's end, and how it ended: a process killed after this
    /// entry and before the kickoff was marked finished leaves it to a
    /// resumer, which marks it so and gives this result.
    End {
        status: String,
        #[serde(default)]
        ended: Option<Ended>,
    },
}

/// How a kickoff ended, as its end entry keeps it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "as", rename_all = "snake_case", deny_unknown_fields)]
enum Ended {
    /// It completed with this output.
    Output {
        raw: String,
        tasks: Vec<SavedOutput>,
        usage: SavedUsage,
    },
    /// A call was left in doubt.
    InDoubt {
        tool: String,
        call_id: String,
        key: String,
        why: String,
    },
    /// It failed, with this message.
    Failed { error: String },
}

impl Ended {
    fn of(result: &Result<CrewOutput, CrewError>) -> Ended {
        match result {
            Ok(output) => Ended::Output {
                raw: output.raw.clone(),
                tasks: output.tasks_output.iter().map(SavedOutput::of).collect(),
                usage: SavedUsage::of(output.token_usage),
            },
            Err(CrewError::InDoubt {
                tool,
                call_id,
                key,
                why,
                ..
            }) => Ended::InDoubt {
                tool: tool.clone(),
                call_id: call_id.clone(),
                key: key.clone(),
                why: why.to_string(),
            },
            Err(error) => Ended::Failed {
                error: error.to_string(),
            },
        }
    }

    /// The result the kickoff `kickoff` ended with.
    fn into_result(self, kickoff: &KickoffId) -> Result<CrewOutput, CrewError> {
        match self {
            Ended::Output { raw, tasks, usage } => Ok(CrewOutput {
                raw,
                tasks_output: tasks.into_iter().map(SavedOutput::into_output).collect(),
                token_usage: usage.usage(),
            }),
            Ended::InDoubt {
                tool,
                call_id,
                key,
                why,
            } => Err(CrewError::InDoubt {
                kickoff: Arc::from(kickoff.to_string()),
                tool,
                call_id,
                key,
                why: why.into_boxed_str(),
            }),
            Ended::Failed { error } => Err(DurableError::Journal(error)
                .into_crew("the kickoff had ended failed before it was marked so")),
        }
    }
}

/// An entry as sealed: the entry, and the number of the kickoff's last
/// event when it was written (a resumed kickoff's events go on from the
/// last one's).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Sealed {
    events: u64,
    #[serde(flatten)]
    entry: Entry,
}

impl Entry {
    fn kind(&self) -> &'static str {
        match self {
            Entry::Start { .. } => "start",
            Entry::Inputs { .. } => "inputs",
            Entry::Step { .. } => "step",
            Entry::Answer { .. } => "answer",
            Entry::Gate { .. } => "gate",
            Entry::Intent { .. } => "intent",
            Entry::Result { .. } => "result",
            Entry::Task { .. } => "task",
            Entry::End { .. } => "end",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct SavedInputs(std::collections::BTreeMap<String, String>);

impl SavedInputs {
    fn of(inputs: &Inputs) -> SavedInputs {
        SavedInputs(
            inputs
                .iter()
                .map(|(name, value)| (name.to_owned(), value.to_owned()))
                .collect(),
        )
    }

    fn into_inputs(self) -> Inputs {
        let mut inputs = Inputs::new();
        for (name, value) in self.0 {
            inputs.insert(name, value);
        }
        inputs
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct SavedCall {
    id: String,
    name: String,
    arguments: String,
}

impl SavedCall {
    fn of(call: &ToolCallRequest) -> SavedCall {
        SavedCall {
            id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
        }
    }

    fn into_call(self) -> ToolCallRequest {
        ToolCallRequest {
            id: self.id,
            name: self.name,
            arguments: self.arguments,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct SavedMessage {
    role: String,
    content: String,
    tool_calls: Vec<SavedCall>,
    tool_call_id: Option<String>,
}

impl SavedMessage {
    fn of(message: &ChatMessage) -> SavedMessage {
        let role = match message.role {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        };
        SavedMessage {
            role: role.to_owned(),
            content: message.content.clone(),
            tool_calls: message.tool_calls.iter().map(SavedCall::of).collect(),
            tool_call_id: message.tool_call_id.clone(),
        }
    }

    fn into_message(self) -> Result<ChatMessage, String> {
        let role = match self.role.as_str() {
            "system" => Role::System,
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool" => Role::Tool,
            other => return Err(format!("a message with the unknown role {other:?}")),
        };
        let mut message = ChatMessage::user(self.content);
        message.role = role;
        message.tool_calls = self
            .tool_calls
            .into_iter()
            .map(SavedCall::into_call)
            .collect();
        message.tool_call_id = self.tool_call_id;
        Ok(message)
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct SavedUsage([u64; 3]);

impl SavedUsage {
    fn of(usage: TokenUsage) -> SavedUsage {
        SavedUsage([
            usage.prompt_tokens,
            usage.completion_tokens,
            usage.total_tokens,
        ])
    }

    fn usage(self) -> TokenUsage {
        let [prompt, completion, total] = self.0;
        TokenUsage::new(prompt, completion, total)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct SavedOutput {
    description: String,
    expected_output: String,
    agent: String,
    raw: String,
    iteration_limit_reached: bool,
}

impl SavedOutput {
    fn of(output: &TaskOutput) -> SavedOutput {
        SavedOutput {
            description: output.description.clone(),
            expected_output: output.expected_output.clone(),
            agent: output.agent.clone(),
            raw: output.raw.clone(),
            iteration_limit_reached: output.iteration_limit_reached,
        }
    }

    fn into_output(self) -> TaskOutput {
        TaskOutput {
            description: self.description,
            expected_output: self.expected_output,
            agent: self.agent,
            raw: self.raw,
            iteration_limit_reached: self.iteration_limit_reached,
        }
    }
}

// ---------------------------------------------------------------------
// The crew's shape, which a resumed kickoff must match.

/// The shape of a crew a journal can be replayed on: its name, process,
/// agents with their tools (names and argument schemas) and tasks, as
/// canonical JSON.
fn shape(crew: &Crew) -> Value {
    let agents: Vec<Value> = crew
        .agents()
        .map(|agent| {
            let tools: Vec<Value> = agent
                .tools()
                .iter()
                .map(|tool| serde_json::json!({ "name": tool.name(), "schema": tool.parameters() }))
                .collect();
            serde_json::json!({ "role": agent.role(), "tools": tools })
        })
        .collect();
    let tasks: Vec<Value> = crew
        .tasks()
        .map(|task| {
            serde_json::json!({
                "name": task.name(),
                "agent": task.agent().map(|agent| agent.role().to_owned()),
            })
        })
        .collect();
    serde_json::json!({
        "crew": crew.name(),
        "process": format!("{:?}", crew.process()),
        "agents": agents,
        "tasks": tasks,
    })
}

/// The fingerprint of a shape: its SHA-256, as the store keeps it.
fn fingerprint(shape: &Value) -> String {
    // `serde_json` writes objects with sorted keys (no `preserve_order`
    // here… unless a dependency turns it on), so canonicalize first.
    let canonical = canonical(shape).to_string();
    let digest = sha2::Sha256::digest(canonical.as_bytes());
    let mut text = String::from("sha256:");
    for byte in digest {
        use std::fmt::Write as _;
        let _ = write!(text, "{byte:02x}");
    }
    text
}

/// `value` with every object's keys in order, whatever order the map
/// keeps them in.
fn canonical(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let mut sorted = Map::new();
            for key in keys {
                sorted.insert(key.clone(), canonical(&map[key]));
            }
            Value::Object(sorted)
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// The first place where two shapes differ, named (`agents[1].tools[0].name:
/// "refund" then, "refund_order" now`).
fn first_difference(then: &Value, now: &Value, path: &str) -> Option<String> {
    let at = |path: &str| {
        if path.is_empty() {
            "the crew".to_owned()
        } else {
            path.to_owned()
        }
    };
    match (then, now) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter().find_map(|key| {
                let inner = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => first_difference(x, y, &inner),
                    (Some(_), None) => Some(format!("{inner}: there then, gone now")),
                    (None, Some(_)) => Some(format!("{inner}: new")),
                    (None, None) => None,
                }
            })
        }
        (Value::Array(a), Value::Array(b)) => {
            let common =
                a.iter().zip(b).enumerate().find_map(|(index, (x, y))| {
                    first_difference(x, y, &format!("{path}[{index}]"))
                });
            common.or_else(|| {
                (a.len() != b.len())
                    .then(|| format!("{}: {} then, {} now", at(path), a.len(), b.len()))
            })
        }
        (a, b) if a == b => None,
        (a, b) => Some(format!("{}: {a} then, {b} now", at(path))),
    }
}

// ---------------------------------------------------------------------
// A durable kickoff under way.

/// What the journal holds, opened, by place.
#[derive(Default)]
struct Recorded {
    inputs: Option<(Inputs, EventId)>,
    /// The number of the last event sent before.
    events: u64,
    steps: HashMap<usize, String>,
    answers: HashMap<(usize, usize), RecordedAnswer>,
    calls: HashMap<(usize, usize, String), RecordedCall>,
    tasks: HashMap<usize, (TaskOutput, TokenUsage)>,
    /// The end entry, when the kickoff ended and was not marked so.
    end: Option<(KickoffStatus, Option<Ended>)>,
}

/// A claimed kickoff that cannot run here, and whether it ends (a journal
/// that cannot be trusted) or is given up (to a process that can run it).
struct Refused {
    run: Arc<DurableRun>,
    error: CrewError,
    end: bool,
}

/// The start entry's content.
struct Started {
    shape: Value,
    inputs: SavedInputs,
    user: Option<String>,
    tenant: Option<String>,
}

/// A kickoff's writer: what is deferred to the next write, and how many
/// entries the journal holds (this process holds the lease: it alone
/// appends).
struct Writer {
    deferred: Vec<(&'static str, Vec<u8>)>,
    written: u64,
}

/// A durable kickoff this process holds: its lease (renewed in the
/// background), what its journal held when it was claimed, and whether it
/// must stop.
struct DurableRun {
    journal: Journal,
    /// The crew's name, as its events give it.
    crew: String,
    lease: Lease,
    lease_for: Duration,
    retention: Duration,
    start: Started,
    recorded: Recorded,
    /// How many entries were replayed from (0: a fresh kickoff).
    replayed: usize,
    /// Why the kickoff must stop before its next step, once it must.
    stopped: Mutex<Option<CrewError>>,
    /// The kickoff's writes, one at a time (see [`DurableRun::append`]).
    writer: tokio::sync::Mutex<Writer>,
    /// The lease's renewal, stopped when the run is dropped.
    renewal: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Whether the kickoff ended (or was given up): nothing to release.
    done: AtomicBool,
    /// When to park (`None`: never), and how long its questions stay open.
    park_after: Option<Duration>,
    approval_deadline: Duration,
    /// Its caller waits for a person here instead of parking (see
    /// [`Crew::kickoff_waiting`]); dropped, it parks all the same.
    waiting: AtomicBool,
    /// How many people are being asked now.
    asking: AtomicUsize,
    /// When the kickoff parks, while someone is asked.
    park_at: tokio::sync::watch::Sender<Option<tokio::time::Instant>>,
}

impl DurableRun {
    /// A new kickoff of `crew`: its row, and its start entry.
    async fn create(
        durable: &DurableCrew,
        crew: &Crew,
        inputs: &Inputs,
    ) -> Result<Arc<DurableRun>, CrewError> {
        let shape = shape(crew);
        let journal = &durable.journal;
        let lease = journal
            .create_kickoff(
                crew.name(),
                &fingerprint(&shape),
                &durable.owner,
                durable.lease,
            )
            .await
            .map_err(|error| journal_failed(&error))?;
        let start = Entry::Start {
            crew: shape.clone(),
            inputs: SavedInputs::of(inputs),
            user: crew.user().map(str::to_owned),
            tenant: crew.tenant().map(str::to_owned),
        };
        let run = DurableRun::held(
            durable,
            lease,
            Started {
                shape,
                inputs: SavedInputs::of(inputs),
                user: crew.user().map(str::to_owned),
                tenant: crew.tenant().map(str::to_owned),
            },
            Recorded::default(),
            0,
        );
        run.append(&start).await?;
        Ok(run)
    }

    /// A kickoff this process claimed under `lease`: its journal read and
    /// checked against `crew`.
    async fn open(
        durable: &DurableCrew,
        crew: &Crew,
        lease: Lease,
    ) -> Result<Arc<DurableRun>, Refused> {
        let journal = &durable.journal;
        let refused = |lease: Lease, error: CrewError, end: bool| {
            let empty = Started {
                shape: Value::Null,
                inputs: SavedInputs(Default::default()),
                user: None,
                tenant: None,
            };
            let run = DurableRun::held(durable, lease, empty, Recorded::default(), 0);
            Refused { run, error, end }
        };
        let entries = match journal.entries(&lease.kickoff).await {
            Ok(entries) => entries,
            Err(error) => {
                let end = matches!(error, JournalError::Corrupt { .. });
                return Err(refused(lease, journal_failed(&error), end));
            }
        };
        let replayed = entries.len();
        let (start, recorded) = match read_entries(&lease.kickoff, entries) {
            Ok(read) => read,
            Err(error) => return Err(refused(lease, journal_failed(&error), true)),
        };
        let owner = start
            .shape
            .get("crew")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if owner != crew.name() {
            let error = DurableError::OtherCrew {
                kickoff: lease.kickoff.to_string(),
                owner,
                crew: crew.name().to_owned(),
            };
            let error = error.into_crew("the kickoff belongs to another crew");
            return Err(refused(lease, error, false));
        }
        if let Some(difference) = first_difference(&start.shape, &shape(crew), "") {
            let error = DurableError::FingerprintChanged {
                kickoff: lease.kickoff.to_string(),
                difference,
            };
            let error = error.into_crew("the crew changed since the kickoff started");
            return Err(refused(lease, error, false));
        }
        Ok(DurableRun::held(durable, lease, start, recorded, replayed))
    }

    fn held(
        durable: &DurableCrew,
        lease: Lease,
        start: Started,
        recorded: Recorded,
        replayed: usize,
    ) -> Arc<DurableRun> {
        let crew = start
            .shape
            .get("crew")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let run = Arc::new(DurableRun {
            journal: durable.journal.clone(),
            crew,
            lease,
            lease_for: durable.lease,
            retention: durable.retention,
            start,
            recorded,
            replayed,
            stopped: Mutex::new(None),
            writer: tokio::sync::Mutex::new(Writer {
                deferred: Vec::new(),
                written: u64::try_from(replayed).unwrap_or(u64::MAX),
            }),
            renewal: Mutex::new(None),
            done: AtomicBool::new(false),
            park_after: durable.park_after,
            approval_deadline: durable.approval_deadline,
            waiting: AtomicBool::new(false),
            asking: AtomicUsize::new(0),
            park_at: tokio::sync::watch::Sender::new(None),
        });
        let renewal = tokio::spawn(renew(Arc::downgrade(&run)));
        *run.renewal.lock().unwrap_or_else(PoisonError::into_inner) = Some(renewal);
        run
    }

    /// Runs the kickoff to its end (or until it must stop, or parks),
    /// journaled.
    async fn run(self: Arc<Self>, crew: &Crew, inputs: Inputs) -> Result<CrewOutput, CrewError> {
        let kickoff = crew.kickoff_with(inputs, Some(Arc::clone(&self) as Arc<dyn KickoffJournal>));
        tokio::pin!(kickoff);
        // Declared after the run: dropped before it, while it still says
        // whether a person is being asked.
        let guard = GiveUp(Arc::clone(&self), crew.clone());
        let result = if self.park_after.is_some() && !self.waiting.load(Ordering::Acquire) {
            tokio::select! {
                result = &mut kickoff => result,
                // Dropped here, whatever it was doing: only a person was
                // awaited, and their question stays open.
                () = self.time_to_park() => Err(self.park(crew).await),
            }
        } else {
            // Nothing else to watch: the run alone, polled as it is.
            kickoff.await
        };
        drop(guard);
        result
    }

    /// Ready once someone was asked for as long as the kickoff waits
    /// before it parks, and the question is kept in the store (pending
    /// there: the kickoff's next process takes its answer); never, for a
    /// kickoff that does not park.
    async fn time_to_park(&self) {
        let mut park_at = self.park_at.subscribe();
        loop {
            let at = *park_at.borrow_and_update();
            match at {
                Some(at) => {
                    tokio::select! {
                        () = tokio::time::sleep_until(at) => {
                            if self.question_kept().await {
                                return;
                            }
                            // Not written yet, or answered already: look
                            // again shortly, unless the asking ends.
                            let again = tokio::time::Instant::now() + PARK_RECHECK;
                            self.park_at.send_if_modified(|at| {
                                let asking = at.is_some();
                                if asking {
                                    *at = Some(again);
                                }
                                asking
                            });
                        }
                        changed = park_at.changed() => if changed.is_err() {
                            return std::future::pending().await;
                        },
                    }
                }
                None => {
                    if park_at.changed().await.is_err() {
                        return std::future::pending().await;
                    }
                }
            }
        }
    }

    /// Whether a question of the kickoff is pending in the store.
    async fn question_kept(&self) -> bool {
        let kickoff = self.lease.kickoff.to_string();
        match self.journal.store().kickoff_waits(&kickoff).await {
            Ok(waits) => waits,
            Err(error) => {
                tracing::warn!(target: "crew_runtime::durable", %kickoff, %error, "looking for a kickoff's pending question failed: not parked");
                false
            }
        }
    }

    /// Parks the kickoff (its run was dropped): no process holds it until
    /// its question is answered or expires. [`CrewError::Parked`], or why
    /// it could not be parked (another process holds it now).
    async fn park(&self, crew: &Crew) -> CrewError {
        if self.done.swap(true, Ordering::AcqRel) {
            return self
                .stopped()
                .unwrap_or_else(|| parked(&self.lease.kickoff));
        }
        self.stop_renewal();
        let status = match self.journal.park(&self.lease).await {
            Ok(status) => status,
            Err(error) => return journal_failed(&error),
        };
        tracing::info!(target: "crew_runtime::durable", kickoff = %self.lease.kickoff, %status, "a durable kickoff parked");
        crew.dispatcher().emit(Event::from(CrewKickoffParkedEvent {
            crew_name: self.crew.clone(),
            kickoff_id: self.lease.kickoff.to_string(),
            owner: self.lease.owner.clone(),
            ready: status == KickoffStatus::Ready,
        }));
        parked(&self.lease.kickoff)
    }

    /// Commits `entry`, or says why the kickoff must stop.
    /// Commits `entry` (with the entries deferred before it), or defers
    /// it, or says why the kickoff must stop.
    ///
    /// What nothing outside the run acts on before a later entry is
    /// deferred, and committed in the same transaction as that entry: what
    /// `PRE_STEP` left, a model's answer. An answer is so committed with
    /// its first call's intent, before any of its calls starts (SPEC §13);
    /// a process gone before then asked the model for nothing anyone acted
    /// on, and its resumed run asks again (and runs `PRE_STEP` again, a
    /// step it never recorded). The inputs are committed at once
    /// (`EXECUTION_START` and `INPUT` run once per kickoff), and so is each
    /// result (the model acts on it). One transaction per call's intent and
    /// one per its result.
    async fn append(&self, entry: &Entry) -> Result<(), CrewError> {
        if let Some(error) = self.stopped() {
            return Err(error);
        }
        let events = EventSequence::current().map_or(0, |sequence| sequence.last());
        let sealed = Sealed {
            events,
            entry: entry.clone(),
        };
        let payload = serde_json::to_vec(&sealed).map_err(|error| {
            DurableError::Journal(format!("a journal entry could not be written: {error}"))
                .into_crew("the kickoff's journal failed")
        })?;
        // One writer at a time: what is deferred goes first, whichever of a
        // turn's calls commits first.
        let mut writer = self.writer.lock().await;
        writer.deferred.push((entry.kind(), payload));
        if matches!(entry, Entry::Step { .. } | Entry::Answer { .. }) {
            return Ok(());
        }
        self.write(&mut writer).await
    }

    /// Commits what is deferred, if anything.
    async fn commit_deferred(&self) -> Result<(), CrewError> {
        if let Some(error) = self.stopped() {
            return Err(error);
        }
        let mut writer = self.writer.lock().await;
        if writer.deferred.is_empty() {
            return Ok(());
        }
        self.write(&mut writer).await
    }

    /// Commits what `writer` holds in one transaction (one round trip to
    /// the store), and empties it.
    async fn write(&self, writer: &mut Writer) -> Result<(), CrewError> {
        let batch: Vec<(&str, &[u8])> = writer
            .deferred
            .iter()
            .map(|(kind, payload)| (*kind, payload.as_slice()))
            .collect();
        for (kind, _) in &batch {
            crate::crash_point::reached_at("before_append", kind);
        }
        let written = self
            .journal
            .append_after(&self.lease, writer.written, &batch)
            .await;
        if written.is_ok() {
            for (kind, _) in &batch {
                crate::crash_point::reached_at("after_append", kind);
            }
        }
        writer.deferred.clear();
        match written {
            Ok(last) => {
                writer.written = last;
                Ok(())
            }
            Err(error) => {
                let failed = journal_failed(&error);
                self.stop(failed.clone());
                Err(failed)
            }
        }
    }

    fn stop(&self, error: CrewError) {
        let mut stopped = self.stopped.lock().unwrap_or_else(PoisonError::into_inner);
        if stopped.is_none() {
            *stopped = Some(error);
        }
    }

    /// Ends the kickoff with `status` (its end entry first, when it
    /// completed), then purges its journal unless it is kept.
    async fn end(&self, status: KickoffStatus, entry: Option<Entry>) {
        self.done.store(true, Ordering::Release);
        self.stop_renewal();
        if let Some(entry) = entry
            && let Err(error) = self.append(&entry).await
        {
            tracing::warn!(target: "crew_runtime::durable", kickoff = %self.lease.kickoff, %error, "the kickoff's end could not be journaled");
            return;
        }
        crate::crash_point::reached("before_finish");
        if let Err(error) = self.journal.finish(&self.lease, status).await {
            tracing::warn!(target: "crew_runtime::durable", kickoff = %self.lease.kickoff, %error, "the kickoff's end could not be recorded");
            return;
        }
        if self.retention.is_zero() {
            purge(&self.journal, &self.lease.kickoff).await;
        }
    }

    /// Gives the lease up: any process may claim the kickoff now.
    async fn release(&self) {
        if self.done.swap(true, Ordering::AcqRel) {
            return;
        }
        self.stop_renewal();
        if let Err(error) = self.journal.release(&self.lease).await {
            tracing::debug!(target: "crew_runtime::durable", kickoff = %self.lease.kickoff, %error, "giving a kickoff's lease up failed (it runs out on its own)");
        }
    }

    fn stop_renewal(&self) {
        if let Some(renewal) = self
            .renewal
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            renewal.abort();
        }
    }
}

/// The error of a kickoff that parked.
fn parked(kickoff: &KickoffId) -> CrewError {
    CrewError::Parked {
        kickoff_id: Arc::from(kickoff.to_string()),
    }
}

/// A kickoff's run dropped before its end gives its lease up (another
/// process resumes it at once), without `EXECUTION_END`; one that waited
/// for a person, of a crew that parks, parks instead (a service shutting
/// down leaves its waiting kickoffs parked, not running).
struct GiveUp(Arc<DurableRun>, Crew);

impl Drop for GiveUp {
    fn drop(&mut self) {
        if self.0.done.load(Ordering::Acquire) {
            return;
        }
        let run = Arc::clone(&self.0);
        let crew = self.1.clone();
        let parks = run.park_after.is_some() && run.asking.load(Ordering::Acquire) > 0;
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    if parks && run.question_kept().await {
                        let _ = run.park(&crew).await;
                    } else {
                        run.release().await;
                    }
                });
            }
            Err(_) => run.stop_renewal(),
        }
    }
}

/// Renews a kickoff's lease every third of its length until the run is
/// gone, ends, or loses it (then the run must stop).
async fn renew(run: std::sync::Weak<DurableRun>) {
    loop {
        let every = match run.upgrade() {
            Some(run) => run.lease_for / 3,
            None => return,
        };
        tokio::time::sleep(every).await;
        let Some(run) = run.upgrade() else { return };
        if run.done.load(Ordering::Acquire) {
            return;
        }
        match run.journal.renew(&run.lease, run.lease_for).await {
            Ok(()) => {}
            Err(error @ (JournalError::LeaseLost { .. } | JournalError::UnknownKickoff(_))) => {
                run.stop(journal_failed(&error));
                return;
            }
            // A store briefly unreachable: try again at the next renewal
            // (the lease runs out on its own if it stays so, and every
            // write is fenced anyway).
            Err(error) => {
                tracing::warn!(target: "crew_runtime::durable", kickoff = %run.lease.kickoff, %error, "renewing a kickoff's lease failed");
            }
        }
    }
}

/// The journal's entries, opened into what a replay needs.
fn read_entries(
    kickoff: &KickoffId,
    entries: Vec<JournalEntry>,
) -> Result<(Started, Recorded), JournalError> {
    let corrupt = |seq: u64, why: String| JournalError::Corrupt {
        kickoff: *kickoff,
        seq,
        why,
    };
    let mut start = None;
    let mut recorded = Recorded::default();
    for entry in entries {
        let seq = entry.seq;
        let Sealed {
            events,
            entry: parsed,
        } = serde_json::from_slice(&entry.payload)
            .map_err(|error| corrupt(seq, format!("it does not parse: {error}")))?;
        recorded.events = recorded.events.max(events);
        if parsed.kind() != entry.kind {
            return Err(corrupt(
                seq,
                format!("its kind {:?} does not match what it holds", entry.kind),
            ));
        }
        match parsed {
            Entry::Start {
                crew,
                inputs,
                user,
                tenant,
            } => {
                start = Some(Started {
                    shape: crew,
                    inputs,
                    user,
                    tenant,
                });
            }
            Entry::Inputs { inputs, started } => {
                let started = started
                    .parse::<EventId>()
                    .map_err(|_| corrupt(seq, format!("{started:?} is not an event id")))?;
                recorded.inputs = Some((inputs.into_inputs(), started));
            }
            Entry::Step { task, context } => {
                recorded.steps.insert(task, context);
            }
            Entry::Answer {
                task,
                turn,
                content,
                tool_calls,
                messages,
                usage,
            } => {
                let messages = match messages {
                    Some(messages) => Some(
                        messages
                            .into_iter()
                            .map(SavedMessage::into_message)
                            .collect::<Result<Vec<_>, _>>()
                            .map_err(|why| corrupt(seq, why))?,
                    ),
                    None => None,
                };
                let response = ModelResponse {
                    content,
                    tool_calls: tool_calls.into_iter().map(SavedCall::into_call).collect(),
                };
                recorded.answers.insert(
                    (task, turn),
                    RecordedAnswer {
                        response,
                        messages,
                        usage: usage.map(SavedUsage::usage),
                    },
                );
            }
            Entry::Gate {
                task,
                turn,
                call,
                position,
                hook,
                input,
                question,
            } => {
                recorded.calls.insert(
                    (task, turn, call),
                    RecordedCall::Gated {
                        gate: ChainGate::new(position, hook, input),
                        question,
                    },
                );
            }
            Entry::Intent {
                task,
                turn,
                call,
                tool,
                input,
                attempt,
            } => {
                let key = derive_key(kickoff, task, turn, &call, attempt);
                recorded.calls.insert(
                    (task, turn, call),
                    RecordedCall::InDoubt(Intent {
                        tool,
                        input,
                        key,
                        attempt,
                        at: entry.written_at,
                    }),
                );
            }
            Entry::Result {
                task,
                turn,
                call,
                observation,
            } => {
                recorded
                    .calls
                    .insert((task, turn, call), RecordedCall::Finished(observation));
            }
            Entry::Task {
                task,
                output,
                usage,
            } => {
                recorded
                    .tasks
                    .insert(task, (output.into_output(), usage.usage()));
            }
            Entry::End { status, ended } => {
                let status = status.parse::<KickoffStatus>().map_err(|_| {
                    corrupt(seq, format!("its end has the unknown status {status:?}"))
                })?;
                recorded.end = Some((status, ended));
            }
        }
    }
    let start = start.ok_or_else(|| corrupt(1, "the journal has no start entry".to_owned()))?;
    Ok((start, recorded))
}

/// The idempotency key of a call: HMAC of its place and attempt, keyed by
/// the kickoff's random id (the same in every process).
fn derive_key(
    kickoff: &KickoffId,
    task: usize,
    turn: usize,
    call: &str,
    attempt: u32,
) -> IdempotencyKey {
    let place = format!("task {task}/turn {turn}/call {call}");
    IdempotencyKey::derive(kickoff.as_bytes(), &place, attempt)
}

impl KickoffJournal for DurableRun {
    fn recorded_inputs(&self) -> Option<(Inputs, EventId)> {
        self.recorded.inputs.clone()
    }

    fn record_inputs<'a>(&'a self, inputs: &'a Inputs, started: EventId) -> JournalFuture<'a, ()> {
        Box::pin(self.append_owned(Entry::Inputs {
            inputs: SavedInputs::of(inputs),
            started: started.to_string(),
        }))
    }

    fn events_before(&self) -> u64 {
        self.recorded.events
    }

    fn resumed_event(&self) -> Option<Event> {
        (self.replayed > 0).then(|| {
            Event::from(CrewKickoffResumedEvent {
                crew_name: self.crew.clone(),
                kickoff_id: self.lease.kickoff.to_string(),
                step: u64::try_from(self.replayed).unwrap_or(u64::MAX),
                owner: self.lease.owner.clone(),
                epoch: self.lease.epoch,
            })
        })
    }

    fn recorded_step(&self, task: usize) -> Option<String> {
        self.recorded.steps.get(&task).cloned()
    }

    fn record_step<'a>(&'a self, task: usize, context: &'a str) -> JournalFuture<'a, ()> {
        Box::pin(self.append_owned(Entry::Step {
            task,
            context: context.to_owned(),
        }))
    }

    fn recorded_answer(&self, task: usize, turn: usize) -> Option<RecordedAnswer> {
        self.recorded.answers.get(&(task, turn)).cloned()
    }

    fn record_answer<'a>(
        &'a self,
        task: usize,
        turn: usize,
        answer: &'a RecordedAnswer,
    ) -> JournalFuture<'a, ()> {
        Box::pin(
            self.append_owned(Entry::Answer {
                task,
                turn,
                content: answer.response.content.clone(),
                tool_calls: answer
                    .response
                    .tool_calls
                    .iter()
                    .map(SavedCall::of)
                    .collect(),
                messages: answer
                    .messages
                    .as_ref()
                    .map(|messages| messages.iter().map(SavedMessage::of).collect()),
                usage: answer.usage.map(SavedUsage::of),
            }),
        )
    }

    fn recorded_call(&self, place: Place<'_>) -> RecordedCall {
        self.recorded
            .calls
            .get(&(place.task, place.turn, place.call.to_owned()))
            .cloned()
            .unwrap_or(RecordedCall::Unrecorded)
    }

    fn key(&self, place: Place<'_>, attempt: u32) -> IdempotencyKey {
        derive_key(
            &self.lease.kickoff,
            place.task,
            place.turn,
            place.call,
            attempt,
        )
    }

    fn model_key(&self, task: usize, turn: usize) -> IdempotencyKey {
        // Unlike any call's place ("task …/turn …/call …").
        let place = format!("task {task}/turn {turn}/model");
        IdempotencyKey::derive(self.lease.kickoff.as_bytes(), &place, 0)
    }

    fn record_gate<'a>(
        &'a self,
        place: Place<'a>,
        gate: &'a ChainGate,
    ) -> JournalFuture<'a, String> {
        Box::pin(async move {
            let question = crate::store::new_id();
            self.append_owned(Entry::Gate {
                task: place.task,
                turn: place.turn,
                call: place.call.to_owned(),
                position: gate.position,
                hook: gate.hook.clone(),
                input: gate.input.clone(),
                question: Some(question.clone()),
            })
            .await?;
            Ok(question)
        })
    }

    fn record_intent<'a>(
        &'a self,
        place: Place<'a>,
        tool: &'a str,
        input: &'a Map<String, Value>,
        attempt: u32,
    ) -> JournalFuture<'a, ()> {
        Box::pin(self.append_owned(Entry::Intent {
            task: place.task,
            turn: place.turn,
            call: place.call.to_owned(),
            tool: tool.to_owned(),
            input: input.clone(),
            attempt,
        }))
    }

    fn record_result<'a>(
        &'a self,
        place: Place<'a>,
        observation: &'a str,
    ) -> JournalFuture<'a, ()> {
        Box::pin(self.append_owned(Entry::Result {
            task: place.task,
            turn: place.turn,
            call: place.call.to_owned(),
            observation: observation.to_owned(),
        }))
    }

    fn in_doubt_in<'a>(
        &'a self,
        intent: &'a Intent,
        tool_timeout: Duration,
    ) -> JournalFuture<'a, Duration> {
        Box::pin(async move {
            // Both times on the database's clock (SPEC §13): a process whose
            // own clock is off neither judges a call too early nor waits
            // too long.
            let now = self
                .journal
                .database_now()
                .await
                .map_err(|error| journal_failed(&error))?;
            let settled_by = intent.at + tool_timeout + self.lease_for;
            Ok(settled_by.duration_since(now).unwrap_or(Duration::ZERO))
        })
    }

    fn settled_events(
        &self,
        place: Place<'_>,
        tool: &str,
        key: &IdempotencyKey,
        settled: Settled,
    ) -> Vec<Event> {
        let outcome = match settled {
            Settled::RanAgain => InDoubtOutcome::RanAgain,
            Settled::Refused => InDoubtOutcome::Refused,
            Settled::Happened => InDoubtOutcome::Happened,
            Settled::DidNotHappen => InDoubtOutcome::DidNotHappen,
            Settled::LeftInDoubt => InDoubtOutcome::LeftInDoubt,
        };
        tracing::warn!(
            target: "crew_runtime::durable",
            kickoff = %self.lease.kickoff,
            task = place.task,
            turn = place.turn,
            call = place.call,
            tool,
            outcome = outcome.as_str(),
            "a tool call of a resumed kickoff was in doubt"
        );
        let in_doubt = ToolCallInDoubtEvent {
            kickoff_id: self.lease.kickoff.to_string(),
            tool_name: tool.to_owned(),
            call_id: place.call.to_owned(),
            idempotency_key: key.as_str().to_owned(),
            outcome,
        };
        let mut events = Vec::with_capacity(2);
        if let Settled::Happened | Settled::DidNotHappen = settled {
            events.push(Event::from(ToolCallReconciledEvent {
                kickoff_id: in_doubt.kickoff_id.clone(),
                tool_name: in_doubt.tool_name.clone(),
                call_id: in_doubt.call_id.clone(),
                idempotency_key: in_doubt.idempotency_key.clone(),
                happened: settled == Settled::Happened,
            }));
        }
        events.insert(0, Event::from(in_doubt));
        events
    }

    fn recorded_task(&self, task: usize) -> Option<(TaskOutput, TokenUsage)> {
        self.recorded.tasks.get(&task).cloned()
    }

    fn record_task<'a>(
        &'a self,
        task: usize,
        output: &'a TaskOutput,
        used: TokenUsage,
    ) -> JournalFuture<'a, ()> {
        Box::pin(self.append_owned(Entry::Task {
            task,
            output: SavedOutput::of(output),
            usage: SavedUsage::of(used),
        }))
    }

    fn finish<'a>(&'a self, result: &'a Result<CrewOutput, CrewError>) -> JournalFuture<'a, ()> {
        Box::pin(async move {
            let status = match result {
                Ok(_) => KickoffStatus::Completed,
                Err(CrewError::InDoubt { .. }) => KickoffStatus::InDoubt,
                Err(_) => KickoffStatus::Failed,
            };
            let entry = Entry::End {
                status: status.to_string(),
                ended: Some(Ended::of(result)),
            };
            self.end(status, Some(entry)).await;
            Ok(())
        })
    }

    fn flush(&self) -> JournalFuture<'_, ()> {
        Box::pin(self.commit_deferred())
    }

    fn stopped(&self) -> Option<CrewError> {
        self.stopped
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn human_input_timeout(&self, configured: Duration) -> Duration {
        if self.park_after.is_some() {
            self.approval_deadline
        } else {
            configured
        }
    }

    fn asking(&self, asked: bool, within: Duration) {
        let Some(after) = self.park_after else { return };
        if asked {
            if self.asking.fetch_add(1, Ordering::AcqRel) == 0 {
                // Too far to be a time: never.
                let at = tokio::time::Instant::now().checked_add(after.min(within));
                self.park_at.send_replace(at);
            }
        } else if self.asking.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.park_at.send_replace(None);
        }
    }

    fn kickoff_id(&self) -> String {
        self.lease.kickoff.to_string()
    }

    fn settle_call(&self, place: Place<'_>, outcome: hooks_core::ApprovedCallOutcome) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let store = self.journal.store().clone();
        let (kickoff, call) = (self.lease.kickoff.to_string(), place.call.to_owned());
        let by = self.lease.owner.clone();
        runtime.spawn(async move {
            if let Err(error) = store
                .record_kickoff_call_outcome(&kickoff, &call, &outcome, &by)
                .await
            {
                tracing::warn!(target: "crew_runtime::durable", %kickoff, call = %call, %error, "recording what became of an approved call failed");
            }
        });
    }

    fn settled_here(&self, question_id: &str) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let store = self.journal.store().clone();
        let (question, by) = (question_id.to_owned(), self.lease.owner.clone());
        runtime.spawn(async move {
            if let Err(error) = store.record_outcome_by(&question, &by).await {
                tracing::warn!(target: "crew_runtime::durable", %question, %error, "naming the process of an approved call failed");
            }
        });
    }
}

impl DurableRun {
    async fn append_owned(&self, entry: Entry) -> Result<(), CrewError> {
        self.append(&entry).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_difference_of_two_shapes_is_named() {
        let then = serde_json::json!({"crew": "refunds", "agents": [{"role": "Support", "tools": [{"name": "refund"}]}]});
        let now = serde_json::json!({"crew": "refunds", "agents": [{"role": "Support", "tools": [{"name": "refund_order"}]}]});
        assert_eq!(
            first_difference(&then, &now, "").as_deref(),
            Some(r#"agents[0].tools[0].name: "refund" then, "refund_order" now"#)
        );
        assert_eq!(first_difference(&then, &then, ""), None);
        let more = serde_json::json!({"crew": "refunds", "agents": [{"role": "Support", "tools": [{"name": "refund"}]}, {"role": "Auditor", "tools": []}]});
        assert_eq!(
            first_difference(&then, &more, "").as_deref(),
            Some("agents: 1 then, 2 now")
        );
    }

    #[test]
    fn a_fingerprint_does_not_depend_on_key_order() {
        let a: Value =
            serde_json::from_str(r#"{"b": 1, "a": {"y": 2, "x": 3}}"#).unwrap_or_default();
        let b: Value =
            serde_json::from_str(r#"{"a": {"x": 3, "y": 2}, "b": 1}"#).unwrap_or_default();
        assert_eq!(fingerprint(&a), fingerprint(&b));
        assert_ne!(fingerprint(&a), fingerprint(&serde_json::json!({"b": 2})));
    }

    #[test]
    fn every_kind_of_entry_has_a_crash_point_before_and_after_its_append() {
        let kinds = [
            "start", "inputs", "step", "answer", "gate", "intent", "result", "task", "end",
        ];
        for kind in kinds {
            for stage in ["before_append", "after_append"] {
                let point = format!("{stage}:{kind}");
                assert!(
                    crate::crash_point::POINTS.contains(&point.as_str()),
                    "{point} is not a crash point"
                );
            }
        }
        let entry = Entry::End {
            status: "completed".into(),
            ended: None,
        };
        assert!(kinds.contains(&entry.kind()));
    }

    /// A journal entry as the store gives it back.
    fn stored(seq: u64, entry: &Entry) -> JournalEntry {
        JournalEntry {
            seq,
            kind: entry.kind().to_owned(),
            payload: serde_json::to_vec(&Sealed {
                events: 0,
                entry: entry.clone(),
            })
            .unwrap_or_default(),
            written_at: SystemTime::now(),
        }
    }

    fn started() -> Entry {
        Entry::Start {
            crew: serde_json::json!({"crew": "refunds"}),
            inputs: SavedInputs(Default::default()),
            user: None,
            tenant: None,
        }
    }

    #[test]
    fn a_journal_that_ended_unmarked_gives_the_result_it_ended_with() {
        // A process killed after the end entry and before the kickoff was
        // marked finished: its resumer finishes it with what it ended with.
        let kickoff = KickoffId::generate().expect("an id");
        let output = CrewOutput {
            raw: "settled".into(),
            tasks_output: vec![TaskOutput {
                description: "Settle".into(),
                expected_output: String::new(),
                agent: "Support".into(),
                raw: "settled".into(),
                iteration_limit_reached: false,
            }],
            token_usage: TokenUsage::new(3, 2, 5),
        };
        let end = Entry::End {
            status: "completed".into(),
            ended: Some(Ended::of(&Ok(output.clone()))),
        };
        let (_, recorded) =
            read_entries(&kickoff, vec![stored(1, &started()), stored(2, &end)]).expect("reads");
        let (status, ended) = recorded
            .end
            .expect("its end is read, not refused as corrupt");
        assert_eq!(status, KickoffStatus::Completed);
        let result = ended.expect("with its result").into_result(&kickoff);
        assert_eq!(result.ok(), Some(output));

        let in_doubt = Err(CrewError::InDoubt {
            kickoff: Arc::from(kickoff.to_string()),
            tool: "refund".into(),
            call_id: "call_2".into(),
            key: "k".into(),
            why: "check by hand".into(),
        });
        let end = Entry::End {
            status: "in_doubt".into(),
            ended: Some(Ended::of(&in_doubt)),
        };
        let (_, recorded) =
            read_entries(&kickoff, vec![stored(1, &started()), stored(2, &end)]).expect("reads");
        let (status, ended) = recorded.end.expect("its end");
        assert_eq!(status, KickoffStatus::InDoubt);
        match ended.expect("with its result").into_result(&kickoff) {
            Err(CrewError::InDoubt { tool, call_id, .. }) => {
                assert_eq!((tool.as_str(), call_id.as_str()), ("refund", "call_2"));
            }
            other => panic!("not in doubt: {other:?}"),
        }
    }

    #[test]
    fn an_entry_names_its_kind_in_its_payload() {
        let entry = Entry::Step {
            task: 1,
            context: "notes".into(),
        };
        let payload = serde_json::to_value(&entry).unwrap_or_default();
        assert_eq!(payload["kind"], "step");
        assert_eq!(entry.kind(), "step");
    }
}
