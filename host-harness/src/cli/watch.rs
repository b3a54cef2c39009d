//! `lockwarden watch --config FILE`: check many repositories periodically.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use lockwarden::first_seen::FirstSeenStore;
use lockwarden::kubernetes::Connection;
use lockwarden::repository_settings::Timeout;
use lockwarden::runtime::PolicySource;
use lockwarden::stop::Stop;
use lockwarden::watch::config::WatchConfig;
use lockwarden::watch::metrics::Metrics;
use lockwarden::watch::repository::Defaults;
use lockwarden::watch::{Shared, serve_metrics, start};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use super::evidence_args::EvidenceArgs;
use super::{Failure, Outcome, PolicyArgs};

/// How long `watch` waits for its checks to finish after SIGTERM.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

#[derive(Debug, Args)]
pub struct WatchArgs {
    /// The configuration file (TOML), e.g. examples/watch.toml.
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// Serve Prometheus metrics at http://ADDR/metrics (overrides the file's
    /// metrics_addr).
    #[arg(long, value_name = "ADDR")]
    metrics_addr: Option<String>,
    #[command(flatten)]
    evidence: EvidenceArgs,
    #[command(flatten)]
    policy: PolicyArgs,
    /// A shadow policy for every repository that names no shadow_policy:
    /// judges alongside the enforced one and never acts; disagreements are
    /// logged and counted. A component file (.wasm) or an oci:// reference.
    #[arg(long, value_name = "FILE|OCI")]
    shadow_policy: Option<PolicySource>,
}

pub fn run(args: &WatchArgs) -> Outcome<ExitCode> {
    // The evidence options, --policy and --shadow-policy of every repository
    // that names none of its own; the evidence options are checked now even
    // if every repository has its own.
    let defaults = Defaults {
        evidence: args.evidence.options.config(Timeout::DEFAULT.get())?,
        policy: args.policy.policy.clone(),
        shadow_policy: args.shadow_policy.clone(),
    };
    let config = WatchConfig::load(&args.config, &defaults)?;
    let most_repositories = config.repositories.len()
        + config
            .discover
            .as_ref()
            .map_or(0, |_| lockwarden::limits::DISCOVERED_REPOSITORIES);
    raise_open_files_limit(most_repositories);
    let state_dir = args
        .evidence
        .state_dir
        .clone()
        .or_else(|| config.state_dir.clone())
        .or_else(FirstSeenStore::default_dir)
        .ok_or_else(|| {
            Failure::usage("no state directory: pass --state-dir or set XDG_STATE_HOME or HOME")
        })?;
    let stop = Arc::new(Stop::default());
    let metrics = Arc::new(Metrics::new());
    let mut threads = Vec::new();
    // The one client of the process, handed to all that use the API; none
    // where nothing does.
    let kubernetes = Connection::when(uses_kubernetes(&config), Timeout::DEFAULT.get());
    let leader = match &config.leader {
        Some(entry) => {
            let (leader, thread) =
                entry.start(kubernetes.clone(), Timeout::DEFAULT.get(), stop.clone())?;
            threads.push(thread);
            Some(leader)
        }
        None => None,
    };
    let shared = Arc::new(Shared {
        runtime: Arc::new(args.policy.runtime()?),
        first_seen: FirstSeenStore::new(state_dir),
        metrics: metrics.clone(),
        stop: stop.clone(),
        registry: args.policy.registry(),
        leader,
        kubernetes,
    });
    if let Some(addr) = args.metrics_addr.as_ref().or(config.metrics_addr.as_ref()) {
        threads.push(serve_metrics(addr, metrics, stop.clone())?);
    }
    let mut signals = Signals::new([SIGINT, SIGTERM])
        .map_err(|e| Failure::failed(e).context("cannot install signal handlers"))?;
    let handle = signals.handle();
    threads.extend(start(config, shared)?);
    // Wait for SIGINT or SIGTERM, then stop every thread.
    if let Some(signal) = signals.forever().next() {
        tracing::info!("signal {signal}: stopping");
    }
    handle.close();
    stop.stop();
    // A password or hosts command still running goes with us.
    lockwarden::command::kill_all();
    // A repository stuck in a read or a command must not hold up the exit:
    // wait a moment for the threads, then leave (every removal is one
    // atomic delete, so stopping mid-check leaves nothing half done).
    let deadline = std::time::Instant::now() + SHUTDOWN_GRACE;
    while threads.iter().any(|t| !t.is_finished()) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    if threads.iter().any(|t| !t.is_finished()) {
        tracing::warn!("a repository check is still running; stopping without waiting for it");
    }
    Ok(ExitCode::SUCCESS)
}

/// Whether `config` uses the Kubernetes API: discovery, a leader's Lease,
/// or a repository whose evidence is the pods.
fn uses_kubernetes(config: &WatchConfig) -> bool {
    config.discover.is_some()
        || config.leader.is_some()
        || (config.repositories.iter()).any(|r| r.settings.evidence.reads_kubernetes())
}

/// Raises the soft limit on open files to the hard one, as every Go program
/// (restic among them) does at start: `watch` keeps a local repository's
/// directories open between checks (two descriptors each), and containers
/// often start with a soft limit of 1,024. Warns when even the hard limit
/// is short of that for `repositories`.
fn raise_open_files_limit(repositories: usize) {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let (Some(soft), Some(hard)) = (limit.current, limit.maximum) else {
        return;
    };
    let wanted = 2 * repositories as u64 + 256;
    if hard < wanted {
        tracing::warn!(
            "{repositories} repositories may need {wanted} open files and the limit is {hard}: \
             local repositories beyond it fail with \"no file descriptors available\"; \
             raise the limit (ulimit -n) or split the repositories between processes"
        );
    }
    if soft < hard {
        let raised = Rlimit {
            current: Some(hard),
            maximum: Some(hard),
        };
        if let Err(e) = setrlimit(Resource::Nofile, raised) {
            tracing::warn!("cannot raise the open files limit from {soft} to {hard}: {e}");
        }
    }
}
