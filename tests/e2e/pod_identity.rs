//! A pod's end proven by its identity and its node (issue "Trust, part
//! 5"), on the real API server, beside the case that must still remove.
//!
//! One VolSync repository, movers on two nodes, a `watch` checking every
//! 2 s with the docs' kind of prefix pattern (`^volsync-src-`); six locks:
//! - a mover's whose pod then Failed: removed (its end is confirmed);
//! - a mover's whose pod is deleted gracefully: kept while it terminates,
//!   removed once the kubelet's report says its container ended and the
//!   pod goes;
//! - a mover's whose pod is force-deleted while its container runs, from a
//!   node that has not reported since: kept, until the node reports after
//!   the pod's grace period;
//! - the same from the other node: kept, until that Node is deleted;
//! - a mover's made again under the name of one that ended before, then
//!   force-deleted while it runs: kept (the first pod's end says nothing
//!   of it), until the node reports;
//! - a running mover's with `setHostnameAsFQDN`, whose lock carries its
//!   fully qualified name: kept throughout.
//!
//! Before this issue, the last three were removed about a second after the
//! deletion (the fully qualified one at the first check).

use std::time::{Duration, Instant};

use lockwarden_tests::cloud::Store;
use lockwarden_tests::discovery::{self, stop, wait_for};
use lockwarden_tests::kube_apiserver::{KUBE_ADMIN_TOKEN, KubeApiServer};
use lockwarden_tests::lock_writer::{LockSpec, LockWriter, time_from_now};
use lockwarden_tests::metrics::scrape_until;
use lockwarden_tests::restic::{TestRepo, free_port};
use serde_json::{Value, json};

/// A mover pod `name` of `namespace` bound to `node` (none if empty),
/// with `spec` fields added (its grace period 1 s).
fn mover(namespace: &str, name: &str, node: &str, spec: Value) -> Value {
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"automountServiceAccountToken": false,
                 "terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "restic", "image": "quay.io/backube/volsync:0.13"}]}});
    if !node.is_empty() {
        pod["spec"]["nodeName"] = json!(node);
    }
    if let (Some(into), Value::Object(fields)) = (pod["spec"].as_object_mut(), spec) {
        into.extend(fields);
    }
    pod
}

/// What the kubelet would report: the pod `name` running since an hour
/// ago, or its container ended and the pod Failed.
fn report(server: &KubeApiServer, namespace: &str, name: &str, running: bool) {
    let started = time_from_now(-3600);
    let (phase, state) = if running {
        ("Running", json!({"running": {"startedAt": started}}))
    } else {
        let ended = json!({"exitCode": 137, "reason": "OOMKilled", "startedAt": started,
                           "finishedAt": time_from_now(0)});
        ("Failed", json!({ "terminated": ended }))
    };
    let status = json!({"status": {"phase": phase, "startTime": started, "containerStatuses": [
        {"name": "restic", "image": "quay.io/backube/volsync:0.13", "imageID": "", "ready": running,
         "restartCount": 0, "state": state}]}});
    let path = format!("/api/v1/namespaces/{namespace}/pods/{name}/status");
    let (code, body) = server.call(KUBE_ADMIN_TOKEN, "PATCH", &path, Some(&status));
    assert_eq!(code, 200, "{body}");
}

/// Node `name` Ready, its heartbeat now.
fn heartbeat(server: &KubeApiServer, name: &str) {
    let now = time_from_now(0);
    let status = json!({"status": {"conditions": [
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
         "lastHeartbeatTime": now, "lastTransitionTime": time_from_now(-3600)}]}});
    let path = format!("/api/v1/nodes/{name}/status");
    let (code, body) = server.call(KUBE_ADMIN_TOKEN, "PATCH", &path, Some(&status));
    assert_eq!(code, 200, "{body}");
}

/// The ServiceAccount `default` of `namespace`, which pods need (no
/// controller makes it here).
fn default_account(server: &KubeApiServer, namespace: &str) {
    server.admin_apply(&json!({"apiVersion": "v1", "kind": "ServiceAccount",
                               "metadata": {"name": "default", "namespace": namespace}}));
}

/// A lock of `hostname` in `repo`, dated `ago` seconds ago (after its pod
/// was made, as a real one is); its id.
fn hold(repo: &TestRepo, hostname: &str, ago: i64) -> String {
    LockWriter::new(repo).write(LockSpec {
        hostname,
        time: time_from_now(-ago),
        ..LockSpec::default()
    })
}

