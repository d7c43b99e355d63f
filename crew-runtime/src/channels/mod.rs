//! Approvals announced where approvers are (SPEC §14).
//!
//! A pending question is announced on every channel in use: the question
//! row, committed when it is asked, is what any replica's [`Announcer`]
//! finds, and a change of the question is queued in an outbox in the
//! store, in the same transaction as the change. An announcer delivers
//! the question when it is asked, and again when it is answered, expires
//! or is withdrawn; whatever becomes of the process that asked. A channel that fails is tried
//! again later, with a growing backoff (or when the channel asked to be,
//! as with Slack's `Retry-After`); it never blocks or answers the
//! question, which waits in the inbox meanwhile. Each failure is a trace
//! line, an event on the announcer's bus, and a record on the question's
//! audit trail when it has one.
//!
//! Channels: [`Webhook`] (a JSON POST signed the Standard Webhooks way),
//! [`Slack`] (direct messages with buttons, which the inbox's Slack
//! endpoint checks) and [`Email`] (the question and a signed link, over
//! SMTP). Another channel implements [`Channel`].
//!
//! ```no_run
//! use crew_runtime::channels::{Announcer, Webhook};
//! use crew_runtime::store::Store;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let store = Store::connect("postgres://ops@db/approvals").await?;
//! let pager = Webhook::new("pager", "http://pager.internal/hooks/approvals", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")?;
//! let announcer = Announcer::new(store).channel(pager);
//! // Every question asked from now on is announced on the pager.
//! announcer.register().await?;
//! tokio::spawn(announcer.run(std::future::pending::<()>()));
//! # Ok(())
//! # }
//! ```

mod email;
mod slack;
mod webhook;

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use hooks_core::events::IntegrationEvent;
use hooks_core::{Event, EventBus};

use crate::store::{Due, Question, QuestionStatus, Store, StoreError};

pub use email::Email;
pub use slack::Slack;
pub(crate) use slack::parse_button_value;
pub use webhook::Webhook;

/// A place approvers are told of questions: Slack, e-mail, a webhook.
///
/// `deliver` tells the channel where `notice`'s question stands. It may be
/// called again with the same notice (after a failure, or when the replica
/// that delivered it stopped before recording it): a channel that can,
/// makes a repeat harmless (a webhook's message id stays the same).
///
/// ```
/// use crew_runtime::channels::{Channel, ChannelError, Delivered, Notice};
/// use futures_util::future::BoxFuture;
///
/// /// Prints each question's news.
/// struct Console;
///
/// impl Channel for Console {
///     fn name(&self) -> &str { "console" }
///     fn kind(&self) -> &'static str { "console" }
///     fn deliver<'a>(&'a self, notice: &'a Notice) -> BoxFuture<'a, Result<Delivered, ChannelError>> {
///         Box::pin(async move {
///             println!("{} is {}", notice.question.id, notice.question.status);
///             Ok(Delivered::default())
///         })
///     }
/// }
/// ```
pub trait Channel: Send + Sync + 'static {
    /// Its name among the store's channels (unique per store).
    fn name(&self) -> &str;
    /// What kind of channel it is (`"webhook"`, `"slack"`, `"email"`).
    fn kind(&self) -> &'static str;
    /// Tells the channel where the question stands.
    fn deliver<'a>(&'a self, notice: &'a Notice) -> BoxFuture<'a, Result<Delivered, ChannelError>>;
}

/// What a channel is told: a question as it stands now, and what it was
/// told of it before.
///
/// ```
/// # fn tell(notice: &crew_runtime::channels::Notice) {
/// match notice.told {
///     None => println!("new: {} ({})", notice.question.tool, notice.question.prompt),
///     Some(before) => println!("{} was {before}, is {}", notice.question.id, notice.question.status),
/// }
/// # }
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Notice {
    /// The question, its arguments redacted as the crew redacted them.
    pub question: Question,
    /// The status the channel was told before (`None`: this is the
    /// question's first announcement).
    pub told: Option<QuestionStatus>,
    /// What the channel answered to the first announcement
    /// ([`Delivered::reference`]), to update what it showed.
    pub reference: Option<String>,
}

