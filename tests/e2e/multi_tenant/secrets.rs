//! A tenant's objects name only what its own namespace holds: a KubeStash
//! Repository may use another namespace's BackupStorage only where its
//! `usagePolicy` allows the tenant, never another namespace's encryption
//! Secret; what is refused is never read, is said on the tenant's own
//! object, and one namespace cannot take every discovery slot.

use serde_json::{Value, json};

use lockwarden_tests::cloud::{Bucket, S3_ACCESS_KEY_ID, S3_SECRET_KEY, Store};
use lockwarden_tests::discovery::{discover_config_with, event_reasons, stop, wait_for, watch};
use lockwarden_tests::kube_emulator::KubeEmulator;
use lockwarden_tests::lock_writer::{LockSpec, LockWriter, time_from_now};
use lockwarden_tests::restic::{PASSWORD, TestRepo};

use super::{EXCLUDED, OPERATOR, TENANT_A, TENANT_B};

const KUBESTASH: &str = "storage.kubestash.com/v1alpha1";

/// A Secret `name` in `namespace` holding `data`.
fn secret(namespace: &str, name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret",
           "metadata": {"name": name, "namespace": namespace}, "stringData": data})
}

/// A BackupStorage `name` in [`OPERATOR`] on `bucket`, its keys in Secret
/// `keys`, with `policy` as its usagePolicy.
fn storage(bucket: &Bucket, name: &str, keys: &str, policy: Value) -> Value {
    json!({"apiVersion": KUBESTASH, "kind": "BackupStorage",
           "metadata": {"name": name, "namespace": OPERATOR},
           "spec": {"storage": {"provider": "s3", "s3": {
                        "secretName": keys, "endpoint": format!("http://{}", bucket.addr()),
                        "bucket": bucket.name, "region": "us-east-1"}},
                    "usagePolicy": policy}})
}

/// A Repository `name` of [`TENANT_A`] at `path` on BackupStorage
/// `storage` of [`OPERATOR`], its password in `secret_ns`/`enc`, and the
/// Snapshot that says its component `c` is restic's.
fn repository(name: &str, path: &str, storage: &str, secret_ns: &str) -> [Value; 2] {
    [
        json!({"apiVersion": KUBESTASH, "kind": "Repository",
               "metadata": {"name": name, "namespace": TENANT_A},
               "spec": {"path": path, "storageRef": {"name": storage, "namespace": OPERATOR},
                        "encryptionSecret": {"name": "enc", "namespace": secret_ns}}}),
        json!({"apiVersion": KUBESTASH, "kind": "Snapshot",
               "metadata": {"name": format!("{name}-1"), "namespace": TENANT_A},
               "spec": {"repository": name},
               "status": {"components": {"c": {"driver": "Restic", "path": "c"}}}}),
    ]
}

/// A lock two hours old (KubeStash's pods follow no pattern: its locks go
/// by age) in `repo`.
fn old_lock(repo: &TestRepo) -> String {
    LockWriter::new(repo).write(LockSpec {
        hostname: "kubestash-x2b8q",
        time: time_from_now(-2 * 3600),
        ..LockSpec::default()
    })
}

