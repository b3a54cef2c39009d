//! When each watched repository is checked, and by which thread: a fixed set
//! of workers takes the repository due first, checks it, and puts it back
//! due again after its wait. A repository is out of the queue while it is
//! checked, so its checks never overlap; a slow or failing one holds one
//! worker, not the others. Threads, memory and descriptors stay flat however
//! many repositories there are (a thread each stopped at 4,096: `tracing`
//! keeps span state for at most that many threads).
//!
//! A tenant (the namespace a discovered repository was found in) has at most
//! a cap of checks in flight: a repository due while its tenant is at the
//! cap waits in its tenant's own queue, in the order it was due, and goes
//! back to the front of the schedule when one of its tenant's checks ends.
//! Others due after it go on meanwhile; each repository is moved at most
//! once per check, so a pick stays O(log n).
//!
//! The schedule knows a repository only as a job ([`Job`], [`Check`]): its
//! name, its tenant, whether it was stopped or backs off, and how to check
//! it.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use regex::Regex;

use crate::evidence::InventorySource;
use crate::stop::Stop;
use crate::watch::holders::Holders;

/// How often an idle worker looks at the process's stop signal.
const POLL: Duration = Duration::from_millis(200);

/// What the schedule needs to know of a repository.
pub trait Job {
    /// Its name (unique among the jobs).
    fn name(&self) -> &str;
    /// Its tenant, whose checks in flight are capped; `None` for one that
    /// belongs to no tenant (not capped).
    fn tenant(&self) -> Option<&str>;
    /// Whether it was stopped (it is then dropped, not checked).
    fn is_stopped(&self) -> bool;
    /// Whether its last check failed: its wait is a backoff, which a
    /// pod's end does not shorten.
    fn is_backing_off(&self) -> bool;
}

/// What a worker does with a job: checks it, and learns when it is due
/// again and which pods may hold its locks.
pub trait Check: Job + Send + 'static {
    /// What every check is handed: the same for all the schedule's jobs.
    type Shared: Send + Sync + 'static;
    /// Checks it once; how long to wait before the next check, or `None`
    /// once it is stopped.
    fn check(&mut self, shared: &Self::Shared) -> Option<Duration>;
    /// After its check panicked (a bug): how long to wait before the next.
    fn after_panic(&mut self) -> Duration;
    /// Its pod inventory: which pods' ends hurry its next check
    /// ([`Holders`]).
    fn inventory(&self) -> Option<&(InventorySource, Regex)>;
}

/// The jobs (`J`, repositories) waiting for their next check, first due
/// first.
pub struct Schedule<J> {
    queue: Mutex<Queue<J>>,
    wake: Condvar,
    /// The process's stop signal: the workers end with it.
    stop: Arc<Stop>,
    /// Which repositories' inventories speak for which pods (recorded at
    /// each check).
    pub holders: Holders,
}

/// A job hurried is due this long after it was asked for: a burst of pod
/// events (a pod's containers ending one by one, then the pod) costs one
/// check, not one each.
const COALESCE: Duration = Duration::from_secs(1);

/// The jobs (`T`) waiting, by when they are due, and the tenants' checks.
struct Queue<T> {
    due: BinaryHeap<Due<T>>,
    /// Orders jobs due at the same instant as they were queued.
    next: u64,
    /// The most checks of one tenant in flight.
    cap: usize,
    /// Each tenant with a check in flight or a job waiting for one.
    tenants: HashMap<String, Tenant<T>>,
    /// Jobs in flight that were hurried meanwhile: due again at once when
    /// they come back ([`Queue::requeue`]).
    again: HashSet<String>,
}

/// One tenant's checks in flight, and its jobs due that wait for one of
/// those to end, first due first.
struct Tenant<T> {
    running: usize,
    waiting: VecDeque<Due<T>>,
}

/// What [`Queue::take`] gave.
#[derive(Debug)]
enum Take<T> {
    /// A job to check now (counted as in flight for its tenant).
    Job(T),
    /// Nothing due before this instant (or nothing queued at all).
    Wait(Option<Instant>),
}