#[test]
fn a_pods_end_frees_only_its_own_locks_and_a_vanished_pod_waits_for_its_node() {
    let server = KubeApiServer::shared();
    server.admin_apply(&lockwarden_tests::operator_crds::all());
    let ns = server.new_namespace("identity");
    default_account(server, &ns);
    let (node, other) = (format!("{ns}-node"), format!("{ns}-other"));
    for name in [&node, &other] {
        server
            .admin_apply(&json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}));
        heartbeat(server, name);
    }
    let repo = Store::S3.new_bucket().init_repo("db");
    server.admin_apply(&discovery::volsync_source(&ns, &repo));
    let (failed, cut, again, fqdn) = (
        "volsync-src-db-oom01",
        "volsync-src-db-cut01",
        "volsync-src-db-web-0",
        "volsync-src-db-fq001",
    );
    let (graceful, elsewhere) = ("volsync-src-db-grace", "volsync-src-db-cut02");
    // The first pod of the name `again` ran, ended and went.
    server.admin_apply(&mover(&ns, again, &node, json!({})));
    report(server, &ns, again, false);
    let path = |pod: &str| format!("/api/v1/namespaces/{ns}/pods/{pod}");
    let fqdn_spec = json!({"hostname": fqdn, "subdomain": "movers", "setHostnameAsFQDN": true});
    let movers = [
        (failed, &node, json!({})),
        (cut, &node, json!({})),
        (fqdn, &node, fqdn_spec),
        (graceful, &node, json!({})),
        (elsewhere, &other, json!({})),
    ];
    for (pod, on, spec) in movers {
        server.admin_apply(&mover(&ns, pod, on, spec));
        report(server, &ns, pod, true);
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let addr = format!("127.0.0.1:{}", free_port());
    let prefix = "inventory_hosts = \"^volsync-src-\"";
    let config = discovery::volsync_config(dir.path(), &addr, &[&ns], "2s", prefix);
    let kubeconfig = server.kubeconfig(dir.path(), KUBE_ADMIN_TOKEN);
    let watch = discovery::watch(dir.path(), &config, &kubeconfig, "lockwarden-0");
    // The watch has seen the first `again` end; it goes, and a pod of
    // that name is made again and runs.
    let watch = wait_for(watch, "the watch's first check", || {
        scrape(&addr).contains("lockwarden_check_duration_seconds_count")
    });
    let (code, body) = server.admin_delete(&path(again));
    assert_eq!(code, 200, "{body}");
    wait_gone(server, &path(again));
    server.admin_apply(&mover(&ns, again, &node, json!({})));
    report(server, &ns, again, true);
    let locks = [
        hold(&repo, failed, 1),
        hold(&repo, cut, 1),
        hold(&repo, again, 5),
        hold(&repo, &format!("{fqdn}.movers.{ns}.svc.cluster.local"), 1),
        hold(&repo, graceful, 1),
        hold(&repo, elsewhere, 1),
    ];
    let name = format!("{ns}/ReplicationSource/db");
    let kept = |m: &str| {
        m.contains(&format!(
            r#"lockwarden_locks{{repository="{name}",kind="shared"}} 6"#
        ))
    };
    scrape_until(&addr, kept);
    // The OOM-killed mover's pod Failed; one is deleted gracefully (it
    // terminates); three are force-deleted while their containers run.
    report(server, &ns, failed, false);
    let (code, body) = server.admin_delete(&format!("{}?gracePeriodSeconds=30", path(graceful)));
    assert_eq!(code, 200, "{body}");
    let deleted_at = Instant::now();
    for pod in [cut, again, elsewhere] {
        let (code, body) = server.admin_delete(&format!("{}?gracePeriodSeconds=0", path(pod)));
        assert_eq!(code, 200, "{body}");
    }
    let watch = wait_for(watch, "the Failed mover's lock removed", || {
        !repo.lock_ids().contains(&locks[0])
    });
    // Checks go on every 2 s; the node has not reported since.
    let checks = check_count(&addr, &name);
    scrape_until(&addr, |m| count_in(m, &name) >= checks + 3);
    let held = repo.lock_ids();
    let live = [
        (1, "force-deleted"),
        (2, "made again"),
        (3, "fqdn"),
        (4, "terminating"),
        (5, "force-deleted elsewhere"),
    ];
    for (i, what) in live {
        assert!(
            held.contains(&locks[i]),
            "the {what} mover's live lock was removed"
        );
    }
    // The kubelet reports the terminating mover's container ended and
    // removes the pod: its lock goes.
    report(server, &ns, graceful, false);
    let (code, body) = server.admin_delete(&format!("{}?gracePeriodSeconds=0", path(graceful)));
    assert_eq!(code, 200, "{body}");
    let watch = wait_for(watch, "the terminated mover's lock removed", || {
        !repo.lock_ids().contains(&locks[4])
    });
    // The other node is deleted: its pods run nowhere.
    let (code, body) = server.admin_delete(&format!("/api/v1/nodes/{other}"));
    assert_eq!(code, 200, "{body}");
    let watch = wait_for(
        watch,
        "the lock of the deleted node's mover removed",
        || !repo.lock_ids().contains(&locks[5]),
    );
    let held = repo.lock_ids();
    assert!(
        held.contains(&locks[1]) && held.contains(&locks[2]),
        "node not reported yet"
    );
    // The node reports after the movers' grace period (1 s) and the
    // clocks' tolerance (5 s), with room for the watch's delay and the
    // heartbeat's whole seconds: they no longer run.
    std::thread::sleep(Duration::from_secs(10).saturating_sub(deleted_at.elapsed()));
    heartbeat(server, &node);
    let watch = wait_for(watch, "the fenced movers' locks removed", || {
        let held = repo.lock_ids();
        !held.contains(&locks[1]) && !held.contains(&locks[2])
    });
    let log = stop(watch);
    assert!(
        repo.lock_ids().contains(&locks[3]),
        "the running fqdn mover's lock was removed:\n{log}"
    );
    assert!(log.contains("no longer exists"), "{log}");
    assert!(
        log.contains("reported since, after the pod's grace period"),
        "{log}"
    );
    let (code, body) = server.admin_delete(&format!("/api/v1/nodes/{node}"));
    assert_eq!(code, 200, "{body}");
}

