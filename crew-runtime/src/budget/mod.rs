//! Budgets' counters (SPEC §15, feature `budget`): reserve before a call,
//! settle after, in every budget covering the call or in none.
//!
//! A [`Ledger`] keeps the figures. [`InProcessLedger`] counts for one
//! process; with the `store` features, [`Store`](crate::store::Store) is a
//! ledger too, on PostgreSQL (shared by every replica) or SQLite (one
//! machine), so that N replicas never spend N times a limit.
//!
//! A [`Charge`] names a budget's counter (the budget, and what it is
//! counted per: a kickoff, a crew, a user, a tenant), its [`Window`], its
//! limit and what the call may cost at most. [`Ledger::reserve`] admits
//! the call only if every charge fits, and then counts all of them at
//! once; [`Ledger::settle`] replaces the reservations by what the call
//! really cost. A reservation never settled (its process died) stays
//! charged in full: the call may have been billed. Reservations are keyed
//! by the call (its idempotency key in a durable kickoff): reserving again
//! for the same call counts nothing twice.
//!
//! ```
//! use crew_runtime::budget::{Charge, InProcessLedger, Ledger, LedgerError, Window};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), LedgerError> {
//! let ledger = InProcessLedger::new();
//! // Two tool calls a day for carol; each reserves one.
//! let calls = |call| Charge::new("tool-calls", "user:carol", 2, 1).window(Window::DayUtc);
//! ledger.reserve("call_1", &[calls("call_1")]).await?;
//! ledger.reserve("call_2", &[calls("call_2")]).await?;
//! let refused = ledger.reserve("call_3", &[calls("call_3")]).await.unwrap_err();
//! assert!(matches!(refused, LedgerError::Exceeded(ref over) if over.used == 2 && over.limit == 2));
//! // The same call again is not counted twice.
//! ledger.reserve("call_2", &[calls("call_2")]).await?;
//! # Ok(())
//! # }
//! ```

mod crew;
mod data;
mod in_process;
mod prices;
#[cfg(feature = "redis")]
mod redis_ledger;

use std::fmt;
use std::time::Duration;

use futures_util::future::BoxFuture;

pub(crate) use crew::at_build;
pub use crew::{BUDGET_HOOK_NAME, Budget, BudgetError, BudgetRefusedEvent, Measure, Per};
pub use data::BudgetsFileError;
pub use in_process::InProcessLedger;
pub use prices::{Price, Prices};
#[cfg(feature = "redis")]
pub use redis_ledger::RedisLedger;

/// Over what time a budget counts.
///
/// ```
/// use std::time::Duration;
/// use crew_runtime::budget::Window;
///
/// let hourly = Window::Rolling(Duration::from_secs(3_600));
/// assert_eq!(hourly.to_string(), "the last 3600 s");
/// assert_eq!(Window::DayUtc.to_string(), "the calendar day (UTC)");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Window {
    /// Everything ever counted (a kickoff's life, for a per-kickoff key).
    Lifetime,
    /// The last so long, counted in sixty slices of it: a call is
    /// admitted while what the slices overlapping the window hold, plus
    /// the call, fits. The oldest slice counts whole, so a budget may
    /// refuse up to one slice early, never admit late.
    Rolling(Duration),
    /// The calendar day, in UTC: each day starts at zero.
    DayUtc,
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Window::Lifetime => f.write_str("all time"),
            Window::Rolling(length) => write!(f, "the last {} s", length.as_secs()),
            Window::DayUtc => f.write_str("the calendar day (UTC)"),
        }
    }
}

/// Milliseconds in a day.
const DAY_MS: i64 = 86_400_000;

/// The slices a rolling window is counted in.
const SLICES: i64 = 60;

impl Window {
    /// The slices (numbers) whose sum is what the window holds at `now`
    /// (ms since the Unix epoch), oldest first, and the one a call now
    /// is counted in (the last).
    pub(crate) fn slices(self, now: i64) -> (i64, i64) {
        match self {
            Window::Lifetime => (0, 0),
            Window::DayUtc => {
                let day = now.div_euclid(DAY_MS);
                (day, day)
            }
            Window::Rolling(length) => {
                let length = i64::try_from(length.as_millis()).unwrap_or(i64::MAX).max(1);
                let slice = (length / SLICES).max(1);
                (
                    now.saturating_sub(length).div_euclid(slice),
                    now.div_euclid(slice),
                )
            }
        }
    }

