//! The one HTTP client policy of the object stores (`s3:`, `gs:`,
//! `azure:`). Every request their clients make, the credential providers'
//! included, goes through a client [`Connector`] builds, which:
//!
//! - never follows a redirect: a 3xx is an error that says so. A redirect
//!   to another host would carry the signed request's credentials (an
//!   `x-amz-security-token`, an Azure SAS in the URL) there, and lockwarden
//!   would judge that host's files;
//! - never sends `Referer` (it would carry an Azure SAS), and asks for no
//!   compression;
//! - takes the timeouts, `https_only`, HTTP/1-only and user agent of the
//!   [`ClientOptions`] it is given (the instance-metadata credential
//!   providers give other ones) and nothing else of them (proxies, extra
//!   roots, default headers: lockwarden sets none), and trusts the TLS
//!   roots every reqwest client of lockwarden trusts ([`crate::tls`]: the
//!   system's, through reqwest's platform verifier), with the repository's
//!   own CA added for its requests alone, or verifies no certificate where
//!   the repository's [`Tls`] says so (a discovered repository whose object
//!   asks for it, where watch.toml allows it);
//! - goes through the proxy lockwarden's environment names (`HTTPS_PROXY`,
//!   ...) only for a repository whose variables are read from there: a
//!   discovered one's requests go straight to the host its object names
//!   ([`Connector::of`]);
//! - reads every response body within a bound: a listing page and an error
//!   body within [`limits::LISTING_BODY`], anything else within the largest
//!   restic file lockwarden reads, failing past it with a message that says
//!   so (and keeps the status, so that a refusal is still a refusal);
//! - hands object_store only listing pages it can take
//!   ([`super::listing`]).

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::StatusCode;
use hyper::body::{Body, Frame, SizeHint};
use hyper::header::CONTENT_LENGTH;
use object_store::ClientConfigKey;
use object_store::ClientOptions;
use object_store::client::{
    HttpClient, HttpConnector, HttpError, HttpErrorKind, HttpRequest, HttpResponse,
    HttpResponseBody, HttpService,
};

use super::listing::Asked;
use super::refusal::Refusal;
use crate::limits;
use crate::repo::backend::Variables;
use crate::tls::Tls;

/// The most bytes of any answer but a listing page or an error body: the
/// largest restic file lockwarden reads (object reads are bounded by their
/// caller too, from the listed size).
pub const ANSWER_BODY: u64 = larger(
    limits::LOCK_FILE,
    larger(limits::KEY_FILE, limits::CONFIG_FILE),
);
const _: () = assert!(ANSWER_BODY < limits::LISTING_BODY);

const fn larger(a: u64, b: u64) -> u64 {
    if a > b { a } else { b }
}

/// The user agent when the options name none.
const USER_AGENT: &str = concat!("lockwarden/", env!("CARGO_PKG_VERSION"));

/// Makes the object stores' HTTP clients (give it to each store's
/// builder: `with_http_connector`).
#[derive(Debug, Clone)]
pub struct Connector {
    /// Whether the proxy lockwarden's environment names is used.
    environment_proxy: bool,
    /// The repository's own TLS setting.
    tls: Tls,
}

impl Connector {
    /// The connector of a repository whose storage variables are
    /// `variables`: without any proxy of lockwarden's environment when
    /// they were given whole ([`Variables::are_given`]), with their
    /// [`Tls`].
    pub fn of(variables: &Variables) -> Connector {
        Connector {
            environment_proxy: !variables.are_given(),
            tls: variables.tls().clone(),
        }
    }
}

impl HttpConnector for Connector {
    fn connect(&self, options: &ClientOptions) -> object_store::Result<HttpClient> {
        let client =
            shared_client(options, self.environment_proxy, &self.tls).map_err(|source| {
                object_store::Error::Generic {
                    store: "HTTP client",
                    source: source.into(),
                }
            })?;
        Ok(HttpClient::new(Service { client }))
    }
}

