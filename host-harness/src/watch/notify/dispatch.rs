//! The one notification dispatcher of a `watch` run: a fixed set of at most
//! [`limits::NOTIFY_SENDERS`] sender threads shared by every repository, however many there
//! are, and a bounded queue per sink.
//!
//! A sink is a destination: one webhook (its URL, token file, timeout and
//! retries), one command (its text and timeout), or the Kubernetes API
//! (every discovered repository's Events). Repositories with the same
//! webhook share its queue and its sender; each repository may hold at most
//! [`limits::NOTIFY_QUEUE`] events in one sink's queue, so a noisy
//! repository cannot crowd the others out, and a slow sink fills only its
//! own queue. Enqueuing never blocks: an event that finds its repository's
//! share full is dropped, and counted by the caller.
//!
//! A sink delivers one event at a time, each repository's in the order
//! they were queued and the repositories in turn (so a repository with
//! many events waiting delays another's by one delivery), so a hung
//! receiver holds one sender, never a check; the others serve the
//! other sinks in turn. Each queued event is taken off its queue once,
//! before its delivery: delivery is at most once. A repository no longer
//! watched (its object deleted, or changed and watched anew under the same
//! name) leaves its queued events to be delivered, since they tell what
//! happened; one watched anew under its name takes its place in the queue
//! and its share. Senders start when events
//! wait and none is idle, up to [`limits::NOTIFY_SENDERS`]; they live as long as the
//! process (a stopped `watch` does not wait for them, as before).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use super::event::Event;
use super::hook::HookSink;
use super::kubernetes::KubernetesSink;
use super::settings::{NotifySettings, Webhook};
use super::webhook::WebhookSink;
use crate::limits;
use crate::text::escape;
use crate::watch::metrics::{Metrics, RepoSinkResult};
use crate::watch::owner::Owner;

/// Which queue an event waits in: one per distinct destination.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum SinkKey {
    Webhook(Webhook, Duration, u32),
    Command(String, Duration),
    Kubernetes,
}

/// Where one queued event goes.
#[derive(Clone)]
enum Target {
    Webhook(Arc<WebhookSink>),
    Command(Arc<HookSink>),
    Kubernetes(Arc<KubernetesSink>),
}

/// One sink of one repository: the queue and what delivers.
#[derive(Clone)]
pub struct Route {
    key: SinkKey,
    target: Target,
}

/// One event waiting for one sink.
struct Delivery {
    repository: Arc<str>,
    event: Arc<Event>,
    target: Target,
}

/// The events waiting for one sink: each repository's in the order they
/// came, the repositories in turn, so that one with many events waiting
/// delays another's by one delivery, not by its whole share.
#[derive(Default)]
struct SinkQueue {
    /// Each repository's events, at most [`limits::NOTIFY_QUEUE`].
    per_repository: HashMap<Arc<str>, VecDeque<Delivery>>,
    /// The repositories with events waiting, whose turn is next first.
    turns: VecDeque<Arc<str>>,
    /// True while the sink is on the ready list or a sender delivers for it.
    busy: bool,
}

impl SinkQueue {
    /// Queues `delivery` behind its repository's others; false (dropped)
    /// when that repository's share is full.
    fn push(&mut self, delivery: Delivery) -> bool {
        let waiting = (self.per_repository)
            .entry(delivery.repository.clone())
            .or_default();
        if waiting.len() >= limits::NOTIFY_QUEUE {
            return false;
        }
        if waiting.is_empty() {
            self.turns.push_back(delivery.repository.clone());
        }
        waiting.push_back(delivery);
        true
    }

    /// The first event of the repository whose turn it is; that repository
    /// goes to the back of the line if it has more.
    fn take(&mut self) -> Option<Delivery> {
        let repository = self.turns.pop_front()?;
        let waiting = self.per_repository.get_mut(&repository)?;
        let delivery = waiting.pop_front();
        if waiting.is_empty() {
            self.per_repository.remove(&repository);
        } else {
            self.turns.push_back(repository);
        }
        delivery
    }

