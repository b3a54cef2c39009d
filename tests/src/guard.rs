//! Hang guards: run a command that could hang (a FIFO opened for reading, a
//! password command that never ends, a daemon that ignores SIGTERM) without
//! letting it hang the test, and find the processes it left behind.
//!
//! A guarded command runs in its own process group with its output captured
//! by reader threads; when it outlives its limit the whole group is killed
//! with SIGKILL and the test gets what it printed so far.

use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::Finished;

/// The generous limit for a command that must not hang: it is not a timing
/// assertion, only a guard against waiting forever.
pub const HANG_GUARD: Duration = Duration::from_secs(60);

/// Output of one pipe, read on a thread until end of file.
struct Captured {
    bytes: Arc<Mutex<Vec<u8>>>,
    done: Arc<AtomicBool>,
}

impl Captured {
    fn start(pipe: Option<impl Read + Send + 'static>) -> Captured {
        let bytes = Arc::new(Mutex::new(Vec::new()));
        let done = Arc::new(AtomicBool::new(false));
        let (into, flag) = (bytes.clone(), done.clone());
        std::thread::spawn(move || {
            if let Some(mut pipe) = pipe {
                let mut buf = [0u8; 8192];
                while let Ok(n) = pipe.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    if let Ok(mut v) = into.lock() {
                        v.extend_from_slice(&buf[..n]);
                    }
                }
            }
            flag.store(true, Ordering::SeqCst);
        });
        Captured { bytes, done }
    }

    /// What was read, waiting at most until `until` for the end of file (a
    /// leftover grandchild may hold the pipe open).
    fn take(&self, until: Instant) -> String {
        while !self.done.load(Ordering::SeqCst) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        let bytes = self.bytes.lock().map(|b| b.clone()).unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// A command started under a hang guard, for tests that interact with it
/// (send a signal, scrape metrics) before it ends.
pub struct Guarded {
    child: Child,
    stdout: Captured,
    stderr: Captured,
    finished: bool,
}

impl Guarded {
    /// Spawns `command` with no standard input, in its own process group,
    /// capturing stdout and stderr.
    pub fn spawn(command: &mut Command) -> Guarded {
        use std::os::unix::process::CommandExt;
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {command:?}: {e}"));
        let stdout = Captured::start(child.stdout.take());
        let stderr = Captured::start(child.stderr.take());
        Guarded {
            child,
            stdout,
            stderr,
            finished: false,
        }
    }

    /// Its pid (also its process group id).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` (e.g. "TERM") to the process itself.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{signal} {} failed", self.pid());
    }

    /// True while it runs.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits up to `limit` for it to exit. `Ok` with what it printed, or
    /// `Err` with what it printed before it was killed (with its whole
    /// process group) for hanging.
    pub fn wait_within(mut self, limit: Duration) -> Result<Finished, Finished> {
        let deadline = Instant::now() + limit;
        let status: Option<ExitStatus> = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(25));
                }
                _ => break None,
            }
        };
        if status.is_none() {
            self.kill_group();
        }
        self.finished = true;
        let until = Instant::now() + Duration::from_secs(5);
        let finished = Finished {
            code: status.and_then(|s| s.code()).unwrap_or(-1),
            stdout: self.stdout.take(until),
            stderr: self.stderr.take(until),
        };
        match status {
            Some(_) => Ok(finished),
            None => Err(finished),
        }
    }

    /// Like [`Guarded::wait_within`], panicking with "hung" when it hangs.
    pub fn finish_within(self, limit: Duration, what: &str) -> Finished {
        self.wait_within(limit)
            .unwrap_or_else(|out| panic!("{what} hung (killed after {limit:?}): {out:?}"))
    }

    fn kill_group(&mut self) {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.pid())])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Guarded {
    /// A guarded command never outlives its test.
    fn drop(&mut self) {
        if !self.finished && self.running() {
            self.kill_group();
        }
    }
}

/// Runs `command` to completion (no stdin), killing its process group and
/// panicking with "hung" if it takes longer than [`HANG_GUARD`].
pub fn finish_guarded(command: &mut Command) -> Finished {
    let what = format!("{command:?}");
    Guarded::spawn(command).finish_within(HANG_GUARD, &what)
}

