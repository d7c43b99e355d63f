//! Questions and answers as rows: the source that asks, and the decisions
//! that answer.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use hooks_core::{
    ApprovedCallOutcome, Capabilities, Capability, HumanAnswer, HumanInputError, HumanInputRequest,
    HumanInputSource, async_trait,
};
use serde_json::{Map, Value};
use sqlx::Row;
use tokio::sync::broadcast::error::RecvError;

use super::{Store, StoreError, millis, new_id, on_pool, time_of};

/// The largest edit of a call's arguments accepted, as JSON text: 256 KiB.
///
/// ```
/// assert_eq!(crew_runtime::store::MAX_EDIT_BYTES, 256 * 1024);
/// ```
pub const MAX_EDIT_BYTES: usize = 256 * 1024;

/// The longest comment kept with an answer, in bytes.
const MAX_COMMENT_BYTES: usize = 4096;

/// The most of a refusal's reason or a tool's error kept beside an
/// answered question.
const MAX_OUTCOME_DETAIL_BYTES: usize = 4096;

/// How long a question stays open after its process last said it is
/// alive, unless told otherwise ([`StoreApprovals::lease`]).
const DEFAULT_LEASE: Duration = Duration::from_secs(15);

/// How often a waiting question reads its row even when nothing was
/// announced (a lost notification, another process on SQLite).
const FALLBACK_POLL: Duration = Duration::from_secs(1);

/// Where a question stands.
///
/// ```
/// use crew_runtime::store::QuestionStatus;
/// assert_eq!(QuestionStatus::Approved.as_str(), "approved");
/// assert_eq!("abandoned".parse::<QuestionStatus>(), Ok(QuestionStatus::Abandoned));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum QuestionStatus {
    /// Waiting for an answer.
    Pending,
    /// Approved, as asked or with edited arguments.
    Approved,
    /// Denied.
    Denied,
    /// Its deadline passed unanswered: it refuses answers.
    Expired,
    /// The process that asked is gone (its lease ran out): it refuses
    /// answers, so nothing approves a call nobody waits for.
    Abandoned,
    /// The process that asked stopped waiting (its kickoff ended).
    Withdrawn,
}

impl QuestionStatus {
    /// The status as stored.
    ///
    /// ```
    /// assert_eq!(crew_runtime::store::QuestionStatus::Pending.as_str(), "pending");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            QuestionStatus::Pending => "pending",
            QuestionStatus::Approved => "approved",
            QuestionStatus::Denied => "denied",
            QuestionStatus::Expired => "expired",
            QuestionStatus::Abandoned => "abandoned",
            QuestionStatus::Withdrawn => "withdrawn",
        }
    }
}

impl fmt::Display for QuestionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for QuestionStatus {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        Ok(match text {
            "pending" => QuestionStatus::Pending,
            "approved" => QuestionStatus::Approved,
            "denied" => QuestionStatus::Denied,
            "expired" => QuestionStatus::Expired,
            "abandoned" => QuestionStatus::Abandoned,
            "withdrawn" => QuestionStatus::Withdrawn,
            other => return Err(format!("unknown question status {other:?}")),
        })
    }
}

/// What an approver decides.
///
/// ```
/// use crew_runtime::store::Decision;
/// use serde_json::json;
///
/// let edit = json!({"amount": 40}).as_object().cloned().unwrap();
/// assert_eq!(Decision::ApproveWithEdit(edit).as_str(), "edit");
/// assert_eq!(Decision::Deny.as_str(), "deny");
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Decision {
    /// Run the call as asked.
    Approve,
    /// Refuse the call.
    Deny,
    /// Run the call with these arguments instead (checked against the
    /// tool's JSON schema; the tool receives them).
    ApproveWithEdit(Map<String, Value>),
}

impl Decision {
    /// The decision as stored: `approve`, `deny` or `edit`.
    ///
    /// ```
    /// assert_eq!(crew_runtime::store::Decision::Approve.as_str(), "approve");
    /// ```
    pub fn as_str(&self) -> &'static str {
        match self {
            Decision::Approve => "approve",
            Decision::Deny => "deny",
            Decision::ApproveWithEdit(_) => "edit",
        }
    }
}

/// An answer to give: who, what, and an optional comment.
///
/// ```
/// use crew_runtime::store::{Answer, Decision};
///
/// let answer = Answer::new("alice", Decision::Deny).with_comment("wrong account");
/// assert_eq!(answer.approver, "alice");
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Answer {
    /// The approver's account name.
    pub approver: String,
    /// The decision.
    pub decision: Decision,
    /// What the approver wrote beside it.
    pub comment: Option<String>,
    /// Where it was given (`inbox`, `api`, `slack`, `link`), recorded with
    /// it and on the audit trail.
    pub via: Option<String>,
}

impl Answer {
    /// An answer of `approver` with no comment.
    ///
    /// ```
    /// use crew_runtime::store::{Answer, Decision};
    /// assert_eq!(Answer::new("bob", Decision::Approve).comment, None);
    /// ```
    pub fn new(approver: impl Into<String>, decision: Decision) -> Self {
        Answer {
            approver: approver.into(),
            decision,
            comment: None,
            via: None,
        }
    }

    /// Given through `channel` (`inbox`, `api`, `slack`, `link`, or a name
    /// of your own).
    ///
    /// ```
    /// use crew_runtime::store::{Answer, Decision};
    /// let answer = Answer::new("bob", Decision::Approve).via("slack");
    /// assert_eq!(answer.via.as_deref(), Some("slack"));
    /// ```
    pub fn via(mut self, channel: impl Into<String>) -> Self {
        self.via = Some(channel.into());
        self
    }

    /// Adds a comment.
    ///
    /// ```
    /// use crew_runtime::store::{Answer, Decision};
    /// let answer = Answer::new("bob", Decision::Approve).with_comment("fine");
    /// assert_eq!(answer.comment.as_deref(), Some("fine"));
    /// ```
    pub fn with_comment(mut self, comment: impl Into<String>) -> Self {
        self.comment = Some(comment.into());
        self
    }
}

/// The answer a question got, as recorded.
///
/// ```
/// # fn show(question: crew_runtime::store::Question) {
/// if let Some(answer) = &question.answer {
///     println!("{} by {} at {:?}", answer.decision, answer.approver, answer.answered_at);
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RecordedAnswer {
    /// Who answered.
    pub approver: String,
    /// `approve`, `deny` or `edit`.
    pub decision: String,
    /// The arguments the call was approved with, for an edit (the
    /// question's [`arguments`](Question::arguments) keep what was asked).
    pub edited_arguments: Option<Value>,
    /// The approver's comment.
    pub comment: Option<String>,
    /// When.
    pub answered_at: SystemTime,
    /// Where it was given ([`Answer::via`]); `None` through the library
    /// directly.
    pub via: Option<String>,
}

/// One question about a tool call, as stored.
///
/// ```
/// # async fn show(store: crew_runtime::store::Store) -> Result<(), crew_runtime::store::StoreError> {
/// for question in store.pending().await? {
///     println!("{} wants {} ({})", question.agent.as_deref().unwrap_or("?"), question.tool, question.prompt);
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Question {
    /// Its id: a UUID v4, unguessable.
    pub id: String,
    /// The id of the tool call it is about.
    pub call_id: Option<String>,
    /// The tool's normalized name.
    pub tool: String,
    /// The call's arguments, after the crew's redaction.
    pub arguments: Value,
    /// The JSON schema of the tool's arguments (edits are checked against it).
    pub tool_schema: Option<Value>,
    /// What the tool declares it does.
    pub capabilities: Capabilities,
    /// The agent's role.
    pub agent: Option<String>,
    /// The task's name.
    pub task: Option<String>,
    /// The crew's name.
    pub crew: Option<String>,
    /// The kickoff's id.
    pub kickoff_id: Option<String>,
    /// Who the kickoff runs for: they cannot answer it.
    pub requester: Option<String>,
    /// The question as the hook put it to a terminal (with how to
    /// answer, e.g. "(yes/no)").
    pub prompt: String,
    /// Why it is asked, in plain words, when the asking hook said (a
    /// policy's `@ask` text, a gate's first line); `None` for questions
    /// asked without one.
    pub reason: Option<String>,
    /// When it was asked.
    pub created_at: SystemTime,
    /// When it stops taking answers.
    pub deadline: SystemTime,
    /// Until when its process is known to wait (renewed while it does).
    pub lease_until: SystemTime,
    /// Where it stands.
    pub status: QuestionStatus,
    /// Its answer, once answered.
    pub answer: Option<RecordedAnswer>,
    /// When the process that asked took the answer. An approval nobody
    /// takes before the question's lease runs out (its process is gone)
    /// approved nothing: the question is then abandoned.
    pub taken_at: Option<SystemTime>,
    /// When it was closed without an answer taken: expired, abandoned or
    /// withdrawn.
    pub closed_at: Option<SystemTime>,
    /// What the call did after the answer (see [`CallOutcome`]), once its
    /// process said.
    pub outcome: Option<CallOutcome>,
    /// The SHA-256 (hex) of the policy set the question was asked under,
    /// when a crew's policies checked the call: an edit is checked by
    /// that set before it is taken ([`Store::decide`]).
    pub policy_hash: Option<String>,
}

