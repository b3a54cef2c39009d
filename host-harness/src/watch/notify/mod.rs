//! Notifications: `watch` tells someone when a lock is removed, when a
//! stale lock is kept, when a lock is held long, when a file cannot be read,
//! when a repository's checks keep failing and when they recover.
//!
//! - [`event`]: the events and their JSON (schema `lockwarden.event.v1`);
//! - [`tracker`]: which events a check gives rise to, each sent once;
//! - [`settings`]: the configuration's `notify` tables;
//! - [`webhook`] and [`hook`]: the sinks.
//!
//! An event's message is escaped once, when it is dispatched
//! ([`crate::text::escape`]: control characters, bidirectional overrides):
//! its log line, its Kubernetes Event and the `message` of its JSON all
//! show the same text; the JSON's other fields hold the values as they are,
//! escaped by JSON itself.
//!
//! Each event is one log line (`event = ...` among its fields) and, when the
//! repository has sinks and the kind is not filtered out, is handed to the
//! repository's sender thread through a bounded queue. A full queue drops
//! the event (logged, counted in `lockwarden_notifications_dropped_total`):
//! a slow or hung receiver never delays a check. Delivery is at most once
//! per event.

pub mod event;
pub mod hook;
pub mod kubernetes;
pub mod settings;
pub mod tracker;
pub mod webhook;

use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use event::Event;
use hook::HookSink;
use kubernetes::KubernetesSink;
use settings::NotifySettings;
use tracker::Tracker;
use webhook::WebhookSink;

use super::discover::Owner;
use super::metrics::{Metrics, Repo, RepoSinkResult};
use crate::kubernetes::Connection;
use crate::limits;
use crate::repo::lockfile::short;
use crate::text::escape;
use crate::warden::Report;

/// The notifications of one repository, owned by its thread.
pub struct Notifier {
    settings: NotifySettings,
    tracker: Tracker,
    queue: Option<SyncSender<Event>>,
    metrics: Arc<Metrics>,
    name: String,
    hidden: Vec<String>,
}

impl Notifier {
    /// The notifier of repository `name`; starts its sender thread when
    /// `settings` has sinks or the repository has an `owner` (a discovered
    /// one, whose events become Kubernetes Events on that object, posted
    /// through `kubernetes`, the client handed down). No text
    /// in `hidden` (the repository's location, as written and redacted, and
    /// a discovered one's password and storage variables) ever leaves in an
    /// event: it is replaced by the repository's name.
    pub fn start(
        name: &str,
        settings: NotifySettings,
        owner: Option<Owner>,
        kubernetes: &Connection,
        hidden: Vec<String>,
        metrics: Arc<Metrics>,
    ) -> Notifier {
        let queue = (settings.has_sinks() || owner.is_some()).then(|| {
            let (tx, rx) = sync_channel(limits::NOTIFY_QUEUE);
            let sinks = Sinks::of(&settings, owner, kubernetes);
            let (metrics, name) = (metrics.clone(), name.to_owned());
            std::thread::spawn(move || send_all(&rx, &sinks, &metrics, &name));
            tx
        });
        Notifier {
            tracker: Tracker::new(name),
            settings,
            queue,
            metrics,
            name: name.to_owned(),
            hidden: hidden.into_iter().filter(|h| h.len() > 1).collect(),
        }
    }

    /// Tells what one successful check found; `report_mode` when the
    /// repository is watched in report mode.
    pub fn after_check(&mut self, report: &Report, report_mode: bool) {
        let events = self
            .tracker
            .after_check(report, report_mode, &self.settings);
        self.dispatch(events);
    }

    /// Tells that a check failed with `error`, when it makes
    /// `failing_after` in a row.
    pub fn after_failure(&mut self, error: &str) {
        let events = self
            .tracker
            .after_failure(error, crate::time::now(), &self.settings);
        self.dispatch(events);
    }

    fn dispatch(&self, events: Vec<Event>) {
        let mut dropped = 0u64;
        for mut event in events {
            self.seal(&mut event);
            log(&event);
            let Some(queue) = &self.queue else { continue };
            if !self.settings.events.contains(&event.event) {
                continue;
            }
            if queue.try_send(event).is_err() {
                dropped += 1;
            }
        }
        if dropped > 0 {
            // Once per check, however many: junk files by the thousand must
            // not flood the log.
            self.metrics
                .notifications_dropped
                .get_or_create(&Repo {
                    repository: self.name.clone(),
                })
                .inc_by(dropped);
            tracing::warn!(
                "{dropped} notifications dropped: {} are still waiting to be sent",
                limits::NOTIFY_QUEUE
            );
        }
    }

