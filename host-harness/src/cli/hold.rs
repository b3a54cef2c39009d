//! `lockwarden hold [--exclusive] -- CMD ARGS...`: take a restic lock on the
//! repository, run any command while holding it, release it.
//!
//! Stale locks are judged and removed first, exactly as `unlock` would. A
//! conflicting lock that remains fails the command with exit code 11 (as
//! restic fails), or is waited for with `--retry-lock`. While the command
//! runs, the lock is refreshed as restic refreshes its own; when it cannot be
//! kept, the command and every process it started are stopped (SIGTERM,
//! then SIGKILL after [`GRACE`]) and lockwarden exits 11. Otherwise the lock is removed
//! when the command ends and its exit code is passed on.

use std::ffi::OsString;
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::Args;
use lockwarden::hold::{HoldError, Holder, REFRESH_INTERVAL};
use lockwarden::repo::location::Location;
use lockwarden::repo::lockfile::short;
use lockwarden::stop::Stop;
use lockwarden::text::escape;

use super::child::{
    ChildPid, Interrupt, RetryLock, exit_code, forward_signals, spawn_tracked, stop_tree,
};
use super::judge::{Judge, JudgeArgs};
use super::{Failure, Outcome, UsageError, code};

/// How long a command stopped for a lost lock has between SIGTERM and
/// SIGKILL.
pub const GRACE: Duration = Duration::from_secs(10);

/// The shortest refresh interval: more often only loads the storage.
const MIN_REFRESH: Duration = Duration::from_secs(1);

#[derive(Debug, Args)]
pub struct HoldArgs {
    #[command(flatten)]
    judge: JudgeArgs,
    /// Take an exclusive lock (as prune and check do); without it, a shared
    /// one (as backup does).
    #[arg(long)]
    exclusive: bool,
    /// Keep trying while a conflicting lock is held, for at most this long
    /// (e.g. 10m); 0 tries once.
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = super::parse_duration)]
    retry_lock: Duration,
    /// How often the lock is refreshed (restic: 5m; at least 1s, at most 5m).
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = refresh_interval)]
    refresh_interval: Duration,
    /// The command to run while the lock is held, after `--`.
    #[arg(last = true, required = true, value_name = "CMD ARGS")]
    command: Vec<OsString>,
}

/// Why a text is no `--refresh-interval`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum RefreshIntervalError {
    /// The text is no duration.
    #[error(transparent)]
    Duration(#[from] lockwarden::time::DurationError),
    /// The duration is outside what restic's refreshing allows.
    #[error(
        "must be between 1s and 5m: a lock refreshed less often than restic refreshes \
         its own may look stale to others"
    )]
    OutOfRange,
}

fn refresh_interval(text: &str) -> Result<Duration, RefreshIntervalError> {
    let interval = super::parse_duration(text)?;
    if (MIN_REFRESH..=REFRESH_INTERVAL).contains(&interval) {
        Ok(interval)
    } else {
        Err(RefreshIntervalError::OutOfRange)
    }
}

pub fn run(args: &HoldArgs) -> Outcome<ExitCode> {
    let settings = args.judge.settings_where(lockable)?;
    let judge = args.judge.open(&settings)?;
    let child_pid = ChildPid::default();
    let interrupted = forward_signals(child_pid.clone())?;
    let kind = if args.exclusive {
        "an exclusive"
    } else {
        "a shared"
    };

    let holder = match take_lock(args, &judge, &interrupted, kind)? {
        Ok(holder) => holder,
        Err(code) => return Ok(code),
    };
    if let Some(code) = interrupted.exit_code() {
        if let Err(e) = holder.release() {
            tracing::error!("{e}");
        }
        tracing::warn!("interrupted while taking the lock; nothing ran");
        return Ok(ExitCode::from(code));
    }
    tracing::info!("holding {kind} lock ({})", short(&holder.id()));

    let outcome = run_holding(args, &holder, &child_pid, &interrupted);
    let released = holder.release();
    let (status, lost) = outcome?;
    if lost {
        return Ok(ExitCode::from(code::LOCKED));
    }
    if let Err(e) = released {
        // The command's own failure says more; a success is not one.
        if status != 0 {
            tracing::error!("{e}; the command exited with {status}");
            return Ok(ExitCode::from(status));
        }
        return Err(e.into());
    }
    tracing::info!("released the lock; the command exited with {status}");
    Ok(ExitCode::from(status))
}

