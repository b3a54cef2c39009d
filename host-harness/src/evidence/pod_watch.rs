//! Following the pods of the Kubernetes API as they change: a list, then a
//! watch from its resource version with bookmarks, resumed from the last
//! version seen when the server ends it, listed again when that version
//! has expired (410 Gone), with a growing pause after each failure (a
//! watch that ends at once having brought nothing counts as one).
//!
//! Each pod seen is remembered by uid with its fate
//! ([`super::shared_pods::observe`]): running, ended for sure (Succeeded
//! or Failed, or deleted or gone with every container stopped), or
//! vanished while it may have run (deleted or gone otherwise: restic may
//! still run on a node cut off from the API), which gives a later
//! listing's silence about it the authority [`super::fence`] says. A
//! pod's *end* is told to the caller: deleted,
//! Succeeded or Failed, a container restarted, or gone from a new list
//! after the watch was away. What to do about it (check at once the
//! repositories whose locks it may hold, after [`outdate_listings`]) is
//! the caller's; an end never
//! judges a lock by itself: the check that follows reads the locks and the
//! pods anew, by the same rules as any other.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::incarnations::Fate;
use super::pod_list::{PodState, pod_state};
use super::shared_pods;
use crate::kubernetes::Kubernetes;
use crate::limits;
use crate::stop::Stop;
use crate::time::now;

/// How long the server keeps one watch open (`timeoutSeconds`); the watch
/// is then resumed from the last version seen.
const WATCH_SECONDS: u64 = 60;

/// A watch that sends nothing, not even a bookmark, for this long is
/// dropped and resumed.
const IDLE: Duration = Duration::from_secs(150);

/// The longest pause after failures in a row (1 s, doubling).
const MOST_PAUSE: Duration = Duration::from_secs(30);

/// A watch that ends sooner than this having brought nothing (no change,
/// no bookmark: closed at once, an empty answer, a 410) counts as a
/// failure for the pause: a server or proxy that keeps doing so must not
/// be met with back-to-back lists and watches.
const BRIEF: Duration = Duration::from_secs(10);

/// What the next step waits for, after one step of [`follow`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pace {
    /// The watch worked: go on at once, the pause back to 1 s.
    Reset,
    /// A list: watch at once, the pause as it was (only a watch that
    /// works shows the server is well).
    Keep,
    /// A watch that brought nothing, briefly: wait, and grow the pause.
    Wait,
}

/// How a watch that brought `events` (changes and bookmarks) and lasted
/// `lasted` sets the pace.
fn pace(events: usize, lasted: Duration) -> Pace {
    if events > 0 || lasted >= BRIEF {
        Pace::Reset
    } else {
        Pace::Wait
    }
}

/// Why a pod counts as ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// It was deleted.
    Deleted,
    /// It Succeeded or Failed.
    Finished,
    /// One of its containers restarted.
    Restarted,
    /// A new list no longer has it (the watch was away when it went).
    Unlisted,
}

/// The pods known, by uid, and the version to resume from.
#[derive(Default)]
struct Follower {
    pods: HashMap<String, PodState>,
    version: Option<String>,
}

/// Follows the pods through `client` until `stop`, each request within
/// `timeout`, telling `ended` of each pod that ends. Returns when stopped.
pub fn follow(
    client: &Kubernetes,
    timeout: Duration,
    stop: &Stop,
    mut ended: impl FnMut(&PodState, End),
) {
    let mut follower = Follower::default();
    let mut pause = Duration::from_secs(1);
    while !stop.is_stopped() {
        let step = match follower.version.clone() {
            None => (follower.relist(client, timeout, &mut ended)).map(|()| Pace::Keep),
            Some(version) => follower.watch(client, &version, stop, &mut ended),
        };
        match step {
            Ok(Pace::Reset) => pause = Duration::from_secs(1),
            Ok(Pace::Keep) => {}
            Ok(Pace::Wait) => {
                tracing::debug!(
                    "the pod watch brought nothing; again in {}s",
                    pause.as_secs()
                );
                stop.sleep(pause);
                pause = (pause * 2).min(MOST_PAUSE);
            }
            Err(why) => {
                // Listed again next: a version the server keeps refusing
                // (gone, forbidden, an event over the bound) is never
                // retried as it was.
                follower.version = None;
                tracing::warn!(
                    "following the pods: {}; again in {}s",
                    crate::text::escape(&why),
                    pause.as_secs()
                );
                stop.sleep(pause);
                pause = (pause * 2).min(MOST_PAUSE);
            }
        }
    }
}

