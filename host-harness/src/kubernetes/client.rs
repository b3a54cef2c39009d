//! The one client: built from kube's configuration with a stack of our
//! own (no retries, no tracing of requests, bounded answers), called
//! synchronously with a deadline on the process's I/O runtime.

use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use futures::{AsyncBufReadExt as _, AsyncReadExt as _};
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

/// What a list gave: its items, and the namespaces whose items it could not
/// hold, each with why (their items are left out): one namespace's objects,
/// too many or too large, fail that namespace alone.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    /// The items of every namespace not in `failed` (and cluster-scoped ones).
    pub items: Vec<Value>,
    /// Namespace -> why its items are left out.
    pub failed: BTreeMap<String, String>,
    /// The list's resource version (its first page's): a watch from it
    /// misses no change after the list.
    pub version: Option<String>,
}

/// A connection to the API server: kube's `Client` (cheap to clone, one
/// pool of connections for all its clones) in our stack ([`build`]).
#[derive(Clone)]
pub struct Kubernetes {
    client: kube::Client,
}

impl Kubernetes {
    /// A new client, from the in-cluster service account or the
    /// kubeconfig, the configuration read within `timeout`. Made once by
    /// the binary's edge and handed down ([`super::Connection`]); each call
    /// then has its own deadline.
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

    /// Every item of the list at `path` (`/api/v1/pods`), page by page,
    /// each page within `timeout` and the whole within [`LIST_DEADLINE`] of
    /// them. A page over [`limits::KUBERNETES_RESPONSE`] is asked again
    /// with half the items, down to one (the API holds no object over about
    /// 1.5 MiB). A namespace over its share of the bounds
    /// ([`limits::KUBERNETES_NAMESPACE_ITEMS`],
    /// [`limits::KUBERNETES_NAMESPACE_LIST`]) is left out and named in
    /// `failed`, and so is the largest when the items kept pass
    /// [`limits::KUBERNETES_ITEMS`] or [`limits::KUBERNETES_LIST`]: one
    /// namespace's objects fail that namespace alone. A page
    /// without `items`, with more than asked for, a continue token seen
    /// before, or cluster-scoped items over the bounds fail the whole list:
    /// a list cut short must never pass for all there is.
    pub fn list(&self, timeout: Duration, path: &str) -> Result<Listing, KubeError> {
        let shown = format!("listing {}", crate::text::escape(path));
        let fail = |cause: String| KubeError::Failed {
            what: shown.clone(),
            cause,
        };
        let deadline = Instant::now() + timeout * LIST_DEADLINE;
        let mut tally = Tally::default();
        let mut tokens: HashSet<String> = HashSet::new();
        let mut token: Option<String> = None;
        let mut limit = PAGE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(fail(format!(
                    "not done within {LIST_DEADLINE} times the timeout"
                )));
            }
            let path = format!("{path}?{}", page_query(limit, token.as_deref()));
            let Some((mut page, size)) = self.page(timeout.min(left), &path)? else {
                if limit == 1 {
                    return Err(fail(format!(
                        "one item is over the {} bytes an answer may hold",
                        limits::KUBERNETES_RESPONSE
                    )));
                }
                limit /= 2;
                continue;
            };
            if tally.version.is_none() {
                tally.version = (page.pointer("/metadata/resourceVersion"))
                    .and_then(Value::as_str)
                    .map(str::to_owned);
            }
            let Some(Value::Array(items)) = page.get_mut("items").map(Value::take) else {
                return Err(fail("a page has no items".into()));
            };
            if items.len() > limit {
                return Err(fail(format!(
                    "a page holds more than the {limit} items asked for"
                )));
            }
            for item in items {
                tally.add(item).map_err(|e| fail(e.to_string()))?;
            }
            limit = next_limit(limit, size);
            match page.pointer("/metadata/continue").and_then(Value::as_str) {
                None | Some("") => return Ok(tally.finish()),
                Some(next) if !tokens.insert(next.to_owned()) => {
                    return Err(fail("the server repeats a continue token".into()));
                }
                Some(next) => token = Some(next.to_owned()),
            }
        }
    }

    /// Watches `path` (a watch request: `...?watch=1&...`): each event, as
    /// JSON, goes to `event` until the server ends the stream, `event`
    /// says [`ControlFlow::Break`], `timeout` passes in all, or nothing
    /// comes for `idle`. Each event is at most [`limits::KUBERNETES_EVENT`]
    /// bytes and parsed as every answer is ([`super::deep_json`]); the
    /// stream is not compressed (kube's own watch asks the same).
    pub fn watch(
        &self,
        path: &str,
        timeout: Duration,
        idle: Duration,
        mut event: impl FnMut(Value) -> ControlFlow<()>,
    ) -> Result<(), KubeError> {
        let what = format!("watching {}", crate::text::escape(path));
        let request = Request::builder()
            .method("GET")
            .uri(path)
            .header(http::header::ACCEPT_ENCODING, "identity")
            .body(Vec::new())
            .map_err(|e| failed(&what, &e))?;
        let client = self.client.clone();
        let shown = what.clone();
        let stream = async move {
            let body =
                (client.request_stream(request).await).map_err(|e| refused_or_failed(&shown, e))?;
            let mut body = Box::pin(body);
            let mut line = Vec::new();
            loop {
                line.clear();
                let mut bounded = (&mut body).take(limits::KUBERNETES_EVENT as u64 + 1);
                let read = tokio::time::timeout(idle, bounded.read_until(b'\n', &mut line));
                let Ok(read) = read.await else {
                    return Ok(());
                };
                match read.map_err(|e| failed(&shown, &e))? {
                    0 => return Ok(()),
                    n if n > limits::KUBERNETES_EVENT => {
                        return Err(failed(&shown, &"an event is over the bound"));
                    }
                    _ => {}
                }
                let text = std::str::from_utf8(&line).map_err(|e| failed(&shown, &e))?;
                if text.trim().is_empty() {
                    continue;
                }
                let value = super::deep_json::parse(text).map_err(|e| failed(&shown, &e))?;
                if event(value).is_break() {
                    return Ok(());
                }
            }
        };
        match io_runtime::run_for(timeout, stream) {
            Ok(Some(result)) => result,
            Ok(None) => Ok(()),
            Err(cause) => Err(KubeError::Failed { what, cause }),
        }
    }

    /// One page of a list: `GET path` as JSON and the answer's size, or
    /// `None` when the answer is over [`limits::KUBERNETES_RESPONSE`].
    fn page(&self, timeout: Duration, path: &str) -> Result<Option<(Value, usize)>, KubeError> {
        let what = format!("GET {}", crate::text::escape(path));
        match self.answer(timeout, &what, "GET", path, None)? {
            Ok(text) => {
                let value = super::deep_json::parse(&text).map_err(|e| failed(&what, &e))?;
                Ok(Some((value, text.len())))
            }
            Err(e) if too_large(&e) => Ok(None),
            Err(e) => Err(refused_or_failed(&what, e)),
        }
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
        let text = self
            .answer(timeout, &what, method, path, body)?
            .map_err(|e| refused_or_failed(&what, e))?;
        let value = super::deep_json::parse(&text).map_err(|e| failed(&what, &e))?;
        let value = serde_json::from_value(value).map_err(|e| failed(&what, &e))?;
        Ok((value, text.len()))
    }

    /// The answer's text to `method` on `path` with `body` (shown as
    /// `what`), or kube's error, left for the caller to judge; within
    /// `timeout`.
    fn answer(
        &self,
        timeout: Duration,
        what: &str,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Result<String, kube::Error>, KubeError> {
        let bytes = match body {
            Some(body) => serde_json::to_vec(body).map_err(|e| failed(what, &e))?,
            None => Vec::new(),
        };
        let mut request = Request::builder().method(method).uri(path);
        if body.is_some() {
            request = request.header(http::header::CONTENT_TYPE, "application/json");
        }
        let request = request.body(bytes).map_err(|e| failed(what, &e))?;
        let client = self.client.clone();
        run(timeout, what, async move {
            Ok(client.request_text(request).await)
        })
    }
}

