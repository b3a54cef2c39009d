//! A Kubernetes API server for the end-to-end tests: `tests/servers/kube_emulator.py`
//! (on kmock, from the servers venv that `make servers` installs), one per
//! [`KubeEmulator`], on 127.0.0.1 over plain HTTP, killed when the value is
//! dropped or the test process ends (see [`crate::cloud::process`]).
//!
//! It serves discovery, list (kind, `limit`/`continue`, label and field
//! selectors), watch, get, create, update, patch and delete for core v1 and
//! the groups lockwarden reads (Velero, Stash, KubeStash, K8up, VolSync,
//! Leases, Events), with a real `resourceVersion` (409 on a stale one).
//! Every API request must carry `Authorization: Bearer` [`KUBE_TOKEN`] (401
//! otherwise). Tests set the cluster up with [`KubeEmulator::apply`] or
//! fixture files, inject failures with [`KubeEmulator::forbid`] and
//! [`KubeEmulator::fail`], and read what was asked with
//! [`KubeEmulator::requests`]. The header of the Python file lists what the
//! real API server does that it does not.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::cloud::process::ServerProcess;
use crate::kubeconfig::Kubeconfig;

/// The bearer token the emulator requires and the kubeconfig carries,
/// distinctive so that tests can assert it never appears in any output.
pub const KUBE_TOKEN: &str = "lockwarden-kube-token-Qw7tZ2xV9pL4";

/// How long a control call may take.
const CONTROL_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest a watch opened by [`KubeEmulator::watch`] may stay open.
const WATCH_TIMEOUT: Duration = Duration::from_secs(120);

/// A running emulator.
pub struct KubeEmulator {
    process: ServerProcess,
    /// `http://127.0.0.1:<port>`.
    url: String,
    agent: ureq::Agent,
}

/// One API request the emulator answered (control calls are not logged).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeRequest {
    /// `GET`, `POST`, ...
    pub method: String,
    /// `/api/v1/namespaces/ns/pods`, say.
    pub path: String,
    /// The query string, undecoded (`watch=true&resourceVersion=12`).
    pub query: String,
    /// Whether it had an `Authorization` header.
    pub authorization: bool,
    /// The HTTP status it was answered with (0 when the answer was cut).
    pub status: u16,
}

