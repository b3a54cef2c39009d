//! A policy that implements `lockwarden:policy@0.9.0`, a contract version no
//! host knows. The host must refuse it and name its version and the versions
//! it runs.

#[allow(missing_docs, unsafe_code)]
mod bindings {
    wit_bindgen::generate!({
        inline: "
            package lockwarden:policy@0.9.0;
            interface policy {
                evaluate-all: func(ids: list<string>) -> list<string>;
            }
            world stale-lock-policy {
                export policy;
            }
        ",
    });
}

struct Future;

impl bindings::exports::lockwarden::policy::policy::Guest for Future {
    fn evaluate_all(ids: Vec<String>) -> Vec<String> {
        ids
    }
}

#[allow(unsafe_code)]
mod export {
    use super::Future;
    crate::bindings::export!(Future with_types_in crate::bindings);
}
