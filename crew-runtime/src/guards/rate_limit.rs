//! [`RateLimiter`]: at most `limit` calls per key in any sliding window.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use hooks_core::{HookAborted, ToolCallHookContext};

/// The `source` of every refusal, as telemetry reports it.
///
/// ```
/// use std::time::Duration;
/// use crew_runtime::guards::{RATE_LIMITER_SOURCE, RateLimiter};
///
/// let limiter = RateLimiter::new(1, Duration::from_secs(60));
/// limiter.check("web_search")?;
/// let refusal = limiter.check("web_search").unwrap_err();
/// assert_eq!(refusal.source, RATE_LIMITER_SOURCE);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub const RATE_LIMITER_SOURCE: &str = "rate-limiter";

/// Where a [`RateLimiter`] reads the time.
///
/// A [`SystemClock`], a [`ManualClock`], or any `Fn() -> Instant`:
///
/// ```
/// use std::sync::Arc;
/// use std::time::{Duration, Instant};
/// use crew_runtime::guards::{Clock, RateLimiter};
///
/// // A clock that never moves: the window never passes.
/// let start = Instant::now();
/// let frozen = move || start;
/// assert_eq!(frozen.now(), start);
///
/// let limiter = RateLimiter::with_clock(1, Duration::from_millis(1), Arc::new(frozen));
/// assert!(limiter.check("deploy").is_ok());
/// std::thread::sleep(Duration::from_millis(5));
/// assert!(limiter.check("deploy").is_err());
/// ```
pub trait Clock: Send + Sync {
    /// The current instant. Must never go backwards.
    fn now(&self) -> Instant;
}

/// Any `Fn() -> Instant` is a clock.
impl<F> Clock for F
where
    F: Fn() -> Instant + Send + Sync,
{
    fn now(&self) -> Instant {
        self()
    }
}

/// The system's monotonic clock ([`Instant::now`]): what
/// [`RateLimiter::new`] reads.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use crew_runtime::guards::{Clock, RateLimiter, SystemClock};
///
/// let before = SystemClock.now();
/// assert!(SystemClock.now() >= before);
///
/// let limiter = RateLimiter::with_clock(10, Duration::from_secs(1), Arc::new(SystemClock));
/// assert!(limiter.check("web_search").is_ok());
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// A clock that only moves when told to: for tests of time windows that
/// must not depend on how fast the machine is.
///
/// ```
/// use std::time::Duration;
/// use crew_runtime::guards::{Clock, ManualClock};
///
/// let clock = ManualClock::new();
/// let start = clock.now();
/// clock.advance(Duration::from_secs(60));
/// assert_eq!(clock.now() - start, Duration::from_secs(60));
/// ```
#[derive(Debug)]
pub struct ManualClock {
    start: Instant,
    elapsed: Mutex<Duration>,
}

impl ManualClock {
    /// A clock standing at the moment it was made.
    pub fn new() -> Self {
        ManualClock {
            start: Instant::now(),
            elapsed: Mutex::new(Duration::ZERO),
        }
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        // A plain number: nothing a panic could leave half-written.
        let mut elapsed = self.elapsed.lock().unwrap_or_else(PoisonError::into_inner);
        *elapsed = elapsed.saturating_add(by);
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        ManualClock::new()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        let elapsed = *self.elapsed.lock().unwrap_or_else(PoisonError::into_inner);
        // Past the far end of `Instant` (centuries away) the clock stops.
        self.start.checked_add(elapsed).unwrap_or(self.start)
    }
}

/// The admitted calls of one key, oldest first.
type Admissions = VecDeque<Instant>;

struct State {
    keys: HashMap<String, Admissions>,
    /// Key count above which keys with no admission left in the window are
    /// dropped, so that many distinct keys (model-chosen names) cannot
    /// grow the map without end.
    sweep_above: usize,
}

const MIN_SWEEP: usize = 1024;

struct Inner {
    limit: usize,
    window: Duration,
    clock: Arc<dyn Clock>,
    state: Mutex<State>,
}