    /// How long after its counts were lost a counter of this window holds
    /// none of them again, in ms: a rolling window's length and one slice
    /// (its first slice may reach that far back); `Some(0)` for a
    /// calendar day (from the next day on); `None` for a lifetime.
    #[cfg_attr(
        not(feature = "redis"),
        allow(dead_code, reason = "read by the Redis ledger only")
    )]
    pub(crate) fn recovers_after_ms(self) -> Option<i64> {
        match self {
            Window::Lifetime => None,
            Window::DayUtc => Some(0),
            Window::Rolling(length) => {
                let length = i64::try_from(length.as_millis()).unwrap_or(i64::MAX).max(1);
                Some(length.saturating_add((length / SLICES).max(1)))
            }
        }
    }

    /// A short name of the window, part of the counters' keys: a budget
    /// whose window changes counts afresh.
    pub(crate) fn tag(self) -> String {
        match self {
            Window::Lifetime => "life".to_owned(),
            Window::DayUtc => "day".to_owned(),
            Window::Rolling(length) => format!("roll{}", length.as_millis()),
        }
    }
}

/// What one call may cost in one budget: the counter (budget and key),
/// its window and limit, and the amount to reserve (an upper bound).
///
/// ```
/// use std::time::Duration;
/// use crew_runtime::budget::{Charge, Window};
///
/// // At most 100 000 tokens an hour per kickoff; this call may take 4 096.
/// let charge = Charge::new("tokens", "kickoff:4f1c", 100_000, 4_096)
///     .window(Window::Rolling(Duration::from_secs(3_600)));
/// assert_eq!(charge.budget(), "tokens");
/// assert_eq!(charge.amount(), 4_096);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Charge {
    budget: String,
    key: String,
    window: Window,
    limit: u64,
    amount: u64,
    /// The counter's name in a ledger (see [`Charge::counter`]).
    counter: String,
}

impl Charge {
    /// A charge of `amount` against budget `budget`'s counter for `key`
    /// (`user:carol`, `kickoff:…`: what the budget counts per), whose
    /// limit is `limit`, over its lifetime (see [`Charge::window`]).
    pub fn new(budget: impl Into<String>, key: impl Into<String>, limit: u64, amount: u64) -> Self {
        Charge::over(budget.into(), key.into(), Window::Lifetime, limit, amount)
    }

    /// A charge over `window` (its counter's name made once).
    pub(crate) fn over(
        budget: String,
        key: String,
        window: Window,
        limit: u64,
        amount: u64,
    ) -> Self {
        let counter = counter_name(&budget, &key, window);
        Charge {
            budget,
            key,
            window,
            limit,
            amount,
            counter,
        }
    }

    /// Counts over `window` instead of the lifetime.
    ///
    /// ```
    /// use crew_runtime::budget::{Charge, Window};
    /// let charge = Charge::new("spend", "tenant:acme", 50_000_000, 12_000).window(Window::DayUtc);
    /// assert_eq!(charge.window_of(), Window::DayUtc);
    /// ```
    pub fn window(mut self, window: Window) -> Self {
        self.window = window;
        self.counter = counter_name(&self.budget, &self.key, window);
        self
    }

    /// The budget's name.
    pub fn budget(&self) -> &str {
        &self.budget
    }

    /// What the budget counts per (`user:carol`).
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The window counted over.
    pub fn window_of(&self) -> Window {
        self.window
    }

    /// The limit.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The amount reserved.
    pub fn amount(&self) -> u64 {
        self.amount
    }

    /// The counter's name in a ledger: budget, key and window (each part
    /// escaped, so no two charges share a counter by accident).
    pub(crate) fn counter(&self) -> &str {
        &self.counter
    }
}

/// The name of budget `budget`'s counter for `key` over `window`.
fn counter_name(budget: &str, key: &str, window: Window) -> String {
    let escape = |part: &str| part.replace('\\', "\\\\").replace('|', "\\|");
    format!("{}|{}|{}", escape(budget), escape(key), window.tag())
}

