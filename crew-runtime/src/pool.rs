//! The helper threads that run one model turn's tool calls concurrently.
//!
//! A kickoff starts helpers lazily (never more than its
//! `max_concurrent_tool_calls` minus one) and keeps them for later turns:
//! spawning threads on every turn, and waiting for each to be scheduled
//! just to exit, cost more than a whole trivial tool call. Within a turn,
//! the agent's own thread takes calls too, and it waits only for calls in
//! flight, never for an idle helper to wake up.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use crate::crew::KickoffDepth;
use crate::error::CrewError;
use crate::executor::AgentRun;
use crate::llm::ToolCallRequest;

/// Locks a mutex whose data stays consistent across a panic (counters and
/// slots written in one step), so poisoning is ignored.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The calls of one model turn, taken in order by whichever thread is free.
pub(crate) struct Turn {
    run: Arc<AgentRun>,
    calls: Vec<ToolCallRequest>,
    results: Vec<Mutex<Option<Result<String, CrewError>>>>,
    next: AtomicUsize,
    stop: AtomicBool,
    /// Calls finished (run or skipped); counted without a lock, which is
    /// only taken to wake the waiting thread after the last one.
    finished: AtomicUsize,
    waiting: Mutex<()>,
    all_finished: Condvar,
    /// The depth of the kickoff the calls belong to: a helper thread takes
    /// it while it runs them, so a hook there that kicks off a crew counts
    /// toward the nesting limit as on the agent's own thread.
    kickoff_depth: usize,
}

impl Turn {
    pub(crate) fn new(run: Arc<AgentRun>, calls: Vec<ToolCallRequest>) -> Self {
        Turn {
            results: calls.iter().map(|_| Mutex::new(None)).collect(),
            run,
            calls,
            next: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            finished: AtomicUsize::new(0),
            waiting: Mutex::new(()),
            all_finished: Condvar::new(),
            // Built on the agent's thread, inside its kickoff.
            kickoff_depth: KickoffDepth::current(),
        }
    }

    /// Takes calls until none is left. Once a call's POST chain aborts, the
    /// calls not yet started are skipped.
    fn work(&self) {
        let _depth = KickoffDepth::at(self.kickoff_depth);
        loop {
            let index = self.next.fetch_add(1, Ordering::Relaxed);
            let (Some(call), Some(result)) = (self.calls.get(index), self.results.get(index))
            else {
                return;
            };
            if !self.stop.load(Ordering::Relaxed) {
                // Hook and tool panics are contained inside `run_call`; this
                // guards the executor's own code, so that a turn always
                // finishes.
                match catch_unwind(AssertUnwindSafe(|| self.run.run_call(call))) {
                    Ok(outcome) => {
                        if outcome.is_err() {
                            self.stop.store(true, Ordering::Relaxed);
                        }
                        *lock(result) = Some(outcome);
                    }
                    Err(_) => tracing::error!(
                        target: "crew_runtime::executor",
                        tool = %call.name,
                        "the executor panicked while running a tool call"
                    ),
                }
            }
            if self.finished.fetch_add(1, Ordering::AcqRel) + 1 == self.calls.len() {
                // Holding the lock orders this wake-up after the waiter's
                // check, so it cannot be lost.
                let _waiting = lock(&self.waiting);
                self.all_finished.notify_all();
            }
        }
    }

    fn wait(&self) {
        let mut waiting = lock(&self.waiting);
        while self.finished.load(Ordering::Acquire) < self.calls.len() {
            waiting = self
                .all_finished
                .wait(waiting)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// The calls back, and each call's outcome in call order (`None` for a
    /// call skipped after an abort, or lost to an executor panic).
    #[allow(clippy::type_complexity)]
    fn into_outcomes(
        self: Arc<Self>,
    ) -> (Vec<ToolCallRequest>, Vec<Option<Result<String, CrewError>>>) {
        let outcomes = self.results.iter().map(|r| lock(r).take()).collect();
        let calls = match Arc::try_unwrap(self) {
            Ok(turn) => turn.calls,
            // A helper that woke late may still hold the turn for a moment.
            Err(shared) => shared.calls.clone(),
        };
        (calls, outcomes)
    }
}

struct PoolState {
    turn: Option<Arc<Turn>>,
    generation: u64,
    shutdown: bool,
}

struct Shared {
    state: Mutex<PoolState>,
    work_ready: Condvar,
}

/// Helper threads for one kickoff; stopped and joined when dropped.
pub(crate) struct CallPool {
    shared: Arc<Shared>,
    helpers: Vec<JoinHandle<()>>,
    limit: usize,
    spawn_failed: bool,
}

impl CallPool {
    /// A pool that runs up to `limit` calls at once (the caller's thread
    /// included). No thread starts until a turn needs one.
    pub(crate) fn new(limit: usize) -> Self {
        CallPool {
            shared: Arc::new(Shared {
                state: Mutex::new(PoolState {
                    turn: None,
                    generation: 0,
                    shutdown: false,
                }),
                work_ready: Condvar::new(),
            }),
            helpers: Vec::new(),
            limit: limit.max(1),
            spawn_failed: false,
        }
    }

    /// Runs the turn's calls on this thread and the helpers; returns the
    /// calls and their outcomes in call order.
    #[allow(clippy::type_complexity)]
    pub(crate) fn run(
        &mut self,
        turn: Turn,
    ) -> (Vec<ToolCallRequest>, Vec<Option<Result<String, CrewError>>>) {
        let helpers_wanted = self.limit.min(turn.calls.len()).saturating_sub(1);
        self.start_helpers(helpers_wanted);
        let turn = Arc::new(turn);
        let generation = {
            let mut state = lock(&self.shared.state);
            state.generation += 1;
            state.turn = Some(Arc::clone(&turn));
            state.generation
        };
        for _ in 0..helpers_wanted.min(self.helpers.len()) {
            self.shared.work_ready.notify_one();
        }
        turn.work();
        turn.wait();
        {
            let mut state = lock(&self.shared.state);
            if state.generation == generation {
                state.turn = None;
            }
        }
        turn.into_outcomes()
    }

    fn start_helpers(&mut self, wanted: usize) {
        while self.helpers.len() < wanted && !self.spawn_failed {
            let shared = Arc::clone(&self.shared);
            let spawned = std::thread::Builder::new()
                .name(format!("tool-call-{}", self.helpers.len() + 1))
                .spawn(move || helper(&shared));
            match spawned {
                Ok(handle) => self.helpers.push(handle),
                Err(error) => {
                    // Fewer threads only means less concurrency.
                    tracing::warn!(
                        target: "crew_runtime::executor",
                        "could not start a thread for tool calls ({error}); running them on {} thread(s)",
                        self.helpers.len() + 1
                    );
                    self.spawn_failed = true;
                }
            }
        }
    }
}

impl Drop for CallPool {
    fn drop(&mut self) {
        lock(&self.shared.state).shutdown = true;
        self.shared.work_ready.notify_all();
        for helper in self.helpers.drain(..) {
            // A helper only runs `Turn::work`, which contains panics.
            let _ = helper.join();
        }
    }
}

fn helper(shared: &Shared) {
    let mut seen = 0;
    loop {
        let turn = {
            let mut state = lock(&shared.state);
            loop {
                if state.shutdown {
                    return;
                }
                if state.generation != seen {
                    seen = state.generation;
                    if let Some(turn) = &state.turn {
                        break Arc::clone(turn);
                    }
                }
                state = shared
                    .work_ready
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
            }
        };
        turn.work();
    }
}
