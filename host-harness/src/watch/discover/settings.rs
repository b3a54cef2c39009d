//! watch.toml's `[discover]` table as written, and the settings every
//! discovered repository is watched with.

use std::time::Duration;

use regex::Regex;
use serde::Deserialize;

use super::{Access, Discovered, Discovery, Namespaces, Operator, Unusable};
use crate::evidence::{EvidenceConfig, InventorySource};
use crate::repo::PasswordSource;
use crate::repo::backend::Variables;
use crate::repo::location::Location;
use crate::repository_settings::{PolicyChoice, RepositorySettings, Timeout, ZeroTimeout};
use crate::runtime::PolicySource;
use crate::watch::notify::settings::NotifySettings;
use crate::watch::repository::{Defaults, MIN_INTERVAL, Mode, WatchedRepository};

/// `[discover]` as written (keys in the module's example).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiscoverEntry {
    #[serde(default)]
    velero: bool,
    #[serde(default)]
    stash: bool,
    #[serde(default)]
    kubestash: bool,
    #[serde(default)]
    k8up: bool,
    #[serde(default)]
    volsync: bool,
    #[serde(default)]
    namespaces: Vec<String>,
    #[serde(default)]
    exclude_namespaces: Vec<String>,
    #[serde(default)]
    single_tenant: bool,
    max_repositories: Option<usize>,
    every: Option<String>,
    interval: Option<String>,
    timeout: Option<String>,
    mode: Option<Mode>,
    inventory_hosts: Option<String>,
    #[serde(default)]
    allow_insecure_tls: bool,
}

/// Why a `[discover]` table is refused: each setting's own variant, said
/// as before (`ConfigProblem::Discover` puts the table's name before it).
#[derive(Debug, Clone, thiserror::Error)]
pub enum DiscoverProblem {
    /// No operator is turned on.
    #[error("turns on no operator (velero, stash, kubestash, k8up, volsync)")]
    NoOperator,
    /// A duration (`every`, `interval`, `timeout`) does not parse.
    #[error("{name}: {message}")]
    Duration {
        /// The setting.
        name: &'static str,
        /// Why it does not parse.
        message: String,
    },
    /// `every` or `interval` is under [`MIN_INTERVAL`].
    #[error("{name} is shorter than {}s", MIN_INTERVAL.as_secs())]
    TooShort {
        /// The setting.
        name: &'static str,
    },
    /// The timeout is zero.
    #[error("timeout {0}")]
    Timeout(ZeroTimeout),
    /// `inventory_hosts` is no regex (the regex's own message, escaped).
    #[error("inventory_hosts: {}", crate::text::escape(&.0.to_string()))]
    InventoryHosts(regex::Error),
    /// `max_repositories` is out of range.
    #[error(
        "max_repositories must be from 1 to {}",
        crate::limits::DISCOVERED_REPOSITORIES
    )]
    MaxRepositories,
}

/// How every discovered repository is watched: what a `[[repository]]`
/// entry would say of it, but for its location, password and variables.
#[derive(Debug, Clone)]
pub struct Template {
    /// Check interval.
    pub interval: Duration,
    /// Per request.
    pub timeout: Timeout,
    /// Unlock or report.
    pub mode: Mode,
    /// The policy (the command line's, else the built-in one).
    pub policy: PolicyChoice,
    /// The command line's shadow policy, if any.
    pub shadow: Option<PolicyChoice>,
    /// The global `[notify]` table's settings.
    pub notify: NotifySettings,
}

impl DiscoverEntry {
    /// The discovery this table asks for, checked; its repositories are
    /// watched as `template` says (its interval, timeout and mode replaced
    /// by the table's own).
    pub fn settings(
        &self,
        mut template: Template,
    ) -> Result<(Discovery, Template), DiscoverProblem> {
        let operators = self.operators()?;
        let duration = |name, text: &Option<String>, default: Duration| match text {
            None => Ok(default),
            Some(text) => {
                crate::time::parse_duration(text).map_err(|e| DiscoverProblem::Duration {
                    name,
                    message: e.to_string(),
                })
            }
        };
        let every = duration("every", &self.every, Duration::from_secs(60))?;
        template.interval = duration("interval", &self.interval, template.interval)?;
        for (name, value) in [("every", every), ("interval", template.interval)] {
            if value < MIN_INTERVAL {
                return Err(DiscoverProblem::TooShort { name });
            }
        }
        template.timeout =
            Timeout::new(duration("timeout", &self.timeout, template.timeout.get())?)
                .map_err(DiscoverProblem::Timeout)?;
        template.mode = self.mode.unwrap_or(template.mode);
        let inventory_hosts = match &self.inventory_hosts {
            Some(regex) => Some(Regex::new(regex).map_err(DiscoverProblem::InventoryHosts)?),
            None => None,
        };
        let discovery = Discovery {
            max_repositories: self.max_repositories()?,
            operators,
            access: Access {
                namespaces: Namespaces {
                    only: self.namespaces.clone(),
                    except: self.exclude_namespaces.clone(),
                },
                single_tenant: self.single_tenant,
            },
            every,
            inventory_hosts,
            allow_insecure_tls: self.allow_insecure_tls,
        };
        Ok((discovery, template))
    }