impl KubeEmulator {
    /// Starts an emulator holding the objects of `fixtures` (multi-document
    /// YAML, or JSON when the name ends in `.json`; an object, a list, or a
    /// `kind: List`); namespaces they name are created. Panics when it does
    /// not start.
    pub fn start(fixtures: &[&Path]) -> KubeEmulator {
        let python = servers_venv().join("bin/python");
        assert!(
            python.exists(),
            "the test servers' venv is not installed ({} is missing): run `make servers`",
            python.display()
        );
        let script = PathBuf::from(crate::TESTS_DIR).join("servers/kube_emulator.py");
        let port = crate::restic::free_port();
        let mut args = vec![
            script.display().to_string(),
            "--port".to_owned(),
            port.to_string(),
            "--token".to_owned(),
            KUBE_TOKEN.to_owned(),
        ];
        for fixture in fixtures {
            args.push("--fixture".to_owned());
            args.push(fixture.display().to_string());
        }
        let addr = format!("127.0.0.1:{port}");
        let process = ServerProcess::start(
            "kube-emulator",
            addr.clone(),
            &python,
            &args,
            &[("PYTHONUNBUFFERED", "1")],
        );
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(CONTROL_TIMEOUT))
            .http_status_as_error(false)
            .build()
            .into();
        KubeEmulator {
            process,
            url: format!("http://{addr}"),
            agent,
        }
    }

    /// `http://127.0.0.1:<port>`, the cluster's server.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The server's process (its start time).
    pub fn process(&self) -> &ServerProcess {
        &self.process
    }

    /// Writes `dir/kubeconfig`, as kubectl writes one: a cluster with this
    /// server, a user with the bearer token [`KUBE_TOKEN`], a context (namespace
    /// `default`) and the current context. Returns its path.
    pub fn write_kubeconfig(&self, dir: &Path) -> PathBuf {
        Kubeconfig {
            name: "lockwarden-emulator",
            server: &self.url,
            ca_pem: None,
            token: KUBE_TOKEN,
        }
        .write(dir)
    }

    /// Creates or replaces objects as given, status included (an object, a
    /// JSON array of them, or a `kind: List`), bypassing the API's checks
    /// (but a Secret's `stringData` still becomes `data`); the namespaces
    /// they name are created. Kinds the emulator does not know are served
    /// from then on (plural: the lower-case kind plus `s`). Returns the
    /// stored objects.
    pub fn apply(&self, objects: Value) -> Vec<Value> {
        let answer = self.control("POST", "objects", Some(&objects));
        match answer.get("items") {
            Some(Value::Array(items)) => items.clone(),
            _ => panic!("apply: {answer}"),
        }
    }

    /// Deletes an object at once (finalizers ignored), as the cluster's
    /// owner would: `kind_or_plural` is a kind (`Secret`) or a plural
    /// (`secrets`). Panics when there is no such object.
    pub fn delete(
        &self,
        api_version: &str,
        kind_or_plural: &str,
        namespace: Option<&str>,
        name: &str,
    ) {
        let key = if kind_or_plural.starts_with(|c: char| c.is_ascii_uppercase()) {
            "kind"
        } else {
            "resource"
        };
        let mut body = json!({"apiVersion": api_version, key: kind_or_plural, "name": name});
        if let Some(namespace) = namespace {
            body["namespace"] = json!(namespace);
        }
        self.control("DELETE", "objects", Some(&body));
    }

    /// From now on, answers `verb` (`get`, `list`, `watch`, `create`,
    /// `update`, `patch`, `delete`, `deletecollection`, or `*`) on
    /// `resource` (a plural, or `*`), in `namespace` and for `name` when
    /// given, with 403 Forbidden as RBAC would.
    pub fn forbid(&self, verb: &str, resource: &str, namespace: Option<&str>, name: Option<&str>) {
        let mut rule = json!({"verb": verb, "resource": resource});
        if let Some(namespace) = namespace {
            rule["namespace"] = json!(namespace);
        }
        if let Some(name) = name {
            rule["name"] = json!(name);
        }
        self.control("POST", "forbid", Some(&rule));
    }

    /// Adds a failure rule: `rule` has `verb`, `resource` and optionally
    /// `group`, `namespace`, `name` (as for [`forbid`](Self::forbid)), and
    /// `code`, `reason`, `message`, `retryAfter` (seconds), `times` (how many
    /// requests it fails; every one when absent).
    pub fn fail(&self, rule: Value) {
        self.control("POST", "fail", Some(&rule));
    }

    /// Drops the failure rules.
    pub fn clear_rules(&self) {
        self.control("DELETE", "rules", None);
    }

    /// Back to the fixtures: drops every object, the rules and the request
    /// log, reloads the fixtures, and ends open watches (a watch from before
    /// then gets 410 Gone, as after an API server restart).
    pub fn reset(&self) {
        self.control("POST", "reset", None);
    }

    /// `GET path` with the token (`/api/v1/namespaces/ns/events`, say): the
    /// answer's status and JSON body.
    pub fn get(&self, path: &str) -> (u16, Value) {
        self.api("GET", path, None)
    }

    /// `GET path` with the token, for a list: its JSON body. Panics unless
    /// the answer is 200.
    pub fn list(&self, path: &str) -> Value {
        let (status, body) = self.get(path);
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }

    /// `method path` with the token and a JSON body: the answer's status and
    /// JSON body. `PATCH` is sent as a merge patch.
    pub fn api(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let content_type = if method == "PATCH" {
            "application/merge-patch+json"
        } else {
            "application/json"
        };
        let (status, text) = self.call(
            method,
            &format!("{}{path}", self.url),
            body,
            content_type,
            Some(KUBE_TOKEN),
        );
        let value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{method} {path}: not JSON ({e}): {text}"));
        (status, value)
    }

    /// Opens a watch: `GET path` (which should say `watch=true` and
    /// `timeoutSeconds`) with the token; iterates over its events (`{"type":
    /// "ADDED", "object": ...}`, ...) as they arrive, until the server ends
    /// the stream. Panics unless the answer is 200.
    pub fn watch(&self, path: &str) -> KubeWatch {
        let url = format!("{}{path}", self.url);
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(WATCH_TIMEOUT))
            .http_status_as_error(false)
            .build()
            .into();
        let response = agent
            .get(&url)
            .header("Authorization", format!("Bearer {KUBE_TOKEN}"))
            .call()
            .unwrap_or_else(|e| panic!("GET {url}: {e}"));
        assert_eq!(response.status().as_u16(), 200, "GET {url}: {response:?}");
        KubeWatch {
            lines: BufReader::new(response.into_body().into_reader()),
        }
    }

    /// The API requests answered so far (since the start or the last
    /// [`reset`](Self::reset)), oldest first.
    pub fn requests(&self) -> Vec<KubeRequest> {
        let answer = self.control("GET", "requests", None);
        let Some(Value::Array(entries)) = answer.get("requests") else {
            panic!("requests: {answer}")
        };
        entries
            .iter()
            .map(|e| KubeRequest {
                method: e["method"].as_str().unwrap_or_default().to_owned(),
                path: e["path"].as_str().unwrap_or_default().to_owned(),
                query: e["query"].as_str().unwrap_or_default().to_owned(),
                authorization: e["authorization"] == "yes",
                status: e["status"]
                    .as_u64()
                    .and_then(|s| u16::try_from(s).ok())
                    .unwrap_or(0),
            })
            .collect()
    }

    /// A control call (`/_emulator/what`); panics unless it answers 200.
    fn control(&self, method: &str, what: &str, body: Option<&Value>) -> Value {
        let url = format!("{}/_emulator/{what}", self.url);
        let (status, text) = self.call(method, &url, body, "application/json", None);
        assert_eq!(status, 200, "{method} {url}: {text}");
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{method} {url}: {e}: {text}"))
    }

    fn call(
        &self,
        method: &str,
        url: &str,
        body: Option<&Value>,
        content_type: &str,
        token: Option<&str>,
    ) -> (u16, String) {
        let builder = ureq::http::Request::builder()
            .method(method)
            .uri(url)
            .header("Content-Type", content_type);
        let builder = match token {
            Some(token) => builder.header("Authorization", format!("Bearer {token}")),
            None => builder,
        };
        let sent = match body {
            Some(body) => builder.body(body.to_string()).map(|r| self.agent.run(r)),
            None => builder.body(()).map(|r| self.agent.run(r)),
        };
        let mut response = sent
            .unwrap_or_else(|e| panic!("{method} {url}: {e}"))
            .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
        let text = response
            .body_mut()
            .read_to_string()
            .unwrap_or_else(|e| panic!("{method} {url}: reading the answer: {e}"));
        (response.status().as_u16(), text)
    }
}

/// An open watch: its events, in order; `None` once the server has ended it.
pub struct KubeWatch {
    lines: BufReader<ureq::BodyReader<'static>>,
}

impl Iterator for KubeWatch {
    type Item = Value;

    fn next(&mut self) -> Option<Value> {
        loop {
            let mut line = String::new();
            match self.lines.read_line(&mut line) {
                Ok(0) | Err(_) => return None,
                Ok(_) if line.trim().is_empty() => continue,
                Ok(_) => {
                    return Some(serde_json::from_str(&line).unwrap_or_else(|e| {
                        panic!("a watch event that is not JSON ({e}): {line}")
                    }));
                }
            }
        }
    }
}

/// Where `make servers` installed the Python packages: `LOCKWARDEN_SERVERS_ENV`
/// or `target/servers` in the workspace.
fn servers_venv() -> PathBuf {
    std::env::var_os("LOCKWARDEN_SERVERS_ENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(crate::TESTS_DIR).join("../target/servers"))
}