impl Follower {
    /// Lists every pod anew: those known that the list no longer has (in
    /// a namespace it could list) ended while the watch was away.
    fn relist(
        &mut self,
        client: &Kubernetes,
        timeout: Duration,
        ended: &mut impl FnMut(&PodState, End),
    ) -> Result<(), String> {
        let listing = client
            .list(timeout, "/api/v1/pods")
            .map_err(|e| e.to_string())?;
        let version = listing
            .version
            .ok_or("the pod list has no resourceVersion")?;
        let mut pods = HashMap::new();
        for item in listing.items {
            let pod = pod_state(item)?;
            shared_pods::observe(&pod, seen(&pod));
            pods.insert(pod.uid.clone(), pod);
        }
        for (uid, pod) in &self.pods {
            if !pods.contains_key(uid) && !listing.failed.contains_key(&pod.namespace) {
                // What it became while the watch was away is not known: it
                // may have been bound and run since it was last seen.
                shared_pods::observe(pod, unlisted(pod));
                ended(pod, End::Unlisted);
            }
        }
        self.pods = pods;
        self.version = Some(version);
        Ok(())
    }

    /// Watches from `version` until the server ends the watch (or stop);
    /// how it went sets the pace of the next step.
    fn watch(
        &mut self,
        client: &Kubernetes,
        version: &str,
        stop: &Stop,
        ended: &mut impl FnMut(&PodState, End),
    ) -> Result<Pace, String> {
        let mut query = form_urlencoded::Serializer::new(String::new());
        query
            .append_pair("watch", "1")
            .append_pair("allowWatchBookmarks", "true")
            .append_pair("timeoutSeconds", &WATCH_SECONDS.to_string())
            .append_pair("resourceVersion", version);
        let path = format!("/api/v1/pods?{}", query.finish());
        let mut failure = None;
        let mut events = 0;
        let began = Instant::now();
        let whole = Duration::from_secs(WATCH_SECONDS) + IDLE;
        client
            .watch(&path, whole, IDLE, |event| {
                if let Err(why) = self.take(event, ended) {
                    failure = Some(why);
                    return ControlFlow::Break(());
                }
                if stop.is_stopped() || self.version.is_none() {
                    return ControlFlow::Break(());
                }
                events += 1;
                ControlFlow::Continue(())
            })
            .map_err(|e| e.to_string())?;
        match failure {
            Some(why) => Err(why),
            None => Ok(pace(events, began.elapsed())),
        }
    }

