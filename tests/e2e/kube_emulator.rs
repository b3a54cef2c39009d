//! The Kubernetes API emulator (lockwarden_tests::kube_emulator) behaves as
//! the API server does where lockwarden's tests rely on it: lists carry their
//! kind and page, a Secret's stringData becomes base64 data, a replace with a
//! stale resourceVersion is a 409 Conflict, a watch delivers what changed,
//! injected 403s look like RBAC's, and every request is logged with whether
//! it carried a token. lockwarden itself is not run here.

use std::path::Path;
use std::time::Duration;

use lockwarden_tests::kube_emulator::{KUBE_TOKEN, KubeEmulator};
use serde_json::{Value, json};

/// A fixture file with two pods and a Secret given as stringData.
fn write_fixture(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("cluster.yaml");
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  namespace: apps\n  labels: {tier: web}\n\
         ---\n\
         apiVersion: v1\nkind: Pod\nmetadata:\n  name: b\n  namespace: apps\n  labels: {tier: db}\n\
         ---\n\
         apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\n  namespace: apps\n\
         stringData:\n  password: hunter2\n",
    )
    .expect("write fixture");
    path
}

fn names(list: &Value) -> Vec<&str> {
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|item| item["metadata"]["name"].as_str().expect("a name"))
        .collect()
}

#[test]
fn kube_emulator_lists_like_the_api_server() {
    let dir = tempfile::tempdir().expect("temp dir");
    let fixture = write_fixture(dir.path());
    let kube = KubeEmulator::start(&[&fixture]);
    eprintln!("kube emulator started in {:?}", kube.process().started_in());

    let pods = kube.list("/api/v1/pods");
    assert_eq!(pods["kind"], "PodList", "{pods}");
    assert_eq!(pods["apiVersion"], "v1", "{pods}");
    assert!(
        pods["metadata"]["resourceVersion"]
            .as_str()
            .is_some_and(|rv| rv.parse::<u64>().is_ok()),
        "{pods}"
    );
    assert_eq!(names(&pods), ["a", "b"]);
    for pod in pods["items"].as_array().expect("items") {
        assert_eq!(pod["kind"], "Pod", "{pod}");
        assert_eq!(pod["apiVersion"], "v1", "{pod}");
        assert!(pod["metadata"]["uid"].is_string(), "{pod}");
        assert!(pod["metadata"]["creationTimestamp"].is_string(), "{pod}");
    }

    // Pages, and selectors.
    let first = kube.list("/api/v1/namespaces/apps/pods?limit=1");
    assert_eq!(names(&first), ["a"]);
    let token = first["metadata"]["continue"]
        .as_str()
        .expect("a continue token");
    let rest = kube.list(&format!(
        "/api/v1/namespaces/apps/pods?limit=1&continue={token}"
    ));
    assert_eq!(names(&rest), ["b"]);
    assert!(rest["metadata"].get("continue").is_none(), "{rest}");
    assert_eq!(
        names(&kube.list("/api/v1/pods?labelSelector=tier%3Ddb")),
        ["b"]
    );
    assert_eq!(
        names(&kube.list("/api/v1/pods?fieldSelector=metadata.name%3Da")),
        ["a"]
    );

    // Discovery says what the API server says.
    let (status, core) = kube.get("/api/v1");
    assert_eq!(status, 200);
    assert_eq!(core["groupVersion"], "v1", "{core}");
    let (status, velero) = kube.get("/apis/velero.io/v1");
    assert_eq!(status, 200);
    assert_eq!(velero["groupVersion"], "velero.io/v1", "{velero}");
    let bsl = velero["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["name"] == "backupstoragelocations")
        .expect("backupstoragelocations");
    assert_eq!(bsl["kind"], "BackupStorageLocation");
    assert_eq!(bsl["namespaced"], true);
    assert!(
        bsl["verbs"]
            .as_array()
            .expect("verbs")
            .contains(&json!("watch"))
    );

    // Every request so far carried the token.
    let requests = kube.requests();
    assert_eq!(requests.len(), 7, "{requests:?}");
    assert!(
        requests.iter().all(|r| r.authorization && r.status == 200),
        "{requests:?}"
    );
}

#[test]
fn kube_emulator_folds_string_data_into_data() {
    let dir = tempfile::tempdir().expect("temp dir");
    let fixture = write_fixture(dir.path());
    let kube = KubeEmulator::start(&[&fixture]);
    let secret = |name: &str| kube.get(&format!("/api/v1/namespaces/apps/secrets/{name}"));

    // From the fixture.
    let (status, creds) = secret("creds");
    assert_eq!(status, 200, "{creds}");
    assert_eq!(creds["data"]["password"], "aHVudGVyMg==", "{creds}");
    assert!(creds.get("stringData").is_none(), "{creds}");
    assert_eq!(creds["type"], "Opaque", "{creds}");

    // Created through the API.
    let (status, created) = kube.api(
        "POST",
        "/api/v1/namespaces/apps/secrets",
        Some(
            &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "other"},
                     "stringData": {"token": "abc"}}),
        ),
    );
    assert_eq!(status, 201, "{created}");
    let (_, other) = secret("other");
    assert_eq!(other["data"]["token"], "YWJj", "{other}");
    assert!(other.get("stringData").is_none(), "{other}");

    // Created again: 409 AlreadyExists, as a Status.
    let (status, again) = kube.api("POST", "/api/v1/namespaces/apps/secrets", Some(&other));
    assert_eq!(status, 409, "{again}");
    assert_eq!(again["kind"], "Status", "{again}");
    assert_eq!(again["reason"], "AlreadyExists", "{again}");
}

