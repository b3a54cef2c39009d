//! Blind the others: one tenant fills its namespace with pods so large
//! that a page of the cluster's pod list passes the bound of one answer
//! and the namespace passes its share of the list; the pod evidence of
//! another tenant is untouched (docs/evidence.md, "The host inventory").
//! And a restart of some of a pod's containers is never read as its
//! restic's restart when restic runs in a native sidecar.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use lockwarden::limits::{KUBERNETES_NAMESPACE_LIST, KUBERNETES_RESPONSE};
use lockwarden_tests::discovery::{discover_config, pod_in, stop, wait_for, watch};
use lockwarden_tests::fake_rest::{FakeRest, Reply};
use lockwarden_tests::guard::Guarded;
use lockwarden_tests::kube_emulator::KubeEmulator;
use lockwarden_tests::lock_writer::{LockSpec, LockWriter, time_from_now};
use lockwarden_tests::restic::{PASSWORD, TestRepo};
use serde_json::{Value, json};

use super::{TENANT_A, TENANT_B};

/// Where a third tenant runs a pod named after one of tenant A's.
const TENANT_C: &str = "tenant-c";

/// The size of one fat pod: under the emulator's bound on a request (1
/// MiB; the API's is 1.5 MiB), so that it can be created.
const FAT: usize = 900 * 1024;

/// The fat pods: over the namespace's share of a list, and over what one
/// answer may hold, so that a page of 500 must be asked again smaller.
const FAT_PODS: usize = KUBERNETES_NAMESPACE_LIST / FAT + 2;
const _: () = assert!(
    FAT_PODS * FAT > KUBERNETES_RESPONSE,
    "one page must be too large"
);

/// Tenant A's mover pod that runs.
const LIVE: &str = "volsync-src-data-7f9c4";
/// A mover pod of tenant A that is gone.
const GONE: &str = "volsync-src-data-x2b8q";

/// Tenant A's VolSync ReplicationSource `data`, its Secret naming the
/// repository served by `server`.
fn volsync(server: &FakeRest) -> Value {
    json!([
        {"apiVersion": "v1", "kind": "Secret",
         "metadata": {"name": "data-restic", "namespace": TENANT_A},
         "stringData": {"RESTIC_REPOSITORY": server.location, "RESTIC_PASSWORD": PASSWORD}},
        {"apiVersion": "volsync.backube/v1alpha1", "kind": "ReplicationSource",
         "metadata": {"name": "data", "namespace": TENANT_A},
         "spec": {"sourcePVC": "data", "restic": {"repository": "data-restic"}}},
    ])
}

/// A running pod `name` of [`TENANT_B`] of about [`FAT`] bytes (an
/// environment variable's value; the API holds objects up to 1.5 MiB).
fn fat_pod(name: &str) -> Value {
    let mut pod = pod_in(TENANT_B, name);
    pod["spec"]["containers"][0]["env"] = json!([{"name": "PAD", "value": "x".repeat(FAT)}]);
    pod
}

/// The pod lists asked of `kube` so far.
fn pod_lists(kube: &KubeEmulator) -> Vec<String> {
    kube.requests()
        .into_iter()
        .filter(|r| r.path == "/api/v1/pods")
        .map(|r| r.query)
        .collect()
}

/// Tenant A's repository, served over REST, with a lock of the gone pod
/// and one of the live pod.
struct TenantA {
    repo: TestRepo,
    server: FakeRest,
    /// The listings of `locks/` so far: one a check.
    checks: Arc<AtomicUsize>,
    gone: String,
    kept: String,
}

/// Waits until the gone pod's lock is removed and the check that removed
/// it has ended (the next one listed the locks: one repository's checks
/// follow one another); then stops `watch`, its log.
fn cleaned(watch: Guarded, tenant: &TenantA) -> String {
    let watch = wait_for(watch, "the gone pod's lock is removed", || {
        !tenant.repo.lock_ids().contains(&tenant.gone)
    });
    let checks = tenant.checks.load(Ordering::SeqCst);
    let watch = wait_for(watch, "the next check", || {
        tenant.checks.load(Ordering::SeqCst) > checks
    });
    stop(watch)
}

