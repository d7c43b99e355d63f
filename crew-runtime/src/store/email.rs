//! Approvers' e-mail addresses (SPEC §14).

use super::{Approver, Question, Store, StoreError, on_pool};

/// The longest address taken (RFC 5321's path limit).
const MAX_ADDRESS: usize = 254;

/// An address as the store keeps it: `local@domain`, without a display
/// name, spaces or control characters. The e-mail channel parses it again
/// (`lettre`'s address rules) before it sends.
fn check_address(address: &str) -> Result<(), StoreError> {
    let fine = address.len() <= MAX_ADDRESS
        && address
            .split_once('@')
            .is_some_and(|(local, domain)| !local.is_empty() && !domain.is_empty())
        && address.matches('@').count() == 1
        && !address
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '<' | '>' | ',' | ';'));
    if fine {
        Ok(())
    } else {
        Err(StoreError::Account(format!(
            "{address:?} is not an e-mail address (like alice@example.com)"
        )))
    }
}

impl Store {
    /// Sets approver `approver`'s e-mail address (`None` removes it): the
    /// e-mail channel sends the questions within their scope there, each
    /// with a signed link.
    ///
    /// Errors: an unknown or disabled approver, a malformed address.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::store::StoreError> {
    /// store.set_approver_email("alice", Some("alice@example.com")).await?;
    /// assert_eq!(store.approver_email("alice").await?.as_deref(), Some("alice@example.com"));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn set_approver_email(
        &self,
        approver: &str,
        address: Option<&str>,
    ) -> Result<(), StoreError> {
        if let Some(address) = address {
            check_address(address)?;
        }
        if self.approver(approver).await?.is_none() {
            return Err(StoreError::Account(format!(
                "no enabled approver is named {approver:?} (see `crew-inbox add-approver`)"
            )));
        }
        self.file_still_there()?;
        let sql = "UPDATE crew_approvers SET email = $2 WHERE name = $1";
        on_pool!(self, |pool| {
            sqlx::query(sql)
                .bind(approver)
                .bind(address)
                .execute(pool)
                .await?;
        });
        Ok(())
    }

    /// Approver `approver`'s e-mail address, if they have one.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::store::StoreError> {
    /// if let Some(address) = store.approver_email("alice").await? {
    ///     println!("alice is told at {address}");
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn approver_email(&self, approver: &str) -> Result<Option<String>, StoreError> {
        let sql = "SELECT email FROM crew_approvers WHERE name = $1";
        let address: Option<Option<String>> = on_pool!(self, |pool| {
            sqlx::query_scalar(sql)
                .bind(approver)
                .fetch_optional(pool)
                .await?
        });
        Ok(address.flatten())
    }

    /// The addresses a question goes to: those of enabled approvers whose
    /// scope covers it and who did not ask it, with their approver; by
    /// approver.
    pub(crate) async fn email_recipients(
        &self,
        question: &Question,
    ) -> Result<Vec<(String, Approver)>, StoreError> {
        let sql = "SELECT name, email FROM crew_approvers \
                   WHERE email IS NOT NULL AND disabled_at IS NULL ORDER BY name";
        let rows: Vec<(String, String)> =
            on_pool!(self, |pool| { sqlx::query_as(sql).fetch_all(pool).await? });
        let rows = rows.into_iter().map(|(name, address)| (address, name));
        self.who_may_answer(question, rows).await
    }
}

#[cfg(test)]
mod tests {
    use super::check_address;

    #[test]
    fn addresses_are_plain_and_single() {
        assert!(check_address("alice@example.com").is_ok());
        for bad in [
            "",
            "alice",
            "@example.com",
            "alice@",
            "a@b@c",
            "Alice <alice@example.com>",
            "alice@example.com, eve@example.com",
            "alice@example.com\r\nBcc: eve@example.com",
            "al ice@example.com",
        ] {
            assert!(check_address(bad).is_err(), "{bad:?}");
        }
        assert!(check_address(&format!("{}@example.com", "a".repeat(250))).is_err());
    }
}
