//! External commands (the password command, the hosts command, the watch
//! notification hook, restic for
//! the backends read through it, and the rclone and ssh children that serve
//! backends, see [`ChildGroup`]): each runs in a process group of its own
//! with a deadline, its output is bounded, and the whole group is killed when
//! it is late or done, so a background child cannot hold lockwarden up.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStderr, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::{Mutex, mpsc};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process_group};

use crate::files::{ReadError, read_bounded};
use crate::limits;

/// How long an external command may run unless configured otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// How often a running command is polled for its exit.
const POLL: Duration = Duration::from_millis(5);

/// The process groups of the commands running now, so that lockwarden can
/// take them down when it is told to stop (their own group keeps a
/// terminal's Ctrl-C from reaching them).
struct Running {
    groups: Vec<i32>,
    /// Set by [`kill_all`]: a command started later is killed at once.
    stopping: bool,
}

static RUNNING: Mutex<Running> = Mutex::new(Running {
    groups: Vec::new(),
    stopping: false,
});

/// Kills every command still running, with its whole process group, and
/// every one started from now on as soon as it starts: for a `watch` or
/// `run` that was told to stop (a thread still at work must not leave a
/// command behind the process).
pub fn kill_all() {
    if let Ok(mut running) = RUNNING.lock() {
        running.stopping = true;
        for group in running.groups.iter().filter_map(|g| Pid::from_raw(*g)) {
            let _ = kill_process_group(group, Signal::KILL);
        }
    }
}

/// Keeps a process group in [`RUNNING`] while it lives.
struct Registered(i32);

impl Registered {
    fn new(group: i32) -> Registered {
        if let Ok(mut running) = RUNNING.lock() {
            if running.stopping
                && let Some(pid) = Pid::from_raw(group)
            {
                let _ = kill_process_group(pid, Signal::KILL);
            }
            running.groups.push(group);
        }
        Registered(group)
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        if let Ok(mut running) = RUNNING.lock() {
            running.groups.retain(|g| *g != self.0);
        }
    }
}

/// The process group of a long-lived child (rclone's or ssh's, serving a
/// backend): killed when this is dropped, and by [`kill_all`] while it
/// lives. Drop it before the child's handle, which may reap the child (the
/// child's pid pins the group's id until then).
pub struct ChildGroup {
    group: Pid,
    _registered: Registered,
}

impl ChildGroup {
    /// The group led by the child `pid` (started with `process_group(0)`).
    pub fn of(pid: Option<u32>) -> Option<ChildGroup> {
        let raw = i32::try_from(pid?).ok()?;
        Some(ChildGroup {
            group: Pid::from_raw(raw)?,
            _registered: Registered::new(raw),
        })
    }
}

impl Drop for ChildGroup {
    fn drop(&mut self) {
        let _ = kill_process_group(self.group, Signal::KILL);
    }
}

/// What a finished command left.
#[derive(Debug)]
pub struct Output {
    /// How it exited.
    pub status: ExitStatus,
    /// Its standard output, whole.
    pub stdout: Vec<u8>,
    /// The start of its standard error (at most [`limits::COMMAND_STDERR`]).
    pub stderr: Vec<u8>,
}

impl Output {
    /// The first non-empty line of stderr, for an error message.
    pub fn stderr_line(&self) -> String {
        crate::text::escape(
            String::from_utf8_lossy(&self.stderr)
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .unwrap_or("(no message)"),
        )
        .into_owned()
    }
}

/// Why a command gave no output.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// It could not be started.
    #[error("cannot start it: {0}")]
    Spawn(std::io::Error),
    /// It ran past its deadline and was killed, with its process group.
    #[error("timed out after {}s and was stopped", .0.as_secs_f64())]
    TimedOut(Duration),
    /// It printed more than allowed.
    #[error("printed more than {0} bytes and was stopped")]
    TooMuchOutput(u64),
    /// Waiting for it failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Runs `command` with no stdin, for at most `timeout`, taking at most
/// `stdout_limit` bytes of its stdout.
pub fn run(command: Command, timeout: Duration, stdout_limit: u64) -> Result<Output, CommandError> {
    run_fed(command, None, timeout, stdout_limit)
}

/// Runs `command` with `input` on its stdin (written on a thread of its
/// own, then closed, so a command that does not read cannot block past the
/// deadline), for at most `timeout`, taking at most `stdout_limit` bytes of
/// its stdout.
pub fn run_with_stdin(
    command: Command,
    input: Vec<u8>,
    timeout: Duration,
    stdout_limit: u64,
) -> Result<Output, CommandError> {
    run_fed(command, Some(input), timeout, stdout_limit)
}

