//! Discovery of repositories on a storage whose TLS certificate a private
//! CA signs (moto over HTTPS, `S3Server::shared_tls`): the CA an object
//! names is trusted for its repository alone; a repository whose object
//! names none fails its checks with a message that says why; an object that
//! turns verification off is watched only where watch.toml allows it.

use lockwarden_tests::cloud::{S3_ACCESS_KEY_ID, S3_SECRET_KEY, S3Server};
use lockwarden_tests::discovery::{
    discover_config_with, event_reasons, events_on, pod_in, stop, wait_for, watch,
};
use lockwarden_tests::kube_emulator::KubeEmulator;
use lockwarden_tests::lock_writer::{LockSpec, LockWriter};
use lockwarden_tests::restic::{PASSWORD, TestRepo};
use serde_json::{Value, json};

/// A VolSync ReplicationSource `name` in namespace `app` whose Secret holds
/// `repo` (with its keys), with `custom_ca` as its `spec.restic.customCA`.
fn replication_source(name: &str, repo: &TestRepo, custom_ca: Option<Value>) -> Value {
    let mut restic = json!({"repository": format!("{name}-restic")});
    if let Some(custom_ca) = custom_ca {
        restic["customCA"] = custom_ca;
    }
    json!([
        {"apiVersion": "v1", "kind": "Secret",
         "metadata": {"name": format!("{name}-restic"), "namespace": "app"},
         "stringData": {"RESTIC_REPOSITORY": repo.location, "RESTIC_PASSWORD": PASSWORD,
                        "AWS_ACCESS_KEY_ID": S3_ACCESS_KEY_ID,
                        "AWS_SECRET_ACCESS_KEY": S3_SECRET_KEY}},
        {"apiVersion": "volsync.backube/v1alpha1", "kind": "ReplicationSource",
         "metadata": {"name": name, "namespace": "app"},
         "spec": {"sourcePVC": "data", "restic": restic}},
    ])
}

/// The lock of a mover pod of `name` that the API does not list.
fn gone_lock(repo: &TestRepo, name: &str) -> String {
    LockWriter::new(repo).write(LockSpec {
        hostname: &format!("volsync-src-{name}-x2b8q"),
        ..LockSpec::default()
    })
}

/// The CA a ReplicationSource names, in a Secret or a ConfigMap of its
/// namespace, is trusted for its repository: the stale locks go. The same
/// storage for an object that names no CA fails its checks, and the
/// message (in the log and the `LockChecksFailing` Event) says the
/// certificate's issuer is not trusted and that no CA was named, not that
/// "the connection failed"; its lock stays. The CA of one object is not
/// trusted for another's repository.
#[test]
fn a_ca_the_object_names_is_trusted_for_its_repository_alone() {
    let server = S3Server::shared_tls();
    let ca = server.ca().expect("an HTTPS server's CA");
    let bucket = server.new_bucket();
    let by_secret = bucket.init_repo("by-secret");
    let by_map = bucket.init_repo("by-map");
    let none = bucket.init_repo("none");
    let kube = KubeEmulator::start(&[]);
    kube.apply(json!([
        {"apiVersion": "v1", "kind": "Secret",
         "metadata": {"name": "storage-ca", "namespace": "app"},
         "stringData": {"ca.crt": ca.pem}},
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "storage-ca", "namespace": "app"},
         "data": {"ca.crt": ca.pem}},
    ]));
    kube.apply(replication_source(
        "by-secret",
        &by_secret,
        Some(json!({"secretName": "storage-ca", "key": "ca.crt"})),
    ));
    kube.apply(replication_source(
        "by-map",
        &by_map,
        Some(json!({"configMapName": "storage-ca", "key": "ca.crt"})),
    ));
    kube.apply(replication_source("none", &none, None));
    // A running mover pod: the pods are an inventory that speaks for
    // VolSync's pod names.
    kube.apply(pod_in("app", "volsync-src-other-7f9c4"));
    let by_secret_lock = gone_lock(&by_secret, "by-secret");
    let by_map_lock = gone_lock(&by_map, "by-map");
    let none_lock = gone_lock(&none, "none");

    let dir = by_secret.dir.path();
    let config = discover_config_with(dir, "[notify]\nfailing_after = 1", "volsync = true");
    let kubeconfig = kube.write_kubeconfig(dir);
    let watch = watch(dir, &config, &kubeconfig, "lockwarden-0");
    let watch = wait_for(watch, "the stale locks behind the named CA go", || {
        !by_secret.lock_ids().contains(&by_secret_lock) && !by_map.lock_ids().contains(&by_map_lock)
    });
    let watch = wait_for(watch, "the checks of the object without a CA fail", || {
        event_reasons(&kube, "app", "ReplicationSource", "none")
            .contains(&"LockChecksFailing".to_owned())
    });
    let log = stop(watch);

    assert!(
        none.lock_ids().contains(&none_lock),
        "a lock was removed from a storage whose certificate was not checked:\n{log}"
    );
    let failing: Vec<String> = events_on(&kube, "app", "ReplicationSource", "none")
        .iter()
        .filter(|e| e["reason"] == "LockChecksFailing")
        .filter_map(|e| e["message"].as_str().map(str::to_owned))
        .collect();
    let said = "the server's certificate is not signed by a CA lockwarden trusts";
    let no_ca = "no CA of the repository's own is named";
    assert!(
        failing
            .iter()
            .any(|m| m.contains(said) && m.contains(no_ca)),
        "the Event does not name the certificate problem: {failing:?}"
    );
    assert!(
        log.contains("app/ReplicationSource/none") && log.contains(said),
        "the log does not name the certificate problem:\n{log}"
    );
    assert!(!log.contains("the connection failed"), "{log}");
    for other in ["by-secret", "by-map"] {
        let reasons = event_reasons(&kube, "app", "ReplicationSource", other);
        assert!(
            reasons.contains(&"StaleLockRemoved".to_owned())
                && !reasons.contains(&"LockChecksFailing".to_owned()),
            "{other}: {reasons:?}\n{log}"
        );
    }
    assert!(!log.contains(PASSWORD), "the password reached the log");
    assert!(!log.contains(S3_SECRET_KEY), "the key reached the log");
}

