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

use crate::error::{Classify, ErrorKind};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::evidence::{EvidenceConfig, EvidenceError, EvidenceOptions};
use crate::files::{ReadError, read_regular_file};
use crate::limits;
use crate::repo::PasswordSource;
use crate::repo::backend::Variables;
use crate::repo::location::{Location, LocationError};
use crate::repository_settings::{PolicyChoice, RepositorySettings, Timeout};
use crate::runtime::PolicySource;
use crate::text::escape;
use crate::time::parse_duration;

use super::discover::{DiscoverEntry, DiscoverProblem, Discovery, Template};
use super::leader::LeaderEntry;
use super::notify::settings::{NotifyConfig, NotifyProblem, NotifySettings};
use super::repository::{Defaults, MIN_INTERVAL, Mode, WatchedRepository};

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
    #[error(": lists no [[repository]] and has no [discover]")]
    NoRepository,
    /// The `[discover]` table is refused.
    #[error(", [discover]: {0}")]
    Discover(DiscoverProblem),
    /// The global `[notify]` table is refused.
    #[error(", [notify]: {0}")]
    Notify(NotifyProblem),
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
    /// `password_env` is no variable name (std may panic on one with `=`
    /// or NUL, and an empty one names nothing).
    #[error(
        "password_env must be a variable name: not empty, without `=`, NUL or control characters"
    )]
    PasswordEnv,
    /// Its evidence options are refused.
    #[error("evidence: {0}")]
    Evidence(#[from] EvidenceError),
    /// Its `notify` table is refused.
    #[error("notify: {0}")]
    Notify(NotifyProblem),
    /// Its variable prefix is not one.
    #[error("env_prefix must be upper-case letters, digits and `_` (like `OFFSITE_`)")]
    EnvPrefix,
    /// Shadow settings, but no shadow policy to take them.
    #[error("shadow_settings without a shadow policy (shadow_policy or --shadow-policy)")]
    ShadowSettings,
}

/// The whole file, checked and typed.
#[derive(Debug)]
pub struct WatchConfig {
    /// Where to serve /metrics, if anywhere.
    pub metrics_addr: Option<String>,
    /// Where first-seen times are kept.
    pub state_dir: Option<PathBuf>,
    /// The repositories to watch.
    pub repositories: Vec<WatchedRepository>,
    /// Repositories to find in the backup operators' objects, and how to
    /// watch each (`[discover]`).
    pub discover: Option<(Discovery, Template)>,
    /// The Lease that elects the one replica that acts (`[leader]`).
    pub leader: Option<LeaderEntry>,
}

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WatchFile {
    metrics_addr: Option<String>,
    state_dir: Option<PathBuf>,
    /// Notifications for every repository without a `notify` of its own.
    notify: Option<NotifyConfig>,
    #[serde(rename = "repository", default)]
    repositories: Vec<RepositoryEntry>,
    /// Repositories found in the backup operators' objects.
    discover: Option<DiscoverEntry>,
    /// One leader among replicas.
    leader: Option<LeaderEntry>,
}

/// One `[[repository]]` as written (the keys are in the module's example).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RepositoryEntry {
    name: String,
    /// The location, as restic's `-r`.
    repository: String,
    password_file: Option<PathBuf>,
    password_command: Option<String>,
    /// The name of an environment variable holding the password.
    password_env: Option<String>,
    #[serde(default)]
    env_prefix: String,
    #[serde(default = "default_interval", deserialize_with = "duration")]
    interval: Duration,
    /// Checked at conversion ([`Timeout::new`]).
    #[serde(default = "default_timeout", deserialize_with = "duration")]
    timeout: Duration,
    #[serde(default = "default_mode")]
    mode: Mode,
    policy: Option<PolicySource>,
    #[serde(default)]
    settings: BTreeMap<String, String>,
    shadow_policy: Option<PolicySource>,
    #[serde(default)]
    shadow_settings: BTreeMap<String, String>,
    evidence: Option<EvidenceOptions>,
    notify: Option<NotifyConfig>,
}

