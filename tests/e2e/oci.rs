//! Policies distributed as OCI artifacts, against a real registry
//! (distribution 2.8) on 127.0.0.1.

use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use lockwarden_tests::lock_writer::{Encoding, LockSpec, LockWriter, time_from_now};
use lockwarden_tests::polyglot;
use lockwarden_tests::registry::{REGISTRY_PASS, REGISTRY_USER, RawArtifact, Registry, digest};
use lockwarden_tests::restic::TestRepo;
use lockwarden_tests::{Finished, finish, guests, lockwarden, shared_policy_cache};
use serde_json::Value;

/// `lockwarden policy push FILE REF --insecure-registry`, with the Docker
/// config taken from `docker_config` (never the user's own).
fn push(file: &Path, reference: &str, docker_config: &Path) -> Finished {
    let cache = tempfile::tempdir().expect("temp dir");
    finish(
        lockwarden(cache.path())
            .args(["policy", "push"])
            .arg(file)
            .args([reference, "--insecure-registry"])
            .env("DOCKER_CONFIG", docker_config),
    )
}

/// `lockwarden check --json --policy REF --insecure-registry` on `repo`.
fn check_with(repo: &TestRepo, policy: &str, docker_config: &Path) -> Finished {
    finish(
        repo.lockwarden("check")
            .args(["--json", "--insecure-registry", "--policy", policy])
            .env("DOCKER_CONFIG", docker_config),
    )
}

/// A repository holding one lock 31 minutes old that nobody vouches for.
fn repo_with_stale_lock() -> (TestRepo, String) {
    let repo = TestRepo::init_local();
    let id = LockWriter::new(&repo).write(LockSpec {
        time: time_from_now(-31 * 60),
        hostname: "gone-host",
        pid: 7,
        encoding: Encoding::Raw,
        ..LockSpec::default()
    });
    (repo, id)
}

/// `manifest` of `lockwarden/default` in `registry` is in the layout wkg,
/// wasmCloud and Spin read: a wasm config and one application/wasm layer
/// holding exactly the component at `component`.
fn assert_wasm_layout(registry: &Registry, manifest: &Value, component: &Path) {
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.wasm.config.v0+json"
    );
    let layers = manifest["layers"].as_array().expect("layers");
    assert_eq!(layers.len(), 1, "{manifest:#}");
    assert_eq!(layers[0]["mediaType"], "application/wasm");
    let component = std::fs::read(component).expect("read the component");
    assert_eq!(layers[0]["digest"], digest(&component));
    let config: Value = serde_json::from_slice(
        &registry.blob(
            "lockwarden/default",
            manifest["config"]["digest"]
                .as_str()
                .expect("config digest"),
        ),
    )
    .expect("config JSON");
    assert_eq!(config["architecture"], "wasm");
    assert_eq!(config["os"], "wasip2");
    assert_eq!(config["layerDigests"][0], layers[0]["digest"]);
    let exports = config["component"]["exports"].as_array().expect("exports");
    assert!(
        exports.iter().any(|e| e
            .as_str()
            .is_some_and(|e| e.starts_with("lockwarden:policy/policy@"))),
        "{config:#}"
    );
    assert!(config["created"].is_string(), "{config:#}");
    assert_eq!(
        manifest["annotations"]["org.opencontainers.image.title"],
        "lockwarden-default"
    );
}

#[test]
fn the_default_policy_is_pushed_and_checks_a_repository_by_digest() {
    let dir = tempfile::tempdir().expect("temp dir");
    let registry = Registry::start(dir.path());
    let docker = dir.path().join("docker");
    let default = guests::DEFAULT.path();
    let reference = format!("oci://{}/lockwarden/default:0.1.0", registry.host);
    let out = push(default, &reference, &docker);
    assert_eq!(out.code, 0, "{out:?}");
    let pinned = out.stdout.trim().to_owned();
    let (manifest, manifest_digest) = registry.manifest("lockwarden/default", "0.1.0");
    assert_eq!(pinned, format!("{reference}@{manifest_digest}"));

    assert_wasm_layout(&registry, &manifest, default);

    let (repo, stale) = repo_with_stale_lock();
    let out = check_with(&repo, &pinned, &docker);
    assert_eq!(out.code, 3, "{out:?}");
    let (_, doc) = out.json();
    assert_eq!(doc["policy"]["source"], pinned.as_str(), "{doc:#}");
    assert_eq!(doc["locks"][0]["id"], stale.as_str());
    assert_eq!(doc["locks"][0]["rule"], "expired");

    // Pinned and stored: the registry is no longer needed.
    drop(registry);
    let out = check_with(&repo, &pinned, &docker);
    assert_eq!(
        out.code, 3,
        "a pinned policy must not be fetched again: {out:?}"
    );
    // A tag must be resolved, so it needs the registry: a clear error, and
    // nothing is removed.
    let out = finish(
        repo.lockwarden("unlock")
            .args(["--insecure-registry", "--policy", &reference])
            .env("DOCKER_CONFIG", &docker),
    );
    out.assert_exit(1, "cannot reach registry");
    assert!(repo.lock_ids().contains(&stale), "nothing may be removed");
}