/// `GET /metrics` of the watch at `addr`.
fn scrape(addr: &str) -> String {
    scrape_until(addr, |_| true)
}

/// The checks of repository `name` so far, from the metrics `m`.
fn count_in(m: &str, name: &str) -> u64 {
    let prefix = format!("lockwarden_check_duration_seconds_count{{repository=\"{name}\"}} ");
    (m.lines())
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|n| n.trim().parse::<f64>().ok())
        .map_or(0, |n| n as u64)
}

fn check_count(addr: &str, name: &str) -> u64 {
    count_in(&scrape(addr), name)
}

/// Waits until `path` is gone (a deletion the server finished).
fn wait_gone(server: &KubeApiServer, path: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.admin_get(path).0 != 404 {
        assert!(Instant::now() < deadline, "{path} still there");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One repository named by VolSync sources in three namespaces (teams
/// sharing a bucket and a password, told apart by their hosts): a mover
/// of the second team runs and holds a lock while the first team's mover
/// fails. The first team's lock goes; the second's stays, since the
/// repository's pods are those of every namespace naming it; `discover`
/// says so.
#[test]
fn a_repository_named_from_three_namespaces_is_judged_by_the_pods_of_each() {
    let server = KubeApiServer::shared();
    server.admin_apply(&lockwarden_tests::operator_crds::all());
    let teams: Vec<String> = (0..3).map(|_| server.new_namespace("team")).collect();
    for team in &teams {
        default_account(server, team);
    }
    let repo = Store::S3.new_bucket().init_repo("shared");
    for team in &teams {
        server.admin_apply(&discovery::volsync_source(team, &repo));
    }
    let (failing, live) = ("volsync-src-db-h7k2w", "volsync-src-db-t7r4m");
    for (team, pod) in [(&teams[0], failing), (&teams[1], live)] {
        server.admin_apply(&mover(team, pod, "", json!({})));
        report(server, team, pod, true);
    }
    let (failing_lock, live_lock) = (hold(&repo, failing, 1), hold(&repo, live, 1));
    let dir = tempfile::tempdir().expect("temp dir");
    let addr = format!("127.0.0.1:{}", free_port());
    let names: Vec<&str> = teams.iter().map(String::as_str).collect();
    let config = discovery::volsync_config(dir.path(), &addr, &names, "2s", "");
    let kubeconfig = server.kubeconfig(dir.path(), KUBE_ADMIN_TOKEN);
    let printed = lockwarden_tests::lockwarden(&dir.path().join("cache"))
        .args(["discover", "--config"])
        .arg(&config)
        .env("KUBECONFIG", &kubeconfig)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .expect("lockwarden discover");
    let stdout = String::from_utf8_lossy(&printed.stdout);
    let others = format!("{}, {}", teams[1], teams[2]);
    assert!(
        stdout.contains(&format!("shared:   also named in namespaces {others}")),
        "{stdout}"
    );
    let watch = discovery::watch(dir.path(), &config, &kubeconfig, "lockwarden-0");
    let name = format!("{}/ReplicationSource/db", teams[0]);
    scrape_until(&addr, |m| count_in(m, &name) >= 1);
    report(server, &teams[0], failing, false);
    let watch = wait_for(watch, "the failed mover's lock removed", || {
        !repo.lock_ids().contains(&failing_lock)
    });
    let checks = check_count(&addr, &name);
    scrape_until(&addr, |m| count_in(m, &name) >= checks + 2);
    let log = stop(watch);
    assert!(
        repo.lock_ids().contains(&live_lock),
        "another team's live mover lost its lock:\n{log}"
    );
}
