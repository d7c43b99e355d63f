//! The time an `async` hook may take, and what of it a person took.
//!
//! An awaiting dispatch gives each `async` hook a time limit (the crew's
//! hook timeout, or the hook's own). Time spent waiting for a person in
//! `request_human_input` does not count toward it: a question has its own
//! deadline. The hook's run is timed by [`timed`]; a question asked while
//! it is polled finds the hook's [`HookClock`] through a thread-local slot
//! set around each poll, and marks itself pending on it.
//!
//! Nothing is allocated for a hook that asks nobody: the clock is made by
//! the first question.

use std::cell::RefCell;
use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Poll;
use std::time::{Duration, Instant};

/// How long an `async` hook may run before it counts as a panic of that
/// hook, unless its crew or the hook itself says otherwise: 30 seconds.
/// Time spent waiting for a person's answer does not count.
///
/// ```
/// use std::time::Duration;
/// assert_eq!(hooks_core::DEFAULT_HOOK_TIMEOUT, Duration::from_secs(30));
/// ```
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(30);

/// The least time between two looks at a clock whose hook waits for a
/// person (the hook's time does not run meanwhile).
const PENDING_RECHECK: Duration = Duration::from_millis(50);

/// Questions of one hook run: how many are open, since when, and how long
/// the closed ones waited.
#[derive(Debug)]
pub(crate) struct HookClock {
    state: Mutex<ClockState>,
}

#[derive(Debug)]
struct ClockState {
    open: usize,
    open_since: Option<Instant>,
    waited: Duration,
    asked: bool,
}