    /// The event as it leaves: what `hidden` holds replaced ([`Self::scrub`],
    /// first, so that a secret holding a character escaping changes is
    /// still found), then its message escaped.
    fn seal(&self, event: &mut Event) {
        self.scrub(event);
        event.message = escape(&event.message).into_owned();
    }

    fn scrub(&self, event: &mut Event) {
        let instead = format!("`{}`", self.name);
        let clean = |text: &mut String| {
            for hidden in &self.hidden {
                if text.contains(hidden.as_str()) {
                    *text = text.replace(hidden.as_str(), &instead);
                }
            }
        };
        clean(&mut event.message);
        if let Some(error) = &mut event.error {
            clean(error);
        }
        if let Some(verdict) = &mut event.verdict {
            clean(&mut verdict.reason);
        }
        if let Some(file) = &mut event.file {
            clean(&mut file.problem);
        }
    }
}

/// The one log line of an event, at warning level for events to act on;
/// its message escaped already ([`Notifier::dispatch`]).
fn log(event: &Event) {
    let kind = event.event.name();
    let id = event
        .lock
        .as_ref()
        .map(|l| l.id.as_str())
        .or(event.file.as_ref().map(|f| f.id.as_str()))
        .map(short)
        .unwrap_or_default();
    let rule = event
        .verdict
        .as_ref()
        .map(|v| escape(&v.rule).into_owned())
        .unwrap_or_default();
    let message = &event.message;
    if event.event.is_warning() {
        tracing::warn!(event = kind, lock = id, rule = %rule, "{message}");
    } else {
        tracing::info!(event = kind, lock = id, rule = %rule, "{message}");
    }
}

/// Where one repository's events go.
struct Sinks {
    webhook: Option<WebhookSink>,
    hook: Option<HookSink>,
    kubernetes: Option<KubernetesSink>,
}

impl Sinks {
    fn of(settings: &NotifySettings, owner: Option<Owner>, kubernetes: &Connection) -> Sinks {
        let events = |owner| KubernetesSink::new(owner, kubernetes.clone(), settings.timeout);
        Sinks {
            kubernetes: owner.map(events),
            webhook: settings
                .webhook
                .clone()
                .map(|w| WebhookSink::new(w, settings.timeout, settings.retries)),
            hook: settings
                .command
                .clone()
                .map(|c| HookSink::new(c, settings.timeout)),
        }
    }
}

/// The sender thread: delivers each queued event to every sink, one event
/// at a time, until the repository's thread is gone.
fn send_all(queue: &Receiver<Event>, sinks: &Sinks, metrics: &Metrics, name: &str) {
    while let Ok(event) = queue.recv() {
        let body = event.to_json();
        let kind = event.event.name();
        // Counts what became of the event at `sink`, logging a failure.
        let outcome = |sink: &str, failed: &str, result: Result<(), String>| {
            metrics
                .notifications_sent
                .get_or_create(&RepoSinkResult {
                    repository: name.to_owned(),
                    sink: sink.into(),
                    result: if result.is_ok() { "ok" } else { "failed" }.into(),
                })
                .inc();
            if let Err(why) = result {
                tracing::warn!(
                    repository = %escape(name),
                    event = kind,
                    "{failed}: {}",
                    escape(&why)
                );
            }
        };
        if let Some(webhook) = &sinks.webhook {
            let failed = format!("webhook {}: not delivered", webhook.shown());
            outcome("webhook", &failed, webhook.deliver(&event.id, &body));
        }
        if let Some(hook) = &sinks.hook {
            outcome(
                "command",
                "notification command failed",
                hook.deliver(&body),
            );
        }
        if let Some(result) = sinks.kubernetes.as_ref().and_then(|k| k.deliver(&event)) {
            outcome("kubernetes", "Kubernetes Event not created", result);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use event::{EventKind, RepositoryRef};

    /// Secrets are replaced first, then the message is escaped once: the
    /// same text for the log line and every sink.
    #[test]
    fn a_message_is_scrubbed_then_escaped_once() {
        let notifier = Notifier::start(
            "demo",
            NotifySettings::default(),
            None,
            &Connection::none(),
            vec!["pa\\ss\nword".into()],
            Arc::new(Metrics::new()),
        );
        let mut event = Event::new(EventKind::ChecksFailing, 0, &RepositoryRef::default());
        event.message = "lock (root\n@e\u{1b}[2J\u{202e}x) with pa\\ss\nword".into();
        event.error = Some("raw\n".into());
        notifier.seal(&mut event);
        assert_eq!(
            event.message,
            "lock (root\\n@e\\u{1b}[2J\\u{202e}x) with `demo`"
        );
        assert_eq!(
            event.error.as_deref(),
            Some("raw\n"),
            "JSON escapes its fields"
        );
    }
}
