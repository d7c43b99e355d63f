//! The announcements and their outbox (SPEC §14): what the store keeps so
//! that any replica delivers each question to the channels, once per
//! change of the question, whatever becomes of the process that asked.
//!
//! Asking writes the question and nothing more: a pending question is its
//! own record of what is to be announced, committed with it, and any
//! announcer finds the pending questions some enabled channel has no
//! announcement of. Each change of a question's status or outcome is
//! queued in `crew_outbox` by a trigger, atomically with the change. An
//! announcement told what its question is now rests until its question
//! changes, so the scan for due work reads only what is due. (A row per
//! new question in an outbox table of its own would cost every asking
//! commit one more B-tree, which is over SPEC §5's 1.1 × on SQLite.)

use super::{QuestionStatus, Store, StoreError, on_pool};

/// One announcement due: a question whose channel has not been told its
/// status yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Due {
    pub question: String,
    pub channel: String,
    /// The status the channel was last told (none: never announced).
    pub told: Option<QuestionStatus>,
    /// What the channel was last told, as [`told_state`] writes it.
    pub told_state: Option<String>,
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

/// `next_at` of an announcement at rest: told what its question is now,
/// it is due again only once the question changes (the outbox wakes it).
const AT_REST: i64 = i64::MAX;

/// The most outbox rows one pass turns into announcements.
const OUTBOX_BATCH: i64 = 500;

fn count(value: i64) -> u32 {
    u32::try_from(value.max(0)).unwrap_or(u32::MAX)
}

impl Store {
    /// Names `name` as a channel of kind `kind` that questions are
    /// announced on: each pending question gets an announcement on it.
    /// Naming it again enables it again.
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

    /// Stops announcing on channel `name`: no new announcement is made on
    /// it (those made before are still delivered and updated by an
    /// announcer that has it).
    pub(crate) async fn disable_channel(&self, name: &str) -> Result<(), StoreError> {
        let now = self.now();
        let sql = "UPDATE crew_channels SET disabled_at = $2 WHERE name = $1";
        self.file_still_there()?;
        on_pool!(self, |pool| {
            sqlx::query(sql).bind(name).bind(now).execute(pool).await?;
        });
        Ok(())
    }

    /// Turns into work the questions asked since `since` (a time of the
    /// store's clock; 0: all) that an enabled channel has no announcement
    /// of yet, and
    /// those queued in the outbox (changed since their channels were
    /// told): a question still pending gets an announcement on each
    /// enabled channel it has none on, and the announcements of each that
    /// were told something else are woken. Reads first; when there is
    /// work, one transaction in a background write turn. The number of
    /// questions taken.
    async fn open_outbox(&self, since: i64) -> Result<usize, StoreError> {
        let now = self.now();
        let unannounced = "SELECT q.id FROM crew_approvals q \
                           WHERE q.status = 'pending' AND q.created_at >= $1 \
                           AND EXISTS (SELECT 1 FROM crew_channels c \
                             WHERE c.disabled_at IS NULL AND NOT EXISTS \
                             (SELECT 1 FROM crew_announcements a \
                              WHERE a.question_id = q.id AND a.channel = c.name)) \
                           LIMIT $2";
        let any_change = "SELECT question_id FROM crew_outbox LIMIT 1";
        // Deleted first: a change made from now on queues its question
        // again (on PostgreSQL the trigger waits for this transaction),
        // and what is woken below is read after the delete.
        let take = "DELETE FROM crew_outbox WHERE question_id IN \
                    (SELECT question_id FROM crew_outbox LIMIT $1) RETURNING question_id";
        self.file_still_there()?;
        let taken = on_pool!(self, |pool| {
            // Reads first, no write turn: most passes find nothing.
            let new: Vec<String> = sqlx::query_scalar(unannounced)
                .bind(since)
                .bind(OUTBOX_BATCH)
                .fetch_all(pool)
                .await?;
            let changed: Option<String> =
                sqlx::query_scalar(any_change).fetch_optional(pool).await?;
            if new.is_empty() && changed.is_none() {
                return Ok(0);
            }
            let mut connection = pool.acquire().await?;
            let _turn = self.background_write_turn().await;
            let mut transaction = sqlx::Connection::begin(&mut *connection).await?;
            let changed: Vec<String> = if changed.is_some() {
                sqlx::query_scalar(take)
                    .bind(OUTBOX_BATCH)
                    .fetch_all(&mut *transaction)
                    .await?
            } else {
                Vec::new()
            };
            let ids: Vec<&String> = new.iter().chain(&changed).collect();
            let list = (0..ids.len())
                .map(|i| format!("${}", i + 2))
                .collect::<Vec<_>>()
                .join(", ");
            let open = format!(
                "INSERT INTO crew_announcements (question_id, channel, told, attempts, \
                 next_at, held_until, created_at, updated_at) \
                 SELECT q.id, c.name, NULL, 0, $1, 0, $1, $1 \
                 FROM crew_approvals q, crew_channels c \
                 WHERE q.id IN ({list}) AND q.status = 'pending' AND c.disabled_at IS NULL \
                 ON CONFLICT (question_id, channel) DO NOTHING"
            );
            let wake = format!(
                "UPDATE crew_announcements SET next_at = $1, updated_at = $1 \
                 WHERE question_id IN ({list}) AND attempts = 0 AND gave_up_at IS NULL \
                 AND next_at > $1 AND (told IS NULL OR told <> {STATE_SQL})"
            );
            for sql in [&open, &wake] {
                let mut query = sqlx::query(sql).bind(now);
                for id in &ids {
                    query = query.bind(*id);
                }
                query.execute(&mut *transaction).await?;
            }
            transaction.commit().await?;
            ids.len()
        });
        Ok(taken)
    }

