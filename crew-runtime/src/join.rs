//! A bounded join set: tasks spawned on the runtime, at most `limit` at a
//! time, each known by its index; the rest wait their turn in order.
//!
//! It runs one model turn's tool calls. Dropping it aborts every task it
//! spawned and drops those that never started, so a cancelled kickoff
//! leaves nothing running (a synchronous tool already on the blocking pool
//! finishes its call there; its result is dropped).
//!
//! [`within`] bounds a model's or a tool's work by its timeout.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::task::{JoinError, JoinSet};

type Queued<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Futures run as tasks, at most `limit` at once, in the order pushed.
pub(crate) struct BoundedJoinSet<T> {
    running: JoinSet<(usize, T)>,
    /// The index of each running task, by task id (to name a task whose
    /// join failed).
    ids: Vec<(tokio::task::Id, usize)>,
    waiting: VecDeque<(usize, Queued<T>)>,
    limit: usize,
}

impl<T: Send + 'static> BoundedJoinSet<T> {
    /// A set that runs at most `limit` tasks at once (at least one).
    pub(crate) fn new(limit: usize) -> Self {
        BoundedJoinSet {
            running: JoinSet::new(),
            ids: Vec::new(),
            waiting: VecDeque::new(),
            limit: limit.max(1),
        }
    }

    /// Adds the task `index`: spawned now if fewer than `limit` run,
    /// otherwise when one of them finishes.
    pub(crate) fn push<F>(&mut self, index: usize, future: F)
    where
        F: Future<Output = T> + Send + 'static,
    {
        if self.running.len() < self.limit {
            self.spawn(index, Box::pin(future));
        } else {
            self.waiting.push_back((index, Box::pin(future)));
        }
    }

    fn spawn(&mut self, index: usize, future: Queued<T>) {
        let handle = self.running.spawn(async move { (index, future.await) });
        self.ids.push((handle.id(), index));
    }

    /// Drops the tasks that have not started; returns how many.
    pub(crate) fn cancel_waiting(&mut self) -> usize {
        let dropped = self.waiting.len();
        self.waiting.clear();
        dropped
    }

    /// The next task to finish, with its index (`None` once all have),
    /// and starts the next waiting one in its place.
    pub(crate) async fn join_next(&mut self) -> Option<(usize, Result<T, JoinError>)> {
        let joined = self.running.join_next_with_id().await?;
        if let Some((index, future)) = self.waiting.pop_front() {
            self.spawn(index, future);
        }
        Some(match joined {
            Ok((id, (index, value))) => {
                self.forget(id);
                (index, Ok(value))
            }
            Err(error) => (self.forget(error.id()).unwrap_or(usize::MAX), Err(error)),
        })
    }

    fn forget(&mut self, id: tokio::task::Id) -> Option<usize> {
        let position = self.ids.iter().position(|(task, _)| *task == id)?;
        Some(self.ids.swap_remove(position).1)
    }
}

/// `future`'s output, or `Elapsed` after `timeout`. A future that is ready
/// at its first poll (most tools that answer from memory) sets no timer.
pub(crate) async fn within<F: Future>(
    timeout: Duration,
    future: F,
) -> Result<F::Output, tokio::time::error::Elapsed> {
    let mut future = std::pin::pin!(future);
    if let std::task::Poll::Ready(output) =
        std::future::poll_fn(|cx| std::task::Poll::Ready(future.as_mut().poll(cx))).await
    {
        return Ok(output);
    }
    tokio::time::timeout(timeout, future).await
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn never_more_than_the_limit_run_at_once() {
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let mut set = BoundedJoinSet::new(3);
        for index in 0..10 {
            let (running, most) = (Arc::clone(&running), Arc::clone(&most));
            set.push(index, async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(2)).await;
                running.fetch_sub(1, Ordering::SeqCst);
                index * 10
            });
        }
        let mut seen = Vec::new();
        while let Some((index, value)) = set.join_next().await {
            assert_eq!(value.ok(), Some(index * 10));
            seen.push(index);
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..10).collect::<Vec<_>>());
        assert_eq!(most.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_panicking_task_is_reported_by_its_index() {
        let mut set = BoundedJoinSet::new(2);
        set.push(7, async {
            if true {
                panic!("task broke");
            }
        });
        let (index, result) = set.join_next().await.expect("one task");
        assert_eq!(index, 7);
        assert!(result.is_err_and(|error| error.is_panic()));
    }

    #[tokio::test]
    async fn dropping_the_set_drops_running_and_waiting_tasks() {
        struct Flag(Arc<AtomicUsize>);
        impl Drop for Flag {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let dropped = Arc::new(AtomicUsize::new(0));
        let mut set = BoundedJoinSet::new(1);
        for index in 0..3 {
            let flag = Flag(Arc::clone(&dropped));
            set.push(index, async move {
                let _flag = flag;
                tokio::time::sleep(Duration::from_secs(60)).await;
            });
        }
        tokio::task::yield_now().await;
        drop(set);
        // The aborted task is dropped by the runtime shortly after.
        for _ in 0..100 {
            if dropped.load(Ordering::SeqCst) == 3 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!(
            "only {} of 3 tasks were dropped",
            dropped.load(Ordering::SeqCst)
        );
    }
}
