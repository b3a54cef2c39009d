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
//! env_prefix = "OFFSITE_"            # storage variables: OFFSITE_AWS_ACCESS_KEY_ID, ...
//! interval = "5m"                    # default 5m, at least 1s
//! timeout = "60s"                    # per command or request; default 60s
//! mode = "unlock"                    # or "report"
//! policy = "/etc/lockwarden/strict.wasm"   # optional; or oci://HOST/REPO@sha256:...
//! settings = { stale-after = "30m" }       # optional
//! shadow_policy = "/etc/lockwarden/next.wasm"  # optional: judges, never acts
//! shadow_settings = { stale-after = "2h" }     # optional, the shadow's own
//! # optional; replaces the command line's evidence options for this one
//! evidence = { hosts_command = "kubectl get pods -A -o json", inventory_hosts = "^velero-" }
//! # optional; replaces the global [notify] table for this one
//! notify = { webhook = "https://hooks.example.com/ops", events = ["checks_failing"] }
//! ```
//!
//! Notifications (see [`super::notify`]), for every repository that has no
//! `notify` of its own (a repository's table replaces this one whole; an
//! empty one, `notify = {}`, sends nothing):
//!
//! ```toml
//! [notify]
//! webhook = "https://hooks.example.com/lockwarden"  # POST, one JSON event each
//! webhook_token_file = "/run/secrets/hook-token"    # optional: Authorization: Bearer
//! command = "/usr/local/bin/on-lock-event"          # optional: the JSON on stdin
//! timeout = "10s"            # per delivery attempt
//! retries = 3                # webhook, after a connection error, a 5xx or a 429
//! held_longer_than = "6h"    # lock_held_long: a kept lock's holder holds it this long
//! failing_after = 3          # checks_failing: this many failed checks in a row
//! events = ["lock_removed", "stale_lock_kept", "lock_held_long",
//!           "unreadable_file", "checks_failing", "recovered"]   # default: all
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::evidence::{EvidenceError, EvidenceOptions};
use crate::files::{ReadError, read_regular_file};
use crate::limits;
use crate::repo::backend::Variables;
use crate::repo::location::{Location, LocationError};
use crate::repo::{Password, PasswordError, PasswordSource};
use crate::runtime::PolicySource;
use crate::text::escape;
use crate::time::parse_duration;

use super::notify::settings::{NotifyConfig, NotifySettings};

/// Why a watch configuration is refused: the file, then the problem. Never
/// quotes the file (it may hold a password command).
#[derive(Debug, thiserror::Error)]
#[error("{file}{problem}")]
pub struct ConfigError {
    /// The file, as given.
    pub file: String,
    /// What is wrong.
    pub problem: ConfigProblem,
}

/// What is wrong with a watch configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigProblem {
    /// It cannot be read.
    #[error(": cannot read it: it {0}")]
    Read(ReadError),
    /// It is not text.
    #[error(" is not UTF-8 text")]
    NotText,
    /// It is not valid TOML of this shape.
    #[error("{at}: not a valid watch configuration: {message}")]
    Syntax {
        /// `, line N`, when known.
        at: String,
        /// The parser's message (never the line itself).
        message: String,
    },
    /// It names no repository.
    #[error(": lists no [[repository]]")]
    NoRepository,
    /// The global `[notify]` table is refused.
    #[error(", [notify]: {0}")]
    Notify(String),
    /// One repository's entry is wrong.
    #[error(", repository `{}`: {problem}", escape(name))]
    Repository {
        /// The repository's name.
        name: String,
        /// What is wrong with it.
        problem: RepositoryProblem,
    },
}

