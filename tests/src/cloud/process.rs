//! A test server process that cannot outlive the test process, and its
//! request log.
//!
//! The server runs under a small `sh` watchdog in a process group of its
//! own. The watchdog reads its standard input, a pipe whose only write end
//! the test process holds for as long as it lives (the handle is kept in a
//! `static` and never dropped). When the test process ends, however it ends
//! (a normal exit, a panic, SIGKILL), the kernel closes that end, the
//! watchdog's read returns, and it kills its whole process group: the server
//! and anything it started.
//!
//! The server's standard output and error are read line by line: the access
//! log lines (those naming an `HTTP/1.x` request) are kept to count the
//! requests a test made; a few other lines are kept for the message when the
//! server does not start.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Starts `"$@"` in the background with its stderr joined to its stdout,
/// waits for end-of-file on stdin, then kills the whole process group
/// (itself included). A background job of a non-interactive shell reads
/// `/dev/null`, so the server never sees the watchdog's pipe.
const WATCHDOG: &str = r#""$@" 2>&1 & cat >/dev/null; kill -KILL 0"#;

/// How long a server may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest log line kept whole; longer lines are cut.
const MAX_LINE: u64 = 64 << 10;
/// The most request lines kept (a test process makes far fewer).
const MAX_REQUEST_LINES: usize = 1_000_000;
/// The most other lines kept for diagnostics.
const MAX_OTHER_LINES: usize = 200;
/// How long the lines of requests that have just been answered may take to
/// arrive (the servers log within milliseconds of answering), and how long
/// the selected lines must have been quiet before they are counted.
const SETTLE: Duration = Duration::from_millis(150);
/// The longest wait for the selected lines to be quiet.
const QUIET_TIMEOUT: Duration = Duration::from_secs(3);

/// What the server printed.
#[derive(Default)]
struct Log {
    /// Access log lines, one per request, with when each arrived.
    requests: Vec<(Instant, String)>,
    /// The first other lines (startup messages, errors).
    other: Vec<String>,
}

/// A running server; see the module documentation for how it is stopped.
pub struct ServerProcess {
    /// What it is, for messages (`moto`, say).
    what: &'static str,
    /// `127.0.0.1:<port>`, where it listens.
    addr: String,
    /// The watchdog's pid, which is also its process group's id.
    group: u32,
    /// How long it took from spawning to accepting connections.
    started_in: Duration,
    log: Arc<Mutex<Log>>,
    /// Kept open for the life of the test process: closing it stops the
    /// server. (The child is kept only so that it is never waited for.)
    _lifeline: Mutex<(Child, ChildStdin)>,
}

impl ServerProcess {
    /// Starts `program args` with `env` added, listening on `addr`, and
    /// waits until it accepts connections. Panics with what it printed when
    /// it does not start within a minute.
    pub fn start(
        what: &'static str,
        addr: String,
        program: &Path,
        args: &[String],
        env: &[(&str, &str)],
    ) -> ServerProcess {
        let begin = Instant::now();
        let mut child = Command::new("sh")
            .args(["-c", WATCHDOG, what])
            .arg(program)
            .args(args)
            .envs(env.iter().copied())
            .current_dir(std::env::temp_dir())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
        let lifeline = child.stdin.take().expect("the watchdog's stdin");
        let output = child.stdout.take().expect("the server's stdout");
        let log = Arc::new(Mutex::new(Log::default()));
        spawn_reader(output, Arc::clone(&log));
        let group = child.id();
        let server = ServerProcess {
            what,
            addr,
            group,
            started_in: Duration::ZERO,
            log,
            _lifeline: Mutex::new((child, lifeline)),
        };
        server.wait_until_listening(begin);
        ServerProcess {
            started_in: begin.elapsed(),
            ..server
        }
    }

    fn wait_until_listening(&self, begin: Instant) {
        while std::net::TcpStream::connect(&self.addr).is_err() {
            if begin.elapsed() > START_TIMEOUT {
                let log = self.log.lock().expect("log lock");
                panic!(
                    "{} did not accept connections on {} within {START_TIMEOUT:?}; it printed:\n{}",
                    self.what,
                    self.addr,
                    log.other.join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// `127.0.0.1:<port>`.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// How long it took to start (spawn to first accepted connection).
    pub fn started_in(&self) -> Duration {
        self.started_in
    }

    /// The id of the process group the server runs in (the watchdog's pid).
    pub fn process_group(&self) -> u32 {
        self.group
    }

    /// How many requests answered by `moment` the server has logged whose
    /// access log line `selects`: it waits for the lines of requests answered
    /// just before `moment` to arrive, then counts those that arrived by then.
    /// For a moment while other requests keep coming.
    pub fn requests_by(&self, moment: Instant, selects: impl Fn(&str) -> bool) -> usize {
        if let Some(wait) = (moment + SETTLE).checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let log = self.log.lock().expect("log lock");
        log.requests
            .iter()
            .filter(|(arrived, line)| *arrived <= moment && selects(line))
            .count()
    }

    /// How many requests the server has logged whose access log line
    /// `selects`. It first gives the lines of requests answered just before
    /// a moment to arrive, then waits (up to 3 s) until no selected line has
    /// arrived for that moment, so that other tests' traffic on the same
    /// server does not hold it up.
    pub fn requests(&self, selects: impl Fn(&str) -> bool) -> usize {
        std::thread::sleep(SETTLE);
        let deadline = Instant::now() + QUIET_TIMEOUT;
        loop {
            let log = self.log.lock().expect("log lock");
            let selected: Vec<Instant> = log
                .requests
                .iter()
                .filter(|(_, line)| selects(line))
                .map(|(arrived, _)| *arrived)
                .collect();
            let quiet = selected.last().is_none_or(|t| t.elapsed() >= SETTLE);
            if quiet || Instant::now() >= deadline {
                return selected.len();
            }
            drop(log);
            std::thread::sleep(SETTLE / 5);
        }
    }
}

/// Reads the server's output into `log` until it closes.
fn spawn_reader(output: impl Read + Send + 'static, log: Arc<Mutex<Log>>) {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(output);
        let mut line = Vec::new();
        loop {
            line.clear();
            match (&mut reader).take(MAX_LINE).read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            let text = String::from_utf8_lossy(&line).trim_end().to_owned();
            let Ok(mut log) = log.lock() else { return };
            if text.contains(" HTTP/1.") {
                if log.requests.len() < MAX_REQUEST_LINES {
                    log.requests.push((Instant::now(), text));
                }
            } else if log.other.len() < MAX_OTHER_LINES {
                log.other.push(text);
            }
        }
    });
}
