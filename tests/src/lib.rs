//! Helpers for lockwarden's end-to-end tests: where the built binary and the
//! test guests are, and running the binary.

pub mod adversary;
pub mod fake_rest;
pub mod fault_proxy;
pub mod guard;
pub mod lock_writer;
pub mod node_host;
pub mod registry;
pub mod restic;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The test guest component built from `guests/` for `behaviour`
/// (`panic`, `spin`, ..., `wrong-contract`).
pub fn guest(behaviour: &str) -> PathBuf {
    let path = Path::new(env!("LOCKWARDEN_TEST_GUESTS")).join(format!("{behaviour}.wasm"));
    assert!(path.exists(), "no test guest {}", path.display());
    path
}

/// The `lockwarden` binary of the same build profile as the running test
/// (`target/<profile>/deps/e2e-*`) or tool (`target/<profile>/*`), unless
/// `LOCKWARDEN_TEST_BIN` names another.
pub fn lockwarden_bin() -> PathBuf {
    // Another build of the binary (an older release, say) to run the same
    // tests against.
    if let Some(bin) = std::env::var_os("LOCKWARDEN_TEST_BIN") {
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
                "no lockwarden binary next to {}: build it first with `cargo build --release -p lockwarden` \
                 (`make test` does)",
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