#[test]
fn a_tampered_layer_is_refused_and_nothing_runs() {
    let dir = tempfile::tempdir().expect("temp dir");
    let registry = Registry::start(dir.path());
    let docker = dir.path().join("docker");
    let reference = format!("oci://{}/lockwarden/default:tampered", registry.host);
    let out = push(guests::DEFAULT.path(), &reference, &docker);
    assert_eq!(out.code, 0, "{out:?}");
    let pinned = out.stdout.trim().to_owned();
    // Swap the stored layer for another component: the registry serves it
    // under the old digest.
    let layer = digest(&std::fs::read(guests::DEFAULT.path()).expect("read"));
    std::fs::copy(guests::STRICT.path(), registry.blob_file(&layer))
        .expect("tamper with the layer");

    let (repo, stale) = repo_with_stale_lock();
    let out = finish(
        repo.lockwarden("unlock")
            .args(["--insecure-registry", "--policy", &pinned])
            .env("DOCKER_CONFIG", &docker),
    );
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains("the layer of") && out.stderr.contains("does not match its digest"),
        "{}",
        out.stderr
    );
    assert!(repo.lock_ids().contains(&stale), "nothing may be removed");

    // A digest the registry does not have is named as missing.
    let unknown = format!(
        "oci://{}/lockwarden/default@{}",
        registry.host,
        digest(b"other")
    );
    let out = check_with(&repo, &unknown, &docker);
    out.assert_exit(1, "does not exist in the registry");
}

#[test]
fn artifacts_that_are_not_components_are_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let registry = Registry::start(dir.path());
    let docker = dir.path().join("docker");
    let (repo, stale) = repo_with_stale_lock();
    let core_module = b"\0asm\x01\0\0\0";
    let wasm_config = "application/vnd.wasm.config.v0+json";
    let cases = [
        (
            RawArtifact {
                repository: "lockwarden/odd",
                tag: "core",
                config_type: wasm_config,
                layer_type: "application/wasm",
                layer: &core_module[..],
            },
            "core WebAssembly module",
        ),
        (
            RawArtifact {
                repository: "lockwarden/odd",
                tag: "image",
                config_type: "application/vnd.oci.image.config.v1+json",
                layer_type: "application/vnd.oci.image.layer.v1.tar+gzip",
                layer: b"not wasm",
            },
            "is not a WebAssembly component artifact",
        ),
        (
            RawArtifact {
                repository: "lockwarden/odd",
                tag: "json",
                config_type: wasm_config,
                layer_type: "application/wasm",
                layer: b"{}",
            },
            "magic number",
        ),
    ];
    for (artifact, says) in cases {
        registry.push_raw(&artifact);
        let tag = artifact.tag;
        let reference = format!("oci://{}/lockwarden/odd:{tag}", registry.host);
        let out = check_with(&repo, &reference, &docker);
        assert_eq!(out.code, 1, "{tag}: {out:?}");
        assert!(out.stderr.contains(says), "{tag}: {}", out.stderr);
    }
    assert!(repo.lock_ids().contains(&stale), "nothing may be removed");

    // lockwarden refuses to publish what is not a policy.
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "hello").expect("write");
    let out = push(
        &text,
        &format!("oci://{}/lockwarden/odd:text", registry.host),
        &docker,
    );
    out.assert_exit(2, "refusing to push");
}

#[test]
fn credentials_come_from_the_docker_config() {
    let dir = tempfile::tempdir().expect("temp dir");
    let registry = Registry::start_with_auth(dir.path());
    let reference = format!("oci://{}/private/default:1", registry.host);
    let anonymous = dir.path().join("no-docker-config");
    let out = push(guests::DEFAULT.path(), &reference, &anonymous);
    out.assert_exit(1, "docker login");

    let docker = dir.path().join("docker");
    std::fs::create_dir_all(&docker).expect("docker config dir");
    let auth = STANDARD.encode(format!("{REGISTRY_USER}:{REGISTRY_PASS}"));
    std::fs::write(
        docker.join("config.json"),
        format!(
            r#"{{"auths": {{"{}": {{"auth": "{auth}"}}}}}}"#,
            registry.host
        ),
    )
    .expect("write config.json");
    let out = push(guests::DEFAULT.path(), &reference, &docker);
    assert_eq!(out.code, 0, "{out:?}");
    let pinned = out.stdout.trim().to_owned();
    let (repo, _) = repo_with_stale_lock();
    assert_eq!(check_with(&repo, &pinned, &docker).code, 3);
    let out = check_with(&repo, &reference, &anonymous);
    out.assert_exit(1, "refused access");
}