    /// Takes for `holder`, until `hold_ms` from now, the announcements due
    /// now on `channels` (never announced, or told a status the question
    /// has left; held by no replica; not waiting for their next attempt),
    /// at most `limit`, the longest waiting first, after turning the
    /// questions asked since `since` and what the outbox holds into
    /// announcements: one write for the whole batch. A
    /// replica takes what no other holds; none takes what one has told
    /// since.
    pub(crate) async fn take_due(
        &self,
        channels: &[&str],
        holder: &str,
        hold_ms: i64,
        limit: usize,
        since: i64,
    ) -> Result<Vec<Due>, StoreError> {
        if channels.is_empty() {
            return Ok(Vec::new());
        }
        self.open_outbox(since).await?;
        let now = self.now();
        let names = (0..channels.len())
            .map(|i| format!("${}", i + 5))
            .collect::<Vec<_>>()
            .join(", ");
        // What is at rest (told what its question is now) or gave up is
        // past every `next_at <= now`: the index reads only what is due.
        let due = "gave_up_at IS NULL AND next_at <= $1 AND held_until <= $1";
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
                told: status(told.clone()),
                told_state: told,
                attempts: count(attempts),
                reference,
            })
            .collect())
    }

    /// Records that `holder` told the channel status `told` (and what the
    /// channel answered, kept when `None`), and lets the announcement go:
    /// at rest when `told` is what the question is now, due at once when
    /// it changed meanwhile (its wake-up came while this was held).
    pub(crate) async fn announced(
        &self,
        question: &str,
        channel: &str,
        holder: &str,
        told: &str,
        reference: Option<&str>,
    ) -> Result<(), StoreError> {
        let now = self.now();
        let sql = format!(
            "UPDATE crew_announcements SET told = $4, attempts = 0, \
             next_at = CASE WHEN $4 = {STATE_SQL} THEN $7 ELSE $5 END, \
             holder = NULL, held_until = 0, last_error = NULL, \
             reference = COALESCE($6, reference), updated_at = $5 \
             WHERE question_id = $1 AND channel = $2 AND holder = $3"
        );
        on_pool!(self, |pool| {
            let mut connection = pool.acquire().await?;
            let _turn = self.background_write_turn().await;
            sqlx::query(&sql)
                .bind(question)
                .bind(channel)
                .bind(holder)
                .bind(told)
                .bind(now)
                .bind(reference)
                .bind(AT_REST)
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