/// [`run`], with `input` on stdin when given (else no stdin).
fn run_fed(
    mut command: Command,
    input: Option<Vec<u8>>,
    timeout: Duration,
    stdout_limit: u64,
) -> Result<Output, CommandError> {
    let deadline = Instant::now() + timeout;
    let stdin = if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    };
    let mut child = command
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(CommandError::Spawn)?;
    let raw_group = i32::try_from(child.id()).unwrap_or(0);
    let _registered = Registered::new(raw_group);
    let group = ProcessGroup(Pid::from_raw(raw_group));
    if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
        // A command that exits without reading gives EPIPE: not an error.
        std::thread::spawn(move || {
            let _ = std::io::Write::write_all(&mut stdin, &input);
        });
    }
    let stdout = read_stdout(child.stdout.take(), stdout_limit, group);
    let stderr = read_stderr(child.stderr.take());
    let Some(status) = wait_for_exit(&mut child, deadline, group)? else {
        return Err(CommandError::TimedOut(timeout));
    };
    // The command is done; anything it left running in its group goes too,
    // so that no background child keeps its output open.
    group.kill();
    let left = deadline.saturating_duration_since(Instant::now());
    let stdout = stdout_of(stdout.recv_timeout(left.max(POLL)), timeout)?;
    let stderr = stderr.recv_timeout(POLL * 20).unwrap_or_default();
    Ok(Output {
        status,
        stdout,
        stderr,
    })
}

/// The process group of a running command.
#[derive(Clone, Copy)]
struct ProcessGroup(Option<Pid>);

impl ProcessGroup {
    /// Kills every process in the group.
    fn kill(self) {
        if let Some(group) = self.0 {
            let _ = kill_process_group(group, Signal::KILL);
        }
    }
}

/// Reads at most `limit` bytes of `stdout` on a thread of its own; the
/// command's `group` is killed when it prints more or reading fails.
fn read_stdout(
    stdout: Option<ChildStdout>,
    limit: u64,
    group: ProcessGroup,
) -> mpsc::Receiver<Result<Vec<u8>, ReadError>> {
    let (tx, rx) = mpsc::channel();
    if let Some(stdout) = stdout {
        std::thread::spawn(move || {
            let read = read_bounded(stdout, limit);
            if read.is_err() {
                group.kill();
            }
            let _ = tx.send(read);
        });
    }
    rx
}

/// Keeps the first [`limits::COMMAND_STDERR`] bytes of `stderr`, read on a
/// thread of its own.
fn read_stderr(stderr: Option<ChildStderr>) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    if let Some(mut stderr) = stderr {
        std::thread::spawn(move || {
            let mut kept = Vec::new();
            let _ = (&mut stderr)
                .take(limits::COMMAND_STDERR)
                .read_to_end(&mut kept);
            // Drain the rest, so the command never blocks on a full pipe.
            let _ = std::io::copy(&mut stderr, &mut std::io::sink());
            let _ = tx.send(kept);
        });
    }
    rx
}

/// Waits for `child` to exit until `deadline`; past it, kills `child` with
/// its `group` and returns `None`.
fn wait_for_exit(
    child: &mut Child,
    deadline: Instant,
    group: ProcessGroup,
) -> std::io::Result<Option<ExitStatus>> {
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        if Instant::now() >= deadline {
            group.kill();
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        std::thread::sleep(POLL);
    }
}

/// The command's stdout, from what its reader sent (`received`); none by
/// the deadline is a timeout after `timeout`.
fn stdout_of(
    received: Result<Result<Vec<u8>, ReadError>, mpsc::RecvTimeoutError>,
    timeout: Duration,
) -> Result<Vec<u8>, CommandError> {
    match received {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(ReadError::TooLarge { limit, .. })) => Err(CommandError::TooMuchOutput(limit)),
        Ok(Err(ReadError::Io(e))) => Err(CommandError::Io(e)),
        Ok(Err(other)) => Err(CommandError::Io(std::io::Error::other(other.to_string()))),
        Err(_) => Err(CommandError::TimedOut(timeout)),
    }
}

/// A `sh -c COMMAND` command, as restic runs `--password-command`.
pub fn shell(command_line: &str) -> Command {
    let mut command = Command::new("sh");
    command.args(["-c", command_line]);
    command
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHORT: Duration = Duration::from_secs(2);

    #[test]
    fn returns_output_and_status() {
        let out = run(shell("echo hello; echo oops >&2; exit 3"), SHORT, 100).expect("runs");
        assert_eq!(out.stdout, b"hello\n");
        assert_eq!(out.stderr_line(), "oops");
        assert_eq!(out.status.code(), Some(3));
    }

    #[test]
    fn a_hung_command_is_killed_with_its_group() {
        let started = Instant::now();
        let err = run(shell("sleep 1000 & sleep 1000"), SHORT, 100).expect_err("hangs");
        assert!(matches!(err, CommandError::TimedOut(_)), "{err}");
        assert!(started.elapsed() < Duration::from_secs(30));
    }

    #[test]
    fn a_background_child_holding_stdout_does_not_hang() {
        let out = run(shell("echo pw; sleep 1000 &"), Duration::from_secs(20), 100)
            .expect("returns once the shell exits");
        assert_eq!(out.stdout, b"pw\n");
    }

    #[test]
    fn input_reaches_stdin_and_a_command_that_ignores_it_still_ends() {
        let out = run_with_stdin(shell("cat"), b"{\"a\":1}".to_vec(), SHORT, 100).expect("runs");
        assert_eq!(out.stdout, b"{\"a\":1}");
        // More than a pipe holds, to a command that never reads it.
        let out = run_with_stdin(shell("exit 4"), vec![b'x'; 1 << 20], SHORT, 100).expect("runs");
        assert_eq!(out.status.code(), Some(4));
    }

    #[test]
    fn endless_output_is_cut_off() {
        let err = run(shell("yes"), Duration::from_secs(20), 1000).expect_err("too much");
        assert!(matches!(err, CommandError::TooMuchOutput(1000)), "{err}");
    }
}
