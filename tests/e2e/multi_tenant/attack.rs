//! The adversarial review's attacks: a hostile tenant that may create the
//! operators' objects (and Secrets) only in its own namespace, trying to
//! turn lockwarden against the others. Each test asserts what should
//! hold; those marked `CONFIRMED` failed when written (the finding they
//! demonstrate is in their comment) and pass since fa24b5e fixed them; the
//! others held from the start. All are regression tests.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use lockwarden::limits;
use lockwarden_tests::cloud::{Bucket, S3_ACCESS_KEY_ID, S3_SECRET_KEY, Store};
use lockwarden_tests::discovery::{discover_config_with, pod_in, stop, watch};
use lockwarden_tests::fake_rest::{FakeRest, Reply};
use lockwarden_tests::guard::Guarded;
use lockwarden_tests::kube_emulator::{KUBE_TOKEN, KubeEmulator};
use lockwarden_tests::lock_writer::{LockSpec, LockWriter, time_from_now};
use lockwarden_tests::metrics::scrape_until;
use lockwarden_tests::restic::{PASSWORD, TestRepo, free_port};
use serde_json::{Value, json};

use super::{TENANT_A, TENANT_B};

const VOLSYNC: &str = "volsync.backube/v1alpha1";
const KUBESTASH: &str = "storage.kubestash.com/v1alpha1";

/// A VolSync ReplicationSource `name` in `namespace` and its Secret
/// holding `location`, the test password and `extra` keys.
fn volsync(namespace: &str, name: &str, location: &str, extra: Value) -> Value {
    let mut data = json!({"RESTIC_REPOSITORY": location, "RESTIC_PASSWORD": PASSWORD});
    if let (Some(data), Some(extra)) = (data.as_object_mut(), extra.as_object()) {
        data.extend(extra.clone());
    }
    json!([
        {"apiVersion": "v1", "kind": "Secret",
         "metadata": {"name": format!("{name}-restic"), "namespace": namespace},
         "stringData": data},
        {"apiVersion": VOLSYNC, "kind": "ReplicationSource",
         "metadata": {"name": name, "namespace": namespace},
         "spec": {"sourcePVC": "data", "restic": {"repository": format!("{name}-restic")}}},
    ])
}

