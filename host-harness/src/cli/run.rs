//! `lockwarden run -- restic ARGS...`: remove stale locks, run restic, and
//! when restic fails because the repository is locked, judge again, remove
//! what is stale and retry with backoff until the deadline.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use clap::Args;
use lockwarden::evidence::OwnChildren;

use super::child::{ChildPid, Interrupt, RetryLock, exit_code, forward_signals, spawn_tracked};
use super::judge::JudgeArgs;
use super::{Failure, Outcome};

/// restic's message when a lock blocks it (0.9 to 0.19).
const LOCKED: &str = "repository is already locked";
/// restic's exit code when a lock blocks it (0.17 and later).
const LOCKED_EXIT: u8 = 11;

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    judge: JudgeArgs,
    /// Keep retrying while restic fails on a lock, for at most this long
    /// (e.g. 10m); 0 runs restic once.
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = super::parse_duration)]
    retry_lock: Duration,
    /// The restic command line, after `--`.
    #[arg(last = true, required = true, value_name = "RESTIC ARGS")]
    command: Vec<OsString>,
}

pub fn run(args: &RunArgs) -> Outcome<ExitCode> {
    let settings = args.judge.settings()?;
    let children = OwnChildren::default();
    let mut judge = args.judge.open(&settings)?;
    judge.warden.children = Some(children.clone());
    let child_pid = ChildPid::default();
    let interrupted = forward_signals(child_pid.clone())?;

    let mut retry = RetryLock::new(args.retry_lock);
    judge.clean();
    loop {
        if let Some(code) = interrupted.exit_code() {
            return Ok(ExitCode::from(code));
        }
        let mut command = Command::new(&args.command[0]);
        command.args(&args.command[1..]);
        let repository = settings.location.as_given();
        lockwarden::repo::restic_env(&mut command, repository, &judge.password);
        let (code, locked) = run_once(command, &children, &child_pid, &interrupted)?;
        if code == 0 || !locked || interrupted.stop.is_stopped() {
            return Ok(ExitCode::from(code));
        }
        let Some((wait, left)) = retry.next() else {
            return Ok(ExitCode::from(code));
        };
        tracing::warn!(
            "restic is blocked by a lock; judging again in {}s ({}s left of --retry-lock)",
            wait.as_secs(),
            left.as_secs()
        );
        if interrupted.stop.sleep(wait) {
            return Ok(ExitCode::from(code));
        }
        judge.clean();
    }
}

/// Runs restic once with inherited stdin and stdout, passing its stderr
/// through unchanged while watching it for the "locked" failure. Returns the
/// exit code (128 + signal when killed) and whether restic was locked out.
fn run_once(
    mut command: Command,
    children: &OwnChildren,
    child_pid: &AtomicI32,
    interrupted: &Interrupt,
) -> Outcome<(u8, bool)> {
    command
        .stdin(Stdio::inherit())
        .stdout(Stdio::inherit())
        .stderr(Stdio::piped());
    let mut child = spawn_tracked(&mut command, child_pid, interrupted).map_err(|e| {
        Failure::failed(e).context(format!("cannot run {:?}", command.get_program()))
    })?;
    let pid = child.id();
    if let Ok(mut set) = children.lock() {
        set.insert(i64::from(pid));
    }
    let stderr = child
        .stderr
        .take()
        .ok_or_else(|| Failure::failed(anyhow::anyhow!("restic's stderr was not piped")))?;
    let watcher = std::thread::spawn(move || pass_through(stderr, std::io::stderr()));
    let status = child
        .wait()
        .map_err(|e| Failure::failed(e).context("waiting for restic"))?;
    child_pid.store(0, Ordering::SeqCst);
    if let Ok(mut set) = children.lock() {
        set.remove(&i64::from(pid));
    }
    let said_locked = watcher.join().unwrap_or(false);
    let code = exit_code(status);
    Ok((code, said_locked || code == LOCKED_EXIT))
}

/// Copies `from` to `to` byte for byte as it comes, and says whether restic's
/// "locked" message passed by. Only the last few bytes are kept between
/// reads, so no amount of output (with or without newlines) piles up.
fn pass_through(mut from: impl Read, mut to: impl Write) -> bool {
    let needle = LOCKED.as_bytes();
    let mut locked = false;
    let mut window: Vec<u8> = Vec::with_capacity(8192 + needle.len());
    let mut buffer = [0u8; 8192];
    loop {
        let n = match from.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let _ = to.write_all(&buffer[..n]);
        window.extend_from_slice(&buffer[..n]);
        locked |= window.windows(needle.len()).any(|w| w == needle);
        let keep = window.len().min(needle.len() - 1);
        window.drain(..window.len() - keep);
    }
    locked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spots_the_message_across_reads_and_keeps_nothing_else() {
        struct Chunks(Vec<&'static [u8]>);
        impl Read for Chunks {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                if self.0.is_empty() {
                    return Ok(0);
                }
                let chunk = self.0.remove(0);
                buf[..chunk.len()].copy_from_slice(chunk);
                Ok(chunk.len())
            }
        }
        let mut out = Vec::new();
        let split = Chunks(vec![b"Fatal: repository is al", b"ready locked by PID 1\n"]);
        assert!(pass_through(split, &mut out));
        assert_eq!(out, b"Fatal: repository is already locked by PID 1\n");
        assert!(!pass_through(Chunks(vec![b"all good\n"]), std::io::sink()));
        // 64 MiB without a newline streams through in constant memory.
        let endless = std::io::repeat(b'x').take(64 << 20);
        assert!(!pass_through(endless, std::io::sink()));
    }
}
