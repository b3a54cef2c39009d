//! Helpers for lockwarden's end-to-end tests (`e2e/`, a test target of the
//! `lockwarden` package): where the built binary and the test guests are, and
//! running the binary.

pub mod adversary;
pub mod backend_suite;
pub mod certs;
pub mod cloud;
pub mod discovery;
pub mod fake_rest;
pub mod fault_proxy;
pub mod go;
pub mod guard;
pub mod hostile_s3;
pub mod http_wire;
pub mod kube_apiserver;
pub mod kube_emulator;
pub mod kubeconfig;
pub mod lock_writer;
pub mod metrics;
pub mod node_host;
pub mod operator_crds;
pub mod parity;
pub mod polyglot;
pub mod recorder;
pub mod registry;
pub mod repo_template;
pub mod restic;
pub mod restic_version;
pub mod sshd;
pub mod webhook;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A component the tests load, built from source by `build.rs`: one of the
/// constants in [`guests`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Guest {
    package: &'static str,
    path: &'static str,
}

impl Guest {
    /// The cargo package it is built from (`misbehave-panic`, say).
    pub fn package(self) -> &'static str {
        self.package
    }

    /// The component file.
    pub fn path(self) -> &'static Path {
        Path::new(self.path)
    }
}

impl std::fmt::Display for Guest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.package)
    }
}

/// Every component the tests load, built by `build.rs` in one nested cargo
/// build: the default policy (`DEFAULT`, from `plugin/`), the strict example
/// (`STRICT`), and the guests in `guests/` that misbehave on purpose (`PANIC`,
/// `SPIN`, ..., `WRONG_CONTRACT`).
pub mod guests {
    use super::Guest;

    include!(concat!(env!("OUT_DIR"), "/guests.rs"));
}

/// This package's directory, `tests/`: the conformance cases, the fixtures,
/// the Node.js and Python hosts.
pub const TESTS_DIR: &str = env!("CARGO_MANIFEST_DIR");

/// The `lockwarden` binary to run:
///
/// 1. `LOCKWARDEN_TEST_BIN`, to run the tests against another build (an
///    older release, say);
/// 2. else `CARGO_BIN_EXE_lockwarden`, which cargo sets when it runs the
///    end-to-end tests (`e2e`, a test target of the `lockwarden` package), to
///    the binary it has just built from the current sources;
/// 3. else, for tools that are not tests (the bench), the binary of the same
///    build profile next to the running executable.
pub fn lockwarden_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("LOCKWARDEN_TEST_BIN") {
        return PathBuf::from(bin);
    }
    if let Some(bin) = std::env::var_os("CARGO_BIN_EXE_lockwarden") {
        return PathBuf::from(bin);
    }
    let exe = std::env::current_exe().expect("the running binary's path");
    let dir = exe.parent().expect("a directory");
    let candidates = [
        dir.join("lockwarden"),
        dir.parent()
            .map(|p| p.join("lockwarden"))
            .unwrap_or_default(),
    ];
    candidates
        .into_iter()
        .find(|bin| bin.is_file())
        .unwrap_or_else(|| {
            panic!(
                "no lockwarden binary next to {}: build it first with `make build`",
                exe.display()
            )
        })
}

/// A `lockwarden` command with a private artifact cache under `cache`.
pub fn lockwarden(cache: &Path) -> Command {
    let mut command = Command::new(lockwarden_bin());
    command.env("LOCKWARDEN_CACHE_DIR", cache);
    command
}

/// A policy artifact cache shared by every test process and run
/// (`target/test-policy-cache`), for tests that run policies but do not test
/// the cache: compiling the Python strict example takes seconds, loading its
/// artifact a fraction of one. Artifacts are keyed by the component's digest
/// and the engine's (tests/e2e/runtime.rs tests the cache itself).
pub fn shared_policy_cache() -> PathBuf {
    Path::new(TESTS_DIR).join("../target/test-policy-cache")
}

/// What a finished command printed, for assertions.
#[derive(Debug)]
pub struct Finished {
    /// The exit code (-1 when killed by a signal).
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Finished {
    /// Asserts that the command exited `code` and said `text` on standard
    /// error.
    #[track_caller]
    pub fn assert_exit(&self, code: i32, text: &str) {
        assert_eq!(self.code, code, "{self:?}");
        assert!(self.stderr.contains(text), "{}", self.stderr);
    }

    /// Asserts that nothing the command printed holds any of `secrets`.
    #[track_caller]
    pub fn assert_no_secret(&self, secrets: &[&str]) {
        let all = format!("{}\n{}", self.stdout, self.stderr);
        assert_no_secret(&all, secrets, "the output");
    }

    /// The exit code and the JSON document on standard output (`check
    /// --json`, say); panics when stdout is not JSON.
    #[track_caller]
    pub fn json(&self) -> (i32, serde_json::Value) {
        let doc = serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not a JSON document: {e}: {self:?}"));
        (self.code, doc)
    }
}

/// Asserts that `text` (`what`: a log, a page, a file) holds none of
/// `secrets`.
#[track_caller]
pub fn assert_no_secret(text: &str, secrets: &[&str], what: &str) {
    for secret in secrets {
        assert!(!text.contains(secret), "{what} shows {secret:?}: {text}");
    }
}

impl From<Output> for Finished {
    fn from(output: Output) -> Self {
        Finished {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }
}

/// Runs `command` to completion, with no standard input.
pub fn finish(command: &mut Command) -> Finished {
    command
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {command:?}: {e}"))
        .into()
}

/// The variable whose value [`live_processes`] looks for: set it on a
/// command, and every process it starts inherits it.
pub const TEST_MARKER: &str = "LOCKWARDEN_TEST_MARKER";

/// Waits up to 5 s for every process with `marker` ([`live_processes`]) to
/// be gone; fails naming those left.
pub fn assert_none_left(marker: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let left = live_processes(marker);
        if left.is_empty() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "processes left behind by lockwarden: {left:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The processes still running (zombies aside) whose environment holds
/// `LOCKWARDEN_TEST_MARKER=<marker>`: whatever a process started with it
/// left behind (where it passed on its environment).
pub fn live_processes(marker: &str) -> Vec<String> {
    let needle = format!("{TEST_MARKER}={marker}");
    live_processes_where(|environ, _| {
        environ
            .split(|b| *b == 0)
            .any(|var| var == needle.as_bytes())
    })
}

/// The command lines of the processes still running (zombies aside) whose
/// command line (arguments joined by spaces) is `command_line`.
pub fn live_commands(command_line: &str) -> Vec<String> {
    live_processes_where(|_, cmdline| cmdline.trim_end() == command_line)
}

/// The command lines (arguments joined by spaces) of the live processes
/// for which `wanted(environ, command line)` holds.
fn live_processes_where(wanted: impl Fn(&[u8], &str) -> bool) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let dir = entry.path();
        let Ok(environ) = std::fs::read(dir.join("environ")) else {
            continue;
        };
        let stat = std::fs::read_to_string(dir.join("stat")).unwrap_or_default();
        // The state follows the command name in parentheses.
        let zombie = stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z'));
        let cmdline = std::fs::read(dir.join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if !zombie && wanted(&environ, &cmdline) {
            found.push(cmdline);
        }
    }
    found
}