/// Waits at most `guard` for `condition`; whether it came.
fn came_within(guard: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + guard;
    while Instant::now() < deadline {
        if condition() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    condition()
}

/// Tenant B's victim: a VolSync repository served over REST with a lock
/// of its gone mover pod, and a running mover pod (the inventory).
struct Victim {
    repo: TestRepo,
    _server: FakeRest,
    gone: String,
}

impl Victim {
    /// Runs `watch` (VolSync discovery) over `kube` until the gone pod's
    /// lock is removed, or 20 seconds: whether it was, and what watch said.
    fn watched(&self, kube: &KubeEmulator) -> (bool, String) {
        let dir = self.repo.dir.path();
        let kubeconfig = kube.write_kubeconfig(dir);
        let config = discover_config_with(dir, "", "volsync = true");
        let watching = watch(dir, &config, &kubeconfig, "lockwarden-0");
        let removed = came_within(Duration::from_secs(20), || {
            !self.repo.lock_ids().contains(&self.gone)
        });
        (removed, stop(watching))
    }
}

fn victim(kube: &KubeEmulator) -> Victim {
    let repo = TestRepo::init_local();
    let server = FakeRest::start(&repo.path, |_, _| Reply::Default);
    kube.apply(volsync(TENANT_B, "data", &server.location, json!({})));
    kube.apply(json!([pod_in(TENANT_B, "volsync-src-data-7f9c4")]));
    let gone = LockWriter::new(&repo).write(LockSpec {
        hostname: "volsync-src-data-x2b8q",
        ..LockSpec::default()
    });
    Victim {
        repo,
        _server: server,
        gone,
    }
}

/// `body` created at `path` of the emulator as the API would be asked,
/// the answer not parsed (a test's own JSON parser has serde_json's
/// recursion limit too).
fn create_raw(kube: &KubeEmulator, path: &str, body: &str) -> u16 {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut answer = agent
        .post(&format!("{}{path}", kube.url()))
        .header("Authorization", &format!("Bearer {KUBE_TOKEN}"))
        .header("Content-Type", "application/json")
        .send(body)
        .expect("the emulator answers");
    let status = answer.status().as_u16();
    let _ = answer.body_mut().read_to_string();
    status
}

/// JSON nested `depth` objects deep, as a managedFields entry's
/// `fieldsV1` is (`{"f:spec": {"f:x": {...}}}`).
fn nested(depth: usize) -> String {
    format!("{}{{}}{}", "{\"f:x\":".repeat(depth), "}".repeat(depth))
}

/// CONFIRMED (blind every namespace): one object of tenant A nested more
/// than 128 levels deep (here in `metadata.managedFields[].fieldsV1`,
/// which the API server keeps as the client wrote it; any field a CRD
/// leaves `x-kubernetes-preserve-unknown-fields` would do) makes the
/// whole cluster-wide list of its kind fail: serde_json's recursion limit
/// fails the page (kubernetes/client.rs `Kubernetes::page`, `from_str`),
/// `list` returns `Err`, and discovery says "cannot list the objects of
/// volsync; its repositories are left as they were" for every namespace.
/// Tenant B's repository, created after (or, here, before lockwarden
/// started), is never watched and its gone pod's lock is never removed;
/// a repository whose object is deleted is never retired. The docs
/// promise "one namespace's objects fail that namespace alone".
#[test]
fn attack_a_deeply_nested_object_blinds_every_namespace() {
    let kube = KubeEmulator::start(&[]);
    let victim = victim(&kube);
    // The namespace exists once anything is applied in it.
    kube.apply(volsync(
        TENANT_A,
        "plain",
        "rest:http://127.0.0.1:9/x",
        json!({}),
    ));
    let deep = format!(
        r#"{{"apiVersion":"{VOLSYNC}","kind":"ReplicationSource",
            "metadata":{{"name":"deep","namespace":"{TENANT_A}",
              "managedFields":[{{"manager":"kubectl","operation":"Update",
                "apiVersion":"{VOLSYNC}","fieldsType":"FieldsV1","fieldsV1":{}}}]}},
            "spec":{{"sourcePVC":"data","restic":{{"repository":"plain-restic"}}}}}}"#,
        nested(200)
    );
    let status = create_raw(
        &kube,
        &format!("/apis/{VOLSYNC}/namespaces/{TENANT_A}/replicationsources"),
        &deep,
    );
    assert_eq!(status, 201, "the deep object was not created");

    let (removed, log) = victim.watched(&kube);
    let blinded: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("cannot list") || l.contains("recursion"))
        .take(2)
        .collect();
    assert!(
        removed,
        "tenant A's one deep object blinded tenant B: B's gone pod's lock was never removed; \
         watch said:\n{}",
        blinded.join("\n")
    );
}

/// A REST location aimed at the API server's address: lockwarden's
/// requests there carry no Authorization (the service account's token is
/// never sent to a repository).
#[test]
fn attack_a_repository_at_the_api_server_gets_no_token() {
    let kube = KubeEmulator::start(&[]);
    let port = kube.url().rsplit(':').next().expect("a port").to_owned();
    kube.apply(volsync(
        TENANT_A,
        "api",
        &format!("rest:http://127.0.0.1:{port}/stolen"),
        json!({}),
    ));
    let repo = TestRepo::init_local();
    let dir = repo.dir.path();
    let kubeconfig = kube.write_kubeconfig(dir);
    let config = discover_config_with(dir, "", "volsync = true");
    let watching = watch(dir, &config, &kubeconfig, "lockwarden-0");
    let asked = came_within(Duration::from_secs(20), || {
        kube.requests()
            .iter()
            .any(|r| r.path.starts_with("/stolen"))
    });
    let log = stop(watching);
    assert!(asked, "the repository was never asked:\n{log}");
    let with_token: Vec<String> = kube
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with("/stolen") && r.authorization)
        .map(|r| r.path)
        .collect();
    assert!(
        with_token.is_empty(),
        "requests to the tenant's repository carried an Authorization: {with_token:?}"
    );
}

