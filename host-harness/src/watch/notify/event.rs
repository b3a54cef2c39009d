//! What `watch` tells someone: one [`Event`] per thing that happened,
//! serialized as one JSON document (schema [`SCHEMA`]). An event carries the
//! repository's configured name, id and backend, never its location (it may
//! hold credentials), and nothing of a password, token or environment
//! variable. Strings from outside (hostnames, a policy's reasons, errors)
//! are JSON strings, escaped by serde; the human `message` made of them is
//! escaped as a log line is (see [`super`]).

use serde::{Deserialize, Serialize};

use crate::contract::{Lock, UnreadableLock, Verdict};
use crate::runtime::Subject;
use crate::time::format_rfc3339;

/// The schema every event names; a change that breaks a receiver gets a new
/// version.
pub const SCHEMA: &str = "lockwarden.event.v1";

/// The kinds of event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A lock (or an unreadable file) judged stale was removed.
    LockRemoved,
    /// A lock judged stale is still there: report mode, a backend that
    /// cannot remove, or a failed removal.
    StaleLockKept,
    /// A lock judged to keep whose holder has held locks longer than
    /// `held_longer_than`: a hung backup, say.
    LockHeldLong,
    /// A lock file that cannot be read, kept.
    UnreadableFile,
    /// `failing_after` checks in a row failed.
    ChecksFailing,
    /// The first successful check after `checks_failing`.
    Recovered,
}

impl EventKind {
    /// Every kind.
    pub const ALL: [EventKind; 6] = [
        EventKind::LockRemoved,
        EventKind::StaleLockKept,
        EventKind::LockHeldLong,
        EventKind::UnreadableFile,
        EventKind::ChecksFailing,
        EventKind::Recovered,
    ];

    /// The name in JSON and in log lines.
    pub fn name(self) -> &'static str {
        match self {
            EventKind::LockRemoved => "lock_removed",
            EventKind::StaleLockKept => "stale_lock_kept",
            EventKind::LockHeldLong => "lock_held_long",
            EventKind::UnreadableFile => "unreadable_file",
            EventKind::ChecksFailing => "checks_failing",
            EventKind::Recovered => "recovered",
        }
    }

    /// True for events someone should act on (logged as warnings).
    pub fn is_warning(self) -> bool {
        !matches!(self, EventKind::LockRemoved | EventKind::Recovered)
    }
}

/// The repository an event is about.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RepositoryRef {
    /// Its name in the watch configuration.
    pub name: String,
    /// Its id (from its config), once it was opened.
    pub id: Option<String>,
    /// Its backend (`local`, `rest`, `s3`, ...), once it was opened.
    pub backend: Option<String>,
}

/// A lock, as an event shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LockRef {
    /// The lock file's name (64 hex).
    pub id: String,
    /// The holder's hostname, as the lock records it.
    pub hostname: String,
    /// The holder's username.
    pub username: String,
    /// The holder's pid.
    pub pid: i64,
    /// An exclusive lock (prune, check) rather than a shared one.
    pub exclusive: bool,
    /// When the holder wrote it, by the holder's clock (RFC 3339).
    pub time: String,
    /// The event's time minus the lock's, in seconds (negative for a lock
    /// dated in the future).
    pub age_seconds: i64,
}

/// An unreadable lock file, as an event shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileRef {
    /// The file's name (64 hex, or whatever was listed).
    pub id: String,
    /// Its size in bytes.
    pub size: u64,
    /// Why it could not be read.
    pub problem: String,
}

/// A policy's verdict, as an event shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VerdictRef {
    /// `keep` or `remove`.
    pub action: &'static str,
    /// The rule that decided.
    pub rule: String,
    /// Why, in one sentence.
    pub reason: String,
}

/// Why a stale lock is still there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KeptBecause {
    /// The repository is watched with `mode = "report"`.
    ReportMode,
    /// Its backend cannot remove locks (`b2:`, `swift:`).
    CannotRemove,
    /// Removing it failed (see `error`).
    RemovalFailed,
}

/// One event: the JSON document a webhook receives and a hook reads on
/// stdin. Fields that do not apply to its kind are left out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Event {
    /// Always [`SCHEMA`].
    pub schema: &'static str,
    /// This event's own id (32 hex digits), the same in every attempt to
    /// deliver it: a receiver that got it twice (its answer was lost, so
    /// the webhook tried again) can tell.
    pub id: String,
    /// What happened.
    pub event: EventKind,
    /// When lockwarden saw it (RFC 3339, UTC).
    pub time: String,
    /// Where.
    pub repository: RepositoryRef,
    /// The lock it is about, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lock: Option<LockRef>,
    /// The unreadable file it is about, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<FileRef>,
    /// The policy's verdict on that lock or file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<VerdictRef>,
    /// `lock_removed`: true when the file was already gone (its holder or
    /// someone else removed it first).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub already_gone: Option<bool>,
    /// `stale_lock_kept`: why it is still there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept_because: Option<KeptBecause>,
    /// `lock_held_long`: since when the holder has held locks (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_since: Option<String>,
    /// `lock_held_long`: for how many seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_seconds: Option<i64>,
    /// `checks_failing`: failed checks in a row; `recovered`: how many
    /// failed before this success.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consecutive_failures: Option<u32>,
    /// `checks_failing`: the last check's error; `stale_lock_kept` with
    /// `removal_failed`: the removal's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// One sentence for humans (a chat message, a log line), escaped as
    /// log lines are ([`crate::text::escape`]) once it is dispatched.
    pub message: String,
}