impl HookClock {
    fn new() -> Self {
        HookClock {
            state: Mutex::new(ClockState {
                open: 0,
                open_since: None,
                waited: Duration::ZERO,
                asked: false,
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, ClockState> {
        // The state is a few counters, each update complete: a panic
        // cannot leave it half-written.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A question of the hook is now waiting for its answer.
    pub(crate) fn question_opened(&self) {
        let mut state = self.state();
        state.asked = true;
        if state.open == 0 {
            state.open_since = Some(Instant::now());
        }
        state.open += 1;
    }

    /// A question of the hook has its answer (or gave up, or was dropped).
    pub(crate) fn question_closed(&self) {
        let mut state = self.state();
        state.open = state.open.saturating_sub(1);
        if state.open == 0
            && let Some(since) = state.open_since.take()
        {
            state.waited += since.elapsed();
        }
    }

    /// Whether a question is waiting now, and the time spent waiting for
    /// answers so far.
    fn waiting(&self, now: Instant) -> (bool, Duration) {
        let state = self.state();
        let open = state
            .open_since
            .map_or(Duration::ZERO, |since| now.saturating_duration_since(since));
        (state.open > 0, state.waited + open)
    }
}

thread_local! {
    /// The clock of the hook being polled on this thread: `None` outside a
    /// timed hook, `Some(None)` inside one that has asked nothing yet.
    static CURRENT: RefCell<Option<Option<Arc<HookClock>>>> = const { RefCell::new(None) };
}

/// The clock of the timed hook being polled on this thread (made now if
/// this is its first question); `None` outside a timed hook.
pub(crate) fn current() -> Option<Arc<HookClock>> {
    CURRENT.with(|current| match &mut *current.borrow_mut() {
        Some(clock) => Some(Arc::clone(
            clock.get_or_insert_with(|| Arc::new(HookClock::new())),
        )),
        None => None,
    })
}

/// Puts `clock` in this thread's slot while `f` runs, and takes it back
/// (possibly made by a question meanwhile). Nests: the slot's earlier
/// content is restored, also when `f` unwinds.
fn with_clock<R>(clock: &mut Option<Arc<HookClock>>, f: impl FnOnce() -> R) -> R {
    struct Restore<'a> {
        clock: &'a mut Option<Arc<HookClock>>,
        earlier: Option<Option<Arc<HookClock>>>,
    }
    impl Drop for Restore<'_> {
        fn drop(&mut self) {
            let earlier = self.earlier.take();
            let ours =
                CURRENT.with(|current| std::mem::replace(&mut *current.borrow_mut(), earlier));
            *self.clock = ours.flatten();
        }
    }
    let earlier = CURRENT.with(|current| current.borrow_mut().replace(clock.take()));
    let _restore = Restore { clock, earlier };
    f()
}

/// How a timed hook run ended.
pub(crate) struct Timed<T> {
    /// The hook's output, or `None` when it ran out of time.
    pub(crate) output: Option<T>,
    /// Whether the hook asked a person anything.
    pub(crate) asked: bool,
}

/// Runs `future` (a hook's) for at most `limit` of its own time: time
/// during which one of its questions waits for a person is not counted.
///
/// The limit is kept on the tokio timer of the runtime the hook runs on;
/// with no runtime, or one without timers, the hook runs without a limit
/// (a synchronous caller drives it on its own thread, and chose to wait).
pub(crate) async fn timed<F: Future>(limit: Duration, future: F) -> Timed<F::Output> {
    let started = Instant::now();
    let mut clock: Option<Arc<HookClock>> = None;
    let mut future = pin!(future);
    // Made only when the hook first waits: a hook that finishes in its
    // first poll (most do) costs no timer.
    let mut sleep = pin!(None::<tokio::time::Sleep>);
    let mut timer_looked_for = false;
    let output = std::future::poll_fn(|cx| {
        if let Poll::Ready(output) = with_clock(&mut clock, || future.as_mut().poll(cx)) {
            return Poll::Ready(Some(output));
        }
        if !timer_looked_for {
            timer_looked_for = true;
            // A limit too large to be a deadline is no limit.
            let deadline = started.checked_add(limit);
            if let (Some(deadline), true) =
                (deadline, tokio::runtime::Handle::try_current().is_ok())
            {
                // A runtime without timers panics here (nothing else can
                // tell); the deadline counts from the hook's start.
                let deadline = tokio::time::Instant::from_std(deadline);
                match crate::panic::catch_quietly(|| tokio::time::sleep_until(deadline)) {
                    Ok(timer) => sleep.set(Some(timer)),
                    Err(payload) => crate::panic::drop_payload(payload),
                }
            }
        }
        let Some(mut sleep) = sleep.as_mut().as_pin_mut() else {
            return Poll::Pending;
        };
        while sleep.as_mut().poll(cx).is_ready() {
            let now = Instant::now();
            let (waiting, waited) = clock
                .as_ref()
                .map_or((false, Duration::ZERO), |c| c.waiting(now));
            let worked = now
                .saturating_duration_since(started)
                .saturating_sub(waited);
            if worked >= limit && !waiting {
                return Poll::Ready(None);
            }
            let next = limit.saturating_sub(worked);
            let next = if waiting {
                next.max(PENDING_RECHECK)
            } else {
                next
            };
            sleep
                .as_mut()
                .reset(tokio::time::Instant::from_std(now + next));
        }
        Poll::Pending
    })
    .await;
    Timed {
        output,
        asked: clock.is_some_and(|clock| clock.state().asked),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_hook_past_its_limit_is_cut_short() {
        let run = timed(Duration::from_millis(50), std::future::pending::<()>()).await;
        assert!(run.output.is_none());
        assert!(!run.asked);
    }

    #[tokio::test]
    async fn a_hook_within_its_limit_finishes() {
        let run = timed(Duration::from_secs(30), async {
            tokio::time::sleep(Duration::from_millis(10)).await;
            7
        })
        .await;
        assert_eq!(run.output, Some(7));
    }

    #[tokio::test]
    async fn time_waiting_for_a_person_does_not_count() {
        // The hook itself works next to nothing, and waits three times its
        // limit for a "person".
        let run = timed(Duration::from_millis(100), async {
            let clock = current().expect("inside a timed hook");
            clock.question_opened();
            tokio::time::sleep(Duration::from_millis(300)).await;
            clock.question_closed();
            "done"
        })
        .await;
        assert_eq!(run.output, Some("done"));
        assert!(run.asked);
    }

    #[tokio::test]
    async fn a_limit_too_large_for_a_deadline_is_no_limit() {
        let run = timed(Duration::MAX, async {
            tokio::task::yield_now().await;
            "done"
        })
        .await;
        assert_eq!(run.output, Some("done"));
    }

    #[test]
    fn no_clock_outside_a_timed_hook() {
        assert!(current().is_none());
    }
}
