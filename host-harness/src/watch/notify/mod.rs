//! Notifications: `watch` tells someone when a lock is removed, when a
//! stale lock is kept, when a lock is held long, when a file cannot be read,
//! when a repository's checks keep failing and when they recover.
//!
//! - [`event`]: the events and their JSON (schema `lockwarden.event.v1`);
//! - [`tracker`]: which events a check gives rise to, each sent once;
//! - [`settings`]: the configuration's `notify` tables;
//! - [`dispatch`]: the queues and the sender threads every repository shares;
//! - [`webhook`], [`hook`] and [`kubernetes`]: the sinks.
//!
//! An event's message is escaped once, when it is dispatched
//! ([`crate::text::escape`]: control characters, bidirectional overrides):
//! its log line, its Kubernetes Event and the `message` of its JSON all
//! show the same text; the JSON's other fields hold the values as they are,
//! escaped by JSON itself.
//!
//! Each event is one log line (`event = ...` among its fields) and, when the
//! repository has sinks and the kind is not filtered out, is queued for each
//! of its sinks in the run's one [`dispatch::Dispatcher`]: a fixed set of
//! sender threads, shared by every repository, and a bounded queue per sink.
//! A repository's full share of a queue drops the event for that sink
//! (logged, counted in `lockwarden_notifications_dropped_total`): a slow or
//! hung receiver never delays a check. Delivery is at most once per event
//! and sink.

pub mod dispatch;
pub mod event;
pub mod hook;
pub mod kubernetes;
pub mod settings;
pub mod tracker;
pub mod webhook;

use std::sync::Arc;

use dispatch::{Dispatcher, Route};
use event::Event;
use settings::NotifySettings;
use tracker::Tracker;

use crate::kubernetes::Connection;
use crate::limits;
use crate::repo::lockfile::short;
use crate::text::escape;
use crate::warden::Report;
use crate::watch::metrics::{Metrics, Repo};
use crate::watch::owner::Owner;

/// The notifications of one repository, owned by its thread.
pub struct Notifier {
    settings: NotifySettings,
    tracker: Tracker,
    /// Its sinks, none when events go to the log only.
    routes: Vec<Route>,
    dispatcher: Dispatcher,
    metrics: Arc<Metrics>,
    name: Arc<str>,
    hidden: Vec<String>,
}

impl Notifier {
    /// The notifier of repository `name`, its events queued in
    /// `dispatcher` for the sinks of `settings` and, for a discovered
    /// repository (one with an `owner`), for Kubernetes Events on that
    /// object, posted through `kubernetes`, the client handed down. No text
    /// in `hidden` (the repository's location, as written and redacted, and
    /// a discovered one's password and storage variables) ever leaves in an
    /// event: it is replaced by the repository's name.
    pub fn start(
        name: &str,
        settings: NotifySettings,
        owner: Option<Owner>,
        kubernetes: &Connection,
        hidden: Vec<String>,
        dispatcher: &Dispatcher,
    ) -> Notifier {
        Notifier {
            tracker: Tracker::new(name),
            routes: dispatcher.routes(&settings, owner, kubernetes),
            settings,
            dispatcher: dispatcher.clone(),
            metrics: dispatcher.metrics(),
            name: name.into(),
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
            if self.routes.is_empty() || !self.settings.events.contains(&event.event) {
                continue;
            }
            dropped += self.dispatcher.enqueue(&self.name, event, &self.routes);
        }
        if dropped > 0 {
            // Once per check, however many: junk files by the thousand must
            // not flood the log.
            self.metrics
                .notifications_dropped
                .get_or_create(&Repo {
                    repository: self.name.to_string(),
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
            &Dispatcher::new(Arc::new(Metrics::new())),
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
