//! The plugin runtime: one wasmtime engine, an `InstancePre` per policy, a
//! fresh `Store` per evaluation, an epoch deadline and a memory cap on every
//! call, and verdicts checked before anyone acts on them.

mod cache;
mod error;
pub mod log;
mod sandbox;
mod source;
mod ticker;
mod verdicts;

use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::Component;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, Trap};

pub use cache::ArtifactCache;
pub use error::PluginError;
pub use log::{LogLevel, LogLine};
pub use source::{LoadError, PolicySource, SourceError};
pub use verdicts::{Subject, Verdicts, check_unique_ids, validate};

use crate::contract::{self, EvaluateRequest, PolicyInfo, PolicyVerdicts, v0_1};
use crate::evidence::{Evidence, Recorded};
use sandbox::{FORBIDDEN_IMPORTS, HostState};
use ticker::{EPOCH_TICK, Ticker};

/// The default policy, built from `plugin/` and embedded at compile time.
pub const DEFAULT_POLICY: &[u8] = include_bytes!(env!("LOCKWARDEN_DEFAULT_POLICY"));

/// How many policy instances may exist at once (one per running evaluation).
const POOL_SLOTS: u32 = 128;

/// The hard limits every policy call runs under.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// How long one call (instantiation, `info` or `evaluate`) may run.
    pub deadline: Duration,
    /// How large the policy's memory may grow, in bytes.
    pub memory: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            deadline: Duration::from_secs(1),
            memory: 64 << 20,
        }
    }
}

/// Runs policies. Cheap to share; one per process is enough.
pub struct Runtime {
    engine: Engine,
    linker: wasmtime::component::Linker<HostState>,
    cache: Option<ArtifactCache>,
    limits: Limits,
    ticker: Arc<Ticker>,
}

/// A loaded policy, ready to evaluate any number of times.
pub struct Policy {
    source: String,
    info: PolicyInfo,
    pre: Pre,
}

/// A policy linked and ready to instantiate, by the contract it implements.
enum Pre {
    /// The current contract.
    Current(contract::StaleLockPolicyPre<HostState>),
    /// Contract 0.1.0.
    V0_1(v0_1::StaleLockPolicyPre<HostState>),
}

/// What one evaluation produced.
#[derive(Debug)]
pub struct Outcome {
    /// One verdict per lock and unreadable file of the request, in its order,
    /// checked ([`Verdicts::pair`] puts them beside their inputs).
    pub verdicts: PolicyVerdicts,
    /// What the policy logged.
    pub logs: Vec<LogLine>,
}

