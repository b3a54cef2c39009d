//! How a command finds, limits and loads its policy (`--policy` and its
//! limits, `--set`), shared by every command that evaluates.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use lockwarden::oci::Registry;
use lockwarden::runtime::{ArtifactCache, Limits, Policy, PolicySource, Runtime};

use super::{Failure, Outcome, parse_duration};

/// How to find and run a policy; shared by every command that evaluates.
#[derive(Debug, Args)]
pub struct PolicyArgs {
    /// A policy to use instead of the built-in default: a component file
    /// (.wasm), or oci://HOST/REPO:TAG or oci://HOST/REPO@sha256:DIGEST.
    #[arg(long, value_name = "FILE|OCI")]
    pub policy: Option<PolicySource>,
    /// How long one policy call may run before it is stopped.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    policy_timeout: Duration,
    /// How large the policy's memory may grow, in MiB.
    #[arg(long, value_name = "MIB", default_value_t = 64)]
    policy_memory: usize,
    /// Where compiled policies are cached [default: $XDG_CACHE_HOME/lockwarden
    /// or ~/.cache/lockwarden].
    #[arg(long, value_name = "DIR", env = "LOCKWARDEN_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
    /// Compile the policy every time instead of caching it, and fetch
    /// pulled policies again.
    #[arg(long)]
    no_cache: bool,
    /// Speak plain HTTP to the policy's registry; only for registries on
    /// this machine (127.0.0.1, ::1, localhost).
    #[arg(long)]
    insecure_registry: bool,
}

impl PolicyArgs {
    /// Starts a runtime and loads the chosen policy.
    pub fn load(&self) -> Outcome<(Runtime, Policy)> {
        let runtime = self.runtime()?;
        let policy = runtime.load_from(&self.source(), &self.registry())?;
        Ok((runtime, policy))
    }

    /// The chosen policy: `--policy`, else the built-in one.
    pub fn source(&self) -> PolicySource {
        self.policy.clone().unwrap_or(PolicySource::Builtin)
    }

    /// The cache directory, unless caching is off.
    pub fn cache_dir(&self) -> Option<PathBuf> {
        if self.no_cache {
            None
        } else {
            self.cache_dir.clone().or_else(ArtifactCache::default_dir)
        }
    }

    /// Where OCI policies come from, storing pulls beside the compiled ones.
    pub fn registry(&self) -> Registry {
        Registry::new(self.insecure_registry, self.cache_dir())
    }

    /// Starts a runtime with these limits and this cache.
    pub fn runtime(&self) -> Outcome<Runtime> {
        let cache = self.cache_dir().map(ArtifactCache::new);
        let limits = Limits {
            deadline: self.policy_timeout,
            memory: self.policy_memory.saturating_mul(1 << 20),
        };
        Runtime::new(limits, cache).map_err(engine_failed)
    }
}

/// Why the WebAssembly engine could not start.
pub fn engine_failed(e: impl std::fmt::Display) -> Failure {
    Failure::failed(anyhow::anyhow!(
        "cannot start the WebAssembly engine: {e:#}"
    ))
}

/// Parses one `KEY=VALUE` policy setting (`--set`, `--shadow-set`).
pub fn parse_setting(text: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .filter(|(k, _)| !k.is_empty())
        .ok_or_else(|| format!("`{text}` is not KEY=VALUE"))
}