fn default_interval() -> Duration {
    Duration::from_secs(300)
}

fn default_timeout() -> Duration {
    Timeout::DEFAULT.get()
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
    /// Reads, checks and types the file; `defaults` are the command line's.
    pub fn load(path: &Path, defaults: &Defaults) -> Result<WatchConfig, ConfigError> {
        let fail = |problem| ConfigError {
            file: path.display().to_string(),
            problem,
        };
        let bytes = read_regular_file(path, limits::WATCH_CONFIG)
            .map_err(|e| fail(ConfigProblem::Read(e)))?;
        let text = String::from_utf8(bytes).map_err(|_| fail(ConfigProblem::NotText))?;
        WatchConfig::parse(&text, defaults).map_err(fail)
    }

    /// Parses, checks and types a configuration; `defaults` are the command
    /// line's.
    pub fn parse(text: &str, defaults: &Defaults) -> Result<WatchConfig, ConfigProblem> {
        let file: WatchFile = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|span| text[..span.start.min(text.len())].lines().count().max(1));
            ConfigProblem::Syntax {
                at: line.map(|l| format!(", line {l}")).unwrap_or_default(),
                // The message alone: toml's Display quotes the offending line.
                message: escape(e.message().trim()).into_owned(),
            }
        })?;
        if file.repositories.is_empty() && file.discover.is_none() {
            return Err(ConfigProblem::NoRepository);
        }
        let global = match &file.notify {
            Some(notify) => Some(notify.settings().map_err(ConfigProblem::Notify)?),
            None => None,
        };
        let mut names = std::collections::BTreeSet::new();
        let mut repositories = Vec::with_capacity(file.repositories.len());
        for entry in &file.repositories {
            let at = |problem: RepositoryProblem| ConfigProblem::Repository {
                name: entry.name.clone(),
                problem,
            };
            if !names.insert(entry.name.clone()) {
                return Err(at(RepositoryProblem::DuplicateName));
            }
            repositories.push(entry.convert(global.as_ref(), defaults).map_err(at)?);
        }
        let discover = match &file.discover {
            Some(entry) => Some(
                entry
                    .settings(Template::of(defaults, global.unwrap_or_default()))
                    .map_err(ConfigProblem::Discover)?,
            ),
            None => None,
        };
        Ok(WatchConfig {
            metrics_addr: file.metrics_addr,
            state_dir: file.state_dir,
            repositories,
            discover,
            leader: file.leader,
        })
    }
}

impl RepositoryEntry {
    /// This entry, checked and typed, with `defaults` where it names
    /// nothing of its own; its notifications are its own `notify`, else
    /// `global`'s.
    fn convert(
        &self,
        global: Option<&NotifySettings>,
        defaults: &Defaults,
    ) -> Result<WatchedRepository, RepositoryProblem> {
        let location = Location::parse(&self.repository)?;
        if self.interval < MIN_INTERVAL {
            return Err(RepositoryProblem::Duration(format!(
                "interval {:?} is shorter than the minimum of {}s",
                self.interval,
                MIN_INTERVAL.as_secs()
            )));
        }
        let timeout = Timeout::new(self.timeout)
            .map_err(|e| RepositoryProblem::Duration(format!("timeout {e}")))?;
        let password = self.password_source()?;
        let evidence = match &self.evidence {
            Some(options) => options.config(timeout.get())?,
            None => EvidenceConfig {
                timeout: timeout.get(),
                ..defaults.evidence.clone()
            },
        };
        let variable_char = |c: char| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_';
        if !self.env_prefix.chars().all(variable_char) {
            return Err(RepositoryProblem::EnvPrefix);
        }
        let notify = match &self.notify {
            Some(notify) => notify.settings().map_err(RepositoryProblem::Notify)?,
            None => global.cloned().unwrap_or_default(),
        };
        let (policy, shadow) = self.policies(defaults)?;
        Ok(WatchedRepository {
            name: self.name.clone(),
            settings: RepositorySettings {
                location,
                password,
                variables: Variables::prefixed(&self.env_prefix),
                timeout,
                evidence,
                policy,
                shadow,
            },
            interval: self.interval,
            mode: self.mode,
            notify,
            owner: None,
        })
    }