/// A server that answers every request with a 302 to `to`; counts the
/// requests.
fn redirecting(to: String) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a port");
    let addr = listener.local_addr().expect("addr").to_string();
    let asked = Arc::new(AtomicUsize::new(0));
    let count = asked.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            count.fetch_add(1, Ordering::SeqCst);
            let answer = format!(
                "HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
            let _ = stream.write_all(answer.as_bytes());
        }
    });
    (addr, asked)
}

/// A REST and an S3 storage that redirect every request to an internal
/// listener: lockwarden never follows.
#[test]
fn attack_a_redirect_to_an_internal_service_is_not_followed() {
    let internal = TcpListener::bind("127.0.0.1:0").expect("a port");
    internal.set_nonblocking(true).expect("nonblocking");
    let target = format!("http://{}/internal", internal.local_addr().expect("addr"));
    let (rest_at, rest_asked) = redirecting(target.clone());
    let (s3_at, s3_asked) = redirecting(target);
    let kube = KubeEmulator::start(&[]);
    kube.apply(volsync(
        TENANT_A,
        "rest",
        &format!("rest:http://{rest_at}/r"),
        json!({}),
    ));
    kube.apply(volsync(
        TENANT_A,
        "s3",
        &format!("s3:http://{s3_at}/bucket/r"),
        json!({"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"}),
    ));
    let repo = TestRepo::init_local();
    let dir = repo.dir.path();
    let kubeconfig = kube.write_kubeconfig(dir);
    let config = discover_config_with(dir, "", "volsync = true");
    let watching = watch(dir, &config, &kubeconfig, "lockwarden-0");
    let asked = came_within(Duration::from_secs(20), || {
        rest_asked.load(Ordering::SeqCst) >= 2 && s3_asked.load(Ordering::SeqCst) >= 2
    });
    std::thread::sleep(Duration::from_secs(1));
    let log = stop(watching);
    assert!(asked, "the storages were not asked twice:\n{log}");
    assert!(
        internal.accept().is_err(),
        "a redirect was followed to the internal service:\n{log}"
    );
}

/// Tenant A's own KubeStash BackupStorage on `bucket` (keys in Secret
/// `keys` of its namespace), Repository `r` at path `r` on it, and a
/// Snapshot saying its restic component's path is `component`.
fn kubestash_in_a(bucket: &Bucket, component: &str) -> Value {
    json!([
        {"apiVersion": "v1", "kind": "Secret",
         "metadata": {"name": "keys", "namespace": TENANT_A},
         "stringData": {"AWS_ACCESS_KEY_ID": S3_ACCESS_KEY_ID, "AWS_SECRET_ACCESS_KEY": S3_SECRET_KEY}},
        {"apiVersion": "v1", "kind": "Secret",
         "metadata": {"name": "enc", "namespace": TENANT_A},
         "stringData": {"RESTIC_PASSWORD": PASSWORD}},
        {"apiVersion": KUBESTASH, "kind": "BackupStorage",
         "metadata": {"name": "own", "namespace": TENANT_A},
         "spec": {"storage": {"provider": "s3", "s3": {
                      "secretName": "keys", "endpoint": format!("http://{}", bucket.addr()),
                      "bucket": bucket.name, "region": "us-east-1"}}}},
        {"apiVersion": KUBESTASH, "kind": "Repository",
         "metadata": {"name": "r", "namespace": TENANT_A},
         "spec": {"path": "r", "storageRef": {"name": "own", "namespace": TENANT_A},
                  "encryptionSecret": {"name": "enc", "namespace": TENANT_A}}},
        {"apiVersion": KUBESTASH, "kind": "Snapshot",
         "metadata": {"name": "r-1", "namespace": TENANT_A},
         "spec": {"repository": "r"},
         "status": {"components": {"c": {"driver": "Restic", "path": component}}}},
    ])
}

