//! `lockwarden check`: every lock with its verdict; changes nothing.

use std::process::ExitCode;

use clap::Args;

use super::code;
use super::judge::{Judge, JudgeArgs};

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
    let assessment = judge.assess()?;
    if args.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&judge.report_json(&assessment))?
        );
    } else {
        outln!("{}", judge.report_text(&assessment).trim_end());
        let stale = assessment.stale().count();
        outln!(
            "{}",
            Judge::summary(&assessment, "would be removed", stale, 0)
        );
    }
    Ok(if assessment.stale().next().is_some() {
        ExitCode::from(code::STALE)
    } else {
        ExitCode::SUCCESS
    })
}