impl Event {
    /// An event of `kind` at `now` (ns) about `repository`, with nothing
    /// else set yet.
    pub fn new(kind: EventKind, now: i64, repository: &RepositoryRef) -> Event {
        Event {
            schema: SCHEMA,
            id: event_id(),
            event: kind,
            time: format_rfc3339(now),
            repository: repository.clone(),
            lock: None,
            file: None,
            verdict: None,
            already_gone: None,
            kept_because: None,
            held_since: None,
            held_seconds: None,
            consecutive_failures: None,
            error: None,
            message: String::new(),
        }
    }

    /// This event about `subject` (a lock or an unreadable file) and its
    /// `verdict`, seen at `now`.
    pub fn about(mut self, subject: Subject<'_>, verdict: &Verdict, now: i64) -> Event {
        match subject {
            Subject::Lock(lock) => self.lock = Some(lock_ref(lock, now)),
            Subject::Unreadable(file) => self.file = Some(file_ref(file)),
        }
        self.verdict = Some(VerdictRef {
            action: verdict.action.name(),
            rule: verdict.rule.clone(),
            reason: verdict.reason.clone(),
        });
        self
    }

    /// The document as JSON.
    pub fn to_json(&self) -> Vec<u8> {
        // Serializing plain strings and numbers cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// `lock 1a2b3c4d (user@host, pid 7)` or `unreadable file 1a2b3c4d`, or
    /// the repository for events about no lock.
    pub fn subject(&self) -> String {
        let short = |id: &str| crate::repo::lockfile::short(id).to_owned();
        match (&self.lock, &self.file) {
            (Some(l), _) => format!(
                "lock {} ({}@{}, pid {})",
                short(&l.id),
                l.username,
                l.hostname,
                l.pid
            ),
            (None, Some(f)) => format!("unreadable file {}", short(&f.id)),
            (None, None) => format!("repository {}", self.repository.name),
        }
    }
}

fn lock_ref(lock: &Lock, now: i64) -> LockRef {
    LockRef {
        id: lock.id.clone(),
        hostname: lock.hostname.clone(),
        username: lock.username.clone(),
        pid: lock.pid,
        exclusive: lock.exclusive,
        time: format_rfc3339(lock.time),
        age_seconds: now.saturating_sub(lock.time) / 1_000_000_000,
    }
}

fn file_ref(file: &UnreadableLock) -> FileRef {
    FileRef {
        id: file.id.clone(),
        size: file.size,
        problem: file.problem.clone(),
    }
}

/// A fresh event id: 16 random bytes as hex (from a counter and the time
/// should the system have no random numbers).
fn event_id() -> String {
    let bytes = crate::repo::crypto::random_bytes::<16>()
        .unwrap_or_else(|_| crate::repo::crypto::unique_bytes::<16>());
    hex::encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::{Action, test_lock};

    #[test]
    fn the_json_shape_is_the_documented_one() {
        let mut lock = test_lock(&"ab".repeat(32));
        lock.hostname = "vm\n\"quoted\"".into();
        lock.time = 1_796_040_000_000_000_000;
        let verdict = Verdict {
            action: Action::Keep,
            rule: "holder-alive".into(),
            reason: "process 1 runs".into(),
        };
        let repo = RepositoryRef {
            name: "demo".into(),
            id: Some("c0ffee".into()),
            backend: Some("local".into()),
        };
        let mut event = Event::new(
            EventKind::LockHeldLong,
            1_796_040_000_000_000_000 + 7_200_000_000_000,
            &repo,
        )
        .about(
            Subject::Lock(&lock),
            &verdict,
            1_796_040_000_000_000_000 + 7_200_000_000_000,
        );
        event.held_seconds = Some(7200);
        event.held_since = Some(format_rfc3339(lock.time));
        event.message = "held".into();
        let json: serde_json::Value = serde_json::from_slice(&event.to_json()).expect("valid JSON");
        assert!(
            json["id"].as_str().is_some_and(|id| id.len() == 32),
            "{json}"
        );
        assert_ne!(
            json["id"],
            Event::new(EventKind::Recovered, 0, &event.repository).id
        );
        assert_eq!(
            json,
            serde_json::json!({
                "schema": "lockwarden.event.v1",
                "id": json["id"],
                "event": "lock_held_long",
                "time": "2026-11-30T14:00:00Z",
                "repository": {"name": "demo", "id": "c0ffee", "backend": "local"},
                "lock": {
                    "id": "ab".repeat(32), "hostname": "vm\n\"quoted\"", "username": "u",
                    "pid": 1, "exclusive": false, "time": "2026-11-30T12:00:00Z",
                    "age_seconds": 7200
                },
                "verdict": {"action": "keep", "rule": "holder-alive", "reason": "process 1 runs"},
                "held_since": "2026-11-30T12:00:00Z",
                "held_seconds": 7200,
                "message": "held"
            })
        );
    }

    #[test]
    fn kinds_are_named_as_in_json() {
        for kind in EventKind::ALL {
            let json = serde_json::to_string(&kind).expect("serializes");
            assert_eq!(json, format!("\"{}\"", kind.name()));
        }
    }
}
