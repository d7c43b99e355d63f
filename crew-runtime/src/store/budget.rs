//! The store as a budgets' [`Ledger`] (SPEC §15): counters every replica
//! on the store shares. On PostgreSQL a reservation is one conditional
//! upsert per budget, in one transaction for all the budgets of a call;
//! SQLite serves the processes of one machine.
//!
//! What is kept: a counter's first row in a new slice drops its slices no
//! window reaches any more; a kickoff's own counters are dropped at its
//! end ([`Ledger::forget`]); reservations are kept a week, then purged in
//! the background ([`Store::purge_budget_reservations`]).

use futures_util::future::BoxFuture;

use super::{Store, StoreError, on_pool};
use crate::budget::{
    Charge, Exceeded, Ledger, LedgerError, Reserved, check_call, in_counter_order,
};

/// How often a store value purges budgets' old reservations, in ms.
const PURGE_EVERY_MS: i64 = 60_000;

/// A figure as the database keeps it (BIGINT).
fn stored(amount: u64) -> i64 {
    i64::try_from(amount).unwrap_or(i64::MAX)
}

/// A figure as read back.
fn figure(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

fn unavailable(error: StoreError) -> LedgerError {
    LedgerError::Unavailable(error.to_string())
}

/// How a reservation went, inside its transaction.
enum Outcome {
    Reserved,
    Before,
    /// The charge (its index in counter order) that does not fit.
    Over(usize),
}

impl Store {
    /// Admits `call` if every charge fits, and counts them: kept for a
    /// settlement when `hold`, else settled at once at their amounts.
    async fn reserve_budgets(
        &self,
        call: &str,
        charges: &[Charge],
        hold: bool,
    ) -> Result<Reserved, LedgerError> {
        check_call(call)?;
        let ordered = in_counter_order(charges)?;
        if ordered.is_empty() {
            return Ok(Reserved::New);
        }
        // A call counted for good is kept settled at its amount.
        let settled_at = (!hold).then_some(self.now());
        let now = self.now();
        // Each charge's reservation first: a call that reserved before (on
        // any replica, or a twin still reserving, whose row this waits
        // for) finds its row and counts nothing.
        let keep = "INSERT INTO crew_budget_reservations (call_id, counter, slice, budget, amount, \
                    created_at, cost, settled_at) VALUES ($1, $2, $3, $4, $5, $6, \
                    CASE WHEN $7 IS NULL THEN NULL ELSE $5 END, $7) \
                    ON CONFLICT (call_id, counter) DO NOTHING";
        // Counted only if the slice then holds at most the limit (or, for
        // a rolling window, the slices it overlaps: see below).
        let count = "INSERT INTO crew_budget_counters (counter, slice, used, updated_at) \
                     VALUES ($1, $2, $3, $5) ON CONFLICT (counter, slice) DO UPDATE \
                     SET used = crew_budget_counters.used + excluded.used, updated_at = $5 \
                     WHERE crew_budget_counters.used + excluded.used <= $4 RETURNING used";
        // A rolling window is counted in slices: the counter's row at slice
        // -1 is taken first (its lock on PostgreSQL; SQLite has one writer),
        // so the sum read next holds until this transaction ends.
        let take = "INSERT INTO crew_budget_counters (counter, slice, used, updated_at) \
                    VALUES ($1, -1, 0, $2) ON CONFLICT (counter, slice) DO UPDATE \
                    SET updated_at = $2";
        let others = "SELECT CAST(COALESCE(SUM(used), 0) AS BIGINT) FROM crew_budget_counters \
                      WHERE counter = $1 AND slice >= $2 AND slice < $3";
        // A counter's first row in a new slice drops its slices that no
        // window reaches any more (not a rolling window's row -1).
        let gone =
            "DELETE FROM crew_budget_counters WHERE counter = $1 AND slice >= 0 AND slice < $2";
        self.file_still_there().map_err(unavailable)?;
        let outcome: Result<Outcome, StoreError> = on_pool!(self, |pool| {
            async {
                let mut transaction = pool.begin().await?;
                let _turn = self.write_turn().await;
                for (index, charge) in ordered.iter().enumerate() {
                    let counter = charge.counter();
                    let (first, slice) = charge.window_of().slices(now);
                    let held = sqlx::query(keep)
                        .bind(call)
                        .bind(counter)
                        .bind(slice)
                        .bind(charge.budget())
                        .bind(stored(charge.amount()))
                        .bind(now)
                        .bind(settled_at)
                        .execute(&mut *transaction)
                        .await?;
                    if held.rows_affected() == 0 {
                        if index == 0 {
                            transaction.rollback().await?;
                            return Ok(Outcome::Before);
                        }
                        // Part of the call's charges reserved before, part
                        // not: its budgets changed in between. What it
                        // reserved then stands; the rest is reserved now.
                        continue;
                    }
                    let mut limit = stored(charge.limit());
                    if first < slice {
                        sqlx::query(take)
                            .bind(counter)
                            .bind(now)
                            .execute(&mut *transaction)
                            .await?;
                        let before: i64 = sqlx::query_scalar(others)
                            .bind(counter)
                            .bind(first)
                            .bind(slice)
                            .fetch_one(&mut *transaction)
                            .await?;
                        limit = limit.saturating_sub(before);
                    }
                    if stored(charge.amount()) > limit {
                        transaction.rollback().await?;
                        return Ok(Outcome::Over(index));
                    }
                    let counted: Option<i64> = sqlx::query_scalar(count)
                        .bind(counter)
                        .bind(slice)
                        .bind(stored(charge.amount()))
                        .bind(limit)
                        .bind(now)
                        .fetch_optional(&mut *transaction)
                        .await?;
                    let Some(counted) = counted else {
                        transaction.rollback().await?;
                        return Ok(Outcome::Over(index));
                    };
                    if counted == stored(charge.amount()) && slice > 0 {
                        sqlx::query(gone)
                            .bind(counter)
                            .bind(first)
                            .execute(&mut *transaction)
                            .await?;
                    }
                }
                transaction.commit().await?;
                Ok(Outcome::Reserved)
            }
            .await
        });
        match outcome.map_err(unavailable)? {
            Outcome::Reserved => {
                self.purge_budgets_when_due();
                Ok(Reserved::New)
            }
            Outcome::Before => Ok(Reserved::Before),
            Outcome::Over(index) => {
                let charge = ordered[index];
                let used = self.budget_used(charge).await?;
                Err(LedgerError::Exceeded(Exceeded {
                    budget: charge.budget().to_owned(),
                    key: charge.key().to_owned(),
                    limit: charge.limit(),
                    used,
                    asked: charge.amount(),
                }))
            }
        }
    }

    async fn settle_budgets(&self, call: &str, costs: &[(&str, u64)]) -> Result<(), LedgerError> {
        let now = self.now();
        // Claimed by the update: a call settled twice (on two replicas)
        // changes the counters once.
        let claim = "UPDATE crew_budget_reservations SET settled_at = $2, cost = amount \
                     WHERE call_id = $1 AND settled_at IS NULL \
                     RETURNING counter, slice, budget, amount";
        let cost = "UPDATE crew_budget_reservations SET cost = $3 \
                    WHERE call_id = $1 AND counter = $2";
        let recount = "UPDATE crew_budget_counters SET used = used - $3 + $4, updated_at = $5 \
                       WHERE counter = $1 AND slice = $2";
        self.file_still_there().map_err(unavailable)?;
        let settled: Result<(), StoreError> = on_pool!(self, |pool| {
            async {
                let mut transaction = pool.begin().await?;
                let _turn = self.write_turn().await;
                let held: Vec<(String, i64, String, i64)> = sqlx::query_as(claim)
                    .bind(call)
                    .bind(now)
                    .fetch_all(&mut *transaction)
                    .await?;
                for (counter, slice, budget, amount) in held {
                    let Some(&(_, paid)) = costs.iter().find(|(named, _)| *named == budget) else {
                        continue;
                    };
                    sqlx::query(cost)
                        .bind(call)
                        .bind(&counter)
                        .bind(stored(paid))
                        .execute(&mut *transaction)
                        .await?;
                    sqlx::query(recount)
                        .bind(&counter)
                        .bind(slice)
                        .bind(amount)
                        .bind(stored(paid))
                        .bind(now)
                        .execute(&mut *transaction)
                        .await?;
                }
                transaction.commit().await?;
                Ok(())
            }
            .await
        });
        settled.map_err(unavailable)
    }

    /// Purges budgets' reservations older than a week, in the background,
    /// once a minute at most per store value.
    fn purge_budgets_when_due(&self) {
        use std::sync::atomic::Ordering;
        let now = self.now();
        let due = &self.inner.budget_purge_at;
        let at = due.load(Ordering::Relaxed);
        if now < at
            || due
                .compare_exchange(
                    at,
                    now.saturating_add(PURGE_EVERY_MS),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_err()
        {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let store = self.clone();
        runtime.spawn(async move {
            if let Err(error) = store.purge_budget_reservations().await {
                tracing::warn!(target: "crew_runtime::budget", %error, "budgets' old reservations could not be purged: tried again in a minute");
            }
        });
    }

    /// Deletes budgets' reservations made more than a week ago (on the
    /// store's clock), a batch at a time; the number deleted. Their
    /// amounts stay in the counters: what goes is only what told a call
    /// that reserved before ("reserved before") and a late settlement.
    /// The store's ledger runs it in the background once a minute; an
    /// operator may run it at will.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = crew_runtime::store::Store::connect("postgres://crew@db/crew").await?;
    /// let purged = store.purge_budget_reservations().await?;
    /// println!("{purged} old reservations purged");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn purge_budget_reservations(&self) -> Result<u64, StoreError> {
        let kept = i64::try_from(crate::budget::CALL_KEPT.as_millis()).unwrap_or(i64::MAX);
        let before = self.now().saturating_sub(kept);
        let batch = "DELETE FROM crew_budget_reservations WHERE (call_id, counter) IN \
                     (SELECT call_id, counter FROM crew_budget_reservations \
                      WHERE created_at < $1 LIMIT 5000)";
        self.file_still_there()?;
        let mut purged = 0;
        loop {
            let deleted: Result<u64, StoreError> = on_pool!(self, |pool| {
                async {
                    // A connection first, then the write turn, as every
                    // writer takes them (the other way round waits in a
                    // circle with writers holding connections).
                    let mut connection = pool.acquire().await?;
                    let _turn = self.write_turn().await;
                    Ok(sqlx::query(batch)
                        .bind(before)
                        .execute(&mut *connection)
                        .await?
                        .rows_affected())
                }
                .await
            });
            let deleted = deleted?;
            purged += deleted;
            if deleted < 5000 {
                return Ok(purged);
            }
        }
    }

    async fn forget_budgets(&self, charges: &[Charge]) -> Result<(), LedgerError> {
        if charges.is_empty() {
            return Ok(());
        }
        let sql = "DELETE FROM crew_budget_counters WHERE counter = $1";
        self.file_still_there().map_err(unavailable)?;
        let forgotten: Result<(), StoreError> = on_pool!(self, |pool| {
            async {
                let mut transaction = pool.begin().await?;
                let _turn = self.write_turn().await;
                for charge in charges {
                    sqlx::query(sql)
                        .bind(charge.counter())
                        .execute(&mut *transaction)
                        .await?;
                }
                transaction.commit().await?;
                Ok(())
            }
            .await
        });
        forgotten.map_err(unavailable)
    }

    async fn budget_used(&self, charge: &Charge) -> Result<u64, LedgerError> {
        let (first, last) = charge.window_of().slices(self.now());
        let sql = "SELECT CAST(COALESCE(SUM(used), 0) AS BIGINT) FROM crew_budget_counters \
                   WHERE counter = $1 AND slice >= $2 AND slice <= $3";
        let counter = charge.counter();
        let used: Result<i64, StoreError> = on_pool!(self, |pool| {
            sqlx::query_scalar(sql)
                .bind(counter)
                .bind(first)
                .bind(last)
                .fetch_one(pool)
                .await
                .map_err(StoreError::from)
        });
        used.map(figure).map_err(unavailable)
    }
}

/// The store keeps budgets' counters for every replica on it.
///
/// ```no_run
/// use crew_runtime::budget::{Charge, Ledger, Window};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let store = crew_runtime::store::Store::connect("postgres://crew@db/crew").await?;
/// let daily = Charge::new("tool-calls", "user:carol", 500, 1).window(Window::DayUtc);
/// store.reserve("call_7f2", &[daily]).await?;
/// store.settle("call_7f2", &[("tool-calls", 1)]).await?;
/// # Ok(())
/// # }
/// ```
impl Ledger for Store {
    fn reserve<'a>(
        &'a self,
        call: &'a str,
        charges: &'a [Charge],
    ) -> BoxFuture<'a, Result<Reserved, LedgerError>> {
        Box::pin(self.reserve_budgets(call, charges, true))
    }

    fn count<'a>(
        &'a self,
        call: &'a str,
        charges: &'a [Charge],
    ) -> BoxFuture<'a, Result<Reserved, LedgerError>> {
        Box::pin(self.reserve_budgets(call, charges, false))
    }

    fn settle<'a>(
        &'a self,
        call: &'a str,
        costs: &'a [(&'a str, u64)],
    ) -> BoxFuture<'a, Result<(), LedgerError>> {
        Box::pin(self.settle_budgets(call, costs))
    }

    fn used<'a>(&'a self, charge: &'a Charge) -> BoxFuture<'a, Result<u64, LedgerError>> {
        Box::pin(self.budget_used(charge))
    }

    /// Deletes the counters' rows; the reservations of their calls go
    /// with the week-old ones ([`Store::purge_budget_reservations`]).
    fn forget<'a>(&'a self, charges: &'a [Charge]) -> BoxFuture<'a, Result<(), LedgerError>> {
        Box::pin(self.forget_budgets(charges))
    }
}