#[test]
fn plain_http_only_on_loopback_and_only_when_asked() {
    let dir = tempfile::tempdir().expect("temp dir");
    let registry = Registry::start(dir.path());
    let docker = dir.path().join("docker");
    let (repo, _) = repo_with_stale_lock();
    let remote = "oci://registry.example.com/lockwarden/default:1";
    let out = check_with(&repo, remote, &docker);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr
            .contains("only allowed for registries on this machine"),
        "{}",
        out.stderr
    );

    let local = format!("oci://{}/lockwarden/default:1", registry.host);
    let out = finish(
        repo.lockwarden("check")
            .args(["--policy", &local])
            .env("DOCKER_CONFIG", &docker),
    );
    out.assert_exit(1, "--insecure-registry");

    let out = finish(
        repo.lockwarden("check")
            .args(["--policy", "oci://ghcr.io/org/p"]),
    );
    out.assert_exit(2, "neither a tag nor a digest");
}

/// Over HTTPS (no `--insecure-registry`): the certificate is checked against
/// the trusted roots (`SSL_CERT_FILE` here), so the push and the pull work
/// with the registry's CA trusted, and fail with a clear error, not a panic,
/// without it.
#[test]
fn a_registry_over_https_is_used_when_its_certificate_is_trusted() {
    let dir = tempfile::tempdir().expect("temp dir");
    let registry = Registry::start_tls(dir.path());
    let ca = registry.ca.clone().expect("a CA");
    let docker = dir.path().join("docker");
    let reference = format!("oci://{}/lockwarden/default:tls", registry.host);
    let push_tls = |trust: &Path| {
        let cache = tempfile::tempdir().expect("temp dir");
        lockwarden_tests::guard::finish_guarded(
            lockwarden(cache.path())
                .args(["policy", "push"])
                .arg(guests::DEFAULT.path())
                .arg(&reference)
                .env("DOCKER_CONFIG", &docker)
                .env("SSL_CERT_FILE", trust)
                .env_remove("SSL_CERT_DIR"),
        )
    };

    // No trusted root at all: a message, not a panic.
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "").expect("empty bundle");
    let none = push_tls(&empty);
    none.assert_exit(1, "cannot set up TLS");
    assert!(none.stderr.contains("SSL_CERT_FILE"), "{none:?}");
    // A FIFO, which the TLS stack would wait on forever, and /dev/zero,
    // which never ends: refused without being opened.
    let fifo = dir.path().join("fifo.pem");
    lockwarden_tests::adversary::mkfifo(&fifo);
    for special in [fifo.as_path(), Path::new("/dev/zero")] {
        let out = push_tls(special);
        out.assert_exit(1, "is not a regular file");
    }
    // The system's roots, which do not include the test CA.
    let untrusted = push_tls(Path::new("/etc/ssl/certs/ca-certificates.crt"));
    untrusted.assert_exit(1, "certificate");
    for out in [&none, &untrusted] {
        assert!(!out.stderr.contains("panicked"), "{out:?}");
    }

    let out = push_tls(&ca);
    assert_eq!(out.code, 0, "{out:?}");
    let pinned = out.stdout.trim().to_owned();
    let (repo, stale) = repo_with_stale_lock();
    let out = finish(
        repo.lockwarden("check")
            .args(["--json", "--policy", &pinned])
            .env("DOCKER_CONFIG", &docker)
            .env("SSL_CERT_FILE", &ca),
    );
    assert_eq!(out.code, 3, "{out:?}");
    let (_, doc) = out.json();
    assert_eq!(doc["locks"][0]["id"], stale.as_str());
}

/// The strict example in Python and in JavaScript travels like any policy:
/// pushed (after lockwarden has loaded it), pulled by digest, and judging a
/// real repository's stale lock by its rules.
#[test]
fn python_and_javascript_policies_are_pushed_and_run_from_the_registry() {
    let dir = tempfile::tempdir().expect("temp dir");
    let registry = Registry::start(dir.path());
    let docker = dir.path().join("docker");
    // Compiling the Python component takes seconds: one cache for all.
    let cache = shared_policy_cache();
    for (policy, name) in [
        (polyglot::STRICT_PYTHON, "lockwarden-strict-example-python"),
        (polyglot::STRICT_JS, "lockwarden-strict-example-js"),
    ] {
        let reference = format!("oci://{}/lockwarden/{name}:0.2.0", registry.host);
        let out = finish(
            lockwarden(&cache)
                .args(["policy", "push"])
                .arg(policy.path())
                .args([&reference, "--insecure-registry"])
                .env("DOCKER_CONFIG", &docker),
        );
        assert_eq!(out.code, 0, "{policy}: {out:?}");
        let pinned = out.stdout.trim().to_owned();
        let (repo, stale) = repo_with_stale_lock();
        let out = finish(
            repo.lockwarden("unlock")
                .args(["--json", "--insecure-registry", "--policy", &pinned])
                .env("DOCKER_CONFIG", &docker)
                .env("LOCKWARDEN_CACHE_DIR", &cache),
        );
        assert_eq!(out.code, 0, "{policy}: {out:?}");
        let (_, doc) = out.json();
        assert_eq!(doc["policy"]["name"], name, "{doc:#}");
        assert_eq!(doc["locks"][0]["id"], stale.as_str());
        assert_eq!(doc["locks"][0]["rule"], "expired", "{doc:#}");
        assert!(!repo.lock_ids().contains(&stale), "{policy}: removed");
    }
}
