//! The main job, the same for every command: read a repository's locks,
//! gather evidence, have the policy judge, remove exactly what it judged
//! stale (when asked to), and report. `check`, `unlock`, `run` and `watch`
//! only configure a [`Warden`] and render its [`Report`].

use std::sync::Arc;

use crate::contract::{self, Verdict};
use crate::evidence::{Evidence, EvidenceConfig, Observations, OwnChildren, Remembered};
use crate::first_seen::{FirstSeenError, FirstSeenStore};
use crate::kubernetes::Connection;
use crate::repo::backend::Removal;
use crate::repo::{Deadline, ForeignFile, RepoError, Repository};
use crate::runtime::{LogLine, PluginError, Policy, Runtime, Subject, Verdicts};

mod shadow;
pub use shadow::{Disagreement, Shadow, ShadowJudgement, ShadowVerdicts, disagreements};

/// Why a job failed. Nothing is removed after any of these.
#[derive(Debug, thiserror::Error)]
pub enum WardenError {
    /// The repository could not be read, or cannot remove locks.
    #[error(transparent)]
    Repo(#[from] RepoError),
    /// The policy failed (before anything was removed: the job removes only
    /// what a policy's checked verdicts say). Its message is in this one,
    /// not a source of it, so that a printed chain says it once.
    #[error("{0}; nothing was removed")]
    Plugin(PluginError),
    /// The first-seen store could not be used.
    #[error(transparent)]
    FirstSeen(#[from] FirstSeenError),
}

impl From<PluginError> for WardenError {
    fn from(e: PluginError) -> Self {
        WardenError::Plugin(e)
    }
}

/// The kind of what failed; the first-seen store's failure is none of the
/// user's kinds.
impl crate::error::Classify for WardenError {
    fn kind(&self) -> crate::error::ErrorKind {
        match self {
            WardenError::Repo(e) => e.kind(),
            WardenError::Plugin(e) => e.kind(),
            WardenError::FirstSeen(_) => crate::error::ErrorKind::Failed,
        }
    }
}

/// What to do about stale locks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Act {
    /// Only judge (`check`, `unlock --dry-run`, watch's report mode).
    Judge,
    /// Judge, then remove what was judged stale.
    Remove,
}

/// Everything a job needs besides the repository.
pub struct Warden {
    /// Runs the policy.
    pub runtime: Arc<Runtime>,
    /// The policy.
    pub policy: Arc<Policy>,
    /// Where evidence about holders comes from; gathered after the listing.
    pub evidence: EvidenceConfig,
    /// The policy's settings.
    pub settings: Vec<(String, String)>,
    /// Where first-seen times are kept, if anywhere.
    pub first_seen: Option<FirstSeenStore>,
    /// restic processes lockwarden started itself (known alive).
    pub children: Option<OwnChildren>,
    /// The Kubernetes client the binary's edge made (pod evidence), or
    /// [`Connection::none`] where the evidence does not read the API.
    pub kubernetes: Connection,
    /// A policy that judges the same requests with the same evidence
    /// answers and never acts, if any.
    pub shadow: Option<Shadow>,
}

/// Every lock of a repository at one moment, with the policy's verdicts.
#[derive(Debug)]
pub struct Assessment {
    /// The time the policy was given.
    pub now: i64,
    /// Every lock and unreadable file with its verdict.
    pub verdicts: Verdicts,
    /// What the policy logged.
    pub logs: Vec<LogLine>,
    /// The shadow policy's judgement, when there is a shadow.
    pub shadow: Option<ShadowJudgement>,
}

impl Assessment {
    /// The age of the oldest lock by its own time (ns; 0 without locks).
    pub fn oldest_lock_age(&self) -> i64 {
        self.verdicts
            .locks
            .iter()
            .map(|(l, _)| self.now.saturating_sub(l.time))
            .max()
            .unwrap_or(0)
    }
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

/// What one job found and did.
#[derive(Debug)]
pub struct Report {
    /// The repository, as the policy saw it (location redacted).
    pub repository: contract::Repository,
    /// What was asked.
    pub act: Act,
    /// The locks and verdicts.
    pub assessment: Assessment,
    /// One entry per stale lock when `act` was [`Act::Remove`].
    pub removals: Vec<RemovalResult>,
}

impl Report {
    /// How many stale locks could not be removed.
    pub fn failed(&self) -> usize {
        self.removals.iter().filter(|r| r.result.is_err()).count()
    }

    /// What happened to each lock whose removal was tried, by its id: one
    /// lookup per verdict stays cheap at 10,000 locks (a search of the list
    /// per verdict was an eighth of `unlock`'s time there).
    pub fn removals_by_id(&self) -> std::collections::HashMap<&str, &RemovalResult> {
        self.removals.iter().map(|r| (r.id.as_str(), r)).collect()
    }

    /// Why removals were left undone, when the job's deadline passed before
    /// it had begun each one (the first such removal's error).
    pub fn out_of_time(&self) -> Option<&RepoError> {
        self.removals.iter().find_map(|r| match &r.result {
            Err(e @ RepoError::DeadlinePassed { .. }) => Some(e),
            _ => None,
        })
    }
}

impl Warden {
    /// The whole job on `repo`: judge, then remove what is stale if `act`
    /// says so. A backend that cannot remove fails the job before anything
    /// is removed, and only when something is stale. No deadline: the
    /// commands run one job, which each call's timeout bounds and whoever
    /// started it can stop.
    pub fn run(&self, repo: &Repository, act: Act) -> Result<Report, WardenError> {
        self.run_then(repo, Deadline::NONE, || act)
    }