/// The options a client is made from ([`client`] reads these and no
/// others), as their text.
const CLIENT_KEYS: [ClientConfigKey; 5] = [
    ClientConfigKey::AllowHttp,
    ClientConfigKey::UserAgent,
    ClientConfigKey::Timeout,
    ClientConfigKey::ConnectTimeout,
    ClientConfigKey::Http1Only,
];

/// The clients kept for sharing ([`shared_client`]); past this, the
/// oldest kept for a repository's own CA is forgotten (the stores that
/// hold it keep it: only sharing is lost), so that CAs that come and go
/// with discovered repositories do not pile up.
const SHARED_CLIENTS: usize = 64;

/// What tells the TLS settings of two clients apart: a CA by its digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TlsKey {
    Default,
    Ca([u8; 32]),
    Insecure,
}

impl TlsKey {
    fn of(tls: &Tls) -> TlsKey {
        match tls {
            Tls::Default => TlsKey::Default,
            Tls::Roots(roots) => TlsKey::Ca(roots.digest()),
            Tls::Insecure { .. } => TlsKey::Insecure,
        }
    }
}

/// The one client of the process for what `options` say, with or without
/// the `environment_proxy`, with the `tls` setting: every store with the
/// same settings shares it, its TLS roots and its connection pool (a
/// client of its own per repository cost `watch` about 100 KiB of memory
/// per repository, most of it its copy of the TLS roots); a repository's
/// own CA is part of the settings, by its digest. Requests carry their own
/// credentials, and the client keeps no cookies, so sharing carries nothing
/// from one store to another.
fn shared_client(
    options: &ClientOptions,
    environment_proxy: bool,
    tls: &Tls,
) -> Result<reqwest::Client, String> {
    type Settings = (Vec<Option<String>>, bool, TlsKey);
    static CLIENTS: std::sync::Mutex<Vec<(Settings, reqwest::Client)>> =
        std::sync::Mutex::new(Vec::new());
    let settings: Settings = (
        CLIENT_KEYS
            .iter()
            .map(|key| options.get_config_value(key))
            .collect(),
        environment_proxy,
        TlsKey::of(tls),
    );
    let mut clients = CLIENTS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, client)) = clients.iter().find(|(s, _)| *s == settings) {
        return Ok(client.clone());
    }
    let client = client(options, environment_proxy, tls)?;
    if clients.len() >= SHARED_CLIENTS
        && let Some(oldest) = clients
            .iter()
            .position(|((_, _, key), _)| matches!(key, TlsKey::Ca(_)))
    {
        clients.remove(oldest);
    }
    clients.push((settings, client.clone()));
    Ok(client)
}

/// A reqwest client under this policy, with what `options` say
/// ([`CLIENT_KEYS`]), through the proxy of lockwarden's environment only
/// when `environment_proxy`, trusting what `tls` says.
fn client(
    options: &ClientOptions,
    environment_proxy: bool,
    tls: &Tls,
) -> Result<reqwest::Client, String> {
    crate::tls::install_provider();
    let value = |key: ClientConfigKey| options.get_config_value(&key);
    let duration = |key: ClientConfigKey| -> Result<Option<Duration>, String> {
        value(key)
            .map(|text| humantime::parse_duration(&text).map_err(|e| format!("{key:?}: {e}")))
            .transpose()
    };
    let mut builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .referer(false)
        .no_gzip()
        .no_brotli()
        .no_zstd()
        .no_deflate()
        .https_only(value(ClientConfigKey::AllowHttp).as_deref() != Some("true"))
        .user_agent(value(ClientConfigKey::UserAgent).unwrap_or_else(|| USER_AGENT.to_owned()));
    if let Some(timeout) = duration(ClientConfigKey::Timeout)? {
        builder = builder.timeout(timeout);
    }
    if let Some(timeout) = duration(ClientConfigKey::ConnectTimeout)? {
        builder = builder.connect_timeout(timeout);
    }
    if value(ClientConfigKey::Http1Only).as_deref() == Some("true") {
        builder = builder.http1_only();
    }
    if !environment_proxy {
        builder = builder.no_proxy();
    }
    match tls {
        Tls::Default => {}
        // Added to the system's roots (reqwest's platform verifier), not
        // in their place.
        Tls::Roots(roots) => {
            let certs = roots
                .certs()
                .iter()
                .map(|der| reqwest::Certificate::from_der(der.as_ref()))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|_| format!("its CA from {} does not parse", roots.from()))?;
            builder = builder.tls_certs_merge(certs);
        }
        Tls::Insecure { .. } => builder = builder.tls_danger_accept_invalid_certs(true),
    }
    builder.build().map_err(|e| {
        let cause = std::error::Error::source(&e).map_or_else(|| e.to_string(), |s| s.to_string());
        format!(
            "cannot make an HTTP client: {}",
            crate::text::escape(&cause)
        )
    })
}

