//! Contract 0.1.0 (`wit/0.1.0/`), which this host still runs: its bindings,
//! and the conversions between its records and the current contract's. A
//! 0.1.0 policy gets the facts 0.1.0 has (no `stored-at`, no first sighting
//! of unreadable files), asks one question per call, and names each
//! verdict's input by id.

#[allow(missing_docs)]
mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit/0.1.0/policy.wit",
        world: "stale-lock-policy",
        additional_derives: [PartialEq, Eq],
    });
}

pub use bindings::lockwarden::policy::types::{
    Action, EvaluateRequest, Liveness, Lock, PolicyError, PolicyInfo, UnreadableLock, Verdict,
};
pub use bindings::lockwarden::policy::{clock, liveness, log, types};
pub use bindings::{StaleLockPolicy, StaleLockPolicyPre};

/// The version of this contract.
pub const VERSION: &str = lockwarden_wit::v0_1::VERSION;

/// The 0.1.0 request for a current one: the same locks and files, without
/// the facts 0.1.0 does not have.
pub fn request(request: &super::EvaluateRequest) -> EvaluateRequest {
    let repository = &request.repository;
    EvaluateRequest {
        repository: types::Repository {
            id: repository.id.clone(),
            location: repository.location.clone(),
            backend: repository.backend.clone(),
            version: repository.version,
        },
        locks: request
            .locks
            .iter()
            .map(|l| Lock {
                id: l.id.clone(),
                time: l.time,
                exclusive: l.exclusive,
                hostname: l.hostname.clone(),
                username: l.username.clone(),
                pid: l.pid,
                uid: l.uid,
                gid: l.gid,
                first_seen: l.first_seen,
            })
            .collect(),
        unreadable: request
            .unreadable
            .iter()
            .map(|u| UnreadableLock {
                id: u.id.clone(),
                size: u.size,
                problem: u.problem.clone(),
            })
            .collect(),
        settings: request.settings.clone(),
    }
}

/// A 0.1.0 answer about a holder, from the current one.
pub fn liveness(answer: super::Liveness) -> Liveness {
    match answer {
        super::Liveness::Alive(d) => Liveness::Alive(d),
        super::Liveness::Dead(d) => Liveness::Dead(d),
        super::Liveness::Unknown(d) => Liveness::Unknown(d),
    }
}

/// The current form of what a 0.1.0 policy says about itself.
pub fn info(info: PolicyInfo) -> super::PolicyInfo {
    super::PolicyInfo {
        name: info.name,
        version: info.version,
        contract_version: info.contract_version,
        description: info.description,
        settings: info
            .settings
            .into_iter()
            .map(|s| super::SettingInfo {
                name: s.name,
                default_value: s.default_value,
                help: s.help,
            })
            .collect(),
    }
}

/// The current form of a 0.1.0 policy's error.
pub fn error(error: PolicyError) -> super::PolicyError {
    match error {
        PolicyError::InvalidSetting(m) => super::PolicyError::InvalidSetting(m),
        PolicyError::Failed(m) => super::PolicyError::Failed(m),
    }
}

