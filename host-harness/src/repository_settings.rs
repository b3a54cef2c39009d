//! How one repository is reached and judged ([`RepositorySettings`]): made
//! once, whole, from the command line (`check`, `unlock`, `run`, `hold`) or
//! from a watched repository's entry in watch.toml
//! ([`crate::watch::config`]), and turned into a [`Warden`] in one way for
//! both ([`RepositorySettings::warden`]).

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use crate::evidence::EvidenceConfig;
use crate::first_seen::FirstSeenStore;
use crate::repo::backend::Variables;
use crate::repo::location::Location;
use crate::repo::{Password, PasswordError, PasswordSource, RepoError, Repository};
use crate::runtime::{PluginError, Policy, PolicySource, Runtime};
use crate::warden::{Shadow, Warden};

/// How long one external command (a password or hosts command, restic for
/// the backends read through it) or network request may take: more than
/// zero, since a zero timeout would fail every request. [`Timeout::new`] is
/// where that rule lives, for `--timeout` and watch.toml's `timeout` alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeout(Duration);

/// A timeout of zero, refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("must be more than zero")]
pub struct ZeroTimeout;

impl Timeout {
    /// The default, [`crate::command::DEFAULT_TIMEOUT`].
    pub const DEFAULT: Timeout = Timeout(crate::command::DEFAULT_TIMEOUT);

    /// `duration`, when it is more than zero.
    pub fn new(duration: Duration) -> Result<Timeout, ZeroTimeout> {
        if duration.is_zero() {
            return Err(ZeroTimeout);
        }
        Ok(Timeout(duration))
    }

    /// The duration.
    pub fn get(self) -> Duration {
        self.0
    }
}

impl Default for Timeout {
    fn default() -> Timeout {
        Timeout::DEFAULT
    }
}

/// Why a text is no [`Timeout`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimeoutError {
    /// The text is no duration.
    #[error(transparent)]
    Duration(#[from] crate::time::DurationError),
    /// The duration is zero.
    #[error(transparent)]
    Zero(#[from] ZeroTimeout),
}

/// A duration as Go writes one (`90s`, `1.5m`), more than zero: how
/// `--timeout` is read.
impl FromStr for Timeout {
    type Err = TimeoutError;

    fn from_str(text: &str) -> Result<Timeout, TimeoutError> {
        Ok(Timeout::new(crate::time::parse_duration(text)?)?)
    }
}

/// A policy and the settings it is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyChoice {
    /// Where the policy comes from ([`PolicySource::Builtin`] when none is
    /// named).
    pub source: PolicySource,
    /// Its settings, in the order given.
    pub settings: Vec<(String, String)>,
}

/// How one repository is reached and judged, every part parsed and checked
/// when it was made; only the password is read later, when the repository
/// is opened ([`RepositorySettings::password`]).
#[derive(Debug, Clone)]
pub struct RepositorySettings {
    /// Where it is.
    pub location: Location,
    /// Where its password comes from: exactly one source.
    pub password: PasswordSource,
    /// Where its storage's variables are read (`env_prefix` in watch.toml;
    /// unprefixed on the command line).
    pub variables: Variables,
    /// How long one command or request may take.
    pub timeout: Timeout,
    /// Where evidence about lock holders comes from, configured with
    /// `timeout`.
    pub evidence: EvidenceConfig,
    /// The enforced policy.
    pub policy: PolicyChoice,
    /// A shadow policy, which judges beside the enforced one and never acts.
    pub shadow: Option<PolicyChoice>,
}

impl RepositorySettings {
    /// What no message may show: both forms of the location, and a
    /// password and storage variables given as values (a discovered
    /// repository's, from its Secrets).
    pub fn secrets(&self) -> Vec<String> {
        let mut secrets = vec![
            self.location.as_given().to_owned(),
            self.location.redacted(),
        ];
        if let PasswordSource::Value(password) = &self.password {
            secrets.push(String::from_utf8_lossy(password.as_bytes()).into_owned());
        }
        secrets.extend(self.variables.secrets());
        secrets
    }
}