/// What an answered call did afterwards, as its process told the store:
/// it ran, failed, or a guard refused it after the approval (a later hook,
/// a policy, the second round of an edited call).
///
/// ```
/// # fn show(question: crew_runtime::store::Question) {
/// if let Some(outcome) = &question.outcome {
///     match outcome.source.as_deref() {
///         Some(source) => println!("{} by {source}", outcome.outcome),
///         None => println!("{}", outcome.outcome),
///     }
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallOutcome {
    /// `ran`, `failed`, `refused` or `in_doubt` (see
    /// [`ApprovedCallOutcome::as_str`](crate::ApprovedCallOutcome::as_str)).
    pub outcome: String,
    /// Who refused it, for a refusal.
    pub source: Option<String>,
    /// Why it was refused, the tool's error, or why it is in doubt.
    pub detail: Option<String>,
    /// When its process said.
    pub at: SystemTime,
    /// The process that held the call, when it named itself (a durable
    /// kickoff's: its owner, see `Durable::owner`): for a parked kickoff,
    /// the replica that resumed it.
    pub by: Option<String>,
}

impl CallOutcome {
    /// An outcome `outcome` recorded now, for unit tests (of the inbox).
    #[cfg(all(test, feature = "inbox"))]
    pub(crate) fn for_tests(outcome: &str) -> CallOutcome {
        CallOutcome {
            outcome: outcome.into(),
            source: None,
            detail: None,
            at: SystemTime::now(),
            by: None,
        }
    }
}

impl Question {
    /// A pending question about `tool`, for unit tests (of the accounts
    /// and the inbox: none without the feature `inbox`).
    #[cfg(test)]
    #[cfg_attr(not(feature = "inbox"), allow(dead_code))]
    pub(crate) fn for_tests(tool: &str) -> Question {
        Question {
            id: "q".into(),
            call_id: None,
            tool: tool.into(),
            arguments: Value::Null,
            tool_schema: None,
            capabilities: Capabilities::NONE,
            agent: None,
            task: None,
            crew: None,
            kickoff_id: None,
            requester: None,
            prompt: String::new(),
            reason: None,
            created_at: SystemTime::UNIX_EPOCH,
            deadline: SystemTime::UNIX_EPOCH,
            lease_until: SystemTime::UNIX_EPOCH,
            status: QuestionStatus::Pending,
            answer: None,
            taken_at: None,
            closed_at: None,
            outcome: None,
            policy_hash: None,
        }
    }

    /// Whether it still takes an answer at `now`: pending, before its
    /// deadline, its process alive.
    ///
    /// ```
    /// # fn check(question: crew_runtime::store::Question) {
    /// if question.is_open(std::time::SystemTime::now()) { /* show it */ }
    /// # }
    /// ```
    pub fn is_open(&self, now: SystemTime) -> bool {
        self.status == QuestionStatus::Pending && now < self.deadline && now < self.lease_until
    }

    /// What the question asks, as a short digest: its tool, arguments,
    /// prompt, reason, capabilities, deadline and status. A button or a
    /// link that carries it decides only this very question: once anything
    /// of it changes (it is answered, expires, is withdrawn, or asks about
    /// other arguments), the revision does too (SPEC §14).
    ///
    /// ```
    /// # fn check(question: crew_runtime::store::Question) {
    /// let revision = question.revision();
    /// assert_eq!(revision.len(), 16);
    /// # }
    /// ```
    pub fn revision(&self) -> String {
        use sha2::{Digest, Sha256};
        let asked = serde_json::json!([
            self.id,
            self.tool,
            self.arguments,
            self.prompt,
            self.reason,
            super::millis(self.deadline),
            self.status.as_str(),
            capabilities_text(self.capabilities),
        ]);
        let digest = Sha256::digest(asked.to_string().as_bytes());
        digest[..8]
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect()
    }

    /// How long it still takes answers at `now` (zero once closed).
    ///
    /// ```
    /// # fn check(question: crew_runtime::store::Question) {
    /// println!("{:?} left", question.time_left(std::time::SystemTime::now()));
    /// # }
    /// ```
    pub fn time_left(&self, now: SystemTime) -> Duration {
        if self.status != QuestionStatus::Pending {
            return Duration::ZERO;
        }
        self.deadline.duration_since(now).unwrap_or(Duration::ZERO)
    }
}

/// An answer that was refused, as recorded.
///
/// ```
/// # async fn show(store: crew_runtime::store::Store, id: &str) -> Result<(), crew_runtime::store::StoreError> {
/// for refusal in store.refusals(id).await? {
///     println!("{} tried to {}: {}", refusal.approver, refusal.decision, refusal.reason);
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Refusal {
    /// The question.
    pub approval_id: String,
    /// Who tried to answer.
    pub approver: String,
    /// What they tried: `approve`, `deny` or `edit`.
    pub decision: String,
    /// Why it was refused.
    pub reason: String,
    /// When.
    pub at: SystemTime,
}

/// Why an answer was not taken. Every refusal of an answer that came too
/// late, for a closed question or from the requester is also recorded
/// ([`Store::refusals`]).
///
/// ```
/// use crew_runtime::store::DecisionError;
/// assert_eq!(
///     DecisionError::Expired.to_string(),
///     "the question's deadline has passed: it takes no more answers"
/// );
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DecisionError {
    /// No question has this id.
    #[error("no question has this id")]
    UnknownQuestion,
    /// The question was answered or closed already.
    #[error("the question is {0} already: it takes no more answers")]
    Closed(QuestionStatus),
    /// The deadline passed.
    #[error("the question's deadline has passed: it takes no more answers")]
    Expired,
    /// The process that asked is gone.
    #[error(
        "the process that asked is gone (its lease ran out): nothing is waiting for this answer"
    )]
    Abandoned,
    /// The approver is the requester.
    #[error("{0} asked for this call and cannot approve their own request")]
    OwnRequest(String),
    /// The approver's name is empty.
    #[error("an answer must name its approver")]
    NoApprover,
    /// The edited arguments are not valid for the tool.
    #[error("the edited arguments are not valid for the tool: {0}")]
    InvalidEdit(String),
    /// The edited arguments are too large.
    #[error("the edited arguments are {bytes} bytes as JSON, more than the {limit} accepted")]
    EditTooLarge {
        /// Their size.
        bytes: usize,
        /// [`MAX_EDIT_BYTES`].
        limit: usize,
    },
    /// The comment is too long.
    #[error("the comment is {0} bytes, more than the 4096 accepted")]
    CommentTooLong(usize),
    /// The crew's policies, as the question was asked under them, refuse
    /// the edited call.
    #[error("the crew's policies refuse the edited call: {0}")]
    EditRefused(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The columns of a question, in the order [`read_question`] reads them.
const COLUMNS: &str = "id, call_id, tool, arguments, tool_schema, capabilities, agent, task, crew, \
     kickoff_id, requester, prompt, created_at, deadline, lease_until, status, approver, decision, \
     edited_arguments, comment, answered_at, taken_at, closed_at, outcome, outcome_source, \
     outcome_detail, outcome_at, outcome_by, reason, answered_via, policy_hash";

/// Reads a question from a row of either backend.
macro_rules! read_question {
    ($row:expr) => {{
        let row = $row;
        (|| -> Result<Question, StoreError> {
            let corrupt = |error: sqlx::Error| StoreError::Corrupt(error.to_string());
            let json = |text: Option<String>| -> Result<Option<Value>, StoreError> {
                text.map(|text| {
                    serde_json::from_str(&text).map_err(|e| StoreError::Corrupt(e.to_string()))
                })
                .transpose()
            };
            let status: String = row.try_get("status").map_err(corrupt)?;
            let approver: Option<String> = row.try_get("approver").map_err(corrupt)?;
            let answered_at: Option<i64> = row.try_get("answered_at").map_err(corrupt)?;
            let answer = match (approver, answered_at) {
                (Some(approver), Some(answered_at)) => Some(RecordedAnswer {
                    approver,
                    decision: row
                        .try_get::<Option<String>, _>("decision")
                        .map_err(corrupt)?
                        .unwrap_or_default(),
                    edited_arguments: json(row.try_get("edited_arguments").map_err(corrupt)?)?,
                    comment: row.try_get("comment").map_err(corrupt)?,
                    answered_at: time_of(answered_at),
                    via: row.try_get("answered_via").map_err(corrupt)?,
                }),
                _ => None,
            };
            let outcome: Option<String> = row.try_get("outcome").map_err(corrupt)?;
            let outcome_at: Option<i64> = row.try_get("outcome_at").map_err(corrupt)?;
            let outcome = match (outcome, outcome_at) {
                (Some(outcome), Some(at)) => Some(CallOutcome {
                    outcome,
                    source: row.try_get("outcome_source").map_err(corrupt)?,
                    detail: row.try_get("outcome_detail").map_err(corrupt)?,
                    by: row.try_get("outcome_by").map_err(corrupt)?,
                    at: time_of(at),
                }),
                _ => None,
            };
            let taken_at: Option<i64> = row.try_get("taken_at").map_err(corrupt)?;
            let closed_at: Option<i64> = row.try_get("closed_at").map_err(corrupt)?;
            Ok(Question {
                id: row.try_get("id").map_err(corrupt)?,
                call_id: row.try_get("call_id").map_err(corrupt)?,
                tool: row.try_get("tool").map_err(corrupt)?,
                arguments: json(Some(row.try_get("arguments").map_err(corrupt)?))?
                    .unwrap_or(Value::Null),
                tool_schema: json(row.try_get("tool_schema").map_err(corrupt)?)?,
                capabilities: parse_capabilities(
                    &row.try_get::<String, _>("capabilities").map_err(corrupt)?,
                ),
                agent: row.try_get("agent").map_err(corrupt)?,
                task: row.try_get("task").map_err(corrupt)?,
                crew: row.try_get("crew").map_err(corrupt)?,
                kickoff_id: row.try_get("kickoff_id").map_err(corrupt)?,
                requester: row.try_get("requester").map_err(corrupt)?,
                prompt: row.try_get("prompt").map_err(corrupt)?,
                reason: row.try_get("reason").map_err(corrupt)?,
                created_at: time_of(row.try_get("created_at").map_err(corrupt)?),
                deadline: time_of(row.try_get("deadline").map_err(corrupt)?),
                lease_until: time_of(row.try_get("lease_until").map_err(corrupt)?),
                status: status.parse().map_err(StoreError::Corrupt)?,
                answer,
                taken_at: taken_at.map(time_of),
                closed_at: closed_at.map(time_of),
                outcome,
                policy_hash: row.try_get("policy_hash").map_err(corrupt)?,
            })
        })()
    }};
}

fn capabilities_text(capabilities: Capabilities) -> String {
    Capability::ALL
        .iter()
        .filter(|&&capability| capabilities.contains(capability))
        .map(|capability| capability.name())
        .collect::<Vec<_>>()
        .join(",")
}

fn parse_capabilities(text: &str) -> Capabilities {
    text.split(',')
        .filter_map(|name| Capability::from_name(name.trim()))
        .fold(Capabilities::NONE, Capabilities::with)
}

/// What the inbox needs of a pending question to tell who may see it
/// and where it stands in the list, without its arguments (which may be
/// large).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Summary {
    pub(crate) id: String,
    pub(crate) tool: String,
    pub(crate) capabilities: Capabilities,
    pub(crate) requester: Option<String>,
    /// Milliseconds since the epoch: the list's order is (created, id).
    pub(crate) created_at: i64,
}

