//! Recorded requests: the JSON file `lockwarden policy eval` reads, holding the
//! clock reading, the locks, and the liveness answers to serve back.
//!
//! ```json
//! {"now": "2026-11-30T12:00:00Z", "local_hostname": "vm",
//!  "repository": {"id": "abc", "location": "/srv/repo", "backend": "local", "version": 2},
//!  "settings": {"stale-after": "30m"},
//!  "locks": [{"id": "...", "time": "2026-11-30T11:00:00.5Z", "exclusive": false,
//!             "hostname": "a", "username": "u", "pid": 12, "uid": 0, "gid": 0,
//!             "first_seen": null, "process": "unknown", "host": "unknown"}],
//!  "unreadable": [{"id": "...", "size": 0, "problem": "empty file"}]}
//! ```

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::contract::{EvaluateRequest, Liveness, Lock, Repository, UnreadableLock};
use crate::evidence::Recorded;
use crate::time::parse_rfc3339;

/// A request as recorded in JSON. Unknown fields are ignored.
#[derive(Debug, Deserialize)]
pub struct RecordedRequest {
    /// What `clock.now` returns (RFC 3339).
    pub now: String,
    /// What `liveness.local-hostname` returns.
    #[serde(default)]
    pub local_hostname: Option<String>,
    /// The repository.
    pub repository: RecordedRepository,
    /// Settings for the policy.
    #[serde(default)]
    pub settings: BTreeMap<String, String>,
    /// The locks, each with its recorded liveness answers.
    #[serde(default)]
    pub locks: Vec<RecordedLock>,
    /// The unreadable lock files.
    #[serde(default)]
    pub unreadable: Vec<RecordedUnreadable>,
}

/// The repository part of a recorded request.
#[derive(Debug, Deserialize)]
pub struct RecordedRepository {
    /// Repository id.
    pub id: String,
    /// Location, credentials removed.
    pub location: String,
    /// Backend kind.
    pub backend: String,
    /// Format version.
    pub version: u32,
}

/// One lock with the answers to serve about its holder.
#[derive(Debug, Deserialize)]
pub struct RecordedLock {
    /// File name.
    pub id: String,
    /// RFC 3339, any offset.
    pub time: String,
    /// Exclusive or shared.
    #[serde(default)]
    pub exclusive: bool,
    /// Holder's hostname.
    #[serde(default)]
    pub hostname: String,
    /// Holder's user name.
    #[serde(default)]
    pub username: String,
    /// Holder's pid.
    #[serde(default)]
    pub pid: i64,
    /// Holder's uid.
    #[serde(default)]
    pub uid: u32,
    /// Holder's gid.
    #[serde(default)]
    pub gid: u32,
    /// When the host first saw it (RFC 3339), if known.
    #[serde(default)]
    pub first_seen: Option<String>,
    /// When the storage last modified it (RFC 3339), if known.
    #[serde(default)]
    pub stored_at: Option<String>,
    /// Answer to `liveness.process` for this lock.
    #[serde(default)]
    pub process: RecordedLiveness,
    /// Answer to `liveness.host` for this lock.
    #[serde(default)]
    pub host: RecordedLiveness,
}

/// An unreadable lock file.
#[derive(Debug, Deserialize)]
pub struct RecordedUnreadable {
    /// File name.
    pub id: String,
    /// Size in bytes.
    #[serde(default)]
    pub size: u64,
    /// What is wrong with it.
    pub problem: String,
    /// When the storage last modified it (RFC 3339), if known.
    #[serde(default)]
    pub stored_at: Option<String>,
    /// When the host first saw it (RFC 3339), if known.
    #[serde(default)]
    pub first_seen: Option<String>,
}

/// Why a recorded request is refused: the line and column of its JSON, or
/// the field at fault.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// It is not JSON of a request's shape.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// A time is not RFC 3339.
    #[error("{field}: {cause}")]
    Time {
        /// The field (`locks[0].time`).
        field: String,
        /// What is wrong with it.
        cause: String,
    },
}

/// The RFC 3339 time `text` of the request's field `field`.
fn rfc3339(text: &str, field: impl FnOnce() -> String) -> Result<i64, RequestError> {
    parse_rfc3339(text).map_err(|cause| RequestError::Time {
        field: field(),
        cause: cause.to_string(),
    })
}

/// An optional RFC 3339 time of a request; the error names `field`.
fn optional_time(
    text: Option<&str>,
    field: impl FnOnce() -> String,
) -> Result<Option<i64>, RequestError> {
    text.map(|text| rfc3339(text, field)).transpose()
}

/// A liveness answer: `"alive"`, `"dead"`, `"unknown"`, or
/// `{"state": "dead", "detail": "..."}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum RecordedLiveness {
    /// Just the state.
    State(State),
    /// State and detail.
    Detailed {
        /// The state.
        state: State,
        /// How it is known.
        #[serde(default)]
        detail: Option<String>,
    },
}