/// What is wrong with one `[[repository]]`.
#[derive(Debug, thiserror::Error)]
pub enum RepositoryProblem {
    /// Its name is used twice.
    #[error("the name is used twice")]
    DuplicateName,
    /// Its location is refused.
    #[error(transparent)]
    Location(#[from] LocationError),
    /// Its interval or timeout is refused.
    #[error("{0}")]
    Duration(String),
    /// Not exactly one password source.
    #[error("give exactly one of password_file, password_command, password_env")]
    Password,
    /// Its evidence options are refused.
    #[error("evidence: {0}")]
    Evidence(#[from] EvidenceError),
    /// Its `notify` table is refused.
    #[error("notify: {0}")]
    Notify(String),
    /// Its variable prefix is not one.
    #[error("env_prefix must be upper-case letters, digits and `_` (like `OFFSITE_`)")]
    EnvPrefix,
}

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
    /// Notifications for every repository without a `notify` of its own.
    pub notify: Option<NotifyConfig>,
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
    /// A prefix for the storage's variables: with `OFFSITE_`, this
    /// repository's S3 credentials are `OFFSITE_AWS_ACCESS_KEY_ID` and so on.
    #[serde(default)]
    pub env_prefix: String,
    /// How often to check (default 5m, at least [`MIN_INTERVAL`]).
    #[serde(default = "default_interval", deserialize_with = "duration")]
    pub interval: Duration,
    /// How long one external command or network request may take (default
    /// [`crate::command::DEFAULT_TIMEOUT`]; more than zero).
    #[serde(default = "default_timeout", deserialize_with = "duration")]
    pub timeout: Duration,
    /// Unlock or report.
    #[serde(default = "default_mode")]
    pub mode: Mode,
    /// A policy to use instead of the built-in one: a component file or an
    /// `oci://` reference.
    pub policy: Option<PolicySource>,
    /// Settings for the policy.
    #[serde(default)]
    pub settings: BTreeMap<String, String>,
    /// A shadow policy: judges the same locks with the same evidence
    /// answers, never acts; its disagreements are logged and counted.
    pub shadow_policy: Option<PolicySource>,
    /// Settings for the shadow policy.
    #[serde(default)]
    pub shadow_settings: BTreeMap<String, String>,
    /// Evidence options for this repository (else the command line's).
    pub evidence: Option<EvidenceOptions>,
    /// Notifications for this repository, replacing the global `[notify]`.
    pub notify: Option<NotifyConfig>,
    /// The notification settings in effect: `notify`, else the global
    /// `[notify]`, else none (events are only logged); made at load.
    #[serde(skip)]
    pub notify_settings: NotifySettings,
}

fn default_interval() -> Duration {
    Duration::from_secs(300)
}

fn default_timeout() -> Duration {
    crate::command::DEFAULT_TIMEOUT
}

/// A duration as Go writes one (`90s`, `1.5m`), read once, at load.
fn duration<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(deserializer)?;
    parse_duration(&text).map_err(serde::de::Error::custom)
}

fn default_mode() -> Mode {
    Mode::Unlock
}

impl WatchConfig {
    /// Reads and checks the file.
    pub fn load(path: &Path) -> Result<WatchConfig, ConfigError> {
        let fail = |problem| ConfigError {
            file: path.display().to_string(),
            problem,
        };
        let bytes = read_regular_file(path, limits::WATCH_CONFIG)
            .map_err(|e| fail(ConfigProblem::Read(e)))?;
        let text = String::from_utf8(bytes).map_err(|_| fail(ConfigProblem::NotText))?;
        WatchConfig::parse(&text).map_err(fail)
    }

    /// Parses and checks a configuration.
    pub fn parse(text: &str) -> Result<WatchConfig, ConfigProblem> {
        let mut config: WatchConfig = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|span| text[..span.start.min(text.len())].lines().count().max(1));
            ConfigProblem::Syntax {
                at: line.map(|l| format!(", line {l}")).unwrap_or_default(),
                // The message alone: toml's Display quotes the offending line.
                message: escape(e.message().trim()).into_owned(),
            }
        })?;
        if config.repositories.is_empty() {
            return Err(ConfigProblem::NoRepository);
        }
        let global = match &config.notify {
            Some(notify) => Some(notify.settings().map_err(ConfigProblem::Notify)?),
            None => None,
        };
        let mut names = std::collections::BTreeSet::new();
        for repo in &mut config.repositories {
            let at = |problem: RepositoryProblem| ConfigProblem::Repository {
                name: repo.name.clone(),
                problem,
            };
            if !names.insert(repo.name.clone()) {
                return Err(at(RepositoryProblem::DuplicateName));
            }
            repo.notify_settings = repo.check(global.as_ref()).map_err(at)?;
        }
        Ok(config)
    }
}

impl RepositoryConfig {
    /// Everything about this entry that can be checked without acting;
    /// returns its notification settings (its own, else `global`'s).
    fn check(&self, global: Option<&NotifySettings>) -> Result<NotifySettings, RepositoryProblem> {
        self.location()?;
        if self.interval < MIN_INTERVAL {
            return Err(RepositoryProblem::Duration(format!(
                "interval {:?} is shorter than the minimum of {}s",
                self.interval,
                MIN_INTERVAL.as_secs()
            )));
        }
        if self.timeout.is_zero() {
            return Err(RepositoryProblem::Duration(
                "timeout must be more than zero".into(),
            ));
        }
        let sources = [
            self.password_file.is_some(),
            self.password_command.is_some(),
            self.password_env.is_some(),
        ];
        if sources.iter().filter(|s| **s).count() != 1 {
            return Err(RepositoryProblem::Password);
        }
        if let Some(evidence) = &self.evidence {
            evidence.config(self.timeout)?;
        }
        let variable_char = |c: char| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_';
        if !self.env_prefix.chars().all(variable_char) {
            return Err(RepositoryProblem::EnvPrefix);
        }
        match &self.notify {
            Some(notify) => notify.settings().map_err(RepositoryProblem::Notify),
            None => Ok(global.cloned().unwrap_or_default()),
        }
    }

    /// The repository's location.
    pub fn location(&self) -> Result<Location, LocationError> {
        Location::parse(&self.repository)
    }

