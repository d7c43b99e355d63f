//! Where a synchronous tool's body runs: on tokio's blocking pool, or in
//! place, on the task that awaits the call.
//!
//! Most tools people write are plain functions, and most of those return
//! in microseconds. Hopping to the blocking pool and back costs far more
//! than such a body, so a plain tool would cost many times an async one.
//! A body that takes long, though, must never hold a runtime worker: it
//! would stall the other calls of its turn, the timers, and on a
//! current-thread runtime everything.
//!
//! [`SyncPlacement::Adaptive`] (the default) decides from what the tool
//! did: each tool starts on the blocking pool; once its last few calls
//! there each took less than [`QUICK`], it runs in place; the first call in
//! place that overruns [`QUICK`] sends it back to the pool, where it must
//! prove itself quick again, for twice as many calls each time it
//! overran (up to a bound). A tool that is slow from its first call never
//! runs in place; one that turns slow after proving quick holds the
//! runtime thread for that one call (a synchronous body cannot be
//! preempted, and its timeout cannot fire meanwhile), then goes back to
//! the pool. A body that may block should say so with
//! [`SyncPlacement::BlockingPool`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// A call that takes less than this is quick: it may run in place.
pub(crate) const QUICK: Duration = Duration::from_micros(100);

/// Quick calls on the pool before a tool first runs in place.
const PROVEN: u32 = 4;

/// The most doublings of [`PROVEN`] after overruns (4 × 2⁸ = 1,024 calls).
const MAX_PENALTY: u32 = 8;

/// Where a synchronous tool's body runs (an async tool is always awaited
/// on the task making the call).
///
/// ```
/// use crew_runtime::{SyncPlacement, Tool};
/// use serde_json::json;
///
/// // Known to be quick: never leaves the calling task.
/// let add = Tool::dynamic("add", "Adds", json!({"type": "object"}), |args| {
///     Ok::<_, String>(json!(args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)))
/// })
/// .with_sync_placement(SyncPlacement::InPlace);
/// assert_eq!(add.sync_placement(), SyncPlacement::InPlace);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
#[non_exhaustive]
pub enum SyncPlacement {
    /// On the blocking pool until its calls prove quick (each under
    /// 100 µs), then in place, and back to the pool at the first call in
    /// place that overruns. The default.
    #[default]
    Adaptive,
    /// Always in place: for a body you know returns in microseconds. A
    /// slow one holds the runtime thread it runs on for as long as it
    /// takes, and no timeout can stop it. In place, the body runs inside
    /// the runtime: one that calls `Handle::block_on` (or a client that
    /// starts a runtime of its own) panics there, and belongs on the
    /// [`BlockingPool`](Self::BlockingPool).
    InPlace,
    /// Always on tokio's blocking pool: for a body that blocks (file or
    /// network I/O, a lock, heavy computation).
    BlockingPool,
}

/// What the adaptive placement knows of one tool: shared by every clone of
/// the tool, across crews and threads. Two relaxed counters; a lost update
/// between threads only moves a decision by a call.
#[derive(Debug, Default)]
pub(crate) struct PlacementRecord {
    /// Quick calls on the pool since the last overrun (saturates).
    quick_streak: AtomicU32,
    /// How many times the tool overran in place (saturates).
    overruns: AtomicU32,
}

impl PlacementRecord {
    fn required(&self) -> u32 {
        PROVEN << self.overruns.load(Ordering::Relaxed).min(MAX_PENALTY)
    }

    /// Whether the next call runs in place.
    pub(crate) fn in_place(&self) -> bool {
        self.quick_streak.load(Ordering::Relaxed) >= self.required()
    }

    /// A call on the pool took `took`.
    pub(crate) fn ran_on_pool(&self, took: Duration) {
        if took < QUICK {
            let streak = self.quick_streak.load(Ordering::Relaxed);
            if streak < self.required() {
                self.quick_streak.store(streak + 1, Ordering::Relaxed);
            }
        } else {
            self.quick_streak.store(0, Ordering::Relaxed);
        }
    }

    /// A call in place took `took`: past [`QUICK`], the tool goes back to
    /// the pool.
    pub(crate) fn ran_in_place(&self, took: Duration) {
        if took >= QUICK {
            self.overran();
        }
    }