/// Tenant A's Repositories on a shared BackupStorage that allows every
/// namespace are watched; one naming tenant B's or an excluded namespace's
/// encryption Secret, and one on a BackupStorage that allows only its own
/// namespace, are refused before anything there is read, with a log line,
/// a metric and an Event on tenant A's own object, and their stale locks
/// stay.
#[test]
fn a_tenant_reads_only_what_its_namespace_holds_or_is_granted() {
    let bucket = Store::S3.new_bucket();
    let allowed = bucket.init_repo("allowed/c");
    let stolen = bucket.init_repo("private/c");
    let keys =
        json!({"AWS_ACCESS_KEY_ID": S3_ACCESS_KEY_ID, "AWS_SECRET_ACCESS_KEY": S3_SECRET_KEY});
    let kube = KubeEmulator::start(&[]);
    let mut objects = vec![
        secret(OPERATOR, "shared-keys", keys.clone()),
        secret(OPERATOR, "private-keys", keys),
        storage(
            &bucket,
            "shared",
            "shared-keys",
            json!({"allowedNamespaces": {"from": "All"}}),
        ),
        storage(&bucket, "private", "private-keys", Value::Null),
    ];
    for namespace in [TENANT_A, TENANT_B, EXCLUDED] {
        objects.push(secret(
            namespace,
            "enc",
            json!({"RESTIC_PASSWORD": PASSWORD}),
        ));
    }
    objects.extend(repository("allowed", "allowed", "shared", TENANT_A));
    objects.extend(repository("steal-password", "allowed", "shared", TENANT_B));
    objects.extend(repository(
        "excluded-password",
        "allowed",
        "shared",
        EXCLUDED,
    ));
    objects.extend(repository("steal-storage", "private", "private", TENANT_A));
    kube.apply(Value::Array(objects));
    let (allowed_lock, stolen_lock) = (old_lock(&allowed), old_lock(&stolen));
    let dir = allowed.dir.path();
    let kubeconfig = kube.write_kubeconfig(dir);
    let config = discover_config_with(
        dir,
        "",
        &format!("kubestash = true\nexclude_namespaces = [\"{EXCLUDED}\"]"),
    );
    let watching = watch(dir, &config, &kubeconfig, "lockwarden-0");
    let refused = ["steal-password", "excluded-password", "steal-storage"];
    let watching = wait_for(
        watching,
        "the allowed lock removed, the refusals told",
        || {
            !allowed.lock_ids().contains(&allowed_lock)
                && refused.iter().all(|name| {
                    event_reasons(&kube, TENANT_A, "Repository", name)
                        .contains(&"RepositoryNotWatched".to_owned())
                })
        },
    );
    let log = stop(watching);
    assert!(stolen.lock_ids().contains(&stolen_lock), "{log}");
    let read: Vec<String> = kube.requests().into_iter().map(|r| r.path).collect();
    for path in [
        format!("/api/v1/namespaces/{TENANT_B}/secrets/enc"),
        format!("/api/v1/namespaces/{EXCLUDED}/secrets/enc"),
        format!("/api/v1/namespaces/{OPERATOR}/secrets/private-keys"),
    ] {
        assert!(!read.contains(&path), "{path} was read: {read:?}");
    }
    for (name, why) in [
        (
            "steal-password",
            "Secret enc in namespace tenant-b, another namespace",
        ),
        ("excluded-password", "where discovery does not look"),
        (
            "steal-storage",
            "BackupStorage private in namespace backup-system, another namespace",
        ),
    ] {
        let line = log
            .lines()
            .find(|l| {
                l.contains(&format!("{TENANT_A}/Repository/{name}")) && l.contains("not watched")
            })
            .unwrap_or_else(|| panic!("no refusal of {name}:\n{log}"));
        assert!(line.contains(why), "{line}");
    }
    assert!(!log.contains(PASSWORD), "{log}");
}

/// One namespace with more repositories than its share of
/// `max_repositories` gets its share; another tenant's repository is
/// watched all the same and its gone holder's lock removed.
#[test]
fn one_namespace_cannot_take_every_discovery_slot() {
    let bucket = Store::S3.new_bucket();
    let repo = bucket.init_repo("b");
    let kube = KubeEmulator::start(&[]);
    let source = |namespace: &str, name: &str, location: &str| {
        [
            secret(
                namespace,
                &format!("{name}-restic"),
                json!({
                "RESTIC_REPOSITORY": location, "RESTIC_PASSWORD": PASSWORD,
                "AWS_ACCESS_KEY_ID": S3_ACCESS_KEY_ID, "AWS_SECRET_ACCESS_KEY": S3_SECRET_KEY}),
            ),
            json!({"apiVersion": "volsync.backube/v1alpha1", "kind": "ReplicationSource",
                   "metadata": {"name": name, "namespace": namespace},
                   "spec": {"restic": {"repository": format!("{name}-restic")}}}),
        ]
    };
    let mut objects: Vec<Value> = source(TENANT_B, "data", &repo.location).into();
    objects.push(lockwarden_tests::discovery::pod_in(
        TENANT_B,
        "volsync-src-data-7f9c4",
    ));
    for n in 0..6 {
        let location = format!("{}-hog-{n}", repo.location);
        objects.extend(source(TENANT_A, &format!("hog-{n}"), &location));
    }
    kube.apply(Value::Array(objects));
    let gone = LockWriter::new(&repo).write(LockSpec {
        hostname: "volsync-src-data-x2b8q",
        ..LockSpec::default()
    });
    let dir = repo.dir.path();
    let kubeconfig = kube.write_kubeconfig(dir);
    let config = discover_config_with(dir, "", "volsync = true\nmax_repositories = 3");
    let watching = watch(dir, &config, &kubeconfig, "lockwarden-0");
    let watching = wait_for(watching, "tenant B's gone holder's lock removed", || {
        !repo.lock_ids().contains(&gone)
    });
    let log = stop(watching);
    let over_share = log
        .lines()
        .filter(|l| l.contains("not watched") && l.contains("than its fair share"))
        .count();
    assert_eq!(over_share, 4, "tenant A should keep 2 of 3 slots:\n{log}");
}