/// What a channel answered to a delivery.
///
/// ```
/// let delivered = crew_runtime::channels::Delivered::default().with_reference("C024BE91L/1712.000200");
/// assert_eq!(delivered.reference.as_deref(), Some("C024BE91L/1712.000200"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Delivered {
    /// Where the channel put the announcement (a Slack message), given
    /// back with the updates; kept from the first delivery when `None`.
    pub reference: Option<String>,
}

impl Delivered {
    /// With `reference`.
    ///
    /// ```
    /// let delivered = crew_runtime::channels::Delivered::default().with_reference("msg-7");
    /// assert_eq!(delivered.reference.as_deref(), Some("msg-7"));
    /// ```
    pub fn with_reference(mut self, reference: impl Into<String>) -> Self {
        self.reference = Some(reference.into());
        self
    }
}

/// Why a delivery failed, and when the channel asked to be tried again.
/// Its text never holds a token or a secret: a channel says what failed,
/// not with what.
///
/// ```
/// use std::time::Duration;
/// use crew_runtime::channels::ChannelError;
///
/// let error = ChannelError::new("the server answered 429").retry_after(Duration::from_secs(30));
/// assert_eq!(error.to_string(), "the server answered 429");
/// assert_eq!(error.retry_after, Some(Duration::from_secs(30)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChannelError {
    /// What failed.
    pub message: String,
    /// When to try again, when the channel said.
    pub retry_after: Option<Duration>,
    /// What was delivered before the failure (as
    /// [`Delivered::reference`]), kept for the next attempt: a channel
    /// that tells several people does not tell one twice.
    pub progress: Option<String>,
}

impl ChannelError {
    /// A failure saying `message`.
    ///
    /// ```
    /// let error = crew_runtime::channels::ChannelError::new("connection refused");
    /// assert_eq!(error.retry_after, None);
    /// ```
    pub fn new(message: impl Into<String>) -> Self {
        ChannelError {
            message: message.into(),
            retry_after: None,
            progress: None,
        }
    }

    /// With what was delivered before the failure, given back to the next
    /// attempt as [`Notice::reference`].
    ///
    /// ```
    /// let error = crew_runtime::channels::ChannelError::new("the second message failed")
    ///     .progress(r#"{"T1/U1":"D1/1712.0002"}"#);
    /// assert!(error.progress.is_some());
    /// ```
    pub fn progress(mut self, reference: impl Into<String>) -> Self {
        self.progress = Some(reference.into());
        self
    }

    /// To be tried again after `delay`, as the channel asked.
    ///
    /// ```
    /// use std::time::Duration;
    /// let error = crew_runtime::channels::ChannelError::new("busy").retry_after(Duration::from_secs(2));
    /// assert_eq!(error.retry_after, Some(Duration::from_secs(2)));
    /// ```
    pub fn retry_after(mut self, delay: Duration) -> Self {
        self.retry_after = Some(delay);
        self
    }
}

impl fmt::Display for ChannelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ChannelError {}

/// A failed delivery, as it travels on the announcer's event bus:
/// [`Event::Integration`] of kind [`AnnouncementFailed::KIND`].
///
/// ```
/// use crew_runtime::channels::AnnouncementFailed;
/// use hooks_core::Event;
///
/// fn on_event(event: &Event) {
///     if let Event::Integration(integration) = event
///         && let Some(failed) = integration.downcast_ref::<AnnouncementFailed>()
///     {
///         eprintln!("{} not told of {}: {}", failed.channel, failed.question, failed.error);
///     }
/// }
/// # on_event(&Event::Integration(hooks_core::events::IntegrationEvent::new("x", 1)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AnnouncementFailed {
    /// The question.
    pub question: String,
    /// The channel's name.
    pub channel: String,
    /// Which attempt in a row failed (1 for the first).
    pub attempt: u32,
    /// Why.
    pub error: String,
    /// Whether the announcer stopped trying (the question waits in the
    /// inbox all the same).
    pub gave_up: bool,
}

