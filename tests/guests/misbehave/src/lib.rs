//! What every test guest that misbehaves on purpose shares: a policy named
//! `misbehave` that keeps every lock and every unreadable file, unless the
//! guest's own `evaluate` changes that.
//!
//! Each behaviour is a package of its own next to this one
//! (`tests/guests/<behaviour>/`), built as a component of its own by
//! `tests/build.rs`: one component per behaviour keeps each guest's imports to
//! exactly what its misbehaviour needs (only `wall-clock` imports WASI clocks,
//! only `read-file` the filesystem), and a behaviour that keeps every lock
//! otherwise removes nothing a test would notice if a host failed to catch it.

/// The contract version the guests claim: the one in `wit/`.
pub const CONTRACT_VERSION: &str = lockwarden_wit::VERSION;

/// Makes the calling crate the `misbehave` policy component.
///
/// The crate defines, at its root,
/// `fn evaluate(request: &EvaluateRequest, verdicts: Verdicts) ->
/// Result<Verdicts, PolicyError>`: `verdicts` keeps every lock and every
/// unreadable file of `request`, one verdict each in the request's order, and
/// what `evaluate` returns is the policy's answer. The macro brings `Action`,
/// `EvaluateRequest`, `PolicyError`, `Verdict` and `Verdicts` into the crate
/// root, and needs `wit-bindgen` among the crate's dependencies and the crate
/// in `tests/guests/<behaviour>/` (for the path to `wit/`).
#[macro_export]
// `crate::` on purpose: the bindings and `evaluate` are the calling crate's.
#[allow(clippy::crate_in_macro_def)]
macro_rules! policy {
    () => {
        #[allow(missing_docs, unsafe_code)]
        mod bindings {
            wit_bindgen::generate!({ path: "../../../wit", world: "stale-lock-policy" });
        }

        #[allow(unused_imports)]
        use bindings::lockwarden::policy::types::{
            Action, EvaluateRequest, PolicyError, Verdict, Verdicts,
        };

        struct Misbehave;

        impl bindings::exports::lockwarden::policy::policy::Guest for Misbehave {
            fn info() -> bindings::lockwarden::policy::types::PolicyInfo {
                bindings::lockwarden::policy::types::PolicyInfo {
                    name: "misbehave".into(),
                    version: "0.1.0".into(),
                    contract_version: $crate::CONTRACT_VERSION.into(),
                    description: "misbehaves on purpose".into(),
                    settings: Vec::new(),
                }
            }

            fn evaluate(request: EvaluateRequest) -> Result<Verdicts, PolicyError> {
                let keep = || Verdict {
                    action: Action::Keep,
                    rule: "misbehave".into(),
                    reason: "test guest".into(),
                };
                let verdicts = Verdicts {
                    locks: request.locks.iter().map(|_| keep()).collect(),
                    unreadable: request.unreadable.iter().map(|_| keep()).collect(),
                };
                crate::evaluate(&request, verdicts)
            }
        }

        #[allow(unsafe_code)]
        mod export {
            use super::Misbehave;
            crate::bindings::export!(Misbehave with_types_in crate::bindings);
        }
    };
}