/// Runs every command at once under one hang guard of `limit`; returns, in
/// order, `Ok` for those that finished and `Err` for those that hung.
pub fn finish_all_within(
    commands: Vec<Command>,
    limit: Duration,
) -> Vec<Result<Finished, Finished>> {
    let started: Vec<Guarded> = commands
        .into_iter()
        .map(|mut c| Guarded::spawn(&mut c))
        .collect();
    let deadline = Instant::now() + limit;
    started
        .into_iter()
        .map(|g| g.wait_within(deadline.saturating_duration_since(Instant::now())))
        .collect()
}

static SLEEPS: AtomicU64 = AtomicU64::new(0);

/// A `sleep` command line that never ends within a test (over 16 minutes)
/// and is unique to this call, so the processes it starts can be found by
/// [`processes_with`] and ended by [`kill_marked`].
pub fn unique_sleep() -> String {
    let n = SLEEPS.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "sleep 1{:03}{:03}.{nanos:09}",
        std::process::id() % 1000,
        n % 1000
    )
}

/// Pids of live processes whose command line contains `marker` (this test
/// process excluded).
pub fn processes_with(marker: &str) -> Vec<u32> {
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter(|pid| *pid != me)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| {
                    let line: Vec<u8> = c
                        .into_iter()
                        .map(|b| if b == 0 { b' ' } else { b })
                        .collect();
                    String::from_utf8_lossy(&line).contains(marker)
                })
                .unwrap_or(false)
        })
        .collect()
}

/// SIGKILLs the processes a test started whose command line contains
/// `marker` (see [`unique_sleep`]); returns how many there were.
pub fn kill_marked(marker: &str) -> usize {
    let pids = processes_with(marker);
    for pid in &pids {
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .stderr(Stdio::null())
            .status();
    }
    pids.len()
}

/// Kills every process whose command line contains `marker` when dropped,
/// so a failing assertion leaves nothing running.
pub struct KillOnDrop(pub String);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        kill_marked(&self.0);
    }
}

/// Waits up to [`HANG_GUARD`] until `condition` holds; panics naming `what`
/// otherwise.
pub fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + HANG_GUARD;
    while !condition() {
        assert!(Instant::now() < deadline, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs `command` with at most `bytes` of private writable memory mapped
/// (`prlimit --data`): a command that reads an endless device into memory
/// fails instead of exhausting the machine. The wasm engine's inaccessible
/// reservations do not count, but its stack pool (about 2 GiB, writable,
/// untouched) does: leave room for it.
pub fn with_memory_cap(command: &Command, bytes: u64) -> Command {
    let limit = std::ffi::OsString::from(format!("--data={bytes}"));
    wrapped(command, "prlimit", &[&limit, std::ffi::OsStr::new("--")])
}

/// A copy of `command` (program, arguments, environment, directory) that
/// runs `program` instead, with `before` as its first arguments.
fn wrapped(command: &Command, program: &str, before: &[&std::ffi::OsStr]) -> Command {
    let mut wrapped = Command::new(program);
    wrapped
        .args(before)
        .arg(command.get_program())
        .args(command.get_args());
    for (k, v) in command.get_envs() {
        match v {
            Some(v) => wrapped.env(k, v),
            None => wrapped.env_remove(k),
        };
    }
    if let Some(dir) = command.get_current_dir() {
        wrapped.current_dir(dir);
    }
    wrapped
}

/// Runs `command` to completion under the hang guard with at most `cap`
/// bytes of private writable memory ([`with_memory_cap`]), and measures it
/// with GNU time (`make setup` installs it): what it printed, and its peak
/// resident memory in KiB.
pub fn finish_measured(command: &Command, cap: u64) -> (Finished, u64) {
    let report = tempfile::NamedTempFile::new().expect("a temporary file");
    let format = std::ffi::OsStr::new("%M");
    let timed = wrapped(
        command,
        "/usr/bin/time",
        &[
            std::ffi::OsStr::new("-f"),
            format,
            std::ffi::OsStr::new("-o"),
            report.path().as_os_str(),
        ],
    );
    let what = format!("{command:?}");
    let out = Guarded::spawn(&mut with_memory_cap(&timed, cap)).finish_within(HANG_GUARD, &what);
    let text = std::fs::read_to_string(report.path()).unwrap_or_default();
    let kib = text
        .lines()
        .rev()
        .find_map(|line| line.trim().parse::<u64>().ok())
        .unwrap_or_else(|| panic!("GNU time measured nothing ({text:?}) for {what}: {out:?}"));
    (out, kib)
}
