//! A real Kubernetes API server for the end-to-end tests: kube-apiserver
//! over etcd, both built from their Go modules by `scripts/kube-tools.sh`
//! (`make kube`, part of `make setup`) into a cache outside the checkout.
//!
//! [`KubeApiServer::start`] starts etcd and then kube-apiserver on free
//! ports of 127.0.0.1, each under the watchdog of [`crate::cloud::process`]
//! (killed when the value is dropped or the test process ends), and waits
//! until `/readyz` answers 200. The server speaks TLS with a certificate
//! for `127.0.0.1` and `localhost` from a CA made for the run
//! ([`KubeApiServer::ca_pem`]), which clients verify. It authenticates a
//! static admin token ([`KUBE_ADMIN_TOKEN`], in `system:masters`) and
//! service account tokens ([`KubeApiServer::service_account_token`]), and
//! authorizes with RBAC: a service account may do nothing until a binding
//! grants it.
//!
//! Starting takes seconds, so tests share one server per test process
//! ([`KubeApiServer::shared`]), each in namespaces of its own
//! ([`KubeApiServer::new_namespace`]).
//!
//! Only the API server runs: no controller manager and no scheduler. So a
//! namespace stays `Terminating` once deleted, nothing is garbage-collected
//! through owner references, a new namespace gets no `default` service
//! account and no `kube-root-ca.crt`, and pods are never scheduled (their
//! status is whatever the test writes to the `status` subresource).

use std::collections::HashMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::certs::PrivateCa;
use crate::cloud::process::ServerProcess;
use crate::kubeconfig::Kubeconfig;

/// The static bearer token of the cluster's administrator (user
/// `lockwarden-admin`, group `system:masters`), distinctive so that tests
/// can assert it never appears in any output.
pub const KUBE_ADMIN_TOKEN: &str = "lockwarden-kube-admin-Hs4kP9wQ2mZ7";

/// The field manager of [`KubeApiServer::admin_apply`].
pub const FIELD_MANAGER: &str = "lockwarden-tests";

/// The service account tokens' issuer (and the API's audience).
const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// How long etcd and the API server together may take to become ready.
const READY_TIMEOUT: Duration = Duration::from_secs(90);
/// How long one API call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(20);
/// How long [`KubeApiServer::admin_apply`] waits for a kind to be served
/// (a custom resource's definition just created, say).
const SERVED_TIMEOUT: Duration = Duration::from_secs(30);
/// How many lines of a server's log a startup failure shows.
const LOG_TAIL: usize = 60;
/// The prefix of the run directories in the system's temporary directory,
/// followed by the test process's pid.
const RUN_DIR_PREFIX: &str = "lockwarden-kube-apiserver-";

/// The directory of the tools `scripts/kube-tools.sh` builds: the
/// `LOCKWARDEN_KUBE_TOOLS` environment variable (the Makefile sets it to
/// what the script prints with `--dir`), else what the script prints.
pub fn kube_tools_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("LOCKWARDEN_KUBE_TOOLS") {
        return PathBuf::from(dir);
    }
    let script = Path::new(crate::TESTS_DIR).join("../scripts/kube-tools.sh");
    let output = Command::new(&script)
        .arg("--dir")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    assert!(
        output.status.success(),
        "{} --dir failed: {}",
        script.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&output.stdout).trim())
}

/// The path of a tool `scripts/kube-tools.sh` builds: `kube-apiserver`,
/// `etcd` or `helm`. Panics when it has not been built.
pub fn kube_tool(name: &str) -> PathBuf {
    let path = kube_tools_dir().join(name);
    assert!(
        path.is_file(),
        "{} is missing: build the Kubernetes tools with `make kube` (scripts/kube-tools.sh)",
        path.display()
    );
    path
}

