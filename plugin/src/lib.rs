//! lockwarden's default stale-lock policy, as a component of contract 0.2.0.
//!
//! This file is glue only: the WIT bindings, the export, and the conversions
//! between the contract's records and the rules' own types. The decisions are
//! plain functions in [`rules`] (crate `lockwarden-policy-rules`), tested
//! natively.

// No std on wasm: the component links only core and alloc, so it imports
// nothing but the contract, and no WASI adapter is instantiated with it.
#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use alloc::{string::String, vec::Vec};

pub use lockwarden_policy_rules as rules;

/// Bindings generated from `wit/`, the one contract.
#[allow(missing_docs, unsafe_code)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../wit",
        world: "stale-lock-policy",
    });
}

use bindings::exports::lockwarden::policy::policy::Guest;
use bindings::lockwarden::policy::types as wit;
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
    fn ask(&self, questions: Vec<rules::Question>) -> Vec<rules::Liveness> {
        let questions: Vec<wit::Question> = questions.into_iter().map(question).collect();
        liveness::ask(&questions)
            .into_iter()
            .map(|answer| match answer {
                wit::Liveness::Alive(d) => rules::Liveness::Alive(d),
                wit::Liveness::Dead(d) => rules::Liveness::Dead(d),
                wit::Liveness::Unknown(d) => rules::Liveness::Unknown(d),
            })
            .collect()
    }
    fn warn(&self, message: &str) {
        log::log(log::Level::Warn, message);
    }
}

fn question(q: rules::Question) -> wit::Question {
    match q {
        rules::Question::Process {
            hostname,
            pid,
            since,
        } => wit::Question::Process(wit::ProcessQuestion {
            hostname,
            pid,
            since,
        }),
        rules::Question::Host { hostname, since } => {
            wit::Question::Host(wit::HostQuestion { hostname, since })
        }
    }
}

fn lock(l: wit::Lock) -> rules::Lock {
    rules::Lock {
        id: l.id,
        time: l.time,
        exclusive: l.exclusive,
        hostname: l.hostname,
        username: l.username,
        pid: l.pid,
        first_seen: l.first_seen,
        stored_at: l.stored_at,
    }
}

fn unreadable(u: wit::UnreadableLock) -> rules::Unreadable {
    rules::Unreadable {
        id: u.id,
        size: u.size,
        problem: u.problem,
        stored_at: u.stored_at,
        first_seen: u.first_seen,
    }
}

fn verdict(v: rules::Verdict) -> wit::Verdict {
    wit::Verdict {
        action: match v.action {
            rules::Action::Keep => wit::Action::Keep,
            rules::Action::Remove => wit::Action::Remove,
        },
        rule: v.rule.into(),
        reason: v.reason,
    }
}

impl Guest for DefaultPolicy {
    fn info() -> wit::PolicyInfo {
        let info = rules::info();
        wit::PolicyInfo {
            name: info.name,
            version: info.version,
            contract_version: CONTRACT_VERSION.into(),
            description: info.description,
            settings: info
                .settings
                .into_iter()
                .map(|s| wit::SettingInfo {
                    name: s.name,
                    default_value: s.default_value,
                    help: s.help,
                })
                .collect(),
        }
    }

    fn evaluate(request: wit::EvaluateRequest) -> Result<wit::Verdicts, wit::PolicyError> {
        let settings = rules::Settings::parse(&request.settings)
            .map_err(|rules::PolicyError::InvalidSetting(m)| wit::PolicyError::InvalidSetting(m))?;
        let locks: Vec<rules::Lock> = request.locks.into_iter().map(lock).collect();
        let files: Vec<rules::Unreadable> =
            request.unreadable.into_iter().map(unreadable).collect();
        let verdicts = rules::evaluate(clock::now(), &HostFacts, &settings, &locks, &files);
        Ok(wit::Verdicts {
            locks: verdicts.locks.into_iter().map(verdict).collect(),
            unreadable: verdicts.unreadable.into_iter().map(verdict).collect(),
        })
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

/// What std would bring on wasm: an allocator and a panic handler, which
/// traps (the host reports a trap as the policy's failure, which keeps every
/// lock). The allocator is wasi-libc's malloc, as under std, which serves
/// first from the memory the module starts with and imports nothing; its
/// `cabi_realloc` (linked by `build.rs`) is the same allocator's.
#[cfg(target_arch = "wasm32")]
#[allow(unsafe_code)]
mod no_std_runtime {
    use core::alloc::{GlobalAlloc, Layout};

    unsafe extern "C" {
        fn aligned_alloc(align: usize, size: usize) -> *mut u8;
        fn free(ptr: *mut u8);
    }

    /// wasi-libc's malloc.
    struct Libc;

    // SAFETY: aligned_alloc returns null or a block of at least `size`
    // bytes at `align` (a power of two, as Layout guarantees), which `free`
    // releases; neither touches memory it did not hand out.
    unsafe impl GlobalAlloc for Libc {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            // SAFETY: see the impl.
            unsafe { aligned_alloc(layout.align(), layout.size()) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, _: Layout) {
            // SAFETY: `ptr` came from `alloc`, by GlobalAlloc's contract.
            unsafe { free(ptr) }
        }
    }

    #[global_allocator]
    static ALLOCATOR: Libc = Libc;

    #[panic_handler]
    fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
        core::arch::wasm32::unreachable()
    }
}
