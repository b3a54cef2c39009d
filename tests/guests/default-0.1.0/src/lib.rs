//! The contract 0.1.0 build of the default policy, built from the current
//! rules (`lockwarden-policy-rules`), so that hosts can be tested against a
//! 0.1.0 component without committing a binary.
//!
//! Glue only, like `plugin/src/lib.rs` for 0.2.0: 0.1.0 has no `stored-at`
//! and no first sighting of an unreadable file, so the rules get `None` for
//! them; it has no batch question, so `Facts::ask` asks each question through
//! `liveness.process` or `liveness.host`; and its verdicts name their input's
//! id, locks first, then unreadable files, each in the request's order.

use lockwarden_policy_rules as rules;

/// Bindings generated from `wit/0.1.0/`.
#[allow(missing_docs, unsafe_code)]
mod bindings {
    wit_bindgen::generate!({
        path: "../../../wit/0.1.0",
        world: "stale-lock-policy",
    });
}

use bindings::exports::lockwarden::policy::policy::Guest;
use bindings::lockwarden::policy::types as wit;
use bindings::lockwarden::policy::{clock, liveness, log};

struct DefaultPolicy;

/// Serves the rules' facts from 0.1.0's imports, one call per question.
struct HostFacts;

impl rules::Facts for HostFacts {
    fn local_hostname(&self) -> Option<String> {
        liveness::local_hostname()
    }
    fn ask(&self, questions: Vec<rules::Question>) -> Vec<rules::Liveness> {
        questions
            .into_iter()
            .map(|question| {
                let answer = match question {
                    rules::Question::Process {
                        hostname,
                        pid,
                        since,
                    } => liveness::process(&hostname, pid, since),
                    rules::Question::Host { hostname, since } => liveness::host(&hostname, since),
                };
                match answer {
                    wit::Liveness::Alive(d) => rules::Liveness::Alive(d),
                    wit::Liveness::Dead(d) => rules::Liveness::Dead(d),
                    wit::Liveness::Unknown(d) => rules::Liveness::Unknown(d),
                }
            })
            .collect()
    }
    fn warn(&self, message: &str) {
        log::log(log::Level::Warn, message);
    }
}

fn lock(l: wit::Lock) -> rules::Lock {
    rules::Lock {
        id: l.id,
        time: l.time,
        exclusive: l.exclusive,
        hostname: l.hostname,
        username: l.username,
        pid: l.pid,
        first_seen: l.first_seen,
        stored_at: None,
    }
}

fn unreadable(u: wit::UnreadableLock) -> rules::Unreadable {
    rules::Unreadable {
        id: u.id,
        size: u.size,
        problem: u.problem,
        stored_at: None,
        first_seen: None,
    }
}

fn verdict(id: String, v: rules::Verdict) -> wit::Verdict {
    wit::Verdict {
        id,
        action: match v.action {
            rules::Action::Keep => wit::Action::Keep,
            rules::Action::Remove => wit::Action::Remove,
        },
        rule: v.rule.into(),
        reason: v.reason,
    }
}

impl Guest for DefaultPolicy {
    fn info() -> wit::PolicyInfo {
        let info = rules::info();
        wit::PolicyInfo {
            name: info.name,
            version: info.version,
            contract_version: lockwarden_wit::v0_1::VERSION.into(),
            description: info.description,
            settings: info
                .settings
                .into_iter()
                .map(|s| wit::SettingInfo {
                    name: s.name,
                    default_value: s.default_value,
                    help: s.help,
                })
                .collect(),
        }
    }

    fn evaluate(request: wit::EvaluateRequest) -> Result<Vec<wit::Verdict>, wit::PolicyError> {
        let settings = rules::Settings::parse(&request.settings)
            .map_err(|rules::PolicyError::InvalidSetting(m)| wit::PolicyError::InvalidSetting(m))?;
        let locks: Vec<rules::Lock> = request.locks.into_iter().map(lock).collect();
        let files: Vec<rules::Unreadable> =
            request.unreadable.into_iter().map(unreadable).collect();
        let verdicts = rules::evaluate(clock::now(), &HostFacts, &settings, &locks, &files);
        let ids = locks
            .into_iter()
            .map(|l| l.id)
            .chain(files.into_iter().map(|f| f.id));
        let decisions = verdicts.locks.into_iter().chain(verdicts.unreadable);
        Ok(ids.zip(decisions).map(|(id, v)| verdict(id, v)).collect())
    }
}

// SAFETY: the generated export glue is the canonical ABI entry points
// wit-bindgen writes for `DefaultPolicy`; it holds no hand-written unsafe code.
#[allow(unsafe_code)]
mod export {
    use super::DefaultPolicy;
    crate::bindings::export!(DefaultPolicy with_types_in crate::bindings);
}