    /// The operators the table turns on; at least one.
    fn operators(&self) -> Result<Vec<Operator>, DiscoverProblem> {
        let chosen = [
            self.velero,
            self.stash,
            self.kubestash,
            self.k8up,
            self.volsync,
        ];
        let operators: Vec<Operator> = Operator::ALL
            .into_iter()
            .zip(chosen)
            .filter_map(|(operator, on)| on.then_some(operator))
            .collect();
        if operators.is_empty() {
            return Err(DiscoverProblem::NoOperator);
        }
        Ok(operators)
    }

    /// `max_repositories`, from 1 to the limit (the limit when not set).
    fn max_repositories(&self) -> Result<usize, DiscoverProblem> {
        let max = self
            .max_repositories
            .unwrap_or(crate::limits::DISCOVERED_REPOSITORIES);
        if max == 0 || max > crate::limits::DISCOVERED_REPOSITORIES {
            return Err(DiscoverProblem::MaxRepositories);
        }
        Ok(max)
    }
}

impl Template {
    /// What the command line gives (`defaults`), with the global `notify`:
    /// checks every 5 minutes in unlock mode, with the default timeout.
    pub fn of(defaults: &Defaults, notify: NotifySettings) -> Template {
        let choice = |source: Option<&PolicySource>| PolicyChoice {
            source: source.cloned().unwrap_or(PolicySource::Builtin),
            settings: Vec::new(),
        };
        Template {
            interval: Duration::from_secs(300),
            timeout: Timeout::DEFAULT,
            mode: Mode::Unlock,
            policy: choice(defaults.policy.as_ref()),
            shadow: defaults.shadow_policy.as_ref().map(|s| choice(Some(s))),
            notify,
        }
    }

    /// `found` as a watched repository, or why it cannot be one.
    pub fn watched(&self, found: Discovered) -> Result<WatchedRepository, Unusable> {
        let location = Location::parse(&found.location).map_err(|e| {
            Unusable::new(
                found.name(),
                found.owner.clone(),
                format!("its repository: {e}"),
            )
        })?;
        let timeout = self.timeout;
        Ok(WatchedRepository {
            name: found.name(),
            settings: RepositorySettings {
                location,
                password: PasswordSource::Value(found.password),
                variables: Variables::given(found.variables).with_tls(found.tls),
                timeout,
                evidence: EvidenceConfig {
                    trust_local_pids: false,
                    // The operators run restic in the namespaces of the
                    // objects naming the repository: only their pods
                    // answer for its locks.
                    inventory: found.hosts.map(|hosts| {
                        let namespaces = Some(found.namers.iter().cloned().collect());
                        (InventorySource::Kubernetes { namespaces }, hosts)
                    }),
                    timeout: timeout.get(),
                },
                policy: self.policy.clone(),
                shadow: self.shadow.clone(),
            },
            interval: self.interval,
            mode: self.mode,
            notify: self.notify.clone(),
            owner: Some(found.owner),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watch::repository::Defaults;

    /// The table `text` made into settings, or why not, as shown.
    fn refused(text: &str) -> String {
        let entry: DiscoverEntry = toml::from_str(text).expect("a [discover] table");
        let template = Template::of(&Defaults::default(), NotifySettings::default());
        entry.settings(template).expect_err(text).to_string()
    }

    #[test]
    fn each_refusal_is_said_word_for_word() {
        let min = MIN_INTERVAL.as_secs();
        let most = crate::limits::DISCOVERED_REPOSITORIES;
        let cases = [
            (
                "",
                "turns on no operator (velero, stash, kubestash, k8up, volsync)".to_owned(),
            ),
            (
                "velero = true\nevery = \"0s\"",
                format!("every is shorter than {min}s"),
            ),
            (
                "velero = true\ninterval = \"0s\"",
                format!("interval is shorter than {min}s"),
            ),
            (
                "velero = true\ntimeout = \"0s\"",
                "timeout must be more than zero".to_owned(),
            ),
            (
                "velero = true\nmax_repositories = 0",
                format!("max_repositories must be from 1 to {most}"),
            ),
        ];
        for (text, said) in cases {
            assert_eq!(refused(text), said, "{text}");
        }
        let every = refused("velero = true\nevery = \"soon\"");
        assert!(every.starts_with("every: "), "{every}");
        let hosts = refused("velero = true\ninventory_hosts = \"(\"");
        assert!(
            hosts.starts_with("inventory_hosts: regex parse error"),
            "{hosts}"
        );
        assert!(!hosts.contains('\n'), "escaped: {hosts}");
    }
}
