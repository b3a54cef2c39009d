//! What `check` and `unlock` share: the options, the assessment, and the
//! report in text and JSON.

use clap::Args;
use jiff::SignedDuration;
use lockwarden::contract::{Lock, Verdict};
use lockwarden::evidence::{EvidenceConfig, OwnChildren};
use lockwarden::first_seen::FirstSeenStore;
use lockwarden::repo::Repository;
use lockwarden::runtime::{Policy, Runtime};
use lockwarden::text::escape;
use lockwarden::time::format_rfc3339;
use lockwarden::warden::{Assessment, Judgement, assess};
use serde_json::{Value, json};

use super::evidence_args::EvidenceArgs;
use super::policy::{policy_json, print_logs};
use super::repo_args::RepoArgs;
use super::{PolicyArgs, UsageError};

/// Options of every command that judges a repository's locks (`check`,
/// `unlock`, `run`).
#[derive(Debug, Args)]
pub struct JudgeArgs {
    #[command(flatten)]
    pub repo: RepoArgs,
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// A policy setting, e.g. `--set stale-after=45m` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_setting)]
    pub settings: Vec<(String, String)>,
    #[command(flatten)]
    pub evidence: EvidenceArgs,
}

fn parse_setting(text: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .filter(|(k, _)| !k.is_empty())
        .ok_or_else(|| format!("`{text}` is not KEY=VALUE"))
}

/// An open repository, a loaded policy, and everything needed to judge.
pub struct Judge {
    pub repo: Repository,
    pub runtime: Runtime,
    pub policy: Policy,
    evidence: EvidenceConfig,
    settings: Vec<(String, String)>,
    first_seen: Option<FirstSeenStore>,
    children: Option<OwnChildren>,
}

impl JudgeArgs {
    /// Loads the policy, then opens the repository (so that a broken policy
    /// fails before the slow key derivation).
    pub fn open(&self) -> anyhow::Result<Judge> {
        let evidence = self.evidence.config(self.repo.timeout)?;
        let location = self.repo.location()?;
        let password = self.repo.password()?;
        let (runtime, policy) = self.policy.load()?;
        let repo = Repository::open(location, &password, self.repo.timeout)?;
        Ok(Judge {
            repo,
            runtime,
            policy,
            evidence,
            settings: self.settings.clone(),
            first_seen: self.evidence.first_seen(),
            children: None,
        })
    }
}

impl Judge {
    /// Treats locks of these pids (restic processes lockwarden started) as
    /// alive.
    pub fn with_children(mut self, children: OwnChildren) -> Self {
        self.children = Some(children);
        self
    }

    /// Reads and judges every lock now.
    pub fn assess(&self) -> anyhow::Result<Assessment> {
        let judgement = Judgement {
            runtime: &self.runtime,
            policy: &self.policy,
            evidence: &self.evidence,
            children: self.children.clone(),
            settings: &self.settings,
            first_seen: self.first_seen.as_ref(),
        };
        let assessment = assess(&self.repo, judgement).map_err(|e| match e {
            lockwarden::warden::AssessError::Plugin(p) if p.is_usage() => {
                anyhow::Error::from(UsageError(p.to_string()))
            }
            other => other.into(),
        })?;
        print_logs(&self.policy, &assessment.logs);
        Ok(assessment)
    }

    /// The JSON document describing `assessment`.
    pub fn report_json(&self, a: &Assessment) -> Value {
        let repo = self.repo.describe();
        let locks: Vec<Value> = a
            .locks
            .iter()
            .map(|(l, v)| {
                let mut doc = json!({
                    "id": l.id,
                    "time": format_rfc3339(l.time),
                    "age_seconds": (a.now.saturating_sub(l.time)) as f64 / 1e9,
                    "exclusive": l.exclusive,
                    "hostname": l.hostname,
                    "username": l.username,
                    "pid": l.pid,
                    "uid": l.uid,
                    "gid": l.gid,
                    "first_seen": l.first_seen.map(format_rfc3339),
                });
                add_verdict(&mut doc, v);
                doc
            })
            .collect();
        let unreadable: Vec<Value> = a
            .unreadable
            .iter()
            .map(|(u, v)| {
                let mut doc = json!({"id": u.id, "size": u.size, "problem": u.problem});
                add_verdict(&mut doc, v);
                doc
            })
            .collect();
        let remove = a.stale().count();
        json!({
            "repository": {
                "id": repo.id,
                "location": repo.location,
                "backend": repo.backend,
                "version": repo.version,
            },
            "policy": policy_json(&self.policy),
            "checked_at": format_rfc3339(a.now),
            "locks": locks,
            "unreadable": unreadable,
            "summary": {
                "locks": a.locks.len(),
                "unreadable": a.unreadable.len(),
                "remove": remove,
                "keep": a.locks.len() + a.unreadable.len() - remove,
            },
        })
    }

