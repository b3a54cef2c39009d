//! `--shadow-policy` and `--shadow-set`: a second policy that judges the
//! same locks with the same evidence answers, never acts, and has every
//! disagreement with the enforced policy reported.

use std::sync::Arc;

use clap::Args;
use lockwarden::runtime::{PolicySource, Runtime};
use lockwarden::warden::Shadow;

use super::policy_args::parse_setting;
use super::{Context, Outcome, PolicyArgs};

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
    /// Loads the shadow policy, if one is named, through `runtime` and the
    /// registry `policy` configures, and checks its settings now: a setting
    /// it refuses is a usage error before anything is judged
    /// ([`Shadow::checked`]).
    pub fn load(
        &self,
        runtime: &Runtime,
        policy: &PolicyArgs,
        repository: &str,
    ) -> Outcome<Option<Shadow>> {
        let Some(source) = &self.shadow_policy else {
            return Ok(None);
        };
        let shadow = runtime
            .load_from(source, &policy.registry())
            .context("shadow policy")?;
        let shadow = Shadow::checked(
            runtime,
            Arc::new(shadow),
            self.shadow_settings.clone(),
            repository,
        )
        .context("shadow policy")?;
        Ok(Some(shadow))
    }
}
