//! The discovery cap shared fairly between namespaces: each tenant of a
//! cluster holds one or more namespaces, and one that fills its namespace
//! with objects must not take the slots of the others.
//!
//! The shares are max-min fair (water filling): every namespace gets what
//! it asks for if that is no more than an equal part of what is left; what
//! a namespace leaves unused goes to the others, one slot at a time in name
//! order, so the same demands always give the same shares and watched
//! repositories do not come and go from round to round.

use std::collections::BTreeMap;

/// Each namespace's share of `cap` slots, given how many it asks for.
pub fn shares(demand: &BTreeMap<String, usize>, cap: usize) -> BTreeMap<String, usize> {
    let mut given: BTreeMap<String, usize> = demand.keys().map(|ns| (ns.clone(), 0)).collect();
    let mut left = cap;
    loop {
        let wanting: Vec<&String> = demand
            .iter()
            .filter(|(ns, want)| given[*ns] < **want)
            .map(|(ns, _)| ns)
            .collect();
        if wanting.is_empty() || left == 0 {
            return given;
        }
        // An equal part of what is left to each, at least one slot, in
        // name order while slots last.
        let part = (left / wanting.len()).max(1);
        for ns in wanting {
            let slot = given.get_mut(ns).map(|g| (g, demand[ns]));
            let Some((got, want)) = slot else { continue };
            let more = part.min(want - *got).min(left);
            *got += more;
            left -= more;
        }
    }
}

/// A repository refused a slot: its namespace asks for more than its fair
/// share of the cap.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "namespace {} has more discovered repositories ({asked}) than its fair share of the {cap} \
     one watch takes, which the other namespaces keep",
    crate::text::escape(namespace)
)]
pub struct OverShare {
    /// The namespace.
    pub namespace: String,
    /// How many repositories it has, kept and asking.
    pub asked: usize,
    /// The most one watch takes.
    pub cap: usize,
}

/// Which of `wanted` (the namespace of each repository asking, in the
/// order they are taken) get a slot of `cap`, when repositories of the
/// namespaces `kept` hold theirs already: for each, nothing or why not.
pub fn allot(wanted: &[&str], kept: &[&str], cap: usize) -> Vec<Result<(), OverShare>> {
    let mut demand: BTreeMap<String, usize> = BTreeMap::new();
    for namespace in kept.iter().chain(wanted) {
        *demand.entry((*namespace).to_owned()).or_default() += 1;
    }
    let mut left = shares(&demand, cap);
    for namespace in kept {
        if let Some(n) = left.get_mut(*namespace) {
            *n = n.saturating_sub(1);
        }
    }
    let refused = |namespace: &str| OverShare {
        namespace: namespace.to_owned(),
        asked: demand.get(namespace).copied().unwrap_or_default(),
        cap,
    };
    (wanted.iter())
        .map(|namespace| match left.get_mut(*namespace) {
            Some(n) if *n > 0 => {
                *n -= 1;
                Ok(())
            }
            _ => Err(refused(namespace)),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_kept_count_against_their_namespace() {
        let got = allot(&["a", "a", "b", "b"], &["a"], 3);
        assert_eq!(got.iter().filter(|r| r.is_ok()).count(), 2);
        assert!(got[0].is_ok() && got[1].is_err(), "{got:?}");
        assert!(got[2].is_ok() && got[3].is_err(), "{got:?}");
        let why = got[1].as_ref().expect_err("refused").to_string();
        assert!(
            why.contains("namespace a has more discovered repositories (3)"),
            "{why}"
        );
        assert_eq!(
            why,
            "namespace a has more discovered repositories (3) than its fair share of the 3 one \
             watch takes, which the other namespaces keep"
        );
    }

    fn demand(rows: &[(&str, usize)]) -> BTreeMap<String, usize> {
        rows.iter().map(|(ns, n)| ((*ns).to_owned(), *n)).collect()
    }

    #[test]
    fn one_namespace_cannot_take_every_slot() {
        let got = shares(&demand(&[("hog", 5000), ("a", 3), ("b", 10)]), 1000);
        assert_eq!(got["a"], 3);
        assert_eq!(got["b"], 10);
        assert_eq!(got["hog"], 987);
        let two_hogs = shares(&demand(&[("x", 5000), ("y", 5000), ("a", 1)]), 1000);
        assert_eq!((two_hogs["a"], two_hogs["x"], two_hogs["y"]), (1, 500, 499));
    }

    #[test]
    fn shares_add_up_and_never_exceed_demand() {
        for cap in [0, 1, 2, 7, 1000] {
            let asked = demand(&[("a", 0), ("b", 1), ("c", 4), ("d", 900), ("e", 900)]);
            let got = shares(&asked, cap);
            let total: usize = got.values().sum();
            let wanted: usize = asked.values().sum();
            assert_eq!(total, cap.min(wanted), "cap {cap}: {got:?}");
            for (ns, n) in &got {
                assert!(*n <= asked[ns], "cap {cap}: {got:?}");
            }
        }
        // More namespaces than slots: one each in name order.
        let got = shares(&demand(&[("a", 2), ("b", 2), ("c", 2)]), 2);
        assert_eq!((got["a"], got["b"], got["c"]), (1, 1, 0));
    }
}
