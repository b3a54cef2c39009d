//! The real Kubernetes API server (lockwarden_tests::kube_apiserver): it
//! starts, verifies TLS with the run's CA, authenticates a service
//! account's token and authorizes with RBAC, as the tests built on it
//! rely on.

use std::time::{Duration, Instant};

use lockwarden_tests::cloud::Store;
use lockwarden_tests::discovery::{self, stop, wait_for};
use lockwarden_tests::guard::Guarded;
use lockwarden_tests::kube_apiserver::{KUBE_ADMIN_TOKEN, KubeApiServer, kube_tool};
use lockwarden_tests::lock_writer::{LockSpec, LockWriter, time_from_now};
use lockwarden_tests::restic::{PASSWORD, free_port};
use serde_json::json;

/// A service account's token from the TokenRequest API authenticates as
/// that account, a made-up one does not, and RBAC forbids the account to
/// list Secrets until a RoleBinding grants it. The kubeconfig written for
/// the token names the server and its CA, and lockwarden's client reaches
/// the server with it.
#[test]
fn a_service_account_token_authenticates_and_rbac_forbids_until_bound() {
    let server = KubeApiServer::shared();
    eprintln!("kube-apiserver started in {:?}", server.started_in());
    let namespace = server.new_namespace("kube-real");
    let token = server.service_account_token(&namespace, "lockwarden");

    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    let (status, body) = server.call(
        &token,
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        Some(&review),
    );
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        body["status"]["userInfo"]["username"],
        format!("system:serviceaccount:{namespace}:lockwarden"),
        "{body}"
    );

    let secrets = format!("/api/v1/namespaces/{namespace}/secrets");
    let (status, body) = server.call("not-a-token", "GET", &secrets, None);
    assert_eq!(status, 401, "{body}");
    let (status, body) = server.call(&token, "GET", &secrets, None);
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["reason"], "Forbidden", "{body}");
    let (status, body) = server.call(KUBE_ADMIN_TOKEN, "GET", &secrets, None);
    assert_eq!(status, 200, "{body}");

    server.admin_apply(&json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "read-secrets", "namespace": namespace},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}],
    }));
    server.admin_apply(&json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "lockwarden-reads-secrets", "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-secrets"},
        "subjects": [{"kind": "ServiceAccount", "name": "lockwarden", "namespace": namespace}],
    }));
    // The authorizer sees the binding once its informer has.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = server.call(&token, "GET", &secrets, None);
        if status == 200 {
            assert_eq!(body["kind"], "SecretList", "{body}");
            break;
        }
        assert!(Instant::now() < deadline, "still {status}: {body}");
        std::thread::sleep(Duration::from_millis(100));
    }

    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = server.kubeconfig(dir.path(), &token);
    let text = std::fs::read_to_string(&kubeconfig).expect("read the kubeconfig");
    assert!(text.contains(server.url()), "{text}");
    assert!(text.contains("certificate-authority-data: "), "{text}");
}

/// `helm install` of deploy/helm/lockwarden into `namespace` of `server`
/// (as the administrator), release `lockwarden`, with `values`.
fn helm_install(server: &KubeApiServer, namespace: &str, values: &[&str]) {
    let dir = tempfile::tempdir().expect("temp dir");
    let admin = server.kubeconfig(dir.path(), KUBE_ADMIN_TOKEN);
    let chart = std::path::Path::new(lockwarden_tests::TESTS_DIR).join("../deploy/helm/lockwarden");
    let mut helm = std::process::Command::new(kube_tool("helm"));
    helm.args(["install", "lockwarden"])
        .arg(&chart)
        .args(["--namespace", namespace, "--wait=false", "--timeout", "60s"])
        .args(values.iter().flat_map(|v| ["--set", v]))
        .env("KUBECONFIG", &admin)
        .env("HELM_CACHE_HOME", dir.path().join("cache"))
        .env("HELM_CONFIG_HOME", dir.path().join("config"))
        .env("HELM_DATA_HOME", dir.path().join("data"));
    let out = lockwarden_tests::finish(&mut helm);
    assert_eq!(out.code, 0, "helm install failed: {out:?}");
}

