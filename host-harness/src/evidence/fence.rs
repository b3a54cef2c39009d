//! When a pod that is not listed is dead: the argument, written once.
//!
//! A lock names a hostname, not a pod. Which pods could have written it is
//! the inventory's question ([`super::inventory`]): those listed that
//! answer to the hostname, and those the pod watch saw answering to it
//! that could have written a lock of that date ([`super::incarnations`]).
//! Here is how one that is no longer listed is judged:
//!
//! - it **ended for sure** (Succeeded or Failed, or gone with each of its
//!   containers' statuses saying terminated, or never bound to a node):
//!   its processes ended, so a lock it wrote has lost its holder;
//! - it **vanished** while it may have run (deleted while a container ran,
//!   deleted with no statuses while bound to a node, or missing from a
//!   listing): the API no longer has it, but a node cut off from the API
//!   runs it on, and restic there goes on writing. It is dead once its node
//!   no longer exists, or once the node reported (Ready, with a heartbeat)
//!   a grace period after it could have learnt the pod was gone: after the
//!   later of the vanishing and the node's becoming Ready (a kubelet back
//!   in touch learns only then), plus the pod's grace period and the
//!   clocks' tolerance; a kubelet in touch with the API kills the pods the
//!   API no longer has within their grace period. A heartbeat later than
//!   the nodes' listing (beyond the tolerance) is a clock ahead, and
//!   proves nothing. A vanished pod whose node is not known (last seen
//!   unbound, by a watch that may have missed its binding) is judged as a
//!   writer never seen. Until then: `unknown`.
//!
//! The order that makes this hold: the pod vanishes (lockwarden's clock,
//! when the watch saw it or a listing missed it), and the nodes are listed
//! afresh for each judgment that needs them ([`super::shared_pods::nodes`],
//! at most [`super::shared_pods::NODES_FRESH`] old), so a node absent from that
//! listing was deleted and runs nothing; a heartbeat is the kubelet's own
//! clock, compared with the vanishing within [`CLOCKS`].
//!
//! A writer lockwarden **never saw** (it vanished before lockwarden
//! followed the pods, or in a one-shot check) has no known node: its
//! absence speaks only when every node is Ready, so that none has been cut
//! off for longer than the node controller's grace (40 s by default) —
//! a pod force-deleted from a node cut off since less than that, and never
//! seen, is the case this cannot fence (docs/evidence.md says so).

use super::incarnations::{CLOCKS, Fate, Incarnation};
use super::nodes::Nodes;
use crate::text::escape;
use crate::time::format_rfc3339;

/// The nodes of a reading: read, failed (why), or not read at all (a
/// file's or a command's inventory, which says nothing of nodes).
pub type NodesRead<'a> = Option<&'a Result<std::sync::Arc<Nodes>, String>>;

/// Whether `pod`, which a listing taken at `taken_at` does not hold, is
/// dead: why if so, why not otherwise.
pub fn gone(pod: &Incarnation, taken_at: i64, nodes: NodesRead) -> Result<String, String> {
    let shown = format!("pod {}", escape(&pod.name));
    match pod.fate {
        Fate::Ended(at) => Ok(format!("{shown} ended at {}", format_rfc3339(at))),
        Fate::Running
            if pod
                .created
                .is_none_or(|made| made.saturating_add(CLOCKS) >= taken_at) =>
        {
            Err(format!(
                "{shown} was made as the inventory was taken, so its absence from it proves nothing"
            ))
        }
        Fate::Running => fenced(pod, &shown, taken_at, nodes),
        Fate::Vanished(at) => fenced(pod, &shown, at, nodes),
    }
}

/// Whether `pod` (`shown`), which vanished at `vanished` while it may
/// have run, can no longer run: its node no longer exists, or reported
/// since, after the grace period.
fn fenced(
    pod: &Incarnation,
    shown: &str,
    vanished: i64,
    nodes: NodesRead,
) -> Result<String, String> {
    let when = format_rfc3339(vanished);
    let Some(node) = pod.node.as_deref() else {
        return unseen(nodes)
            .map(|()| format!("{shown} vanished at {when}, and every node is Ready"))
            .map_err(|why| format!("{shown} vanished at {when}, its node not known, and {why}"));
    };
    let node_shown = escape(node);
    let nodes = match nodes {
        Some(Ok(nodes)) => nodes,
        Some(Err(why)) => {
            return Err(format!(
                "{shown} vanished at {when} from node {node_shown}, and the nodes could not be \
                 read: {why}"
            ));
        }
        None => {
            return Err(format!(
                "{shown} vanished at {when} from node {node_shown}, which the inventory says \
                 nothing of"
            ));
        }
    };
    let reported = |fact: &super::nodes::NodeFact| {
        let learnt = fact.ready_since.map(|since| since.max(vanished));
        let after = learnt.map(|t| t.saturating_add(pod.grace).saturating_add(CLOCKS));
        let not_ahead = nodes.listed_at.saturating_add(CLOCKS);
        let beat = fact.heartbeat.zip(after);
        fact.ready && beat.is_some_and(|(beat, after)| beat > after && beat <= not_ahead)
    };
    match nodes.get(node) {
        None => Ok(format!(
            "{shown} vanished at {when}, and its node {node_shown} no longer exists"
        )),
        Some(fact) if reported(fact) => Ok(format!(
            "{shown} vanished at {when}, and its node {node_shown} reported since, after the \
             pod's grace period"
        )),
        Some(_) => Err(format!(
            "{shown} vanished at {when} while it may have run on node {node_shown}, which has \
             not reported since (after the pod's grace period of {} s): restic may still run there",
            pod.grace / 1_000_000_000
        )),
    }
}