/// One job (`T`) and when it is due.
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

impl<T: Job> Queue<T> {
    /// An empty queue whose tenants each have at most `cap` checks in
    /// flight (at least one).
    fn new(cap: usize) -> Queue<T> {
        Queue {
            due: BinaryHeap::new(),
            next: 0,
            cap: cap.max(1),
            tenants: HashMap::new(),
            again: HashSet::new(),
        }
    }

    /// Queues `job`, due `at`.
    fn push(&mut self, at: Instant, job: T) {
        let order = self.next;
        self.next += 1;
        self.due.push(Due {
            at,
            order,
            watched: job,
        });
    }

    /// Makes the jobs named `names` due by `at` (none later than it); one
    /// in flight is due again at `at` when it comes back. O(n), but only
    /// when a pod that may hold a lock ended.
    fn hurry(&mut self, names: &[String], at: Instant) {
        let wanted = |job: &T| names.iter().any(|n| n == job.name());
        let mut due = std::mem::take(&mut self.due).into_vec();
        let mut queued = HashSet::new();
        for d in due.iter_mut().filter(|d| wanted(&d.watched)) {
            if !d.watched.is_backing_off() {
                d.at = d.at.min(at);
            }
            queued.insert(d.watched.name().to_owned());
        }
        let waiting = (self.tenants.values()).flat_map(|t| t.waiting.iter());
        queued.extend(waiting.map(|d| d.watched.name().to_owned()));
        self.due = BinaryHeap::from(due);
        let in_flight = names.iter().filter(|n| !queued.contains(*n));
        self.again.extend(in_flight.cloned());
    }

    /// Puts `job` back after its check, due after `wait`, or at once
    /// (after [`COALESCE`]) when it was hurried while in flight.
    fn requeue(&mut self, now: Instant, wait: Duration, job: T) {
        let wait = if self.again.remove(job.name()) && !job.is_backing_off() {
            wait.min(COALESCE)
        } else {
            wait
        };
        self.push(now + wait, job);
    }

    /// The job due first by `now` whose tenant is below its cap; a job due
    /// whose tenant is at its cap is set aside in its tenant's queue on the
    /// way.
    fn take(&mut self, now: Instant) -> Take<T> {
        while let Some(first) = self.due.peek() {
            if first.at > now {
                return Take::Wait(Some(first.at));
            }
            let Some(due) = self.due.pop() else { break };
            let Some(tenant) = due.watched.tenant() else {
                return Take::Job(due.watched);
            };
            let cap = self.cap;
            let entry = self.tenants.entry(tenant.to_owned()).or_insert(Tenant {
                running: 0,
                waiting: VecDeque::new(),
            });
            if entry.running >= cap {
                entry.waiting.push_back(due);
                continue;
            }
            entry.running += 1;
            return Take::Job(due.watched);
        }
        Take::Wait(None)
    }

    /// A check of `tenant`'s ended: the first of its jobs waiting for that
    /// goes back to the schedule, due when it was.
    fn finished(&mut self, tenant: Option<&str>) {
        let Some(name) = tenant else { return };
        let Some(entry) = self.tenants.get_mut(name) else {
            return;
        };
        entry.running = entry.running.saturating_sub(1);
        if let Some(due) = entry.waiting.pop_front() {
            self.due.push(due);
        }
        if entry.running == 0 && entry.waiting.is_empty() {
            self.tenants.remove(name);
        }
    }