impl Store {
    /// [`Store::pending`] without the arguments: what the inbox pages
    /// and filters by scope before reading whole questions.
    #[cfg_attr(not(feature = "inbox"), allow(dead_code))]
    pub(crate) async fn pending_summaries(&self) -> Result<Vec<Summary>, StoreError> {
        self.close_lapsed().await?;
        let sql = "SELECT id, tool, capabilities, requester, created_at FROM crew_approvals \
                   WHERE status = 'pending' AND deadline > $1 AND lease_until > $1 \
                   ORDER BY created_at, id";
        type Row = (String, String, String, Option<String>, i64);
        let rows: Vec<Row> = on_pool!(self, |pool| {
            sqlx::query_as(sql).bind(self.now()).fetch_all(pool).await?
        });
        Ok(rows
            .into_iter()
            .map(|(id, tool, capabilities, requester, created_at)| Summary {
                id,
                tool,
                capabilities: parse_capabilities(&capabilities),
                requester,
                created_at,
            })
            .collect())
    }

    /// The pending questions among `ids`, in one query (a page of the
    /// inbox's list), in the order of `ids`.
    #[cfg_attr(not(feature = "inbox"), allow(dead_code))]
    pub(crate) async fn pending_among(&self, ids: &[String]) -> Result<Vec<Question>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let placeholders: Vec<String> = (1..=ids.len()).map(|n| format!("${n}")).collect();
        let sql = format!(
            "SELECT {COLUMNS} FROM crew_approvals WHERE status = 'pending' AND id IN ({})",
            placeholders.join(", ")
        );
        let mut found: Vec<Question> = on_pool!(self, |pool| {
            let mut query = sqlx::query(&sql);
            for id in ids {
                query = query.bind(id);
            }
            let rows = query.fetch_all(pool).await?;
            rows.iter()
                .map(|row| read_question!(row))
                .collect::<Result<Vec<_>, StoreError>>()?
        });
        found.sort_by_key(|question| ids.iter().position(|id| *id == question.id));
        Ok(found)
    }

    /// The tool and capabilities of question `id` (in whatever state):
    /// whom a change to it may be told.
    #[cfg_attr(not(feature = "inbox"), allow(dead_code))]
    pub(crate) async fn question_scope(
        &self,
        id: &str,
    ) -> Result<Option<(String, Capabilities)>, StoreError> {
        let sql = "SELECT tool, capabilities FROM crew_approvals WHERE id = $1";
        let row: Option<(String, String)> = on_pool!(self, |pool| {
            sqlx::query_as(sql).bind(id).fetch_optional(pool).await?
        });
        Ok(row.map(|(tool, capabilities)| (tool, parse_capabilities(&capabilities))))
    }

    /// The questions that still take an answer, oldest first: pending,
    /// before their deadline, their process alive. Questions whose
    /// deadline or lease ran out are closed here (expired, abandoned).
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::store::StoreError> {
    /// let waiting = store.pending().await?;
    /// println!("{} calls wait for a person", waiting.len());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn pending(&self) -> Result<Vec<Question>, StoreError> {
        self.close_lapsed().await?;
        let now = self.now();
        let sql = format!(
            "SELECT {COLUMNS} FROM crew_approvals WHERE status = 'pending' AND deadline > $1 \
             AND lease_until > $1 ORDER BY created_at, id"
        );
        on_pool!(self, |pool| {
            let rows = sqlx::query(&sql).bind(now).fetch_all(pool).await?;
            rows.iter().map(|row| read_question!(row)).collect()
        })
    }

    /// The questions no longer pending, most recently closed first, at
    /// most `limit`.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::store::StoreError> {
    /// for question in store.history(50).await? {
    ///     println!("{}: {}", question.tool, question.status);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn history(&self, limit: usize) -> Result<Vec<Question>, StoreError> {
        self.close_lapsed().await?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let sql = format!(
            "SELECT {COLUMNS} FROM crew_approvals WHERE status <> 'pending' \
             ORDER BY COALESCE(closed_at, answered_at, deadline) DESC, id LIMIT $1"
        );
        on_pool!(self, |pool| {
            let rows = sqlx::query(&sql).bind(limit).fetch_all(pool).await?;
            rows.iter().map(|row| read_question!(row)).collect()
        })
    }

    /// The question with this id, in whatever state.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::store::StoreError> {
    /// assert!(store.question("no-such-id").await?.is_none());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn question(&self, id: &str) -> Result<Option<Question>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM crew_approvals WHERE id = $1");
        on_pool!(self, |pool| {
            match sqlx::query(&sql).bind(id).fetch_optional(pool).await? {
                Some(row) => read_question!(&row).map(Some),
                None => Ok(None),
            }
        })
    }

    /// The answers refused for question `id`, oldest first.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::store::StoreError> {
    /// assert!(store.refusals("no-such-id").await?.is_empty());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn refusals(&self, id: &str) -> Result<Vec<Refusal>, StoreError> {
        let sql = "SELECT approval_id, approver, decision, reason, at FROM crew_approval_refusals \
                   WHERE approval_id = $1 ORDER BY at, id";
        on_pool!(self, |pool| {
            let rows = sqlx::query(sql).bind(id).fetch_all(pool).await?;
            rows.iter()
                .map(|row| {
                    let corrupt = |error: sqlx::Error| StoreError::Corrupt(error.to_string());
                    Ok(Refusal {
                        approval_id: row.try_get("approval_id").map_err(corrupt)?,
                        approver: row.try_get("approver").map_err(corrupt)?,
                        decision: row.try_get("decision").map_err(corrupt)?,
                        reason: row.try_get("reason").map_err(corrupt)?,
                        at: time_of(row.try_get("at").map_err(corrupt)?),
                    })
                })
                .collect()
        })
    }

    /// Answers question `id`. Taken only while the question is open
    /// (pending, before its deadline, its process alive), from an approver
    /// who is not its requester; an edit must be a JSON object of at most
    /// [`MAX_EDIT_BYTES`] that the tool's schema accepts. The waiting call
    /// hears of it at once in this process, through `NOTIFY` on
    /// PostgreSQL, within about 100 ms on SQLite.
    ///
    /// A refused answer (too late, closed, abandoned, the requester's own)
    /// is recorded with its reason; an invalid edit changes nothing.
    ///
    /// ```no_run
    /// use crew_runtime::store::{Answer, Decision, DecisionError, Store};
    ///
    /// # async fn run(store: Store, id: &str) -> Result<(), DecisionError> {
    /// match store.decide(id, Answer::new("alice", Decision::Approve)).await {
    ///     Ok(question) => println!("approved {}", question.tool),
    ///     Err(DecisionError::Expired) => println!("too late"),
    ///     Err(other) => return Err(other),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn decide(&self, id: &str, answer: Answer) -> Result<Question, DecisionError> {
        if answer.approver.trim().is_empty() {
            return Err(DecisionError::NoApprover);
        }
        if let Some(comment) = &answer.comment
            && comment.len() > MAX_COMMENT_BYTES
        {
            return Err(DecisionError::CommentTooLong(comment.len()));
        }
        let question = self
            .question(id)
            .await?
            .ok_or(DecisionError::UnknownQuestion)?;
        if question
            .requester
            .as_deref()
            .is_some_and(|requester| super::identity::same_identity(requester, &answer.approver))
        {
            let error = DecisionError::OwnRequest(answer.approver.clone());
            self.record_refusal(id, &answer, &error).await?;
            return Err(error);
        }
        let edited = match &answer.decision {
            Decision::ApproveWithEdit(edit) => {
                let text = check_edit(edit, question.tool_schema.as_ref())?;
                if let Some(why) = self.policies_refuse(&question, edit).await? {
                    let error = DecisionError::EditRefused(why);
                    self.record_refusal(id, &answer, &error).await?;
                    return Err(error);
                }
                Some(text)
            }
            _ => None,
        };
        let status = match answer.decision {
            Decision::Deny => QuestionStatus::Denied,
            _ => QuestionStatus::Approved,
        };
        let now = self.now();
        let sql = "UPDATE crew_approvals SET status = $2, approver = $3, decision = $4, \
                   edited_arguments = $5, comment = $6, answered_at = $7, answered_via = $8 \
                   WHERE id = $1 AND status = 'pending' AND deadline > $7 AND lease_until > $7";
        let updated = on_pool!(self, |pool| {
            sqlx::query(sql)
                .bind(id)
                .bind(status.as_str())
                .bind(&answer.approver)
                .bind(answer.decision.as_str())
                .bind(edited.as_deref())
                .bind(answer.comment.as_deref())
                .bind(now)
                .bind(answer.via.as_deref())
                .execute(pool)
                .await
                .map_err(StoreError::from)?
                .rows_affected()
        });
        if updated == 1 {
            if let Some(kickoff) = &question.kickoff_id {
                // A durable kickoff parked on this question becomes ready
                // (a resumer's sweep does it too, should this fail).
                if let Err(error) = self.wake_kickoffs(Some(kickoff)).await {
                    tracing::warn!(question = %id, %kickoff, %error, "waking the kickoff of an answered question failed");
                }
            }
            self.announce(id).await;
            return self
                .question(id)
                .await?
                .ok_or(DecisionError::UnknownQuestion);
        }
        // Not taken: say why, close what lapsed, and keep a record.
        let current = self
            .question(id)
            .await?
            .ok_or(DecisionError::UnknownQuestion)?;
        let error = match current.status {
            QuestionStatus::Pending if crate::store::millis(current.deadline) <= now => {
                DecisionError::Expired
            }
            QuestionStatus::Pending => DecisionError::Abandoned,
            QuestionStatus::Expired => DecisionError::Expired,
            QuestionStatus::Abandoned => DecisionError::Abandoned,
            closed => DecisionError::Closed(closed),
        };
        self.close_lapsed().await?;
        self.record_refusal(id, &answer, &error).await?;
        Err(error)
    }

    /// Why the policy set `question` was asked under refuses `edit`, if
    /// it was asked under one and does: the call rebuilt from the question
    /// with the edited arguments, decided here, in the approver's face.
    /// Redacted values are still placeholders here; the crew's hooks
    /// decide the call again with the real ones when it runs.
    async fn policies_refuse(
        &self,
        question: &Question,
        edit: &Map<String, Value>,
    ) -> Result<Option<String>, StoreError> {
        if question.policy_hash.is_none() {
            return Ok(None);
        }
        let sql = "SELECT p.language, p.text, a.policy_context FROM crew_approvals a \
                   JOIN crew_policy_sets p ON p.hash = a.policy_hash WHERE a.id = $1";
        let found: Option<(String, String, Option<String>)> = on_pool!(self, |pool| {
            sqlx::query_as(sql)
                .bind(&question.id)
                .fetch_optional(pool)
                .await?
        });
        let Some((language, text, context)) = found else {
            return Ok(Some(
                "the policy set it was asked under is missing from the store".to_owned(),
            ));
        };
        let context: Value = context
            .as_deref()
            .and_then(|context| serde_json::from_str(context).ok())
            .unwrap_or(Value::Null);
        Ok(policy_refusal(&language, &text, &context, question, edit).await)
    }

    /// Records a refused answer.
    async fn record_refusal(
        &self,
        id: &str,
        answer: &Answer,
        error: &DecisionError,
    ) -> Result<(), StoreError> {
        let sql = "INSERT INTO crew_approval_refusals (id, approval_id, approver, decision, reason, at) \
                   VALUES ($1, $2, $3, $4, $5, $6)";
        on_pool!(self, |pool| {
            sqlx::query(sql)
                .bind(new_id())
                .bind(id)
                .bind(&answer.approver)
                .bind(answer.decision.as_str())
                .bind(error.to_string())
                .bind(self.now())
                .execute(pool)
                .await?;
        });
        Ok(())
    }

    /// Closes the pending questions whose deadline passed (expired) or
    /// whose process is gone (abandoned), and the approvals nobody took
    /// before their lease ran out (abandoned: their process is gone, so
    /// they approved nothing); announces them and records each on the
    /// audit trail its process named. Whichever process closes a question
    /// records it: the one that asked may be gone.
    pub(crate) async fn close_lapsed(&self) -> Result<(), StoreError> {
        let now = self.now();
        let mut closed = Vec::new();
        let lapsed = [
            ("expired", "status = 'pending' AND deadline <= $1"),
            ("abandoned", "status = 'pending' AND lease_until <= $1"),
            (
                "abandoned",
                "status = 'approved' AND taken_at IS NULL AND lease_until <= $1",
            ),
        ];
        for (status, condition) in lapsed {
            // A look first: a store with nothing to close is not written
            // (a read-only copy lists its questions).
            let select = format!("SELECT id FROM crew_approvals WHERE {condition} LIMIT 1");
            // Then one statement per kind: a question closes once, by
            // whoever gets there first, and only that writer records it.
            let update = format!(
                "UPDATE crew_approvals SET status = $2, closed_at = $1 WHERE {condition} \
                 RETURNING id"
            );
            on_pool!(self, |pool| {
                let lapsed: Option<String> = sqlx::query_scalar(&select)
                    .bind(now)
                    .fetch_optional(pool)
                    .await?;
                if lapsed.is_some() {
                    let ids: Vec<String> = sqlx::query_scalar(&update)
                        .bind(now)
                        .bind(status)
                        .fetch_all(pool)
                        .await?;
                    closed.extend(ids);
                }
            });
        }
        for id in closed {
            self.record_closed(&id).await;
            self.announce(&id).await;
        }
        Ok(())
    }

    /// Records on its audit trail (if its process named one) that question
    /// `id` was closed without an answer taken; a failure is logged (the
    /// question is closed all the same).
    async fn record_closed(&self, id: &str) {
        #[cfg(feature = "audit")]
        if let Err(error) = self.record_closed_on_trail(id).await {
            tracing::warn!(question = %id, %error, "recording a closed approval failed");
        }
        #[cfg(not(feature = "audit"))]
        let _ = id;
    }

    #[cfg(feature = "audit")]
    async fn record_closed_on_trail(&self, id: &str) -> Result<(), StoreError> {
        let sql = "SELECT audit_trail FROM crew_approvals WHERE id = $1";
        let trail: Option<String> = on_pool!(self, |pool| {
            sqlx::query_scalar::<_, Option<String>>(sql)
                .bind(id)
                .fetch_optional(pool)
                .await?
                .flatten()
        });
        let Some(trail) = trail else { return Ok(()) };
        let Some(question) = self.question(id).await? else {
            return Ok(());
        };
        let entry = crate::store::audit::Entry {
            at: question
                .closed_at
                .map_or_else(|| self.now(), crate::store::millis),
            kind: "approval_closed".to_owned(),
            data: closed_record(&question),
        };
        self.append_audit(&trail, &[entry]).await?;
        Ok(())
    }

    /// Stores a new question, open until `deadline`, held by `owner`.
    async fn insert_question(
        &self,
        id: &str,
        owner: &str,
        request: &HumanInputRequest,
        deadline: i64,
        lease_until: i64,
        audit_trail: Option<&str>,
    ) -> Result<(), StoreError> {
        let now = self.now();
        let arguments = arguments_text(request);
        let schema = request.tool_schema.as_ref().map(Value::to_string);
        let capabilities = capabilities_text(
            request
                .tool_capabilities
                .unwrap_or_else(|| hooks_core::ToolAnnotations::new().capabilities()),
        );
        let sql = "INSERT INTO crew_approvals (id, call_id, tool, arguments, tool_schema, capabilities, \
                   agent, task, crew, kickoff_id, requester, prompt, created_at, deadline, owner, \
                   lease_until, audit_trail, status, reason, policy_hash, policy_context) VALUES ($1, \
                   $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, 'pending', \
                   $18, $19, $20)";
        // The policy set it is asked under, kept once by its hash.
        let policies = request.asked_under.as_ref().map(|rules| {
            let hash = super::hex_sha256(rules.text.as_bytes());
            (hash, rules, rules.context.to_string())
        });
        let keep_policies = "INSERT INTO crew_policy_sets (hash, language, text, created_at) \
                             VALUES ($1, $2, $3, $4) ON CONFLICT (hash) DO NOTHING";
        let prompt = prompt_text(request);
        // Its announcements (SPEC §14) need nothing more: any replica's
        // announcer finds a pending question not announced yet, whatever
        // becomes of this process. A question written to a removed file
        // would wait unseen.
        self.file_still_there()?;
        on_pool!(self, |pool| {
            // The connection first, then the turn: a writer waiting for
            // its turn never holds the others up waiting for a connection.
            let mut transaction = pool.begin().await?;
            let _turn = self.write_turn().await;
            if let Some((hash, rules, _)) = &policies {
                sqlx::query(keep_policies)
                    .bind(hash)
                    .bind(&rules.language)
                    .bind(&*rules.text)
                    .bind(now)
                    .execute(&mut *transaction)
                    .await?;
            }
            sqlx::query(sql)
                .bind(id)
                .bind(request.call_id.as_deref())
                .bind(request.tool_name.as_deref().unwrap_or_default())
                .bind(&arguments)
                .bind(schema.as_deref())
                .bind(&capabilities)
                .bind(request.agent_role.as_deref())
                .bind(request.task.as_deref())
                .bind(request.crew.as_deref())
                .bind(request.kickoff_id.as_deref())
                .bind(request.requester.as_deref())
                .bind(&prompt)
                .bind(now)
                .bind(deadline)
                .bind(owner)
                .bind(lease_until)
                .bind(audit_trail)
                .bind(request.reason.as_deref())
                .bind(policies.as_ref().map(|(hash, _, _)| hash.as_str()))
                .bind(policies.as_ref().map(|(_, _, context)| context.as_str()))
                .execute(&mut *transaction)
                .await?;
            transaction.commit().await?;
        });
        Ok(())
    }

    /// Whether `kickoff` is a durable kickoff of this store (SPEC §13): its
    /// questions belong to it, not to the process that asked.
    async fn is_durable_kickoff(&self, kickoff: &str) -> Result<bool, StoreError> {
        self.any_of_kickoff("SELECT COUNT(*) FROM crew_kickoffs WHERE id = $1", kickoff)
            .await
    }

    /// Whether `count` (a `SELECT COUNT(*)` of `$1`) counts any row for
    /// `kickoff`.
    async fn any_of_kickoff(&self, count: &str, kickoff: &str) -> Result<bool, StoreError> {
        let count: i64 = on_pool!(self, |pool| {
            sqlx::query_scalar(count)
                .bind(kickoff)
                .fetch_one(pool)
                .await?
        });
        Ok(count > 0)
    }

    /// The question the durable kickoff `kickoff` asked before about the
    /// very call of `request` (its call id, tool, arguments and question
    /// text: the same gate about the same call), if one still stands
    /// (pending, approved, denied, or expired: its deadline passed, which
    /// denied the call, maybe while the kickoff was parked): the latest.
    async fn question_of_call(
        &self,
        kickoff: &str,
        request: &HumanInputRequest,
    ) -> Result<Option<Question>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM crew_approvals WHERE kickoff_id = $1 AND call_id = $2 \
             AND tool = $3 AND arguments = $4 AND prompt = $5 \
             AND status IN ('pending', 'approved', 'denied', 'expired') \
             ORDER BY created_at DESC, id LIMIT 1"
        );
        let arguments = arguments_text(request);
        let prompt = prompt_text(request);
        on_pool!(self, |pool| {
            let row = sqlx::query(&sql)
                .bind(kickoff)
                .bind(request.call_id.as_deref())
                .bind(request.tool_name.as_deref().unwrap_or_default())
                .bind(&arguments)
                .bind(&prompt)
                .fetch_optional(pool)
                .await?;
            match row {
                Some(row) => read_question!(&row).map(Some),
                None => Ok(None),
            }
        })
    }

    /// Takes over a durable kickoff's pending question for `owner` (the
    /// process that resumed the kickoff).
    async fn adopt_question(&self, id: &str, owner: &str) -> Result<(), StoreError> {
        let sql = "UPDATE crew_approvals SET owner = $2 WHERE id = $1 AND status = 'pending'";
        on_pool!(self, |pool| {
            sqlx::query(sql).bind(id).bind(owner).execute(pool).await?;
        });
        Ok(())
    }

    /// Marks a durable kickoff's answer taken, if it was not yet: a resumed
    /// run uses it for the same call (the first process may have gone
    /// before taking it, or after). An expired question is so taken too:
    /// its call was denied, and the kickoff is not woken for it again.
    async fn retake_answer(&self, id: &str) -> Result<(), StoreError> {
        let sql = "UPDATE crew_approvals SET taken_at = COALESCE(taken_at, $2) WHERE id = $1 \
                   AND status IN ('approved', 'denied', 'expired')";
        on_pool!(self, |pool| {
            sqlx::query(sql)
                .bind(id)
                .bind(self.now())
                .execute(pool)
                .await?;
        });
        self.announce(id).await;
        Ok(())
    }

    /// Whether kickoff `kickoff` has a question pending in the store.
    #[cfg(feature = "durable")]
    pub(crate) async fn kickoff_waits(&self, kickoff: &str) -> Result<bool, StoreError> {
        self.any_of_kickoff(
            "SELECT COUNT(*) FROM crew_approvals WHERE kickoff_id = $1 AND status = 'pending'",
            kickoff,
        )
        .await
    }

    /// Wakes the parked durable kickoffs (`only` that one, or all) one of
    /// whose questions was answered or expired and not yet taken: each
    /// becomes ready, for a resumer to claim. (A running one that parks
    /// later is made ready by its parking, which looks for the same.) The
    /// kickoffs woken.
    pub(crate) async fn wake_kickoffs(
        &self,
        only: Option<&str>,
    ) -> Result<Vec<String>, StoreError> {
        let sql = "UPDATE crew_kickoffs SET status = 'ready', updated_at = $1 \
                   WHERE status = 'parked' AND ($2 IS NULL OR id = $2) \
                   AND EXISTS (SELECT 1 FROM crew_approvals a WHERE a.kickoff_id = crew_kickoffs.id \
                   AND a.status IN ('approved', 'denied', 'expired') AND a.taken_at IS NULL) \
                   RETURNING id";
        Ok(on_pool!(self, |pool| {
            sqlx::query_scalar(sql)
                .bind(self.now())
                .bind(only)
                .fetch_all(pool)
                .await?
        }))
    }

    /// Extends the lease of a pending question held by `owner`.
    async fn renew_lease(&self, id: &str, owner: &str, until: i64) -> Result<(), StoreError> {
        let sql = "UPDATE crew_approvals SET lease_until = $3 \
                   WHERE id = $1 AND owner = $2 AND status = 'pending' AND lease_until > $4";
        on_pool!(self, |pool| {
            sqlx::query(sql)
                .bind(id)
                .bind(owner)
                .bind(until)
                .bind(self.now())
                .execute(pool)
                .await?;
        });
        Ok(())
    }

    /// Closes a pending question nobody waits for any more.
    async fn withdraw(&self, id: &str, status: QuestionStatus) -> Result<(), StoreError> {
        let sql = "UPDATE crew_approvals SET status = $2, closed_at = $3 \
                   WHERE id = $1 AND status = 'pending'";
        let updated = on_pool!(self, |pool| {
            sqlx::query(sql)
                .bind(id)
                .bind(status.as_str())
                .bind(self.now())
                .execute(pool)
                .await?
                .rows_affected()
        });
        if updated > 0 {
            self.record_closed(id).await;
            self.announce(id).await;
        }
        Ok(())
    }

    /// Withdraws every pending question held by `owner`, recording each;
    /// returns how many.
    async fn withdraw_owned(&self, owner: &str) -> Result<usize, StoreError> {
        // A durable kickoff's questions belong to the kickoff, not to the
        // process (SPEC §13): they stay open for whichever process resumes
        // it.
        let sql = "UPDATE crew_approvals SET status = 'withdrawn', closed_at = $2 \
                   WHERE owner = $1 AND status = 'pending' AND (kickoff_id IS NULL \
                   OR NOT EXISTS (SELECT 1 FROM crew_kickoffs \
                   WHERE crew_kickoffs.id = crew_approvals.kickoff_id)) RETURNING id";
        self.withdraw_where(sql, owner).await
    }

    /// Withdraws every pending question of the kickoff `kickoff` (a
    /// durable kickoff cancelled: nothing will take their answers),
    /// recording each; returns how many.
    #[cfg_attr(
        not(feature = "durable"),
        allow(dead_code, reason = "used by durable kickoffs only")
    )]
    pub(crate) async fn withdraw_kickoff_questions(
        &self,
        kickoff: &str,
    ) -> Result<usize, StoreError> {
        let sql = "UPDATE crew_approvals SET status = 'withdrawn', closed_at = $2 \
                   WHERE kickoff_id = $1 AND status = 'pending' RETURNING id";
        self.withdraw_where(sql, kickoff).await
    }

    /// Runs `sql` (withdrawing the questions matching `$1`, closed at
    /// `$2`, returning their ids) and records and announces each.
    async fn withdraw_where(&self, sql: &str, matching: &str) -> Result<usize, StoreError> {
        let ids: Vec<String> = on_pool!(self, |pool| {
            sqlx::query_scalar(sql)
                .bind(matching)
                .bind(self.now())
                .fetch_all(pool)
                .await?
        });
        for id in &ids {
            self.record_closed(id).await;
            self.announce(id).await;
        }
        Ok(ids.len())
    }

    /// Takes the answer of question `id` for the call waiting on it: only
    /// while its lease holds (its process is alive) and once. `false` when
    /// the question was abandoned meanwhile: the answer approves nothing.
    async fn take_answer(&self, id: &str) -> Result<bool, StoreError> {
        let sql = "UPDATE crew_approvals SET taken_at = $2 WHERE id = $1 \
                   AND status IN ('approved', 'denied') AND taken_at IS NULL AND lease_until > $2";
        let updated = on_pool!(self, |pool| {
            sqlx::query(sql)
                .bind(id)
                .bind(self.now())
                .execute(pool)
                .await?
                .rows_affected()
        });
        if updated == 1 {
            self.announce(id).await;
        }
        Ok(updated == 1)
    }

    /// Keeps what became of the call an approval of question `id` let
    /// through (the first word only: a call ends once).
    async fn record_outcome(
        &self,
        id: &str,
        outcome: &ApprovedCallOutcome,
    ) -> Result<bool, StoreError> {
        let (source, detail) = outcome_parts(outcome);
        let sql = "UPDATE crew_approvals SET outcome = $2, outcome_source = $3, \
                   outcome_detail = $4, outcome_at = $5 \
                   WHERE id = $1 AND status = 'approved' AND outcome IS NULL";
        let updated = on_pool!(self, |pool| {
            sqlx::query(sql)
                .bind(id)
                .bind(outcome.as_str())
                .bind(source)
                .bind(detail.map(|detail| excerpt_of(detail, MAX_OUTCOME_DETAIL_BYTES)))
                .bind(self.now())
                .execute(pool)
                .await?
                .rows_affected()
        });
        if updated == 1 {
            self.announce(id).await;
        }
        Ok(updated == 1)
    }

    /// Names `by` as the process that held the call question `id` is
    /// about (a durable kickoff's owner), for the inbox to show beside
    /// what became of the call.
    #[cfg_attr(
        not(feature = "durable"),
        allow(dead_code, reason = "used by durable kickoffs only")
    )]
    pub(crate) async fn record_outcome_by(&self, id: &str, by: &str) -> Result<(), StoreError> {
        let sql = "UPDATE crew_approvals SET outcome_by = $2 WHERE id = $1 AND status = 'approved'";
        on_pool!(self, |pool| {
            sqlx::query(sql).bind(id).bind(by).execute(pool).await?;
        });
        self.announce(id).await;
        Ok(())
    }

    /// Keeps what became of the call `call_id` of the durable kickoff
    /// `kickoff` (settled when resumed: found in doubt, run again, or its
    /// effect found done), held by process `by`, on the approved question
    /// about it that has no outcome yet (or only "in doubt", which a later
    /// word settles). Returns whether a question took it.
    #[cfg_attr(
        not(feature = "durable"),
        allow(dead_code, reason = "used by durable kickoffs only")
    )]
    pub(crate) async fn record_kickoff_call_outcome(
        &self,
        kickoff: &str,
        call_id: &str,
        outcome: &ApprovedCallOutcome,
        by: &str,
    ) -> Result<bool, StoreError> {
        let (source, detail) = outcome_parts(outcome);
        let sql = "UPDATE crew_approvals SET outcome = $3, outcome_source = $4, \
                   outcome_detail = $5, outcome_at = $6, outcome_by = $7 \
                   WHERE kickoff_id = $1 AND call_id = $2 AND status = 'approved' \
                   AND (outcome IS NULL OR outcome = 'in_doubt') RETURNING id";
        let ids: Vec<String> = on_pool!(self, |pool| {
            sqlx::query_scalar(sql)
                .bind(kickoff)
                .bind(call_id)
                .bind(outcome.as_str())
                .bind(source)
                .bind(detail.map(|detail| excerpt_of(detail, MAX_OUTCOME_DETAIL_BYTES)))
                .bind(self.now())
                .bind(by)
                .fetch_all(pool)
                .await?
        });
        for id in &ids {
            self.announce(id).await;
        }
        Ok(!ids.is_empty())
    }
}

