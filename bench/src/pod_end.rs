//! From a pod's end to its lock's removal (issue "Seconds"), on the real
//! API server: `watch` with one repository per operator's pod names
//! (`hosts_kubernetes`, a 5-minute interval, so only the pod watch can
//! make it fast), rounds in which each operator's pod takes a lock and is
//! then deleted, or set Failed; a live holder's lock beside each, kept
//! every time. Then the cost: the API requests `watch` makes while 1,000
//! job pods churn, read from the API server's own request counter.

use std::time::{Duration, Instant};

use lockwarden::watch::discover::Operator;
use lockwarden_tests::guard::Guarded;
use lockwarden_tests::kube_apiserver::{KUBE_ADMIN_TOKEN, KubeApiServer};
use lockwarden_tests::lock_writer::{LockSpec, LockWriter, time_from_now};
use lockwarden_tests::metrics::scrape_until;
use lockwarden_tests::restic::{TestRepo, free_port};
use serde_json::{Value, json};

/// Trials of each end, for each operator.
const TRIALS: usize = 20;

/// A lock not removed within this long counts as missed.
const GIVE_UP: Duration = Duration::from_secs(60);

/// Pods churned to measure the API load (BENCHMARKS.md says 1,000).
pub const CHURN: usize = 1_000;

/// One operator's pod names, measured.
pub struct Row {
    /// The operator.
    pub operator: &'static str,
    /// A pod name of the pattern, as used.
    pub example: String,
    /// Pod deleted -> lock removed, each trial (`None`: missed).
    pub deleted: Vec<Option<Duration>>,
    /// Pod set Failed -> lock removed.
    pub failed: Vec<Option<Duration>>,
}

/// The whole measurement.
pub struct PodEnd {
    /// One row per operator with a pod pattern.
    pub rows: Vec<Row>,
    /// Whether every live holder's lock was kept through every trial.
    pub live_kept: bool,
    /// While [`CHURN`] job pods were deleted and made again for a minute:
    /// pod LISTs and WATCHes `watch` made, per minute, and its checks.
    pub churn: Churn,
}

/// The API load of one minute of churn.
pub struct Churn {
    /// Pods deleted and made again in the minute.
    pub pod_ends: usize,
    /// LIST requests for pods (all of them `watch`'s).
    pub lists: f64,
    /// WATCH requests for pods.
    pub watches: f64,
    /// Checks `watch` ran.
    pub checks: u64,
}

/// A pod name of `operator`'s pattern, with Kubernetes' random suffix.
fn pod_name(operator: Operator, n: usize) -> String {
    const SUFFIX: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    // n in base 27, five digits: a name of its own for each n.
    let suffix: String = (0..5u32)
        .map(|i| SUFFIX[n / SUFFIX.len().pow(i) % SUFFIX.len()] as char)
        .collect();
    match operator {
        Operator::Velero => format!("node-agent-{suffix}"),
        Operator::Stash => format!("stash-backup-app-{n}-{suffix}"),
        Operator::K8up => format!("backup-nightly-{n}-{suffix}"),
        Operator::VolSync => format!("volsync-src-db-{n}-{suffix}"),
        Operator::KubeStash => format!("kubestash-{suffix}"),
    }
}

/// The operators with a pod pattern.
fn operators() -> Vec<Operator> {
    (Operator::ALL.into_iter())
        .filter(|o| o.pods().is_some())
        .collect()
}

/// A new namespace with the service account its pods run as (no
/// controller makes one on this API server).
fn pod_namespace(server: &KubeApiServer, prefix: &str) -> String {
    let namespace = server.new_namespace(prefix);
    server.admin_apply(&json!({"apiVersion": "v1", "kind": "ServiceAccount",
                               "metadata": {"name": "default", "namespace": namespace}}));
    namespace
}

fn pod(namespace: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": namespace},
           "spec": {"automountServiceAccountToken": false,
                    "containers": [{"name": "restic", "image": "restic/restic:0.18.1"}]}})
}