/// Admits at most `limit` calls per key in any window of `window`
/// (a sliding window over the admitted calls' times), and refuses the
/// others with a [`HookAborted`] whose source is `rate-limiter`.
///
/// Exact under concurrency: one lock orders every decision, and the time is
/// read under it, so however many threads call [`check`](Self::check) at
/// once, no window ever holds more than `limit` admissions of one key.
/// Refused calls are not counted. Cloning is cheap and clones share their
/// counts.
///
/// As a `PRE_TOOL_CALL` hook ([`pre_hook`](Self::pre_hook)) it limits each
/// tool separately. Every call that reaches it counts, so register it after
/// the hooks that may block a call for other reasons.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use crew_runtime::guards::{ManualClock, RateLimiter};
/// use crew_runtime::prelude::*;
///
/// let clock = Arc::new(ManualClock::new());
/// let limiter = RateLimiter::with_clock(2, Duration::from_secs(60), clock.clone());
/// assert!(limiter.check("web_search").is_ok());
/// assert!(limiter.check("web_search").is_ok());
/// let refused = limiter.check("web_search").err();
/// assert_eq!(refused.map(|a| a.source), Some("rate-limiter".to_owned()));
/// assert!(limiter.check("send_email").is_ok(), "keys are counted apart");
/// clock.advance(Duration::from_secs(60));
/// assert!(limiter.check("web_search").is_ok(), "the window has moved on");
///
/// let registry = HookRegistry::new();
/// registry.register_hook_with(
///     PRE_TOOL_CALL,
///     HookOptions::new().name("rate-limiter").tools(["web_search"]),
///     limiter.pre_hook(),
/// )?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct RateLimiter {
    inner: Arc<Inner>,
}

impl RateLimiter {
    /// At most `limit` calls per key in any `window`, on the system clock.
    /// A `limit` of 0 refuses everything.
    pub fn new(limit: usize, window: Duration) -> Self {
        RateLimiter::with_clock(limit, window, Arc::new(SystemClock))
    }

    /// The same, reading the time from `clock` (a [`ManualClock`] in tests).
    pub fn with_clock(limit: usize, window: Duration, clock: Arc<dyn Clock>) -> Self {
        RateLimiter {
            inner: Arc::new(Inner {
                limit,
                window,
                clock,
                state: Mutex::new(State {
                    keys: HashMap::new(),
                    sweep_above: MIN_SWEEP,
                }),
            }),
        }
    }

    /// The most calls per key in one window.
    pub fn limit(&self) -> usize {
        self.inner.limit
    }

    /// The window's length.
    pub fn window(&self) -> Duration {
        self.inner.window
    }

    /// Admits one call of `key` (and counts it), or refuses it when `limit`
    /// calls of `key` were admitted within the last `window`.
    pub fn check(&self, key: &str) -> Result<(), HookAborted> {
        let inner = &*self.inner;
        // Every change is a push or pop completed before anything that could
        // panic, so a poisoned lock still guards consistent counts.
        let mut state = inner.state.lock().unwrap_or_else(PoisonError::into_inner);
        let now = inner.clock.now();
        let window = inner.window;
        let expired = |at: &Instant| now.saturating_duration_since(*at) >= window;
        if !state.keys.contains_key(key) && state.keys.len() >= state.sweep_above {
            state
                .keys
                .retain(|_, admitted| admitted.back().is_some_and(|at| !expired(at)));
            state.sweep_above = MIN_SWEEP.max(state.keys.len().saturating_mul(2));
        }
        let admitted = state.keys.entry(key.to_owned()).or_default();
        while admitted.front().is_some_and(expired) {
            admitted.pop_front();
        }
        if admitted.len() < inner.limit {
            admitted.push_back(now);
            return Ok(());
        }
        let retry_in = admitted
            .front()
            .map(|oldest| window.saturating_sub(now.saturating_duration_since(*oldest)));
        Err(HookAborted::new(
            refusal(key, inner.limit, window, retry_in),
            RATE_LIMITER_SOURCE,
        ))
    }

