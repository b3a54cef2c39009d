//! Repository and password options, taken the way restic takes them.

use std::path::PathBuf;

use clap::Args;
use lockwarden::files::read_regular_file;
use lockwarden::limits;
use lockwarden::repo::location::Location;
use lockwarden::repo::{Password, PasswordSource};
use lockwarden::repository_settings::Timeout;

use super::{Failure, Outcome, UsageError};

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
        env = "RESTIC_REPOSITORY",
        hide_env_values = true
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
    /// How long any one external command (password or hosts command, restic
    /// for backends read through it) or network request may take.
    #[arg(long, value_name = "DURATION", default_value = "60s")]
    pub timeout: Timeout,
}

fn set<T: AsRef<std::ffi::OsStr>>(value: &Option<T>) -> Option<&T> {
    value.as_ref().filter(|v| !v.as_ref().is_empty())
}

impl RepoArgs {
    /// The repository location: `-r` or the repository file, not both.
    pub fn location(&self) -> Outcome<Location> {
        Ok(Location::parse(&self.location_text()?)?)
    }

    /// The repository location as given.
    fn location_text(&self) -> Outcome<String> {
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
            (None, Some(file)) => {
                let bytes = read_regular_file(file, limits::REPOSITORY_FILE).map_err(|e| {
                    Failure::failed(anyhow::anyhow!(
                        "cannot read repository file {}: it {e}",
                        file.display()
                    ))
                })?;
                String::from_utf8(bytes)
                    .map_err(|_| {
                        UsageError(format!(
                            "repository file {} is not UTF-8 text",
                            file.display()
                        ))
                    })?
                    .trim()
                    .to_owned()
            }
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

    /// Where the password comes from, in restic's order: the command, else
    /// the file, else RESTIC_PASSWORD. lockwarden never prompts.
    pub fn password_source(&self) -> Outcome<PasswordSource> {
        let source = match (set(&self.password_command), set(&self.password_file)) {
            (Some(_), Some(_)) => {
                return Err(UsageError(
                    "--password-command and --password-file are mutually exclusive; give one"
                        .into(),
                )
                .into());
            }
            (Some(command), None) => PasswordSource::Command(command.clone()),
            (None, Some(file)) => PasswordSource::File(file.clone()),
            (None, None) => match std::env::var_os("RESTIC_PASSWORD").filter(|v| !v.is_empty()) {
                Some(p) => PasswordSource::Value(Password::new(p.into_encoded_bytes())),
                None => {
                    return Err(UsageError(
                        "no password given: use -p/--password-file, --password-command, \
                         RESTIC_PASSWORD, RESTIC_PASSWORD_FILE or RESTIC_PASSWORD_COMMAND"
                            .into(),
                    )
                    .into());
                }
            },
        };
        Ok(source)
    }
}