/// Whether `id`, chosen by a runtime for a question, looks like an id
/// (what `new_id` makes, or close): short, letters, digits, `-` and `_`.
fn valid_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_')
}

/// Whether `question` is the durable kickoff `kickoff`'s question about the
/// call of `request` (the same call id and tool), still standing: the one
/// a resumed run asks again under the id it journaled.
fn question_of(question: &Question, kickoff: &str, request: &HumanInputRequest) -> bool {
    question.kickoff_id.as_deref() == Some(kickoff)
        && question.call_id == request.call_id
        && Some(question.tool.as_str()) == request.tool_name.as_deref()
        && matches!(
            question.status,
            QuestionStatus::Pending
                | QuestionStatus::Approved
                | QuestionStatus::Denied
                | QuestionStatus::Expired
        )
}

/// Who refused an approved call and why, or the tool's error: what a
/// question keeps beside `outcome`.
fn outcome_parts(outcome: &ApprovedCallOutcome) -> (Option<&str>, Option<&str>) {
    match outcome {
        ApprovedCallOutcome::Refused { source, reason } => (Some(source), Some(reason)),
        ApprovedCallOutcome::Failed { error } => (None, Some(error)),
        ApprovedCallOutcome::InDoubt { why } => (None, Some(why)),
        _ => (None, None),
    }
}