/// A budget that would be exceeded: the call was not admitted, and
/// nothing was reserved in any budget.
///
/// ```
/// use crew_runtime::budget::{Charge, InProcessLedger, Ledger, LedgerError};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let ledger = InProcessLedger::new();
/// let spend = |amount| Charge::new("spend", "user:carol", 10, amount);
/// ledger.reserve("a", &[spend(9)]).await.expect("fits");
/// let Err(LedgerError::Exceeded(over)) = ledger.reserve("b", &[spend(4)]).await else {
///     panic!("refused");
/// };
/// assert_eq!((over.used, over.limit, over.asked), (9, 10, 4));
/// assert_eq!(over.to_string(), "budget `spend` (user:carol) would be exceeded: 9 of 10 used, the call may take 4");
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Exceeded {
    /// The budget.
    pub budget: String,
    /// What it counts per.
    pub key: String,
    /// Its limit.
    pub limit: u64,
    /// What its window holds now (settled and reserved).
    pub used: u64,
    /// What the call would have reserved.
    pub asked: u64,
}

impl fmt::Display for Exceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "budget `{}` ({}) would be exceeded: {} of {} used, the call may take {}",
            self.budget, self.key, self.used, self.limit, self.asked
        )
    }
}

/// Why a ledger did not admit or settle a call.
///
/// ```
/// use crew_runtime::budget::LedgerError;
/// let error = LedgerError::Unavailable("connection refused".into());
/// assert!(error.to_string().contains("cannot be reached"));
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum LedgerError {
    /// A budget would be exceeded (nothing was reserved).
    #[error("{0}")]
    Exceeded(Exceeded),
    /// The counters cannot be read or written now: the call is refused
    /// unless its budgets allow calls while their counters are down.
    #[error("the budgets' counters cannot be reached: {0}")]
    Unavailable(String),
    /// What was asked cannot be counted (a call id that is empty, say).
    #[error("{0}")]
    Invalid(String),
}

/// What [`Ledger::reserve`] did.
///
/// ```
/// use crew_runtime::budget::Reserved;
/// assert_ne!(Reserved::New, Reserved::Before);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reserved {
    /// The call is admitted and its charges reserved now.
    New,
    /// The call had reserved before (a resumed or re-checked call): it is
    /// admitted, and nothing more was counted.
    Before,
}

/// Where budgets' figures are kept: reserve before a call, settle after.
///
/// ```
/// use crew_runtime::budget::{Charge, InProcessLedger, Ledger};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), crew_runtime::budget::LedgerError> {
/// let ledger = InProcessLedger::new();
/// let tokens = Charge::new("tokens", "kickoff:1", 10_000, 6_000);
/// ledger.reserve("turn-1", &[tokens.clone()]).await?;
/// // The turn took 1 200 tokens: 8 800 are left.
/// ledger.settle("turn-1", &[("tokens", 1_200)]).await?;
/// assert_eq!(ledger.used(&tokens).await?, 1_200);
/// # Ok(())
/// # }
/// ```
pub trait Ledger: Send + Sync {
    /// Admits call `call` only if each of `charges` fits its limit, and
    /// then reserves all of them at once; otherwise reserves nothing and
    /// says which budget would be exceeded. A call that reserved before
    /// is admitted again and counted once.
    fn reserve<'a>(
        &'a self,
        call: &'a str,
        charges: &'a [Charge],
    ) -> BoxFuture<'a, Result<Reserved, LedgerError>>;

    /// Admits call `call` as [`reserve`](Ledger::reserve) does, with each
    /// charge's amount as what the call costs: nothing is left to settle
    /// (a call counted once, as a tool call is). A ledger may then keep
    /// less of the call; by default, a reservation.
    ///
    /// ```
    /// use crew_runtime::budget::{Charge, InProcessLedger, Ledger};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), crew_runtime::budget::LedgerError> {
    /// let ledger = InProcessLedger::new();
    /// let calls = Charge::new("tool-calls", "kickoff:1", 1, 1);
    /// ledger.count("call-1", &[calls.clone()]).await?;
    /// assert!(ledger.count("call-2", &[calls]).await.is_err());
    /// # Ok(())
    /// # }
    /// ```
    fn count<'a>(
        &'a self,
        call: &'a str,
        charges: &'a [Charge],
    ) -> BoxFuture<'a, Result<Reserved, LedgerError>> {
        self.reserve(call, charges)
    }

    /// Replaces call `call`'s reservations by what it cost, by budget
    /// name (a budget not named stays charged what it reserved). A call
    /// settled already, or that reserved nothing, changes nothing.
    fn settle<'a>(
        &'a self,
        call: &'a str,
        costs: &'a [(&'a str, u64)],
    ) -> BoxFuture<'a, Result<(), LedgerError>>;

    /// What `charge`'s counter holds now in its window (settled and
    /// reserved), without reserving.
    fn used<'a>(&'a self, charge: &'a Charge) -> BoxFuture<'a, Result<u64, LedgerError>>;

    /// Drops the counters of `charges` (their amounts do not matter): a
    /// kickoff's own counters once it ended, which no call counts in
    /// again. The crew's budgets do so for their per-kickoff counters at
    /// `EXECUTION_END`. By default, nothing is dropped.
    ///
    /// ```
    /// use crew_runtime::budget::{Charge, InProcessLedger, Ledger};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), crew_runtime::budget::LedgerError> {
    /// let ledger = InProcessLedger::new();
    /// let turns = Charge::new("turns", "kickoff:1", 10, 1);
    /// ledger.count("turn-1", &[turns.clone()]).await?;
    /// ledger.forget(&[turns.clone()]).await?;
    /// assert_eq!(ledger.used(&turns).await?, 0);
    /// # Ok(())
    /// # }
    /// ```
    fn forget<'a>(&'a self, charges: &'a [Charge]) -> BoxFuture<'a, Result<(), LedgerError>> {
        let _ = charges;
        Box::pin(async { Ok(()) })
    }
}

