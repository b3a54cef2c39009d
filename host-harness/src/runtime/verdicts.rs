//! Checking a policy's answer before anything acts on it: exactly one verdict
//! per input id, no other ids, and nothing the host never does whatever a
//! policy says (under contract 0.1.0: removing an unreadable file).

use std::collections::HashMap;

use crate::contract::{Action, EvaluateRequest, Verdict};

/// Checks that `verdicts` has exactly one entry for each lock and unreadable
/// file in `request` and nothing else, and returns them in input order.
pub fn validate(request: &EvaluateRequest, verdicts: Vec<Verdict>) -> Result<Vec<Verdict>, String> {
    let ids = request
        .locks
        .iter()
        .map(|l| l.id.as_str())
        .chain(request.unreadable.iter().map(|u| u.id.as_str()));
    let mut slots: HashMap<&str, Option<Verdict>> = ids.map(|id| (id, None)).collect();
    let unreadable: std::collections::HashSet<&str> =
        request.unreadable.iter().map(|u| u.id.as_str()).collect();
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
    let order = request
        .locks
        .iter()
        .map(|l| l.id.as_str())
        .chain(request.unreadable.iter().map(|u| u.id.as_str()));
    let mut ordered = Vec::with_capacity(slots.len());
    let mut missing = Vec::new();
    for id in order {
        match slots.get_mut(id).and_then(Option::take) {
            Some(verdict) => ordered.push(verdict),
            None => missing.push(id),
        }
    }
    if missing.is_empty() {
        Ok(ordered)
    } else {
        Err(format!(
            "no verdict for {} of {} inputs (first: `{}`)",
            missing.len(),
            slots.len(),
            missing[0]
        ))
    }
}

/// Checks that no id appears twice in a request, so that verdicts can be
/// matched to inputs one to one.
pub fn check_unique_ids(request: &EvaluateRequest) -> Result<(), String> {
    let mut seen = std::collections::HashSet::new();
    let ids = request
        .locks
        .iter()
        .map(|l| l.id.as_str())
        .chain(request.unreadable.iter().map(|u| u.id.as_str()));
    for id in ids {
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
        let ids: Vec<_> = got.iter().map(|v| v.id.as_str()).collect();
        assert_eq!(ids, ["a", "b", "c"]);
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