    /// Whether no event waits.
    fn is_empty(&self) -> bool {
        self.turns.is_empty()
    }
}

#[derive(Default)]
struct State {
    queues: HashMap<SinkKey, SinkQueue>,
    /// Sinks with events waiting and no delivery in flight, in turn.
    ready: VecDeque<SinkKey>,
    senders: usize,
    idle: usize,
    /// The webhooks and commands made so far, so that repositories sharing
    /// one share its client.
    targets: HashMap<SinkKey, Target>,
}

struct Inner {
    state: Mutex<State>,
    wake: Condvar,
    metrics: Arc<Metrics>,
}

/// The dispatcher: cloned into every repository's notifier.
#[derive(Clone)]
pub struct Dispatcher {
    inner: Arc<Inner>,
}

impl Dispatcher {
    /// A dispatcher counting what it sends in `metrics`; no thread runs
    /// until an event is queued.
    pub fn new(metrics: Arc<Metrics>) -> Dispatcher {
        Dispatcher {
            inner: Arc::new(Inner {
                state: Mutex::new(State::default()),
                wake: Condvar::new(),
                metrics,
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A sender never panics holding the lock; if one did, the queues
        // are still whole (each change is one push or pop).
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The metrics it counts in.
    pub fn metrics(&self) -> Arc<Metrics> {
        self.inner.metrics.clone()
    }

    /// The sender threads started so far (at most [`limits::NOTIFY_SENDERS`]).
    pub fn senders(&self) -> usize {
        self.state().senders
    }

    /// The sinks of a repository with `settings` and, for a discovered one,
    /// its `owner` (its Events posted through `kubernetes`).
    pub fn routes(
        &self,
        settings: &NotifySettings,
        owner: Option<Owner>,
        kubernetes: &crate::kubernetes::Connection,
    ) -> Vec<Route> {
        let mut routes = Vec::new();
        let mut state = self.state();
        let mut shared = |key: SinkKey, make: &dyn Fn() -> Target| {
            let target = state
                .targets
                .entry(key.clone())
                .or_insert_with(make)
                .clone();
            routes.push(Route { key, target });
        };
        if let Some(hook) = &settings.webhook {
            let key = SinkKey::Webhook(hook.clone(), settings.timeout, settings.retries);
            shared(key, &|| {
                let sink = WebhookSink::new(hook.clone(), settings.timeout, settings.retries);
                Target::Webhook(Arc::new(sink))
            });
        }
        if let Some(command) = &settings.command {
            let key = SinkKey::Command(command.clone(), settings.timeout);
            shared(key, &|| {
                Target::Command(Arc::new(HookSink::new(command.clone(), settings.timeout)))
            });
        }
        drop(state);
        if let Some(owner) = owner {
            let sink = KubernetesSink::new(owner, kubernetes.clone(), settings.timeout);
            routes.push(Route {
                key: SinkKey::Kubernetes,
                target: Target::Kubernetes(Arc::new(sink)),
            });
        }
        routes
    }

    /// Queues `event` of `repository` for each of `routes`, never waiting;
    /// how many of those deliveries were dropped (the repository's share of
    /// a sink's queue was full).
    pub fn enqueue(&self, repository: &Arc<str>, event: Event, routes: &[Route]) -> u64 {
        let event = Arc::new(event);
        let mut dropped = 0;
        let mut state = self.state();
        for route in routes {
            let queue = state.queues.entry(route.key.clone()).or_default();
            let delivery = Delivery {
                repository: repository.clone(),
                event: event.clone(),
                target: route.target.clone(),
            };
            if !queue.push(delivery) {
                dropped += 1;
                continue;
            }
            if !queue.busy {
                queue.busy = true;
                state.ready.push_back(route.key.clone());
                self.wake(&mut state);
            }
        }
        dropped
    }

    /// A sink was put on the ready list: wakes the idle senders, or starts
    /// one more when they are fewer than the sinks ready (the others are
    /// busy delivering), up to [`limits::NOTIFY_SENDERS`].
    fn wake(&self, state: &mut State) {
        if state.ready.len() > state.idle && state.senders < limits::NOTIFY_SENDERS {
            let dispatcher = self.clone();
            let started = std::thread::Builder::new()
                .name("notify".into())
                .spawn(move || dispatcher.serve());
            match started {
                Ok(_) => state.senders += 1,
                Err(e) => tracing::error!("cannot start a notification sender: {e}"),
            }
        }
        self.inner.wake.notify_all();
    }

    /// A sender: takes the next ready sink's first event, delivers it, puts
    /// the sink back in line when more wait; forever.
    fn serve(&self) {
        loop {
            let (key, delivery) = self.next();
            deliver(&self.inner.metrics, &delivery);
            let mut state = self.state();
            let State { queues, ready, .. } = &mut *state;
            match queues.get_mut(&key) {
                Some(queue) if !queue.is_empty() => ready.push_back(key),
                _ => {
                    queues.remove(&key);
                }
            }
        }
    }

    /// Waits for a ready sink; its key and its first event, taken off the
    /// queue.
    fn next(&self) -> (SinkKey, Delivery) {
        let mut state = self.state();
        loop {
            while let Some(key) = state.ready.pop_front() {
                let Some(queue) = state.queues.get_mut(&key) else {
                    continue;
                };
                let Some(delivery) = queue.take() else {
                    queue.busy = false;
                    continue;
                };
                return (key, delivery);
            }
            state.idle += 1;
            state = (self.inner.wake.wait(state)).unwrap_or_else(|e| e.into_inner());
            state.idle -= 1;
        }
    }
}

/// Delivers one event to its sink, counting what became of it and logging
/// a failure.
fn deliver(metrics: &Metrics, delivery: &Delivery) {
    let event = &delivery.event;
    let (sink, failed, result) = match &delivery.target {
        Target::Webhook(webhook) => (
            "webhook",
            format!("webhook {}: not delivered", webhook.shown()),
            (webhook.deliver(&event.id, &event.to_json())).map_err(|e| e.to_string()),
        ),
        Target::Command(hook) => (
            "command",
            "notification command failed".to_owned(),
            hook.deliver(&event.to_json()).map_err(|e| e.to_string()),
        ),
        Target::Kubernetes(kubernetes) => match kubernetes.deliver(event) {
            None => return,
            Some(result) => (
                "kubernetes",
                "Kubernetes Event not created".to_owned(),
                result.map_err(|e| e.to_string()),
            ),
        },
    };
    let repository = &*delivery.repository;
    metrics
        .notifications_sent
        .get_or_create(&RepoSinkResult {
            repository: repository.to_owned(),
            sink: sink.into(),
            result: if result.is_ok() { "ok" } else { "failed" }.into(),
        })
        .inc();
    if let Err(why) = result {
        tracing::warn!(
            repository = %escape(repository),
            event = event.event.name(),
            "{failed}: {}",
            escape(&why)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubernetes::Connection;
    use crate::watch::notify::event::{EventKind, RepositoryRef};
    use std::net::TcpListener;
    use std::time::Instant;

    /// The threads of this process named as senders are.
    fn sender_threads() -> usize {
        let tasks = std::fs::read_dir("/proc/self/task").expect("/proc/self/task");
        tasks
            .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
            .filter(|name| name.trim_end() == "notify")
            .count()
    }

    /// A webhook that accepts connections and never answers; the streams
    /// it accepted, as they come.
    fn hung_webhook() -> (Webhook, std::sync::mpsc::Receiver<std::net::TcpStream>) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                if tx.send(stream).is_err() {
                    break;
                }
            }
        });
        let hook = Webhook {
            url,
            shown: "http://127.0.0.1".into(),
            token_file: None,
        };
        (hook, rx)
    }

    fn event(repository: &str) -> Event {
        let repository = RepositoryRef {
            name: repository.into(),
            ..RepositoryRef::default()
        };
        Event::new(EventKind::ChecksFailing, 0, &repository)
    }

    /// A repository with its whole share waiting delays another's first
    /// event by one delivery; each repository's events keep their order.
    #[test]
    fn repositories_take_turns_in_a_sinks_queue() {
        let target = Target::Command(Arc::new(HookSink::new("true".into(), Duration::ZERO)));
        // Each event numbered in its repository's order.
        let delivery = |repository: &str, n: u32| {
            let mut event = event(repository);
            event.consecutive_failures = Some(n);
            Delivery {
                repository: repository.into(),
                event: Arc::new(event),
                target: target.clone(),
            }
        };
        let mut queue = SinkQueue::default();
        let share = limits::NOTIFY_QUEUE as u32;
        for n in 0..share {
            assert!(queue.push(delivery("noisy", n)));
        }
        assert!(!queue.push(delivery("noisy", share)), "its share is full");
        assert!(queue.push(delivery("quiet", 0)));
        let order: Vec<(String, u32)> = std::iter::from_fn(|| queue.take())
            .map(|d| {
                (
                    d.repository.to_string(),
                    d.event.consecutive_failures.unwrap_or(0),
                )
            })
            .collect();
        assert_eq!(order.len(), limits::NOTIFY_QUEUE + 1);
        assert_eq!(order[1], ("quiet".to_owned(), 0), "{order:?}");
        let noisy: Vec<u32> = (order.iter().filter(|(r, _)| r == "noisy"))
            .map(|(_, n)| *n)
            .collect();
        assert_eq!(noisy, (0..share).collect::<Vec<_>>());
        assert!(queue.is_empty());
    }

    /// 5,000 repositories with one global webhook start one sender, not
    /// 5,000; while that webhook hangs, a repository's share of its queue
    /// fills and drops, and another sink (a command) is still served.
    #[test]
    fn senders_do_not_grow_with_repositories_and_a_hung_sink_holds_up_no_other() {
        let dispatcher = Dispatcher::new(Arc::new(Metrics::new()));
        let (hook, accepted) = hung_webhook();
        let global = NotifySettings {
            webhook: Some(hook),
            timeout: Duration::from_secs(3600),
            retries: 0,
            ..NotifySettings::default()
        };
        let none = Connection::none();
        let before = sender_threads();
        for i in 0..5000 {
            let name: Arc<str> = format!("r{i}").into();
            let routes = dispatcher.routes(&global, None, &none);
            assert_eq!(dispatcher.enqueue(&name, event(&name), &routes), 0);
        }
        let _stuck = (accepted.recv_timeout(Duration::from_secs(60))).expect("a delivery began");
        assert_eq!(dispatcher.senders(), 1, "one sink, one sender");
        assert_eq!(sender_threads() - before, 1);
        // One repository's share of the hung webhook's queue.
        let noisy: Arc<str> = "noisy".into();
        let routes = dispatcher.routes(&global, None, &none);
        let dropped: u64 = (0..100)
            .map(|_| dispatcher.enqueue(&noisy, event("noisy"), &routes))
            .sum();
        assert_eq!(dropped, 100 - limits::NOTIFY_QUEUE as u64);
        // A command sink is served while the webhook hangs.
        let with_command = NotifySettings {
            command: Some("cat > /dev/null".into()),
            ..global.clone()
        };
        let routes = dispatcher.routes(&with_command, None, &none);
        let quiet: Arc<str> = "quiet".into();
        assert_eq!(dispatcher.enqueue(&quiet, event("quiet"), &routes), 0);
        let sent = r#"lockwarden_notifications_sent_total{repository="quiet",sink="command",result="ok"} 1"#;
        let deadline = Instant::now() + Duration::from_secs(60);
        while !dispatcher.metrics().encode().contains(sent) {
            assert!(Instant::now() < deadline, "the command never ran");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(dispatcher.senders(), 2, "one per sink in use");
        assert_eq!(sender_threads() - before, 2);
    }
}