/// At most `limit` bytes of `text`, cut at a character boundary.
fn excerpt_of(text: &str, limit: usize) -> &str {
    if text.len() <= limit {
        return text;
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The `approval_closed` record of a question closed without an answer
/// taken.
#[cfg(feature = "audit")]
fn closed_record(question: &Question) -> Value {
    serde_json::json!({
        "question": question.id,
        "tool": question.tool,
        "call_id": question.call_id,
        "kickoff_id": question.kickoff_id,
        "status": question.status.as_str(),
        "answered_by": question.answer.as_ref().map(|answer| answer.approver.as_str()),
    })
}

/// Why the policy set `text` refuses `question`'s call with `edit`, if it
/// does (on a thread of its own: the engine's checks recurse deeply).
#[cfg(feature = "policy")]
async fn policy_refusal(
    language: &str,
    text: &str,
    context: &Value,
    question: &Question,
    edit: &Map<String, Value>,
) -> Option<String> {
    use crate::policy::edit::{AskedCall, refusal};
    let (language, text, context) = (language.to_owned(), text.to_owned(), context.clone());
    let (question, edit) = (question.clone(), edit.clone());
    let decided = tokio::task::spawn_blocking(move || {
        let call = AskedCall {
            tool: &question.tool,
            capabilities: question.capabilities,
            schema: question.tool_schema.as_ref(),
            role: question.agent.as_deref(),
            crew: question.crew.as_deref(),
            user: question.requester.as_deref(),
            call_id: question.call_id.as_deref(),
            task: question.task.as_deref(),
        };
        refusal(&language, &text, &context, &call, &edit)
    })
    .await;
    decided.unwrap_or_else(|_| Some("checking the edit by its policy set failed".to_owned()))
}

/// Without the policy engine, an edit of a question asked under policies
/// cannot be checked, and is not taken.
#[cfg(not(feature = "policy"))]
async fn policy_refusal(
    _language: &str,
    _text: &str,
    _context: &Value,
    _question: &Question,
    _edit: &Map<String, Value>,
) -> Option<String> {
    Some(
        "the question was asked under policies this program cannot check (it is built \
         without crew-runtime's feature `policy`): approve it unedited, or edit it in an \
         inbox built with the feature"
            .to_owned(),
    )
}

/// An edit as stored: a JSON object within [`MAX_EDIT_BYTES`] that the
/// tool's schema accepts.
fn check_edit(edit: &Map<String, Value>, schema: Option<&Value>) -> Result<String, DecisionError> {
    let text = Value::Object(edit.clone()).to_string();
    if text.len() > MAX_EDIT_BYTES {
        return Err(DecisionError::EditTooLarge {
            bytes: text.len(),
            limit: MAX_EDIT_BYTES,
        });
    }
    if let Some(schema) = schema {
        let validator = jsonschema::validator_for(schema).map_err(|error| {
            DecisionError::InvalidEdit(format!("the tool's schema cannot be used: {error}"))
        })?;
        let instance = Value::Object(edit.clone());
        let problems: Vec<String> = validator
            .iter_errors(&instance)
            .take(5)
            .map(|error| {
                let at = error.instance_path.to_string();
                if at.is_empty() {
                    error.to_string()
                } else {
                    format!("{at}: {error}")
                }
            })
            .collect();
        if !problems.is_empty() {
            return Err(DecisionError::InvalidEdit(problems.join("; ")));
        }
    }
    Ok(text)
}

/// A [`HumanInputSource`] whose questions are rows of a [`Store`], answered
/// by the approval inbox or by [`Store::decide`] from any process on the
/// store.
///
/// Each question is a row with an unguessable id, the call, its redacted
/// arguments, the agent, task, crew, kickoff and requester, and the
/// deadline of the crew's human-input timeout. While the question waits,
/// this process renews its lease (every third of [`lease`](Self::lease));
/// when the process is gone the lease runs out and the question refuses
/// answers. A question the kickoff stops waiting for is withdrawn.
///
/// Answers: an approval is `yes`, a denial `no`, an approval with edited
/// arguments `yes` with the edit, which
/// [`ApprovalGate`](crate::guards::ApprovalGate) and `@ask` policies put in
/// the call (through
/// [`request_approval`](crate::ToolCallHookContext::request_approval)); a
/// hook that reads only text (`request_human_input`) gets an error for an
/// edit, so the call is refused rather than run unedited.
///
/// ```no_run
/// use std::sync::Arc;
/// use std::time::Duration;
/// use crew_runtime::guards::ApprovalGate;
/// use crew_runtime::prelude::*;
/// use crew_runtime::store::{Store, StoreApprovals};
///
/// # async fn run(assistant: Agent, errands: Task) -> Result<(), Box<dyn std::error::Error>> {
/// let store = Store::connect("sqlite://approvals.db").await?;
/// let crew = Crew::builder()
///     .agent(assistant)
///     .task(errands)
///     .human_input(Arc::new(StoreApprovals::new(store)))
///     .human_input_timeout(Duration::from_secs(15 * 60))
///     .async_hook_with(
///         PRE_TOOL_CALL,
///         HookOptions::new().name("approval-gate"),
///         ApprovalGate::for_capabilities([Capability::Destructive]).pre_hook(),
///     )
///     .build()?;
/// let output = crew.for_user("carol").kickoff(()).await?;
/// # let _ = output;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct StoreApprovals {
    store: Store,
    owner: Arc<str>,
    lease: Duration,
    #[cfg(feature = "audit")]
    audit: Option<Arc<dyn QuestionRecords>>,
}

/// Where a [`StoreApprovals`] records its questions and what became of
/// them: the audit trail given to [`StoreApprovals::audit`], seen through
/// what it does, so that the store does not depend on the trail that is
/// built on it.
#[cfg(feature = "audit")]
pub(crate) trait QuestionRecords: Send + Sync {
    /// The trail's name, kept on each question's row.
    fn name(&self) -> &str;
    /// Records `data` as a record of `kind`.
    fn record(&self, kind: &str, data: serde_json::Value);
}

impl fmt::Debug for StoreApprovals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreApprovals")
            .field("store", &self.store)
            .field("owner", &self.owner)
            .field("lease", &self.lease)
            .finish()
    }
}