    /// A `PRE_TOOL_CALL` hook limiting each tool by its normalized name.
    /// Calls of tools the agent does not have are let through uncounted
    /// (they run nothing), so made-up names cannot crowd out real ones.
    pub fn pre_hook(
        &self,
    ) -> impl Fn(&mut ToolCallHookContext) -> Result<(), HookAborted> + Send + Sync + 'static {
        self.pre_hook_by(|ctx| ctx.tool.as_ref().map(|_| ctx.tool_name().to_owned()))
    }

    /// A `PRE_TOOL_CALL` hook limiting calls by the key `key` picks (the
    /// agent's role, a user id in `tool_input`, …); `None` lets the call
    /// through uncounted.
    pub fn pre_hook_by(
        &self,
        key: impl Fn(&ToolCallHookContext) -> Option<String> + Send + Sync + 'static,
    ) -> impl Fn(&mut ToolCallHookContext) -> Result<(), HookAborted> + Send + Sync + 'static {
        let limiter = self.clone();
        move |ctx: &mut ToolCallHookContext| match key(ctx) {
            Some(key) => limiter.check(&key),
            None => Ok(()),
        }
    }
}

fn refusal(key: &str, limit: usize, window: Duration, retry_in: Option<Duration>) -> String {
    let mut reason =
        format!("rate limit reached for `{key}`: at most {limit} call(s) per {window:?}");
    match retry_in {
        Some(wait) => reason.push_str(&format!("; try again in {wait:?}")),
        None => reason.push_str("; no call is allowed"),
    }
    reason
}

impl fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimiter")
            .field("limit", &self.inner.limit)
            .field("window", &self.inner.window)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(limit: usize, window_secs: u64) -> (RateLimiter, Arc<ManualClock>) {
        let clock = Arc::new(ManualClock::new());
        let limiter =
            RateLimiter::with_clock(limit, Duration::from_secs(window_secs), clock.clone());
        (limiter, clock)
    }

    #[test]
    fn the_window_slides_over_each_admission() {
        let (limiter, clock) = limiter(2, 10);
        assert!(limiter.check("k").is_ok()); // t=0
        clock.advance(Duration::from_secs(4));
        assert!(limiter.check("k").is_ok()); // t=4
        assert!(limiter.check("k").is_err()); // t=4: two in (−6, 4]
        clock.advance(Duration::from_secs(6));
        assert!(
            limiter.check("k").is_ok(),
            "t=10: the t=0 call left the window"
        );
        assert!(limiter.check("k").is_err(), "t=10: t=4 and t=10 are in it");
    }

    #[test]
    fn refusals_are_not_counted_and_name_the_wait() {
        let (limiter, clock) = limiter(1, 10);
        assert!(limiter.check("k").is_ok());
        clock.advance(Duration::from_secs(3));
        let refused = limiter.check("k").err();
        assert_eq!(
            refused.map(|a| (a.source, a.reason)),
            Some((
                "rate-limiter".to_owned(),
                "rate limit reached for `k`: at most 1 call(s) per 10s; try again in 7s".to_owned()
            ))
        );
        clock.advance(Duration::from_secs(7));
        assert!(
            limiter.check("k").is_ok(),
            "the refusal did not extend the wait"
        );
    }

    #[test]
    fn zero_limit_refuses_everything() {
        let (limiter, _clock) = limiter(0, 10);
        assert_eq!(
            limiter.check("k").err().map(|a| a.reason),
            Some(
                "rate limit reached for `k`: at most 0 call(s) per 10s; no call is allowed".into()
            )
        );
    }

    #[test]
    fn expired_keys_are_swept_when_many_keys_pile_up() {
        let (limiter, clock) = limiter(1, 10);
        for n in 0..MIN_SWEEP {
            assert!(limiter.check(&format!("k{n}")).is_ok());
        }
        clock.advance(Duration::from_secs(10));
        assert!(limiter.check("fresh").is_ok());
        let state = limiter
            .inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        assert_eq!(state.keys.len(), 1, "only the fresh key is left");
    }
}
