//! Checking a policy's answer before anything acts on it: exactly one verdict
//! per input, in the request's order, and nothing the host never does
//! whatever a policy says: removing an unreadable file for which the host
//! itself holds less than 30 minutes of age evidence.

use crate::contract::{Action, EvaluateRequest, Lock, PolicyVerdicts, UnreadableLock, Verdict};

/// The least age evidence (ns) the host must hold for an unreadable file, by
/// the storage's modification time or its own first sighting, before it
/// removes it: restic's stale age. A file being written right now may be
/// unreadable for a moment; one left unreadable for 30 minutes is not a
/// lock anyone refreshes.
pub const UNREADABLE_MIN_AGE: i64 = 30 * 60 * 1_000_000_000;

/// Every input of an evaluation with the verdict on it, in input order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdicts {
    /// The locks, each with its verdict.
    pub locks: Vec<(Lock, Verdict)>,
    /// The unreadable files, each with its verdict.
    pub unreadable: Vec<(UnreadableLock, Verdict)>,
}

/// What a verdict is about.
#[derive(Debug, Clone, Copy)]
pub enum Subject<'a> {
    /// A lock that was read.
    Lock(&'a Lock),
    /// A file that could not be.
    Unreadable(&'a UnreadableLock),
}

impl<'a> Subject<'a> {
    /// The lock file's id.
    pub fn id(&self) -> &'a str {
        match self {
            Subject::Lock(l) => &l.id,
            Subject::Unreadable(u) => &u.id,
        }
    }
}

impl Verdicts {
    /// Pairs each input of `request` with its verdict in `checked`, which
    /// [`validate`] accepted for this request.
    pub fn pair(request: EvaluateRequest, checked: PolicyVerdicts) -> Verdicts {
        Verdicts {
            locks: request.locks.into_iter().zip(checked.locks).collect(),
            unreadable: request
                .unreadable
                .into_iter()
                .zip(checked.unreadable)
                .collect(),
        }
    }

    /// Every input with its verdict: the locks, then the unreadable files.
    pub fn all(&self) -> impl Iterator<Item = (Subject<'_>, &Verdict)> {
        let locks = self.locks.iter().map(|(l, v)| (Subject::Lock(l), v));
        let files = self
            .unreadable
            .iter()
            .map(|(u, v)| (Subject::Unreadable(u), v));
        locks.chain(files)
    }

    /// The inputs judged stale.
    pub fn stale(&self) -> impl Iterator<Item = (Subject<'_>, &Verdict)> {
        self.all().filter(|(_, v)| v.action == Action::Remove)
    }

