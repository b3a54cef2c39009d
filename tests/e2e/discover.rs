//! `watch` with only a `[discover]` table, against the Kubernetes emulator
//! (tests/servers/kube_emulator.py): repositories found in the operators'
//! objects and Secrets, pod evidence from the API, Events on the owning
//! object, and one leader among two replicas.

use std::path::{Path, PathBuf};
use std::time::Duration;

use lockwarden_tests::cloud::{Bucket, S3_ACCESS_KEY_ID, S3_SECRET_KEY, Store};
use lockwarden_tests::discovery::{self, discover_config, pod_in, stop, wait_for, watch};
use lockwarden_tests::guard::wait_until;
use lockwarden_tests::kube_emulator::KubeEmulator;
use lockwarden_tests::lock_writer::{LockSpec, LockWriter, time_from_now};
use lockwarden_tests::metrics::scrape_until;
use lockwarden_tests::restic::{PASSWORD, TestRepo, free_port};
use serde_json::{Value, json};

/// A VolSync ReplicationSource `name` in namespace `app` whose repository
/// Secret names `repo` (on S3, with its keys), and a running mover pod
/// `live` started an hour ago.
fn volsync_objects(name: &str, repo: &TestRepo, live: &str) -> Value {
    let secret = discovery::volsync_secret_data(repo);
    json!([
        {"apiVersion": "v1", "kind": "Secret",
         "metadata": {"name": format!("{name}-restic"), "namespace": "app"},
         "stringData": secret},
        {"apiVersion": "volsync.backube/v1alpha1", "kind": "ReplicationSource",
         "metadata": {"name": name, "namespace": "app"},
         "spec": {"sourcePVC": "data", "restic": {"repository": format!("{name}-restic")}}},
        pod(live),
    ])
}

/// A running pod `name` in namespace `app`, started an hour ago.
fn pod(name: &str) -> Value {
    pod_in("app", name)
}

/// The reasons of the Events on the ReplicationSource `name` in `app`.
fn event_reasons(kube: &KubeEmulator, name: &str) -> Vec<String> {
    discovery::event_reasons(kube, "app", "ReplicationSource", name)
}

