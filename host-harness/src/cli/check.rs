//! `lockwarden check`: every lock with its verdict; changes nothing.

use std::process::ExitCode;

use clap::Args;
use lockwarden::warden::Act;

use super::code;
use super::judge::{JudgeArgs, report_text, summary};

#[derive(Debug, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    judge: JudgeArgs,
    /// Print one JSON document instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(args: &CheckArgs) -> anyhow::Result<ExitCode> {
    let judge = args.judge.open()?;
    let report = judge.run(Act::Judge)?;
    let policy = &judge.warden.policy;
    let stale = report.assessment.verdicts.stale().count();
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report.to_json(policy))?);
    } else {
        outln!("{}", report_text(&report, policy).trim_end());
        outln!(
            "{}",
            summary(&report.assessment, "would be removed", stale, 0)
        );
    }
    Ok(if stale > 0 {
        ExitCode::from(code::STALE)
    } else {
        ExitCode::SUCCESS
    })
}
