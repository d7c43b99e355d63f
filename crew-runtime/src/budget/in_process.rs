//! [`InProcessLedger`]: budgets counted in this process's memory.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use futures_util::future::BoxFuture;

use super::{
    Charge, Exceeded, Ledger, LedgerError, Reserved, Window, check_call, in_counter_order,
};

/// Where an [`InProcessLedger`] reads the time: ms since the Unix epoch.
type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// One counter: what each slice of its window holds.
struct Counter {
    window: Window,
    slices: BTreeMap<i64, u64>,
}

/// One reservation of a call, in one counter.
struct Held {
    counter: String,
    budget: String,
    slice: i64,
    amount: u64,
}

/// How often the ledger drops what no window reaches any more and the
/// reservations kept past [`CALL_KEPT`](super::CALL_KEPT), in ms.
const SWEEP_EVERY_MS: i64 = 60_000;

#[derive(Default)]
struct State {
    counters: HashMap<String, Counter>,
    /// The reservations not settled yet, by call, with when they were
    /// made.
    held: HashMap<String, (i64, Vec<Held>)>,
    /// When the next sweep is due (ms on the ledger's clock).
    next_sweep: i64,
}

impl State {
    /// Drops the counters whose window holds nothing any more (a user's
    /// yesterday, a rolling window gone quiet) and the reservations never
    /// settled within [`CALL_KEPT`](super::CALL_KEPT) (they stay counted
    /// in full): a long-lived process keeps only what can still count.
    fn sweep(&mut self, now: i64) {
        self.counters.retain(|_, counter| {
            let (first, _) = counter.window.slices(now);
            counter.window == Window::Lifetime
                || counter
                    .slices
                    .last_key_value()
                    .is_some_and(|(newest, _)| *newest >= first)
        });
        let kept = i64::try_from(super::CALL_KEPT.as_millis()).unwrap_or(i64::MAX);
        let oldest = now.saturating_sub(kept);
        self.held.retain(|_, (at, _)| *at >= oldest);
        self.next_sweep = now.saturating_add(SWEEP_EVERY_MS);
    }
}

/// Budgets counted in this process: exact for one process, and nothing
/// shared with another (use the store's ledger for replicas). A call's
/// reservation is forgotten once settled, and a call
/// [counted](Ledger::count) is not kept at all.
///
/// ```
/// use crew_runtime::budget::{Charge, InProcessLedger, Ledger};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), crew_runtime::budget::LedgerError> {
/// let ledger = InProcessLedger::new();
/// let model_calls = Charge::new("model-calls", "crew:support", 100, 1);
/// ledger.reserve("turn-1", &[model_calls.clone()]).await?;
/// assert_eq!(ledger.used(&model_calls).await?, 1);
/// # Ok(())
/// # }
/// ```
pub struct InProcessLedger {
    state: Mutex<State>,
    clock: Clock,
}

impl fmt::Debug for InProcessLedger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("InProcessLedger")
            .field("counters", &state.counters.len())
            .field("calls_held", &state.held.len())
            .finish()
    }
}

impl Default for InProcessLedger {
    fn default() -> Self {
        InProcessLedger::new()
    }
}

/// The system's clock, in ms since the Unix epoch.
pub(super) fn system_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
        })
}

impl InProcessLedger {
    /// A ledger on the system's clock, with nothing counted.
    pub fn new() -> Self {
        InProcessLedger::with_clock(Arc::new(system_ms))
    }

    /// A ledger reading the time (ms since the Unix epoch) from `clock`:
    /// for tests of windows that must not wait.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicI64, Ordering};
    /// use crew_runtime::budget::{Charge, InProcessLedger, Ledger, Window};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), crew_runtime::budget::LedgerError> {
    /// let now = Arc::new(AtomicI64::new(0));
    /// let clock = Arc::clone(&now);
    /// let ledger = InProcessLedger::with_clock(Arc::new(move || clock.load(Ordering::Relaxed)));
    /// let daily = Charge::new("calls", "user:carol", 1, 1).window(Window::DayUtc);
    /// ledger.reserve("a", &[daily.clone()]).await?;
    /// assert!(ledger.reserve("b", &[daily.clone()]).await.is_err());
    /// now.store(86_400_000, Ordering::Relaxed); // the next day
    /// ledger.reserve("b", &[daily]).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_clock(clock: Arc<dyn Fn() -> i64 + Send + Sync>) -> Self {
        InProcessLedger {
            state: Mutex::new(State::default()),
            clock,
        }
    }

    /// Admits `call` if every charge fits, and counts them; keeps the
    /// reservation for a settlement when `hold`.
    fn reserve_now(
        &self,
        call: &str,
        charges: &[Charge],
        hold: bool,
    ) -> Result<Reserved, LedgerError> {
        check_call(call)?;
        let ordered = in_counter_order(charges)?;
        let now = (self.clock)();
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if now >= state.next_sweep {
            state.sweep(now);
        }
        if state.held.contains_key(call) {
            return Ok(Reserved::Before);
        }
        // Every charge checked before any is counted: all or none.
        for charge in &ordered {
            let used = window_sum(state.counters.get(charge.counter()), charge.window, now);
            if used.saturating_add(charge.amount) > charge.limit {
                return Err(LedgerError::Exceeded(Exceeded {
                    budget: charge.budget.clone(),
                    key: charge.key.clone(),
                    limit: charge.limit,
                    used,
                    asked: charge.amount,
                }));
            }
        }
        let mut held = Vec::with_capacity(if hold { ordered.len() } else { 0 });
        for charge in ordered {
            let (first, slice) = charge.window.slices(now);
            if !state.counters.contains_key(charge.counter()) {
                state.counters.insert(
                    charge.counter().to_owned(),
                    Counter {
                        window: charge.window,
                        slices: BTreeMap::new(),
                    },
                );
            }
            if let Some(counter) = state.counters.get_mut(charge.counter()) {
                // What no window reaches any more is dropped.
                while counter
                    .slices
                    .first_key_value()
                    .is_some_and(|(oldest, _)| *oldest < first)
                {
                    counter.slices.pop_first();
                }
                let slot = counter.slices.entry(slice).or_insert(0);
                *slot = slot.saturating_add(charge.amount);
            }
            if hold {
                held.push(Held {
                    counter: charge.counter().to_owned(),
                    budget: charge.budget.clone(),
                    slice,
                    amount: charge.amount,
                });
            }
        }
        if hold {
            state.held.insert(call.to_owned(), (now, held));
        }
        Ok(Reserved::New)
    }

    fn settle_now(&self, call: &str, costs: &[(&str, u64)]) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let Some((_, held)) = state.held.remove(call) else {
            return;
        };
        for held in held {
            let Some(&(_, cost)) = costs.iter().find(|(budget, _)| *budget == held.budget) else {
                continue;
            };
            if let Some(slot) = state
                .counters
                .get_mut(&held.counter)
                .and_then(|counter| counter.slices.get_mut(&held.slice))
            {
                *slot = slot.saturating_sub(held.amount).saturating_add(cost);
            }
        }
    }
}

