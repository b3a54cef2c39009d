//! Command-line interface: one file per subcommand.

/// `println!` that stops quietly when stdout is closed (`lockwarden check |
/// head`) instead of panicking.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

mod check;
mod child;
mod discover;
mod evidence_args;
mod failure;
mod hold;
mod judge;
mod policy;
mod policy_args;
mod repo_args;
mod run;
mod shadow_args;
mod unlock;
mod watch;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

/// Exit codes, documented in docs/commands.md.
pub mod code {
    /// Something failed; nothing was removed.
    pub const ERROR: u8 = 1;
    /// Bad usage: a wrong flag or setting.
    pub const USAGE: u8 = 2;
    /// `check`: some locks would be removed.
    pub const STALE: u8 = 3;
    /// No repository at that location.
    pub const NO_REPOSITORY: u8 = 10;
    /// `hold`: a conflicting lock is held, or the lock was lost (restic
    /// exits 11 when it cannot lock).
    pub const LOCKED: u8 = 11;
    /// Wrong password.
    pub const WRONG_PASSWORD: u8 = 12;
    /// The storage refused the credentials.
    pub const DENIED: u8 = 13;
    /// The storage cannot be reached.
    pub const UNREACHABLE: u8 = 14;

    use lockwarden::error::ErrorKind;

    /// The exit code of a failure of `kind`.
    pub fn of(kind: ErrorKind) -> u8 {
        match kind {
            ErrorKind::Usage => USAGE,
            ErrorKind::NoRepository => NO_REPOSITORY,
            ErrorKind::WrongPassword => WRONG_PASSWORD,
            ErrorKind::Denied => DENIED,
            ErrorKind::Unreachable => UNREACHABLE,
            ErrorKind::Locked => LOCKED,
            ErrorKind::Failed => ERROR,
        }
    }
}

/// Keeps restic repositories free of stale locks without ever removing a live
/// one.
#[derive(Debug, Parser)]
#[command(
    name = "lockwarden",
    version,
    long_version = LONG_VERSION.as_str(),
    about,
    max_term_width = 100
)]
pub struct Cli {
    /// How to write log messages to stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Human)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

/// What `--version` says: the version, the commit it was built from, the
/// policy contracts this host runs and the wasmtime that runs them.
static LONG_VERSION: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let contracts: Vec<String> = lockwarden::runtime::CONTRACTS
        .iter()
        .map(|v| format!("lockwarden:policy@{v}"))
        .collect();
    format!(
        "{} (commit {})\npolicy contracts: {}\nwasmtime: {}",
        env!("CARGO_PKG_VERSION"),
        env!("LOCKWARDEN_GIT_COMMIT"),
        contracts.join(", "),
        env!("LOCKWARDEN_WASMTIME_VERSION"),
    )
});

/// Log formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    /// One readable line per message.
    Human,
    /// One JSON object per message.
    Json,
}

/// Crates whose debug and trace output can hold secrets, capped at
/// warnings, and crates whose own lines are never shown (kube's client logs
/// a whole answer it cannot parse, unescaped, at warning level; lockwarden
/// reports the error itself).
const HTTP_CRATES: [&str; 7] = [
    "ureq",
    "ureq_proto",
    "hyper",
    "hyper_util",
    "h2",
    "reqwest",
    "rustls",
];
const SILENT_CRATES: [&str; 3] = ["kube", "kube_client", "kube_core"];

