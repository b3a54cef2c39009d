//! What `check`, `unlock` and `run` share: the options, the warden they
//! configure, and the report as text.

use std::sync::Arc;

use clap::Args;
use jiff::SignedDuration;
use lockwarden::contract::{Lock, Verdict};
use lockwarden::kubernetes::Connection;
use lockwarden::repo::backend::Removal;
use lockwarden::repo::backend::Variables;
use lockwarden::repo::location::Location;
use lockwarden::repo::{Password, Repository};
use lockwarden::repository_settings::{EnforcedSettings, PolicyChoice, RepositorySettings};
use lockwarden::runtime::Policy;
use lockwarden::text::escape;
use lockwarden::warden::{Act, Assessment, Report, Warden, WardenError};

use super::evidence_args::EvidenceArgs;
use super::policy_args::parse_setting;
use super::repo_args::RepoArgs;
use super::shadow_args::ShadowArgs;
use super::{Context, Failure, Outcome, PolicyArgs};

/// Options of every command that judges a repository's locks (`check`,
/// `unlock`, `run`, `hold`).
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
    #[command(flatten)]
    pub shadow: ShadowArgs,
}

/// An open repository, the warden that judges it, and the password that
/// opened it (for the restic that `run` starts).
pub struct Judge {
    pub repo: Repository,
    pub warden: Warden,
    pub password: Password,
}

impl JudgeArgs {
    /// The repository's settings as these options give them, checked in
    /// this order: the evidence options, the location, the password's
    /// source (read only when the repository is opened).
    pub fn settings(&self) -> Outcome<RepositorySettings> {
        self.settings_where(|_| Ok(()))
    }

    /// [`JudgeArgs::settings`], where `usable` may refuse the location
    /// before anything else is looked at (`hold`: a backend it cannot
    /// lock).
    pub fn settings_where(
        &self,
        usable: impl FnOnce(&Location) -> Outcome<()>,
    ) -> Outcome<RepositorySettings> {
        // The location first: no repository, or one `usable` refuses, is
        // said before anything about the options that judge it.
        let location = self.repo.location()?;
        usable(&location)?;
        let timeout = self.repo.timeout;
        let evidence = self.evidence.options.config(timeout.get())?;
        Ok(RepositorySettings {
            location,
            password: self.repo.password_source()?,
            variables: Variables::default(),
            timeout,
            evidence,
            policy: PolicyChoice {
                source: self.policy.source(),
                settings: self.settings.clone(),
            },
            shadow: self.shadow.choice(),
        })
    }

    /// Reads the password, loads the policies and makes the warden (a
    /// shadow setting the shadow refuses is a usage error here), then opens
    /// the repository: a broken policy fails before the slow key
    /// derivation.
    pub fn open(&self, settings: &RepositorySettings) -> Outcome<Judge> {
        let password = settings.password()?;
        let runtime = Arc::new(self.policy.runtime()?);
        let registry = self.policy.registry();
        let policies = settings.load_policies(runtime, |runtime, source, shadow| {
            let policy = runtime.load_from(source, &registry);
            let policy = if shadow {
                policy.context("shadow policy")?
            } else {
                policy?
            };
            Ok::<_, Failure>(Arc::new(policy))
        })?;
        let mut warden = settings.warden(
            policies,
            self.evidence.first_seen(),
            &settings.location.redacted(),
            EnforcedSettings::AtFirstJudgement,
        )?;
        // The one client of this command, made only when the pods are
        // evidence: without them nothing tries to connect.
        let pods = settings.evidence.reads_kubernetes();
        warden.kubernetes = Connection::when(pods, settings.timeout.get());
        let repo = settings.open(&password)?;
        Ok(Judge {
            repo,
            warden,
            password,
        })
    }
}

impl Judge {
    /// Runs the job, writing what the policy logged.
    pub fn run(&self, act: Act) -> Result<Report, WardenError> {
        let report = self.warden.run(&self.repo, act)?;
        self.warden.emit_logs(&report.assessment);
        Ok(report)
    }

    /// Judges and removes stale locks (only judges where the backend cannot
    /// remove), logging what it did and why. A failure is logged, not
    /// returned: what runs next (restic, or `hold` taking its lock) says
    /// itself if the repository is still locked.
    pub fn clean(&self) {
        let removable = self.repo.capabilities().modify;
        let act = if removable { Act::Remove } else { Act::Judge };
        let report = match self.run(act) {
            Ok(report) => report,
            Err(e) => {
                tracing::warn!(
                    "could not judge locks, removing none: {}",
                    escape(&e.to_string())
                );
                return;
            }
        };
        if !removable {
            for (subject, verdict) in report.assessment.verdicts.stale() {
                tracing::warn!(
                    "lock {} is stale ({}) but lockwarden cannot remove locks from {} repositories: {}",
                    short(subject.id()),
                    escape(&verdict.rule),
                    report.repository.backend,
                    escape(&verdict.reason)
                );
            }
        }
        for result in report.removals {
            match result.result {
                Ok(Removal::Removed | Removal::AlreadyGone) => tracing::info!(
                    "removed stale lock {} ({}): {}",
                    short(&result.id),
                    escape(&result.verdict.rule),
                    escape(&result.verdict.reason)
                ),
                Err(e) => tracing::warn!(
                    "could not remove lock {}: {}",
                    short(&result.id),
                    escape(&e.to_string())
                ),
            }
        }
    }
}