/// `watch` with metrics on `addr`.
fn watch_with_metrics(dir: &Path, kube: &KubeEmulator, addr: &str, discover: &str) -> Guarded {
    let kubeconfig = kube.write_kubeconfig(dir);
    let config = discover_config_with(dir, &format!("metrics_addr = \"{addr}\""), discover);
    watch(dir, &config, &kubeconfig, "lockwarden-0")
}

/// CONFIRMED (low): a KubeStash component path (a Snapshot's
/// `status.components.*.path`, which the tenant writes) reaches the
/// repository's name unchecked: the location rules (printable ASCII, no
/// `..`) are checked on the *joined and cleaned* location, so a path
/// `c/<anything>/..` cleans to `c` and passes, while the name keeps
/// `<anything>`: escape sequences, carriage returns, bidirectional
/// overrides and any length reach every `repository` label of /metrics
/// raw (logs and Events escape them; Prometheus labels do not), and one
/// 1 MiB Snapshot can give labels of a megabyte on every series of the
/// repository. Cause: operators/kubestash.rs `parts` (`part:
/// Some(component.clone())`), checked nowhere (location.rs sees only the
/// location). When written the repository was watched (its old lock
/// removed) under such a name; since fa24b5e it is refused.
#[test]
fn attack_a_component_path_puts_raw_controls_and_length_in_metric_labels() {
    let bucket = Store::S3.new_bucket();
    let repo = bucket.init_repo("r/c");
    let evil = format!("{}\u{1b}[2J\r\u{202e}evil", "x".repeat(64 * 1024));
    let component = format!("c/{evil}/..");
    let kube = KubeEmulator::start(&[]);
    kube.apply(kubestash_in_a(&bucket, &component));
    let old = LockWriter::new(&repo).write(LockSpec {
        hostname: "kubestash-x2b8q",
        time: time_from_now(-2 * 3600),
        ..LockSpec::default()
    });
    let addr = format!("127.0.0.1:{}", free_port());
    let dir = repo.dir.path();
    let watching = watch_with_metrics(dir, &kube, &addr, "kubestash = true");
    // Watched (its lock's series) or refused (the refusal's series): either
    // way its name is in /metrics.
    let metrics = scrape_until(&addr, |m| {
        m.contains("lockwarden_locks{") || m.contains("lockwarden_discovered_not_watched{")
    });
    let removed = !repo.lock_ids().contains(&old);
    let log = stop(watching);
    assert!(
        !removed || !log.contains("Repository/r/c/"),
        "watched under the tenant's name"
    );
    let longest = metrics
        .lines()
        .filter(|l| l.contains("repository=\""))
        .map(str::len)
        .max()
        .unwrap_or(0);
    let raw = metrics.contains(['\u{1b}', '\r', '\u{202e}']);
    assert!(
        !raw && longest < 4096,
        "a tenant's component path reached /metrics: raw controls {raw}, longest series line \
         {longest} bytes"
    );
}