/// The client's stack: kube's base URI and authorization layers over
/// hyper, with TLS from kube's configuration (rustls over ring) and every
/// answer's body bounded. A TCP connection is given up after `timeout`
/// (the edge's: it may outlive the call that began it, in hyper's pool);
/// each call is bounded by its own deadline besides. hyper follows no
/// redirect.
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

/// A page's query: at most `limit` items, from `token` on.
fn page_query(limit: usize, token: Option<&str>) -> String {
    let mut query = form_urlencoded::Serializer::new(String::new());
    query.append_pair("limit", &limit.to_string());
    if let Some(token) = token {
        query.append_pair("continue", token);
    }
    query.finish()
}

/// The items to ask for after a page of `limit` items came in `size`
/// bytes: twice as many (at most [`PAGE`]) while a page of twice the size
/// would stay well within [`limits::KUBERNETES_RESPONSE`], else as many, so
/// that a namespace of large objects does not make every other page too
/// large and the small ones after it come in full pages again.
fn next_limit(limit: usize, size: usize) -> usize {
    if size <= limits::KUBERNETES_RESPONSE / 4 {
        limit.saturating_mul(2).min(PAGE)
    } else {
        limit
    }
}

/// Whether `error` is an answer over [`limits::KUBERNETES_RESPONSE`]: the
/// bound of [`build`]'s stack, found anywhere in the cause chain.
fn too_large(error: &kube::Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(inner) = cause {
        if inner.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        cause = inner.source();
    }
    false
}