/// One client under the policy.
#[derive(Debug)]
struct Service {
    client: reqwest::Client,
}

#[async_trait::async_trait]
impl HttpService for Service {
    async fn call(&self, request: HttpRequest) -> Result<HttpResponse, HttpError> {
        let listing = Asked::of(request.method(), request.uri());
        let (parts, body) = request.into_parts();
        let url = reqwest::Url::parse(&parts.uri.to_string())
            .map_err(|e| HttpError::new(HttpErrorKind::Unknown, e))?;
        let mut outgoing = reqwest::Request::new(parts.method, url);
        *outgoing.headers_mut() = parts.headers;
        *outgoing.body_mut() = Some(match body.as_bytes() {
            Some(bytes) => reqwest::Body::from(bytes.clone()),
            None => reqwest::Body::wrap(body),
        });
        let response = self.client.execute(outgoing).await.map_err(transport)?;
        answer(response, listing).await
    }
}

/// The answer object_store gets for `response`: a redirect refused, the
/// body bounded, a listing page checked.
async fn answer(
    response: reqwest::Response,
    listing: Option<Asked>,
) -> Result<HttpResponse, HttpError> {
    let status = response.status();
    if status.is_redirection() && status != StatusCode::NOT_MODIFIED {
        return Err(Refusal::Redirect {
            status: status.as_u16(),
        }
        .into());
    }
    let (mut parts, body) = hyper::Response::<reqwest::Body>::from(response).into_parts();
    let read_whole = !status.is_success() || listing.is_some();
    let limit = if read_whole {
        limits::LISTING_BODY
    } else {
        ANSWER_BODY
    };
    let too_large = Refusal::TooLarge {
        status: status.as_u16(),
        limit,
    };
    // A body that says it is too large is not read at all; object reads
    // are judged by their caller from the size the storage gives.
    let declared = parts
        .headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if read_whole && declared.is_some_and(|n| n > limit) {
        return Err(too_large.into());
    }
    let body = Bounded {
        inner: body,
        left: limit,
        refusal: too_large,
    };
    match listing {
        Some(asked) if status.is_success() => {
            let page = http_body_util::BodyExt::collect(body).await?.to_bytes();
            let page = asked.checked(page)?;
            parts.headers.remove(CONTENT_LENGTH);
            Ok(HttpResponse::from_parts(parts, page.into()))
        }
        _ => Ok(HttpResponse::from_parts(parts, HttpResponseBody::new(body))),
    }
}

/// A transport error as object_store's retries tell them apart, without
/// the URL (an Azure SAS travels in it).
fn transport(e: reqwest::Error) -> HttpError {
    let kind = if e.is_timeout() {
        HttpErrorKind::Timeout
    } else if e.is_connect() {
        HttpErrorKind::Connect
    } else if e.is_decode() {
        HttpErrorKind::Decode
    } else {
        broken_kind(&e)
    };
    HttpError::new(kind, e.without_url())
}