/// CONFIRMED (blind every namespace's pod evidence): the same deep
/// nesting in a *pod* of tenant A (any tenant that may run a pod can write
/// its `metadata.managedFields`) fails the one cluster-wide pod list every
/// discovered repository's inventory is read from (kubernetes/pods.rs
/// `list_pods`, then `Kubernetes::page`'s `from_str`): every inventory
/// reading fails, so no tenant's gone pod's lock is ever removed by the
/// pod evidence. Tenant B's repository is watched, its check fails each
/// time, and its gone mover pod's lock stays.
#[test]
fn attack_a_deeply_nested_pod_blinds_every_namespaces_pod_evidence() {
    let kube = KubeEmulator::start(&[]);
    let victim = victim(&kube);
    kube.apply(json!([pod_in(TENANT_A, "app-7f9c4")]));
    let deep = format!(
        r#"{{"apiVersion":"v1","kind":"Pod",
            "metadata":{{"name":"deep","namespace":"{TENANT_A}",
              "managedFields":[{{"manager":"kubectl","operation":"Update",
                "apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{}}}]}},
            "spec":{{"containers":[{{"name":"app","image":"busybox"}}]}}}}"#,
        nested(200)
    );
    let status = create_raw(&kube, &format!("/api/v1/namespaces/{TENANT_A}/pods"), &deep);
    assert_eq!(status, 201, "the deep pod was not created");

    let (removed, log) = victim.watched(&kube);
    let blinded: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("recursion") || l.contains("pods"))
        .take(2)
        .collect();
    assert!(
        removed,
        "tenant A's one deep pod blinded tenant B's pod evidence: B's gone pod's lock was never \
         removed; watch said:\n{}",
        blinded.join("\n")
    );
}

/// How many objects the slow-round tenant creates, each naming its own
/// Secret that does not exist.
const SLOW_OBJECTS: usize = 6000;

/// CONFIRMED (delay every namespace's discovery): a discovery round reads
/// every object's Secret, one GET after another, before the fair share
/// is applied (watch/pool.rs `round` -> `Discovery::survey` ->
/// operators' `find` -> `ClusterView::secret`), with no bound per
/// namespace. Tenant A's objects, each naming a Secret of its own that
/// does not exist, make one round as long as that many GETs (25,000
/// objects a kind, 11 kinds, a few ms a GET on a real cluster: many
/// minutes), and tenant B's new repository waits for it.
///
/// Measured in requests, not seconds, so a busy machine cannot fail it:
/// tenant A's Secret reads between B's object's creation and its gone
/// pod's lock removed. A round's results are applied when it ends and a
/// round lists the objects before it reads a Secret, so without a bound
/// B waits for at least one whole round of A's reads, [`SLOW_OBJECTS`];
/// with the bound of [`limits::DISCOVERED_REPOSITORIES`] a namespace, a
/// round holds at most that many of A's, and B waits for the rest of one
/// round, its own and the rounds its first check overlaps.
#[test]
fn attack_many_objects_naming_missing_secrets_stretch_every_round() {
    let kube = KubeEmulator::start(&[]);
    let objects: Vec<Value> = (0..SLOW_OBJECTS)
        .map(|n| {
            json!({"apiVersion": VOLSYNC, "kind": "ReplicationSource",
                   "metadata": {"name": format!("slow-{n}"), "namespace": TENANT_A},
                   "spec": {"sourcePVC": "data", "restic": {"repository": format!("missing-{n}")}}})
        })
        .collect();
    for chunk in objects.chunks(1000) {
        kube.apply(Value::Array(chunk.to_vec()));
    }
    let repo = TestRepo::init_local();
    let dir = repo.dir.path();
    let kubeconfig = kube.write_kubeconfig(dir);
    let config = discover_config_with(dir, "", "volsync = true");
    let watching = watch(dir, &config, &kubeconfig, "lockwarden-0");
    let reads = || {
        kube.requests()
            .iter()
            .filter(|r| r.path.contains("/secrets/missing-"))
            .count()
    };
    // Let the first rounds pass (every missing Secret asked once).
    assert!(
        came_within(Duration::from_secs(120), || reads() >= SLOW_OBJECTS),
        "the first rounds never ended"
    );
    let before = reads();
    let started = Instant::now();
    let victim = victim(&kube);
    let removed = came_within(Duration::from_secs(120), || {
        !victim.repo.lock_ids().contains(&victim.gone)
    });
    let (during, took) = (reads() - before, started.elapsed());
    let log = stop(watching);
    assert!(
        removed,
        "B's lock was never removed:\n{}",
        &log[..log.len().min(3000)]
    );
    assert!(
        during < SLOW_OBJECTS,
        "tenant B's new repository waited behind {during} of tenant A's Secret reads ({took:?}), \
         a whole round of A's {SLOW_OBJECTS} objects: a round's reads of one namespace are not \
         bounded by {}",
        limits::DISCOVERED_REPOSITORIES
    );
}