    /// The text table describing `assessment`.
    pub fn report_text(&self, a: &Assessment) -> String {
        let repo = self.repo.describe();
        let info = self.policy.info();
        let mut out = format!(
            "repository {} at {} ({}, version {}); policy {} {}\n",
            escape(short(&repo.id)),
            escape(&repo.location),
            repo.backend,
            repo.version,
            escape(&info.name),
            escape(&info.version)
        );
        if a.locks.is_empty() && a.unreadable.is_empty() {
            out += "no locks\n";
            return out;
        }
        let rows: Vec<[String; 8]> = a.locks.iter().map(|(l, v)| lock_row(a.now, l, v)).collect();
        if !rows.is_empty() {
            let header = [
                "LOCK", "HOLDER", "PID", "AGE", "KIND", "ACTION", "RULE", "REASON",
            ]
            .map(String::from);
            out += &table(std::iter::once(header).chain(rows));
        }
        for (u, v) in &a.unreadable {
            out += &format!(
                "unreadable {} ({} bytes): {}: {} ({})\n",
                short(&u.id),
                u.size,
                escape(&u.problem),
                v.action.name(),
                escape(&v.rule)
            );
        }
        out
    }

    /// The one-line summary: `acted` locks removed (or that would be),
    /// `failed` that could not be.
    pub fn summary(a: &Assessment, verb: &str, acted: usize, failed: usize) -> String {
        let remove = a.stale().count();
        let failed = if failed > 0 {
            format!(", {failed} could not be removed")
        } else {
            String::new()
        };
        format!(
            "{} {}, {} unreadable: {acted} {verb}{failed}, {} kept",
            a.locks.len(),
            plural(a.locks.len(), "lock", "locks"),
            a.unreadable.len(),
            a.locks.len() + a.unreadable.len() - remove
        )
    }
}

fn add_verdict(doc: &mut Value, v: &Verdict) {
    doc["action"] = json!(v.action.name());
    doc["rule"] = json!(v.rule);
    doc["reason"] = json!(v.reason);
}

fn lock_row(now: i64, l: &Lock, v: &Verdict) -> [String; 8] {
    [
        short(&l.id).to_owned(),
        holder(l),
        l.pid.to_string(),
        age(now.saturating_sub(l.time)),
        if l.exclusive { "exclusive" } else { "shared" }.to_owned(),
        v.action.name().to_owned(),
        escape(&v.rule).into_owned(),
        escape(&v.reason).into_owned(),
    ]
}

/// `user@host` of a lock, safe to print.
pub fn holder(l: &Lock) -> String {
    format!("{}@{}", escape(&l.username), escape(&l.hostname))
}

/// Left-aligned columns; the last column is not padded.
fn table(rows: impl Iterator<Item = [String; 8]>) -> String {
    let rows: Vec<_> = rows.collect();
    let mut widths = [0usize; 8];
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in &rows {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .enumerate()
            .map(|(i, (cell, w))| {
                if i == 7 {
                    cell.clone()
                } else {
                    format!("{cell:w$}")
                }
            })
            .collect();
        out += cells.join("  ").trim_end();
        out.push('\n');
    }
    out
}

/// An age like `31m5s`, `2h`, or `-2h` for a lock dated in the future.
pub fn age(nanos: i64) -> String {
    use jiff::fmt::friendly::{Designator, Spacing, SpanPrinter};
    let seconds = SignedDuration::from_secs(nanos / 1_000_000_000);
    SpanPrinter::new()
        .designator(Designator::Compact)
        .spacing(Spacing::None)
        .duration_to_string(&seconds)
}

pub use lockwarden::repo::lockfile::short;

fn plural<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 { one } else { many }
}
