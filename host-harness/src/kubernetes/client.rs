//! The one client: built from kube's configuration with a stack of our
//! own (no retries, no tracing of requests, bounded answers), called
//! synchronously with a deadline on the process's I/O runtime.

use std::collections::HashSet;
use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use http::Request;
use http_body_util::Limited;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube::client::ConfigExt;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tower::{BoxError, ServiceBuilder};

use super::KubeError;
use crate::limits;
use crate::repo::backend::io_runtime;

/// Items asked for in one page of a list.
const PAGE: usize = 500;

/// A whole list may take this many times the timeout of one request.
const LIST_DEADLINE: u32 = 4;

/// A connection to the API server.
#[derive(Clone)]
pub struct Kubernetes {
    client: kube::Client,
}

impl Kubernetes {
    /// The process's client, made on first use (reading the configuration
    /// within `timeout`). A failure is not kept: the next call tries again.
    pub fn shared(timeout: Duration) -> Result<Kubernetes, KubeError> {
        static SHARED: Mutex<Option<Kubernetes>> = Mutex::new(None);
        let mut shared = SHARED
            .lock()
            .map_err(|_| KubeError::Config("a thread panicked while connecting".into()))?;
        if let Some(client) = shared.as_ref() {
            return Ok(client.clone());
        }
        let client = Kubernetes::connect(timeout)?;
        *shared = Some(client.clone());
        Ok(client)
    }

    /// A new client, from the in-cluster service account or the kubeconfig.
    pub fn connect(timeout: Duration) -> Result<Kubernetes, KubeError> {
        crate::tls::install_provider();
        let config = run(timeout, "reading the Kubernetes configuration", async {
            kube::Config::infer()
                .await
                .map_err(|e| KubeError::Config(crate::text::escape(&e.to_string()).into_owned()))
        })?;
        let client = io_runtime::enter(|| build(config, timeout))
            .map_err(|e| KubeError::Config(e.to_string()))??;
        Ok(Kubernetes { client })
    }

    /// `GET path` (`/api/v1/namespaces/ns/secrets/name`), as `T`.
    pub fn get<T: DeserializeOwned>(&self, timeout: Duration, path: &str) -> Result<T, KubeError> {
        self.send(timeout, "GET", path, None)
    }

    /// Sends `body` to `path` with `method` (`POST`, `PUT`); the answer as `T`.
    pub fn send<T: DeserializeOwned>(
        &self,
        timeout: Duration,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<T, KubeError> {
        self.exchange(timeout, method, path, body)
            .map(|(value, _)| value)
    }

    /// Every item of the list at `path` (`/api/v1/pods`), page by page:
    /// at most [`limits::KUBERNETES_ITEMS`] items and
    /// [`limits::KUBERNETES_LIST`] bytes in all, each page within
    /// `timeout` and the whole within [`LIST_DEADLINE`] of them. A page
    /// without `items`, with more than asked for, or a continue token seen
    /// before fails the whole list: a list cut short must never pass for
    /// all there is.
    pub fn list(&self, timeout: Duration, path: &str) -> Result<Vec<Value>, KubeError> {
        let shown = format!("listing {}", crate::text::escape(path));
        let fail = |cause: String| KubeError::Failed {
            what: shown.clone(),
            cause,
        };
        let deadline = Instant::now() + timeout * LIST_DEADLINE;
        let (mut items, mut bytes) = (Vec::new(), 0usize);
        let mut tokens: HashSet<String> = HashSet::new();
        let mut token: Option<String> = None;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(fail(format!(
                    "not done within {LIST_DEADLINE} times the timeout"
                )));
            }
            let mut query = form_urlencoded::Serializer::new(String::new());
            query.append_pair("limit", &PAGE.to_string());
            if let Some(token) = &token {
                query.append_pair("continue", token);
            }
            let (page, size) =
                self.fetch(timeout.min(left), &format!("{path}?{}", query.finish()))?;
            bytes += size;
            let Some(Value::Array(page_items)) = page.get("items") else {
                return Err(fail("a page has no items".into()));
            };
            if page_items.len() > PAGE {
                return Err(fail(format!(
                    "a page holds more than the {PAGE} items asked for"
                )));
            }
            items.extend(page_items.iter().cloned());
            if items.len() > limits::KUBERNETES_ITEMS || bytes > limits::KUBERNETES_LIST {
                return Err(fail(format!(
                    "more than {} items or {} bytes",
                    limits::KUBERNETES_ITEMS,
                    limits::KUBERNETES_LIST
                )));
            }
            match page.pointer("/metadata/continue").and_then(Value::as_str) {
                None | Some("") => return Ok(items),
                Some(next) if !tokens.insert(next.to_owned()) => {
                    return Err(fail("the server repeats a continue token".into()));
                }
                Some(next) => token = Some(next.to_owned()),
            }
        }
    }

    /// `GET path` as JSON, and the size of the answer.
    fn fetch(&self, timeout: Duration, path: &str) -> Result<(Value, usize), KubeError> {
        self.exchange(timeout, "GET", path, None)
    }

    /// The one request of every call: `method` on `path` with `body`,
    /// within `timeout`; the answer parsed as `T`, and its size.
    fn exchange<T: DeserializeOwned>(
        &self,
        timeout: Duration,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(T, usize), KubeError> {
        let what = format!("{method} {}", crate::text::escape(path));
        let bytes = match body {
            Some(body) => serde_json::to_vec(body).map_err(|e| failed(&what, &e))?,
            None => Vec::new(),
        };
        let mut request = Request::builder().method(method).uri(path);
        if body.is_some() {
            request = request.header(http::header::CONTENT_TYPE, "application/json");
        }
        let request = request.body(bytes).map_err(|e| failed(&what, &e))?;
        let client = self.client.clone();
        let future = async {
            client
                .request_text(request)
                .await
                .map_err(|e| refused_or_failed(&what, e))
        };
        let text = run(timeout, &what, future)?;
        let value = serde_json::from_str(&text).map_err(|e| failed(&what, &e))?;
        Ok((value, text.len()))
    }
}