    /// How many locks there are of each kind: `exclusive`, then `shared`
    /// (the metrics' `kind` label).
    pub fn lock_kinds(&self) -> [(&'static str, usize); 2] {
        let exclusive = self.locks.iter().filter(|(l, _)| l.exclusive).count();
        [
            ("exclusive", exclusive),
            ("shared", self.locks.len() - exclusive),
        ]
    }

    /// How many inputs there are.
    pub fn len(&self) -> usize {
        self.locks.len() + self.unreadable.len()
    }

    /// True when there were no locks and no unreadable files.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Checks `verdicts` against `request` evaluated at `now`: one verdict per
/// lock and per unreadable file, rules that are names (at most
/// [`limits::POLICY_RULE`](crate::limits::POLICY_RULE) bytes), and no
/// `remove` for an unreadable file the host holds less than
/// [`UNREADABLE_MIN_AGE`] of age evidence for.
pub fn validate(
    request: &EvaluateRequest,
    now: i64,
    verdicts: &PolicyVerdicts,
) -> Result<(), String> {
    for (what, want, got) in [
        ("locks", request.locks.len(), verdicts.locks.len()),
        (
            "unreadable files",
            request.unreadable.len(),
            verdicts.unreadable.len(),
        ),
    ] {
        if want != got {
            return Err(format!("{got} verdicts for {want} {what}"));
        }
    }
    let rule = crate::limits::POLICY_RULE;
    if let Some(long) = verdicts
        .locks
        .iter()
        .chain(&verdicts.unreadable)
        .find(|v| v.rule.len() > rule)
    {
        return Err(format!(
            "a rule of {} bytes: a rule is a name of at most {rule} bytes",
            long.rule.len()
        ));
    }
    for (file, verdict) in request.unreadable.iter().zip(&verdicts.unreadable) {
        if verdict.action == Action::Remove && !old_enough(file, now) {
            return Err(format!(
                "`remove` for `{}`, an unreadable file for which the host holds no age \
                 evidence of at least 30m (stored {}, first seen {}): the host removes an \
                 unreadable file only then, whatever a policy says",
                crate::text::escape(&file.id),
                ago(file.stored_at, now),
                ago(file.first_seen, now),
            ));
        }
    }
    Ok(())
}

/// Cuts every reason to [`limits::POLICY_REASON`](crate::limits::POLICY_REASON)
/// bytes: a policy's words are shown, stored and sent, and it may not make
/// them unbounded.
pub fn cut_reasons(verdicts: &mut PolicyVerdicts) {
    for verdict in verdicts.locks.iter_mut().chain(&mut verdicts.unreadable) {
        crate::text::cut(&mut verdict.reason, crate::limits::POLICY_REASON);
    }
}

/// Whether the host's own evidence says `file` has been there for at least
/// [`UNREADABLE_MIN_AGE`]: the storage's modification time or the host's
/// first sighting, each against the host's clock.
fn old_enough(file: &UnreadableLock, now: i64) -> bool {
    [file.stored_at, file.first_seen]
        .into_iter()
        .flatten()
        .any(|at| now.saturating_sub(at) >= UNREADABLE_MIN_AGE)
}

fn ago(at: Option<i64>, now: i64) -> String {
    match at {
        Some(at) => format!(
            "{} ago",
            lockwarden_duration::format(now.saturating_sub(at))
        ),
        None => "unknown".into(),
    }
}

/// Checks that no id appears twice in a request, so that each verdict is
/// about one file.
pub fn check_unique_ids(request: &EvaluateRequest) -> Result<(), String> {
    let mut ids: Vec<&str> = request
        .locks
        .iter()
        .map(|l| l.id.as_str())
        .chain(request.unreadable.iter().map(|u| u.id.as_str()))
        .collect();
    ids.sort_unstable();
    match ids.windows(2).find(|w| w[0] == w[1]) {
        Some(twice) => Err(format!(
            "lock id `{}` appears twice in the request",
            crate::text::escape(twice[0])
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::test_request;

    const NOW: i64 = 1_796_040_000_000_000_000;
    const MINUTE: i64 = 60_000_000_000;

    fn request(ids: &[&str], unreadable: &[(&str, Option<i64>, Option<i64>)]) -> EvaluateRequest {
        EvaluateRequest {
            unreadable: unreadable
                .iter()
                .map(|(id, stored_at, first_seen)| UnreadableLock {
                    id: (*id).into(),
                    size: 0,
                    problem: "empty file".into(),
                    stored_at: *stored_at,
                    first_seen: *first_seen,
                })
                .collect(),
            ..test_request(ids)
        }
    }

    fn verdict(action: Action) -> Verdict {
        Verdict {
            action,
            rule: "r".into(),
            reason: "test".into(),
        }
    }

    fn verdicts(locks: usize, unreadable: &[Action]) -> PolicyVerdicts {
        PolicyVerdicts {
            locks: (0..locks).map(|_| verdict(Action::Keep)).collect(),
            unreadable: unreadable.iter().map(|a| verdict(*a)).collect(),
        }
    }

    #[test]
    fn one_verdict_per_input_and_pairs_in_order() {
        let req = request(&["a", "b"], &[("c", None, None)]);
        let checked = verdicts(2, &[Action::Keep]);
        assert_eq!(validate(&req, NOW, &checked), Ok(()));
        let paired = Verdicts::pair(req, checked);
        let ids: Vec<_> = paired.all().map(|(s, _)| s.id()).collect();
        assert_eq!(ids, ["a", "b", "c"]);
    }

    #[test]
    fn wrong_lengths_are_refused() {
        let req = request(&["a", "b"], &[("c", None, None)]);
        for (checked, want) in [
            (verdicts(1, &[Action::Keep]), "1 verdicts for 2 locks"),
            (verdicts(3, &[Action::Keep]), "3 verdicts for 2 locks"),
            (verdicts(2, &[]), "0 verdicts for 1 unreadable files"),
            (
                verdicts(2, &[Action::Keep, Action::Keep]),
                "2 verdicts for 1 unreadable files",
            ),
        ] {
            assert_eq!(validate(&req, NOW, &checked), Err(want.to_string()));
        }
    }

    #[test]
    fn an_unreadable_file_is_removed_only_with_30_minutes_of_age_evidence() {
        let remove = verdicts(0, &[Action::Remove]);
        let refused = |stored_at, first_seen| {
            validate(&request(&[], &[("c", stored_at, first_seen)]), NOW, &remove).is_err()
        };
        assert!(refused(None, None), "no age evidence at all");
        assert!(refused(Some(NOW - 30 * MINUTE + 1), None));
        assert!(refused(None, Some(NOW - 30 * MINUTE + 1)));
        assert!(
            refused(Some(NOW + 60 * MINUTE), Some(NOW)),
            "stored in the future"
        );
        assert!(!refused(Some(NOW - 30 * MINUTE), None));
        assert!(!refused(None, Some(NOW - 31 * MINUTE)));
        assert!(!refused(Some(NOW), Some(NOW - 2 * 60 * MINUTE)));
        let err = validate(
            &request(&[], &[("c", None, Some(NOW - MINUTE))]),
            NOW,
            &remove,
        )
        .expect_err("refused");
        assert!(
            err.contains("first seen 1m ago") && err.contains("stored unknown"),
            "{err}"
        );
        // Keeping a young unreadable file is always fine; removing a lock too.
        let keep_file = PolicyVerdicts {
            locks: vec![verdict(Action::Remove)],
            unreadable: vec![verdict(Action::Keep)],
        };
        assert_eq!(
            validate(&request(&["a"], &[("c", None, None)]), NOW, &keep_file),
            Ok(())
        );
    }

    #[test]
    fn a_rule_is_a_name_and_a_reason_is_cut() {
        let req = request(&["a"], &[("c", None, None)]);
        let mut checked = verdicts(1, &[Action::Keep]);
        checked.unreadable[0].rule = "r".repeat(crate::limits::POLICY_RULE);
        assert_eq!(validate(&req, NOW, &checked), Ok(()));
        checked.unreadable[0].rule.push('r');
        let err = validate(&req, NOW, &checked).expect_err("a rule too long");
        assert!(err.contains("a rule of 129 bytes"), "{err}");
        checked.locks[0].reason = "é".repeat(crate::limits::POLICY_REASON);
        cut_reasons(&mut checked);
        let reason = &checked.locks[0].reason;
        assert!(reason.len() <= crate::limits::POLICY_REASON + '…'.len_utf8());
        assert!(reason.ends_with('…'), "{reason}");
        assert_eq!(checked.unreadable[0].reason, "test");
    }

    #[test]
    fn duplicate_input_ids_are_refused() {
        assert!(check_unique_ids(&request(&["a", "b"], &[("c", None, None)])).is_ok());
        assert_eq!(
            check_unique_ids(&request(&["a"], &[("a", None, None)])),
            Err("lock id `a` appears twice in the request".to_string())
        );
    }
}