    /// The one password source the entry names (read when the repository
    /// is opened, not now).
    fn password_source(&self) -> Result<PasswordSource, RepositoryProblem> {
        match (
            &self.password_file,
            &self.password_command,
            &self.password_env,
        ) {
            (Some(file), None, None) => Ok(PasswordSource::File(file.clone())),
            (None, Some(command), None) => Ok(PasswordSource::Command(command.clone())),
            (None, None, Some(name)) => {
                let odd = |c: char| c == '=' || c.is_control();
                if name.is_empty() || name.chars().any(odd) {
                    return Err(RepositoryProblem::PasswordEnv);
                }
                Ok(PasswordSource::Variable(name.clone()))
            }
            _ => Err(RepositoryProblem::Password),
        }
    }

    /// The enforced policy and the shadow, if any, each its own or the
    /// command line's.
    fn policies(
        &self,
        defaults: &Defaults,
    ) -> Result<(PolicyChoice, Option<PolicyChoice>), RepositoryProblem> {
        let choice = |source, settings: &BTreeMap<String, String>| PolicyChoice {
            source,
            settings: settings.clone().into_iter().collect(),
        };
        let source = self.policy.as_ref().or(defaults.policy.as_ref());
        let policy = choice(
            source.cloned().unwrap_or(PolicySource::Builtin),
            &self.settings,
        );
        let shadow = match self
            .shadow_policy
            .as_ref()
            .or(defaults.shadow_policy.as_ref())
        {
            Some(source) => Some(choice(source.clone(), &self.shadow_settings)),
            None if self.shadow_settings.is_empty() => None,
            None => return Err(RepositoryProblem::ShadowSettings),
        };
        Ok((policy, shadow))
    }
}

