//! Reports as JSON, the one shape every command and host prints: a
//! verdict, a policy's identity, a whole [`Report`].

use serde_json::{Value, json};

use crate::contract::{EvaluateRequest, PolicyVerdicts, Verdict};
use crate::repo::backend::Removal;
use crate::runtime::{Policy, Subject};
use crate::time::format_rfc3339;
use crate::warden::{Disagreement, Report, ShadowJudgement};

/// One verdict on input `id`: `{"id", "action", "rule", "reason"}`.
pub fn verdict_json(id: &str, v: &Verdict) -> Value {
    json!({"id": id, "action": v.action.name(), "rule": v.rule, "reason": v.reason})
}

/// Every verdict on `request`, in its order (locks, then unreadable files),
/// each as [`verdict_json`].
pub fn verdicts_json(request: &EvaluateRequest, verdicts: &PolicyVerdicts) -> Vec<Value> {
    let locks = request.locks.iter().map(|l| &l.id).zip(&verdicts.locks);
    let files = request
        .unreadable
        .iter()
        .map(|u| &u.id)
        .zip(&verdicts.unreadable);
    locks
        .chain(files)
        .map(|(id, v)| verdict_json(id, v))
        .collect()
}

/// The policy's identity: name, version, contract version, source.
pub fn policy_json(policy: &Policy) -> Value {
    let info = policy.info();
    json!({
        "name": info.name,
        "version": info.version,
        "contract_version": info.contract_version,
        "source": policy.source(),
    })
}

/// One input with its verdict's fields beside its own.
fn entry_json(now: i64, subject: Subject<'_>, verdict: &Verdict) -> Value {
    let mut doc = match subject {
        Subject::Lock(l) => json!({
            "id": l.id,
            "time": format_rfc3339(l.time),
            "age_seconds": (now.saturating_sub(l.time)) as f64 / 1e9,
            "exclusive": l.exclusive,
            "hostname": l.hostname,
            "username": l.username,
            "pid": l.pid,
            "uid": l.uid,
            "gid": l.gid,
            "first_seen": l.first_seen.map(format_rfc3339),
            "stored_at": l.stored_at.map(format_rfc3339),
        }),
        Subject::Unreadable(u) => json!({
            "id": u.id,
            "size": u.size,
            "problem": u.problem,
            "stored_at": u.stored_at.map(format_rfc3339),
            "first_seen": u.first_seen.map(format_rfc3339),
        }),
    };
    if let (Some(doc), Value::Object(fields)) =
        (doc.as_object_mut(), verdict_json(subject.id(), verdict))
    {
        doc.extend(fields.into_iter().filter(|(k, _)| k != "id"));
    }
    doc
}

impl Report {
    /// The whole report as one JSON document, judged by `policy`; `removed`
    /// and `failed` say what removal did (empty when only judging).
    pub fn to_json(&self, policy: &Policy) -> Value {
        let a = &self.assessment;
        let now = a.now;
        let entries = |unreadable: bool| -> Vec<Value> {
            a.verdicts
                .all()
                .filter(|(s, _)| matches!(s, Subject::Unreadable(_)) == unreadable)
                .map(|(s, v)| entry_json(now, s, v))
                .collect()
        };
        let remove = a.verdicts.stale().count();
        let repo = &self.repository;
        let mut doc = json!({
            "repository": {
                "id": repo.id,
                "location": repo.location,
                "backend": repo.backend,
                "version": repo.version,
            },
            "policy": policy_json(policy),
            "checked_at": format_rfc3339(now),
            "locks": entries(false),
            "unreadable": entries(true),
            "summary": {
                "locks": a.verdicts.locks.len(),
                "unreadable": a.verdicts.unreadable.len(),
                "remove": remove,
                "keep": a.verdicts.len() - remove,
            },
        });
        let (mut removed, mut failed) = (Vec::new(), Vec::new());
        for r in &self.removals {
            let outcome = match &r.result {
                Ok(Removal::Removed) => "removed",
                Ok(Removal::AlreadyGone) => "already gone",
                Err(e) => {
                    failed.push(json!({"id": r.id, "error": e.to_string()}));
                    continue;
                }
            };
            removed.push(json!({"id": r.id, "rule": r.verdict.rule, "reason": r.verdict.reason, "result": outcome}));
        }
        doc["removed"] = json!(removed);
        doc["failed"] = json!(failed);
        if let Some(shadow) = &a.shadow {
            doc["shadow"] = shadow_json(shadow);
        }
        doc
    }
}

/// The shadow policy's identity (as [`policy_json`]), how many inputs it
/// judged, where it disagreed with the enforced policy, and its error if
/// it failed (`null` otherwise).
pub fn shadow_json(shadow: &ShadowJudgement) -> Value {
    let mut doc = policy_json(&shadow.policy);
    let (judged, disagreements, error) = match &shadow.outcome {
        Ok(v) => (
            json!(v.judged),
            v.disagreements.iter().map(disagreement_json).collect(),
            Value::Null,
        ),
        Err(e) => (Value::Null, Vec::new(), json!(e.to_string())),
    };
    doc["judged"] = judged;
    doc["disagreements"] = json!(disagreements);
    doc["error"] = error;
    doc
}

/// `{"id", "enforced": {"action", "rule", "reason"}, "shadow": {...}}`.
fn disagreement_json(d: &Disagreement) -> Value {
    let side = |v: &Verdict| json!({"action": v.action.name(), "rule": v.rule, "reason": v.reason});
    json!({"id": d.id, "enforced": side(&d.enforced), "shadow": side(&d.shadow)})
}