impl StoreApprovals {
    /// A source asking through `store`, with a lease of 15 seconds.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), crew_runtime::store::StoreError> {
    /// use crew_runtime::store::{Store, StoreApprovals};
    /// let approvals = StoreApprovals::new(Store::connect("sqlite://approvals.db").await?);
    /// # let _ = approvals;
    /// # Ok(())
    /// # }
    /// ```
    pub fn new(store: Store) -> Self {
        StoreApprovals {
            store,
            owner: Arc::from(new_id()),
            lease: DEFAULT_LEASE,
            #[cfg(feature = "audit")]
            audit: None,
        }
    }

    /// Records on `records` (an audit trail: see `StoreApprovals::audit`).
    #[cfg(feature = "audit")]
    pub(crate) fn with_records(mut self, records: Arc<dyn QuestionRecords>) -> Self {
        self.audit = Some(records);
        self
    }

    /// Records that question `id` was asked.
    fn audit_asked(&self, id: &str, request: &HumanInputRequest, deadline: i64) {
        #[cfg(feature = "audit")]
        if let Some(trail) = &self.audit {
            trail.record(
                "approval_asked",
                serde_json::json!({
                    "question": id,
                    "call_id": request.call_id,
                    "tool": request.tool_name,
                    "arguments": request.tool_input,
                    "agent": request.agent_role,
                    "task": request.task,
                    "crew": request.crew,
                    "kickoff_id": request.kickoff_id,
                    "requester": request.requester,
                    "prompt": request.prompt,
                    "deadline": deadline,
                }),
            );
        }
        #[cfg(not(feature = "audit"))]
        let _ = (id, request, deadline);
    }