    /// Where this repository's storage variables are read.
    pub fn variables(&self) -> Variables {
        Variables::prefixed(&self.env_prefix)
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
        source.resolve(self.timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syntax_errors_never_quote_the_file() {
        let text = "[[repository]]\nname = \"a\"\npassword_command = \"echo MARKER-SECRET\nrepository = \"/r\"\n";
        let err = WatchConfig::parse(text).expect_err("unterminated string");
        let err = err.to_string();
        assert!(!err.contains("MARKER"), "{err}");
        assert!(err.contains("line 3"), "{err}");
    }

    #[test]
    fn evidence_options_per_repository_are_checked_at_load() {
        let repo = |evidence: &str| {
            format!(
                "[[repository]]\nname = \"a\"\nrepository = \"/r\"\npassword_env = \"X\"\nevidence = {{ {evidence} }}\n"
            )
        };
        let config = WatchConfig::parse(&repo(
            "hosts_command = \"kubectl get pods -o json\", inventory_hosts = \"^velero-\"",
        ))
        .expect("valid");
        let evidence = config.repositories[0].evidence.as_ref().expect("set");
        assert_eq!(evidence.inventory_hosts.as_deref(), Some("^velero-"));
        for (bad, says) in [
            ("hosts_file = \"/h.json\"", "inventory-hosts"),
            ("inventory_hosts = \"(\"", "inventory-hosts"),
            ("hosts_cmd = \"x\"", "unknown field"),
        ] {
            let err = WatchConfig::parse(&repo(bad)).expect_err(bad).to_string();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn a_shadow_policy_and_its_settings_are_per_repository() {
        let text = "[[repository]]\nname = \"a\"\nrepository = \"/r\"\npassword_env = \"X\"\n\
            settings = { stale-after = \"30m\" }\n\
            shadow_policy = \"/etc/next.wasm\"\nshadow_settings = { stale-after = \"2h\" }\n";
        let config = WatchConfig::parse(text).expect("valid");
        let repo = &config.repositories[0];
        assert_eq!(
            repo.shadow_policy,
            Some(PolicySource::File("/etc/next.wasm".into()))
        );
        assert_eq!(
            repo.shadow_settings.get("stale-after").map(String::as_str),
            Some("2h")
        );
        assert_eq!(
            repo.settings.get("stale-after").map(String::as_str),
            Some("30m")
        );
        let bad = text.replace("shadow_policy = \"/etc/next.wasm\"", "shadow_policy = \"\"");
        let err = WatchConfig::parse(&bad).expect_err("empty").to_string();
        assert!(err.contains("the policy is empty"), "{err}");
    }

    #[test]
    fn a_variable_prefix_is_a_variable_name_part() {
        let repo = |prefix: &str| {
            format!(
                "[[repository]]\nname = \"a\"\nrepository = \"s3:h/b\"\npassword_env = \"X\"\nenv_prefix = \"{prefix}\"\n"
            )
        };
        let config = WatchConfig::parse(&repo("OFFSITE_")).expect("valid");
        assert_eq!(
            config.repositories[0].variables(),
            Variables::prefixed("OFFSITE_")
        );
        for bad in ["offsite_", "A B", "X=Y", "\\u001b"] {
            let err = WatchConfig::parse(&repo(bad)).expect_err(bad).to_string();
            assert!(err.contains("env_prefix"), "{bad}: {err}");
        }
    }

    #[test]
    fn a_repository_notify_table_replaces_the_global_one() {
        let text = "[notify]\nwebhook = \"https://hooks.example.com/all\"\nfailing_after = 5\n\n\
            [[repository]]\nname = \"a\"\nrepository = \"/r\"\npassword_env = \"X\"\n\n\
            [[repository]]\nname = \"b\"\nrepository = \"/s\"\npassword_env = \"X\"\n\
            notify = { command = \"cat\" }\n\n\
            [[repository]]\nname = \"c\"\nrepository = \"/t\"\npassword_env = \"X\"\nnotify = {}\n";
        let config = WatchConfig::parse(text).expect("valid");
        let [a, b, c] = [0, 1, 2].map(|i| config.repositories[i].notify_settings.clone());
        assert_eq!(
            a.webhook.map(|w| w.shown).as_deref(),
            Some("https://hooks.example.com")
        );
        assert_eq!(a.failing_after, 5);
        assert_eq!((b.webhook, b.command.as_deref()), (None, Some("cat")));
        assert_eq!(b.failing_after, 3, "replaced whole: the default again");
        assert!(!c.has_sinks());
        let bad = text.replace("command = \"cat\"", "webhook = \"https://u:SECRET@h/\"");
        let err = WatchConfig::parse(&bad)
            .expect_err("credentials")
            .to_string();
        assert!(err.contains("repository `b`: notify:"), "{err}");
        assert!(!err.contains("SECRET"), "{err}");
        let bad = text.replace("failing_after = 5", "failing_after = 0");
        let err = WatchConfig::parse(&bad).expect_err("zero").to_string();
        assert!(err.contains("[notify]: failing_after"), "{err}");
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
        assert_eq!(config.repositories[0].interval, Duration::from_secs(90));
    }
}
