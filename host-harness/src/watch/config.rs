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
//! interval = "5m"                    # default 5m
//! mode = "unlock"                    # or "report"
//! policy = "/etc/lockwarden/strict.wasm"   # optional; or oci://HOST/REPO@sha256:...
//! settings = { stale-after = "30m" }       # optional
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::plugin::PolicySource;
use crate::repo::Password;
use crate::repo::location::Location;

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
    /// How often to check (default 5m).
    #[serde(default = "default_interval")]
    pub interval: String,
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
    /// Reads and checks the file; errors name the file and the repository.
    pub fn load(path: &Path) -> Result<WatchConfig, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let config: WatchConfig = toml::from_str(&text)
            .map_err(|e| format!("{} is not a valid watch configuration: {e}", path.display()))?;
        if config.repositories.is_empty() {
            return Err(format!("{} lists no [[repository]]", path.display()));
        }
        let mut names = std::collections::BTreeSet::new();
        for repo in &config.repositories {
            let at = |m: String| format!("{}, repository `{}`: {m}", path.display(), repo.name);
            if !names.insert(&repo.name) {
                return Err(at("the name is used twice".into()));
            }
            Location::parse(&repo.repository).map_err(at)?;
            repo.interval().map_err(at)?;
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
        let d: jiff::SignedDuration = self.interval.parse().map_err(|_| {
            format!(
                "interval `{}` is not a duration like 30s, 5m or 1h",
                self.interval
            )
        })?;
        Duration::try_from(d)
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| format!("interval `{}` must be positive", self.interval))
    }

    /// Resolves the password now.
    pub fn password(&self) -> Result<Password, String> {
        match (
            &self.password_file,
            &self.password_command,
            &self.password_env,
        ) {
            (Some(file), _, _) => Password::from_file(file),
            (None, Some(command), _) => Password::from_command(command),
            (None, None, Some(var)) => std::env::var_os(var)
                .filter(|v| !v.is_empty())
                .map(|v| Password::new(v.into_encoded_bytes()))
                .ok_or_else(|| format!("environment variable {var} is not set")),
            (None, None, None) => Err("no password source".into()),
        }
    }
}