/// Measures it all.
pub fn measure() -> PodEnd {
    let server = KubeApiServer::shared();
    let namespace = pod_namespace(server, "bench");
    let repos: Vec<(Operator, TestRepo)> = (operators().into_iter())
        .map(|o| (o, TestRepo::init_local()))
        .collect();
    let dir = tempfile::tempdir().expect("temp dir");
    let addr = format!("127.0.0.1:{}", free_port());
    let watch = start_watch(server, dir.path(), &addr, &repos);
    let mut live = Vec::new();
    for (i, (operator, repo)) in repos.iter().enumerate() {
        let name = pod_name(*operator, 900 + i);
        server.admin_apply(&pod(&namespace, &name));
        live.push(hold(repo, &name));
    }
    let mut rows: Vec<Row> = (repos.iter())
        .map(|(o, _)| Row {
            operator: o.name(),
            example: pod_name(*o, 1),
            deleted: Vec::new(),
            failed: Vec::new(),
        })
        .collect();
    for trial in 0..TRIALS * 2 {
        let failing = trial % 2 == 1;
        let times = round(server, &namespace, &repos, trial, failing);
        for (row, time) in rows.iter_mut().zip(times) {
            if failing {
                &mut row.failed
            } else {
                &mut row.deleted
            }
            .push(time);
        }
    }
    let live_kept = (repos.iter().zip(&live)).all(|((_, repo), id)| repo.lock_ids().contains(id));
    let churn = churn(server, &addr);
    watch.signal("TERM");
    watch.finish_within(Duration::from_secs(20), "watch after SIGTERM");
    PodEnd {
        rows,
        live_kept,
        churn,
    }
}

/// `watch` over `repos`, each with its operator's pod names as evidence.
fn start_watch(
    server: &KubeApiServer,
    dir: &std::path::Path,
    addr: &str,
    repos: &[(Operator, TestRepo)],
) -> Guarded {
    let mut config = format!(
        "metrics_addr = \"{addr}\"\nstate_dir = \"{}\"\n",
        dir.join("state").display()
    );
    for (operator, repo) in repos {
        let pods = operator.pods().expect("a pattern").replace('\\', "\\\\");
        config += &format!(
            "\n[[repository]]\nname = \"{}\"\nrepository = \"{}\"\npassword_file = \"{}\"\n\
             interval = \"5m\"\nevidence = {{ hosts_kubernetes = true, inventory_hosts = \"{pods}\" }}\n",
            operator.name(),
            repo.location,
            repo.password_file().display()
        );
    }
    let path = dir.join("watch.toml");
    std::fs::write(&path, config).expect("write watch.toml");
    let kubeconfig = server.kubeconfig(dir, KUBE_ADMIN_TOKEN);
    let watch = Guarded::spawn(
        lockwarden_tests::lockwarden(&dir.join("cache"))
            .args(["watch", "--config"])
            .arg(&path)
            .env("KUBECONFIG", &kubeconfig)
            .env_remove("KUBERNETES_SERVICE_HOST"),
    );
    scrape_until(addr, |m| {
        repos.iter().all(|(o, _)| {
            m.contains(&format!(
                "lockwarden_check_duration_seconds_count{{repository=\"{}\"}}",
                o.name()
            ))
        })
    });
    watch
}

/// A lock of `hostname` in `repo`, written a few seconds ago; its id.
fn hold(repo: &TestRepo, hostname: &str) -> String {
    LockWriter::new(repo).write(LockSpec {
        hostname,
        time: time_from_now(-5),
        ..LockSpec::default()
    })
}

