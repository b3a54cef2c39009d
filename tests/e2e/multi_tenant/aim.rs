//! Aiming lockwarden: a tenant's VolSync Secret says where its repository
//! is, so the tenant chooses the host and path of lockwarden's requests
//! (docs/kubernetes.md, "What a tenant can point lockwarden at"). A
//! location restic would not be handed from an operator's object is refused
//! before any request; an accepted one's answers are never quoted; its
//! requests never go through lockwarden's proxy; a lock's hostname and
//! username reach its Event escaped.

use std::net::TcpListener;
use std::path::Path;

use lockwarden_tests::discovery::{
    discover_config_with, event_reasons, events_on, pod_in, stop, wait_for,
};
use lockwarden_tests::fake_rest::{FakeRest, Reply};
use lockwarden_tests::guard::Guarded;
use lockwarden_tests::kube_emulator::KubeEmulator;
use lockwarden_tests::lock_writer::{Encoding, LockWriter, time_from_now};
use lockwarden_tests::lockwarden;
use lockwarden_tests::restic::{PASSWORD, TestRepo};
use serde_json::{Value, json};

use super::TENANT_A;

/// What the "internal service" and the accepted storage answer: it must
/// never reach a log line or an Event.
const ANSWER: &str = "internal-answer-Zq8vT3wK";

/// A VolSync ReplicationSource `name` in [`TENANT_A`] whose Secret holds
/// `location` and the test password.
fn volsync(name: &str, location: &str) -> Value {
    json!([
        {"apiVersion": "v1", "kind": "Secret",
         "metadata": {"name": format!("{name}-restic"), "namespace": TENANT_A},
         "stringData": {"RESTIC_REPOSITORY": location, "RESTIC_PASSWORD": PASSWORD}},
        {"apiVersion": "volsync.backube/v1alpha1", "kind": "ReplicationSource",
         "metadata": {"name": name, "namespace": TENANT_A},
         "spec": {"sourcePVC": "data", "restic": {"repository": format!("{name}-restic")}}},
    ])
}

/// A listener that answers nothing: whether anyone connected is what it
/// tells ([`connected`]).
fn listener() -> TcpListener {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a port");
    listener.set_nonblocking(true).expect("nonblocking");
    listener
}

/// Whether anyone connected to `listener`.
fn connected(listener: &TcpListener) -> bool {
    listener.accept().is_ok()
}

/// `watch` as pod `lockwarden-0`, with every proxy variable naming `proxy`.
fn watch_behind_proxy(dir: &Path, config: &Path, kubeconfig: &Path, proxy: &str) -> Guarded {
    let mut command = lockwarden(&dir.join("cache"));
    command
        .args(["watch", "--config"])
        .arg(config)
        .env("KUBECONFIG", kubeconfig)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("POD_NAMESPACE", "lockwarden")
        .env("POD_NAME", "lockwarden-0");
    for name in ["ALL_PROXY", "HTTPS_PROXY", "HTTP_PROXY"] {
        command.env(name, proxy).env(name.to_lowercase(), proxy);
    }
    command.env_remove("NO_PROXY").env_remove("no_proxy");
    Guarded::spawn(&mut command)
}

/// The messages of every Event in [`TENANT_A`].
fn messages(kube: &KubeEmulator) -> String {
    kube.list(&format!("/api/v1/namespaces/{TENANT_A}/events"))["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["message"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Three tenant repositories, with every proxy variable of lockwarden's
/// naming a listener:
/// - `aimed`: `rest:` at an "internal service" with a query, which would
///   replace restic's paths: refused with its reason logged, never
///   requested;
/// - `answers`: a REST server whose `keys/` listing is an internal
///   answer: its checks fail, and the answer is in no log line or Event;
/// - `escaped`: a gone pod's lock whose hostname holds an escape sequence
///   and a bidirectional override and whose username a newline: removed,
///   its Event's message shows them escaped.
///
/// No request went through the proxy.
#[test]
fn a_tenant_aims_lockwarden_nowhere_and_reads_no_answer() {
    let kube = KubeEmulator::start(&[]);
    let internal = listener();
    let proxy = listener();
    let internal_at = internal.local_addr().expect("addr");
    kube.apply(volsync(
        "aimed",
        &format!("rest:http://{internal_at}/secret/path?x=1"),
    ));
    let answering = TestRepo::init_local();
    let answers = FakeRest::start(&answering.path, |_, path| match path {
        "keys/" => Reply::Body("application/json", format!("\"{ANSWER}\"").into_bytes()),
        _ => Reply::Default,
    });
    kube.apply(volsync("answers", &answers.location));
    let repo = TestRepo::init_local();
    let server = FakeRest::start(&repo.path, |_, _| Reply::Default);
    kube.apply(volsync("escaped", &server.location));
    // A running mover pod: the pods are an inventory that speaks for the
    // operator's pod names.
    kube.apply(json!([pod_in(TENANT_A, "volsync-src-other-7f9c4")]));
    let lock = json!({
        "time": time_from_now(-60), "exclusive": false,
        "hostname": "volsync-src-e\u{1b}[2J\u{202e}vil-x2b8q",
        "username": "root\nforged line", "pid": 1, "uid": 0, "gid": 0,
    });
    let gone = LockWriter::new(&repo).write_json(&lock.to_string(), Encoding::Zstd);

    let dir = repo.dir.path();
    let config = discover_config_with(dir, "[notify]\nfailing_after = 1", "volsync = true");
    let kubeconfig = kube.write_kubeconfig(dir);
    let proxy_url = format!("http://{}", proxy.local_addr().expect("addr"));
    let watch = watch_behind_proxy(dir, &config, &kubeconfig, &proxy_url);
    let watch = wait_for(watch, "the escaped lock is removed", || {
        !repo.lock_ids().contains(&gone)
    });
    let watch = wait_for(watch, "Events on both repositories", || {
        event_reasons(&kube, TENANT_A, "ReplicationSource", "escaped")
            .contains(&"StaleLockRemoved".to_owned())
            && event_reasons(&kube, TENANT_A, "ReplicationSource", "answers")
                .contains(&"LockChecksFailing".to_owned())
    });
    let log = stop(watch);

    assert!(!connected(&internal), "the internal service was requested");
    assert!(
        !connected(&proxy),
        "a request went through lockwarden's proxy"
    );
    assert!(
        log.contains("tenant-a/ReplicationSource/aimed")
            && log.contains("its repository location has a query"),
        "no refusal logged:\n{log}"
    );
    let events = messages(&kube);
    for (what, text) in [("log", &log), ("Events", &events)] {
        assert!(
            !text.contains(ANSWER),
            "an answer reached the {what}:\n{text}"
        );
        assert!(
            !text.contains("secret/path"),
            "the location reached the {what}:\n{text}"
        );
    }
    let removed = events_on(&kube, TENANT_A, "ReplicationSource", "escaped");
    let message = removed
        .iter()
        .find(|e| e["reason"] == "StaleLockRemoved")
        .and_then(|e| e["message"].as_str())
        .expect("a message");
    for escaped in ["root\\nforged line", "e\\u{1b}[2J\\u{202e}vil"] {
        assert!(message.contains(escaped), "{escaped} not in {message}");
    }
    assert!(
        !message.contains(['\n', '\u{1b}', '\u{202e}']),
        "raw controls in {message:?}"
    );
}