/// A watch started with only `[discover]` finds VolSync's repository from
/// its object and Secret, removes the lock of a mover pod the API no longer
/// lists at its first check, keeps the lock of a pod that still runs,
/// creates an Event on the ReplicationSource, and never writes the
/// repository's password anywhere it logs.
#[test]
fn discovery_removes_a_gone_pods_lock_and_keeps_a_running_ones() {
    let bucket = Store::S3.new_bucket();
    let repo = bucket.init_repo("data");
    let kube = KubeEmulator::start(&[]);
    let live = "volsync-src-data-7f9c4";
    // The Secret also names a credentials endpoint and files: lockwarden
    // must take only the keys, never fetch or read what a Secret points at.
    let trap = std::net::TcpListener::bind("127.0.0.1:0").expect("a trap port");
    trap.set_nonblocking(true).expect("nonblocking");
    let mut objects = volsync_objects("data", &repo, live);
    let url = format!("http://{}/creds", trap.local_addr().expect("addr"));
    let secret = &mut objects[0]["stringData"];
    secret["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = json!(url);
    secret["AWS_ENDPOINT_URL_STS"] = json!(url);
    secret["AWS_SHARED_CREDENTIALS_FILE"] = json!("/etc/passwd");
    secret["AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"] = json!("/etc/hostname");
    kube.apply(objects);
    // And one whose Secret holds no keys but that endpoint: not watched
    // (object_store would fetch credentials there, with lockwarden's token).
    let trapped = bucket.init_repo("trapped");
    kube.apply(json!([
        {"apiVersion": "v1", "kind": "Secret",
         "metadata": {"name": "trapped-restic", "namespace": "app"},
         "stringData": {"RESTIC_REPOSITORY": trapped.location, "RESTIC_PASSWORD": PASSWORD,
                        "AWS_CONTAINER_CREDENTIALS_FULL_URI": url,
                        "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": "/etc/hostname"}},
        {"apiVersion": "volsync.backube/v1alpha1", "kind": "ReplicationSource",
         "metadata": {"name": "trapped", "namespace": "app"},
         "spec": {"sourcePVC": "data", "restic": {"repository": "trapped-restic"}}},
    ]));
    let writer = LockWriter::new(&repo);
    let gone = writer.write(LockSpec {
        hostname: "volsync-src-data-x2b8q",
        ..LockSpec::default()
    });
    let kept = writer.write(LockSpec {
        hostname: live,
        time: time_from_now(-60),
        ..LockSpec::default()
    });
    let dir = repo.dir.path();
    let kubeconfig = kube.write_kubeconfig(dir);
    let watch = watch(dir, &discover_config(dir, ""), &kubeconfig, "lockwarden-0");
    wait_until("the gone pod's lock is removed", || {
        !repo.lock_ids().contains(&gone)
    });
    wait_until("an Event on the ReplicationSource", || {
        event_reasons(&kube, "data").contains(&"StaleLockRemoved".to_owned())
    });
    let log = stop(watch);
    assert!(
        trap.accept().is_err(),
        "lockwarden went where a Secret pointed"
    );
    assert!(
        repo.lock_ids().contains(&kept),
        "the running pod's lock was removed:\n{log}"
    );
    assert!(log.contains("app/ReplicationSource/data"), "{log}");
    assert!(
        !log.contains(PASSWORD),
        "the password reached the log:\n{log}"
    );
    let requests = kube.requests();
    assert!(
        requests.iter().any(|r| r.path == "/api/v1/pods"),
        "pods were not listed: {requests:?}"
    );
    assert!(
        requests.iter().all(|r| r.authorization),
        "a request without the token: {requests:?}"
    );
}

/// Two replicas share one Lease: one leads and removes, the other stands
/// by; a repository whose Secret lockwarden may not read (403) is reported
/// on its own and the other one is cleaned.
#[test]
fn two_replicas_elect_one_leader_and_a_forbidden_secret_stops_only_its_repository() {
    let bucket = Store::S3.new_bucket();
    let repo = bucket.init_repo("data");
    let other = bucket.init_repo("blocked");
    let kube = KubeEmulator::start(&[]);
    kube.apply(volsync_objects("data", &repo, "volsync-src-data-7f9c4"));
    kube.apply(volsync_objects(
        "blocked",
        &other,
        "volsync-src-blocked-k2m7w",
    ));
    kube.forbid("get", "secrets", Some("app"), Some("blocked-restic"));
    kube.apply(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "lockwarden"}}),
    );
    let gone = LockWriter::new(&repo).write(LockSpec {
        hostname: "volsync-src-data-x2b8q",
        ..LockSpec::default()
    });
    let blocked_lock = LockWriter::new(&other).write(LockSpec {
        hostname: "volsync-src-blocked-x2b8q",
        ..LockSpec::default()
    });
    let dir = repo.dir.path();
    let kubeconfig = kube.write_kubeconfig(dir);
    let leader = "[leader]\nlease = \"lockwarden\"\n";
    let first = watch(
        dir,
        &discover_config(dir, leader),
        &kubeconfig,
        "lockwarden-0",
    );
    let second_dir = other.dir.path();
    let second = watch(
        second_dir,
        &discover_config(second_dir, leader),
        &kubeconfig,
        "lockwarden-1",
    );
    wait_until("the gone pod's lock is removed", || {
        !repo.lock_ids().contains(&gone)
    });
    let lease = kube.get("/apis/coordination.k8s.io/v1/namespaces/lockwarden/leases/lockwarden");
    assert_eq!(lease.0, 200, "{lease:?}");
    let (first, second) = (stop(first), stop(second));
    let leaders = [&first, &second]
        .iter()
        .filter(|log| log.contains("this replica leads now"))
        .count();
    assert_eq!(
        leaders, 1,
        "not exactly one leader:\n{first}\n---\n{second}"
    );
    assert!(
        other.lock_ids().contains(&blocked_lock),
        "the lock of the repository whose Secret is forbidden was removed"
    );
    let logs = format!("{first}{second}");
    assert!(
        logs.contains("may not read Secret app/blocked-restic"),
        "{logs}"
    );
    assert!(
        !logs.contains(PASSWORD),
        "the password reached the log:\n{logs}"
    );
}

