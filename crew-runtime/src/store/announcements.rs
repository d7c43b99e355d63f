//! The outbox of announcements (SPEC §14): what the store keeps so that
//! any replica delivers each question to the channels, once per change of
//! the question, whatever becomes of the process that asked.

use super::{QuestionStatus, Store, StoreError, on_pool};

/// One announcement due: a question whose channel has not been told its
/// status yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Due {
    pub question: String,
    pub channel: String,
    /// The status the channel was last told (none: never announced).
    pub told: Option<QuestionStatus>,
    /// The failed attempts in a row so far.
    pub attempts: u32,
    /// What the channel answered when it was first told.
    pub reference: Option<String>,
}

/// Where an announcement stands, as the store keeps it.
///
/// ```no_run
/// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::store::StoreError> {
/// for announcement in store.announcements("3f0c…").await? {
///     println!("{}: told {:?}, {} failed attempts", announcement.channel, announcement.told, announcement.attempts);
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Announcement {
    /// The question announced.
    pub question: String,
    /// The channel's name.
    pub channel: String,
    /// The question's status the channel was last told; `None` while the
    /// question has not reached it.
    pub told: Option<QuestionStatus>,
    /// Failed attempts in a row (0 after a delivery).
    pub attempts: u32,
    /// Why the last attempt failed, while the announcement is not
    /// delivered.
    pub last_error: Option<String>,
    /// Whether delivery stopped after too many failures (the question
    /// still waits in the inbox).
    pub gave_up: bool,
}

/// A due announcement as read: question, channel, told, attempts,
/// reference.
type DueRow = (String, String, Option<String>, i64, Option<String>);

/// An announcement as read: question, channel, told, attempts, last error,
/// when delivery stopped.
type AnnouncementRow = (
    String,
    String,
    Option<String>,
    i64,
    Option<String>,
    Option<i64>,
);

/// The status a told state names (`approved`, `approved/ran`).
fn status(text: Option<String>) -> Option<QuestionStatus> {
    text.and_then(|text| {
        text.split('/')
            .next()
            .and_then(|status| status.parse().ok())
    })
}

/// What a channel is told of a question, as the outbox keeps it: its
/// status, and once its approved call ran, failed or was refused, that
/// too (`approved/ran`): either change is news.
pub(crate) fn told_state(question: &super::Question) -> String {
    match &question.outcome {
        Some(outcome) => format!("{}/{}", question.status, outcome.outcome),
        None => question.status.as_str().to_owned(),
    }
}

/// [`told_state`] in SQL, of the question `q`.
const STATE_SQL: &str = "(SELECT q.status || COALESCE('/' || q.outcome, '') \
                         FROM crew_approvals q WHERE q.id = question_id)";

fn count(value: i64) -> u32 {
    u32::try_from(value.max(0)).unwrap_or(u32::MAX)
}

impl Store {
    /// Names `name` as a channel of kind `kind` that questions are
    /// announced on: each question asked from now on is written with an
    /// announcement for it. Naming it again enables it again.
    pub(crate) async fn register_channel(&self, name: &str, kind: &str) -> Result<(), StoreError> {
        let now = self.now();
        let sql = "INSERT INTO crew_channels (name, kind, created_at) VALUES ($1, $2, $3) \
                   ON CONFLICT (name) DO UPDATE SET kind = excluded.kind, disabled_at = NULL";
        self.file_still_there()?;
        on_pool!(self, |pool| {
            sqlx::query(sql)
                .bind(name)
                .bind(kind)
                .bind(now)
                .execute(pool)
                .await?;
        });
        Ok(())
    }

    /// Stops announcing on channel `name`: questions asked from now on
    /// are written without an announcement for it (those written before
    /// are still delivered by an announcer that has it).
    pub(crate) async fn disable_channel(&self, name: &str) -> Result<(), StoreError> {
        let now = self.now();
        let sql = "UPDATE crew_channels SET disabled_at = $2 WHERE name = $1";
        self.file_still_there()?;
        on_pool!(self, |pool| {
            sqlx::query(sql).bind(name).bind(now).execute(pool).await?;
        });
        Ok(())
    }

