//! What can go wrong with a policy, each said so that an operator knows what
//! the plugin did and what to do next.

use crate::contract::PolicyError;
use crate::error::{Classify, ErrorKind};

/// A policy could not be loaded, or an evaluation failed. Whenever this is
/// returned, nothing may be removed.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// The file is not a WebAssembly component wasmtime can compile.
    #[error(
        "cannot load policy {source_name}: {cause:#}; is it a WebAssembly component (docs/writing-a-policy.md says how to build one)?"
    )]
    Compile {
        /// Where the policy came from.
        source_name: String,
        /// wasmtime's complaint.
        cause: wasmtime::Error,
    },
    /// The component does not export the policy interface at all.
    #[error(
        "cannot load policy {source_name}: it does not export lockwarden:policy/policy (it exports {exports}); is it a lockwarden policy?"
    )]
    NotAPolicy {
        /// Where the policy came from.
        source_name: String,
        /// What it does export.
        exports: String,
    },
    /// The component was built against another contract version.
    #[error(
        "cannot load policy {source_name}: it implements contract lockwarden:policy@{found}, but this lockwarden runs lockwarden:policy {supported}; rebuild the policy against wit/ of this lockwarden, or use a lockwarden that supports @{found}"
    )]
    ContractMismatch {
        /// Where the policy came from.
        source_name: String,
        /// The version the policy was built against.
        found: String,
        /// The version this host implements.
        supported: &'static str,
    },
    /// The component imports an interface the sandbox refuses to provide.
    #[error(
        "cannot load policy {source_name}: it imports {imports}, which lockwarden does not provide: a policy gets the time only through lockwarden:policy/clock and may not use files, the environment, WASI clocks, randomness or sockets"
    )]
    ForbiddenImport {
        /// Where the policy came from.
        source_name: String,
        /// The refused imports, quoted and comma-separated.
        imports: String,
    },
    /// Linking or instantiating failed for another reason.
    #[error("cannot load policy {source_name}: {cause:#}")]
    Link {
        /// Where the policy came from.
        source_name: String,
        /// wasmtime's complaint.
        cause: wasmtime::Error,
    },
    /// The call ran past its deadline.
    #[error("policy {policy} did not finish within {limit_ms} ms and was stopped")]
    Timeout {
        /// The policy's name.
        policy: String,
        /// The deadline.
        limit_ms: u64,
    },
    /// The policy asked for more memory than allowed.
    #[error(
        "policy {policy} tried to grow its memory to {asked} bytes, over the limit of {limit} bytes, and was stopped"
    )]
    MemoryLimit {
        /// The policy's name.
        policy: String,
        /// The limit in bytes.
        limit: usize,
        /// What it asked for.
        asked: usize,
    },
    /// The policy trapped (panicked, hit `unreachable`, ...).
    #[error("policy {policy} crashed ({cause}){stderr}")]
    Trap {
        /// The policy's name.
        policy: String,
        /// The trap or error wasmtime reported.
        cause: String,
        /// What the policy wrote to stderr, prefixed for display, or empty.
        stderr: String,
    },
    /// The policy refused the request, e.g. over a bad setting.
    #[error("policy {policy} refused the request: {}", describe(.error))]
    Refused {
        /// The policy's name.
        policy: String,
        /// What it said.
        error: PolicyError,
    },
    /// The request itself cannot be evaluated (e.g. an id appears twice).
    #[error("cannot evaluate: {problem}")]
    BadRequest {
        /// What is wrong with it.
        problem: String,
    },
    /// The verdicts do not cover the input exactly once.
    #[error("policy {policy} returned bad verdicts: {problem}")]
    BadVerdicts {
        /// The policy's name.
        policy: String,
        /// What is wrong with them.
        problem: String,
    },
}

fn describe(error: &PolicyError) -> String {
    match error {
        PolicyError::InvalidSetting(m) => format!("invalid setting: {m}"),
        PolicyError::Failed(m) => m.clone(),
    }
}

impl PluginError {
    /// True when the user's input (a setting) is at fault, not the plugin:
    /// its kind is [`ErrorKind::Usage`].
    pub fn is_usage(&self) -> bool {
        self.kind() == ErrorKind::Usage
    }
}

/// A setting the policy refuses as invalid is the user's to fix; every
/// other failure of a policy is not.
impl Classify for PluginError {
    fn kind(&self) -> ErrorKind {
        match self {
            PluginError::Refused {
                error: PolicyError::InvalidSetting(_),
                ..
            } => ErrorKind::Usage,
            PluginError::Refused {
                error: PolicyError::Failed(_),
                ..
            }
            | PluginError::Compile { .. }
            | PluginError::NotAPolicy { .. }
            | PluginError::ContractMismatch { .. }
            | PluginError::ForbiddenImport { .. }
            | PluginError::Link { .. }
            | PluginError::Timeout { .. }
            | PluginError::MemoryLimit { .. }
            | PluginError::Trap { .. }
            | PluginError::BadRequest { .. }
            | PluginError::BadVerdicts { .. } => ErrorKind::Failed,
        }
    }
}