/// A Stash Repository whose backend says `insecureTLS: true` is refused
/// (the refusal names the field and the setting that would allow it) while
/// watch.toml does not allow it, and its lock stays; with
/// `allow_insecure_tls = true` it is watched, with a warning, and its stale
/// lock goes. A CA that does not parse is refused with the field's name.
#[test]
fn an_object_that_turns_tls_verification_off_is_watched_only_where_allowed() {
    let server = S3Server::shared_tls();
    let bucket = server.new_bucket();
    let repo = bucket.init_repo("insecure");
    let broken = bucket.init_repo("broken");
    let kube = KubeEmulator::start(&[]);
    let stash = |name: &str, insecure: bool, extra: Value| {
        let mut secret = json!({"RESTIC_PASSWORD": PASSWORD,
                                "AWS_ACCESS_KEY_ID": S3_ACCESS_KEY_ID,
                                "AWS_SECRET_ACCESS_KEY": S3_SECRET_KEY});
        if let (Some(secret), Some(extra)) = (secret.as_object_mut(), extra.as_object()) {
            secret.extend(extra.clone());
        }
        json!([
            {"apiVersion": "v1", "kind": "Secret",
             "metadata": {"name": format!("{name}-s3"), "namespace": "app"},
             "stringData": secret},
            {"apiVersion": "stash.appscode.com/v1alpha1", "kind": "Repository",
             "metadata": {"name": name, "namespace": "app"},
             "spec": {"backend": {"storageSecretName": format!("{name}-s3"),
                                  "s3": {"endpoint": server.endpoint, "bucket": bucket.name,
                                         "prefix": name, "insecureTLS": insecure}}}},
        ])
    };
    kube.apply(stash("insecure", true, json!({})));
    kube.apply(pod_in("app", "stash-backup-other-0-7f9c4"));
    kube.apply(stash(
        "broken",
        false,
        json!({"CA_CERT_DATA": "-----BEGIN CERTIFICATE-----\nbm90LWEtY2VydA==\n-----END CERTIFICATE-----\n"}),
    ));
    let lock = LockWriter::new(&repo).write(LockSpec {
        hostname: "stash-backup-insecure-0-x2b8q",
        ..LockSpec::default()
    });
    let broken_lock = LockWriter::new(&broken).write(LockSpec {
        hostname: "stash-backup-broken-0-x2b8q",
        ..LockSpec::default()
    });
    let dir = repo.dir.path();
    let kubeconfig = kube.write_kubeconfig(dir);
    let not_watched = |name: &str| {
        event_reasons(&kube, "app", "Repository", name).contains(&"RepositoryNotWatched".to_owned())
    };

    let refused = discover_config_with(dir, "", "stash = true");
    let first = watch(dir, &refused, &kubeconfig, "lockwarden-0");
    let first = wait_for(first, "both objects are refused", || {
        not_watched("insecure") && not_watched("broken")
    });
    let log = stop(first);
    assert!(repo.lock_ids().contains(&lock), "{log}");
    assert!(
        log.contains("app/Repository/insecure")
            && log
                .contains("its spec.backend.s3.insecureTLS turns TLS certificate verification off")
            && log.contains("allow_insecure_tls = true"),
        "the refusal does not say which field and setting:\n{log}"
    );
    assert!(
        log.contains("its key CA_CERT_DATA of Secret app/broken-s3 holds a certificate"),
        "the broken CA is not named:\n{log}"
    );
    assert!(
        !log.contains("bm90LWEtY2VydA"),
        "the CA's content was quoted:\n{log}"
    );

    let allowed = discover_config_with(dir, "", "stash = true\nallow_insecure_tls = true");
    let second = watch(dir, &allowed, &kubeconfig, "lockwarden-0");
    let second = wait_for(second, "the insecure repository's stale lock goes", || {
        !repo.lock_ids().contains(&lock)
    });
    let log = stop(second);
    assert!(
        log.contains("TLS certificates are not verified for")
            && log.contains("spec.backend.s3.insecureTLS"),
        "no warning:\n{log}"
    );
    assert!(
        broken.lock_ids().contains(&broken_lock),
        "the repository with a broken CA was watched:\n{log}"
    );
}