/// Tenant A's repository with the lock of the gone pod and one of [`LIVE`]
/// written `live_age` seconds ago.
fn tenant_a(live_age: i64) -> TenantA {
    let repo = TestRepo::init_local();
    let checks = Arc::new(AtomicUsize::new(0));
    let counted = checks.clone();
    let server = FakeRest::start(&repo.path, move |method, path| {
        if method == "GET" && path == "locks/" {
            counted.fetch_add(1, Ordering::SeqCst);
        }
        Reply::Default
    });
    let writer = LockWriter::new(&repo);
    let gone = writer.write(LockSpec {
        hostname: GONE,
        ..LockSpec::default()
    });
    let kept = writer.write(LockSpec {
        hostname: LIVE,
        time: time_from_now(-live_age),
        ..LockSpec::default()
    });
    TenantA {
        repo,
        server,
        checks,
        gone,
        kept,
    }
}

/// `watch` over `kube` for VolSync, in `dir`.
fn watching(dir: &Path, kube: &KubeEmulator) -> Guarded {
    let kubeconfig = kube.write_kubeconfig(dir);
    watch(dir, &discover_config(dir, ""), &kubeconfig, "lockwarden-0")
}

/// Tenant B's fat pods fail its own namespace of the cluster-wide pod list
/// (the pod watch's), not the list, and A's checks list A's namespace
/// alone: tenant A's gone pod's lock is removed and its running pod's lock
/// kept. Tenant C's running pod named as A's gone one does not answer for
/// A's lock (A's inventory is scoped to A's namespace).
#[test]
fn a_namespace_of_fat_pods_blinds_only_itself() {
    let tenant = tenant_a(60);
    let kube = KubeEmulator::start(&[]);
    kube.apply(volsync(&tenant.server));
    kube.apply(pod_in(TENANT_A, LIVE));
    kube.apply(pod_in(TENANT_C, GONE));
    for i in 0..FAT_PODS {
        // One at a time: the emulator answers with what it stored.
        kube.apply(fat_pod(&format!("volsync-src-fat-{i:05}")));
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let watch = watching(dir.path(), &kube);
    let log = cleaned(watch, &tenant);
    assert!(
        tenant.repo.lock_ids().contains(&tenant.kept),
        "the running pod's lock was removed:\n{log}"
    );
    let lists = pod_lists(&kube);
    assert!(
        lists.iter().any(|q| !q.contains("limit=500")),
        "no page was asked again smaller: {lists:?}"
    );
    let own = format!("/api/v1/namespaces/{TENANT_A}/pods");
    assert!(
        kube.requests().iter().any(|r| r.path == own),
        "A's checks did not list A's pods alone"
    );
}

/// restic runs in a native sidecar (an init container with `restartPolicy:
/// Always`) since before its lock; the pod's main container restarted
/// after it: the lock is kept (and the gone pod's removed).
#[test]
fn a_restarted_main_container_does_not_end_a_sidecars_restic() {
    let tenant = tenant_a(120);
    let kube = KubeEmulator::start(&[]);
    kube.apply(volsync(&tenant.server));
    let mut pod = pod_in(TENANT_A, LIVE);
    pod["spec"]["initContainers"] =
        json!([{"name": "restic", "image": "restic", "restartPolicy": "Always"}]);
    pod["spec"]["containers"] = json!([{"name": "app", "image": "app"}]);
    let started = pod["status"]["startTime"].clone();
    pod["status"]["initContainerStatuses"] =
        json!([{"name": "restic", "state": {"running": {"startedAt": started}}}]);
    pod["status"]["containerStatuses"] =
        json!([{"name": "app", "state": {"running": {"startedAt": time_from_now(-30)}}}]);
    kube.apply(pod);
    let dir = tempfile::tempdir().expect("temp dir");
    let watch = watching(dir.path(), &kube);
    let log = cleaned(watch, &tenant);
    assert!(
        tenant.repo.lock_ids().contains(&tenant.kept),
        "the sidecar's restic lost its lock:\n{log}"
    );
}