    /// Records the answer question `question` got. A question closed
    /// without one is recorded by whichever process closed it (see
    /// `Store::close_lapsed` and `Store::withdraw`), on the trail named
    /// in its row.
    fn audit_answered(&self, question: &Question) {
        #[cfg(feature = "audit")]
        if let Some(trail) = &self.audit
            && let Some(answer) = &question.answer
        {
            trail.record(
                "approval_answered",
                serde_json::json!({
                    "question": question.id,
                    "tool": question.tool,
                    "approver": answer.approver,
                    "decision": answer.decision,
                    "edited_arguments": answer.edited_arguments,
                    "comment": answer.comment,
                    "channel": answer.via,
                }),
            );
        }
        #[cfg(not(feature = "audit"))]
        let _ = question;
    }

    /// The audit trail this source records on, by name.
    fn audit_trail_name(&self) -> Option<&str> {
        #[cfg(feature = "audit")]
        {
            self.audit.as_ref().map(|records| records.name())
        }
        #[cfg(not(feature = "audit"))]
        None
    }

    /// How long a question stays open once this process stops renewing it
    /// (it is gone): shorter abandons the questions of a dead process
    /// sooner, at the price of more writes. At least one second.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) {
    /// use std::time::Duration;
    /// let approvals = crew_runtime::store::StoreApprovals::new(store).lease(Duration::from_secs(5));
    /// # let _ = approvals;
    /// # }
    /// ```
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease.max(Duration::from_secs(1));
        self
    }

    /// Withdraws every question this source (and its clones) still waits
    /// for, recording each as closed (`approval_closed` on the audit
    /// trail named when it was asked); returns how many. For a service
    /// shutting down: its kickoffs are dropped, and a question dropped
    /// with them is withdrawn by a task that a stopping runtime may never
    /// run; this does it before the process ends, so no approver answers
    /// a call nothing waits for. The questions of durable kickoffs stay
    /// open: they belong to their kickoffs, which a resumer takes up with
    /// their answers (SPEC §13).
    ///
    /// ```no_run
    /// # async fn run(approvals: crew_runtime::store::StoreApprovals) -> Result<(), crew_runtime::store::StoreError> {
    /// // … the server stopped, its kickoffs dropped …
    /// let withdrawn = approvals.withdraw_open().await?;
    /// println!("{withdrawn} questions withdrawn");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn withdraw_open(&self) -> Result<usize, StoreError> {
        self.store.withdraw_owned(&self.owner).await
    }

    /// The store it asks through.
    ///
    /// ```no_run
    /// # fn run(approvals: crew_runtime::store::StoreApprovals) {
    /// println!("asking through {}", approvals.store().url());
    /// # }
    /// ```
    pub fn store(&self) -> &Store {
        &self.store
    }

    fn lease_ms(&self) -> i64 {
        i64::try_from(self.lease.as_millis()).unwrap_or(i64::MAX)
    }

    /// Asks and waits for the answer.
    async fn wait_for_answer(
        &self,
        request: HumanInputRequest,
    ) -> Result<HumanAnswer, HumanInputError> {
        let failed = |error: StoreError| HumanInputError::SourceFailed(error.to_string());
        let timeout = request
            .timeout
            .unwrap_or(hooks_core::DEFAULT_HUMAN_INPUT_TIMEOUT);
        let now = self.store.now();
        let mut deadline =
            now.saturating_add(i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX));
        // Listen before asking: an answer cannot slip in between.
        let mut changes = self.store.changes();
        // A durable kickoff's question belongs to the kickoff, not to this
        // process (SPEC §13): it lives until its deadline, whichever process
        // runs the kickoff then, and a resumed run asking again about the
        // very same call takes up the question it asked before, and its
        // answer, instead of asking anew.
        let durable = match request.kickoff_id.as_deref() {
            Some(kickoff) => self
                .store
                .is_durable_kickoff(kickoff)
                .await
                .map_err(failed)?,
            None => false,
        };
        // The question asked before: under the id the runtime chose (and
        // journaled) for it, if one was chosen, else found by the call's
        // content. A chosen id no question has yet is a new question's:
        // nothing is looked for by content then (an earlier call of the
        // kickoff with the very same content is another call).
        let mut chosen = None;
        let earlier = match (durable, request.kickoff_id.as_deref()) {
            (true, Some(kickoff)) => match request.question_id.as_deref() {
                Some(id) if valid_id(id) => match self.store.question(id).await.map_err(failed)? {
                    Some(question) => question_of(&question, kickoff, &request).then_some(question),
                    None => {
                        chosen = Some(id.to_owned());
                        None
                    }
                },
                _ => self
                    .store
                    .question_of_call(kickoff, &request)
                    .await
                    .map_err(failed)?,
            },
            _ => None,
        };
        if let Some(question) = &earlier {
            if let Some(answer) = answered(question) {
                // Answered before the kickoff's last process went: the
                // answer stands for the call, asked no second time.
                self.store
                    .retake_answer(&question.id)
                    .await
                    .map_err(failed)?;
                return answer;
            }
            deadline = millis(question.deadline);
            self.store
                .adopt_question(&question.id, &self.owner)
                .await
                .map_err(failed)?;
        }
        let lease_until = if durable {
            deadline
        } else {
            now + self.lease_ms()
        };
        let adopted = earlier.is_some();
        let id = match earlier {
            Some(question) => question.id,
            None => chosen.unwrap_or_else(new_id),
        };
        // The row is written by a task of its own, which a dropped wait
        // cannot cut short; the guard withdraws the question once that
        // write has settled. A wait dropped while the insert is in flight
        // (its row may already be listed) so withdraws it, instead of
        // leaving it to its lease.
        let inserting = (!adopted).then(|| {
            let store = self.store.clone();
            let (id, owner, request) = (id.clone(), self.owner.clone(), request.clone());
            let trail = self.audit_trail_name().map(str::to_owned);
            tokio::spawn(async move {
                store
                    .insert_question(
                        &id,
                        &owner,
                        &request,
                        deadline,
                        lease_until,
                        trail.as_deref(),
                    )
                    .await
            })
        });
        let mut open = OpenQuestion {
            store: self.store.clone(),
            id: id.clone(),
            deadline,
            answered: false,
            kept: durable,
            inserting,
        };
        open.asked().await?;
        if !adopted {
            self.audit_asked(&id, &request, deadline);
        }
        self.store.announce(&id).await;
        let renew_every = self.lease / 3;
        let mut renewed = tokio::time::Instant::now();
        loop {
            let question = match self.store.question(&id).await {
                Ok(Some(question)) => question,
                Ok(None) => {
                    open.answered = true;
                    return Err(HumanInputError::SourceFailed(
                        "the question was removed from the store".into(),
                    ));
                }
                // A store that is briefly unreachable: keep waiting (the
                // deadline still ends the wait).
                Err(error) => {
                    tracing::warn!(question = %id, %error, "reading an approval failed; retrying");
                    tokio::time::sleep(FALLBACK_POLL).await;
                    continue;
                }
            };
            if let Some(answer) = answered(&question) {
                open.answered = true;
                if question.answer.is_none() {
                    // Closed unanswered: recorded by whoever closed it.
                    return answer;
                }
                // Taken only while this process's lease holds: an answer
                // that came after the question was abandoned approves
                // nothing.
                if !self.store.take_answer(&id).await.map_err(failed)? {
                    self.store.close_lapsed().await.map_err(failed)?;
                    return Err(HumanInputError::SourceFailed(
                        "the answer came after this process's lease on the question ran out \
                         (it was abandoned): nothing is approved"
                            .into(),
                    ));
                }
                self.audit_answered(&question);
                return answer;
            }
            // A durable kickoff's question needs no renewal: it is held
            // until its deadline.
            if !durable && renewed.elapsed() >= renew_every {
                let until = self.store.now() + self.lease_ms();
                if let Err(error) = self.store.renew_lease(&id, &self.owner, until).await {
                    tracing::warn!(question = %id, %error, "renewing an approval's lease failed");
                }
                renewed = tokio::time::Instant::now();
            }
            let wake = tokio::time::sleep(renew_every.min(FALLBACK_POLL));
            tokio::pin!(wake);
            // Another question's change is no reason to read this one's
            // row: with many questions waiting, every change would make
            // each of them read the store.
            loop {
                tokio::select! {
                    change = changes.recv() => match change {
                        Ok(changed) if changed.is_empty() || changed == id => break,
                        Ok(_) => {}
                        Err(RecvError::Lagged(_)) => break,
                        Err(RecvError::Closed) => {
                            (&mut wake).await;
                            break;
                        }
                    },
                    () = &mut wake => break,
                }
            }
        }
    }
}

