//! What the store keeps of signed links (SPEC §14): the links used, the
//! keys revoked, and each approver's link settings.

use super::accounts::secret_hash;
use super::{Store, StoreError, on_pool};

/// An approver's settings for signed links.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LinkSettings {
    /// Links issued before this time (ms) are dead.
    pub(crate) valid_after: i64,
    /// Whether a link decides without a sign-in.
    pub(crate) one_click: bool,
}

impl Store {
    /// Marks the link `token` used for `question`: `false` when it was used
    /// before (by any replica).
    pub(crate) async fn use_link(&self, token: &str, question: &str) -> Result<bool, StoreError> {
        let now = self.now();
        let sql = "INSERT INTO crew_used_links (token_hash, question_id, used_at) \
                   VALUES ($1, $2, $3) ON CONFLICT (token_hash) DO NOTHING";
        self.file_still_there()?;
        let inserted = on_pool!(self, |pool| {
            sqlx::query(sql)
                .bind(secret_hash(token))
                .bind(question)
                .bind(now)
                .execute(pool)
                .await?
                .rows_affected()
        });
        Ok(inserted == 1)
    }

    /// Whether link `token` was used.
    pub(crate) async fn link_used(&self, token: &str) -> Result<bool, StoreError> {
        let sql = "SELECT COUNT(*) FROM crew_used_links WHERE token_hash = $1";
        let count: i64 = on_pool!(self, |pool| {
            sqlx::query_scalar(sql)
                .bind(secret_hash(token))
                .fetch_one(pool)
                .await?
        });
        Ok(count > 0)
    }

    /// Revokes the link key `key_id`: every link signed with it is dead
    /// at once, on every replica, whatever the key files still hold.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::store::StoreError> {
    /// store.revoke_link_key("2026-12").await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn revoke_link_key(&self, key_id: &str) -> Result<(), StoreError> {
        let now = self.now();
        let sql = "INSERT INTO crew_revoked_link_keys (key_id, revoked_at) VALUES ($1, $2) \
                   ON CONFLICT (key_id) DO NOTHING";
        self.file_still_there()?;
        on_pool!(self, |pool| {
            sqlx::query(sql)
                .bind(key_id)
                .bind(now)
                .execute(pool)
                .await?;
        });
        Ok(())
    }

    /// Whether link key `key_id` was revoked.
    pub(crate) async fn link_key_revoked(&self, key_id: &str) -> Result<bool, StoreError> {
        let sql = "SELECT COUNT(*) FROM crew_revoked_link_keys WHERE key_id = $1";
        let count: i64 = on_pool!(self, |pool| {
            sqlx::query_scalar(sql).bind(key_id).fetch_one(pool).await?
        });
        Ok(count > 0)
    }

    /// The link settings of enabled approver `name`, if there is one.
    pub(crate) async fn link_settings(
        &self,
        name: &str,
    ) -> Result<Option<LinkSettings>, StoreError> {
        let sql = "SELECT links_valid_after, one_click_links FROM crew_approvers \
                   WHERE name = $1 AND disabled_at IS NULL";
        let row: Option<(i64, i64)> = on_pool!(self, |pool| {
            sqlx::query_as(sql).bind(name).fetch_optional(pool).await?
        });
        Ok(row.map(|(valid_after, one_click)| LinkSettings {
            valid_after,
            one_click: one_click == 1,
        }))
    }

    /// Kills every link issued to approver `name` until now (a lost
    /// mailbox, a forwarded mail): links issued from now on work.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::store::StoreError> {
    /// store.end_links("alice").await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn end_links(&self, name: &str) -> Result<(), StoreError> {
        self.set_link_setting(name, "links_valid_after", self.now())
            .await
    }

    /// Whether links of approver `name` decide without a sign-in (their
    /// opt-in: the link is then the credential for its one decision).
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::store::StoreError> {
    /// store.set_one_click_links("alice", true).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn set_one_click_links(&self, name: &str, one_click: bool) -> Result<(), StoreError> {
        self.set_link_setting(name, "one_click_links", i64::from(one_click))
            .await
    }

    async fn set_link_setting(
        &self,
        name: &str,
        column: &str,
        value: i64,
    ) -> Result<(), StoreError> {
        let sql = format!("UPDATE crew_approvers SET {column} = $2 WHERE name = $1");
        self.file_still_there()?;
        let changed = on_pool!(self, |pool| {
            sqlx::query(&sql)
                .bind(name)
                .bind(value)
                .execute(pool)
                .await?
                .rows_affected()
        });
        if changed == 0 {
            return Err(StoreError::Account(format!(
                "no approver is named {name:?}"
            )));
        }
        Ok(())
    }
}
