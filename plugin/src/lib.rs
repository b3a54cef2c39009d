//! lockwarden's default stale-lock policy.
//!
//! This file is glue only: the WIT bindings, the export, and the adapter that
//! serves the rules' [`rules::Facts`] from the host's imports. The decisions are
//! plain functions in [`rules`], tested natively.

pub use lockwarden_duration as duration;
pub mod rules;

/// Bindings generated from `wit/`, the one contract.
#[allow(missing_docs, unsafe_code)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../wit",
        world: "stale-lock-policy",
    });
}

use bindings::exports::lockwarden::policy::policy::Guest;
use bindings::lockwarden::policy::types::{
    EvaluateRequest, Liveness, PolicyError, PolicyInfo, Verdict,
};
use bindings::lockwarden::policy::{clock, liveness, log};

/// The contract version this policy was built against: the WIT package version.
pub const CONTRACT_VERSION: &str = lockwarden_wit::VERSION;

struct DefaultPolicy;

/// Serves the rules' facts from the host's imports.
struct HostFacts;

impl rules::Facts for HostFacts {
    fn local_hostname(&self) -> Option<String> {
        liveness::local_hostname()
    }
    fn process(&self, hostname: &str, pid: i64, since: i64) -> Liveness {
        liveness::process(hostname, pid, since)
    }
    fn host(&self, hostname: &str, since: i64) -> Liveness {
        liveness::host(hostname, since)
    }
    fn warn(&self, message: &str) {
        log::log(log::Level::Warn, message);
    }
}

impl Guest for DefaultPolicy {
    fn info() -> PolicyInfo {
        rules::info()
    }

    fn evaluate(request: EvaluateRequest) -> Result<Vec<Verdict>, PolicyError> {
        let settings = rules::Settings::parse(&request.settings)?;
        Ok(rules::evaluate(
            clock::now(),
            &HostFacts,
            &settings,
            &request.locks,
            &request.unreadable,
        ))
    }
}

// SAFETY: the generated export glue is the canonical ABI entry points
// wit-bindgen writes for `DefaultPolicy`; it holds no hand-written unsafe code.
// Exported only on wasm: the export names are not valid native symbol names.
#[cfg(target_arch = "wasm32")]
#[allow(unsafe_code)]
mod export {
    use super::DefaultPolicy;
    crate::bindings::export!(DefaultPolicy with_types_in crate::bindings);
}
