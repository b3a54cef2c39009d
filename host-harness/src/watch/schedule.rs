//! When each watched repository is checked, and by which thread: a fixed set
//! of workers takes the repository due first, checks it, and puts it back
//! due again after its wait. A repository is out of the queue while it is
//! checked, so its checks never overlap; a slow or failing one holds one
//! worker, not the others. Threads, memory and descriptors stay flat however
//! many repositories there are (a thread each stopped at 4,096: `tracing`
//! keeps span state for at most that many threads).

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{Shared, Watched};

/// How often an idle worker looks at the process's stop signal.
const POLL: Duration = Duration::from_millis(200);

/// The repositories waiting for their next check, first due first.
pub struct Schedule {
    queue: Mutex<Queue>,
    wake: Condvar,
}

#[derive(Default)]
struct Queue {
    due: BinaryHeap<Due<Box<Watched>>>,
    /// Orders repositories due at the same instant as they were queued.
    next: u64,
}

/// One repository (`T`) and when it is due.
struct Due<T> {
    at: Instant,
    order: u64,
    watched: T,
}

impl<T> Ord for Due<T> {
    /// Reversed, so that the max-heap yields the earliest first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.order).cmp(&(self.at, self.order))
    }
}

impl<T> PartialOrd for Due<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<T> PartialEq for Due<T> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl<T> Eq for Due<T> {}

impl Schedule {
    /// An empty schedule and `workers` threads running it until the
    /// process stops (`shared.stop`).
    pub fn start(shared: Arc<Shared>, workers: usize) -> (Arc<Schedule>, Vec<JoinHandle<()>>) {
        let schedule = Arc::new(Schedule {
            queue: Mutex::new(Queue::default()),
            wake: Condvar::new(),
        });
        let handles = (0..workers)
            .map(|_| {
                let (schedule, shared) = (schedule.clone(), shared.clone());
                std::thread::spawn(move || schedule.work(&shared))
            })
            .collect();
        (schedule, handles)
    }

    /// Queues `watched`, due now.
    pub fn add(&self, watched: Watched) {
        self.put(Instant::now(), Box::new(watched));
    }

    fn put(&self, at: Instant, watched: Box<Watched>) {
        let mut queue = self.lock();
        let order = queue.next;
        queue.next += 1;
        queue.due.push(Due { at, order, watched });
        drop(queue);
        self.wake.notify_one();
    }

    /// Drops every queued repository that was stopped (retired by
    /// discovery), with its open repository and its notifications, instead
    /// of when it would next be due.
    pub fn drop_stopped(&self) {
        let stopped: Vec<Due<Box<Watched>>> = {
            let mut queue = self.lock();
            let (stopped, kept) = std::mem::take(&mut queue.due)
                .into_vec()
                .into_iter()
                .partition(|d| d.watched.is_stopped());
            queue.due = BinaryHeap::from(kept);
            stopped
        };
        // Closed here, outside the queue's lock, which the workers wait on.
        drop(stopped);
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A worker: checks the repository due first, again and again, until
    /// the process stops.
    fn work(&self, shared: &Shared) {
        while let Some(mut watched) = self.next_due(shared) {
            let step = std::panic::catch_unwind(AssertUnwindSafe(|| watched.check(shared)));
            let wait = step.unwrap_or_else(|_| Some(watched.after_panic()));
            if let Some(wait) = wait {
                self.put(Instant::now() + wait, watched);
            }
        }
    }

    /// The repository due first, once it is due; `None` once the process
    /// stops.
    fn next_due(&self, shared: &Shared) -> Option<Box<Watched>> {
        let mut queue = self.lock();
        loop {
            if shared.stop.is_stopped() {
                return None;
            }
            let now = Instant::now();
            let wait = match queue.due.peek() {
                Some(first) if first.at <= now => return queue.due.pop().map(|d| d.watched),
                Some(first) => (first.at - now).min(POLL),
                None => POLL,
            };
            queue = match self.wake.wait_timeout(queue, wait) {
                Ok((queue, _)) => queue,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_earliest_is_first_and_ties_keep_their_order() {
        let now = Instant::now();
        let later = now + Duration::from_secs(1);
        let mut heap = BinaryHeap::new();
        for (at, order) in [(later, 0), (now, 2), (now, 1), (later, 3)] {
            heap.push(Due {
                at,
                order,
                watched: (),
            });
        }
        let order: Vec<u64> = std::iter::from_fn(|| heap.pop().map(|d| d.order)).collect();
        assert_eq!(order, [1, 2, 0, 3]);
    }
}
