//! Approvers' Slack identities, and the replay record of Slack's requests
//! (SPEC §14).

use super::{Approver, Question, Store, StoreError, on_pool, same_identity};

/// A Slack identity: a workspace (team) id and a user id in it. The same
/// user id in another workspace is another identity.
///
/// ```
/// let identity = crew_runtime::store::SlackIdentity::new("T024BE7LD", "U0G9QF9C6");
/// assert_eq!(identity.to_string(), "T024BE7LD/U0G9QF9C6");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct SlackIdentity {
    /// The workspace's id (`T…`).
    pub team: String,
    /// The user's id in it (`U…` or `W…`).
    pub user: String,
}

impl SlackIdentity {
    /// The identity of user `user` in workspace `team`.
    ///
    /// ```
    /// let identity = crew_runtime::store::SlackIdentity::new("T1", "U1");
    /// assert_eq!((identity.team.as_str(), identity.user.as_str()), ("T1", "U1"));
    /// ```
    pub fn new(team: impl Into<String>, user: impl Into<String>) -> Self {
        SlackIdentity {
            team: team.into(),
            user: user.into(),
        }
    }
}

impl std::fmt::Display for SlackIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.team, self.user)
    }
}

/// Slack's ids: letters and digits, 1 to 32 of them.
fn check_id(what: &str, id: &str) -> Result<(), StoreError> {
    let fine = !id.is_empty() && id.len() <= 32 && id.bytes().all(|b| b.is_ascii_alphanumeric());
    if fine {
        Ok(())
    } else {
        Err(StoreError::Account(format!(
            "a Slack {what} id is letters and digits (like T024BE7LD or U0G9QF9C6), not {id:?}"
        )))
    }
}

