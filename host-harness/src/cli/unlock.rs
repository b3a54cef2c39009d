//! `lockwarden unlock`: remove the locks the policy judged stale, and say
//! which and why.

use std::collections::HashMap;
use std::process::ExitCode;

use clap::Args;
use lockwarden::contract::Action;
use lockwarden::repo::backend::Removal;
use lockwarden::warden::{RemovalResult, remove_stale};
use serde_json::json;

use lockwarden::text::escape;

use super::judge::{Judge, JudgeArgs, holder, short};

#[derive(Debug, Args)]
pub struct UnlockArgs {
    #[command(flatten)]
    judge: JudgeArgs,
    /// Print one JSON document instead of text.
    #[arg(long)]
    json: bool,
    /// Say what would be removed, and remove nothing.
    #[arg(long)]
    dry_run: bool,
}

pub fn run(args: &UnlockArgs) -> anyhow::Result<ExitCode> {
    let judge = args.judge.open()?;
    let assessment = judge.assess()?;
    let stale = assessment.stale().count();
    if stale > 0 && !args.dry_run {
        judge.repo.check_removable()?;
    }
    let results = if args.dry_run {
        Vec::new()
    } else {
        remove_stale(&judge.repo, &assessment)
    };
    let failed = results.iter().filter(|r| r.result.is_err()).count();

    if args.json {
        let mut doc = judge.report_json(&assessment);
        doc["dry_run"] = json!(args.dry_run);
        doc["removed"] = results
            .iter()
            .filter_map(|r| {
                let outcome = match &r.result {
                    Ok(Removal::Removed) => "removed",
                    Ok(Removal::AlreadyGone) => "already gone",
                    Err(_) => return None,
                };
                Some(json!({"id": r.id, "rule": r.verdict.rule, "reason": r.verdict.reason, "result": outcome}))
            })
            .collect();
        doc["failed"] = results
            .iter()
            .filter_map(|r| {
                r.result
                    .as_ref()
                    .err()
                    .map(|e| json!({"id": r.id, "error": e.to_string()}))
            })
            .collect();
        outln!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        let outcomes: HashMap<&str, &RemovalResult> =
            results.iter().map(|r| (r.id.as_str(), r)).collect();
        let locks = assessment
            .locks
            .iter()
            .map(|(l, v)| (l.id.as_str(), format!("{}, pid {}", holder(l), l.pid), v));
        let files = assessment.unreadable.iter().map(|(u, v)| {
            (
                u.id.as_str(),
                format!("unreadable: {}", escape(&u.problem)),
                v,
            )
        });
        for (id, holder, v) in locks.chain(files) {
            let word = match (v.action, outcomes.get(id).map(|r| &r.result)) {
                (Action::Keep, _) => "kept",
                (Action::Remove, None) => "would remove",
                (Action::Remove, Some(Ok(Removal::Removed))) => "removed",
                (Action::Remove, Some(Ok(Removal::AlreadyGone))) => "removed (already gone)",
                (Action::Remove, Some(Err(e))) => {
                    eprintln!(
                        "lockwarden: could not remove {}: {}",
                        short(id),
                        escape(&e.to_string())
                    );
                    continue;
                }
            };
            outln!(
                "{word} {} ({holder}, {}): {}",
                short(id),
                escape(&v.rule),
                escape(&v.reason)
            );
        }
        let (verb, acted) = if args.dry_run {
            ("would be removed", stale)
        } else {
            ("removed", results.len() - failed)
        };
        outln!("{}", Judge::summary(&assessment, verb, acted, failed));
    }
    if failed > 0 {
        anyhow::bail!(
            "{failed} of {} stale locks could not be removed (see above)",
            results.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}