impl Default for RecordedLiveness {
    fn default() -> Self {
        RecordedLiveness::State(State::Unknown)
    }
}

/// The three liveness states.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Holder exists.
    Alive,
    /// Holder is gone.
    Dead,
    /// Cannot tell.
    Unknown,
}

impl RecordedLiveness {
    fn to_contract(&self) -> Liveness {
        let (state, detail) = match self {
            RecordedLiveness::State(s) => (*s, None),
            RecordedLiveness::Detailed { state, detail } => (*state, detail.clone()),
        };
        let detail = detail.unwrap_or_else(|| "recorded in the request".to_owned());
        match state {
            State::Alive => Liveness::Alive(detail),
            State::Dead => Liveness::Dead(detail),
            State::Unknown => Liveness::Unknown(detail),
        }
    }
}

/// A recorded request made ready to run: the clock reading, the contract's
/// request, and the evidence to serve.
#[derive(Debug)]
pub struct Prepared {
    /// What `clock.now` returns.
    pub now: i64,
    /// The request passed to `evaluate`.
    pub request: EvaluateRequest,
    /// The answers served to `liveness`.
    pub evidence: Recorded,
}

impl Prepared {
    /// Parses a recorded request and prepares it; the error names the line
    /// and column, or the field at fault.
    pub fn from_json(text: &str) -> Result<Prepared, RequestError> {
        RecordedRequest::from_json(text)?.prepare()
    }
}

impl RecordedRequest {
    /// Parses JSON text. The error names the line and column.
    pub fn from_json(text: &str) -> Result<RecordedRequest, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// Converts times and answers; the error names the field at fault.
    pub fn prepare(self) -> Result<Prepared, RequestError> {
        let now = rfc3339(&self.now, || "field `now`".to_owned())?;
        let mut evidence = Recorded::new(self.local_hostname);
        let mut locks = Vec::with_capacity(self.locks.len());
        for (i, l) in self.locks.into_iter().enumerate() {
            let time = rfc3339(&l.time, || format!("locks[{i}].time"))?;
            let first_seen =
                optional_time(l.first_seen.as_deref(), || format!("locks[{i}].first_seen"))?;
            let stored_at =
                optional_time(l.stored_at.as_deref(), || format!("locks[{i}].stored_at"))?;
            evidence.insert(
                &l.hostname,
                l.pid,
                time,
                l.process.to_contract(),
                l.host.to_contract(),
            );
            locks.push(Lock {
                id: l.id,
                time,
                exclusive: l.exclusive,
                hostname: l.hostname,
                username: l.username,
                pid: l.pid,
                uid: l.uid,
                gid: l.gid,
                first_seen,
                stored_at,
            });
        }
        let mut unreadable = Vec::with_capacity(self.unreadable.len());
        for (i, u) in self.unreadable.into_iter().enumerate() {
            let field = |name: &str| format!("unreadable[{i}].{name}");
            unreadable.push(UnreadableLock {
                stored_at: optional_time(u.stored_at.as_deref(), || field("stored_at"))?,
                first_seen: optional_time(u.first_seen.as_deref(), || field("first_seen"))?,
                id: u.id,
                size: u.size,
                problem: u.problem,
            });
        }
        let request = EvaluateRequest {
            repository: Repository {
                id: self.repository.id,
                location: self.repository.location,
                backend: self.repository.backend,
                version: self.repository.version,
            },
            locks,
            unreadable,
            settings: self.settings.into_iter().collect(),
        };
        Ok(Prepared {
            now,
            request,
            evidence,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Prepared;

    #[test]
    fn a_refusal_names_the_line_and_column_or_the_field() {
        let refused = |text: &str| {
            Prepared::from_json(text)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        assert!(refused("{").contains("line 1 column 1"), "{}", refused("{"));
        let request = |now: &str, time: &str| {
            format!(
                r#"{{"now": "{now}", "local_hostname": "h",
                "repository": {{"id": "r", "location": "/r", "backend": "local", "version": 2}},
                "locks": [{{"id": "a", "time": "{time}", "exclusive": false, "hostname": "h",
                "username": "u", "pid": 1, "uid": 0, "gid": 0,
                "process": "alive", "host": "alive"}}]}}"#
            )
        };
        let good = "2026-11-30T12:00:00Z";
        assert_eq!(refused(&request(good, good)), "");
        assert!(
            refused(&request("yesterday", good)).starts_with("field `now`: "),
            "{}",
            refused(&request("yesterday", good))
        );
        assert!(
            refused(&request(good, "soon")).starts_with("locks[0].time: "),
            "{}",
            refused(&request(good, "soon"))
        );
    }
}
