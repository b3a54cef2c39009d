//! `lockwarden check`: every lock with its verdict; changes nothing.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use lockwarden::repo::location::Location;
use lockwarden::repository_settings::RepositorySettings;
use lockwarden::textfile;
use lockwarden::warden::{Act, Report};

use super::judge::{Judge, JudgeArgs, report_text, summary};
use super::{Failure, Outcome, code};

#[derive(Debug, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    judge: JudgeArgs,
    /// Print one JSON document instead of text.
    #[arg(long)]
    json: bool,
    /// Also write the result as node-exporter textfile metrics to
    /// DIR/lockwarden_<key>.prom (atomically; `lockwarden_check_success 0`
    /// when the check fails).
    #[arg(long, value_name = "DIR")]
    textfile: Option<PathBuf>,
}

pub fn run(args: &CheckArgs) -> Outcome<ExitCode> {
    let (location, checked) = match args.judge.settings() {
        Ok(settings) => (
            Some(settings.location.clone()),
            check(&args.judge, &settings),
        ),
        Err(e) => (None, Err(e)),
    };
    if let Some(dir) = &args.textfile {
        // A check that failed before its location was read still writes
        // the file, when the location can be read.
        let location = match location {
            Some(location) => location,
            None => args.judge.repo.location()?,
        };
        let report = checked.as_ref().ok().map(|(_, r)| r);
        write_textfile(&location, dir, report, &checked)?;
    }
    let (judge, report) = checked?;
    let policy = &judge.warden.policy;
    let stale = report.assessment.verdicts.stale().count();
    if args.json {
        outln!("{}", super::json_text(&report.to_json(policy)));
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

fn check(args: &JudgeArgs, settings: &RepositorySettings) -> Outcome<(Judge, Report)> {
    let judge = args.open(settings)?;
    let report = judge.run(Act::Judge)?;
    Ok((judge, report))
}

/// Writes the textfile of the repository at `location` for `report` (none:
/// the check failed). When the check failed too, its error is the one that
/// counts: a textfile failure is only logged.
fn write_textfile<T>(
    location: &Location,
    dir: &std::path::Path,
    report: Option<&Report>,
    checked: &Outcome<T>,
) -> Outcome<()> {
    let location = location.redacted();
    let now = report.map_or_else(lockwarden::time::now, |r| r.assessment.now);
    let key = textfile::key(&location);
    let content = textfile::render(&key, report, now);
    match textfile::write(dir, &textfile::file_name(&key), &content) {
        Ok(path) => {
            tracing::info!(
                "wrote {}",
                lockwarden::text::escape(&path.display().to_string())
            );
            Ok(())
        }
        Err(e) if checked.is_err() => {
            tracing::error!("{}", lockwarden::text::escape(&e.to_string()));
            Ok(())
        }
        Err(e) => Err(Failure::failed(e)),
    }
}
