//! The whole job over the in-memory and fault-injecting backends, judged by
//! the real default policy: what is removed, what is kept, and that nothing
//! is removed where it must not be.

use std::sync::Arc;

use super::{Act, Shadow, Warden, WardenError};
use crate::error::{Classify, ErrorKind};
use crate::evidence::EvidenceConfig;
use crate::repo::backend::{
    Backend, BackendError, Capabilities, Contents, Fault, FaultyBackend, Kind, MemoryBackend,
    Operation, Removal,
};
use crate::repo::location::Location;
use crate::repo::tests::{lock_json, lock_json_at};
use crate::repo::{Password, RepoError, Repository};
use crate::runtime::{Limits, Runtime};
use crate::time::{format_rfc3339, now};

const PASSWORD: &[u8] = b"geheim";

fn owned(settings: &[(&str, &str)]) -> Vec<(String, String)> {
    settings
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn warden(settings: &[(&str, &str)]) -> Warden {
    let runtime = Runtime::new(Limits::default(), None).expect("engine");
    let policy = runtime.load_default().expect("default policy");
    Warden {
        runtime: Arc::new(runtime),
        policy: Arc::new(policy),
        evidence: EvidenceConfig::default(),
        settings: owned(settings),
        first_seen: None,
        children: None,
        shadow: None,
    }
}

/// A warden of the default policy with `settings`, shadowed by the default
/// policy with `shadow_settings`.
fn shadowed(settings: &[(&str, &str)], shadow_settings: &[(&str, &str)]) -> Warden {
    let mut warden = warden(settings);
    let shadow = warden.runtime.load_default().expect("default policy");
    warden.shadow = Some(Shadow {
        policy: Arc::new(shadow),
        settings: owned(shadow_settings),
    });
    warden
}

/// A repository with a lock written long ago (stale by restic's rule) and
/// one written now, both by another host; returns (stale id, fresh id).
fn two_locks() -> (MemoryBackend, String, String) {
    let (backend, key) = MemoryBackend::init(PASSWORD);
    let stale = backend.put_lock(&key, &lock_json("elsewhere", 7));
    let fresh = backend.put_lock(&key, &lock_json_at(&format_rfc3339(now()), "elsewhere", 8));
    (backend, stale, fresh)
}

fn open(backend: impl Backend + 'static) -> Repository {
    let location = Location::parse("/memory/repo").expect("a path");
    Repository::with_backend(location, Box::new(backend), &Password::new(PASSWORD)).expect("opens")
}

fn ids(repo: &Repository) -> Vec<String> {
    let mut ids: Vec<String> = repo
        .read_locks()
        .expect("reads")
        .locks
        .into_iter()
        .map(|l| l.id)
        .collect();
    ids.sort();
    ids
}

#[test]
fn removes_exactly_the_stale_lock() {
    let (backend, stale, fresh) = two_locks();
    let repo = open(backend);
    let report = warden(&[]).run(&repo, Act::Remove).expect("runs");
    let judged: Vec<(&str, &str)> = report
        .assessment
        .verdicts
        .all()
        .map(|(s, v)| (s.id(), v.rule.as_str()))
        .collect();
    assert!(judged.contains(&(stale.as_str(), "expired")), "{judged:?}");
    assert!(judged.contains(&(fresh.as_str(), "fresh")), "{judged:?}");
    assert_eq!(report.removals.len(), 1);
    assert_eq!(report.removals[0].id, stale);
    assert!(matches!(report.removals[0].result, Ok(Removal::Removed)));
    assert_eq!(ids(&repo), vec![fresh]);
}

/// An entry under `locks/` that is no lock file is reported, kept by the
/// host (not by the policy, which never sees it), and never removed, while
/// the stale lock beside it is.
#[test]
fn entries_that_are_no_lock_files_are_kept_by_the_host_and_reported() {
    let (backend, stale, fresh) = two_locks();
    let directory = "d".repeat(64);
    backend.put_entry(
        Kind::Lock,
        &directory,
        crate::repo::backend::EntryKind::Directory,
        Vec::new(),
    );
    let repo = open(backend);
    let report = warden(&[]).run(&repo, Act::Remove).expect("runs");
    let (entry, verdict) = report
        .assessment
        .verdicts
        .unreadable
        .iter()
        .find(|(u, _)| u.id == directory)
        .expect("reported");
    assert_eq!(entry.problem, "a directory");
    assert_eq!(
        (verdict.action, verdict.rule.as_str()),
        (crate::contract::Action::Keep, super::NOT_A_LOCK)
    );
    let removed: Vec<&str> = report.removals.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(removed, [stale.as_str()]);
    assert_eq!(ids(&repo), vec![fresh]);
}

#[test]
fn judging_removes_nothing() {
    let (backend, stale, fresh) = two_locks();
    let repo = open(backend);
    let report = warden(&[]).run(&repo, Act::Judge).expect("runs");
    assert_eq!(report.assessment.verdicts.stale().count(), 1);
    assert!(report.removals.is_empty());
    let mut both = vec![stale, fresh];
    both.sort();
    assert_eq!(ids(&repo), both);
}

#[test]
fn a_backend_that_cannot_remove_fails_before_removing_anything() {
    let (backend, _, _) = two_locks();
    let read_only = backend.with_capabilities(Capabilities {
        modify: false,
        contents: Contents::Encrypted,
        parallel_reads: 2,
    });
    let repo = open(read_only);
    let result = warden(&[]).run(&repo, Act::Remove);
    assert!(
        matches!(
            result,
            Err(WardenError::Repo(RepoError::RemovalUnsupported { .. }))
        ),
        "{result:?}"
    );
    assert_eq!(ids(&repo).len(), 2);
    // With nothing stale there is nothing to refuse.
    let (backend, key) = MemoryBackend::init(PASSWORD);
    backend.put_lock(&key, &lock_json_at(&format_rfc3339(now()), "elsewhere", 8));
    let read_only = backend.with_capabilities(Capabilities {
        modify: false,
        contents: Contents::Encrypted,
        parallel_reads: 2,
    });
    assert!(warden(&[]).run(&open(read_only), Act::Remove).is_ok());
}

#[test]
fn one_failed_removal_leaves_the_others_removed() {
    let (backend, key) = MemoryBackend::init(PASSWORD);
    let first = backend.put_lock(&key, &lock_json("elsewhere", 1));
    let second = backend.put_lock(&key, &lock_json("elsewhere", 2));
    let faulty = FaultyBackend::new(backend).fail(
        Fault::always(
            Operation::Remove,
            BackendError::Other("permission denied".into()),
        )
        .on(&first),
    );
    let repo = open(faulty);
    let report = warden(&[]).run(&repo, Act::Remove).expect("runs");
    assert_eq!(report.failed(), 1);
    let removals = report.removals_by_id();
    assert!(
        removals
            .get(first.as_str())
            .is_some_and(|r| r.result.is_err())
    );
    assert!(
        removals
            .get(second.as_str())
            .is_some_and(|r| r.result.is_ok())
    );
    assert_eq!(ids(&repo), vec![first]);
}

#[test]
fn a_lock_gone_before_its_removal_counts_as_removed() {
    let (backend, stale, _) = two_locks();
    let repo = open(FaultyBackend::new(backend));
    let warden = warden(&[]);
    let assessment = warden.assess(&repo).expect("judged");
    // Its holder removed it meanwhile.
    repo.remove_lock(&stale).expect("removed by the holder");
    let removals = warden.remove_stale(&repo, &assessment).expect("runs");
    assert!(matches!(removals[0].result, Ok(Removal::AlreadyGone)));
}

#[test]
fn a_failed_listing_or_policy_removes_nothing() {
    let (backend, _, _) = two_locks();
    let down = FaultyBackend::new(backend).fail(
        Fault::always(Operation::List, BackendError::Unreachable("timeout".into()))
            .of(Kind::Lock)
            .times(1),
    );
    let repo = open(down);
    let result = warden(&[]).run(&repo, Act::Remove);
    assert!(matches!(
        result,
        Err(WardenError::Repo(RepoError::Unreachable { .. }))
    ));
    assert_eq!(ids(&repo).len(), 2, "the listing works again, nothing went");

    let bad_setting = warden(&[("stale-after", "soon")]).run(&repo, Act::Remove);
    let error = bad_setting.expect_err("refused");
    assert_eq!(error.kind(), ErrorKind::Usage, "{error}");
    assert_eq!(ids(&repo).len(), 2);
}

/// The stale lock's rule and action per policy, from a shadowed run.
fn shadow_disagreements(report: &super::Report) -> Vec<(String, String, String)> {
    let shadow = report.assessment.shadow.as_ref().expect("a shadow judged");
    let verdicts = shadow.outcome.as_ref().expect("the shadow succeeded");
    assert_eq!(verdicts.judged, 2);
    verdicts
        .disagreements
        .iter()
        .map(|d| (d.id.clone(), d.enforced.rule.clone(), d.shadow.rule.clone()))
        .collect()
}

#[test]
fn a_looser_shadow_is_reported_and_the_enforced_policy_still_removes() {
    let (backend, stale, fresh) = two_locks();
    let repo = open(backend);
    let report = shadowed(&[], &[("stale-after", "1000h")])
        .run(&repo, Act::Remove)
        .expect("runs");
    assert_eq!(
        shadow_disagreements(&report),
        vec![(stale.clone(), "expired".to_owned(), "fresh".to_owned())]
    );
    assert_eq!(report.removals.len(), 1);
    assert_eq!(report.removals[0].id, stale);
    assert_eq!(ids(&repo), vec![fresh]);
}

#[test]
fn a_stricter_enforced_policy_removes_nothing_whatever_the_shadow_says() {
    let (backend, stale, fresh) = two_locks();
    let repo = open(backend);
    let report = shadowed(&[("stale-after", "1000h")], &[])
        .run(&repo, Act::Remove)
        .expect("runs");
    assert_eq!(
        shadow_disagreements(&report),
        vec![(stale.clone(), "fresh".to_owned(), "expired".to_owned())]
    );
    assert!(report.removals.is_empty());
    let mut both = vec![stale, fresh];
    both.sort();
    assert_eq!(ids(&repo), both);
}

#[test]
fn the_same_policy_as_its_own_shadow_agrees_on_everything() {
    let (backend, _, _) = two_locks();
    let report = shadowed(&[], &[])
        .run(&open(backend), Act::Judge)
        .expect("runs");
    assert!(shadow_disagreements(&report).is_empty());
}

#[test]
fn a_failing_shadow_changes_nothing_the_enforced_policy_does() {
    let (backend, stale, fresh) = two_locks();
    let repo = open(backend);
    let report = shadowed(&[], &[("stale-after", "soon")])
        .run(&repo, Act::Remove)
        .expect("the job succeeds");
    let shadow = report.assessment.shadow.as_ref().expect("a shadow judged");
    let error = shadow.outcome.as_ref().expect_err("the shadow refused");
    assert!(error.to_string().contains("stale-after"), "{error}");
    assert_eq!(report.removals.len(), 1);
    assert_eq!(report.removals[0].id, stale);
    assert_eq!(ids(&repo), vec![fresh]);
}
