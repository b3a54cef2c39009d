//! The `watch` configuration file (TOML).
//!
//! ```toml
//! metrics_addr = "127.0.0.1:9567"   # optional
//! state_dir = "/var/lib/lockwarden" # optional
//!
//! [[repository]]
//! name = "demo"                      # the metrics label; never a secret
//! repository = "/srv/restic"         # as restic's -r
//! password_file = "/etc/restic/pw"   # or password_command, or password_env
//! interval = "5m"                    # default 5m, at least 1s
//! timeout = "60s"                    # per command or request; default 60s
//! mode = "unlock"                    # or "report"
//! policy = "/etc/lockwarden/strict.wasm"   # optional; or oci://HOST/REPO@sha256:...
//! settings = { stale-after = "30m" }       # optional
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::files::read_regular_file;
use crate::limits;
use crate::repo::location::Location;
use crate::repo::{Password, PasswordError, PasswordSource};
use crate::runtime::PolicySource;
use crate::time::parse_duration;

/// The shortest interval: a check more often than this only burns CPU (and,
/// on object storage, money).
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WatchConfig {
    /// Where to serve /metrics, if anywhere.
    pub metrics_addr: Option<String>,
    /// Where first-seen times are kept.
    pub state_dir: Option<PathBuf>,
    /// The repositories to watch.
    #[serde(rename = "repository", default)]
    pub repositories: Vec<RepositoryConfig>,
}

/// What `watch` does about stale locks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Remove them.
    Unlock,
    /// Only report them (logs and metrics).
    Report,
}

/// One watched repository.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepositoryConfig {
    /// A name for logs and metric labels.
    pub name: String,
    /// The location, as restic's `-r`.
    pub repository: String,
    /// A file holding the password.
    pub password_file: Option<PathBuf>,
    /// A shell command printing the password.
    pub password_command: Option<String>,
    /// An environment variable holding the password.
    pub password_env: Option<String>,
    /// How often to check (default 5m, at least [`MIN_INTERVAL`]).
    #[serde(default = "default_interval")]
    pub interval: String,
    /// How long one external command or network request may take.
    pub timeout: Option<String>,
    /// Unlock or report.
    #[serde(default = "default_mode")]
    pub mode: Mode,
    /// A policy to use instead of the built-in one: a component file or an
    /// `oci://` reference.
    pub policy: Option<PolicySource>,
    /// Settings for the policy.
    #[serde(default)]
    pub settings: BTreeMap<String, String>,
}

fn default_interval() -> String {
    "5m".into()
}

fn default_mode() -> Mode {
    Mode::Unlock
}

impl WatchConfig {
    /// Reads and checks the file; errors name the file and the repository,
    /// and never quote it (it may hold a password command).
    pub fn load(path: &Path) -> Result<WatchConfig, String> {
        let bytes = read_regular_file(path, limits::WATCH_CONFIG)
            .map_err(|e| format!("cannot read {}: it {e}", path.display()))?;
        let text = String::from_utf8(bytes)
            .map_err(|_| format!("{} is not UTF-8 text", path.display()))?;
        WatchConfig::parse(&text).map_err(|e| format!("{}{e}", path.display()))
    }

    /// Parses and checks a configuration; errors start with `, line N` or
    /// `, repository NAME` so that the caller can put the file name first.
    pub fn parse(text: &str) -> Result<WatchConfig, String> {
        let config: WatchConfig = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|span| text[..span.start.min(text.len())].lines().count().max(1));
            let at = line.map(|l| format!(", line {l}")).unwrap_or_default();
            // The message alone: toml's Display quotes the offending line.
            format!(
                "{at}: not a valid watch configuration: {}",
                crate::text::escape(e.message().trim())
            )
        })?;
        if config.repositories.is_empty() {
            return Err(": lists no [[repository]]".into());
        }
        let mut names = std::collections::BTreeSet::new();
        for repo in &config.repositories {
            let at = |m: String| format!(", repository `{}`: {m}", crate::text::escape(&repo.name));
            if !names.insert(&repo.name) {
                return Err(at("the name is used twice".into()));
            }
            Location::parse(&repo.repository).map_err(at)?;
            repo.interval().map_err(at)?;
            repo.timeout().map_err(at)?;
            let sources = [
                repo.password_file.is_some(),
                repo.password_command.is_some(),
                repo.password_env.is_some(),
            ];
            if sources.iter().filter(|s| **s).count() != 1 {
                return Err(at(
                    "give exactly one of password_file, password_command, password_env".into(),
                ));
            }
        }
        Ok(config)
    }
}

impl RepositoryConfig {
    /// The check interval.
    pub fn interval(&self) -> Result<Duration, String> {
        let interval = parse_duration(&self.interval).map_err(|e| format!("interval: {e}"))?;
        if interval < MIN_INTERVAL {
            return Err(format!(
                "interval `{}` is shorter than the minimum of {}s",
                crate::text::escape(&self.interval),
                MIN_INTERVAL.as_secs()
            ));
        }
        Ok(interval)
    }

    /// How long one command or request may take.
    pub fn timeout(&self) -> Result<Duration, String> {
        match &self.timeout {
            Some(text) => parse_duration(text)
                .ok()
                .filter(|d| !d.is_zero())
                .ok_or_else(|| {
                    format!(
                        "timeout `{}` is not a positive duration",
                        crate::text::escape(text)
                    )
                }),
            None => Ok(crate::command::DEFAULT_TIMEOUT),
        }
    }

    /// Resolves the password now.
    pub fn password(&self) -> Result<Password, PasswordError> {
        let source = match (
            &self.password_file,
            &self.password_command,
            &self.password_env,
        ) {
            (Some(file), _, _) => PasswordSource::File(file.clone()),
            (None, Some(command), _) => PasswordSource::Command(command.clone()),
            (None, None, Some(var)) => PasswordSource::Value(Password::new(
                std::env::var_os(var)
                    .map(|v| v.into_encoded_bytes())
                    .unwrap_or_default(),
            )),
            (None, None, None) => PasswordSource::Value(Password::new(Vec::new())),
        };
        source.resolve(self.timeout().unwrap_or(crate::command::DEFAULT_TIMEOUT))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syntax_errors_never_quote_the_file() {
        let text = "[[repository]]\nname = \"a\"\npassword_command = \"echo MARKER-SECRET\nrepository = \"/r\"\n";
        let err = WatchConfig::parse(text).expect_err("unterminated string");
        assert!(!err.contains("MARKER"), "{err}");
        assert!(err.contains("line 3"), "{err}");
    }

    #[test]
    fn intervals_have_a_floor_and_take_fractions() {
        let repo = |interval: &str| {
            format!(
                "[[repository]]\nname = \"a\"\nrepository = \"/r\"\npassword_env = \"X\"\ninterval = \"{interval}\"\n"
            )
        };
        for bad in ["1ns", "999ms", "0", "soon"] {
            assert!(WatchConfig::parse(&repo(bad)).is_err(), "{bad}");
        }
        let config = WatchConfig::parse(&repo("1.5m")).expect("valid");
        assert_eq!(
            config.repositories[0].interval(),
            Ok(Duration::from_secs(90))
        );
    }
}