impl AnnouncementFailed {
    /// The kind of its [`IntegrationEvent`].
    pub const KIND: &'static str = "AnnouncementFailed";
}

/// How a failing announcement is tried again: after `first`, then twice as
/// long each time up to `longest`, and not after `attempts` failures in a
/// row.
#[derive(Debug, Clone, Copy)]
struct Backoff {
    first: Duration,
    longest: Duration,
    attempts: u32,
}

impl Backoff {
    /// The wait after failed attempt `attempt` (1 for the first).
    fn after(&self, attempt: u32) -> Duration {
        crate::http_retry::backoff(self.first, attempt.saturating_sub(1), self.longest)
    }
}

/// `text` cut to at most `limit` characters, marked when cut (a Slack
/// block, an e-mail's subject).
fn cut(text: &str, limit: usize) -> String {
    if text.chars().count() <= limit {
        return text.to_owned();
    }
    let mut kept: String = text.chars().take(limit.saturating_sub(1)).collect();
    kept.push('…');
    kept
}

/// Waits, after the store's first news, until it has been quiet for
/// [`COALESCE`] (at most [`SETTLE_AT_MOST`]): a burst of questions is one
/// pass, made once they are asked, not one pass each competing with the
/// asking.
async fn settle(changes: &mut tokio::sync::broadcast::Receiver<String>) {
    use tokio::sync::broadcast::error::RecvError;
    let until = tokio::time::Instant::now() + SETTLE_AT_MOST;
    loop {
        let quiet = until
            .saturating_duration_since(tokio::time::Instant::now())
            .min(COALESCE);
        match tokio::time::timeout(quiet, changes.recv()).await {
            Ok(Ok(_) | Err(RecvError::Lagged(_))) if tokio::time::Instant::now() < until => {}
            _ => return,
        }
    }
}

/// A client for a channel's requests: answers within `timeout`, no
/// redirect followed (a channel's URL is where its messages go).
pub(crate) fn http_client(timeout: Duration) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|error| crate::http_client::error_chain(&error.without_url()))
}

/// A failed request on one line, down to its cause (a refused
/// connection, a timeout); never its URL, which may carry a token.
pub(crate) fn request_failed(error: reqwest::Error) -> String {
    crate::http_client::error_chain(&error.without_url())
}

/// The longest wait a server's `Retry-After` is taken for.
const LONGEST_ASKED_WAIT: Duration = Duration::from_secs(3_600);

/// How long a channel's server asks to be left alone (`Retry-After`, in
/// seconds or as an HTTP date), an hour at most.
fn asked_wait(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    crate::http_retry::retry_after(headers, std::time::SystemTime::now())
        .map(|wait| wait.min(LONGEST_ASKED_WAIT))
}

/// Delivers the store's announcements on its channels: any number of
/// replicas may run one on the same store; each announcement is delivered
/// by one of them at a time.
///
/// ```no_run
/// use std::time::Duration;
/// use crew_runtime::channels::{Announcer, Webhook};
///
/// # async fn run(store: crew_runtime::store::Store) -> Result<(), Box<dyn std::error::Error>> {
/// let announcer = Announcer::new(store)
///     .channel(Webhook::new("pager", "http://pager.internal/hooks", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")?)
///     .retry(Duration::from_secs(1), Duration::from_secs(300), 12);
/// announcer.register().await?;
/// let delivered = announcer.deliver_due().await?;
/// println!("{delivered} announcements delivered");
/// # Ok(())
/// # }
/// ```
pub struct Announcer {
    store: Store,
    channels: Vec<Arc<dyn Channel>>,
    events: Option<Arc<EventBus>>,
    holder: String,
    backoff: Backoff,
    hold: Duration,
    concurrency: usize,
    /// When (the store's clock, ms) this announcer last looked for
    /// unannounced questions among all the pending ones; 0: never.
    scanned_all_at: AtomicI64,
}