/// The policies a repository's settings name, loaded
/// ([`RepositorySettings::load_policies`]).
pub struct Policies {
    /// Runs them.
    pub runtime: Arc<Runtime>,
    /// The enforced policy.
    pub enforced: Arc<Policy>,
    /// The shadow policy, when the settings name one.
    pub shadow: Option<Arc<Policy>>,
}

/// When the enforced policy is first given its settings. A shadow's are
/// always checked when the warden is made ([`Shadow::checked`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnforcedSettings {
    /// Now: any failure stops here (`watch`, where it would otherwise fail
    /// at every interval).
    CheckNow,
    /// At the first judgement, which follows at once (the command line,
    /// whose failure then says that nothing was removed).
    AtFirstJudgement,
}

/// A policy refused its settings (or, for the enforced policy checked now,
/// failed on them) before anything was judged.
#[derive(Debug, thiserror::Error)]
#[error("{}{error}", if *shadow { "shadow policy: " } else { "" })]
pub struct SettingsRefused {
    /// True when it was the shadow policy.
    pub shadow: bool,
    /// The policy's refusal.
    pub error: PluginError,
}

/// The kind of the policy's refusal.
impl crate::error::Classify for SettingsRefused {
    fn kind(&self) -> crate::error::ErrorKind {
        crate::error::Classify::kind(&self.error)
    }
}

impl RepositorySettings {
    /// Reads the password now (a command may run for the timeout).
    pub fn password(&self) -> Result<Password, PasswordError> {
        self.password.resolve(self.timeout.get())
    }

    /// Opens the repository with `password` (the key is derived here).
    pub fn open(&self, password: &Password) -> Result<Repository, RepoError> {
        Repository::open(
            self.location.clone(),
            password,
            self.timeout.get(),
            &self.variables,
        )
    }

    /// Loads the enforced policy, then the shadow policy if there is one,
    /// through `load` (told `true` for the shadow), which may share one
    /// loaded policy among many repositories.
    pub fn load_policies<E>(
        &self,
        runtime: Arc<Runtime>,
        mut load: impl FnMut(&Runtime, &PolicySource, bool) -> Result<Arc<Policy>, E>,
    ) -> Result<Policies, E> {
        let enforced = load(&runtime, &self.policy.source, false)?;
        let shadow = match &self.shadow {
            Some(shadow) => Some(load(&runtime, &shadow.source, true)?),
            None => None,
        };
        Ok(Policies {
            runtime,
            enforced,
            shadow,
        })
    }

