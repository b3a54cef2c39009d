//! Checking a policy's answer before anything acts on it: exactly one verdict
//! per input id, no other ids, and nothing the host never does whatever a
//! policy says (under contract 0.1.0: removing an unreadable file).

use std::collections::{HashMap, HashSet};

use crate::contract::{Action, EvaluateRequest, Lock, UnreadableLock, Verdict};

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

    /// How many inputs there are.
    pub fn len(&self) -> usize {
        self.locks.len() + self.unreadable.len()
    }

    /// True when there were no locks and no unreadable files.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The ids of a request: the locks, then the unreadable files.
fn input_ids(request: &EvaluateRequest) -> impl Iterator<Item = &str> {
    let locks = request.locks.iter().map(|l| l.id.as_str());
    locks.chain(request.unreadable.iter().map(|u| u.id.as_str()))
}

/// Checks that `verdicts` has exactly one entry for each lock and unreadable
/// file in `request` and nothing else, and pairs each input with its own.
pub fn validate(request: &EvaluateRequest, verdicts: Vec<Verdict>) -> Result<Verdicts, String> {
    let mut slots: HashMap<&str, Option<Verdict>> =
        input_ids(request).map(|id| (id, None)).collect();
    let unreadable: HashSet<&str> = request.unreadable.iter().map(|u| u.id.as_str()).collect();
    for verdict in verdicts {
        if verdict.action == Action::Remove && unreadable.contains(verdict.id.as_str()) {
            return Err(format!(
                "`remove` for `{}`, an unreadable file: the host never removes a file it could \
                 not read as a lock, whatever a policy says",
                crate::text::escape(&verdict.id)
            ));
        }
        match slots.get_mut(verdict.id.as_str()) {
            None => {
                return Err(format!(
                    "a verdict for `{}`, which was not in its input",
                    crate::text::escape(&verdict.id)
                ));
            }
            Some(Some(_)) => {
                return Err(format!(
                    "two verdicts for `{}`",
                    crate::text::escape(&verdict.id)
                ));
            }
            Some(slot) => *slot = Some(verdict),
        }
    }
    let missing: Vec<&str> = input_ids(request)
        .filter(|id| slots.get(id).is_some_and(Option::is_none))
        .collect();
    if let Some(first) = missing.first() {
        return Err(format!(
            "no verdict for {} of {} inputs (first: `{first}`)",
            missing.len(),
            slots.len(),
        ));
    }
    let mut take = |id: &str| slots.get_mut(id).and_then(Option::take);
    let mut paired = Verdicts::default();
    for lock in &request.locks {
        paired
            .locks
            .extend(take(&lock.id).map(|v| (lock.clone(), v)));
    }
    for file in &request.unreadable {
        paired
            .unreadable
            .extend(take(&file.id).map(|v| (file.clone(), v)));
    }
    Ok(paired)
}

/// Checks that no id appears twice in a request, so that verdicts can be
/// matched to inputs one to one.
pub fn check_unique_ids(request: &EvaluateRequest) -> Result<(), String> {
    let mut seen = HashSet::new();
    for id in input_ids(request) {
        if !seen.insert(id) {
            return Err(format!("lock id `{id}` appears twice in the request"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::{Repository, UnreadableLock, test_lock};

    fn request(ids: &[&str], unreadable: &[&str]) -> EvaluateRequest {
        EvaluateRequest {
            repository: Repository {
                id: "r".into(),
                location: "/r".into(),
                backend: "local".into(),
                version: 2,
            },
            locks: ids.iter().map(|id| test_lock(id)).collect(),
            unreadable: unreadable
                .iter()
                .map(|id| UnreadableLock {
                    id: (*id).into(),
                    size: 0,
                    problem: "empty file".into(),
                })
                .collect(),
            settings: vec![],
        }
    }

    fn keep(id: &str) -> Verdict {
        Verdict {
            id: id.into(),
            action: Action::Keep,
            rule: "fresh".into(),
            reason: "test".into(),
        }
    }

    #[test]
    fn accepts_one_verdict_each_and_restores_input_order() {
        let got = validate(
            &request(&["a", "b"], &["c"]),
            vec![keep("c"), keep("b"), keep("a")],
        )
        .expect("valid");
        let ids: Vec<_> = got.all().map(|(s, v)| (s.id(), v.id.as_str())).collect();
        assert_eq!(ids, [("a", "a"), ("b", "b"), ("c", "c")]);
    }

    #[test]
    fn refuses_missing_duplicate_and_invented_ids() {
        let req = request(&["a", "b"], &["c"]);
        let cases = [
            (
                vec![keep("a"), keep("b")],
                "no verdict for 1 of 3 inputs (first: `c`)",
            ),
            (
                vec![keep("a"), keep("a"), keep("b"), keep("c")],
                "two verdicts for `a`",
            ),
            (
                vec![keep("a"), keep("b"), keep("c"), keep("z")],
                "a verdict for `z`, which was not in its input",
            ),
        ];
        for (verdicts, want) in cases {
            assert_eq!(validate(&req, verdicts).err(), Some(want.to_string()));
        }
    }

    #[test]
    fn removing_an_unreadable_file_is_refused() {
        let req = request(&["a"], &["c"]);
        let remove = Verdict {
            action: Action::Remove,
            ..keep("c")
        };
        let err = validate(&req, vec![keep("a"), remove]).expect_err("refused");
        assert!(err.contains("unreadable"), "{err}");
        let remove_lock = Verdict {
            action: Action::Remove,
            ..keep("a")
        };
        assert!(validate(&req, vec![remove_lock, keep("c")]).is_ok());
    }

    #[test]
    fn duplicate_input_ids_are_refused() {
        assert!(check_unique_ids(&request(&["a", "b"], &["c"])).is_ok());
        assert_eq!(
            check_unique_ids(&request(&["a"], &["a"])),
            Err("lock id `a` appears twice in the request".to_string())
        );
    }
}
