//! The main job, shared by every command: read a repository's locks, ask the
//! policy, and remove exactly what it judged stale.

use crate::contract::{Action, EvaluateRequest, Lock, UnreadableLock, Verdict};
use crate::evidence::{EvidenceConfig, Observations, OwnChildren};
use crate::first_seen::{FirstSeenError, FirstSeenStore};
use crate::parallel::parallel_map;
use crate::repo::backend::Removal;
use crate::repo::{RepoError, Repository};
use crate::runtime::LogLine;
use crate::runtime::{PluginError, Policy, Runtime};

/// Why an assessment failed. Nothing is removed after either.
#[derive(Debug, thiserror::Error)]
pub enum AssessError {
    /// The repository could not be read.
    #[error(transparent)]
    Repo(#[from] RepoError),
    /// The policy failed.
    #[error(transparent)]
    Plugin(#[from] PluginError),
    /// The first-seen store could not be used.
    #[error(transparent)]
    FirstSeen(#[from] FirstSeenError),
}

/// Every lock of a repository at one moment, with the policy's verdicts.
#[derive(Debug)]
pub struct Assessment {
    /// The time the policy was given.
    pub now: i64,
    /// The locks read, each with its verdict, in listing order.
    pub locks: Vec<(Lock, Verdict)>,
    /// The unreadable files, each with its verdict.
    pub unreadable: Vec<(UnreadableLock, Verdict)>,
    /// What the policy logged.
    pub logs: Vec<LogLine>,
}

impl Assessment {
    /// The verdicts that say `remove`, with the lock each is about.
    pub fn stale(&self) -> impl Iterator<Item = (&str, &Verdict)> {
        let locks = self.locks.iter().map(|(l, v)| (l.id.as_str(), v));
        let files = self.unreadable.iter().map(|(u, v)| (u.id.as_str(), v));
        locks
            .chain(files)
            .filter(|(_, v)| v.action == Action::Remove)
    }
}

/// What a judgement needs besides the repository.
pub struct Judgement<'a> {
    /// Runs the policy.
    pub runtime: &'a Runtime,
    /// The policy.
    pub policy: &'a Policy,
    /// Where evidence about holders comes from; gathered after the listing.
    pub evidence: &'a EvidenceConfig,
    /// restic processes lockwarden started itself (known alive).
    pub children: Option<OwnChildren>,
    /// The policy's settings.
    pub settings: &'a [(String, String)],
    /// Where first-seen times are kept, if anywhere.
    pub first_seen: Option<&'a FirstSeenStore>,
}

/// Reads the locks of `repo` and has the policy judge them. The clock is
/// read once the listing is done, and evidence is gathered after that, so
/// that every answer is about a moment after each lock was seen.
pub fn assess(repo: &Repository, judgement: Judgement<'_>) -> Result<Assessment, AssessError> {
    let Judgement {
        runtime,
        policy,
        evidence,
        children,
        settings,
        first_seen,
    } = judgement;
    let mut set = repo.read_locks()?;
    let now = crate::time::now();
    if let Some(store) = first_seen {
        store.observe(&repo.config().id, &mut set.locks, now)?;
    }
    // Two locks with one (hostname, time) count as seen at the later sight.
    let mut observed = Observations::new();
    for lock in &set.locks {
        let seen = lock.first_seen.unwrap_or(now);
        let slot = observed
            .entry((lock.hostname.clone(), lock.time))
            .or_insert(seen);
        *slot = (*slot).max(seen);
    }
    let evidence = evidence.gather(children, observed);
    let request = EvaluateRequest {
        repository: repo.describe(),
        locks: set.locks,
        unreadable: set.unreadable,
        settings: settings.to_vec(),
    };
    let outcome = runtime.evaluate(policy, now, evidence, &request)?;
    // validate() returned the verdicts in input order: locks, then files.
    let mut verdicts = outcome.verdicts.into_iter();
    let locks = request.locks.into_iter().zip(verdicts.by_ref()).collect();
    let unreadable = request.unreadable.into_iter().zip(verdicts).collect();
    Ok(Assessment {
        now,
        locks,
        unreadable,
        logs: outcome.logs,
    })
}

/// What happened to one lock judged stale.
#[derive(Debug)]
pub struct RemovalResult {
    /// The lock id.
    pub id: String,
    /// The verdict that judged it stale.
    pub verdict: Verdict,
    /// Removed, already gone, or the error.
    pub result: Result<Removal, RepoError>,
}

/// Removes every lock `assessment` judged stale, and only those: each id is
/// one that was read and evaluated. Keeps going past a failed removal, so one
/// bad file does not leave the others in place.
pub fn remove_stale(repo: &Repository, assessment: &Assessment) -> Vec<RemovalResult> {
    let stale: Vec<(&str, &Verdict)> = assessment.stale().collect();
    parallel_map(&stale, REMOVE_WORKERS, |(id, verdict)| RemovalResult {
        id: (*id).to_owned(),
        verdict: (*verdict).clone(),
        result: repo.remove_lock(id),
    })
}

/// How many lock files are deleted at once.
const REMOVE_WORKERS: usize = 8;
