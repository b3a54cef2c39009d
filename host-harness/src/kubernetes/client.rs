//! The one client: built from kube's configuration with a stack of our
//! own (no retries, no tracing of requests, bounded answers), called
//! synchronously with a deadline on the process's I/O runtime.

use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

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
                .request::<T>(request)
                .await
                .map_err(|e| refused_or_failed(&what, e))
        };
        run(timeout, &what, future)
    }

    /// Every item of the list at `path` (`/api/v1/pods`), page by page, at
    /// most [`limits::KUBERNETES_ITEMS`]; each page within `timeout`.
    pub fn list(&self, timeout: Duration, path: &str) -> Result<Vec<Value>, KubeError> {
        let mut items = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut query = form_urlencoded::Serializer::new(String::new());
            query.append_pair("limit", &PAGE.to_string());
            if let Some(token) = &token {
                query.append_pair("continue", token);
            }
            let page: Value = self.get(timeout, &format!("{path}?{}", query.finish()))?;
            if let Some(page_items) = page.get("items").and_then(Value::as_array) {
                items.extend(page_items.iter().cloned());
            }
            if items.len() > limits::KUBERNETES_ITEMS {
                return Err(KubeError::Failed {
                    what: format!("listing {}", crate::text::escape(path)),
                    cause: format!("more than {} items", limits::KUBERNETES_ITEMS),
                });
            }
            let next = page
                .pointer("/metadata/continue")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
                .map(str::to_owned);
            if next.is_none() || next == token {
                return Ok(items);
            }
            token = next;
        }
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
        cause: crate::text::escape(&cause.to_string()).into_owned(),
    }
}

fn refused_or_failed(what: &str, error: kube::Error) -> KubeError {
    match error {
        kube::Error::Api(status) => KubeError::Refused {
            what: what.to_owned(),
            code: status.code,
            reason: crate::text::escape(&status.reason).into_owned(),
            message: crate::text::escape(&status.message).into_owned(),
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