/// The chart installed into the real API server, then two replicas of
/// `lockwarden watch` run with the chart's own ConfigMap as its service
/// account's token (bound by the chart's RBAC exactly as rendered): they
/// share the Lease, one leads, and it lists VolSync's objects, reads the
/// tenant's Secret, lists pods, removes the lock of a mover pod that is
/// gone (once) and posts an Event on the ReplicationSource. A SelfSubjectRulesReview shows the account may do
/// no more than docs/kubernetes.md says: list and watch pods, list the
/// operators' kinds, get Secrets and ConfigMaps, create Events.
#[test]
fn the_chart_installs_and_its_service_account_removes_a_gone_pods_lock() {
    let server = KubeApiServer::shared();
    server.admin_apply(&lockwarden_tests::operator_crds::all());
    let home = server.new_namespace("lockwarden");
    let tenant = server.new_namespace("team");
    let bucket = Store::S3.new_bucket();
    let repo = bucket.init_repo("db");
    let gone = LockWriter::new(&repo).write(LockSpec {
        hostname: "volsync-src-db-x2b8q",
        time: time_from_now(-60),
        ..LockSpec::default()
    });
    let secret = discovery::volsync_secret_data(&repo);
    server.admin_apply(&json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db-restic", "namespace": tenant},
         "stringData": secret},
        {"apiVersion": "volsync.backube/v1alpha1", "kind": "ReplicationSource",
         "metadata": {"name": "db", "namespace": tenant},
         "spec": {"sourcePVC": "db", "restic": {"repository": "db-restic"}}},
        // Another mover's pod (no scheduler runs it): the pod list covers
        // the movers' names, so the absence of the lock's pod is evidence.
        // No controller makes a namespace's default service account here.
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": "default", "namespace": tenant}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "volsync-src-db-7f9c4", "namespace": tenant},
         "spec": {"automountServiceAccountToken": false,
                  "containers": [{"name": "restic", "image": "quay.io/backube/volsync:0.13"}]}},
    ]}));
    let port = free_port().to_string();
    helm_install(
        server,
        &home,
        &[
            "interval=1s",
            "every=1s",
            "timeout=10s",
            &format!("metrics.port={port}"),
            &format!("namespaces={{{home},{tenant}}}"),
        ],
    );
    let (status, map) =
        server.admin_get(&format!("/api/v1/namespaces/{home}/configmaps/lockwarden"));
    assert_eq!(status, 200, "{map}");
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("watch.toml");
    std::fs::write(
        &config,
        map["data"]["watch.toml"].as_str().expect("watch.toml"),
    )
    .expect("write the chart's watch.toml");
    let token = server.service_account_token(&home, "lockwarden");
    let kubeconfig = server.kubeconfig(dir.path(), &token);
    // Two replicas, as the chart runs them, each with a state of its own.
    let replica = |n: usize| {
        Guarded::spawn(
            lockwarden_tests::lockwarden(&dir.path().join("cache"))
                .args(["watch", "--config"])
                .arg(&config)
                .arg("--state-dir")
                .arg(dir.path().join(format!("state-{n}")))
                .env("KUBECONFIG", &kubeconfig)
                .env_remove("KUBERNETES_SERVICE_HOST")
                .env("POD_NAMESPACE", &home),
        )
    };
    let (first, second) = (replica(0), replica(1));
    let events = format!("/api/v1/namespaces/{tenant}/events");
    let first = wait_for(
        first,
        "the gone mover's lock removed, with an Event",
        || {
            let (_, list) = server.admin_get(&events);
            !repo.lock_ids().contains(&gone)
                && list["items"].as_array().into_iter().flatten().any(|e| {
                    e["reason"] == "StaleLockRemoved" && e["involvedObject"]["name"] == "db"
                })
        },
    );
    let lease_path = format!("/apis/coordination.k8s.io/v1/namespaces/{home}/leases/lockwarden");
    let (_, held) = server.admin_get(&lease_path);
    let logs = [stop(first), stop(second)];
    let both = logs.join("\n---\n");
    let holder = held["spec"]["holderIdentity"].as_str().unwrap_or_default();
    let leaders: Vec<&String> = (logs.iter())
        .filter(|log| log.contains("this replica leads now"))
        .collect();
    assert_eq!(leaders.len(), 1, "not one leader:\n{both}");
    assert!(
        leaders[0].contains(&format!("as {holder}")),
        "{held}\n{both}"
    );
    let removals = both.matches("removed (host-gone)").count();
    assert_eq!(removals, 1, "{both}");
    // Given up at the stop, for the next replica.
    let (_, lease) = server.admin_get(&lease_path);
    assert_eq!(lease["spec"]["holderIdentity"], "", "{lease}\n{both}");
    assert!(!both.contains(PASSWORD), "{both}");

    let review = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
                        "spec": {"namespace": tenant}});
    let (status, body) = server.call(
        &token,
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
        Some(&review),
    );
    assert_eq!(status, 201, "{body}");
    let mut granted = std::collections::BTreeSet::new();
    for rule in body["status"]["resourceRules"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let strings = |key: &str| -> Vec<String> {
            rule[key]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str())
                .map(str::to_owned)
                .collect()
        };
        for verb in strings("verbs") {
            for resource in strings("resources") {
                granted.insert(format!("{verb} {resource}"));
            }
        }
    }
    let documented: std::collections::BTreeSet<String> = [
        "list pods",
        "watch pods",
        "list nodes",
        "get configmaps",
        "get secrets",
        "create events",
        "list backuprepositories",
        "list backupstoragelocations",
        "list repositories",
        "list backupstorages",
        "list snapshots",
        "list schedules",
        "list backups",
        "list checks",
        "list prunes",
        "list archives",
        "list restores",
        "list replicationsources",
        "list replicationdestinations",
        // What every authenticated account may do (system:basic-user).
        "create selfsubjectaccessreviews",
        "create selfsubjectrulesreviews",
        "create selfsubjectreviews",
        // Public CA bundles, which Kubernetes 1.37 lets every
        // authenticated account read.
        "get clustertrustbundles",
        "list clustertrustbundles",
        "watch clustertrustbundles",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    assert_eq!(granted, documented, "{body}");
}
