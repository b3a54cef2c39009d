//! What `run` and `hold` share about the command they run: SIGINT and
//! SIGTERM passed on to it, and its exit status as an exit code.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};

use anyhow::Context;
use lockwarden::watch::Stop;
use rustix::process::{Pid, Signal, kill_process};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// The pid of the command running now (0: none).
pub type ChildPid = Arc<AtomicI32>;

/// Forwards SIGINT and SIGTERM to the command whose pid `child` holds, and
/// kills any password or hosts command of ours still running. Returns a stop
/// signal that is set once either arrived, so that nothing new starts and
/// waits end at once.
pub fn forward_signals(child: ChildPid) -> anyhow::Result<Arc<Stop>> {
    let interrupted = Arc::new(Stop::default());
    let mut signals = Signals::new([SIGINT, SIGTERM]).context("cannot install signal handlers")?;
    let stop = interrupted.clone();
    std::thread::spawn(move || {
        for signal in signals.forever() {
            stop.stop();
            let forward = if signal == SIGINT {
                Signal::INT
            } else {
                Signal::TERM
            };
            signal_child(&child, forward);
            lockwarden::command::kill_all();
        }
    });
    Ok(interrupted)
}

/// Sends `signal` to the command whose pid `child` holds, if one runs.
pub fn signal_child(child: &AtomicI32, signal: Signal) {
    if let Some(pid) = Pid::from_raw(child.load(Ordering::SeqCst)) {
        let _ = kill_process(pid, signal);
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