/// Sends `tracing` output to stderr. `LOCKWARDEN_LOG` (e.g. `debug`)
/// overrides the level.
fn init_logging(format: LogFormat, long_running: bool) {
    use tracing_subscriber::EnvFilter;
    let default = if long_running {
        "info"
    } else {
        "warn,lockwarden=info"
    };
    let mut filter =
        EnvFilter::try_from_env("LOCKWARDEN_LOG").unwrap_or_else(|_| EnvFilter::new(default));
    // The HTTP stacks' own trace and debug lines show URLs and dump headers
    // (credentials, tokens): capped, whatever LOCKWARDEN_LOG asks.
    let capped = HTTP_CRATES.map(|c| (c, "warn"));
    let silent = SILENT_CRATES.map(|c| (c, "off"));
    for (quiet, level) in capped.iter().chain(silent.iter()) {
        if let Ok(directive) = format!("{quiet}={level}").parse() {
            filter = filter.add_directive(directive);
        }
    }
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false);
    let _ = match (format, long_running) {
        (LogFormat::Json, _) => builder.json().try_init(),
        (LogFormat::Human, true) => builder.try_init(),
        (LogFormat::Human, false) => builder.without_time().try_init(),
    };
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show every lock with its verdict; exit 3 when some would be removed.
    Check(check::CheckArgs),
    /// Remove the locks the policy judges stale (--dry-run: only say which).
    Unlock(unlock::UnlockArgs),
    /// Remove stale locks, run restic, and retry while a lock blocks it.
    Run(run::RunArgs),
    /// Hold a restic lock on the repository while a command runs.
    Hold(hold::HoldArgs),
    /// Check many repositories periodically (TOML config), with metrics.
    Watch(watch::WatchArgs),
    /// Show what discovery would watch in the cluster, and why not the rest.
    Discover(discover::DiscoverArgs),
    /// Inspect and run stale-lock policies.
    #[command(subcommand)]
    Policy(policy::PolicyCommand),
}

/// Parses a duration as Go (and restic) do: `90s`, `30m`, `1.5h`, `1h30m`.
pub fn parse_duration(text: &str) -> Result<Duration, lockwarden::time::DurationError> {
    lockwarden::time::parse_duration(text)
}

/// Runs the parsed command.
pub fn run(cli: Cli) -> Outcome<ExitCode> {
    init_logging(
        cli.log_format,
        matches!(
            cli.command,
            Command::Run(_) | Command::Hold(_) | Command::Watch(_)
        ),
    );
    match cli.command {
        Command::Check(args) => check::run(&args),
        Command::Unlock(args) => unlock::run(&args),
        Command::Run(args) => run::run(&args),
        Command::Hold(args) => hold::run(&args),
        Command::Watch(args) => watch::run(&args),
        Command::Discover(args) => discover::run(&args),
        Command::Policy(command) => policy::run(command),
    }
}

/// A JSON document as the commands print it (a `Value` always serializes).
pub fn json_text(doc: &serde_json::Value) -> String {
    serde_json::to_string_pretty(doc).unwrap_or_default()
}

/// The exit code for a failure: the one its kind gives.
pub fn exit_code(failure: &Failure) -> u8 {
    code::of(failure.kind())
}

pub use failure::{Context, Failure, Outcome};
pub use lockwarden::error::UsageError;
pub use policy_args::{PolicyArgs, engine_failed};

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_valid() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_documented_exit_code_comes_from_one_kind() {
        use lockwarden::hold::HoldError;
        use lockwarden::repo::RepoError;
        let location = || "/r".to_owned();
        let cases: [(Failure, u8); 7] = [
            (Failure::failed(anyhow::anyhow!("anything")), code::ERROR),
            (Failure::usage("bad flag"), code::USAGE),
            (
                Failure::from(RepoError::NoRepository {
                    location: location(),
                    cause: "nothing there".into(),
                })
                .context("opening"),
                code::NO_REPOSITORY,
            ),
            (
                lockwarden::warden::WardenError::Repo(RepoError::WrongPassword {
                    location: location(),
                    detail: "1 tried".into(),
                })
                .into(),
                code::WRONG_PASSWORD,
            ),
            (lockwarden::repo::PasswordError::Empty.into(), code::USAGE),
            (
                HoldError::Repo(RepoError::Denied {
                    cause: "403".into(),
                })
                .into(),
                code::DENIED,
            ),
            (HoldError::Lost("removed".into()).into(), code::LOCKED),
        ];
        for (failure, want) in cases {
            assert_eq!(exit_code(&failure), want, "{failure}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("-5s").is_err());
    }
}
