//! What `run` and `hold` share about the command they run: `--retry-lock`'s
//! schedule, SIGINT and SIGTERM passed on to it, stopping it with everything
//! it started, and its exit status as an exit code.

use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus};
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use lockwarden::evidence::{ProcessId, process_tree};
use lockwarden::stop::Stop;

use super::{Failure, Outcome};
use rustix::process::{Pid, Signal, kill_process};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::SignalsInfo;
use signal_hook::iterator::exfiltrator::WithOrigin;
use signal_hook::low_level::siginfo::Cause;

/// `--retry-lock`'s schedule: restic's backoff, 5 s doubling to 60 s, until
/// the time given runs out.
pub struct RetryLock {
    deadline: Instant,
    backoff: Duration,
}

impl RetryLock {
    /// Retries for at most `limit` from now.
    pub fn new(limit: Duration) -> RetryLock {
        RetryLock {
            deadline: Instant::now() + limit,
            backoff: Duration::from_secs(5),
        }
    }

    /// How long to wait before the next try, and how much time is left;
    /// `None` once the time ran out.
    pub fn next(&mut self) -> Option<(Duration, Duration)> {
        let left = self.deadline.checked_duration_since(Instant::now())?;
        if left.is_zero() {
            return None;
        }
        let wait = self.backoff.min(left);
        self.backoff = (self.backoff * 2).min(Duration::from_secs(60));
        Some((wait, left))
    }
}

/// The pid of the command running now (0: none).
pub type ChildPid = Arc<AtomicI32>;

/// SIGINT or SIGTERM, once one arrived.
#[derive(Default)]
pub struct Interrupt {
    /// Set when a signal arrived: nothing new starts, waits end at once.
    pub stop: Stop,
    signal: AtomicI32,
}

impl Interrupt {
    /// The exit code a shell gives a command killed by the signal that
    /// arrived (128 + its number), if one did.
    pub fn exit_code(&self) -> Option<u8> {
        match self.signal.load(Ordering::SeqCst) {
            0 => None,
            signal => u8::try_from(128 + signal).ok(),
        }
    }

    /// Sends the signal that arrived, if one did, to the command whose pid
    /// `child` holds: for a signal that came before the command's pid was
    /// known.
    pub fn pass_on(&self, child: &AtomicI32) {
        if let Some(signal) = Signal::from_named_raw(self.signal.load(Ordering::SeqCst)) {
            signal_child(child, signal);
        }
    }
}

/// Forwards SIGINT and SIGTERM to the command whose pid `child` holds, and
/// kills any password or hosts command of ours still running. A signal the
/// kernel sent (a terminal's Ctrl-C, which reaches the command too) is not
/// sent a second time: some programs take a second interrupt for "abort
/// now, without cleaning up".
pub fn forward_signals(child: ChildPid) -> Outcome<Arc<Interrupt>> {
    let interrupt = Arc::new(Interrupt::default());
    let mut signals = SignalsInfo::<WithOrigin>::new([SIGINT, SIGTERM])
        .map_err(|e| Failure::failed(e).context("cannot install signal handlers"))?;
    let seen = interrupt.clone();
    std::thread::spawn(move || {
        for origin in signals.forever() {
            seen.signal.store(origin.signal, Ordering::SeqCst);
            seen.stop.stop();
            if !matches!(origin.cause, Cause::Kernel) {
                let forward = if origin.signal == SIGINT {
                    Signal::INT
                } else {
                    Signal::TERM
                };
                signal_child(&child, forward);
            }
            lockwarden::command::kill_all();
        }
    });
    Ok(interrupt)
}

/// Starts `command` and records its pid in `child`. A signal that arrived
/// before the pid was recorded is passed on now.
pub fn spawn_tracked(
    command: &mut Command,
    child: &AtomicI32,
    interrupt: &Interrupt,
) -> std::io::Result<Child> {
    let spawned = command.spawn()?;
    child.store(i32::try_from(spawned.id()).unwrap_or(0), Ordering::SeqCst);
    interrupt.pass_on(child);
    Ok(spawned)
}

/// Sends `signal` to the command whose pid `child` holds, if one runs.
pub fn signal_child(child: &AtomicI32, signal: Signal) {
    if let Some(pid) = Pid::from_raw(child.load(Ordering::SeqCst)) {
        let _ = kill_process(pid, signal);
    }
}

/// Stops the command whose pid `child` holds and every process it started
/// that still descends from it: SIGTERM, then SIGKILL after `grace` unless
/// `exited` says the command ended by then. Processes are told apart by
/// start time, so a pid taken by a stranger meanwhile is never signalled.
pub fn stop_tree(child: &AtomicI32, exited: &Stop, grace: Duration) {
    let mut tree = process_tree(child.load(Ordering::SeqCst));
    signal_all(&tree, Signal::TERM);
    // Leave the command time to stop; the processes it started are
    // stopped anyway (once it is gone they are no longer below it).
    exited.sleep(grace);
    for late in process_tree(child.load(Ordering::SeqCst)) {
        if !tree.contains(&late) {
            tree.push(late);
        }
    }
    signal_all(&tree, Signal::KILL);
}

fn signal_all(processes: &[ProcessId], signal: Signal) {
    for process in processes {
        if process.runs()
            && let Some(pid) = Pid::from_raw(process.pid)
        {
            let _ = kill_process(pid, signal);
        }
    }
}

/// The exit code that passes `status` on: the command's own, or 128 plus
/// the signal that killed it, as a shell reports it.
pub fn exit_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code).unwrap_or(1),
        (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(1),
        (None, None) => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_lock_backs_off_as_restic_does_until_the_time_runs_out() {
        assert!(RetryLock::new(Duration::ZERO).next().is_none());
        let mut retry = RetryLock::new(Duration::from_secs(600));
        let waits: Vec<u64> = (0..6)
            .map(|_| retry.next().expect("time left").0.as_secs())
            .collect();
        assert_eq!(waits, [5, 10, 20, 40, 60, 60]);
        let mut short = RetryLock::new(Duration::from_secs(3));
        let (wait, left) = short.next().expect("time left");
        assert!(wait <= left && left <= Duration::from_secs(3));
    }
}