impl Runtime {
    /// A runtime with the given limits, caching compiled policies in `cache`.
    pub fn new(limits: Limits, cache: Option<ArtifactCache>) -> wasmtime::Result<Runtime> {
        let mut config = Config::new();
        config.epoch_interruption(true);
        config.wasm_component_model(true);
        // Instances come from a pool of reusable slots: a fresh store per
        // evaluation then costs microseconds, not an mmap and munmap of a
        // linear memory each time. The pool caps concurrent evaluations at
        // POOL_SLOTS; an evaluation beyond that fails (and removes nothing).
        let mut pool = PoolingAllocationConfig::new();
        pool.total_component_instances(POOL_SLOTS)
            .total_core_instances(POOL_SLOTS * 8)
            .total_memories(POOL_SLOTS)
            .total_tables(POOL_SLOTS * 8)
            .max_memory_size(limits.memory)
            .linear_memory_keep_resident(256 << 10);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&config)?;
        let ticker = Ticker::start(&engine);
        let linker = sandbox::linker(&engine)?;
        Ok(Runtime {
            ticker,
            engine,
            linker,
            cache,
            limits,
        })
    }

    /// The limits calls run under.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Loads the embedded default policy.
    pub fn load_default(&self) -> Result<Policy, PluginError> {
        self.load("(built-in default policy)", DEFAULT_POLICY)
    }

    /// Loads a policy component from `bytes`; `source` names it in messages.
    /// Refuses components of another contract version and components that
    /// import anything the sandbox does not provide.
    pub fn load(&self, source: &str, bytes: &[u8]) -> Result<Policy, PluginError> {
        let component = self.compile(source, bytes)?;
        let version = self.check_interfaces(source, &component)?;
        let link = |cause| PluginError::Link {
            source_name: source.to_owned(),
            cause,
        };
        let instance_pre = self.linker.instantiate_pre(&component).map_err(link)?;
        let pre = match version {
            Version::Current => {
                Pre::Current(contract::StaleLockPolicyPre::new(instance_pre).map_err(link)?)
            }
            Version::V0_1 => Pre::V0_1(v0_1::StaleLockPolicyPre::new(instance_pre).map_err(link)?),
        };

        let mut store = self.store(0, Arc::new(Recorded::new(None)));
        let info = match &pre {
            Pre::Current(pre) => pre.instantiate(&mut store).and_then(|policy| {
                store.set_epoch_deadline(self.deadline_ticks());
                policy.lockwarden_policy_policy().call_info(&mut store)
            }),
            Pre::V0_1(pre) => pre.instantiate(&mut store).and_then(|policy| {
                store.set_epoch_deadline(self.deadline_ticks());
                let info = policy.lockwarden_policy_policy().call_info(&mut store)?;
                Ok(v0_1::info(info))
            }),
        }
        .map_err(|e| classify(source, &store, self.limits, e))?;
        Ok(Policy {
            source: source.to_owned(),
            info,
            pre,
        })
    }

    /// Runs `policy` on `request` with the clock reading `now` and `evidence`,
    /// in a fresh store, and checks the verdicts. Any failure is an error and
    /// means nothing may be removed; the runtime stays usable.
    pub fn evaluate(
        &self,
        policy: &Policy,
        now: i64,
        evidence: Arc<dyn Evidence>,
        request: &EvaluateRequest,
    ) -> Result<Outcome, PluginError> {
        let name = policy.info.name.as_str();
        if let Pre::V0_1(_) = policy.pre {
            // 0.1.0 verdicts name their input by id, so ids must be unique;
            // 0.2.0 verdicts follow the request's order and need no lookup.
            check_unique_ids(request).map_err(|problem| PluginError::BadRequest { problem })?;
        }
        let bad_verdicts = |problem| PluginError::BadVerdicts {
            policy: name.to_owned(),
            problem,
        };
        let mut store = self.store(now, evidence);
        store.data_mut().limit_questions(request.locks.len());
        let result = match &policy.pre {
            Pre::Current(pre) => pre.instantiate(&mut store).and_then(|instance| {
                store.set_epoch_deadline(self.deadline_ticks());
                instance
                    .lockwarden_policy_policy()
                    .call_evaluate(&mut store, request)
                    .map(|answer| answer.map(Ok))
            }),
            Pre::V0_1(pre) => pre.instantiate(&mut store).and_then(|instance| {
                store.set_epoch_deadline(self.deadline_ticks());
                let answer = instance
                    .lockwarden_policy_policy()
                    .call_evaluate(&mut store, &v0_1::request(request))?;
                Ok(match answer {
                    Ok(verdicts) => Ok(v0_1::positional(request, verdicts)),
                    Err(error) => Err(v0_1::error(error)),
                })
            }),
        };
        let mut verdicts = match result {
            Err(e) => return Err(classify(name, &store, self.limits, e)),
            Ok(Err(mut error)) => {
                let (contract::PolicyError::InvalidSetting(message)
                | contract::PolicyError::Failed(message)) = &mut error;
                crate::text::cut(message, crate::limits::POLICY_REASON);
                return Err(PluginError::Refused {
                    policy: name.to_owned(),
                    error,
                });
            }
            Ok(Ok(verdicts)) => verdicts.map_err(bad_verdicts)?,
        };
        validate(request, now, &verdicts).map_err(bad_verdicts)?;
        verdicts::cut_reasons(&mut verdicts);
        Ok(Outcome {
            verdicts,
            logs: store.data_mut().take_logs(),
        })
    }

    /// Runs `policy` once on no locks with `settings`, so that a setting it
    /// refuses is found at start-up rather than at every check.
    pub fn check_settings(
        &self,
        policy: &Policy,
        repository: &str,
        settings: &[(String, String)],
    ) -> Result<(), PluginError> {
        let request = EvaluateRequest {
            repository: crate::contract::Repository {
                id: String::new(),
                location: repository.to_owned(),
                backend: String::new(),
                version: 2,
            },
            locks: Vec::new(),
            unreadable: Vec::new(),
            settings: settings.to_vec(),
        };
        let evidence = Arc::new(crate::evidence::Recorded::new(None));
        self.evaluate(policy, crate::time::now(), evidence, &request)
            .map(|_| ())
    }

    fn store(&self, now: i64, evidence: Arc<dyn Evidence>) -> Store<HostState> {
        let mut store = Store::new(
            &self.engine,
            HostState::new(now, evidence, self.limits.memory, self.ticker.ticking()),
        );
        store.limiter(HostState::limiter);
        store.set_epoch_deadline(self.deadline_ticks());
        store
    }

    fn deadline_ticks(&self) -> u64 {
        let ticks = self.limits.deadline.as_millis() / EPOCH_TICK.as_millis();
        u64::try_from(ticks).unwrap_or(u64::MAX).max(1)
    }

    /// Compiles `bytes`, or loads the cached artifact.
    fn compile(&self, source: &str, bytes: &[u8]) -> Result<Component, PluginError> {
        if let Some(component) = self
            .cache
            .as_ref()
            .and_then(|c| c.load(&self.engine, bytes))
        {
            return Ok(component);
        }
        let compile_error = |cause| PluginError::Compile {
            source_name: source.to_owned(),
            cause,
        };
        let artifact = self
            .engine
            .precompile_component(bytes)
            .map_err(compile_error)?;
        if let Some(cache) = &self.cache {
            // A cache that cannot be written only costs time: compile again
            // next run.
            let _ = cache.store(&self.engine, bytes, &artifact);
        }
        #[allow(unsafe_code)]
        // SAFETY: `artifact` was produced just above by this engine's
        // `precompile_component` and never left this process.
        unsafe {
            Component::deserialize(&self.engine, &artifact).map_err(compile_error)
        }
    }

    /// Refuses a component built against a contract version this host does
    /// not run, or one that imports something the sandbox withholds, with a
    /// clear message; says which contract it implements.
    fn check_interfaces(
        &self,
        source: &str,
        component: &Component,
    ) -> Result<Version, PluginError> {
        let ty = component.component_type();
        let exports: Vec<String> = ty
            .exports(&self.engine)
            .map(|(n, _)| n.to_owned())
            .collect();
        let policy_export = exports
            .iter()
            .find_map(|name| name.strip_prefix("lockwarden:policy/policy"));
        let version = match policy_export {
            None => {
                return Err(PluginError::NotAPolicy {
                    source_name: source.to_owned(),
                    exports: if exports.is_empty() {
                        "nothing".to_owned()
                    } else {
                        exports.join(", ")
                    },
                });
            }
            Some(version) => {
                let found = version.trim_start_matches('@');
                if compatible(found, contract::VERSION) {
                    Version::Current
                } else if compatible(found, v0_1::VERSION) {
                    Version::V0_1
                } else {
                    return Err(PluginError::ContractMismatch {
                        source_name: source.to_owned(),
                        found: if found.is_empty() {
                            "(unversioned)"
                        } else {
                            found
                        }
                        .to_owned(),
                        supported: SUPPORTED,
                    });
                }
            }
        };
        let forbidden: Vec<String> = ty
            .imports(&self.engine)
            .map(|(name, _)| name)
            .filter(|name| FORBIDDEN_IMPORTS.iter().any(|p| name.starts_with(p)))
            .map(|name| format!("`{name}`"))
            .collect();
        if !forbidden.is_empty() {
            return Err(PluginError::ForbiddenImport {
                source_name: source.to_owned(),
                imports: forbidden.join(", "),
            });
        }
        Ok(version)
    }
}