/// The kind of an exchange that broke: `Request` when the connection closed
/// before an answer (a pooled connection the server had closed: safe to
/// send again), `Interrupted` when it was reset or cut short, `Timeout` for
/// a timeout deep in the stack, else `Unknown`.
fn broken_kind(e: &(dyn std::error::Error + 'static)) -> HttpErrorKind {
    let mut source = e.source();
    while let Some(cause) = source {
        if let Some(hyper) = cause.downcast_ref::<hyper::Error>() {
            if hyper.is_closed() || hyper.is_incomplete_message() || hyper.is_body_write_aborted() {
                return HttpErrorKind::Request;
            }
            if hyper.is_timeout() {
                return HttpErrorKind::Timeout;
            }
        }
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind as Io;
            match io.kind() {
                Io::TimedOut => return HttpErrorKind::Timeout,
                Io::ConnectionReset
                | Io::ConnectionAborted
                | Io::BrokenPipe
                | Io::UnexpectedEof => {
                    return HttpErrorKind::Interrupted;
                }
                _ => {}
            }
        }
        source = cause.source();
    }
    HttpErrorKind::Unknown
}

/// A response body that fails past its bound, and never tells its reader
/// to expect more than the bound (object_store reserves memory for what a
/// body's size hint promises).
struct Bounded<B> {
    inner: B,
    /// Bytes still allowed.
    left: u64,
    /// The error past the bound.
    refusal: Refusal,
}

impl<B> Body for Bounded<B>
where
    B: Body<Data = Bytes, Error = reqwest::Error> + Unpin,
{
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, HttpError>>> {
        let this = &mut *self;
        let frame = match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(transport(e)))),
            Poll::Ready(Some(Ok(frame))) => frame,
        };
        if let Some(data) = frame.data_ref() {
            let size = data.len() as u64;
            if size > this.left {
                this.left = 0;
                return Poll::Ready(Some(Err(this.refusal.clone().into())));
            }
            this.left -= size;
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let inner = self.inner.size_hint();
        let mut hint = SizeHint::new();
        hint.set_lower(inner.lower().min(self.left));
        hint.set_upper(inner.upper().unwrap_or(u64::MAX).min(self.left));
        hint
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_past_its_bound_fails_and_never_promises_more() {
        let body = |size: usize| Bounded {
            inner: reqwest::Body::from(vec![b'x'; size]),
            left: 16,
            refusal: Refusal::TooLarge {
                status: 200,
                limit: 16,
            },
        };
        assert_eq!(body(1 << 20).size_hint().upper(), Some(16));
        assert!(body(1 << 20).size_hint().lower() <= 16);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let read = |body| {
            runtime
                .block_on(http_body_util::BodyExt::collect(body))
                .map(|c| c.to_bytes())
        };
        assert_eq!(read(body(16)).expect("within the bound").len(), 16);
        let err = read(body(17)).expect_err("past the bound");
        assert!(err.to_string().contains("larger than 16 bytes"), "{err}");
    }

    #[test]
    fn a_repositorys_own_ca_or_insecure_setting_is_part_of_the_shared_clients_key() {
        let ca = || Tls::with_ca(crate::tls::tests::TEST_CA.as_bytes(), "x".into()).expect("a CA");
        let insecure = Tls::Insecure { from: "x".into() };
        let options = ClientOptions::new();
        assert!(client(&options, false, &ca()).is_ok());
        assert!(client(&options, false, &insecure).is_ok());
        assert_eq!(TlsKey::of(&ca()), TlsKey::of(&ca()));
        let keys = [
            TlsKey::of(&Tls::Default),
            TlsKey::of(&ca()),
            TlsKey::of(&insecure),
        ];
        assert!(keys[0] != keys[1] && keys[1] != keys[2] && keys[0] != keys[2]);
    }

    #[test]
    fn the_options_of_every_caller_are_taken() {
        let ours = ClientOptions::new()
            .with_timeout(Duration::from_secs(90))
            .with_connect_timeout(Duration::from_millis(1500));
        assert!(client(&ours, true, &Tls::Default).is_ok());
        assert!(client(&ours, false, &Tls::Default).is_ok());
        // What the instance-metadata providers ask for.
        let metadata = ours
            .with_allow_http(true)
            .with_connect_timeout(Duration::from_secs(1));
        assert!(client(&metadata, true, &Tls::Default).is_ok());
        let bad = ClientOptions::new().with_config(ClientConfigKey::Timeout, "soon");
        let err = client(&bad, true, &Tls::Default).expect_err("not a duration");
        assert!(err.contains("Timeout"), "{err}");
    }
}