impl fmt::Debug for Announcer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Announcer")
            .field("store", &self.store)
            .field(
                "channels",
                &self
                    .channels
                    .iter()
                    .map(|channel| channel.name())
                    .collect::<Vec<_>>(),
            )
            .field("holder", &self.holder)
            .finish_non_exhaustive()
    }
}

/// How many announcements one pass takes at most.
const BATCH: usize = 256;

/// How quiet the store's news must be before a pass starts: a burst of
/// questions is delivered once it is over, not while it is being asked.
const COALESCE: Duration = Duration::from_millis(20);

/// The longest a pass waits for a burst to end, from its first news.
const SETTLE_AT_MOST: Duration = Duration::from_millis(250);

/// How far back (ms) a pass looks for questions not announced yet; once
/// a minute, and on its first pass, an announcer looks at all the pending
/// ones (a question whose asking took longer to commit, or asked by a
/// process whose clock is behind, is announced then).
const LOOK_BACK_MS: i64 = 60_000;

impl Announcer {
    /// An announcer on `store`, with no channel yet. Failed deliveries are
    /// tried again after 1 s, 2 s, 4 s … up to 5 min, 10 times in a row
    /// at most.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) {
    /// let announcer = crew_runtime::channels::Announcer::new(store);
    /// # let _ = announcer;
    /// # }
    /// ```
    pub fn new(store: Store) -> Self {
        let mut id = [0_u8; 8];
        // Only names this replica among the holders: a clash would let two
        // replicas deliver one announcement twice at worst.
        let _ = getrandom::fill(&mut id);
        let holder = format!(
            "announcer-{}-{}",
            std::process::id(),
            id.iter().map(|b| format!("{b:02x}")).collect::<String>()
        );
        Announcer {
            store,
            channels: Vec::new(),
            events: None,
            holder,
            backoff: Backoff {
                first: Duration::from_secs(1),
                longest: Duration::from_secs(300),
                attempts: 10,
            },
            hold: Duration::from_secs(60),
            concurrency: 16,
            scanned_all_at: AtomicI64::new(0),
        }
    }

    /// Delivers on `channel` too.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::channels::ChannelError> {
    /// use crew_runtime::channels::{Announcer, Webhook};
    /// let announcer = Announcer::new(store).channel(Webhook::new("pager", "http://pager.internal/hooks", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")?);
    /// # let _ = announcer;
    /// # Ok(())
    /// # }
    /// ```
    pub fn channel(mut self, channel: impl Channel) -> Self {
        self.channels.push(Arc::new(channel));
        self
    }