/// A running API server and its etcd.
pub struct KubeApiServer {
    // Fields drop in order: the servers are stopped before their
    // directory is removed.
    apiserver: ServerProcess,
    etcd: ServerProcess,
    /// `https://127.0.0.1:<port>`.
    url: String,
    ca_pem: String,
    agent: ureq::Agent,
    started_in: Duration,
    /// `(apiVersion, kind)` to `(plural, namespaced)`, from discovery.
    resources: Mutex<HashMap<(String, String), (String, bool)>>,
    /// Numbers the namespaces of [`KubeApiServer::new_namespace`].
    namespaces: AtomicUsize,
    /// Removes `dir` once the test process has ended (the shared server is
    /// never dropped); see [`remove_when_done`].
    _cleaner: Mutex<(Child, ChildStdin)>,
    /// The certificates, keys, token file, etcd's data and both logs.
    dir: tempfile::TempDir,
}

impl KubeApiServer {
    /// The server of this test process, started on first use. Tests that
    /// share it keep to namespaces of their own
    /// ([`new_namespace`](Self::new_namespace)) and name cluster-wide
    /// objects uniquely.
    pub fn shared() -> &'static KubeApiServer {
        static SERVER: OnceLock<KubeApiServer> = OnceLock::new();
        SERVER.get_or_init(KubeApiServer::start)
    }

    /// Starts etcd and an API server of their own, and waits until the API
    /// server is ready (its RBAC roles bootstrapped). Panics, with the end
    /// of their logs, when they do not start.
    pub fn start() -> KubeApiServer {
        let begin = Instant::now();
        let etcd_bin = kube_tool("etcd");
        let apiserver_bin = kube_tool("kube-apiserver");
        sweep_run_dirs();
        let dir = tempfile::Builder::new()
            .prefix(&format!("{RUN_DIR_PREFIX}{}-", std::process::id()))
            .tempdir()
            .expect("a temporary directory");
        let cleaner = remove_when_done(dir.path());
        let path = |name: &str| dir.path().join(name).display().to_string();
        let certs = PrivateCa::make_in(dir.path());
        make_service_account_key(dir.path());
        std::fs::write(
            dir.path().join("tokens.csv"),
            format!("{KUBE_ADMIN_TOKEN},lockwarden-admin,lockwarden-admin,system:masters\n"),
        )
        .expect("write the token file");

        let client_port = crate::restic::free_port();
        let peer_port = crate::restic::free_port();
        let client_url = format!("http://127.0.0.1:{client_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let etcd_args = [
            "--name=lockwarden".to_owned(),
            format!("--data-dir={}", path("etcd")),
            format!("--listen-client-urls={client_url}"),
            format!("--advertise-client-urls={client_url}"),
            format!("--listen-peer-urls={peer_url}"),
            format!("--initial-advertise-peer-urls={peer_url}"),
            format!("--initial-cluster=lockwarden={peer_url}"),
            // Test data: nothing needs to survive a crash of the machine.
            "--unsafe-no-fsync".to_owned(),
            "--log-level=warn".to_owned(),
        ];
        let etcd = start_logged(
            "etcd",
            format!("127.0.0.1:{client_port}"),
            &etcd_bin,
            &etcd_args,
            &dir.path().join("etcd.log"),
        );

        let port = crate::restic::free_port();
        let apiserver_args = [
            "--bind-address=127.0.0.1".to_owned(),
            "--advertise-address=127.0.0.1".to_owned(),
            format!("--secure-port={port}"),
            format!("--etcd-servers={client_url}"),
            format!("--tls-cert-file={}", certs.server_cert.display()),
            format!("--tls-private-key-file={}", certs.server_key.display()),
            format!("--token-auth-file={}", path("tokens.csv")),
            "--anonymous-auth=false".to_owned(),
            "--authorization-mode=RBAC".to_owned(),
            format!("--service-account-issuer={ISSUER}"),
            format!("--service-account-key-file={}", path("sa.key")),
            format!("--service-account-signing-key-file={}", path("sa.key")),
            "--service-cluster-ip-range=10.0.0.0/24".to_owned(),
            // The Endpoints of the `kubernetes` service would name
            // 127.0.0.1, which their validation refuses: reconcile none.
            "--endpoint-reconciler-type=none".to_owned(),
            // Less to bootstrap and run; nothing here needs either.
            "--enable-priority-and-fairness=false".to_owned(),
            "--profiling=false".to_owned(),
        ];
        let apiserver = start_logged(
            "kube-apiserver",
            format!("127.0.0.1:{port}"),
            &apiserver_bin,
            &apiserver_args,
            &dir.path().join("kube-apiserver.log"),
        );

        let ca_pem = certs.pem;
        let ca =
            ureq::tls::Certificate::from_pem(ca_pem.as_bytes()).expect("the CA certificate is PEM");
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(CALL_TIMEOUT))
            .http_status_as_error(false)
            .tls_config(
                ureq::tls::TlsConfig::builder()
                    .root_certs(ureq::tls::RootCerts::new_with_certs(&[ca]))
                    .build(),
            )
            .build()
            .into();
        let mut server = KubeApiServer {
            apiserver,
            etcd,
            url: format!("https://127.0.0.1:{port}"),
            ca_pem,
            agent,
            started_in: Duration::ZERO,
            resources: Mutex::new(HashMap::new()),
            namespaces: AtomicUsize::new(0),
            _cleaner: Mutex::new(cleaner),
            dir,
        };
        server.wait_until_ready(begin);
        server.started_in = begin.elapsed();
        server
    }

    fn wait_until_ready(&self, begin: Instant) {
        loop {
            let last = match self.try_call(KUBE_ADMIN_TOKEN, "GET", "/readyz?verbose", None, "") {
                Ok((200, _)) => return,
                Ok((status, body)) => format!("{status}: {body}"),
                Err(e) => e,
            };
            if begin.elapsed() > READY_TIMEOUT {
                panic!(
                    "kube-apiserver was not ready within {READY_TIMEOUT:?}; /readyz: {last}\n\
                     --- end of kube-apiserver's log ---\n{}\n--- end of etcd's log ---\n{}",
                    tail(&self.dir.path().join("kube-apiserver.log")),
                    tail(&self.dir.path().join("etcd.log")),
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `https://127.0.0.1:<port>`, the cluster's server.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The PEM of the CA that signed the server's certificate.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// How long [`start`](Self::start) took, etcd included.
    pub fn started_in(&self) -> Duration {
        self.started_in
    }

    /// The API server's process.
    pub fn process(&self) -> &ServerProcess {
        &self.apiserver
    }

    /// The etcd process.
    pub fn etcd(&self) -> &ServerProcess {
        &self.etcd
    }

    /// The API server's log so far (its standard output and error).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("kube-apiserver.log")).unwrap_or_default()
    }

    /// A fresh namespace, `<prefix>-<n>`, created.
    pub fn new_namespace(&self, prefix: &str) -> String {
        let n = self.namespaces.fetch_add(1, Ordering::Relaxed);
        let name = format!("{prefix}-{n}");
        self.admin_apply(&json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name},
        }));
        name
    }

    /// Creates `object`, or makes it what it says where it exists, as the
    /// administrator: a server-side apply (field manager [`FIELD_MANAGER`],
    /// conflicts forced) of an object with `apiVersion`, `kind` and
    /// `metadata.name` (and `metadata.namespace`, else `default`, when the
    /// kind is namespaced), or of a `kind: List` of them. Waits for a kind
    /// not served yet (a custom resource whose definition was just applied)
    /// to be served. Returns the object as stored (a list's, as a JSON
    /// array). Panics when the server refuses it.
    pub fn admin_apply(&self, object: &Value) -> Value {
        if object["kind"] == "List" {
            let items = object["items"].as_array().cloned().unwrap_or_default();
            return Value::Array(items.iter().map(|item| self.admin_apply(item)).collect());
        }
        let deadline = Instant::now() + SERVED_TIMEOUT;
        loop {
            let path = self.object_path(object, deadline);
            let query = format!("{path}?fieldManager={FIELD_MANAGER}&force=true");
            let (status, body) = self.call_as(
                KUBE_ADMIN_TOKEN,
                "PATCH",
                &query,
                Some(object),
                "application/apply-patch+yaml",
            );
            match status {
                200 | 201 => return body,
                // The kind is listed but not yet served (a custom resource's
                // definition being established); a missing namespace is not
                // waited for.
                404 if body["details"]["kind"] != "namespaces" && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(200));
                }
                _ => panic!("apply {path}: {status}: {body}"),
            }
        }
    }

    /// `GET path` as the administrator: the answer's status and body (JSON,
    /// or a string when it is not JSON).
    pub fn admin_get(&self, path: &str) -> (u16, Value) {
        self.call_as(KUBE_ADMIN_TOKEN, "GET", path, None, "")
    }

    /// `DELETE path` as the administrator: the answer's status and body.
    pub fn admin_delete(&self, path: &str) -> (u16, Value) {
        self.call_as(KUBE_ADMIN_TOKEN, "DELETE", path, None, "")
    }

    /// `method path` with `token` and a JSON body (a merge patch for
    /// `PATCH`): the answer's status and body (JSON, or a string when it is
    /// not JSON).
    pub fn call(
        &self,
        token: &str,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> (u16, Value) {
        let content_type = if method == "PATCH" {
            "application/merge-patch+json"
        } else {
            "application/json"
        };
        self.call_as(token, method, path, body, content_type)
    }

    /// A token of the service account `namespace/name` from the TokenRequest
    /// API (valid for two hours, for the API server's audience). Creates
    /// the namespace and the account when they do not exist.
    pub fn service_account_token(&self, namespace: &str, name: &str) -> String {
        self.admin_apply(&json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": namespace},
        }));
        self.admin_apply(&json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": namespace},
        }));
        let path = format!("/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token");
        let request = json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 7200},
        });
        let (status, body) = self.call(KUBE_ADMIN_TOKEN, "POST", &path, Some(&request));
        assert_eq!(status, 201, "POST {path}: {body}");
        body["status"]["token"]
            .as_str()
            .unwrap_or_else(|| panic!("POST {path}: no token: {body}"))
            .to_owned()
    }

    /// Writes `dir/kubeconfig`, as kubectl writes one: a cluster with this
    /// server and its CA, a user with the bearer `token`, a context
    /// (namespace `default`) and the current context. Returns its path.
    pub fn kubeconfig(&self, dir: &Path, token: &str) -> PathBuf {
        Kubeconfig {
            name: "lockwarden-test",
            server: &self.url,
            ca_pem: Some(&self.ca_pem),
            token,
        }
        .write(dir)
    }

    /// The path of `object` (`/api/v1/namespaces/ns/secrets/name`, say),
    /// from discovery, waiting until `deadline` for its kind to be listed.
    fn object_path(&self, object: &Value, deadline: Instant) -> String {
        let api_version = object["apiVersion"]
            .as_str()
            .unwrap_or_else(|| panic!("apply: no apiVersion: {object}"));
        let kind = object["kind"]
            .as_str()
            .unwrap_or_else(|| panic!("apply: no kind: {object}"));
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_else(|| panic!("apply: no metadata.name: {object}"));
        let (plural, namespaced) = self.resource(api_version, kind, deadline);
        let prefix = if api_version.contains('/') {
            format!("/apis/{api_version}")
        } else {
            format!("/api/{api_version}")
        };
        if namespaced {
            let namespace = object["metadata"]["namespace"]
                .as_str()
                .unwrap_or("default");
            format!("{prefix}/namespaces/{namespace}/{plural}/{name}")
        } else {
            format!("{prefix}/{plural}/{name}")
        }
    }

    /// The plural of `kind` in `api_version` and whether it is namespaced,
    /// from discovery (cached), waiting until `deadline` for it to be listed.
    fn resource(&self, api_version: &str, kind: &str, deadline: Instant) -> (String, bool) {
        let key = (api_version.to_owned(), kind.to_owned());
        if let Some(found) = self.resources.lock().expect("lock").get(&key) {
            return found.clone();
        }
        let path = if api_version.contains('/') {
            format!("/apis/{api_version}")
        } else {
            format!("/api/{api_version}")
        };
        loop {
            let (status, body) = self.admin_get(&path);
            if status == 200 {
                let mut resources = self.resources.lock().expect("lock");
                for resource in body["resources"].as_array().into_iter().flatten() {
                    let (Some(plural), Some(kind)) =
                        (resource["name"].as_str(), resource["kind"].as_str())
                    else {
                        continue;
                    };
                    if plural.contains('/') {
                        continue; // a subresource
                    }
                    let namespaced = resource["namespaced"].as_bool().unwrap_or(false);
                    resources.insert(
                        (api_version.to_owned(), kind.to_owned()),
                        (plural.to_owned(), namespaced),
                    );
                }
                if let Some(found) = resources.get(&key) {
                    return found.clone();
                }
            }
            assert!(
                Instant::now() < deadline,
                "{api_version} {kind} is not served: GET {path}: {status}: {body}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// `method path` with `token` and `body` as `content_type`; panics when
    /// there is no answer.
    fn call_as(
        &self,
        token: &str,
        method: &str,
        path: &str,
        body: Option<&Value>,
        content_type: &str,
    ) -> (u16, Value) {
        self.try_call(token, method, path, body, content_type)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn try_call(
        &self,
        token: &str,
        method: &str,
        path: &str,
        body: Option<&Value>,
        content_type: &str,
    ) -> Result<(u16, Value), String> {
        let url = format!("{}{path}", self.url);
        let request = ureq::http::Request::builder()
            .method(method)
            .uri(&url)
            .header("Authorization", format!("Bearer {token}"))
            .header("Accept", "application/json");
        let result = match body {
            Some(body) => self.agent.run(
                request
                    .header("Content-Type", content_type)
                    .body(body.to_string())
                    .map_err(|e| format!("{method} {url}: {e}"))?,
            ),
            None => self.agent.run(
                request
                    .body(())
                    .map_err(|e| format!("{method} {url}: {e}"))?,
            ),
        };
        let mut response = result.map_err(|e| format!("{method} {url}: {e}"))?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .read_to_string()
            .map_err(|e| format!("{method} {url}: reading the answer: {e}"))?;
        let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Ok((status, value))
    }
}

/// Starts `program args` under the watchdog with its output written to
/// `log` as well (through `tee`: the watchdog keeps the first lines for
/// its message when the server does not listen; the file keeps them all).
fn start_logged(
    what: &'static str,
    addr: String,
    program: &Path,
    args: &[String],
    log: &Path,
) -> ServerProcess {
    let mut wrapped = vec![
        "-c".to_owned(),
        r#"log=$1; shift; "$@" 2>&1 | tee "$log""#.to_owned(),
        "sh".to_owned(),
        log.display().to_string(),
        program.display().to_string(),
    ];
    wrapped.extend(args.iter().cloned());
    ServerProcess::start(what, addr, Path::new("sh"), &wrapped, &[])
}

/// The last lines of the file at `path`.
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(LOG_TAIL)..].join("\n")
}

/// Starts a process, in a process group of its own, that removes `dir` a
/// second after its standard input closes: when the returned handle is
/// dropped or the test process ends, however it ends, and the watchdogs
/// have killed etcd and the API server (etcd's log preallocates 64 MB).
fn remove_when_done(dir: &Path) -> (Child, ChildStdin) {
    let mut child = Command::new("sh")
        .args(["-c", r#"cat >/dev/null; sleep 1; rm -rf -- "$1""#, "sh"])
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start sh: {e}"));
    let lifeline = child.stdin.take().expect("the cleaner's stdin");
    (child, lifeline)
}

/// Removes the run directories of test processes that have ended whose
/// cleaner did not (it was killed too, say).
fn sweep_run_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(RUN_DIR_PREFIX)) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().filter(|p| !p.is_empty()) else {
            continue;
        };
        if !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Makes, in `dir`, the service accounts' signing key (`sa.key`, P-256).
fn make_service_account_key(dir: &Path) {
    // SEC1 ("EC PRIVATE KEY"): the API server reads the public key of
    // --service-account-key-file from it, not from PKCS#8.
    crate::certs::openssl(
        dir,
        &[
            "ecparam",
            "-name",
            "prime256v1",
            "-genkey",
            "-noout",
            "-out",
            "sa.key",
        ],
    );
}
