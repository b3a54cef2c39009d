//! `watch` in discovery mode against the Kubernetes emulator
//! ([`crate::kube_emulator`]): its configuration, the process, and the
//! Events it posts. Shared by `tests/e2e/discover.rs` and the multi-tenant
//! suite (`tests/e2e/multi_tenant/`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::guard::Guarded;
use crate::kube_emulator::KubeEmulator;
use crate::lock_writer::time_from_now;
use crate::lockwarden;

/// How long a stopped `watch` may take before the test calls it hung.
const STOP_GUARD: Duration = Duration::from_secs(10);

/// How long something `watch` should do may take before the test gives
/// up: generous, not a timing assertion.
pub const CLEAN_GUARD: Duration = Duration::from_secs(60);

/// A watch.toml in `dir`: `extra` lines at the top level, then a
/// `[discover]` table with `discover` lines (the operators on, and any
/// other setting), reading objects and checking every second.
pub fn discover_config_with(dir: &Path, extra: &str, discover: &str) -> PathBuf {
    let path = dir.join("watch.toml");
    std::fs::write(
        &path,
        format!(
            "state_dir = \"{}\"\n{extra}\n[discover]\n{discover}\nevery = \"1s\"\ninterval = \"1s\"\ntimeout = \"10s\"\n",
            dir.join("state").display()
        ),
    )
    .expect("write config");
    path
}

/// A watch.toml in `dir` discovering VolSync's objects of `namespaces`,
/// serving metrics on `metrics_addr`, each repository checked every
/// `interval`, with `extra` lines in its `[discover]` table.
pub fn volsync_config(
    dir: &Path,
    metrics_addr: &str,
    namespaces: &[&str],
    interval: &str,
    extra: &str,
) -> PathBuf {
    let quoted: Vec<String> = namespaces.iter().map(|ns| format!("\"{ns}\"")).collect();
    let path = dir.join("watch.toml");
    std::fs::write(
        &path,
        format!(
            "state_dir = \"{}\"\nmetrics_addr = \"{metrics_addr}\"\n[discover]\nvolsync = true\n\
             namespaces = [{}]\nevery = \"1s\"\ninterval = \"{interval}\"\ntimeout = \"10s\"\n{extra}\n",
            dir.join("state").display(),
            quoted.join(", ")
        ),
    )
    .expect("write watch.toml");
    path
}

/// [`discover_config_with`] for VolSync alone.
pub fn discover_config(dir: &Path, extra: &str) -> PathBuf {
    discover_config_with(dir, extra, "volsync = true")
}

/// `watch --config` with `kubeconfig` and no other cluster, as pod
/// `pod_name` of namespace `lockwarden`.
pub fn watch(dir: &Path, config: &Path, kubeconfig: &Path, pod_name: &str) -> Guarded {
    Guarded::spawn(
        lockwarden(&dir.join("cache"))
            .args(["watch", "--config"])
            .arg(config)
            .env("KUBECONFIG", kubeconfig)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env("POD_NAMESPACE", "lockwarden")
            .env("POD_NAME", pod_name),
    )
}

/// Waits until `condition` holds; otherwise stops `watch` and panics with
/// its log, naming `what`.
pub fn wait_for(watch: Guarded, what: &str, mut condition: impl FnMut() -> bool) -> Guarded {
    let deadline = Instant::now() + CLEAN_GUARD;
    while !condition() {
        if Instant::now() > deadline {
            panic!("never happened: {what}; watch's log:\n{}", stop(watch));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    watch
}

/// Stops `watch` with SIGTERM; its log.
pub fn stop(watch: Guarded) -> String {
    watch.signal("TERM");
    let finished = watch.finish_within(STOP_GUARD, "watch after SIGTERM");
    finished.stderr
}

/// The Events in `namespace` on the object of `kind` named `name`.
pub fn events_on(kube: &KubeEmulator, namespace: &str, kind: &str, name: &str) -> Vec<Value> {
    kube.list(&format!("/api/v1/namespaces/{namespace}/events"))["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["involvedObject"]["name"] == name && e["involvedObject"]["kind"] == kind)
        .cloned()
        .collect()
}

/// The reasons of [`events_on`].
pub fn event_reasons(kube: &KubeEmulator, namespace: &str, kind: &str, name: &str) -> Vec<String> {
    events_on(kube, namespace, kind, name)
        .iter()
        .filter_map(|e| e["reason"].as_str().map(str::to_owned))
        .collect()
}

/// A running pod `name` in `namespace` with one container `restic`,
/// started an hour ago.
pub fn pod_in(namespace: &str, name: &str) -> Value {
    let started = time_from_now(-3600);
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": namespace},
           "spec": {"containers": [{"name": "restic", "image": "restic"}]},
           "status": {"phase": "Running", "startTime": started,
                      "containerStatuses": [{"name": "restic", "state": {"running": {"startedAt": started}}}]}})
}

/// A VolSync ReplicationSource `db` in `namespace` and its Secret
/// `db-restic`, naming `repo`, as one List to apply.
pub fn volsync_source(namespace: &str, repo: &crate::restic::TestRepo) -> Value {
    json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db-restic", "namespace": namespace},
         "stringData": volsync_secret_data(repo)},
        {"apiVersion": "volsync.backube/v1alpha1", "kind": "ReplicationSource",
         "metadata": {"name": "db", "namespace": namespace},
         "spec": {"sourcePVC": "db", "restic": {"repository": "db-restic"}}},
    ]})
}

/// The data of a VolSync repository Secret for `repo` (`stringData`): its
/// storage variables, `RESTIC_REPOSITORY` and `RESTIC_PASSWORD`.
pub fn volsync_secret_data(repo: &crate::restic::TestRepo) -> Value {
    let mut data: serde_json::Map<String, Value> = repo
        .env
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    data.insert("RESTIC_REPOSITORY".into(), json!(repo.location));
    data.insert("RESTIC_PASSWORD".into(), json!(crate::restic::PASSWORD));
    Value::Object(data)
}