/// The text table describing `report`.
pub fn report_text(report: &Report, policy: &Policy) -> String {
    let repo = &report.repository;
    let a = &report.assessment;
    let info = policy.info();
    let mut out = format!(
        "repository {} at {} ({}, version {}); policy {} {}\n",
        escape(short(&repo.id)),
        escape(&repo.location),
        repo.backend,
        repo.version,
        escape(&info.name),
        escape(&info.version)
    );
    if a.verdicts.is_empty() {
        out += "no locks\n";
        out += &shadow_text(a);
        return out;
    }
    let rows: Vec<[String; 8]> = a
        .verdicts
        .locks
        .iter()
        .map(|(l, v)| lock_row(a.now, l, v))
        .collect();
    if !rows.is_empty() {
        let header = [
            "LOCK", "HOLDER", "PID", "AGE", "KIND", "ACTION", "RULE", "REASON",
        ]
        .map(String::from);
        out += &table(std::iter::once(header).chain(rows));
    }
    for (u, v) in &a.verdicts.unreadable {
        out += &format!(
            "unreadable {} ({} bytes): {}: {} ({})\n",
            short(&u.id),
            u.size,
            escape(&u.problem),
            v.action.name(),
            escape(&v.rule)
        );
    }
    out += &shadow_text(a);
    out
}

/// The shadow policy's section of a report: where it disagrees with the
/// enforced policy, or why it failed; empty without a shadow.
pub fn shadow_text(a: &Assessment) -> String {
    let Some(shadow) = &a.shadow else {
        return String::new();
    };
    let info = shadow.policy.info();
    let name = format!("{} {}", escape(&info.name), escape(&info.version));
    let verdicts = match &shadow.outcome {
        Ok(verdicts) => verdicts,
        Err(e) => {
            return format!(
                "shadow policy {name} failed; the enforced policy's verdicts stand: {}\n",
                escape(&e.to_string())
            );
        }
    };
    let mut out = format!(
        "shadow policy {name} disagrees on {} of {}{}\n",
        verdicts.disagreements.len(),
        verdicts.judged,
        if verdicts.disagreements.is_empty() {
            ""
        } else {
            ":"
        }
    );
    let side = |v: &Verdict| {
        format!(
            "{} ({}): {}",
            v.action.name(),
            escape(&v.rule),
            escape(&v.reason)
        )
    };
    for d in &verdicts.disagreements {
        out += &format!(
            "  {}: enforced {}; shadow {}\n",
            short(&d.id),
            side(&d.enforced),
            side(&d.shadow)
        );
    }
    out
}

/// The one-line summary: `acted` locks removed (or that would be),
/// `failed` that could not be.
pub fn summary(a: &Assessment, verb: &str, acted: usize, failed: usize) -> String {
    let remove = a.verdicts.stale().count();
    let failed = if failed > 0 {
        format!(", {failed} could not be removed")
    } else {
        String::new()
    };
    format!(
        "{} {}, {} unreadable: {acted} {verb}{failed}, {} kept",
        a.verdicts.locks.len(),
        plural(a.verdicts.locks.len(), "lock", "locks"),
        a.verdicts.unreadable.len(),
        a.verdicts.len() - remove
    )
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
            // Padding is bounded (a format width must fit in a u16); a
            // longer cell just runs on.
            *w = (*w).max(cell.chars().count()).min(256);
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::Parser;
    use lockwarden::repo::PasswordSource;
    use lockwarden::runtime::PolicySource;

    use super::*;

    /// The judging options alone, as `check` takes them.
    #[derive(Debug, Parser)]
    struct Options {
        #[command(flatten)]
        judge: JudgeArgs,
    }

    fn parse(args: &[&str]) -> Result<Options, clap::Error> {
        Options::try_parse_from(std::iter::once("lockwarden").chain(args.iter().copied()))
    }

    #[test]
    fn a_zero_timeout_is_refused_by_the_parser() {
        for zero in ["0", "0s", "0ms"] {
            let err = parse(&["-r", "/r", "--timeout", zero]).expect_err(zero);
            assert_eq!(err.kind(), clap::error::ErrorKind::ValueValidation);
            assert!(err.to_string().contains("must be more than zero"), "{err}");
        }
        let options = parse(&["-r", "/r", "--timeout", "1ms"]).expect("above zero");
        assert_eq!(options.judge.repo.timeout.get(), Duration::from_millis(1));
        let options = parse(&["-r", "/r"]).expect("the default");
        assert_eq!(options.judge.repo.timeout.get(), Duration::from_secs(60));
    }

    #[test]
    fn the_options_make_the_settings_once() {
        let options = parse(&[
            "-r",
            "/r",
            "--password-command",
            "exit 1",
            "--timeout",
            "5s",
            "--set",
            "stale-after=1h",
            "--shadow-policy",
            "/next.wasm",
        ])
        .expect("valid");
        let settings = options.judge.settings().expect("settings");
        assert_eq!(settings.location.as_given(), "/r");
        // Chosen now, run when the repository is opened.
        assert!(matches!(&settings.password, PasswordSource::Command(c) if c == "exit 1"));
        assert_eq!(settings.evidence.timeout, Duration::from_secs(5));
        assert_eq!(settings.policy.source, PolicySource::Builtin);
        assert_eq!(
            settings.policy.settings,
            vec![("stale-after".to_owned(), "1h".to_owned())]
        );
        let shadow = settings.shadow.map(|s| s.source);
        assert_eq!(shadow, Some(PolicySource::File("/next.wasm".into())));
        let two = parse(&["-r", "/r", "--password-command", "x", "-p", "/pw"]).expect("parses");
        let err = two.judge.settings().expect_err("two sources").to_string();
        assert!(err.contains("mutually exclusive"), "{err}");
    }
}