/// What a question's state means to the call waiting for it: `None`
/// while it is pending.
fn answered(question: &Question) -> Option<Result<HumanAnswer, HumanInputError>> {
    let closed = |why: &str| Some(Err(HumanInputError::SourceFailed(why.to_owned())));
    match question.status {
        QuestionStatus::Pending => None,
        QuestionStatus::Approved | QuestionStatus::Denied => {
            let Some(recorded) = &question.answer else {
                return closed("the question was closed without an answer");
            };
            let text = if question.status == QuestionStatus::Approved {
                "yes"
            } else {
                "no"
            };
            let mut answer = HumanAnswer::new(text)
                .with_answered_by(recorded.approver.clone())
                .with_question_id(question.id.clone());
            if let Some(comment) = &recorded.comment {
                answer = answer.with_comment(comment.clone());
            }
            if question.status == QuestionStatus::Approved
                && let Some(edit) = &recorded.edited_arguments
            {
                match edit.as_object() {
                    Some(edit) => answer = answer.with_edited_input(edit.clone()),
                    None => return closed("the approved edit is not a JSON object"),
                }
            }
            Some(Ok(answer))
        }
        QuestionStatus::Expired => closed("the question expired unanswered"),
        QuestionStatus::Abandoned => closed("the question was abandoned (its lease ran out)"),
        QuestionStatus::Withdrawn => closed("the question was withdrawn"),
    }
}

/// A question's arguments as stored: the tool's input as JSON text.
fn arguments_text(request: &HumanInputRequest) -> String {
    request
        .tool_input
        .as_ref()
        .map_or_else(|| "{}".to_owned(), Value::to_string)
}

/// A question's text as stored: the prompt, and the default message under
/// it.
fn prompt_text(request: &HumanInputRequest) -> String {
    let mut prompt = request.prompt.clone();
    if !request.default_message.is_empty() {
        prompt.push('\n');
        prompt.push_str(&request.default_message);
    }
    prompt
}

/// A question being waited for: withdrawn (or marked expired) when the wait
/// ends without an answer, however it ends.
struct OpenQuestion {
    store: Store,
    id: String,
    deadline: i64,
    answered: bool,
    /// A durable kickoff's question, which outlives the wait: never
    /// withdrawn when the wait is dropped (the kickoff's next process takes
    /// it up).
    kept: bool,
    /// The write of the question's row, until it has settled.
    inserting: Option<tokio::task::JoinHandle<Result<(), StoreError>>>,
}

impl OpenQuestion {
    /// Waits for the question's row to be written. A failed write asked
    /// nothing, so there is nothing to withdraw.
    async fn asked(&mut self) -> Result<(), HumanInputError> {
        let Some(inserting) = self.inserting.as_mut() else {
            return Ok(());
        };
        let written = inserting.await;
        self.inserting = None;
        let failure = match written {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(error)) => error.to_string(),
            Err(join) => format!("asking the store failed: {join}"),
        };
        self.answered = true;
        Err(HumanInputError::SourceFailed(failure))
    }
}

impl Drop for OpenQuestion {
    fn drop(&mut self) {
        if self.answered || self.kept {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            // Nothing can write now; the lease closes it soon.
            return;
        };
        let status = if self.store.now() >= self.deadline {
            QuestionStatus::Expired
        } else {
            QuestionStatus::Withdrawn
        };
        let store = self.store.clone();
        let id = std::mem::take(&mut self.id);
        let inserting = self.inserting.take();
        runtime.spawn(async move {
            if let Some(inserting) = inserting
                && !matches!(inserting.await, Ok(Ok(())))
            {
                return;
            }
            if let Err(error) = store.withdraw(&id, status).await {
                tracing::warn!(question = %id, %error, "closing an unanswered approval failed");
            }
        });
    }
}

#[async_trait]
impl HumanInputSource for StoreApprovals {
    async fn ask(&self, request: HumanInputRequest) -> Result<String, HumanInputError> {
        let answer = self.wait_for_answer(request).await?;
        if answer.edited_input.is_some() {
            return Err(HumanInputError::SourceFailed(
                "the approver edited the arguments, which a text answer cannot carry \
                 (ask with `request_approval`)"
                    .into(),
            ));
        }
        Ok(answer.text)
    }

    async fn answer(&self, request: HumanInputRequest) -> Result<HumanAnswer, HumanInputError> {
        self.wait_for_answer(request).await
    }

    fn never_blocks(&self) -> bool {
        true
    }

    fn settled(&self, question_id: &str, outcome: &ApprovedCallOutcome) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(question = %question_id, "no runtime to record an approved call's outcome on");
            return;
        };
        let store = self.store.clone();
        let id = question_id.to_owned();
        let outcome = outcome.clone();
        #[cfg(feature = "audit")]
        let trail = self.audit.clone();
        runtime.spawn(async move {
            match store.record_outcome(&id, &outcome).await {
                Ok(true) => {
                    #[cfg(feature = "audit")]
                    if let Some(trail) = trail {
                        let (source, detail) = outcome_parts(&outcome);
                        trail.record(
                            "approval_outcome",
                            serde_json::json!({
                                "question": id,
                                "outcome": outcome.as_str(),
                                "source": source,
                                "detail": detail,
                            }),
                        );
                    }
                }
                Ok(false) => {}
                Err(error) => {
                    tracing::warn!(question = %id, %error, "recording an approved call's outcome failed");
                }
            }
        });
    }
}