/// Why a list fails as it is read: items without a namespace alone pass
/// the whole-list bounds, so that no namespace can be failed for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "more than {} items or {} bytes",
    limits::KUBERNETES_ITEMS,
    limits::KUBERNETES_LIST
)]
struct OverBounds;

/// The items of one namespace kept so far, and their size.
#[derive(Default)]
struct Kept {
    items: Vec<Value>,
    bytes: usize,
}

/// A list's items as the pages bring them, kept by namespace within the
/// bounds. A namespace over its share ([`limits::KUBERNETES_NAMESPACE_ITEMS`],
/// [`limits::KUBERNETES_NAMESPACE_LIST`]) is failed and its items dropped,
/// now and when more come. The whole-list bounds count the items kept:
/// when they are passed, the namespace holding the most is failed, until
/// they hold again, so several namespaces each within their share cannot
/// fail the others; only cluster-scoped items over them fail the list.
/// What is kept is then bounded by the whole-list bounds; what is
/// downloaded and dropped, by the list's deadline.
#[derive(Default)]
struct Tally {
    version: Option<String>,
    namespaces: BTreeMap<String, Kept>,
    /// Items without a namespace.
    cluster: Kept,
    failed: BTreeMap<String, String>,
    /// Items kept in all, and their bytes.
    items: usize,
    bytes: usize,
}

impl Tally {
    /// Takes `item` (or drops it, with its namespace); an error when the
    /// list must fail.
    fn add(&mut self, item: Value) -> Result<(), OverBounds> {
        let size = json_size(&item);
        let namespace = item
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .filter(|ns| !ns.is_empty())
            .map(str::to_owned);
        let kept = match &namespace {
            Some(ns) if self.failed.contains_key(ns) => return Ok(()),
            Some(ns) => self.namespaces.entry(ns.clone()).or_default(),
            None => &mut self.cluster,
        };
        kept.items.push(item);
        kept.bytes += size;
        let over = kept.items.len() > limits::KUBERNETES_NAMESPACE_ITEMS
            || kept.bytes > limits::KUBERNETES_NAMESPACE_LIST;
        self.items += 1;
        self.bytes += size;
        if let Some(ns) = namespace.filter(|_| over) {
            self.fail(
                &ns,
                format!(
                    "more than {} items or {} bytes in this namespace alone",
                    limits::KUBERNETES_NAMESPACE_ITEMS,
                    limits::KUBERNETES_NAMESPACE_LIST
                ),
            );
        }
        self.within_bounds()
    }

    /// Fails the namespaces holding the most until the items kept are
    /// within the whole-list bounds; an error if cluster-scoped items
    /// alone are not.
    fn within_bounds(&mut self) -> Result<(), OverBounds> {
        loop {
            let by_bytes = self.bytes > limits::KUBERNETES_LIST;
            if !by_bytes && self.items <= limits::KUBERNETES_ITEMS {
                return Ok(());
            }
            let largest = self
                .namespaces
                .iter()
                .max_by_key(|(_, kept)| {
                    if by_bytes {
                        kept.bytes
                    } else {
                        kept.items.len()
                    }
                })
                .map(|(ns, _)| ns.clone());
            let Some(ns) = largest else {
                return Err(OverBounds);
            };
            self.fail(
                &ns,
                format!(
                    "it held the most when the list passed {} items or {} bytes",
                    limits::KUBERNETES_ITEMS,
                    limits::KUBERNETES_LIST
                ),
            );
        }
    }

    /// Drops `namespace`'s items, now and later, saying `why`.
    fn fail(&mut self, namespace: &str, why: String) {
        if let Some(kept) = self.namespaces.remove(namespace) {
            self.items -= kept.items.len();
            self.bytes -= kept.bytes;
        }
        self.failed.insert(namespace.to_owned(), why);
    }

    /// The items kept (cluster-scoped first, then by namespace) and the
    /// namespaces failed.
    fn finish(self) -> Listing {
        let mut items = self.cluster.items;
        items.extend(self.namespaces.into_values().flat_map(|kept| kept.items));
        Listing {
            items,
            failed: self.failed,
            version: self.version,
        }
    }
}