/// Judges and cleans, then takes the lock, judging again while
/// `--retry-lock` lasts; the exit code instead when the repository stays
/// locked or a signal came.
fn take_lock<'a>(
    args: &HoldArgs,
    judge: &'a Judge,
    interrupted: &Interrupt,
    kind: &str,
) -> Outcome<Result<Holder<'a>, ExitCode>> {
    let mut retry = RetryLock::new(args.retry_lock);
    loop {
        judge.clean();
        let blocked = match Holder::take(&judge.repo, args.exclusive) {
            Ok(holder) => return Ok(Ok(holder)),
            Err(HoldError::Locked(why)) => why,
            Err(e) => return Err(e.into()),
        };
        if let Some(code) = interrupted.exit_code() {
            return Ok(Err(ExitCode::from(code)));
        }
        let Some((wait, left)) = retry.next() else {
            tracing::error!("cannot take {kind} lock: the repository is already locked {blocked}");
            return Ok(Err(ExitCode::from(code::LOCKED)));
        };
        tracing::warn!(
            "the repository is already locked {blocked}; judging again in {}s ({}s left of \
             --retry-lock)",
            wait.as_secs(),
            left.as_secs()
        );
        if interrupted.stop.sleep(wait) {
            tracing::warn!("interrupted while waiting for the lock; nothing ran");
            return Ok(Err(ExitCode::from(
                interrupted.exit_code().unwrap_or(code::LOCKED),
            )));
        }
    }
}

/// Refuses, before anything is opened or run, a location where lockwarden
/// cannot write a lock.
fn lockable(location: &Location) -> Outcome<()> {
    if location.modifies() {
        return Ok(());
    }
    Err(UsageError(format!(
        "lockwarden reads {} repositories through restic and cannot write a lock there; \
         hold works where lockwarden removes locks (local, rest, sftp, s3, azure, gs, rclone)",
        location.backend()
    ))
    .into())
}

/// Runs the command while one thread refreshes the lock and another
/// watches its age. Returns the command's exit code, and whether the lock
/// was lost (the command and what it started were then stopped).
fn run_holding(
    args: &HoldArgs,
    holder: &Holder<'_>,
    child_pid: &ChildPid,
    interrupted: &Interrupt,
) -> Outcome<(u8, bool)> {
    let exited = Stop::default();
    let quit = Stop::default();
    let lost = AtomicBool::new(false);
    let give_up = |result: Result<(), HoldError>| {
        let Err(e) = result else { return };
        quit.stop();
        if lost.swap(true, Ordering::SeqCst) {
            return;
        }
        tracing::error!(
            "{}; stopping the command and what it started (SIGTERM, SIGKILL after {}s)",
            escape(&e.to_string()),
            GRACE.as_secs()
        );
        stop_tree(child_pid, &exited, GRACE);
    };
    std::thread::scope(|scope| {
        scope.spawn(|| give_up(holder.keep(args.refresh_interval, &quit)));
        scope.spawn(|| give_up(holder.watchdog(args.refresh_interval, &quit)));
        let status = run_command(&args.command, child_pid, interrupted);
        exited.stop();
        quit.stop();
        status
    })
    .map(|status| (status, lost.load(Ordering::SeqCst)))
}

/// Runs the command with lockwarden's stdin, stdout and stderr, and waits for
/// it.
fn run_command(command: &[OsString], child_pid: &ChildPid, interrupted: &Interrupt) -> Outcome<u8> {
    let mut child = spawn_tracked(
        Command::new(&command[0]).args(&command[1..]),
        child_pid,
        interrupted,
    )
    .map_err(|e| {
        Failure::failed(e).context(format!("cannot run {}", command[0].to_string_lossy()))
    })?;
    let status = child
        .wait()
        .map_err(|e| Failure::failed(e).context("waiting for the command"));
    child_pid.store(0, Ordering::SeqCst);
    Ok(exit_code(status?))
}