    /// [`Warden::run`] within `deadline`, with what to do decided by `act`
    /// once the locks are judged (`watch` asks whether this replica still
    /// leads). Nothing is begun after the deadline: a read not begun fails
    /// the job before anything is judged; a removal not begun is reported
    /// as not done ([`Report::out_of_time`]); a removal begun ends within
    /// its call's timeout.
    pub fn run_then(
        &self,
        repo: &Repository,
        deadline: Deadline,
        act: impl FnOnce() -> Act,
    ) -> Result<Report, WardenError> {
        let assessment = self.assess(repo, deadline)?;
        let act = act();
        let removals = match act {
            Act::Remove => self.remove_stale(repo, &assessment, deadline)?,
            Act::Judge => Vec::new(),
        };
        Ok(Report {
            repository: repo.describe(),
            act,
            assessment,
            removals,
        })
    }

    /// Reads the locks of `repo` and has the policy judge them. The clock is
    /// read once the listing is done, and evidence is gathered after that,
    /// so that every answer is about a moment after each lock was seen.
    /// A shadow policy then judges the same request at the same `now` with
    /// the same evidence answers; its failure fails nothing. The read
    /// fails when `deadline` passes before it is done.
    pub fn assess(&self, repo: &Repository, deadline: Deadline) -> Result<Assessment, WardenError> {
        let mut set = repo.read_locks_within(deadline)?;
        let now = crate::time::now();
        if let Some(store) = &self.first_seen {
            store.observe(&repo.config().id, &mut set, now)?;
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
        let mut evidence = self
            .evidence
            .gather(self.children.clone(), &self.kubernetes, observed);
        if self.shadow.is_some() {
            evidence = Arc::new(Remembered::new(evidence));
        }
        let foreign = set.foreign;
        let mut request = contract::EvaluateRequest {
            repository: repo.describe(),
            locks: set.locks,
            unreadable: set.unreadable,
            settings: self.settings.clone(),
        };
        let outcome = self
            .runtime
            .evaluate(&self.policy, now, evidence.clone(), &request)?;
        let shadow = self.shadow.as_ref().map(|shadow| {
            request.settings = shadow.settings.clone();
            self.shadow_judge(shadow, now, evidence, &request, &outcome.verdicts)
        });
        let mut verdicts = Verdicts::pair(request, outcome.verdicts);
        verdicts
            .unreadable
            .extend(foreign.into_iter().map(kept_by_the_host));
        Ok(Assessment {
            now,
            verdicts,
            logs: outcome.logs,
            shadow,
        })
    }

    /// Has `shadow` judge `request` and compares its verdicts with the
    /// enforced ones.
    fn shadow_judge(
        &self,
        shadow: &Shadow,
        now: i64,
        evidence: Arc<dyn Evidence>,
        request: &contract::EvaluateRequest,
        enforced: &contract::PolicyVerdicts,
    ) -> ShadowJudgement {
        let outcome = self
            .runtime
            .evaluate(&shadow.policy, now, evidence, request)
            .map(|outcome| ShadowVerdicts {
                judged: outcome.verdicts.locks.len() + outcome.verdicts.unreadable.len(),
                disagreements: disagreements(request, enforced, &outcome.verdicts),
                logs: outcome.logs,
            });
        ShadowJudgement {
            policy: shadow.policy.clone(),
            outcome,
        }
    }

    /// Removes every lock `assessment` judged stale, and only those: each id
    /// is one that was read and evaluated. Keeps going past a failed
    /// removal, so one bad file does not leave the others in place; what
    /// each removal did is the repository's to say
    /// ([`Repository::remove_locks_within`], which begins none after
    /// `deadline`).
    pub fn remove_stale(
        &self,
        repo: &Repository,
        assessment: &Assessment,
        deadline: Deadline,
    ) -> Result<Vec<RemovalResult>, WardenError> {
        let stale: Vec<(Subject<'_>, &Verdict)> = assessment.verdicts.stale().collect();
        if !stale.is_empty() {
            repo.check_removable()?;
        }
        let ids: Vec<&str> = stale.iter().map(|(subject, _)| subject.id()).collect();
        let outcomes = repo.remove_locks_within(&ids, deadline);
        Ok(stale
            .iter()
            .zip(outcomes)
            .map(|((subject, verdict), result)| RemovalResult {
                id: subject.id().to_owned(),
                verdict: (*verdict).clone(),
                result,
            })
            .collect())
    }

    /// Writes what the policy logged to the log, at the policy's levels,
    /// then the shadow's logs, disagreements or failure.
    pub fn emit_logs(&self, assessment: &Assessment) {
        self.policy.emit(&assessment.logs);
        if let Some(shadow) = &assessment.shadow {
            shadow.emit();
        }
    }
}

/// The rule of the host's own verdict on an entry under `locks/` that is no
/// lock file (a directory, a link, another restic file): kept, always.
pub const NOT_A_LOCK: &str = "not-a-lock-file";

/// An entry under `locks/` that is no lock file, as reported beside the
/// unreadable files, kept by the host itself (rule [`NOT_A_LOCK`]) and
/// never shown to a policy: every entry of `locks/` is reported.
fn kept_by_the_host(file: ForeignFile) -> (contract::UnreadableLock, Verdict) {
    let verdict = Verdict {
        action: contract::Action::Keep,
        rule: NOT_A_LOCK.into(),
        reason: format!("{}; lockwarden removes nothing but lock files", file.what),
    };
    let entry = contract::UnreadableLock {
        id: file.id,
        size: file.size,
        problem: file.what,
        stored_at: file.stored_at,
        first_seen: None,
    };
    (entry, verdict)
}

#[cfg(test)]
mod tests;