/// Whatever is wrong with a watch configuration is the user's to fix.
impl Classify for ConfigError {
    fn kind(&self) -> ErrorKind {
        ErrorKind::Usage
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<WatchConfig, ConfigProblem> {
        WatchConfig::parse(text, &Defaults::default())
    }

    /// One `[[repository]]` named `a` at `/r`, with `extra` lines.
    fn entry(extra: &str) -> String {
        format!("[[repository]]\nname = \"a\"\nrepository = \"/r\"\n{extra}\n")
    }

    #[test]
    fn syntax_errors_never_quote_the_file() {
        let text = "[[repository]]\nname = \"a\"\npassword_command = \"echo MARKER-SECRET\nrepository = \"/r\"\n";
        let err = parse(text).expect_err("unterminated string");
        let err = err.to_string();
        assert!(!err.contains("MARKER"), "{err}");
        assert!(err.contains("line 3"), "{err}");
    }

    #[test]
    fn each_entry_is_typed_once_at_load() {
        let config = parse(&entry("password_env = \"X\"\ntimeout = \"90s\"")).expect("valid");
        let settings = &config.repositories[0].settings;
        assert_eq!(settings.location, Location::parse("/r").expect("a path"));
        assert_eq!(settings.timeout.get(), Duration::from_secs(90));
        assert_eq!(settings.evidence.timeout, Duration::from_secs(90));
        assert_eq!(settings.policy.source, PolicySource::Builtin);
        assert!(settings.shadow.is_none());
        // The variable is named now and read when the repository is opened.
        assert!(matches!(&settings.password, PasswordSource::Variable(v) if v == "X"));
        let command = parse(&entry("password_command = \"exit 1\"")).expect("not run at load");
        assert!(matches!(
            &command.repositories[0].settings.password,
            PasswordSource::Command(c) if c == "exit 1"
        ));
        for (bad, says) in [
            (
                "password_env = \"X\"\npassword_file = \"/pw\"",
                "repository `a`: give exactly one of password_file, password_command, password_env",
            ),
            (
                "",
                "repository `a`: give exactly one of password_file, password_command, password_env",
            ),
            (
                "password_env = \"X\"\ntimeout = \"0s\"",
                "repository `a`: timeout must be more than zero",
            ),
            (
                "password_env = \"X\"\ntimeout = \"0\"",
                "repository `a`: timeout must be more than zero",
            ),
        ] {
            let err = parse(&entry(bad)).expect_err(bad).to_string();
            assert_eq!(err, format!(", {says}"), "{bad}");
        }
        let bad = entry("password_env = \"X\"").replace("\"/r\"", "\"rest:ftp://u:SECRET@h/\"");
        let err = parse(&bad).expect_err("a bad location").to_string();
        assert!(err.starts_with(", repository `a`: "), "{err}");
        assert!(!err.contains("SECRET"), "{err}");
        let err = parse(&entry("password_env = \"X\"").replace("\"/r\"", "\" \""))
            .expect_err("empty")
            .to_string();
        assert_eq!(err, ", repository `a`: the repository location is empty");
    }

    #[test]
    fn evidence_options_per_repository_are_checked_at_load() {
        let repo = |evidence: &str| {
            entry(&format!(
                "password_env = \"X\"\nevidence = {{ {evidence} }}"
            ))
        };
        let config = parse(&repo(
            "hosts_command = \"kubectl get pods -o json\", inventory_hosts = \"^velero-\"",
        ))
        .expect("valid");
        let evidence = &config.repositories[0].settings.evidence;
        let hosts = evidence.inventory.as_ref().map(|(_, hosts)| hosts.as_str());
        assert_eq!(hosts, Some("^velero-"));
        for (bad, says) in [
            ("hosts_file = \"/h.json\"", "inventory-hosts"),
            ("inventory_hosts = \"(\"", "inventory-hosts"),
            ("hosts_cmd = \"x\"", "unknown field"),
        ] {
            let err = parse(&repo(bad)).expect_err(bad).to_string();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn the_command_line_fills_in_what_an_entry_does_not_name() {
        let defaults = Defaults {
            evidence: EvidenceConfig {
                trust_local_pids: true,
                ..EvidenceConfig::default()
            },
            policy: Some(PolicySource::File("/cli.wasm".into())),
            shadow_policy: Some(PolicySource::File("/cli-next.wasm".into())),
        };
        let text = format!(
            "{}{}",
            entry("password_env = \"X\"\ntimeout = \"5s\""),
            entry("password_env = \"X\"\npolicy = \"/own.wasm\"\nevidence = {}")
                .replace("\"a\"", "\"b\"")
        );
        let config = WatchConfig::parse(&text, &defaults).expect("valid");
        let [a, b] = [0, 1].map(|i| &config.repositories[i].settings);
        assert!(a.evidence.trust_local_pids);
        assert_eq!(
            a.evidence.timeout,
            Duration::from_secs(5),
            "its own timeout"
        );
        assert_eq!(a.policy.source, PolicySource::File("/cli.wasm".into()));
        assert!(!b.evidence.trust_local_pids, "its own evidence table");
        assert_eq!(b.policy.source, PolicySource::File("/own.wasm".into()));
        for settings in [a, b] {
            let shadow = settings.shadow.as_ref().map(|s| &s.source);
            assert_eq!(shadow, Some(&PolicySource::File("/cli-next.wasm".into())));
        }
        let orphan = entry("password_env = \"X\"\nshadow_settings = { stale-after = \"1h\" }");
        assert!(WatchConfig::parse(&orphan, &defaults).is_ok());
        let err = parse(&orphan).expect_err("no shadow policy").to_string();
        assert_eq!(
            err,
            ", repository `a`: shadow_settings without a shadow policy (shadow_policy or --shadow-policy)"
        );
    }

    #[test]
    fn a_shadow_policy_and_its_settings_are_per_repository() {
        let text = entry(
            "password_env = \"X\"\nsettings = { stale-after = \"30m\" }\n\
             shadow_policy = \"/etc/next.wasm\"\nshadow_settings = { stale-after = \"2h\" }",
        );
        let config = parse(&text).expect("valid");
        let settings = &config.repositories[0].settings;
        let pair = |value: &str| vec![("stale-after".to_owned(), value.to_owned())];
        assert_eq!(
            settings.shadow,
            Some(PolicyChoice {
                source: PolicySource::File("/etc/next.wasm".into()),
                settings: pair("2h"),
            })
        );
        assert_eq!(settings.policy.settings, pair("30m"));
        let bad = text.replace("shadow_policy = \"/etc/next.wasm\"", "shadow_policy = \"\"");
        let err = parse(&bad).expect_err("empty").to_string();
        assert!(err.contains("the policy is empty"), "{err}");
    }

    #[test]
    fn password_env_is_a_variable_name() {
        for bad in ["", "A=B", "A\\u0000B", "A\\nB"] {
            let err = parse(&entry(&format!("password_env = \"{bad}\"")))
                .expect_err(bad)
                .to_string();
            assert!(
                err.contains("password_env must be a variable name"),
                "{bad}: {err}"
            );
        }
        assert!(parse(&entry("password_env = \"RESTIC_PW\"")).is_ok());
    }

    #[test]
    fn a_variable_prefix_is_a_variable_name_part() {
        let repo = |prefix: &str| {
            format!(
                "[[repository]]\nname = \"a\"\nrepository = \"s3:h/b\"\npassword_env = \"X\"\nenv_prefix = \"{prefix}\"\n"
            )
        };
        let config = parse(&repo("OFFSITE_")).expect("valid");
        assert_eq!(
            config.repositories[0].settings.variables,
            Variables::prefixed("OFFSITE_")
        );
        for bad in ["offsite_", "A B", "X=Y", "\\u001b"] {
            let err = parse(&repo(bad)).expect_err(bad).to_string();
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
        let config = parse(text).expect("valid");
        let [a, b, c] = [0, 1, 2].map(|i| config.repositories[i].notify.clone());
        assert_eq!(
            a.webhook.map(|w| w.shown).as_deref(),
            Some("https://hooks.example.com")
        );
        assert_eq!(a.failing_after, 5);
        assert_eq!((b.webhook, b.command.as_deref()), (None, Some("cat")));
        assert_eq!(b.failing_after, 3, "replaced whole: the default again");
        assert!(!c.has_sinks());
        let bad = text.replace("command = \"cat\"", "webhook = \"https://u:SECRET@h/\"");
        let err = parse(&bad).expect_err("credentials").to_string();
        assert!(err.contains("repository `b`: notify:"), "{err}");
        assert!(!err.contains("SECRET"), "{err}");
        let bad = text.replace("failing_after = 5", "failing_after = 0");
        let err = parse(&bad).expect_err("zero").to_string();
        assert!(err.contains("[notify]: failing_after"), "{err}");
    }

    #[test]
    fn intervals_have_a_floor_and_take_fractions() {
        let repo =
            |interval: &str| entry(&format!("password_env = \"X\"\ninterval = \"{interval}\""));
        for bad in ["1ns", "999ms", "0", "soon"] {
            assert!(parse(&repo(bad)).is_err(), "{bad}");
        }
        let config = parse(&repo("1.5m")).expect("valid");
        assert_eq!(config.repositories[0].interval, Duration::from_secs(90));
    }
}
