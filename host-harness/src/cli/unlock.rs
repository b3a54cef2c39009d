//! `lockwarden unlock`: remove the locks the policy judged stale, and say
//! which and why.

use std::process::ExitCode;

use clap::Args;
use lockwarden::contract::Action;
use lockwarden::repo::backend::Removal;
use lockwarden::runtime::Subject;
use lockwarden::text::escape;
use lockwarden::warden::{Act, Report};
use serde_json::json;

use super::judge::{JudgeArgs, holder, shadow_text, short, summary};
use super::{Failure, Outcome};

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

pub fn run(args: &UnlockArgs) -> Outcome<ExitCode> {
    let judge = args.judge.open(&args.judge.settings()?)?;
    let act = if args.dry_run {
        Act::Judge
    } else {
        Act::Remove
    };
    let report = judge.run(act)?;
    if args.json {
        let mut doc = report.to_json(&judge.warden.policy);
        doc["dry_run"] = json!(args.dry_run);
        outln!("{}", super::json_text(&doc));
    } else {
        print_text(&report);
    }
    let failed = report.failed();
    if failed > 0 {
        // The kind of the first failure decides the exit code (a storage
        // that refuses every delete is refused access, exit 13).
        let kind = report
            .removals
            .iter()
            .find_map(|r| r.result.as_ref().err())
            .map_or(lockwarden::error::ErrorKind::Failed, |e| {
                lockwarden::error::Classify::kind(e)
            });
        return Err(Failure::new(
            kind,
            anyhow::anyhow!(
                "{failed} of {} stale locks could not be removed (see above)",
                report.removals.len()
            ),
        ));
    }
    Ok(ExitCode::SUCCESS)
}

/// One line per lock saying what became of it, then the summary.
fn print_text(report: &Report) {
    let a = &report.assessment;
    let removals = report.removals_by_id();
    for (subject, v) in a.verdicts.all() {
        let id = subject.id();
        let about = match subject {
            Subject::Lock(l) => format!("{}, pid {}", holder(l), l.pid),
            Subject::Unreadable(u) => format!("unreadable: {}", escape(&u.problem)),
        };
        let word = match (v.action, removals.get(id).map(|r| &r.result)) {
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
            "{word} {} ({about}, {}): {}",
            short(id),
            escape(&v.rule),
            escape(&v.reason)
        );
    }
    let (verb, acted) = match report.act {
        Act::Judge => ("would be removed", a.verdicts.stale().count()),
        Act::Remove => ("removed", report.removals.len() - report.failed()),
    };
    let shadow = shadow_text(a);
    if !shadow.is_empty() {
        outln!("{}", shadow.trim_end());
    }
    outln!("{}", summary(a, verb, acted, report.failed()));
}