    /// A call in place went wrong (overran, or panicked: a body that
    /// needs what only a blocking thread allows, `Handle::block_on` say,
    /// panics in place): back to the pool, with the penalty.
    pub(crate) fn overran(&self) {
        self.quick_streak.store(0, Ordering::Relaxed);
        let overruns = self.overruns.load(Ordering::Relaxed);
        if overruns < MAX_PENALTY {
            self.overruns.store(overruns + 1, Ordering::Relaxed);
        }
    }
}

/// A tool's placement: its setting, and its record when adaptive.
#[derive(Debug, Clone, Default)]
pub(crate) struct Placement {
    pub(crate) setting: SyncPlacement,
    pub(crate) record: Arc<PlacementRecord>,
}

/// Where one call of a synchronous body goes.
pub(crate) enum Where {
    /// In place; report how long it took if `Some`.
    InPlace(Option<Arc<PlacementRecord>>),
    /// On the blocking pool; report how long it took if `Some`.
    Pool(Option<Arc<PlacementRecord>>),
}

impl Placement {
    /// Decides where the next call runs.
    pub(crate) fn next(&self) -> Where {
        match self.setting {
            SyncPlacement::InPlace => Where::InPlace(None),
            SyncPlacement::BlockingPool => Where::Pool(None),
            SyncPlacement::Adaptive if self.record.in_place() => {
                Where::InPlace(Some(Arc::clone(&self.record)))
            }
            SyncPlacement::Adaptive => Where::Pool(Some(Arc::clone(&self.record))),
        }
    }
}

/// Runs `body`, timing it when `record` is there to learn from it.
pub(crate) fn timed<R>(
    record: Option<&PlacementRecord>,
    report: fn(&PlacementRecord, Duration),
    body: impl FnOnce() -> R,
) -> R {
    match record {
        None => body(),
        Some(record) => {
            let started = Instant::now();
            let result = body();
            report(record, started.elapsed());
            result
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FAST: Duration = Duration::from_micros(1);
    const SLOW: Duration = Duration::from_millis(5);

    #[test]
    fn a_tool_runs_in_place_once_its_calls_prove_quick() {
        let record = PlacementRecord::default();
        for _ in 0..PROVEN {
            assert!(!record.in_place());
            record.ran_on_pool(FAST);
        }
        assert!(record.in_place());
    }

    #[test]
    fn a_slow_call_on_the_pool_starts_the_proof_again() {
        let record = PlacementRecord::default();
        for _ in 0..PROVEN - 1 {
            record.ran_on_pool(FAST);
        }
        record.ran_on_pool(SLOW);
        record.ran_on_pool(FAST);
        assert!(!record.in_place());
    }

    #[test]
    fn an_overrun_in_place_sends_it_back_for_twice_as_long() {
        let record = PlacementRecord::default();
        for _ in 0..PROVEN {
            record.ran_on_pool(FAST);
        }
        record.ran_in_place(SLOW);
        assert!(!record.in_place());
        for _ in 0..PROVEN {
            record.ran_on_pool(FAST);
        }
        assert!(
            !record.in_place(),
            "a tool that overran proves itself longer"
        );
        for _ in 0..PROVEN {
            record.ran_on_pool(FAST);
        }
        assert!(record.in_place());
        // Quick calls in place keep it there.
        record.ran_in_place(FAST);
        assert!(record.in_place());
    }

    #[test]
    fn the_penalty_is_bounded() {
        let record = PlacementRecord::default();
        for _ in 0..100 {
            record.ran_in_place(SLOW);
        }
        for _ in 0..(PROVEN << MAX_PENALTY) {
            record.ran_on_pool(FAST);
        }
        assert!(record.in_place());
    }

    #[test]
    fn explicit_settings_ignore_the_record() {
        let placement = Placement {
            setting: SyncPlacement::InPlace,
            record: Arc::default(),
        };
        assert!(matches!(placement.next(), Where::InPlace(None)));
        let placement = Placement {
            setting: SyncPlacement::BlockingPool,
            record: Arc::default(),
        };
        for _ in 0..PROVEN {
            placement.record.ran_on_pool(FAST);
        }
        assert!(matches!(placement.next(), Where::Pool(None)));
    }
}