/// One trial for every operator at once: its pod is made and takes a
/// lock, then ends (deleted, or Failed); how long each lock outlived its
/// pod's end.
fn round(
    server: &KubeApiServer,
    namespace: &str,
    repos: &[(Operator, TestRepo)],
    trial: usize,
    failing: bool,
) -> Vec<Option<Duration>> {
    let mut held = Vec::new();
    for (operator, repo) in repos {
        let name = pod_name(*operator, trial);
        server.admin_apply(&pod(namespace, &name));
        held.push((name.clone(), repo, hold(repo, &name)));
    }
    let mut ended = Vec::new();
    for (name, repo, id) in &held {
        let path = format!("/api/v1/namespaces/{namespace}/pods/{name}");
        let at = Instant::now();
        let (status, body) = if failing {
            let failed = json!({"status": {"phase": "Failed"}});
            server.call(
                KUBE_ADMIN_TOKEN,
                "PATCH",
                &format!("{path}/status"),
                Some(&failed),
            )
        } else {
            server.admin_delete(&format!("{path}?gracePeriodSeconds=0"))
        };
        assert_eq!(status, 200, "ending {name}: {body}");
        ended.push((at, repo.path.join("locks").join(id)));
    }
    let times = ended
        .iter()
        .map(|(at, file)| {
            while file.exists() && at.elapsed() < GIVE_UP {
                std::thread::sleep(Duration::from_millis(10));
            }
            (!file.exists()).then(|| at.elapsed())
        })
        .collect();
    if failing {
        for (name, _, _) in &held {
            let path = format!("/api/v1/namespaces/{namespace}/pods/{name}?gracePeriodSeconds=0");
            server.admin_delete(&path);
        }
    }
    times
}

/// The API server's count of pod requests by verb, summed.
fn pod_requests(server: &KubeApiServer, verb: &str) -> f64 {
    let (_, metrics) = server.admin_get("/metrics");
    let text = metrics.as_str().unwrap_or_default();
    let wanted = [format!("verb=\"{verb}\""), "resource=\"pods\"".to_owned()];
    (text.lines())
        .filter(|l| l.starts_with("apiserver_request_total{"))
        .filter(|l| wanted.iter().all(|w| l.contains(w.as_str())))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// `watch`'s checks so far, from its metrics.
fn checks(addr: &str) -> u64 {
    let text = scrape_until(addr, |m| {
        m.contains("lockwarden_check_duration_seconds_count")
    });
    (text.lines())
        .filter(|l| l.starts_with("lockwarden_check_duration_seconds_count"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|n| n as u64)
        .sum()
}

/// [`CHURN`] K8up-named job pods made, then for a minute deleted and made
/// again one by one: the pod requests `watch` made meanwhile.
fn churn(server: &KubeApiServer, addr: &str) -> Churn {
    let namespace = pod_namespace(server, "churn");
    let names: Vec<String> = (0..CHURN)
        .map(|i| pod_name(Operator::K8up, 10_000 + i))
        .collect();
    for name in &names {
        server.admin_apply(&pod(&namespace, name));
    }
    let (lists, watches, checks_before) = (
        pod_requests(server, "LIST"),
        pod_requests(server, "WATCH"),
        checks(addr),
    );
    let started = Instant::now();
    let mut pod_ends = 0;
    'minute: loop {
        for name in &names {
            if started.elapsed() >= Duration::from_secs(60) {
                break 'minute;
            }
            let path = format!("/api/v1/namespaces/{namespace}/pods/{name}?gracePeriodSeconds=0");
            server.admin_delete(&path);
            server.admin_apply(&pod(&namespace, name));
            pod_ends += 1;
        }
    }
    let minutes = started.elapsed().as_secs_f64() / 60.0;
    Churn {
        pod_ends,
        lists: (pod_requests(server, "LIST") - lists) / minutes,
        watches: (pod_requests(server, "WATCH") - watches) / minutes,
        checks: checks(addr) - checks_before,
    }
}

/// The `q` quantile (0..=1) of the measured times, nearest rank; `None`
/// when there are none.
pub fn quantile(times: &[Option<Duration>], q: f64) -> Option<Duration> {
    let mut got: Vec<Duration> = times.iter().flatten().copied().collect();
    got.sort();
    let rank = ((q * got.len() as f64).ceil() as usize).clamp(1, got.len().max(1));
    got.get(rank - 1).copied()
}
