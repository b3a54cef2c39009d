//! The command sink: `sh -c COMMAND` run for each event, the event's JSON
//! on its stdin, through [`crate::command`] (own process group, killed with
//! it when late; output bounded and discarded). A non-zero exit is a failed
//! delivery; it is not retried (a command that half-acted might act twice).

use std::time::Duration;

use crate::command::{CommandError, run_with_stdin, shell};
use crate::limits;
use std::process::ExitStatus;

/// Why a hook command failed (never its command line, which may hold a
/// secret).
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    /// It could not be run to its end.
    #[error(transparent)]
    Run(#[from] CommandError),
    /// It exited unsuccessfully.
    #[error("{status}: {stderr}")]
    Exit {
        /// How it exited.
        status: ExitStatus,
        /// The first line of its stderr, escaped.
        stderr: String,
    },
}

/// A hook command ready to run.
pub struct HookSink {
    command: String,
    timeout: Duration,
}

impl HookSink {
    /// Runs `command` for each event, for at most `timeout`.
    pub fn new(command: String, timeout: Duration) -> HookSink {
        HookSink { command, timeout }
    }

    /// Runs the command with `body` on stdin; the error says how it failed
    /// (never the command line, which may hold a secret).
    pub fn deliver(&self, body: &[u8]) -> Result<(), HookError> {
        let mut command = shell(&self.command);
        // Only what a program needs to run: lockwarden's environment holds
        // every repository's secrets (passwords, storage keys).
        command
            .env_clear()
            .envs(std::env::vars_os().filter(|(name, _)| passed_on(&name.to_string_lossy())));
        let output = run_with_stdin(command, body.to_vec(), self.timeout, limits::HOOK_OUTPUT)?;
        if output.status.success() {
            Ok(())
        } else {
            Err(HookError::Exit {
                status: output.status,
                stderr: output.stderr_line(),
            })
        }
    }
}

/// Whether the variable `name` reaches the hook command: the locale, the
/// time zone, and where programs and temporary files are.
fn passed_on(name: &str) -> bool {
    matches!(
        name,
        "PATH" | "HOME" | "LANG" | "TZ" | "TMPDIR" | "USER" | "LOGNAME"
    ) || name.starts_with("LC_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_event_reaches_stdin_and_failures_say_why() {
        let dir = tempfile::tempdir().expect("temp dir");
        let out = dir.path().join("event.json");
        let hook = HookSink::new(
            format!("cat > '{}'", out.display()),
            Duration::from_secs(10),
        );
        hook.deliver(br#"{"event":"recovered"}"#).expect("runs");
        assert_eq!(
            std::fs::read(&out).expect("written"),
            br#"{"event":"recovered"}"#
        );
        let failing = HookSink::new("echo nope >&2; exit 3".into(), Duration::from_secs(10));
        let err = failing.deliver(b"{}").expect_err("exit 3").to_string();
        assert!(
            err.contains("exit status: 3") && err.contains("nope"),
            "{err}"
        );
        // No secret of lockwarden's environment reaches the command.
        let env = dir.path().join("env");
        let hook = HookSink::new(
            format!("env > '{}'", env.display()),
            Duration::from_secs(10),
        );
        hook.deliver(b"{}").expect("runs");
        let seen = std::fs::read_to_string(&env).expect("written");
        assert!(seen.contains("PATH="), "{seen}");
        // cargo runs tests with CARGO_MANIFEST_DIR set.
        assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
        assert!(!seen.contains("CARGO_MANIFEST_DIR="), "{seen}");
        let hung = HookSink::new("sleep 1000".into(), Duration::from_millis(200));
        let err = hung.deliver(b"{}").expect_err("killed");
        assert!(
            matches!(err, HookError::Run(CommandError::TimedOut(_))),
            "{err:?}"
        );
        let err = err.to_string();
        assert!(err.contains("timed out"), "{err}");
    }
}
