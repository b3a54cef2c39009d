//! `--shadow-policy` and `--shadow-set`: a second policy that judges the
//! same locks with the same evidence answers, never acts, and has every
//! disagreement with the enforced policy reported.

use clap::Args;
use lockwarden::repository_settings::PolicyChoice;
use lockwarden::runtime::PolicySource;

use super::policy_args::parse_setting;

/// Options naming a shadow policy and its settings.
#[derive(Debug, Args)]
pub struct ShadowArgs {
    /// A policy that judges alongside the enforced one and never acts; every
    /// disagreement is reported. A component file (.wasm) or an oci://
    /// reference, as --policy.
    #[arg(long, value_name = "FILE|OCI")]
    pub shadow_policy: Option<PolicySource>,
    /// A setting of the shadow policy, e.g. `--shadow-set stale-after=2h`
    /// (repeatable; the enforced policy's are --set).
    #[arg(
        long = "shadow-set",
        value_name = "KEY=VALUE",
        value_parser = parse_setting,
        requires = "shadow_policy"
    )]
    pub shadow_settings: Vec<(String, String)>,
}

impl ShadowArgs {
    /// The shadow policy and its settings, if one is named (its settings
    /// are checked when the warden is made,
    /// [`lockwarden::repository_settings::RepositorySettings::warden`]).
    pub fn choice(&self) -> Option<PolicyChoice> {
        self.shadow_policy.clone().map(|source| PolicyChoice {
            source,
            settings: self.shadow_settings.clone(),
        })
    }
}