    /// The warden of this repository: its policies with their settings, its
    /// evidence, and the first-seen store if any. The shadow's settings are
    /// checked now, the enforced policy's as `enforced` says; `label` names
    /// the repository to a policy in those checks. It has no Kubernetes
    /// client: the binary's edge hands it the one it made, if any.
    pub fn warden(
        &self,
        policies: Policies,
        first_seen: Option<FirstSeenStore>,
        label: &str,
        enforced: EnforcedSettings,
    ) -> Result<Warden, SettingsRefused> {
        let refused = |shadow: bool| move |error| SettingsRefused { shadow, error };
        let runtime = policies.runtime;
        if enforced == EnforcedSettings::CheckNow {
            runtime
                .check_settings(&policies.enforced, label, &self.policy.settings)
                .map_err(refused(false))?;
        }
        let shadow = match (&self.shadow, policies.shadow) {
            (Some(choice), Some(policy)) => Some(
                Shadow::checked(&runtime, policy, choice.settings.clone(), label)
                    .map_err(refused(true))?,
            ),
            _ => None,
        };
        Ok(Warden {
            runtime,
            policy: policies.enforced,
            evidence: self.evidence.clone(),
            settings: self.policy.settings.clone(),
            first_seen,
            children: None,
            kubernetes: crate::kubernetes::Connection::none(),
            shadow,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::Limits;

    fn pairs(settings: &[(&str, &str)]) -> Vec<(String, String)> {
        settings
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    /// Settings of a repository at `/r` whose policies, the built-in one,
    /// are given `policy` and (with a shadow) `shadow`.
    fn settings(policy: &[(&str, &str)], shadow: Option<&[(&str, &str)]>) -> RepositorySettings {
        let choice = |settings| PolicyChoice {
            source: PolicySource::Builtin,
            settings: pairs(settings),
        };
        RepositorySettings {
            location: Location::parse("/r").expect("a path"),
            password: PasswordSource::Value(Password::new("pw")),
            variables: Variables::default(),
            timeout: Timeout::DEFAULT,
            evidence: EvidenceConfig::default(),
            policy: choice(policy),
            shadow: shadow.map(choice),
        }
    }

    #[test]
    fn the_warden_checks_the_shadow_now_and_the_enforced_policy_as_asked() {
        let runtime = Arc::new(Runtime::new(Limits::default(), None).expect("engine"));
        let builtin = Arc::new(runtime.load_default().expect("default policy"));
        let mut loaded = Vec::new();
        let mut warden = |settings: &RepositorySettings, enforced| {
            let policies = settings.load_policies(runtime.clone(), |_, source, shadow| {
                loaded.push((source.clone(), shadow));
                Ok::<_, ()>(builtin.clone())
            });
            settings.warden(policies.expect("loaded"), None, "r", enforced)
        };
        let refused = settings(&[("stale-after", "soon")], None);
        let Err(err) = warden(&refused, EnforcedSettings::CheckNow) else {
            panic!("checked now")
        };
        assert!(!err.shadow && err.error.is_usage(), "{err}");
        let made = warden(&refused, EnforcedSettings::AtFirstJudgement).expect("not yet");
        assert_eq!(made.settings, pairs(&[("stale-after", "soon")]));
        assert!(made.shadow.is_none());

        let shadow_refused = settings(&[], Some(&[("stale-after", "soon")]));
        let Err(err) = warden(&shadow_refused, EnforcedSettings::AtFirstJudgement) else {
            panic!("a shadow is always checked")
        };
        assert!(err.shadow, "{err}");
        assert!(err.to_string().starts_with("shadow policy: "), "{err}");

        let good = settings(&[("stale-after", "1h")], Some(&[("stale-after", "2h")]));
        let made = warden(&good, EnforcedSettings::CheckNow).expect("accepted");
        assert_eq!(made.settings, pairs(&[("stale-after", "1h")]));
        let shadow = made.shadow.map(|s| s.settings);
        assert_eq!(shadow, Some(pairs(&[("stale-after", "2h")])));
        let shadows: Vec<bool> = loaded.iter().map(|(_, shadow)| *shadow).collect();
        assert_eq!(shadows, [false, false, false, true, false, true]);
    }

    #[test]
    fn a_timeout_is_more_than_zero() {
        assert_eq!(Timeout::new(Duration::ZERO), Err(ZeroTimeout));
        assert_eq!(
            Timeout::new(Duration::from_millis(1)).map(Timeout::get),
            Ok(Duration::from_millis(1))
        );
        assert_eq!("90s".parse(), Ok(Timeout(Duration::from_secs(90))));
        for zero in ["0", "0s", "0ms"] {
            let refused = zero.parse::<Timeout>();
            assert_eq!(refused, Err(TimeoutError::Zero(ZeroTimeout)));
            assert_eq!(
                refused.expect_err("zero").to_string(),
                "must be more than zero"
            );
        }
        assert!("soon".parse::<Timeout>().is_err());
        assert!(matches!(
            "soon".parse::<Timeout>(),
            Err(TimeoutError::Duration(_))
        ));
        assert_eq!(Timeout::default().get(), crate::command::DEFAULT_TIMEOUT);
    }
}