/// The size of `value` as JSON, counted without writing it anywhere.
fn json_size(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Neither a count nor a Value can fail; if one did, the item counts as
    // over the bounds.
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        Err(_) => limits::KUBERNETES_LIST + 1,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// An item of `namespace` (`None`: cluster-scoped) named `name`, with
    /// `pad` bytes of annotation.
    fn item(namespace: Option<&str>, name: &str, pad: usize) -> Value {
        let mut metadata = json!({"name": name, "annotations": {"pad": "x".repeat(pad)}});
        if let Some(ns) = namespace {
            metadata["namespace"] = json!(ns);
        }
        json!({ "metadata": metadata })
    }

    fn names(listing: &Listing) -> Vec<&str> {
        listing
            .items
            .iter()
            .filter_map(|i| i.pointer("/metadata/name").and_then(Value::as_str))
            .collect()
    }

    #[test]
    fn a_namespace_over_its_share_fails_alone_and_stays_failed() {
        let big = limits::KUBERNETES_NAMESPACE_LIST / 3;
        let mut tally = Tally::default();
        tally.add(item(Some("a"), "a-1", 10)).expect("kept");
        for i in 0..4 {
            tally
                .add(item(Some("fat"), &format!("fat-{i}"), big))
                .expect("kept");
        }
        tally.add(item(Some("b"), "b-1", 10)).expect("kept");
        tally
            .add(item(Some("fat"), "fat-late", 10))
            .expect("dropped");
        tally.add(item(None, "cluster", 10)).expect("kept");
        assert!(tally.bytes < limits::KUBERNETES_NAMESPACE_LIST);
        let listing = tally.finish();
        assert_eq!(names(&listing), ["cluster", "a-1", "b-1"]);
        assert_eq!(listing.failed.keys().collect::<Vec<_>>(), ["fat"]);
        assert!(listing.failed["fat"].contains("in this namespace alone"));
    }

    #[test]
    fn too_many_items_in_one_namespace_fail_it() {
        let mut tally = Tally::default();
        for i in 0..=limits::KUBERNETES_NAMESPACE_ITEMS {
            tally
                .add(json!({"metadata": {"namespace": "many", "name": i}}))
                .expect("kept");
        }
        tally.add(item(Some("a"), "a-1", 0)).expect("kept");
        let listing = tally.finish();
        assert_eq!(names(&listing), ["a-1"]);
        assert!(listing.failed.contains_key("many"));
    }

    #[test]
    fn namespaces_each_within_their_share_fail_the_largest_not_the_list() {
        // Five namespaces just under their share pass the whole list's
        // bound together: the largest goes, the others stay.
        let share = limits::KUBERNETES_NAMESPACE_LIST - 1000;
        let mut tally = Tally::default();
        for ns in ["n1", "n2", "n3", "n4"] {
            tally.add(item(Some(ns), ns, share - 100)).expect("kept");
        }
        tally.add(item(Some("n5"), "n5", share)).expect("kept");
        assert!(tally.bytes <= limits::KUBERNETES_LIST);
        let listing = tally.finish();
        assert_eq!(names(&listing), ["n1", "n2", "n3", "n4"]);
        assert!(listing.failed["n5"].contains("held the most"));
    }

    #[test]
    fn cluster_scoped_items_over_the_bounds_fail_the_list() {
        let mut tally = Tally::default();
        tally.add(item(Some("a"), "a", 10)).expect("kept");
        let half = limits::KUBERNETES_LIST / 2;
        tally.add(item(None, "c1", half)).expect("kept");
        let over = tally.add(item(None, "c2", half));
        assert!(over.expect_err("over").to_string().contains("more than"));
        assert!(tally.failed.contains_key("a"), "the namespace went first");
    }

    #[test]
    fn a_page_grows_back_only_while_twice_as_much_still_fits() {
        assert_eq!(next_limit(15, 15 * 1024), 30);
        assert_eq!(next_limit(400, 1024), PAGE);
        assert_eq!(next_limit(15, 21 * 1024 * 1024), 15);
        assert_eq!(next_limit(1, limits::KUBERNETES_RESPONSE), 1);
    }

    /// The error a body over its bound gives, as the client's stack makes it.
    fn over_the_bound() -> tower::BoxError {
        use http_body_util::{BodyExt, Full, Limited};
        let body = Limited::new(Full::new(bytes::Bytes::from_static(b"0123456789")), 4);
        io_runtime::run_for(Duration::from_secs(10), body.collect())
            .expect("the runtime")
            .expect("in time")
            .expect_err("over the bound")
    }

    #[test]
    fn an_answer_over_the_bound_is_told_from_other_failures() {
        assert!(too_large(&kube::Error::Service(over_the_bound())));
        let wrapped: tower::BoxError = Box::new(kube::Error::Service(over_the_bound()));
        assert!(too_large(&kube::Error::Service(wrapped)));
        let other = kube::Error::Service("connection refused".into());
        assert!(!too_large(&other));
    }

    #[test]
    fn a_page_asks_for_its_limit_from_its_token() {
        assert_eq!(page_query(500, None), "limit=500");
        assert_eq!(page_query(15, Some("a b&c")), "limit=15&continue=a+b%26c");
    }

    #[test]
    fn an_item_is_measured_as_its_json() {
        let value = item(Some("a"), "n", 5);
        assert_eq!(json_size(&value), value.to_string().len());
    }
}