    /// Takes for `holder`, until `hold_ms` from now, the announcements due
    /// now on `channels` (never announced, or told a status the question
    /// has left; held by no replica; not waiting for their next attempt),
    /// at most `limit`, the longest waiting first: one write for the
    /// whole batch. A replica takes what no other holds; none takes what
    /// one has told since.
    pub(crate) async fn take_due(
        &self,
        channels: &[&str],
        holder: &str,
        hold_ms: i64,
        limit: usize,
    ) -> Result<Vec<Due>, StoreError> {
        if channels.is_empty() {
            return Ok(Vec::new());
        }
        let now = self.now();
        let names = (0..channels.len())
            .map(|i| format!("${}", i + 5))
            .collect::<Vec<_>>()
            .join(", ");
        let due = format!(
            "gave_up_at IS NULL AND next_at <= $1 AND held_until <= $1 \
             AND (told IS NULL OR told <> {STATE_SQL})"
        );
        let sql = format!(
            "UPDATE crew_announcements SET holder = $2, held_until = $1 + $3, updated_at = $1 \
             WHERE {due} AND (question_id, channel) IN \
             (SELECT question_id, channel FROM crew_announcements WHERE {due} \
             AND channel IN ({names}) ORDER BY next_at, question_id LIMIT $4) \
             RETURNING question_id, channel, told, attempts, reference"
        );
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.file_still_there()?;
        let rows: Vec<DueRow> = on_pool!(self, |pool| {
            let mut connection = pool.acquire().await?;
            let _turn = self.background_write_turn().await;
            let mut query = sqlx::query_as(&sql)
                .bind(now)
                .bind(holder)
                .bind(hold_ms)
                .bind(limit);
            for channel in channels {
                query = query.bind(*channel);
            }
            query.fetch_all(&mut *connection).await?
        });
        Ok(rows
            .into_iter()
            .map(|(question, channel, told, attempts, reference)| Due {
                question,
                channel,
                told: status(told),
                attempts: count(attempts),
                reference,
            })
            .collect())
    }

    /// Records that `holder` told the channel status `told` (and what the
    /// channel answered, kept when `None`), and lets the announcement go.
    pub(crate) async fn announced(
        &self,
        question: &str,
        channel: &str,
        holder: &str,
        told: &str,
        reference: Option<&str>,
    ) -> Result<(), StoreError> {
        let now = self.now();
        let sql = "UPDATE crew_announcements SET told = $4, attempts = 0, next_at = $5, \
                   holder = NULL, held_until = 0, last_error = NULL, \
                   reference = COALESCE($6, reference), updated_at = $5 \
                   WHERE question_id = $1 AND channel = $2 AND holder = $3";
        on_pool!(self, |pool| {
            let mut connection = pool.acquire().await?;
            let _turn = self.background_write_turn().await;
            sqlx::query(sql)
                .bind(question)
                .bind(channel)
                .bind(holder)
                .bind(told)
                .bind(now)
                .bind(reference)
                .execute(&mut *connection)
                .await?;
        });
        Ok(())
    }

    /// Records a failed attempt of `holder` (and what it delivered before
    /// failing, when it says): the next at `retry_in_ms` from now, or none
    /// (`give_up`).
    pub(crate) async fn announcement_failed(
        &self,
        due: &Due,
        holder: &str,
        error: &str,
        progress: Option<&str>,
        retry_in_ms: i64,
        give_up: bool,
    ) -> Result<(), StoreError> {
        let now = self.now();
        let sql = "UPDATE crew_announcements SET attempts = attempts + 1, next_at = $5 + $6, \
                   holder = NULL, held_until = 0, last_error = $4, updated_at = $5, \
                   gave_up_at = CASE WHEN $7 = 1 THEN $5 ELSE NULL END, \
                   reference = COALESCE($8, reference) \
                   WHERE question_id = $1 AND channel = $2 AND holder = $3";
        on_pool!(self, |pool| {
            let mut connection = pool.acquire().await?;
            let _turn = self.background_write_turn().await;
            sqlx::query(sql)
                .bind(&due.question)
                .bind(&due.channel)
                .bind(holder)
                .bind(error)
                .bind(now)
                .bind(retry_in_ms)
                .bind(i64::from(give_up))
                .bind(progress)
                .execute(&mut *connection)
                .await?;
        });
        Ok(())
    }

    /// The audit trail question `id` was asked under, if its process named
    /// one.
    #[cfg(feature = "audit")]
    pub(crate) async fn trail_of(&self, id: &str) -> Result<Option<String>, StoreError> {
        let sql = "SELECT audit_trail FROM crew_approvals WHERE id = $1";
        Ok(on_pool!(self, |pool| {
            sqlx::query_scalar::<_, Option<String>>(sql)
                .bind(id)
                .fetch_optional(pool)
                .await?
                .flatten()
        }))
    }

    /// The announcements of question `id`, one per channel, by channel
    /// name.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::store::StoreError> {
    /// let announcements = store.announcements("3f0c…").await?;
    /// assert!(announcements.iter().all(|a| !a.gave_up));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn announcements(&self, id: &str) -> Result<Vec<Announcement>, StoreError> {
        let sql = "SELECT question_id, channel, told, attempts, last_error, gave_up_at \
                   FROM crew_announcements WHERE question_id = $1 ORDER BY channel";
        let rows: Vec<AnnouncementRow> = on_pool!(self, |pool| {
            sqlx::query_as(sql).bind(id).fetch_all(pool).await?
        });
        Ok(rows
            .into_iter()
            .map(
                |(question, channel, told, attempts, last_error, gave_up_at)| Announcement {
                    question,
                    channel,
                    told: status(told),
                    attempts: count(attempts),
                    last_error,
                    gave_up: gave_up_at.is_some(),
                },
            )
            .collect())
    }
}