/// Whether a writer lockwarden never saw can be taken as gone from its
/// absence: every node is Ready (none cut off past the node controller's
/// grace). A reading that says nothing of nodes (a file's, a command's)
/// is the user's word.
pub fn unseen(nodes: NodesRead) -> Result<(), String> {
    match nodes {
        None => Ok(()),
        Some(Err(why)) => Err(format!(
            "the nodes could not be read ({why}), and a pod lockwarden never saw may run on one \
             cut off from the API"
        )),
        Some(Ok(nodes)) => match nodes.not_ready() {
            None => Ok(()),
            Some(node) => Err(format!(
                "node {} is not Ready, and a pod lockwarden never saw may run there, cut off from \
                 the API",
                escape(node)
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    const S: i64 = 1_000_000_000;

    fn pod(fate: Fate, node: Option<&str>) -> Incarnation {
        Incarnation {
            uid: "u".into(),
            namespace: "a".into(),
            name: "web-0".into(),
            node: node.map(str::to_owned),
            created: Some(0),
            grace: 30 * S,
            fate,
        }
    }

    fn of(nodes: &[(&str, bool, Option<i64>)]) -> Result<Arc<Nodes>, String> {
        Ok(Arc::new(Nodes::of(nodes)))
    }

    #[test]
    fn a_vanished_pod_is_dead_only_once_its_node_is_gone_or_reported_after_its_grace() {
        let vanished = pod(Fate::Vanished(100 * S), Some("n"));
        let after = 100 * S + 30 * S + CLOCKS + 1;
        let rows: [(Result<Arc<Nodes>, String>, bool); 6] = [
            (of(&[]), true),
            (of(&[("n", true, Some(after))]), true),
            (of(&[("n", true, Some(after - 2))]), false),
            (of(&[("n", false, Some(after + S))]), false),
            (of(&[("n", true, None)]), false),
            (Err("forbidden".into()), false),
        ];
        for (nodes, dead) in rows {
            let answer = gone(&vanished, 1000 * S, Some(&nodes));
            assert_eq!(answer.is_ok(), dead, "{nodes:?}: {answer:?}");
        }
        assert!(
            gone(&vanished, 1000 * S, None).is_err(),
            "nothing said of nodes"
        );
        // Last seen unbound: its node not known, judged as never seen.
        let unbound = pod(Fate::Vanished(100 * S), None);
        assert!(gone(&unbound, 1000 * S, Some(&of(&[("n", true, None)]))).is_ok());
        assert!(gone(&unbound, 1000 * S, Some(&of(&[("n", false, None)]))).is_err());
    }

    #[test]
    fn a_node_back_in_touch_fences_only_a_grace_period_later_and_a_clock_ahead_nothing() {
        let vanished = pod(Fate::Vanished(100 * S), Some("n"));
        let node = |ready_since: i64, beat: i64, listed_at: i64| {
            let mut nodes = Nodes::of(&[("n", true, Some(beat))]);
            nodes.listed_at = listed_at;
            nodes.set_ready_since("n", ready_since);
            Ok(Arc::new(nodes))
        };
        let back = 200 * S;
        let grace = 30 * S + CLOCKS;
        let rows = [
            ("first heartbeat back", node(back, back + S, 300 * S), false),
            (
                "a grace period after",
                node(back, back + grace + S, 300 * S),
                true,
            ),
            (
                "in touch all along",
                node(0, 100 * S + grace + S, 300 * S),
                true,
            ),
            ("a clock ahead", node(0, 900 * S, 300 * S), false),
        ];
        for (what, nodes, dead) in rows {
            let answer = gone(&vanished, 1000 * S, Some(&nodes));
            assert_eq!(answer.is_ok(), dead, "{what}: {answer:?}");
        }
    }

    #[test]
    fn an_ended_pod_is_dead_and_a_running_one_not_listed_vanished_with_the_listing() {
        let nodes = of(&[("n", true, Some(10 * S))]);
        assert!(gone(&pod(Fate::Ended(5 * S), Some("n")), 1000 * S, Some(&nodes)).is_ok());
        let running = pod(Fate::Running, Some("n"));
        assert!(
            gone(&running, 1000 * S, Some(&nodes)).is_err(),
            "not reported since"
        );
        let reported = of(&[("n", true, Some(1040 * S))]);
        assert!(gone(&running, 1000 * S, Some(&reported)).is_ok());
        let young = Incarnation {
            created: Some(999 * S),
            ..running
        };
        assert!(
            gone(&young, 1000 * S, Some(&reported)).is_err(),
            "made as the listing ran"
        );
    }

    #[test]
    fn an_unseen_writer_is_gone_only_when_every_node_is_ready() {
        assert!(unseen(None).is_ok());
        assert!(unseen(Some(&of(&[("a", true, None)]))).is_ok());
        let cut = of(&[("a", true, None), ("b", false, None)]);
        assert!(unseen(Some(&cut)).is_err());
        assert!(unseen(Some(&Err("forbidden".into()))).is_err());
    }
}
