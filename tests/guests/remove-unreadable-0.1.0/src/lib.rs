//! A contract 0.1.0 policy that keeps every lock and judges every unreadable
//! lock file stale. 0.1.0 promised that no unreadable file is ever removed,
//! so every host must refuse these verdicts, however old the file.

/// Bindings generated from `wit/0.1.0/`.
#[allow(missing_docs, unsafe_code)]
mod bindings {
    wit_bindgen::generate!({
        path: "../../../wit/0.1.0",
        world: "stale-lock-policy",
    });
}

use bindings::exports::lockwarden::policy::policy::Guest;
use bindings::lockwarden::policy::types::{
    Action, EvaluateRequest, PolicyError, PolicyInfo, Verdict,
};

struct RemoveUnreadable;

impl Guest for RemoveUnreadable {
    fn info() -> PolicyInfo {
        PolicyInfo {
            name: "misbehave".into(),
            version: "0.1.0".into(),
            contract_version: lockwarden_wit::v0_1::VERSION.into(),
            description: "misbehaves on purpose".into(),
            settings: Vec::new(),
        }
    }

    fn evaluate(request: EvaluateRequest) -> Result<Vec<Verdict>, PolicyError> {
        let verdict = |id: &str, action| Verdict {
            id: id.to_owned(),
            action,
            rule: "remove-unreadable".into(),
            reason: "test guest".into(),
        };
        let locks = request.locks.iter().map(|l| verdict(&l.id, Action::Keep));
        let files = request
            .unreadable
            .iter()
            .map(|u| verdict(&u.id, Action::Remove));
        Ok(locks.chain(files).collect())
    }
}

#[allow(unsafe_code)]
mod export {
    use super::RemoveUnreadable;
    crate::bindings::export!(RemoveUnreadable with_types_in crate::bindings);
}