/// The operators' own sample objects (tests/fixtures/kubernetes/, each
/// file says where it came from) with their placeholders filled in: the S3
/// buckets, keys and password of this test.
fn samples(dir: &Path, fills: &[(&str, String)], files: &[&str]) -> Vec<PathBuf> {
    let fixtures = PathBuf::from(lockwarden_tests::TESTS_DIR).join("fixtures/kubernetes");
    files
        .iter()
        .map(|file| {
            let mut text = std::fs::read_to_string(fixtures.join(file)).expect("read a sample");
            for (name, value) in fills {
                text = text.replace(&format!("${{{name}}}"), value);
            }
            let path = dir.join(file);
            std::fs::write(&path, text).expect("write a sample");
            path
        })
        .collect()
}

/// One repository of the samples: where it is in which bucket, the lock of
/// a holder gone, and a running pod of the same operator (so that the pod
/// list covers its pod names).
struct Sample {
    repo: TestRepo,
    gone: String,
}

impl Sample {
    fn new(bucket: &Bucket, prefix: &str, gone_host: &str, hours_old: i64) -> Sample {
        let repo = bucket.init_repo(prefix);
        let gone = LockWriter::new(&repo).write(LockSpec {
            hostname: gone_host,
            time: time_from_now(-hours_old * 3600),
            ..LockSpec::default()
        });
        Sample { repo, gone }
    }
}