    /// Emits each failed delivery on `bus` ([`AnnouncementFailed`]).
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) {
    /// use std::sync::Arc;
    /// let bus = Arc::new(hooks_core::EventBus::new());
    /// let announcer = crew_runtime::channels::Announcer::new(store).events(Arc::clone(&bus));
    /// # let _ = announcer;
    /// # }
    /// ```
    pub fn events(mut self, bus: Arc<EventBus>) -> Self {
        self.events = Some(bus);
        self
    }

    /// Tries a failed delivery again after `first`, then twice as long
    /// each time up to `longest`, and gives up after `attempts` failures
    /// in a row (at least 1).
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) {
    /// use std::time::Duration;
    /// let announcer = crew_runtime::channels::Announcer::new(store)
    ///     .retry(Duration::from_millis(200), Duration::from_secs(60), 20);
    /// # let _ = announcer;
    /// # }
    /// ```
    pub fn retry(mut self, first: Duration, longest: Duration, attempts: u32) -> Self {
        self.backoff = Backoff {
            first,
            longest: longest.max(first),
            attempts: attempts.max(1),
        };
        self
    }

    /// Names this announcer's channels in the store: every question
    /// pending from now on, asked by any process on the store, is
    /// announced on each (those pending already within a minute, at the
    /// next look at all the pending questions).
    ///
    /// ```no_run
    /// # async fn run(announcer: crew_runtime::channels::Announcer) -> Result<(), crew_runtime::store::StoreError> {
    /// announcer.register().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn register(&self) -> Result<(), StoreError> {
        for channel in &self.channels {
            self.store
                .register_channel(channel.name(), channel.kind())
                .await?;
        }
        Ok(())
    }

    /// Stops naming this announcer's channels in the store: questions
    /// are no longer announced on them (a channel taken out of service);
    /// what was announced before is still updated by an announcer that
    /// has them. [`register`](Announcer::register) names
    /// them again.
    ///
    /// ```no_run
    /// # async fn run(announcer: crew_runtime::channels::Announcer) -> Result<(), crew_runtime::store::StoreError> {
    /// announcer.unregister().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn unregister(&self) -> Result<(), StoreError> {
        for channel in &self.channels {
            self.store.disable_channel(channel.name()).await?;
        }
        Ok(())
    }

    /// One pass: delivers the announcements due now on this announcer's
    /// channels (several at once), and records what became of each. The
    /// number delivered.
    ///
    /// ```no_run
    /// # async fn run(announcer: crew_runtime::channels::Announcer) -> Result<(), crew_runtime::store::StoreError> {
    /// while announcer.deliver_due().await? > 0 {}
    /// # Ok(())
    /// # }
    /// ```
    pub async fn deliver_due(&self) -> Result<usize, StoreError> {
        let names: Vec<&str> = self.channels.iter().map(|c| c.name()).collect();
        let hold = i64::try_from(self.hold.as_millis()).unwrap_or(i64::MAX);
        let now = self.store.now();
        let scanned_all_at = self.scanned_all_at.load(Ordering::Relaxed);
        let all = scanned_all_at == 0 || now.saturating_sub(scanned_all_at) >= LOOK_BACK_MS;
        let since = if all {
            0
        } else {
            now.saturating_sub(LOOK_BACK_MS)
        };
        let due = self
            .store
            .take_due(&names, &self.holder, hold, BATCH, since)
            .await?;
        if all {
            self.scanned_all_at.store(now.max(1), Ordering::Relaxed);
        }
        let delivered = futures_util::stream::iter(due)
            .map(|due| self.deliver_one(due))
            .buffer_unordered(self.concurrency)
            .collect::<Vec<_>>()
            .await;
        let mut count = 0;
        for result in delivered {
            if result? {
                count += 1;
            }
        }
        Ok(count)
    }

    /// Runs until `stop` completes: a pass each time the store changes
    /// (a question asked or answered, by any process), and at least every
    /// second (retries come due).
    ///
    /// ```no_run
    /// # async fn run(announcer: crew_runtime::channels::Announcer) {
    /// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    /// let running = tokio::spawn(announcer.run(async move { let _ = stopped.await; }));
    /// // … at shutdown:
    /// let _ = stop.send(());
    /// let _ = running.await;
    /// # }
    /// ```
    pub async fn run(self, stop: impl Future<Output = ()>) {
        let mut changes = self.store.changes();
        if let Err(error) = self.register().await {
            tracing::warn!(target: "crew_runtime::channels", %error, "the channels could not be named in the store; retrying");
        }
        tokio::pin!(stop);
        loop {
            match self.deliver_due().await {
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(target: "crew_runtime::channels", %error, "a pass of the announcer failed; trying again");
                }
            }
            tokio::select! {
                () = &mut stop => return,
                change = changes.recv() => match change {
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                    _ => settle(&mut changes).await,
                },
                () = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
    }

    /// Delivers one announcement this replica took: whether it was
    /// delivered.
    async fn deliver_one(&self, due: Due) -> Result<bool, StoreError> {
        let Some(channel) = self
            .channels
            .iter()
            .find(|channel| channel.name() == due.channel)
        else {
            return Ok(false);
        };
        // Read after taking it: the status told is the one now.
        let Some(question) = self.store.question(&due.question).await? else {
            return Ok(false);
        };
        let told = crate::store::told_state(&question);
        if due.told_state.as_deref() == Some(told.as_str()) {
            // Woken, but told this already: no news, nothing sent.
            self.store
                .announced(&due.question, &due.channel, &self.holder, &told, None)
                .await?;
            return Ok(false);
        }
        let notice = Notice {
            question,
            told: due.told,
            reference: due.reference.clone(),
        };
        let delivery = tokio::time::timeout(self.hold / 2, channel.deliver(&notice))
            .await
            .unwrap_or_else(|_| {
                Err(ChannelError::new(format!(
                    "no answer within {} s",
                    (self.hold / 2).as_secs()
                )))
            });
        match delivery {
            Ok(delivered) => {
                self.store
                    .announced(
                        &due.question,
                        &due.channel,
                        &self.holder,
                        &told,
                        delivered.reference.as_deref(),
                    )
                    .await?;
                Ok(true)
            }
            Err(error) => {
                self.failed(&due, &error).await?;
                Ok(false)
            }
        }
    }

    /// Records a failed delivery: a trace line, an event, an audit record,
    /// and the next attempt (or none).
    async fn failed(&self, due: &Due, error: &ChannelError) -> Result<(), StoreError> {
        let attempt = due.attempts.saturating_add(1);
        let gave_up = attempt >= self.backoff.attempts;
        let retry_in = error
            .retry_after
            .unwrap_or_else(|| self.backoff.after(attempt));
        let retry_in_ms = i64::try_from(retry_in.as_millis()).unwrap_or(i64::MAX / 4);
        tracing::warn!(
            target: "crew_runtime::channels",
            question = %due.question,
            channel = %due.channel,
            attempt,
            gave_up,
            error = %error,
            "an announcement failed; the question waits in the inbox"
        );
        self.store
            .announcement_failed(
                due,
                &self.holder,
                &error.message,
                error.progress.as_deref(),
                retry_in_ms,
                gave_up,
            )
            .await?;
        let failed = AnnouncementFailed {
            question: due.question.clone(),
            channel: due.channel.clone(),
            attempt,
            error: error.message.clone(),
            gave_up,
        };
        #[cfg(feature = "audit")]
        self.record(&failed).await;
        if let Some(bus) = &self.events {
            bus.emit(&Event::Integration(IntegrationEvent::new(
                AnnouncementFailed::KIND,
                failed,
            )));
        }
        Ok(())
    }

    /// The failure on the question's audit trail, if its process named
    /// one; a failure to record is a trace line.
    #[cfg(feature = "audit")]
    async fn record(&self, failed: &AnnouncementFailed) {
        let recorded = async {
            let Some(trail) = self.store.trail_of(&failed.question).await? else {
                return Ok(());
            };
            let entry = crate::store::audit::Entry {
                at: self.store.now(),
                kind: "announcement_failed".to_owned(),
                data: serde_json::json!({
                    "question": failed.question,
                    "channel": failed.channel,
                    "attempt": failed.attempt,
                    "error": failed.error,
                    "gave_up": failed.gave_up,
                }),
            };
            self.store.append_audit(&trail, &[entry]).await.map(drop)
        };
        if let Err(error) = recorded.await as Result<(), StoreError> {
            tracing::warn!(target: "crew_runtime::channels", question = %failed.question, %error, "recording a failed announcement failed");
        }
    }
}
