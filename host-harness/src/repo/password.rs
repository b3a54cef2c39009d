//! The repository password and where it comes from, for the command line
//! and `watch` alike.

use std::path::PathBuf;
use std::time::Duration;

use crate::command;
use crate::files::{ReadError, read_regular_file};
use crate::limits;

/// A repository password. Never printed.
#[derive(Clone)]
pub struct Password(Vec<u8>);

impl Password {
    /// Wraps password bytes.
    pub fn new(bytes: impl Into<Vec<u8>>) -> Password {
        Password(bytes.into())
    }

    /// The password's bytes, for handing to a restic that lockwarden starts.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    pub(crate) fn as_str_lossy(&self) -> String {
        String::from_utf8_lossy(&self.0).into_owned()
    }
}

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Password(***)")
    }
}

/// Points a `restic` command at `repository` with `password`, through the
/// environment (never the command line, which other users can read), and
/// clears the other ways restic could take them, so that nothing inherited
/// overrides what lockwarden chose.
pub fn restic_env(restic: &mut std::process::Command, repository: &str, password: &Password) {
    use std::os::unix::ffi::OsStrExt;
    restic
        .env("RESTIC_REPOSITORY", repository)
        .env(
            "RESTIC_PASSWORD",
            std::ffi::OsStr::from_bytes(password.as_bytes()),
        )
        .env_remove("RESTIC_REPOSITORY_FILE")
        .env_remove("RESTIC_PASSWORD_FILE")
        .env_remove("RESTIC_PASSWORD_COMMAND");
}

/// Where a password comes from: one source, chosen when a repository's
/// settings are made (the command line in restic's order: command, then
/// file, then `RESTIC_PASSWORD`; a watched repository names exactly one),
/// and read only when the repository is opened ([`PasswordSource::resolve`]).
#[derive(Debug, Clone)]
pub enum PasswordSource {
    /// A shell command printing it (`--password-command`,
    /// `password_command`).
    Command(String),
    /// A file holding it (`--password-file`, `password_file`).
    File(PathBuf),
    /// An environment variable holding it, read when resolved
    /// (`password_env`); unset, it is empty.
    Variable(String),
    /// The value itself (from `RESTIC_PASSWORD`).
    Value(Password),
}

/// Why no password could be had. Never contains the password.
#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    /// The file could not be read.
    #[error("cannot read password file {path}: it {cause}")]
    File {
        /// The file.
        path: String,
        /// Why.
        cause: ReadError,
    },
    /// The command failed.
    #[error("the password command {0}")]
    Command(String),
    /// The password is empty.
    #[error("the password is empty; restic refuses an empty password too")]
    Empty,
}

/// An empty password is the user's to fix; a file or command that fails is
/// not (restic, too, exits 1 then).
impl crate::error::Classify for PasswordError {
    fn kind(&self) -> crate::error::ErrorKind {
        use crate::error::ErrorKind;
        match self {
            PasswordError::Empty => ErrorKind::Usage,
            PasswordError::File { .. } | PasswordError::Command(_) => ErrorKind::Failed,
        }
    }
}

impl PasswordSource {
    /// Reads the password now: a file within [`limits::PASSWORD`] bytes (a
    /// regular file only), a command within `timeout`, a variable as it is
    /// set now; trimmed of surrounding whitespace as restic does.
    pub fn resolve(&self, timeout: Duration) -> Result<Password, PasswordError> {
        let bytes = match self {
            PasswordSource::File(path) => {
                read_regular_file(path, limits::PASSWORD).map_err(|cause| PasswordError::File {
                    path: path.display().to_string(),
                    cause,
                })?
            }
            PasswordSource::Command(line) => {
                let output = command::run(command::shell(line), timeout, limits::PASSWORD)
                    .map_err(|e| PasswordError::Command(e.to_string()))?;
                if !output.status.success() {
                    return Err(PasswordError::Command(format!(
                        "failed ({}): {}",
                        output.status,
                        output.stderr_line()
                    )));
                }
                output.stdout
            }
            PasswordSource::Variable(name) => std::env::var_os(name)
                .map(std::ffi::OsString::into_encoded_bytes)
                .unwrap_or_default(),
            PasswordSource::Value(password) => password.0.clone(),
        };
        let trimmed = bytes.trim_ascii();
        if trimmed.is_empty() {
            return Err(PasswordError::Empty);
        }
        Ok(Password::new(trimmed.to_vec()))
    }
}