/// `watch` started with only `[discover]`, all five operators on, over the
/// operators' own sample objects: each operator's repository on S3 (moto)
/// loses the lock of its gone holder (KubeStash's pods follow no known
/// pattern, so its lock goes by age), the kopia BackupRepository and the
/// K8up Backup without a backend are left alone, a running node-agent's
/// lock stays, Events name each owner, and nothing secret is logged. Then
/// an object deleted while `watch` runs stops its repository, and one
/// added is picked up.
#[test]
fn the_operators_sample_objects_are_discovered_and_cleaned() {
    let bucket = Store::S3.new_bucket();
    let velero = Sample::new(&bucket, "restic/nginx-example", "node-agent-x2b8q", 0);
    let live = LockWriter::new(&velero.repo).write(LockSpec {
        hostname: "node-agent-7f9c4",
        time: time_from_now(-60),
        ..LockSpec::default()
    });
    let stash = Sample::new(
        &bucket,
        "backup/demo/deployment/stash-demo",
        "stash-backup-s-0-x2b8q",
        0,
    );
    let kubestash = Sample::new(
        &bucket,
        "demo/dep/repository/v1/demo-session/dump",
        "kubestash-x2b8q",
        2,
    );
    // K8up names no prefix: its repository is the bucket's root, here a
    // path in the bucket, which restic takes the same way.
    let k8up = Sample::new(&bucket, "k8up", "backup-schedule-test-0-x2b8q", 0);
    let volsync = Sample::new(
        &bucket,
        "restic-repo",
        "volsync-src-database-source-x2b8q",
        0,
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let endpoint = format!("http://{}", bucket.addr());
    let local = dir.path().join("no-repository-here");
    let fill = |name: &str| {
        vec![
            ("S3_ENDPOINT", endpoint.clone()),
            ("S3_BUCKET", name.to_owned()),
            ("ACCESS_KEY", S3_ACCESS_KEY_ID.to_owned()),
            ("SECRET_KEY", S3_SECRET_KEY.to_owned()),
            ("PASSWORD", PASSWORD.to_owned()),
            ("LOCAL_PATH", local.display().to_string()),
            ("AZURE_ENDPOINT", "http://127.0.0.1:9".to_owned()),
        ]
    };
    let mut files = samples(
        dir.path(),
        &fill(&bucket.name),
        &[
            "velero.yaml",
            "stash.yaml",
            "kubestash.yaml",
            "volsync.yaml",
        ],
    );
    files.extend(samples(
        dir.path(),
        &fill(&format!("{}/k8up", bucket.name)),
        &["k8up.yaml"],
    ));
    let paths: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let kube = KubeEmulator::start(&paths);
    kube.apply(json!([
        pod_in("velero", "node-agent-7f9c4"),
        pod_in("demo", "stash-backup-s-1-7f9c4"),
        pod_in("k8up-demo", "backup-schedule-test-1-7f9c4"),
        pod_in("source", "volsync-src-database-source-7f9c4"),
    ]));
    let kubeconfig = kube.write_kubeconfig(dir.path());
    let config = dir.path().join("watch.toml");
    std::fs::write(
        &config,
        format!(
            "state_dir = \"{}\"\n[discover]\nvelero = true\nstash = true\nkubestash = true\nk8up = true\nvolsync = true\nevery = \"1s\"\ninterval = \"1s\"\ntimeout = \"10s\"\n",
            dir.path().join("state").display()
        ),
    )
    .expect("write config");
    let mut watch = watch(dir.path(), &config, &kubeconfig, "lockwarden-0");
    for (what, sample) in [
        ("Velero", &velero),
        ("Stash", &stash),
        ("KubeStash", &kubestash),
        ("K8up", &k8up),
        ("VolSync", &volsync),
    ] {
        watch = wait_for(watch, &format!("{what}'s stale lock is removed"), || {
            !sample.repo.lock_ids().contains(&sample.gone)
        });
    }
    let owners = [
        ("velero", "BackupRepository", "nginx-example-default-restic"),
        ("demo", "Repository", "minio-repo"),
        ("demo", "Repository", "minio-demo-repo"),
        ("k8up-demo", "Schedule", "schedule-test"),
        ("source", "ReplicationSource", "database-source"),
    ];
    for (namespace, kind, name) in owners {
        watch = wait_for(
            watch,
            &format!("an Event on {namespace}/{kind}/{name}"),
            || {
                kube.list(&format!("/api/v1/namespaces/{namespace}/events"))["items"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|e| {
                        e["involvedObject"]["kind"] == kind && e["involvedObject"]["name"] == name
                    })
            },
        );
    }
    // Deleted while watch runs: its repository is no longer watched.
    kube.delete(
        "volsync.backube/v1alpha1",
        "ReplicationSource",
        Some("source"),
        "database-source",
    );
    kube.delete(
        "volsync.backube/v1alpha1",
        "ReplicationDestination",
        Some("source"),
        "database-destination",
    );
    // Added while watch runs: a second Stash Repository on the same Secret.
    let added = bucket.init_repo("added");
    let added_gone = LockWriter::new(&added).write(LockSpec {
        hostname: "stash-backup-added-0-x2b8q",
        ..LockSpec::default()
    });
    kube.apply(
        json!({"apiVersion": "stash.appscode.com/v1alpha1", "kind": "Repository",
        "metadata": {"name": "added", "namespace": "demo"},
        "spec": {"backend": {"s3": {"endpoint": endpoint, "bucket": bucket.name, "prefix": "added"},
                             "storageSecretName": "minio-secret"}}}),
    );
    watch = wait_for(
        watch,
        "the added Repository's stale lock is removed",
        || !added.lock_ids().contains(&added_gone),
    );
    let log = stop(watch);
    assert!(
        velero.repo.lock_ids().contains(&live),
        "a running node-agent's lock was removed:\n{log}"
    );
    for gone in [
        "source/ReplicationSource/database-source",
        "source/ReplicationSource/local-source",
    ] {
        assert!(log.contains(gone), "{gone} never named:\n{log}");
    }
    assert!(
        log.contains("no longer watched: its object is gone"),
        "{log}"
    );
    assert!(
        log.contains("velero/BackupRepository/app-secondary-restic"),
        "{log}"
    );
    assert!(
        !log.contains("nginx-example-default-kopia"),
        "the kopia repository was looked at:\n{log}"
    );
    assert!(
        log.contains("k8up-demo/Backup/k8up-test"),
        "the K8up Backup without a backend is not reported:\n{log}"
    );
    for secret in [PASSWORD, S3_SECRET_KEY] {
        assert!(!log.contains(secret), "a secret reached the log:\n{log}");
    }
}

/// In report mode a stale lock is kept and told once: one `StaleLockKept`
/// Event however many checks see it, and the metrics count it without any
/// secret in them. A pod list the API refuses (403) proves no pod gone:
/// then the same lock is kept in unlock mode too.
#[test]
fn report_mode_tells_a_kept_lock_once_and_a_refused_pod_list_proves_nothing() {
    let bucket = Store::S3.new_bucket();
    let repo = bucket.init_repo("data");
    let kube = KubeEmulator::start(&[]);
    kube.apply(volsync_objects("data", &repo, "volsync-src-data-7f9c4"));
    let gone = LockWriter::new(&repo).write(LockSpec {
        hostname: "volsync-src-data-x2b8q",
        ..LockSpec::default()
    });
    let dir = repo.dir.path();
    let kubeconfig = kube.write_kubeconfig(dir);
    let addr = format!("127.0.0.1:{}", free_port());
    let report = discover_config(dir, &format!("metrics_addr = \"{addr}\""));
    let text = std::fs::read_to_string(&report).expect("read config") + "mode = \"report\"\n";
    std::fs::write(&report, text).expect("write config");
    let reporting = watch(dir, &report, &kubeconfig, "lockwarden-0");
    let label = r#"repository="app/ReplicationSource/data""#;
    let metrics = scrape_until(&addr, |m| {
        m.lines().any(|l| {
            l.starts_with("lockwarden_check_duration_seconds_count")
                && l.contains(label)
                && !l.ends_with(" 1")
        })
    });
    let reporting = wait_for(reporting, "a StaleLockKept Event", || {
        event_reasons(&kube, "data").contains(&"StaleLockKept".to_owned())
    });
    // More checks see the same lock; none tells it again.
    let seen = scrape_until(&addr, |m| {
        m.lines().any(|l| {
            l.starts_with("lockwarden_check_duration_seconds_count")
                && l.contains(label)
                && l.ends_with(" 5")
        })
    });
    let log = stop(reporting);
    let kept_events = event_reasons(&kube, "data")
        .iter()
        .filter(|r| *r == "StaleLockKept")
        .count();
    assert_eq!(kept_events, 1, "{log}");
    assert!(
        repo.lock_ids().contains(&gone),
        "report mode removed a lock:\n{log}"
    );
    assert!(
        seen.contains(&format!("lockwarden_stale_locks_not_removed{{{label}}} 1")),
        "{seen}"
    );
    for text in [&metrics, &seen, &log] {
        assert!(!text.contains(PASSWORD), "the password is out:\n{text}");
    }
    // Unlock mode, but the pods cannot be listed: nothing proves the holder gone.
    kube.forbid("list", "pods", None, None);
    let unlock = discover_config(dir, "");
    let unlocking = watch(dir, &unlock, &kubeconfig, "lockwarden-0");
    let unlocking = wait_for(unlocking, "a refused pod list", || {
        kube.requests()
            .iter()
            .any(|r| r.path == "/api/v1/pods" && r.status == 403)
    });
    std::thread::sleep(Duration::from_secs(2));
    let log = stop(unlocking);
    assert!(
        repo.lock_ids().contains(&gone),
        "a lock was removed without evidence:\n{log}"
    );
    assert!(log.contains("host inventory unusable"), "{log}");
}

/// The paragraph `discover` printed for repository `name`.
fn paragraph(stdout: &str, name: &str) -> String {
    let start = stdout
        .find(&format!("{name} ("))
        .unwrap_or_else(|| panic!("{name} not printed:\n{stdout}"));
    stdout[start..]
        .split("\n\n")
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// `lockwarden discover` over the operators' own sample objects prints
/// each repository `watch` would watch, with its location, the Secrets and
/// keys it was read from (names only) and its pods' pattern; the objects it
/// would not watch, each with why; nothing secret. `--json` says the same.
/// `--open` opens each with its password and keys: the Stash sample's
/// Azure repository (an account key that is not one) fails to, and the
/// exit code says so.
#[test]
fn discover_prints_what_watch_would_watch_and_why_not_the_rest() {
    let bucket = Store::S3.new_bucket();
    let stash = bucket.init_repo("backup/demo/deployment/stash-demo");
    let volsync = bucket.init_repo("restic-repo");
    let dir = tempfile::tempdir().expect("temp dir");
    let fills = [
        ("S3_ENDPOINT", format!("http://{}", bucket.addr())),
        ("S3_BUCKET", bucket.name.clone()),
        ("ACCESS_KEY", S3_ACCESS_KEY_ID.to_owned()),
        ("SECRET_KEY", S3_SECRET_KEY.to_owned()),
        ("PASSWORD", PASSWORD.to_owned()),
        ("LOCAL_PATH", "/nowhere".to_owned()),
        ("AZURE_ENDPOINT", "http://127.0.0.1:9".to_owned()),
    ];
    let files = samples(dir.path(), &fills, &["stash.yaml", "volsync.yaml"]);
    let paths: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let kube = KubeEmulator::start(&paths);
    let kubeconfig = kube.write_kubeconfig(dir.path());
    let discover = |args: &[&str]| {
        let out = lockwarden_tests::lockwarden(&dir.path().join("cache"))
            .arg("discover")
            .args(args)
            .env("KUBECONFIG", &kubeconfig)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .output()
            .expect("run discover");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        for secret in [PASSWORD, S3_SECRET_KEY] {
            assert!(!text.contains(secret), "a secret was printed:\n{text}");
        }
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            text,
        )
    };
    let (code, stdout, all) = discover(&[]);
    assert_eq!(code, Some(0), "{all}");
    let source = paragraph(&stdout, "source/ReplicationSource/database-source");
    for want in [
        "  watched",
        &format!("  location: {}", volsync.location),
        "  secret:   source/restic-config (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, RESTIC_PASSWORD, RESTIC_REPOSITORY)",
        "  pods:     ^volsync-(src|dst)-",
    ] {
        assert!(source.contains(want), "{want:?} not in:\n{source}\n\n{all}");
    }
    let repo = paragraph(&stdout, "demo/Repository/minio-repo");
    assert!(
        repo.contains(&format!("location: {}", stash.location)),
        "{repo}"
    );
    assert!(!stdout.contains("opened"), "{stdout}");
    let local = paragraph(&stdout, "source/ReplicationSource/local-source");
    assert!(
        local.contains("NOT WATCHED: its repository is on local"),
        "{local}"
    );
    let (code, stdout, all) = discover(&["--json"]);
    assert_eq!(code, Some(0), "{all}");
    let doc: Value = serde_json::from_str(&stdout).expect("JSON");
    let entry = doc["repositories"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["repository"] == "source/ReplicationSource/database-source")
        .unwrap_or_else(|| panic!("{stdout}"));
    assert_eq!(entry["watched"], true, "{entry}");
    assert_eq!(entry["object"]["apiVersion"], "volsync.backube/v1alpha1");
    assert_eq!(entry["secrets"][0]["name"], "restic-config", "{entry}");
    assert!(entry.get("open").is_none(), "{entry}");
    let (code, stdout, all) = discover(&["--open"]);
    assert_eq!(code, Some(1), "{all}");
    for opened in [
        "source/ReplicationSource/database-source",
        "demo/Repository/minio-repo",
    ] {
        let text = paragraph(&stdout, opened);
        assert!(text.contains("  opened:   repository "), "{text}\n\n{all}");
    }
    let azure = paragraph(&stdout, "demo/Repository/azure-repo");
    assert!(azure.contains("OPEN FAILED: "), "{azure}\n\n{all}");
}

/// A K8up backend whose `envFrom` Secret or ConfigMap sets one of the
/// TLS file variables (after its `prefix`) is refused as `tlsOptions`
/// are: the files are inside the backup pod. An optional source that does
/// not exist sets nothing; the keys are read, never a value.
#[test]
fn a_k8up_backend_whose_env_from_sets_tls_files_is_refused() {
    let kube = KubeEmulator::start(&[]);
    let schedule = |name: &str, env_from: Value| {
        json!({"apiVersion": "k8up.io/v1", "kind": "Schedule",
               "metadata": {"name": name, "namespace": "app"},
               "spec": {"backend": {
                   "repoPasswordSecretRef": {"name": "k8up-repo", "key": "password"},
                   "s3": {"endpoint": "https://minio.storage:9000", "bucket": name,
                          "accessKeyIDSecretRef": {"name": "k8up-repo", "key": "id"},
                          "secretAccessKeySecretRef": {"name": "k8up-repo", "key": "secret"}},
                   "envFrom": env_from}}})
    };
    kube.apply(json!([
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "k8up-repo", "namespace": "app"},
         "stringData": {"password": PASSWORD, "id": "AKID", "secret": S3_SECRET_KEY}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tls-env", "namespace": "app"},
         "stringData": {"CA_CERT_FILE": "/mnt/ca/ca.crt"}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "client-env", "namespace": "app"},
         "data": {"K8UP_CLIENT_CERT_FILE": "/mnt/tls/tls.crt", "OTHER": "x"}},
        schedule("by-secret", json!([{"secretRef": {"name": "tls-env"}}])),
        schedule("by-map", json!([{"prefix": "K8UP_", "configMapRef": {"name": "client-env"}}])),
        schedule("plain", json!([{"secretRef": {"name": "absent", "optional": true},
                                  "configMapRef": {"name": "client-env"}}])),
    ]));
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = kube.write_kubeconfig(dir.path());
    let config = dir.path().join("watch.toml");
    std::fs::write(&config, "[discover]\nk8up = true\n").expect("write watch.toml");
    let out = lockwarden_tests::lockwarden(&dir.path().join("cache"))
        .args(["discover", "--json", "--config"])
        .arg(&config)
        .env("KUBECONFIG", &kubeconfig)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .expect("run discover");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        !stdout.contains(PASSWORD) && !stdout.contains("/mnt/"),
        "{stdout}"
    );
    let report: Value = serde_json::from_str(&stdout).expect("JSON");
    let refused = |name: &str| -> Option<String> {
        (report["repositories"].as_array().into_iter().flatten())
            .find(|r| r["repository"] == format!("app/Schedule/{name}"))
            .and_then(|r| r["refused"].as_str().map(str::to_owned))
    };
    assert_eq!(
        refused("by-secret").as_deref(),
        Some(
            "its spec.backend.envFrom[0].secretRef's CA_CERT_FILE names a file inside the \
             backup pod, which lockwarden cannot read"
        ),
        "{stdout}"
    );
    let by_map = refused("by-map").unwrap_or_default();
    assert!(
        by_map.contains("envFrom[0].configMapRef's CLIENT_CERT_FILE"),
        "{stdout}"
    );
    assert_eq!(refused("plain"), None, "{stdout}");
}
