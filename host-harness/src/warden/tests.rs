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
use crate::repo::{Deadline, Password, RepoError, Repository};
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
        kubernetes: crate::kubernetes::Connection::none(),
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
    let assessment = warden.assess(&repo, Deadline::NONE).expect("judged");
    // Its holder removed it meanwhile.
    repo.remove_lock(&stale).expect("removed by the holder");
    let removals = warden
        .remove_stale(&repo, &assessment, Deadline::NONE)
        .expect("runs");
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

/// A backend whose lock reads and removals each take [`SLOW`], counted.
struct Slow<B> {
    inner: B,
    reads: std::sync::atomic::AtomicUsize,
}

const SLOW: std::time::Duration = std::time::Duration::from_millis(100);

impl<B: Backend> Slow<B> {
    fn new(inner: B) -> Arc<Slow<B>> {
        Arc::new(Slow {
            inner,
            reads: Default::default(),
        })
    }

    fn lock_reads(&self) -> usize {
        self.reads.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl<B: Backend> Backend for Slow<B> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    fn list(&self, kind: Kind) -> Result<Vec<crate::repo::backend::FileInfo>, BackendError> {
        self.inner.list(kind)
    }
    fn read(&self, kind: Kind, name: &str) -> Result<Vec<u8>, BackendError> {
        if kind == Kind::Lock {
            self.reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            std::thread::sleep(SLOW);
        }
        self.inner.read(kind, name)
    }
    fn stat(
        &self,
        kind: Kind,
        name: &str,
    ) -> Result<Option<crate::repo::backend::FileInfo>, BackendError> {
        self.inner.stat(kind, name)
    }
    fn dir_kind(
        &self,
        kind: Kind,
    ) -> Result<Option<crate::repo::backend::EntryKind>, BackendError> {
        self.inner.dir_kind(kind)
    }
    fn remove(&self, id: &str) -> Result<Removal, BackendError> {
        std::thread::sleep(SLOW);
        self.inner.remove(id)
    }
    fn write_lock(&self, id: &str, stored: &[u8]) -> Result<(), BackendError> {
        self.inner.write_lock(id, stored)
    }
}

/// A repository with `n` locks written long ago (stale by restic's rule).
fn stale_locks(n: i64) -> MemoryBackend {
    let (backend, key) = MemoryBackend::init(PASSWORD);
    for pid in 0..n {
        backend.put_lock(&key, &lock_json("elsewhere", pid));
    }
    backend
}

/// A job out of time begins no read after its deadline (each worker reads
/// one lock, which outlasts it), judges and removes nothing, and says so;
/// the next job reads only the locks the first did not.
#[test]
fn a_job_out_of_time_reads_no_more_and_removes_nothing() {
    let slow = Slow::new(stale_locks(40));
    let repo = open(slow.clone());
    let warden = warden(&[]);
    let deadline = Deadline::after(SLOW / 2);
    let error = warden
        .run_then(&repo, deadline, || Act::Remove)
        .expect_err("out of time");
    assert!(
        matches!(error, WardenError::Repo(RepoError::DeadlinePassed { .. })),
        "{error}"
    );
    let message = error.to_string();
    assert!(
        message.contains("not read; nothing was judged or removed"),
        "{message}"
    );
    let first = slow.lock_reads();
    let workers = slow.capabilities().parallel_reads;
    assert!(first <= workers, "{first} reads begun, at most {workers}");
    let listed = slow.inner.names(Kind::Lock);
    assert_eq!(listed.len(), 40, "nothing was removed");
    let refused = repo
        .remove_lock(&listed[0])
        .expect_err("nothing is removable");
    assert!(
        matches!(refused, RepoError::NotRemovable { .. }),
        "{refused}"
    );

    let report = warden.run(&repo, Act::Remove).expect("in time");
    assert_eq!(slow.lock_reads(), 40, "each lock read once in all");
    assert_eq!(report.removals.len(), 40);
    assert!(report.out_of_time().is_none());
    assert!(slow.inner.names(Kind::Lock).is_empty());
}

/// Removals not begun by the deadline are not done, each says so, and the
/// report tells it; removals begun before it are done.
#[test]
fn removals_not_begun_by_the_deadline_are_not_done() {
    let slow = Slow::new(stale_locks(20));
    let repo = open(slow.clone());
    let warden = warden(&[]);
    let assessment = warden.assess(&repo, Deadline::NONE).expect("judged");
    let removals = warden
        .remove_stale(&repo, &assessment, Deadline::after(SLOW / 2))
        .expect("runs");
    assert_eq!(removals.len(), 20);
    let (done, left): (Vec<_>, Vec<_>) = removals.iter().partition(|r| r.result.is_ok());
    assert!(
        done.len() <= 8,
        "{} removals begun after the deadline",
        done.len()
    );
    for removal in &left {
        assert!(
            matches!(removal.result, Err(RepoError::DeadlinePassed { .. })),
            "{:?}",
            removal.result
        );
    }
    assert_eq!(
        slow.inner.names(Kind::Lock).len(),
        left.len(),
        "each one not begun is there"
    );
    let report = super::Report {
        repository: repo.describe(),
        act: Act::Remove,
        assessment,
        removals,
    };
    let why = report.out_of_time().expect("told").to_string();
    assert!(
        why.contains("before this lock's removal began; it was not removed"),
        "{why}"
    );
}

/// A deadline passed before the job began opens nothing and reads nothing.
#[test]
fn a_repository_is_not_opened_after_the_deadline() {
    let location = Location::parse("/memory/repo").expect("a path");
    let faulty = Arc::new(FaultyBackend::new(stale_locks(1)));
    let error = Repository::with_backend_within(
        location,
        Box::new(faulty.clone()),
        &Password::new(PASSWORD),
        Deadline::after(std::time::Duration::ZERO),
    )
    .expect_err("out of time");
    assert!(matches!(error, RepoError::DeadlinePassed { .. }), "{error}");
    for operation in [Operation::Read, Operation::List] {
        assert_eq!(faulty.calls(operation), 0, "{operation:?}");
    }
}