    /// Takes every queued job that was stopped out of the queue.
    fn take_stopped(&mut self) -> Vec<T> {
        let (stopped, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.due)
            .into_vec()
            .into_iter()
            .partition(|d| d.watched.is_stopped());
        self.due = BinaryHeap::from(kept);
        let mut stopped: Vec<T> = stopped.into_iter().map(|d| d.watched).collect();
        for entry in self.tenants.values_mut() {
            let (gone, kept): (VecDeque<_>, VecDeque<_>) = std::mem::take(&mut entry.waiting)
                .into_iter()
                .partition(|d| d.watched.is_stopped());
            entry.waiting = kept;
            stopped.extend(gone.into_iter().map(|d| d.watched));
        }
        self.tenants
            .retain(|_, t| t.running > 0 || !t.waiting.is_empty());
        for job in &stopped {
            self.again.remove(job.name());
        }
        stopped
    }
}

impl<J: Check> Schedule<J> {
    /// An empty schedule and `workers` threads running it until the
    /// process stops (`stop`), each check handed `shared`, each tenant's
    /// checks at most `cap` of them at once.
    pub fn start(
        shared: Arc<J::Shared>,
        stop: Arc<Stop>,
        workers: usize,
        cap: usize,
    ) -> (Arc<Schedule<J>>, Vec<JoinHandle<()>>) {
        let schedule = Arc::new(Schedule {
            queue: Mutex::new(Queue::new(cap)),
            wake: Condvar::new(),
            stop,
            holders: Holders::default(),
        });
        let handles = (0..workers)
            .map(|_| {
                let (schedule, shared) = (schedule.clone(), shared.clone());
                std::thread::spawn(move || schedule.work(&*shared))
            })
            .collect();
        (schedule, handles)
    }

    /// Queues `job`, due now.
    pub fn add(&self, job: J) {
        self.lock().push(Instant::now(), job);
        self.wake.notify_one();
    }

    /// Checks the repositories named `names` soon (after [`COALESCE`]):
    /// a pod that may hold one of their locks ended.
    pub fn hurry(&self, names: &[String]) {
        if names.is_empty() {
            return;
        }
        self.lock().hurry(names, Instant::now() + COALESCE);
        self.wake.notify_all();
    }

    /// Drops every queued repository that was stopped (retired by
    /// discovery), with its open repository and its notifications, instead
    /// of when it would next be due.
    pub fn drop_stopped(&self) {
        let stopped = self.lock().take_stopped();
        for job in &stopped {
            self.holders.forget(job.name());
        }
        // Closed here, outside the queue's lock, which the workers wait on.
        drop(stopped);
    }

    fn lock(&self) -> MutexGuard<'_, Queue<J>> {
        self.queue
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A worker: checks the repository due first, again and again, until
    /// the process stops.
    fn work(&self, shared: &J::Shared) {
        while let Some(mut watched) = self.next_due() {
            let step = std::panic::catch_unwind(AssertUnwindSafe(|| watched.check(shared)));
            let wait = step.unwrap_or_else(|_| Some(watched.after_panic()));
            match wait {
                Some(_) => self.holders.record(watched.name(), watched.inventory()),
                None => self.holders.forget(watched.name()),
            }
            let mut queue = self.lock();
            queue.finished(watched.tenant());
            match wait {
                Some(wait) => queue.requeue(Instant::now(), wait, watched),
                None => {
                    queue.again.remove(watched.name());
                    drop(queue);
                    // Closed outside the queue's lock.
                    drop(watched);
                }
            }
            // A job of its tenant that waited may be due now.
            self.wake.notify_one();
        }
    }

