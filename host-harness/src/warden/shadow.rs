//! Shadow policies: a second policy judges the same request with the same
//! evidence answers, only the enforced policy acts, and every disagreement
//! is reported. This is how an operator rolls out a stricter or looser
//! policy safely.

use std::sync::Arc;

use crate::contract::{EvaluateRequest, PolicyVerdicts, Verdict};
use crate::runtime::{LogLine, PluginError, Policy, Runtime};
use crate::text::escape;

/// A policy that judges alongside the enforced one and never acts.
#[derive(Clone)]
pub struct Shadow {
    /// The shadow policy.
    pub policy: Arc<Policy>,
    /// Its own settings (two policies have different settings).
    pub settings: Vec<(String, String)>,
}

impl Shadow {
    /// A shadow of `policy` with `settings`, checked now on `repository`
    /// (a label) as the enforced policy's are: a setting the shadow refuses
    /// is an error before anything is judged. Any other failure (a trap, a
    /// timeout) is only logged here; it recurs at each check, where it is
    /// reported as the shadow's failure and changes nothing.
    pub fn checked(
        runtime: &Runtime,
        policy: Arc<Policy>,
        settings: Vec<(String, String)>,
        repository: &str,
    ) -> Result<Shadow, PluginError> {
        match runtime.check_settings(&policy, repository, &settings) {
            Err(error) if error.is_usage() => return Err(error),
            Err(error) => tracing::warn!(
                "shadow policy {} fails already on no locks; each check will report it: {}",
                escape(&policy.info().name),
                escape(&error.to_string())
            ),
            Ok(()) => {}
        }
        Ok(Shadow { policy, settings })
    }
}

/// One input the two policies judged differently: a different action or a
/// different rule (a different reason alone is no disagreement).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disagreement {
    /// The lock file's id.
    pub id: String,
    /// The enforced policy's verdict, the one that acted.
    pub enforced: Verdict,
    /// The shadow policy's verdict, which did not.
    pub shadow: Verdict,
}

/// What the shadow made of a request it judged.
#[derive(Debug)]
pub struct ShadowVerdicts {
    /// How many inputs (locks and unreadable files) it judged.
    pub judged: usize,
    /// Where it differs from the enforced policy, in input order.
    pub disagreements: Vec<Disagreement>,
    /// What the shadow logged.
    pub logs: Vec<LogLine>,
}

/// The shadow's side of one assessment: its verdicts, or why it failed. A
/// failed shadow changes nothing the enforced policy does.
pub struct ShadowJudgement {
    /// The shadow policy.
    pub policy: Arc<Policy>,
    /// Its verdicts compared with the enforced ones, or its failure.
    pub outcome: Result<ShadowVerdicts, PluginError>,
}

impl std::fmt::Debug for ShadowJudgement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShadowJudgement")
            .field("policy", &self.policy.info().name)
            .field("outcome", &self.outcome)
            .finish()
    }
}

/// Every input of `request` where `shadow` judged differently from
/// `enforced`, in the request's order. Both were checked against `request`,
/// so each holds one verdict per input, in its order.
pub fn disagreements(
    request: &EvaluateRequest,
    enforced: &PolicyVerdicts,
    shadow: &PolicyVerdicts,
) -> Vec<Disagreement> {
    let ids = request
        .locks
        .iter()
        .map(|l| &l.id)
        .chain(request.unreadable.iter().map(|u| &u.id));
    let ours = enforced.locks.iter().chain(&enforced.unreadable);
    let theirs = shadow.locks.iter().chain(&shadow.unreadable);
    ids.zip(ours.zip(theirs))
        .filter(|(_, (ours, theirs))| ours.action != theirs.action || ours.rule != theirs.rule)
        .map(|(id, (ours, theirs))| Disagreement {
            id: id.clone(),
            enforced: ours.clone(),
            shadow: theirs.clone(),
        })
        .collect()
}

impl ShadowJudgement {
    /// The shadow's name, for messages (escaped).
    pub fn name(&self) -> String {
        escape(&self.policy.info().name).into_owned()
    }

    /// Logs what the shadow logged (under `shadow <name>`), one line per
    /// disagreement, or its failure.
    pub fn emit(&self) {
        let name = self.name();
        match &self.outcome {
            Ok(verdicts) => {
                let label = format!("shadow {}", self.policy.info().name);
                for line in &verdicts.logs {
                    line.emit(&label);
                }
                for d in &verdicts.disagreements {
                    tracing::info!(
                        lock = crate::repo::lockfile::short(&d.id),
                        "shadow policy {name} disagrees: enforced {} ({}): {}; shadow {} ({}): {}",
                        d.enforced.action.name(),
                        escape(&d.enforced.rule),
                        escape(&d.enforced.reason),
                        d.shadow.action.name(),
                        escape(&d.shadow.rule),
                        escape(&d.shadow.reason),
                    );
                }
            }
            Err(error) => tracing::warn!(
                "shadow policy {name} failed; the enforced policy's verdicts stand: {}",
                escape(&error.to_string())
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::{Action, test_request as request};

    fn verdict(action: Action, rule: &str, reason: &str) -> Verdict {
        Verdict {
            action,
            rule: rule.into(),
            reason: reason.into(),
        }
    }

    fn judged(verdicts: &[Verdict]) -> PolicyVerdicts {
        PolicyVerdicts {
            locks: verdicts.to_vec(),
            unreadable: Vec::new(),
        }
    }

    #[test]
    fn a_different_action_or_rule_is_a_disagreement_a_different_reason_is_not() {
        let request = request(&["a", "b", "c", "d"]);
        let enforced = judged(&[
            verdict(Action::Remove, "expired", "old"),
            verdict(Action::Keep, "fresh", "young"),
            verdict(Action::Keep, "fresh", "young"),
            verdict(Action::Remove, "expired", "old"),
        ]);
        let shadow = judged(&[
            verdict(Action::Keep, "young-exclusive", "exclusive"),
            verdict(Action::Keep, "fresh", "worded otherwise"),
            verdict(Action::Keep, "holder-alive", "alive"),
            verdict(Action::Keep, "expired", "same rule, other action"),
        ]);
        let found = disagreements(&request, &enforced, &shadow);
        let ids: Vec<&str> = found.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(ids, ["a", "c", "d"]);
        assert_eq!(found[0].enforced.rule, "expired");
        assert_eq!(found[0].shadow.rule, "young-exclusive");
        assert_eq!(found[0].shadow.action, Action::Keep);
        assert!(disagreements(&request, &enforced, &enforced).is_empty());
    }
}
