//! `lockwarden unlock`: remove the locks the policy judged stale, and say
//! which and why.

use std::process::ExitCode;

use clap::Args;
use lockwarden::repo::backend::Removal;
use lockwarden::warden::remove_stale;
use serde_json::json;

use super::judge::{Judge, JudgeArgs, holder, short};
use super::policy::action_name;

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
        let lookup = |id: &str| {
            let lock = assessment
                .locks
                .iter()
                .find(|(l, _)| l.id == id)
                .map(|(l, _)| l);
            let file = assessment
                .unreadable
                .iter()
                .find(|(u, _)| u.id == id)
                .map(|(u, _)| u);
            holder(lock, file)
        };
        if args.dry_run {
            for (id, v) in assessment.stale() {
                outln!(
                    "would remove {} ({}, {}): {}",
                    short(id),
                    lookup(id),
                    v.rule,
                    v.reason
                );
            }
        }
        for r in &results {
            match &r.result {
                Ok(removal) => outln!(
                    "{} {} ({}, {}): {}",
                    if *removal == Removal::Removed {
                        "removed"
                    } else {
                        "removed (already gone)"
                    },
                    short(&r.id),
                    lookup(&r.id),
                    r.verdict.rule,
                    r.verdict.reason
                ),
                Err(e) => eprintln!("lockwarden: could not remove {}: {e}", short(&r.id)),
            }
        }
        for (l, v) in &assessment.locks {
            if v.action != lockwarden::contract::Action::Remove {
                outln!(
                    "kept {} ({}, {}): {}",
                    short(&l.id),
                    holder(Some(l), None),
                    v.rule,
                    v.reason
                );
            }
        }
        for (u, v) in &assessment.unreadable {
            if v.action != lockwarden::contract::Action::Remove {
                outln!(
                    "kept {} ({}): {} ({})",
                    short(&u.id),
                    u.problem,
                    action_name(v.action),
                    v.rule
                );
            }
        }
        let verb = if args.dry_run {
            "would be removed"
        } else {
            "removed"
        };
        outln!("{}", Judge::summary(&assessment, verb));
    }
    if failed > 0 {
        anyhow::bail!(
            "{failed} of {} stale locks could not be removed (see above)",
            results.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}