/// The policy contract versions this host runs, newest first.
pub const CONTRACTS: [&str; 2] = [contract::VERSION, v0_1::VERSION];

/// The contract versions this host runs, for messages.
const SUPPORTED: &str = "0.2.x or 0.1.x";

/// Which contract a policy implements.
#[derive(Debug, Clone, Copy)]
enum Version {
    /// The current one, [`contract::VERSION`].
    Current,
    /// [`v0_1::VERSION`].
    V0_1,
}

impl Policy {
    /// Writes what this policy logged to the log, at its own levels.
    pub fn emit(&self, logs: &[LogLine]) {
        for line in logs {
            line.emit(&self.info.name);
        }
    }

    /// The contract version the policy implements, as its component
    /// declares it (the major and minor this host matched).
    pub fn contract(&self) -> &'static str {
        match self.pre {
            Pre::Current(_) => contract::VERSION,
            Pre::V0_1(_) => v0_1::VERSION,
        }
    }

    /// What the policy says about itself.
    pub fn info(&self) -> &PolicyInfo {
        &self.info
    }

    /// Where the policy was loaded from.
    pub fn source(&self) -> &str {
        &self.source
    }
}

/// Semver compatibility as the component model uses it: `0.x.*` matches
/// `0.x.*`, `N.*` matches `N.*` for N >= 1.
fn compatible(found: &str, supported: &str) -> bool {
    let key = |v: &str| -> Option<(u64, u64)> {
        let mut parts = v.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        Some(if major == 0 { (0, minor) } else { (major, 0) })
    };
    matches!((key(found), key(supported)), (Some(a), Some(b)) if a == b)
}

/// Turns a wasmtime error from a call into what the policy did.
fn classify(
    policy: &str,
    store: &Store<HostState>,
    limits: Limits,
    error: wasmtime::Error,
) -> PluginError {
    let policy = policy.to_owned();
    if let Some(asked) = store.data().memory_refused() {
        return PluginError::MemoryLimit {
            policy,
            limit: limits.memory,
            asked,
        };
    }
    let trap = error.downcast_ref::<Trap>();
    if trap == Some(&Trap::Interrupt) {
        return PluginError::Timeout {
            policy,
            limit_ms: u64::try_from(limits.deadline.as_millis()).unwrap_or(u64::MAX),
        };
    }
    let stderr = store.data().stderr();
    let stderr = stderr.trim();
    PluginError::Trap {
        policy,
        cause: trap.map_or_else(|| format!("{error:#}"), Trap::to_string),
        stderr: if stderr.is_empty() {
            String::new()
        } else {
            format!("; it wrote: {}", stderr.replace('\n', " | "))
        },
    }
}

#[cfg(test)]
mod tests {
    use super::compatible;

    #[test]
    fn contract_versions() {
        assert!(compatible("0.1.0", "0.1.0"));
        assert!(compatible("0.1.7", "0.1.0"));
        assert!(!compatible("0.2.0", "0.1.0"));
        assert!(compatible("0.2.3", "0.2.0"));
        assert!(!compatible("1.1.0", "0.1.0"));
        assert!(compatible("1.4.0", "1.0.0"));
        assert!(!compatible("", "0.1.0"));
    }
}
