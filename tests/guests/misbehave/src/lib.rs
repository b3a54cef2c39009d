//! A policy that misbehaves in one way, chosen by cargo feature. Each
//! behaviour keeps every lock otherwise, so that a host which does not catch
//! the misbehaviour still removes nothing that the test would notice.

#[allow(missing_docs, unsafe_code)]
mod bindings {
    wit_bindgen::generate!({ path: "../../../wit", world: "stale-lock-policy" });
}

use bindings::exports::lockwarden::policy::policy::Guest;
use bindings::lockwarden::policy::types::{
    Action, EvaluateRequest, PolicyError, PolicyInfo, Verdict,
};

struct Misbehave;

fn keep_all(request: &EvaluateRequest) -> Vec<Verdict> {
    let ids = request
        .locks
        .iter()
        .map(|l| l.id.clone())
        .chain(request.unreadable.iter().map(|u| u.id.clone()));
    ids.map(|id| Verdict {
        id,
        action: Action::Keep,
        rule: "misbehave".into(),
        reason: "test guest".into(),
    })
    .collect()
}

impl Guest for Misbehave {
    fn info() -> PolicyInfo {
        PolicyInfo {
            name: "misbehave".into(),
            version: "0.1.0".into(),
            contract_version: "0.1.0".into(),
            description: "misbehaves on purpose".into(),
            settings: Vec::new(),
        }
    }

    #[allow(unreachable_code, unused_mut)]
    fn evaluate(request: EvaluateRequest) -> Result<Vec<Verdict>, PolicyError> {
        let mut verdicts = keep_all(&request);
        #[cfg(feature = "panic")]
        panic!("policy bug: index out of range");
        #[cfg(feature = "spin")]
        loop {
            std::hint::black_box(&verdicts);
        }
        #[cfg(feature = "hog")]
        {
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                hoard.push(vec![1; 1 << 20]);
                std::hint::black_box(&hoard);
            }
        }
        #[cfg(feature = "omit")]
        verdicts.pop();
        #[cfg(feature = "duplicate")]
        verdicts.push(verdicts[0].clone());
        #[cfg(feature = "invent")]
        verdicts.push(Verdict {
            id: "f".repeat(64),
            action: Action::Remove,
            rule: "invented".into(),
            reason: "an id nobody asked about".into(),
        });
        #[cfg(feature = "fail")]
        return Err(PolicyError::Failed("the policy gave up on purpose".into()));
        #[cfg(feature = "snoop")]
        {
            // Everything a policy could learn about its host through the WASI
            // the sandbox links: it must all be empty.
            let env = std::env::vars().count();
            let args = std::env::args().count();
            let cwd = std::env::current_dir().is_ok();
            println!("anyone there?");
            return Err(PolicyError::Failed(format!(
                "env vars: {env}, args: {args}, cwd: {cwd}"
            )));
        }
        #[cfg(feature = "wall-clock")]
        {
            let now = std::time::SystemTime::now();
            std::hint::black_box(now);
        }
        #[cfg(feature = "read-file")]
        {
            let secret = std::fs::read("/etc/passwd").map(|b| b.len());
            std::hint::black_box(secret.ok());
        }
        #[cfg(feature = "remove-unreadable")]
        for verdict in verdicts.iter_mut().skip(request.locks.len()) {
            // Every lock is kept; every unreadable file is judged stale,
            // which no host may act on.
            verdict.action = Action::Remove;
            verdict.rule = "remove-unreadable".into();
        }
        Ok(verdicts)
    }
}

#[allow(unsafe_code)]
mod export {
    use super::Misbehave;
    crate::bindings::export!(Misbehave with_types_in crate::bindings);
}