/// How long a ledger keeps a call's reservations for "reserved before"
/// and its settlement (a resumed call, a late answer): a week. Its
/// amounts stay in the counters.
pub(crate) const CALL_KEPT: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3_600);

/// Refuses an empty call id: it would key every call's reservations
/// together.
pub(crate) fn check_call(call: &str) -> Result<(), LedgerError> {
    if call.is_empty() {
        return Err(LedgerError::Invalid(
            "a reservation needs the call's id (or idempotency key); it is empty".to_owned(),
        ));
    }
    Ok(())
}

/// The charges in the order their counters are taken: by counter, so
/// that two calls taking the same counters never wait for each other in a
/// circle. Two charges on one counter are refused.
pub(crate) fn in_counter_order(charges: &[Charge]) -> Result<Vec<&Charge>, LedgerError> {
    let mut ordered: Vec<&Charge> = charges.iter().collect();
    ordered.sort_by(|a, b| a.counter.cmp(&b.counter));
    if let Some(pair) = ordered
        .windows(2)
        .find(|pair| pair[0].counter == pair[1].counter)
    {
        return Err(LedgerError::Invalid(format!(
            "budget `{}` ({}) is charged twice for one call",
            pair[0].budget, pair[0].key
        )));
    }
    Ok(ordered)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rolling_window_counts_every_slice_it_overlaps() {
        let hour = Window::Rolling(Duration::from_secs(3_600));
        // Slices of a minute: at 10:30:30 the window reaches back to
        // 09:30:30, in the slice of 09:30.
        let now = (10 * 3_600 + 30 * 60 + 30) * 1_000;
        let (first, last) = hour.slices(now);
        assert_eq!((first, last), (9 * 60 + 30, 10 * 60 + 30));
        assert_eq!(Window::DayUtc.slices(DAY_MS * 3 + 5), (3, 3));
        // After a loss: a rolling window's length and one slice.
        assert_eq!(Window::Lifetime.recovers_after_ms(), None);
        assert_eq!(Window::DayUtc.recovers_after_ms(), Some(0));
        assert_eq!(
            Window::Rolling(Duration::from_secs(60)).recovers_after_ms(),
            Some(61_000)
        );
        assert_eq!(
            Window::Rolling(Duration::from_millis(1)).recovers_after_ms(),
            Some(2)
        );
        assert_eq!(Window::Lifetime.slices(now), (0, 0));
    }

    #[test]
    fn counters_of_different_budgets_keys_or_windows_never_meet() {
        let a = Charge::new("a|b", "c", 1, 1).counter().to_owned();
        let b = Charge::new("a", "b|c", 1, 1).counter().to_owned();
        assert_ne!(a, b);
        let day = Charge::new("a", "b", 1, 1)
            .window(Window::DayUtc)
            .counter()
            .to_owned();
        assert_ne!(day, Charge::new("a", "b", 1, 1).counter());
    }
}
