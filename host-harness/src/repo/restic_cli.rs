//! Read-only access through the `restic` binary, for backends lockwarden does
//! not speak natively (sftp, s3, b2, azure, gs, swift, rclone). restic does
//! the decryption; lockwarden never removes anything this way.

use std::process::{Command, Stdio};

use serde::Deserialize;

use super::{Config, Password};

/// Runs `restic ... --no-lock` against one repository.
pub struct ResticCli {
    repository: String,
    password: Password,
}

/// How a restic run failed.
#[derive(Debug)]
pub enum ResticFailure {
    /// restic says there is no repository.
    NoRepository(String),
    /// restic says the password is wrong.
    WrongPassword,
    /// restic could not be run, or failed otherwise.
    Other(String),
}

#[derive(Deserialize)]
struct ConfigJson {
    version: u32,
    id: String,
}

impl ResticCli {
    /// A runner for `repository` (as given to restic) with `password`.
    pub fn new(repository: &str, password: Password) -> ResticCli {
        ResticCli {
            repository: repository.to_owned(),
            password,
        }
    }

    fn run(&self, args: &[&str]) -> Result<Vec<u8>, ResticFailure> {
        let output = Command::new("restic")
            .args(args)
            .arg("--no-lock")
            .env("RESTIC_REPOSITORY", &self.repository)
            .env("RESTIC_PASSWORD", self.password.as_str_lossy())
            .env_remove("RESTIC_REPOSITORY_FILE")
            .env_remove("RESTIC_PASSWORD_FILE")
            .env_remove("RESTIC_PASSWORD_COMMAND")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| {
                ResticFailure::Other(format!(
                    "cannot run restic ({e}); this backend is read through the restic binary: install restic"
                ))
            })?;
        if output.status.success() {
            return Ok(output.stdout);
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        // restic 0.17+ exits 10 and 12; older ones exit 1 with these texts.
        let code = output.status.code();
        if code == Some(12) || stderr.contains("wrong password") {
            Err(ResticFailure::WrongPassword)
        } else if code == Some(10)
            || stderr.contains("Is there a repository at the following location?")
        {
            Err(ResticFailure::NoRepository(first_line(&stderr)))
        } else {
            Err(ResticFailure::Other(format!(
                "restic {} failed: {}",
                args.join(" "),
                first_line(&stderr)
            )))
        }
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
        Ok(String::from_utf8_lossy(&out)
            .lines()
            .map(str::trim)
            .filter(|l| super::lockfile::is_valid_id(l))
            .map(str::to_owned)
            .collect())
    }

    /// One lock's JSON, decrypted by restic.
    pub fn read_lock(&self, id: &str) -> Result<Vec<u8>, String> {
        self.run(&["cat", "lock", id]).map_err(|f| match f {
            ResticFailure::Other(m) | ResticFailure::NoRepository(m) => m,
            ResticFailure::WrongPassword => "restic could not decrypt it".to_owned(),
        })
    }
}

fn first_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("(no message)")
        .to_owned()
}