    /// Takes one watch event: a pod changed, a bookmark, or an error (a
    /// version expired: list again).
    fn take(&mut self, event: Value, ended: &mut impl FnMut(&PodState, End)) -> Result<(), String> {
        let kind = event.get("type").and_then(Value::as_str).unwrap_or("");
        let object = event.get("object").cloned().unwrap_or(Value::Null);
        let version = (object.pointer("/metadata/resourceVersion"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        match kind {
            "ADDED" | "MODIFIED" => self.changed(pod_state(object)?, ended),
            "DELETED" => {
                let pod = pod_state(object)?;
                shared_pods::observe(&pod, gone(&pod));
                self.pods.remove(&pod.uid);
                ended(&pod, End::Deleted);
            }
            "BOOKMARK" => {}
            "ERROR" if object.get("code").and_then(Value::as_u64) == Some(410) => {
                self.version = None;
                return Ok(());
            }
            _ => {
                let message = object.get("message").and_then(Value::as_str).unwrap_or("");
                return Err(format!("the watch said {kind}: {message}"));
            }
        }
        if version.is_some() {
            self.version = version;
        }
        if self.pods.len() > limits::KUBERNETES_ITEMS {
            self.pods.clear();
            self.version = None;
            return Err(format!(
                "more than {} pods; listed again",
                limits::KUBERNETES_ITEMS
            ));
        }
        Ok(())
    }

    /// `pod` as it is now: seen, and ended if it finished or restarted
    /// since it was last seen.
    fn changed(&mut self, pod: PodState, ended: &mut impl FnMut(&PodState, End)) {
        let end = match self.pods.get(&pod.uid) {
            Some(before) if pod.terminal && !before.terminal => Some(End::Finished),
            Some(before) if pod.restarts > before.restarts => Some(End::Restarted),
            None if pod.terminal => Some(End::Finished),
            _ => None,
        };
        shared_pods::observe(&pod, seen(&pod));
        if let Some(end) = end {
            ended(&pod, end);
        }
        self.pods.insert(pod.uid.clone(), pod);
    }
}

/// No listing of `namespace`'s pods, nor of every namespace's, begun before
/// now serves a check from now on: a pod of it that may hold a lock ended,
/// and a check that would otherwise take a listing begun after its locks
/// were seen but before the end would still find the pod in it.
pub fn outdate_listings(namespace: &str) {
    shared_pods::ended(namespace, now());
}

/// The fate of `pod` as it is now listed or changed: ended once it
/// Succeeded or Failed.
fn seen(pod: &PodState) -> Fate {
    if pod.terminal {
        Fate::Ended(now())
    } else {
        Fate::Running
    }
}

/// The fate of `pod`, gone from a new list, as it was last seen: ended if
/// it had Succeeded or Failed (an end is final), vanished otherwise.
fn unlisted(pod: &PodState) -> Fate {
    if pod.terminal {
        Fate::Ended(now())
    } else {
        Fate::Vanished(now())
    }
}

/// The fate of `pod`, deleted, by the deletion's object (the API's last
/// word on it): ended if it could run nothing, vanished otherwise.
fn gone(pod: &PodState) -> Fate {
    if pod.stopped {
        Fate::Ended(now())
    } else {
        Fate::Vanished(now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(uid: &str, phase: &str, restarts: u64) -> Value {
        json!({
            "metadata": {"name": format!("backup-{uid}"), "namespace": "a", "uid": uid,
                         "resourceVersion": format!("{restarts}{uid}")},
            "spec": {"nodeName": "node-1", "containers": [{"name": "restic"}]},
            "status": {"phase": phase, "containerStatuses": [
                {"name": "restic", "restartCount": restarts, "state": {"running": {}}}]}
        })
    }

    fn events(follower: &mut Follower, events: Vec<(&str, Value)>) -> Vec<(String, End)> {
        let mut ends = Vec::new();
        for (kind, object) in events {
            let event = json!({"type": kind, "object": object});
            follower
                .take(event, &mut |pod, end| ends.push((pod.uid.clone(), end)))
                .expect("taken");
        }
        ends
    }

    #[test]
    fn a_watch_that_brings_nothing_briefly_waits_and_one_that_works_does_not() {
        assert_eq!(pace(0, Duration::ZERO), Pace::Wait);
        assert_eq!(pace(0, BRIEF - Duration::from_millis(1)), Pace::Wait);
        assert_eq!(pace(0, BRIEF), Pace::Reset);
        assert_eq!(pace(1, Duration::ZERO), Pace::Reset);
    }

    #[test]
    fn a_pods_end_is_told_once_and_its_changes_are_not() {
        let mut follower = Follower::default();
        let ends = events(
            &mut follower,
            vec![
                ("ADDED", pod("1", "Running", 0)),
                ("MODIFIED", pod("1", "Running", 0)),
                ("ADDED", pod("2", "Running", 0)),
                ("MODIFIED", pod("2", "Running", 1)),
                ("MODIFIED", pod("1", "Failed", 0)),
                ("MODIFIED", pod("1", "Failed", 0)),
                ("ADDED", pod("3", "Succeeded", 0)),
                ("ADDED", pod("4", "Running", 0)),
                ("DELETED", pod("2", "Running", 1)),
                ("BOOKMARK", json!({"metadata": {"resourceVersion": "99"}})),
            ],
        );
        assert_eq!(
            ends,
            [
                ("2".to_owned(), End::Restarted),
                ("1".to_owned(), End::Finished),
                ("3".to_owned(), End::Finished),
                ("2".to_owned(), End::Deleted),
            ]
        );
        assert_eq!(follower.version.as_deref(), Some("99"));
        let fate = |name: &str| shared_pods::recall(Some(&["a".to_owned()]), name, 0)[0].fate;
        assert!(matches!(fate("backup-1"), Fate::Ended(_)), "Failed");
        assert!(
            matches!(fate("backup-2"), Fate::Vanished(_)),
            "deleted while its container ran: not an end for sure"
        );
        assert_eq!(fate("backup-4"), Fate::Running);
    }

    #[test]
    fn an_expired_version_lists_again_and_another_error_fails_the_watch() {
        let mut follower = Follower {
            version: Some("5".into()),
            ..Follower::default()
        };
        let gone = json!({"type": "ERROR", "object": {"code": 410, "message": "too old"}});
        follower.take(gone, &mut |_, _| {}).expect("taken");
        assert_eq!(follower.version, None, "listed again");
        let error = json!({"type": "ERROR", "object": {"code": 500, "message": "etcd"}});
        let why = follower.take(error, &mut |_, _| {}).expect_err("fails");
        assert!(why.contains("etcd"), "{why}");
    }
}
