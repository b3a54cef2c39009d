//! Repository and password options, taken the way restic takes them.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use lockwarden::repo::Password;
use lockwarden::repo::location::Location;

use super::UsageError;

/// `-r/--repo`, `--repository-file`, `-p/--password-file`,
/// `--password-command`, and RESTIC_PASSWORD, as restic has them.
#[derive(Debug, Args, Clone)]
pub struct RepoArgs {
    /// Repository to check (local path, local:PATH, rest:URL, or any restic
    /// repository string).
    #[arg(
        short = 'r',
        long = "repo",
        value_name = "REPOSITORY",
        env = "RESTIC_REPOSITORY"
    )]
    repo: Option<String>,
    /// File holding the repository location.
    #[arg(long, value_name = "FILE", env = "RESTIC_REPOSITORY_FILE")]
    repository_file: Option<PathBuf>,
    /// File holding the repository password.
    #[arg(short = 'p', long, value_name = "FILE", env = "RESTIC_PASSWORD_FILE")]
    password_file: Option<PathBuf>,
    /// Shell command that prints the repository password.
    #[arg(
        long,
        value_name = "COMMAND",
        env = "RESTIC_PASSWORD_COMMAND",
        hide_env_values = true
    )]
    password_command: Option<String>,
}

fn set<T: AsRef<std::ffi::OsStr>>(value: &Option<T>) -> Option<&T> {
    value.as_ref().filter(|v| !v.as_ref().is_empty())
}

impl RepoArgs {
    /// The repository location: `-r` or the repository file, not both.
    pub fn location(&self) -> anyhow::Result<Location> {
        Location::parse(&self.location_text()?).map_err(|e| UsageError(e).into())
    }

    /// The repository location as given, for passing on to restic.
    pub fn location_text(&self) -> anyhow::Result<String> {
        let text = match (set(&self.repo), set(&self.repository_file)) {
            (Some(_), Some(_)) => {
                return Err(UsageError(
                    "-r/--repo (RESTIC_REPOSITORY) and --repository-file (RESTIC_REPOSITORY_FILE) \
                     are mutually exclusive; give one"
                        .into(),
                )
                .into());
            }
            (Some(repo), None) => repo.clone(),
            (None, Some(file)) => std::fs::read_to_string(file)
                .with_context(|| format!("cannot read repository file {}", file.display()))?
                .trim()
                .to_owned(),
            (None, None) => {
                return Err(UsageError(
                    "no repository given: use -r/--repo, --repository-file, RESTIC_REPOSITORY or \
                     RESTIC_REPOSITORY_FILE"
                        .into(),
                )
                .into());
            }
        };
        Ok(text)
    }

    /// The password, in restic's order: the command, else the file, else
    /// RESTIC_PASSWORD. lockwarden never prompts.
    pub fn password(&self) -> anyhow::Result<Password> {
        match (set(&self.password_command), set(&self.password_file)) {
            (Some(_), Some(_)) => Err(UsageError(
                "--password-command and --password-file are mutually exclusive; give one".into(),
            )
            .into()),
            (Some(command), None) => Password::from_command(command).map_err(anyhow::Error::msg),
            (None, Some(file)) => Password::from_file(file).map_err(anyhow::Error::msg),
            (None, None) => match std::env::var_os("RESTIC_PASSWORD").filter(|v| !v.is_empty()) {
                Some(p) => Ok(Password::new(p.into_encoded_bytes())),
                None => Err(UsageError(
                    "no password given: use -p/--password-file, --password-command, \
                     RESTIC_PASSWORD, RESTIC_PASSWORD_FILE or RESTIC_PASSWORD_COMMAND"
                        .into(),
                )
                .into()),
            },
        }
    }
}