impl Store {
    /// Links Slack identity `identity` to approver `approver`: a click of
    /// that Slack user on a question's button decides as `approver` (whose
    /// status, scopes and requester rule apply), and questions within
    /// `approver`'s scope are sent to that user. An identity links to one
    /// approver; linking it again moves it.
    ///
    /// Errors: an unknown or disabled approver, ids that are not Slack's.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::store::StoreError> {
    /// use crew_runtime::store::SlackIdentity;
    /// store.link_slack("alice", &SlackIdentity::new("T024BE7LD", "U0G9QF9C6")).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn link_slack(
        &self,
        approver: &str,
        identity: &SlackIdentity,
    ) -> Result<(), StoreError> {
        check_id("team", &identity.team)?;
        check_id("user", &identity.user)?;
        if self.approver(approver).await?.is_none() {
            return Err(StoreError::Account(format!(
                "no enabled approver is named {approver:?} (see `crew-inbox add-approver`)"
            )));
        }
        let now = self.now();
        let sql = "INSERT INTO crew_slack_links (team_id, user_id, approver, created_at) \
                   VALUES ($1, $2, $3, $4) ON CONFLICT (team_id, user_id) \
                   DO UPDATE SET approver = excluded.approver, created_at = excluded.created_at";
        self.file_still_there()?;
        on_pool!(self, |pool| {
            sqlx::query(sql)
                .bind(&identity.team)
                .bind(&identity.user)
                .bind(approver)
                .bind(now)
                .execute(pool)
                .await?;
        });
        Ok(())
    }

    /// Removes the link of `identity`: whether there was one.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::store::StoreError> {
    /// use crew_runtime::store::SlackIdentity;
    /// let removed = store.unlink_slack(&SlackIdentity::new("T024BE7LD", "U0G9QF9C6")).await?;
    /// # let _ = removed;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn unlink_slack(&self, identity: &SlackIdentity) -> Result<bool, StoreError> {
        let sql = "DELETE FROM crew_slack_links WHERE team_id = $1 AND user_id = $2";
        let removed = on_pool!(self, |pool| {
            sqlx::query(sql)
                .bind(&identity.team)
                .bind(&identity.user)
                .execute(pool)
                .await?
                .rows_affected()
        });
        Ok(removed > 0)
    }

    /// The enabled approver `identity` is linked to, if any.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::store::StoreError> {
    /// use crew_runtime::store::SlackIdentity;
    /// if let Some(approver) = store.slack_approver(&SlackIdentity::new("T024BE7LD", "U0G9QF9C6")).await? {
    ///     println!("decides as {}", approver.name);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn slack_approver(
        &self,
        identity: &SlackIdentity,
    ) -> Result<Option<Approver>, StoreError> {
        let sql = "SELECT approver FROM crew_slack_links WHERE team_id = $1 AND user_id = $2";
        let name: Option<String> = on_pool!(self, |pool| {
            sqlx::query_scalar(sql)
                .bind(&identity.team)
                .bind(&identity.user)
                .fetch_optional(pool)
                .await?
        });
        match name {
            Some(name) => self.approver(&name).await,
            None => Ok(None),
        }
    }

    /// The Slack identities a question goes to: those linked to enabled
    /// approvers whose scope covers it and who did not ask it, with their
    /// approver; by team, then user.
    pub(crate) async fn slack_recipients(
        &self,
        question: &Question,
    ) -> Result<Vec<(SlackIdentity, Approver)>, StoreError> {
        let sql =
            "SELECT team_id, user_id, approver FROM crew_slack_links ORDER BY team_id, user_id";
        let links: Vec<(String, String, String)> =
            on_pool!(self, |pool| { sqlx::query_as(sql).fetch_all(pool).await? });
        let links = links
            .into_iter()
            .map(|(team, user, name)| (SlackIdentity::new(team, user), name));
        self.who_may_answer(question, links).await
    }

    /// Of `candidates` (each with its approver's name), those whose
    /// approver is enabled, may answer `question` and did not ask it, with
    /// their approver: whom a channel tells of it.
    pub(crate) async fn who_may_answer<T>(
        &self,
        question: &Question,
        candidates: impl IntoIterator<Item = (T, String)>,
    ) -> Result<Vec<(T, Approver)>, StoreError> {
        let mut recipients = Vec::new();
        for (candidate, name) in candidates {
            let Some(approver) = self.approver(&name).await? else {
                continue;
            };
            let asked = question
                .requester
                .as_deref()
                .is_some_and(|requester| same_identity(requester, &approver.name));
            if approver.may_answer(question) && !asked {
                recipients.push((candidate, approver));
            }
        }
        Ok(recipients)
    }

    /// Records a Slack request accepted at `now_ms` under its `signature`:
    /// `false` when it was recorded before (a replay). Records older than
    /// `window_ms` are dropped on the way.
    pub(crate) async fn first_slack_request(
        &self,
        signature: &str,
        window_ms: i64,
    ) -> Result<bool, StoreError> {
        let now = self.now();
        let forget = "DELETE FROM crew_slack_requests WHERE seen_at < $1";
        let record = "INSERT INTO crew_slack_requests (signature, seen_at) VALUES ($1, $2) \
                      ON CONFLICT (signature) DO NOTHING";
        let inserted = on_pool!(self, |pool| {
            sqlx::query(forget)
                .bind(now.saturating_sub(window_ms))
                .execute(pool)
                .await?;
            sqlx::query(record)
                .bind(signature)
                .bind(now)
                .execute(pool)
                .await?
                .rows_affected()
        });
        Ok(inserted == 1)
    }

    /// Records on question `question`'s audit trail (when it has one) that
    /// a click of `identity` was refused, and why; a failure to record is
    /// a trace line.
    #[cfg(feature = "audit")]
    pub(crate) async fn record_slack_refusal(
        &self,
        question: &str,
        identity: &SlackIdentity,
        why: &str,
    ) {
        let recorded = async {
            let Some(trail) = self.trail_of(question).await? else {
                return Ok(());
            };
            let entry = super::audit::Entry {
                at: self.now(),
                kind: "slack_refused".to_owned(),
                data: serde_json::json!({
                    "question": question,
                    "slack_user": identity.to_string(),
                    "why": why,
                }),
            };
            self.append_audit(&trail, &[entry]).await.map(drop)
        };
        if let Err(error) = recorded.await as Result<(), StoreError> {
            tracing::warn!(target: "crew_runtime::inbox", question, %error, "recording a refused Slack click failed");
        }
    }
}