#[test]
fn kube_emulator_refuses_a_stale_resource_version() {
    let kube = KubeEmulator::start(&[]);
    kube.apply(
        json!({"apiVersion": "velero.io/v1", "kind": "BackupStorageLocation",
                      "metadata": {"name": "default", "namespace": "velero"},
                      "spec": {"provider": "aws"}, "status": {"phase": "Available"}}),
    );
    let path = "/apis/velero.io/v1/namespaces/velero/backupstoragelocations/default";
    let (_, stale) = kube.get(path);

    let mut newer = stale.clone();
    newer["spec"]["default"] = json!(true);
    let (status, updated) = kube.api("PUT", path, Some(&newer));
    assert_eq!(status, 200, "{updated}");
    let before: u64 = stale["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .parse()
        .expect("a number");
    let after: u64 = updated["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .parse()
        .expect("a number");
    assert!(after > before, "{stale} then {updated}");
    assert_eq!(updated["metadata"]["generation"], 2, "{updated}");
    assert_eq!(updated["status"]["phase"], "Available", "{updated}");

    let mut late = stale.clone();
    late["spec"]["provider"] = json!("gcp");
    let (status, conflict) = kube.api("PUT", path, Some(&late));
    assert_eq!(status, 409, "{conflict}");
    assert_eq!(conflict["kind"], "Status", "{conflict}");
    assert_eq!(conflict["reason"], "Conflict", "{conflict}");
    let (_, now) = kube.get(path);
    assert_eq!(now["spec"]["provider"], "aws", "{now}");
}

#[test]
fn kube_emulator_watch_delivers_changes() {
    let kube = KubeEmulator::start(&[]);
    let listed = kube.list("/apis/k8up.io/v1/namespaces/backups/schedules");
    let rv = listed["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_owned();

    // From the list's resourceVersion: what changed since, then live events.
    kube.apply(json!({"apiVersion": "k8up.io/v1", "kind": "Schedule",
                      "metadata": {"name": "nightly", "namespace": "backups"}}));
    let mut watch = kube.watch(&format!(
        "/apis/k8up.io/v1/namespaces/backups/schedules?watch=true&resourceVersion={rv}&timeoutSeconds=5"
    ));
    let added = watch.next().expect("an event");
    assert_eq!(added["type"], "ADDED", "{added}");
    assert_eq!(added["object"]["kind"], "Schedule", "{added}");
    assert_eq!(added["object"]["metadata"]["name"], "nightly", "{added}");

    std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(300));
            kube.delete("k8up.io/v1", "Schedule", Some("backups"), "nightly");
        });
        let deleted = watch.next().expect("an event");
        assert_eq!(deleted["type"], "DELETED", "{deleted}");
        assert_eq!(
            deleted["object"]["metadata"]["name"], "nightly",
            "{deleted}"
        );
    });
    // timeoutSeconds ends it.
    assert!(watch.next().is_none());
}

#[test]
fn kube_emulator_forbids_as_rbac_does() {
    let dir = tempfile::tempdir().expect("temp dir");
    let fixture = write_fixture(dir.path());
    let kube = KubeEmulator::start(&[&fixture]);
    kube.forbid("list", "secrets", Some("apps"), None);

    let (status, denied) = kube.get("/api/v1/namespaces/apps/secrets");
    assert_eq!(status, 403, "{denied}");
    assert_eq!(denied["kind"], "Status", "{denied}");
    assert_eq!(denied["reason"], "Forbidden", "{denied}");
    assert!(
        denied["message"]
            .as_str()
            .is_some_and(|m| m.contains("cannot list resource \"secrets\"")),
        "{denied}"
    );
    // Other verbs and namespaces are not affected.
    assert_eq!(kube.get("/api/v1/namespaces/apps/secrets/creds").0, 200);
    assert_eq!(kube.get("/api/v1/namespaces/apps/pods").0, 200);

    // The kubeconfig names this server and the token.
    let kubeconfig =
        std::fs::read_to_string(kube.write_kubeconfig(dir.path())).expect("kubeconfig");
    assert!(
        kubeconfig.contains(&format!("server: {}", kube.url())),
        "{kubeconfig}"
    );
    assert!(
        kubeconfig.contains(&format!("token: {KUBE_TOKEN}")),
        "{kubeconfig}"
    );
    assert!(
        kubeconfig.contains("current-context: lockwarden-emulator"),
        "{kubeconfig}"
    );

    let logged = kube.requests();
    assert_eq!(
        logged.iter().filter(|r| r.status == 403).count(),
        1,
        "{logged:?}"
    );
    assert!(logged.iter().all(|r| r.authorization), "{logged:?}");

    kube.reset();
    assert_eq!(kube.get("/api/v1/namespaces/apps/secrets").0, 200);
    assert_eq!(kube.requests().len(), 1);
}
