//! A dead holder's lock removed when its pod ends, not at the next check
//! (issue "Seconds"), on the real API server: `watch` follows the pods, and
//! the end of a pod whose lock a repository kept checks that repository at
//! once, where the job operators' normal state is "no pod of that pattern".

use lockwarden_tests::cloud::Store;
use lockwarden_tests::discovery::{self, stop, wait_for};
use lockwarden_tests::kube_apiserver::{KUBE_ADMIN_TOKEN, KubeApiServer};
use lockwarden_tests::lock_writer::{LockSpec, LockWriter, time_from_now};
use lockwarden_tests::metrics::scrape_until;
use lockwarden_tests::restic::free_port;
use serde_json::json;

/// A VolSync mover pod holds a lock, the only pod of its pattern; its
/// repository is checked every 5 minutes. Once the first check has kept
/// that lock (the pod exists), the pod is deleted: the lock is removed
/// long before the next check, by the rule that a pod lockwarden saw in
/// the namespace is gone; so is the lock of a mover that started and was
/// killed between two checks. A lock naming a mover pod lockwarden never
/// saw, read by that same check, is kept: with no pod of the pattern left,
/// its absence proves nothing.
#[test]
fn a_deleted_mover_pods_lock_goes_at_once_and_a_never_seen_ones_stays() {
    let server = KubeApiServer::shared();
    server.admin_apply(&lockwarden_tests::operator_crds::all());
    let tenant = server.new_namespace("movers");
    let bucket = Store::S3.new_bucket();
    let repo = bucket.init_repo("db");
    let writer = LockWriter::new(&repo);
    let holder = "volsync-src-db-x2b8q";
    server.admin_apply(&json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db-restic", "namespace": tenant},
         "stringData": discovery::volsync_secret_data(&repo)},
        {"apiVersion": "volsync.backube/v1alpha1", "kind": "ReplicationSource",
         "metadata": {"name": "db", "namespace": tenant},
         "spec": {"sourcePVC": "db", "restic": {"repository": "db-restic"}}},
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": "default", "namespace": tenant}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": holder, "namespace": tenant},
         "spec": {"automountServiceAccountToken": false,
                  "containers": [{"name": "restic", "image": "quay.io/backube/volsync:0.13"}]}},
    ]}));
    // Written by the pod, so dated after it was made.
    let held = writer.write(LockSpec {
        hostname: holder,
        time: time_from_now(0),
        ..LockSpec::default()
    });
    let dir = tempfile::tempdir().expect("temp dir");
    let addr = format!("127.0.0.1:{}", free_port());
    let config = discovery::volsync_config(dir.path(), &addr, &[&tenant], "5m", "");
    let kubeconfig = server.kubeconfig(dir.path(), KUBE_ADMIN_TOKEN);
    let watch = discovery::watch(dir.path(), &config, &kubeconfig, "lockwarden-0");
    let name = format!("{tenant}/ReplicationSource/db");
    scrape_until(&addr, |m| {
        m.contains(&format!(
            r#"lockwarden_locks{{repository="{name}",kind="shared"}} 1"#
        ))
    });
    assert!(repo.lock_ids().contains(&held), "a live pod's lock removed");
    let delete = |pod: &str| {
        let path = format!("/api/v1/namespaces/{tenant}/pods/{pod}?gracePeriodSeconds=0");
        let (status, body) = server.admin_delete(&path);
        assert_eq!(status, 200, "{body}");
    };
    // The first check kept the lock and listed the pods after it: that
    // listing must not serve the check the pod's end brings.
    delete(holder);
    let watch = wait_for(watch, "the deleted pod's lock removed", || {
        !repo.lock_ids().contains(&held)
    });
    // A second mover starts, locks and is killed before any check has
    // seen its lock; a lock naming a pod never seen is written while that
    // mover is the only pod of the pattern, so the next check reads it
    // when none is left.
    let late = "volsync-src-db-q8w2k";
    server.admin_apply(&json!(
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": late, "namespace": tenant},
         "spec": {"automountServiceAccountToken": false,
                  "containers": [{"name": "restic", "image": "quay.io/backube/volsync:0.13"}]}}
    ));
    let late_held = writer.write(LockSpec {
        hostname: late,
        time: time_from_now(-5),
        ..LockSpec::default()
    });
    let unseen = writer.write(LockSpec {
        hostname: "volsync-src-db-n7t4z",
        time: time_from_now(-60),
        ..LockSpec::default()
    });
    delete(late);
    let watch = wait_for(watch, "the late mover's lock removed", || {
        !repo.lock_ids().contains(&late_held)
    });
    let log = stop(watch);
    assert!(log.contains("ended (Deleted): checking now"), "{log}");
    assert!(log.contains("removed (host-gone)"), "{log}");
    assert!(
        repo.lock_ids().contains(&unseen),
        "a never-seen pod's lock was removed:\n{log}"
    );
}
