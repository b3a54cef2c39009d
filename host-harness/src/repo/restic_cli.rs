//! Read-only access through the `restic` binary, for backends lockwarden does
//! not speak natively (sftp, s3, b2, azure, gs, swift, rclone). restic does
//! the decryption; lockwarden never removes anything this way.

use std::process::Command;
use std::time::Duration;

use serde::Deserialize;

use super::{Config, Password};
use crate::command::{self, CommandError};
use crate::limits;

/// Runs `restic ... --no-lock` against one repository.
pub struct ResticCli {
    repository: String,
    password: Password,
    timeout: Duration,
}

/// What restic prints when the storage does not answer (Go's net errors and
/// restic's own), as opposed to "no repository there".
const UNREACHABLE: [&str; 6] = [
    "connection refused",
    "no such host",
    "i/o timeout",
    "dial tcp",
    "context deadline exceeded",
    "network is unreachable",
];

/// How a restic run failed.
#[derive(Debug)]
pub enum ResticFailure {
    /// restic says there is no repository.
    NoRepository(String),
    /// restic says the password is wrong.
    WrongPassword,
    /// The storage did not answer, or restic did not finish in time.
    Unreachable(String),
    /// restic could not be run, or failed otherwise.
    Other(String),
}

#[derive(Deserialize)]
struct ConfigJson {
    version: u32,
    id: String,
}

impl ResticCli {
    /// A runner for `repository` (as given to restic) with `password`; each
    /// restic run is stopped after `timeout`.
    pub fn new(repository: &str, password: Password, timeout: Duration) -> ResticCli {
        ResticCli {
            repository: repository.to_owned(),
            password,
            timeout,
        }
    }

    fn run(&self, args: &[&str]) -> Result<Vec<u8>, ResticFailure> {
        let mut restic = Command::new("restic");
        restic
            .args(args)
            .arg("--no-lock")
            .env("RESTIC_REPOSITORY", &self.repository)
            .env("RESTIC_PASSWORD", self.password.as_str_lossy())
            .env_remove("RESTIC_REPOSITORY_FILE")
            .env_remove("RESTIC_PASSWORD_FILE")
            .env_remove("RESTIC_PASSWORD_COMMAND");
        // A listing of 100,000 ids is 6.5 MB.
        let output = command::run(restic, self.timeout, limits::LISTING_BODY).map_err(|e| match e {
            CommandError::Spawn(e) => ResticFailure::Other(format!(
                "cannot run restic ({e}); this backend is read through the restic binary: install restic"
            )),
            CommandError::TimedOut(_) => ResticFailure::Unreachable(format!(
                "restic {} on {}: {e} (raise --timeout if the storage is slow)",
                args.join(" "),
                super::location::redact_userinfo(&self.repository)
            )),
            other => ResticFailure::Other(format!("restic {}: {other}", args.join(" "))),
        })?;
        if output.status.success() {
            return Ok(output.stdout);
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        let first = self.scrub(&output.stderr_line());
        // restic 0.17+ exits 10 and 12; older ones exit 1 with these texts.
        let code = output.status.code();
        if code == Some(12) || stderr.contains("wrong password") {
            Err(ResticFailure::WrongPassword)
        } else if UNREACHABLE.iter().any(|t| stderr.contains(t)) {
            Err(ResticFailure::Unreachable(format!(
                "cannot reach {}: {first}",
                super::location::redact_userinfo(&self.repository)
            )))
        } else if code == Some(10)
            || stderr.contains("Is there a repository at the following location?")
        {
            Err(ResticFailure::NoRepository(first))
        } else {
            Err(ResticFailure::Other(format!(
                "restic {} failed: {first}",
                args.join(" ")
            )))
        }
    }

    /// `text` without the repository's credentials or the password.
    fn scrub(&self, text: &str) -> String {
        let mut text = text.replace(
            &self.repository,
            &super::location::redact_userinfo(&self.repository),
        );
        let password = self.password.as_str_lossy();
        if password.len() >= 4 {
            text = text.replace(&password, "***");
        }
        text
    }

    /// The repository's config, decrypted by restic.
    pub fn config(&self) -> Result<Config, ResticFailure> {
        let out = self.run(&["cat", "config"])?;
        let json: ConfigJson = serde_json::from_slice(&out).map_err(|e| {
            ResticFailure::Other(format!("restic cat config printed no config: {e}"))
        })?;
        Ok(Config {
            id: json.id,
            version: json.version,
        })
    }

    /// The ids in `locks/`.
    pub fn list_locks(&self) -> Result<Vec<String>, ResticFailure> {
        let out = self.run(&["list", "locks"])?;
        let mut ids: Vec<String> = String::from_utf8_lossy(&out)
            .lines()
            .map(str::trim)
            .filter(|l| super::lockfile::is_valid_id(l))
            .map(str::to_owned)
            .collect();
        ids.sort();
        ids.dedup();
        if ids.len() > limits::LISTING_ENTRIES {
            return Err(ResticFailure::Other(format!(
                "locks/ holds more than {} files; lockwarden judges none of them",
                limits::LISTING_ENTRIES
            )));
        }
        Ok(ids)
    }

    /// One lock's JSON, decrypted by restic.
    pub fn read_lock(&self, id: &str) -> Result<Vec<u8>, String> {
        self.run(&["cat", "lock", id]).map_err(|f| match f {
            ResticFailure::Other(m)
            | ResticFailure::NoRepository(m)
            | ResticFailure::Unreachable(m) => m,
            ResticFailure::WrongPassword => "restic could not decrypt it".to_owned(),
        })
    }
}