/// What `counter` holds in `window` at `now`.
fn window_sum(counter: Option<&Counter>, window: Window, now: i64) -> u64 {
    let (first, last) = window.slices(now);
    counter.map_or(0, |counter| {
        counter
            .slices
            .range(first..=last)
            .fold(0_u64, |sum, (_, amount)| sum.saturating_add(*amount))
    })
}

impl Ledger for InProcessLedger {
    fn reserve<'a>(
        &'a self,
        call: &'a str,
        charges: &'a [Charge],
    ) -> BoxFuture<'a, Result<Reserved, LedgerError>> {
        let reserved = self.reserve_now(call, charges, true);
        Box::pin(async move { reserved })
    }

    /// Counts without keeping the call: a call counted again (by its id)
    /// is counted again; the crew's hooks count each call once.
    fn count<'a>(
        &'a self,
        call: &'a str,
        charges: &'a [Charge],
    ) -> BoxFuture<'a, Result<Reserved, LedgerError>> {
        let counted = self.reserve_now(call, charges, false);
        Box::pin(async move { counted })
    }

    fn settle<'a>(
        &'a self,
        call: &'a str,
        costs: &'a [(&'a str, u64)],
    ) -> BoxFuture<'a, Result<(), LedgerError>> {
        self.settle_now(call, costs);
        Box::pin(async { Ok(()) })
    }

    fn forget<'a>(&'a self, charges: &'a [Charge]) -> BoxFuture<'a, Result<(), LedgerError>> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        for charge in charges {
            state.counters.remove(charge.counter());
        }
        Box::pin(async { Ok(()) })
    }

    fn used<'a>(&'a self, charge: &'a Charge) -> BoxFuture<'a, Result<u64, LedgerError>> {
        let now = (self.clock)();
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let used = window_sum(state.counters.get(charge.counter()), charge.window, now);
        Box::pin(async move { Ok(used) })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicI64, Ordering};
    use std::time::Duration;

    use super::*;

    const DAY: i64 = 86_400_000;

    /// What the ledger holds: counters, and calls held for a settlement.
    fn held(ledger: &InProcessLedger) -> (usize, usize) {
        let state = ledger.state.lock().unwrap_or_else(PoisonError::into_inner);
        (state.counters.len(), state.held.len())
    }

    #[test]
    fn a_budget_ledger_in_process_drops_what_no_window_reaches_and_calls_kept_a_week() {
        let now = Arc::new(AtomicI64::new(10 * DAY));
        let clock = Arc::clone(&now);
        let ledger = InProcessLedger::with_clock(Arc::new(move || clock.load(Ordering::Relaxed)));
        let daily = Charge::new("daily", "user:carol", 10, 1).window(Window::DayUtc);
        let minute = Charge::new("minute", "user:carol", 10, 1)
            .window(Window::Rolling(Duration::from_secs(60)));
        let life = Charge::new("life", "crew:support", 10, 1);
        let reserve = |call: &str, charges: &[Charge]| {
            futures_executor::block_on(ledger.reserve(call, charges)).expect("admitted")
        };
        reserve("a", &[daily.clone(), minute.clone(), life.clone()]);
        assert_eq!(held(&ledger), (3, 1));
        // Within their windows: all kept.
        now.fetch_add(30_000, Ordering::Relaxed);
        reserve("b", std::slice::from_ref(&life));
        assert_eq!(held(&ledger), (3, 2));
        // The next day: yesterday's counter and the quiet minute's go; the
        // lifetime stays, and so do the calls held (less than a week).
        now.store(11 * DAY, Ordering::Relaxed);
        reserve("c", std::slice::from_ref(&life));
        assert_eq!(held(&ledger), (1, 3));
        assert_eq!(
            futures_executor::block_on(ledger.used(&life)).expect("reads"),
            3
        );
        // A week on: the calls never settled are let go (their amounts
        // stay counted).
        now.store(18 * DAY + 1, Ordering::Relaxed);
        reserve("d", std::slice::from_ref(&life));
        assert_eq!(held(&ledger), (1, 1), "only the newest call is held");
        assert_eq!(
            futures_executor::block_on(ledger.used(&life)).expect("reads"),
            4
        );
        // Forgotten: gone.
        futures_executor::block_on(ledger.forget(std::slice::from_ref(&life))).expect("forgets");
        assert_eq!(held(&ledger).0, 0);
    }
}