    /// The repository due first whose tenant has a check to spare, once it
    /// is due; `None` once the process stops.
    fn next_due(&self) -> Option<J> {
        let mut queue = self.lock();
        loop {
            if self.stop.is_stopped() {
                return None;
            }
            let now = Instant::now();
            let wait = match queue.take(now) {
                Take::Job(job) => return Some(job),
                Take::Wait(Some(at)) => (at - now).min(POLL),
                Take::Wait(None) => POLL,
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

    /// A job of these tests: a name and a tenant.
    #[derive(Debug)]
    struct Fake {
        name: String,
        tenant: Option<String>,
        stopped: bool,
        failing: bool,
    }

    impl Job for Fake {
        fn name(&self) -> &str {
            &self.name
        }

        fn tenant(&self) -> Option<&str> {
            self.tenant.as_deref()
        }

        fn is_stopped(&self) -> bool {
            self.stopped
        }

        fn is_backing_off(&self) -> bool {
            self.failing
        }
    }

    fn fake(name: &str, tenant: Option<&str>) -> Fake {
        Fake {
            name: name.to_owned(),
            tenant: tenant.map(str::to_owned),
            stopped: false,
            failing: false,
        }
    }

    /// The names of the jobs taken at `now` until none is.
    fn take_all(queue: &mut Queue<Fake>, now: Instant) -> Vec<String> {
        std::iter::from_fn(|| match queue.take(now) {
            Take::Job(job) => Some(job.name),
            Take::Wait(_) => None,
        })
        .collect()
    }

    #[test]
    fn a_tenant_at_its_cap_waits_and_the_others_go_on() {
        let now = Instant::now();
        let mut queue = Queue::new(2);
        for i in 0..5 {
            queue.push(now, fake(&format!("a{i}"), Some("a")));
        }
        queue.push(now, fake("b0", Some("b")));
        queue.push(now, fake("fixed", None));
        assert_eq!(take_all(&mut queue, now), ["a0", "a1", "b0", "fixed"]);
        // One of a's checks ends: its next job, and only that one, may go.
        queue.finished(Some("a"));
        assert_eq!(take_all(&mut queue, now), ["a2"]);
        queue.finished(Some("a"));
        queue.finished(Some("a"));
        assert_eq!(take_all(&mut queue, now), ["a3", "a4"]);
        for tenant in ["a", "a", "b"] {
            queue.finished(Some(tenant));
        }
        queue.finished(None);
        assert!(queue.tenants.is_empty(), "no tenant is left behind");
        assert!(matches!(queue.take(now), Take::Wait(None)));
    }

    #[test]
    fn jobs_of_no_tenant_are_never_held_back() {
        let now = Instant::now();
        let mut queue = Queue::new(1);
        for i in 0..10 {
            queue.push(now, fake(&i.to_string(), None));
        }
        assert_eq!(take_all(&mut queue, now).len(), 10);
    }

    #[test]
    fn a_job_that_waited_goes_back_ahead_of_those_due_after_it() {
        let now = Instant::now();
        let later = now + Duration::from_secs(1);
        let mut queue = Queue::new(1);
        queue.push(now, fake("a0", Some("a")));
        queue.push(now, fake("a1", Some("a")));
        queue.push(later, fake("c0", Some("c")));
        assert_eq!(take_all(&mut queue, now), ["a0"]);
        assert!(
            matches!(queue.take(now), Take::Wait(Some(at)) if at == later),
            "c0 is due later; a1 waits for a0"
        );
        queue.finished(Some("a"));
        assert_eq!(take_all(&mut queue, later), ["a1", "c0"]);
    }

    #[test]
    fn a_hurried_job_is_due_at_once_or_again_when_it_comes_back() {
        let now = Instant::now();
        let later = now + Duration::from_secs(300);
        let mut queue = Queue::new(4);
        queue.push(later, fake("idle", None));
        queue.push(later, fake("holder", None));
        queue.push(now, fake("busy", None));
        assert_eq!(take_all(&mut queue, now), ["busy"], "the others wait");
        let names = ["holder".to_owned(), "busy".to_owned()];
        queue.hurry(&names, now + COALESCE);
        queue.hurry(&names, now + COALESCE);
        assert_eq!(take_all(&mut queue, now + COALESCE), ["holder"]);
        queue.requeue(now, Duration::from_secs(300), fake("busy", None));
        assert_eq!(
            take_all(&mut queue, now + COALESCE),
            ["busy"],
            "hurried while in flight: due again at once, once"
        );
        queue.requeue(now, Duration::from_secs(300), fake("busy", None));
        assert!(take_all(&mut queue, now + COALESCE).is_empty());
        assert!(matches!(queue.take(now), Take::Wait(Some(at)) if at == later));
    }

    #[test]
    fn a_failing_jobs_backoff_is_not_shortened_and_a_stopped_one_is_forgotten() {
        let now = Instant::now();
        let backoff = now + Duration::from_secs(80);
        let mut queue = Queue::new(4);
        let failing = Fake {
            failing: true,
            ..fake("failing", None)
        };
        queue.push(backoff, failing);
        let names = ["failing".to_owned(), "in-flight".to_owned()];
        queue.hurry(&names, now + COALESCE);
        assert!(
            take_all(&mut queue, now + COALESCE).is_empty(),
            "backoff kept"
        );
        let back = Fake {
            failing: true,
            ..fake("in-flight", None)
        };
        queue.requeue(now, Duration::from_secs(80), back);
        assert!(
            take_all(&mut queue, now + COALESCE).is_empty(),
            "backoff kept"
        );
        queue.hurry(&["gone".to_owned()], now);
        queue.push(
            now + Duration::from_secs(9),
            Fake {
                stopped: true,
                ..fake("gone", None)
            },
        );
        queue.take_stopped();
        assert!(queue.again.is_empty(), "{:?}", queue.again);
    }

    #[test]
    fn stopped_jobs_are_dropped_from_the_tenants_queues_too() {
        let now = Instant::now();
        let mut queue = Queue::new(1);
        let jobs = [("a0", false), ("a1", true), ("a2", false), ("a3", true)];
        for (name, stopped) in jobs {
            let job = Fake {
                stopped,
                ..fake(name, Some("a"))
            };
            queue.push(now, job);
        }
        let later = Fake {
            stopped: true,
            ..fake("c0", Some("c"))
        };
        queue.push(now + Duration::from_secs(1), later);
        assert_eq!(take_all(&mut queue, now), ["a0"]);
        let mut dropped: Vec<String> = queue.take_stopped().into_iter().map(|f| f.name).collect();
        dropped.sort();
        assert_eq!(dropped, ["a1", "a3", "c0"]);
        queue.finished(Some("a"));
        assert_eq!(take_all(&mut queue, now), ["a2"]);
        assert!(matches!(queue.take(now), Take::Wait(None)));
    }

    /// When a healthy repository (tenant `healthy`), due at the same
    /// instant as `hostile` repositories but queued after them, starts: its
    /// delay, with `workers` workers and `cap` checks per tenant, each
    /// hostile check holding its worker for `check` and due again a second
    /// after it ends (a failed check's backoff).
    fn healthy_delay(hostile: &[&str], workers: usize, cap: usize, check: Duration) -> Duration {
        let start = Instant::now();
        let mut queue = Queue::new(cap);
        for (i, tenant) in hostile.iter().enumerate() {
            queue.push(start, fake(&format!("hostile-{i}"), Some(tenant)));
        }
        queue.push(start, fake("healthy", Some("healthy")));
        // Checks in flight: when each ends, and its job.
        let mut busy: Vec<(Instant, Fake)> = Vec::new();
        let mut now = start;
        loop {
            while busy.len() < workers {
                match queue.take(now) {
                    Take::Job(job) if job.name == "healthy" => return now - start,
                    Take::Job(job) => busy.push((now + check, job)),
                    Take::Wait(_) => break,
                }
            }
            busy.sort_by_key(|(end, _)| std::cmp::Reverse(*end));
            let (end, job) = busy
                .pop()
                .expect("a worker is busy, or the healthy one started");
            now = end;
            queue.finished(job.tenant());
            queue.push(end + Duration::from_secs(1), job);
        }
    }

    /// docs/watch.md: a healthy repository waits for no hostile check when
    /// the hostile repositories are in fewer than workers / cap tenants,
    /// and at most ceil(N / workers) checks' time (deadline + timeout each)
    /// behind N hostile repositories due before it however they are spread.
    #[test]
    fn a_healthy_repository_waits_at_most_the_documented_delay() {
        use crate::limits::{TENANT_WORKERS as CAP, WATCH_WORKERS as WORKERS};
        let check = Duration::from_secs(300);
        let rounds = |n: usize| check * u32::try_from(n.div_ceil(WORKERS)).expect("small");
        let one_tenant = vec!["a"; 1000];
        let three_tenants: Vec<&str> = (0..1000).map(|i| ["a", "b", "c"][i % 3]).collect();
        let spread: Vec<String> = (0..100).map(|i| format!("t{i}")).collect();
        let spread: Vec<&str> = spread.iter().map(String::as_str).collect();
        assert_eq!(
            healthy_delay(&one_tenant, WORKERS, CAP, check),
            Duration::ZERO
        );
        assert_eq!(
            healthy_delay(&three_tenants, WORKERS, CAP, check),
            Duration::ZERO
        );
        let delay = healthy_delay(&spread, WORKERS, CAP, check);
        assert!(delay <= rounds(spread.len()), "{delay:?}");
        // Without the cap, one tenant holds every worker.
        let uncapped = healthy_delay(&one_tenant, WORKERS, WORKERS, check);
        assert!(uncapped >= check, "{uncapped:?}");
        assert!(uncapped <= rounds(one_tenant.len()), "{uncapped:?}");
    }

    /// A job the workers check: each check is counted in the schedule's
    /// shared counter; after `left` of them it stops itself, until then it
    /// is due again after `wait`. Its pods are `backup-*` of namespace `ns`.
    struct Counted {
        name: String,
        left: u32,
        wait: Duration,
        inventory: Option<(InventorySource, Regex)>,
    }

    impl Counted {
        fn new(name: &str, left: u32, wait: Duration) -> Counted {
            let source = InventorySource::Kubernetes {
                namespaces: Some(vec!["ns".to_owned()]),
            };
            Counted {
                name: name.to_owned(),
                left,
                wait,
                inventory: Some((source, Regex::new("^backup-").expect("regex"))),
            }
        }
    }

    impl Job for Counted {
        fn name(&self) -> &str {
            &self.name
        }

        fn tenant(&self) -> Option<&str> {
            None
        }

        fn is_stopped(&self) -> bool {
            false
        }

        fn is_backing_off(&self) -> bool {
            false
        }
    }

    impl Check for Counted {
        type Shared = std::sync::atomic::AtomicU32;

        fn check(&mut self, checks: &Self::Shared) -> Option<Duration> {
            checks.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            self.left = self.left.saturating_sub(1);
            (self.left > 0).then_some(self.wait)
        }

        fn after_panic(&mut self) -> Duration {
            self.wait
        }

        fn inventory(&self) -> Option<&(InventorySource, Regex)> {
            self.inventory.as_ref()
        }
    }

    #[test]
    fn workers_check_each_job_when_due_until_it_stops_and_track_its_pods() {
        use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
        let stop = Arc::new(Stop::default());
        let checks = Arc::new(AtomicU32::new(0));
        let (schedule, handles) = Schedule::<Counted>::start(checks.clone(), stop.clone(), 2, 1);
        // `a` is due again in an hour; `b` at once, and stops at its third.
        schedule.add(Counted::new("a", 10, Duration::from_secs(3600)));
        schedule.add(Counted::new("b", 3, Duration::ZERO));
        let holding = || {
            let mut names = schedule.holders.holding("ns", &["backup-1".to_owned()]);
            names.sort();
            names
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while (checks.load(SeqCst), holding()) != (4, vec!["a".to_owned()]) {
            assert!(
                Instant::now() < deadline,
                "{} checks, holders {:?}",
                checks.load(SeqCst),
                holding()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(POLL);
        assert_eq!(checks.load(SeqCst), 4, "a is not due, b was dropped");
        assert_eq!(holding(), ["a"], "b is forgotten, a kept");
        stop.stop();
        for handle in handles {
            handle.join().expect("a worker ends with the stop signal");
        }
    }
}