/// Puts a 0.1.0 policy's verdicts, which name their input by id, in the
/// request's order: exactly one per lock and unreadable file, no other ids.
// Longer than 60 lines: the four refusals (an unknown id, a repeated one, a
// missing one, a removed unreadable file) are made over the one map of slots,
// in the order a 0.1.0 host made them.
pub fn positional(
    request: &super::EvaluateRequest,
    verdicts: Vec<Verdict>,
) -> Result<super::PolicyVerdicts, String> {
    use std::collections::HashMap;
    let ids = request
        .locks
        .iter()
        .map(|l| l.id.as_str())
        .chain(request.unreadable.iter().map(|u| u.id.as_str()));
    let mut slots: HashMap<&str, Option<super::Verdict>> = ids.map(|id| (id, None)).collect();
    for verdict in verdicts {
        let id = crate::text::escape(&verdict.id);
        match slots.get_mut(verdict.id.as_str()) {
            None => return Err(format!("a verdict for `{id}`, which was not in its input")),
            Some(Some(_)) => return Err(format!("two verdicts for `{id}`")),
            Some(slot) => {
                *slot = Some(super::Verdict {
                    action: match verdict.action {
                        Action::Keep => super::Action::Keep,
                        Action::Remove => super::Action::Remove,
                    },
                    rule: verdict.rule,
                    reason: verdict.reason,
                });
            }
        }
    }
    let total = slots.len();
    let mut take = |id: &str| slots.get_mut(id).and_then(Option::take);
    let locks: Vec<_> = request.locks.iter().map(|l| take(&l.id)).collect();
    let unreadable: Vec<_> = request.unreadable.iter().map(|u| take(&u.id)).collect();
    let missing = locks
        .iter()
        .chain(&unreadable)
        .filter(|v| v.is_none())
        .count();
    if missing > 0 {
        let first = request
            .locks
            .iter()
            .map(|l| &l.id)
            .zip(&locks)
            .chain(request.unreadable.iter().map(|u| &u.id).zip(&unreadable))
            .find_map(|(id, v)| v.is_none().then_some(id))
            .map_or("", String::as_str);
        return Err(format!(
            "no verdict for {missing} of {total} inputs (first: `{}`)",
            crate::text::escape(first)
        ));
    }
    let unreadable: Vec<super::Verdict> = unreadable.into_iter().flatten().collect();
    // 0.1.0 promised that the host never removes a file it could not read;
    // its policies see no age evidence, so that promise stands for them.
    if let Some((file, _)) = request
        .unreadable
        .iter()
        .zip(&unreadable)
        .find(|(_, v)| v.action == super::Action::Remove)
    {
        return Err(format!(
            "`remove` for `{}`, an unreadable file: a contract 0.1.0 policy never removes one",
            crate::text::escape(&file.id)
        ));
    }
    Ok(super::PolicyVerdicts {
        locks: locks.into_iter().flatten().collect(),
        unreadable,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::test_request;

    fn verdict(id: &str, action: Action) -> Verdict {
        Verdict {
            id: id.into(),
            action,
            rule: "r".into(),
            reason: "test".into(),
        }
    }

    #[test]
    fn verdicts_by_id_are_put_in_the_requests_order() {
        let request = test_request(&["a", "b"]);
        let got = positional(
            &request,
            vec![verdict("b", Action::Remove), verdict("a", Action::Keep)],
        )
        .expect("valid");
        let actions: Vec<_> = got.locks.iter().map(|v| v.action).collect();
        assert_eq!(
            actions,
            [super::super::Action::Keep, super::super::Action::Remove]
        );
        for (verdicts, want) in [
            (
                vec![verdict("a", Action::Keep)],
                "no verdict for 1 of 2 inputs (first: `b`)",
            ),
            (
                vec![verdict("a", Action::Keep), verdict("a", Action::Keep)],
                "two verdicts for `a`",
            ),
            (
                vec![
                    verdict("a", Action::Keep),
                    verdict("b", Action::Keep),
                    verdict("z", Action::Keep),
                ],
                "a verdict for `z`, which was not in its input",
            ),
        ] {
            assert_eq!(positional(&request, verdicts).err(), Some(want.to_owned()));
        }
    }

    #[test]
    fn a_0_1_policy_never_removes_an_unreadable_file_however_old() {
        let mut request = test_request(&["a"]);
        request.unreadable.push(super::super::UnreadableLock {
            id: "c".into(),
            size: 0,
            problem: "empty file".into(),
            stored_at: Some(0),
            first_seen: Some(0),
        });
        let err = positional(
            &request,
            vec![verdict("a", Action::Keep), verdict("c", Action::Remove)],
        )
        .expect_err("refused");
        assert!(err.contains("never removes"), "{err}");
    }
}