/// The client's stack: kube's base URI and authorization layers over
/// hyper, with TLS from kube's configuration (rustls over ring), a connect
/// timeout and every answer's body bounded. hyper follows no redirect.
fn build(config: kube::Config, timeout: Duration) -> Result<kube::Client, KubeError> {
    let config_error =
        |e: kube::Error| KubeError::Config(crate::text::escape(&e.to_string()).into_owned());
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(Some(timeout));
    let https = config
        .rustls_https_connector_with_connector(http)
        .map_err(config_error)?;
    let hyper = hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build(https);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer().map_err(config_error)?)
        .map_response(|response: http::Response<hyper::body::Incoming>| {
            response.map(|body| Limited::new(body, limits::KUBERNETES_RESPONSE))
        })
        .map_err(BoxError::from)
        .service(hyper);
    Ok(kube::Client::new(service, config.default_namespace))
}

/// Runs `future` within `timeout` on the I/O runtime.
fn run<T>(
    timeout: Duration,
    what: &str,
    future: impl Future<Output = Result<T, KubeError>>,
) -> Result<T, KubeError> {
    match io_runtime::run_for(timeout, future) {
        Ok(Some(result)) => result,
        Ok(None) => Err(KubeError::NoAnswer {
            what: what.to_owned(),
            timeout: lockwarden_duration::format(
                i64::try_from(timeout.as_nanos()).unwrap_or(i64::MAX),
            ),
        }),
        Err(cause) => Err(KubeError::Failed {
            what: what.to_owned(),
            cause,
        }),
    }
}

fn failed(what: &str, cause: &dyn std::fmt::Display) -> KubeError {
    KubeError::Failed {
        what: what.to_owned(),
        cause: shown(&cause.to_string()),
    }
}

/// The longest part of an answer a message quotes (an error page that is
/// not the API's JSON is quoted whole by kube).
const QUOTED: usize = 512;

/// `text` as a message shows it: escaped, at most [`QUOTED`] characters.
fn shown(text: &str) -> String {
    let cut: String = text.chars().take(QUOTED).collect();
    let more = if cut.len() < text.len() { "…" } else { "" };
    format!("{}{more}", crate::text::escape(&cut))
}

fn refused_or_failed(what: &str, error: kube::Error) -> KubeError {
    match error {
        kube::Error::Api(status) => KubeError::Refused {
            what: what.to_owned(),
            code: status.code,
            reason: shown(&status.reason),
            message: shown(&status.message),
        },
        other => {
            // The cause chain says what went wrong (a refused connection, a
            // body over the limit); the top says only which layer.
            let mut cause = other.to_string();
            let mut source = std::error::Error::source(&other);
            while let Some(inner) = source {
                cause = format!("{cause}: {inner}");
                source = inner.source();
            }
            failed(what, &cause)
        }
    }
}
