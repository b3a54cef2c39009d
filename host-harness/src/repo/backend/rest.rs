//! A repository behind restic's REST protocol (rest-server, `rclone serve
//! restic`): v2 listings with sizes, v1 as a fallback.
//!
//! The protocol's paths, answers and listings are read by the functions at
//! the end of this file, which the `rclone:` backend (the same protocol over
//! a pipe to `rclone serve restic --stdio`) shares.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::Deserialize;
use ureq::Agent;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{DefaultConnector, NextTimeout};

use super::{
    Backend, BackendError, Capabilities, EntryKind, FileInfo, Kind, Layout, Removal, Scheme,
    Target, checked_listing, checked_name, checked_path, checked_read_name,
};
use crate::limits;
use crate::repo::backend::location_text::{LocationError, percent_decode, redact_userinfo};
use crate::tls::Tls;

/// `rest:http(s)://[user:password@]host[:port][/path]`.
pub const SCHEME: Scheme = Scheme {
    name: "rest",
    redact: redact_userinfo,
    parse: |location| {
        let url = Url::parse(location)?;
        Ok(format!(
            "rest:{}://{}{}",
            url.scheme, url.userinfo, url.rest
        ))
    },
    open: |target: &Target<'_>| {
        let url = Url::parse(target.location).map_err(|e| BackendError::Other(e.to_string()))?;
        Ok(Box::new(RestBackend::new(
            &format!("{}://{}", url.scheme, url.rest),
            url.credentials.as_ref(),
            target.shown.to_owned(),
            target.timeout,
            !target.variables.are_given(),
            target.variables.tls(),
        )?))
    },
    modifies: true,
};

/// A `rest:` location taken apart.
struct Url<'a> {
    /// `http` or `https`.
    scheme: &'a str,
    /// `user:password@` as written, when there is one.
    userinfo: &'a str,
    /// `user` and `password`, percent-decoded.
    credentials: Option<(String, String)>,
    /// `host[:port][/path]`, without a trailing slash.
    rest: String,
}

impl<'a> Url<'a> {
    fn parse(location: &'a str) -> Result<Url<'a>, LocationError> {
        let url = location.strip_prefix("rest:").unwrap_or(location);
        let invalid = |why: String| LocationError::Invalid(why);
        let (scheme, rest) = url
            .split_once("://")
            .filter(|(s, _)| matches!(*s, "http" | "https"))
            .ok_or_else(|| {
                // Redacted with its `rest:`: in `user:pw@host`, the user
                // information starts after the scheme's `:`.
                invalid(format!(
                    "`{}` is not rest:http(s)://host:port/path",
                    redact_userinfo(&format!("rest:{url}"))
                ))
            })?;
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        if !authority.contains('@') && path.contains('@') {
            return Err(invalid(
                "the rest: URL has an `@` after its first `/`; if the password holds a `/`, \
                 write it as %2F"
                    .into(),
            ));
        }
        let (userinfo, credentials, host) = match authority.rsplit_once('@') {
            Some((userinfo, host)) => {
                let (user, pass) = userinfo.split_once(':').unwrap_or((userinfo, ""));
                let credentials = (percent_decode(user), percent_decode(pass));
                (&authority[..=userinfo.len()], Some(credentials), host)
            }
            None => ("", None, authority),
        };
        if host.is_empty() {
            return Err(invalid("the rest: URL has no host".into()));
        }
        let path = path.trim_end_matches('/');
        let rest = if path.is_empty() {
            host.to_owned()
        } else {
            format!("{host}/{path}")
        };
        Ok(Url {
            scheme,
            userinfo,
            credentials,
            rest,
        })
    }
}

/// The media type of a v2 listing (names with sizes).
pub(super) const V2: &str = "application/vnd.x.restic.rest.v2";
/// The longest a connection may take to set up, within the request timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// What ureq's agent trusts for every repository.
const DEFAULT_ROOTS: &str = "the roots built into lockwarden (Mozilla's)";

/// A REST repository.
pub struct RestBackend {
    agent: Agent,
    base: String,
    authorization: Option<String>,
    display: String,
    /// What the server's certificate is checked against, for the message
    /// of one refused ([`Tls::trusted`]).
    trusted: String,
}

#[derive(Deserialize)]
struct V2Entry {
    name: String,
    size: u64,
}

/// ureq's resolver, with a lookup that fails (no such host, no answer from
/// DNS) said as [`ureq::Error::HostNotFound`], so that it is reported as
/// unreachable like a refused connection: std reports it as an I/O error of
/// no particular kind, which would read as a connection broken midway.
#[derive(Debug, Default)]
struct Lookup(DefaultResolver);

impl Resolver for Lookup {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        config: &ureq::config::Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        self.0.resolve(uri, config, timeout).map_err(|e| match e {
            ureq::Error::Io(_) => ureq::Error::HostNotFound,
            other => other,
        })
    }
}

impl RestBackend {
    /// A store for the repository at `base` (no trailing slash), with
    /// optional basic-auth credentials; `display` is the redacted location.
    /// Each request, body included, ends within `timeout`. Through the
    /// proxy lockwarden's environment names (`HTTPS_PROXY`, ...) only when
    /// `environment_proxy` ([`super::Variables::are_given`]). The server's
    /// certificate is checked against the roots built into ureq (Mozilla's),
    /// or as `tls` says: against the system's roots and the repository's
    /// own CA, or not at all.
    pub fn new(
        base: &str,
        credentials: Option<&(String, String)>,
        display: String,
        timeout: Duration,
        environment_proxy: bool,
        tls: &Tls,
    ) -> Result<RestBackend, BackendError> {
        let mut config = Agent::config_builder()
            .timeout_global(Some(timeout))
            .timeout_connect(Some(timeout.min(CONNECT_TIMEOUT)))
            .http_status_as_error(false)
            // ureq follows 10 redirects by default: a redirect to another
            // host would have lockwarden judge (and delete) that host's
            // files. A 3xx is answered as an error instead ([`answered`]).
            .max_redirects(0);
        if !environment_proxy {
            config = config.proxy(None);
        }
        match tls {
            Tls::Default => {}
            Tls::Roots(roots) => {
                // Added to the system's roots, not in their place.
                let system =
                    crate::tls::system_roots().map_err(|e| BackendError::Other(e.to_string()))?;
                let certs = (system.iter().chain(roots.certs()))
                    .map(|der| ureq::tls::Certificate::from_der(der.as_ref()).to_owned());
                let roots = ureq::tls::RootCerts::from(certs);
                config =
                    config.tls_config(ureq::tls::TlsConfig::builder().root_certs(roots).build());
            }
            Tls::Insecure { .. } => {
                config = config.tls_config(
                    ureq::tls::TlsConfig::builder()
                        .disable_verification(true)
                        .build(),
                );
            }
        }
        let config = config.build();
        let agent = Agent::with_parts(config, DefaultConnector::new(), Lookup::default());
        Ok(RestBackend {
            agent,
            base: base.to_owned(),
            authorization: credentials
                .map(|(u, p)| format!("Basic {}", BASE64.encode(format!("{u}:{p}")))),
            display,
            trusted: tls.trusted(DEFAULT_ROOTS),
        })
    }

    fn url(&self, path: &str) -> String {
        format!("{}/{path}", self.base)
    }

    fn send(
        &self,
        request: ureq::RequestBuilder<ureq::typestate::WithoutBody>,
        what: &str,
    ) -> Result<ureq::http::Response<ureq::Body>, BackendError> {
        self.sent(self.authorized(request).call(), what)
    }

    /// `request` with the credentials, if any.
    fn authorized<B>(&self, request: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
        match &self.authorization {
            Some(auth) => request.header("Authorization", auth),
            None => request,
        }
    }

    /// The answer to `what`, or what its failure means.
    fn sent(
        &self,
        result: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
        what: &str,
    ) -> Result<ureq::http::Response<ureq::Body>, BackendError> {
        let handshake = match result.as_ref().err() {
            Some(ureq::Error::Rustls(tls)) => Some(crate::tls::described(tls)),
            Some(ureq::Error::Io(io)) => crate::tls::handshake_failure(io),
            _ => None,
        };
        if let Some(handshake) = handshake {
            return Err(BackendError::Untrusted(format!(
                "cannot reach {}: {handshake} ({})",
                self.display, self.trusted
            )));
        }
        result.map_err(|e| match e {
            ureq::Error::Timeout(_) => BackendError::Other(format!(
                "{what} at {}: timed out, the whole answer did not arrive within --timeout",
                self.display
            )),
            ureq::Error::ConnectionFailed | ureq::Error::HostNotFound => {
                BackendError::Unreachable(format!("cannot reach {}: {e}", self.display))
            }
            ureq::Error::Io(ref io)
                if matches!(
                    io.kind(),
                    std::io::ErrorKind::ConnectionRefused
                        | std::io::ErrorKind::AddrNotAvailable
                        | std::io::ErrorKind::HostUnreachable
                        | std::io::ErrorKind::NetworkUnreachable
                ) =>
            {
                BackendError::Unreachable(format!("cannot reach {}: {e}", self.display))
            }
            // Connected, then lost: the server is there, the exchange broke.
            ureq::Error::Io(_) => BackendError::Other(format!(
                "{what} at {}: the connection broke ({e}); whether the server acted is unknown",
                self.display
            )),
            other => BackendError::Other(format!("{what} at {}: {other}", self.display)),
        })
    }

    fn body(
        &self,
        mut response: ureq::http::Response<ureq::Body>,
        what: &str,
        limit: u64,
    ) -> Result<Vec<u8>, BackendError> {
        answered(response.status().as_u16(), what, &self.display)?;
        declared_length_within(response.headers(), limit)?;
        response
            .body_mut()
            .with_config()
            .limit(limit)
            .read_to_vec()
            .map_err(|e| match e {
                ureq::Error::BodyExceedsLimit(_) => BackendError::TooLarge {
                    size: limit + 1,
                    limit,
                },
                ureq::Error::Timeout(_) => BackendError::Other(format!(
                    "{what} at {}: timed out, the whole answer did not arrive within --timeout",
                    self.display
                )),
                other => BackendError::Other(format!("{what} at {}: {other}", self.display)),
            })
    }
}

/// Parses a REST listing of `dir` (v2: `[{"name", "size"}]`, v1:
/// `["name"]`), keeping only names that are restic ids, each once (a name
/// listed twice is one file: judging it twice would fail the run). The
/// protocol lists nothing but files.
pub fn parse_listing(body: &[u8], v2: bool, dir: &str) -> Result<Vec<FileInfo>, BackendError> {
    let not_listing = |e: serde_json::Error| {
        BackendError::Other(format!(
            "listing {dir}: not a REST listing: {}",
            super::unparsed(&e)
        ))
    };
    let files: Vec<FileInfo> = if v2 {
        serde_json::from_slice::<Vec<V2Entry>>(body)
            .map_err(not_listing)?
            .into_iter()
            .map(|e| FileInfo {
                size: Some(e.size),
                ..FileInfo::file(e.name)
            })
            .collect()
    } else {
        serde_json::from_slice::<Vec<String>>(body)
            .map_err(not_listing)?
            .into_iter()
            .map(FileInfo::file)
            .collect()
    };
    checked_listing(files, || dir.to_owned())
}

impl Backend for RestBackend {
    fn name(&self) -> &'static str {
        SCHEME.name
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::NATIVE
    }

    fn read(&self, kind: Kind, name: &str) -> Result<Vec<u8>, BackendError> {
        let path = checked_read_name(kind, name)?;
        let what = format!("reading {path}");
        let response = self.send(self.agent.get(self.url(&path)), &what)?;
        self.body(response, &what, kind.limit())
    }

    fn stat(&self, kind: Kind, name: &str) -> Result<Option<FileInfo>, BackendError> {
        let path = checked_path(kind, name, Layout::Flat)?;
        let what = format!("looking at {path}");
        let response = self.send(self.agent.head(self.url(&path)), &what)?;
        looked_at(
            response.status().as_u16(),
            response.headers(),
            name,
            &what,
            &self.display,
        )
    }

    fn dir_kind(&self, _kind: Kind) -> Result<Option<EntryKind>, BackendError> {
        Ok(Some(EntryKind::Unknown))
    }

    fn list(&self, kind: Kind) -> Result<Vec<FileInfo>, BackendError> {
        let dir = listing_path(kind);
        let what = format!("listing {dir}");
        let response = self.send(self.agent.get(self.url(&dir)).header("Accept", V2), &what)?;
        let v2 = is_v2_listing(response.headers());
        let body = self.body(response, &what, limits::LISTING_BODY)?;
        parse_listing(&body, v2, &format!("{dir} at {}", self.display))
    }

    fn remove(&self, id: &str) -> Result<Removal, BackendError> {
        let path = checked_name(Kind::Lock, id)?;
        let response = self.send(
            self.agent.delete(self.url(&path)),
            &format!("deleting {path}"),
        )?;
        removal(response.status().as_u16(), &path, &self.display)
    }

    fn write_lock(&self, id: &str, stored: &[u8]) -> Result<(), BackendError> {
        let path = checked_name(Kind::Lock, id)?;
        let what = format!("writing {path}");
        let request = self
            .authorized(self.agent.post(self.url(&path)))
            .content_type("application/octet-stream");
        let response = self.sent(request.send(stored), &what)?;
        answered(response.status().as_u16(), &what, &self.display)
    }
}

// What every transport of restic's REST protocol shares.

/// The path that lists files of `kind` (`keys/`, `locks/`).
pub(super) fn listing_path(kind: Kind) -> String {
    format!("{}/", kind.dir())
}

/// Whether a listing's headers say it is a v2 listing (names with sizes).
pub(super) fn is_v2_listing(headers: &ureq::http::HeaderMap) -> bool {
    headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with(V2))
}

/// The error a non-success answer to `what` at `shown` (redacted) means:
/// 404 is [`BackendError::NotFound`], any other failure is [`failed`].
pub(super) fn answered(status: u16, what: &str, shown: &str) -> Result<(), BackendError> {
    match status {
        200..=299 => Ok(()),
        404 => Err(BackendError::NotFound(format!("{what} at {shown}"))),
        _ => Err(failed(status, what, shown)),
    }
}

/// The error of a failure status (not 2xx, not 404) to `what` at `shown`:
/// 401 and 403 are [`BackendError::Denied`]; a 3xx is a redirect, never
/// followed; anything else is said with its status.
fn failed(status: u16, what: &str, shown: &str) -> BackendError {
    match status {
        300..=399 => BackendError::Other(format!(
            "{what} at {shown}: the server answered {status} with a redirect, which lockwarden \
             never follows"
        )),
        401 | 403 => BackendError::Denied(format!(
            "{what} at {shown}: the server refused access (it answered {status})"
        )),
        _ => BackendError::Other(format!("{what} at {shown}: the server answered {status}")),
    }
}

/// Refuses a body whose declared length is over `limit`, before reading it.
pub(super) fn declared_length_within(
    headers: &ureq::http::HeaderMap,
    limit: u64,
) -> Result<(), BackendError> {
    match declared_length(headers).filter(|size| *size > limit) {
        Some(size) => Err(BackendError::TooLarge { size, limit }),
        None => Ok(()),
    }
}

/// What a HEAD of `name` (for `what`) answered: a file with the size the
/// answer declares, or nothing (404).
pub(super) fn looked_at(
    status: u16,
    headers: &ureq::http::HeaderMap,
    name: &str,
    what: &str,
    shown: &str,
) -> Result<Option<FileInfo>, BackendError> {
    match answered(status, what, shown) {
        Ok(()) => Ok(Some(FileInfo {
            size: declared_length(headers),
            ..FileInfo::file(name)
        })),
        Err(BackendError::NotFound(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The length a response's headers declare, if any.
fn declared_length(headers: &ureq::http::HeaderMap) -> Option<u64> {
    headers
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
}

/// What a DELETE of `path` answered with `status` did.
pub(super) fn removal(status: u16, path: &str, shown: &str) -> Result<Removal, BackendError> {
    match status {
        200..=299 => Ok(Removal::Removed),
        404 => Ok(Removal::AlreadyGone),
        _ => Err(failed(status, &format!("deleting {path}"), shown)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server that is not the TLS one the location promises fails the
    /// handshake, and the error says so and what the certificate would
    /// have been checked against (here the system's roots and the
    /// repository's own CA), never that the server is not running.
    #[test]
    fn a_failed_tls_handshake_is_said_with_what_was_trusted() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        let addr = listener.local_addr().expect("its address");
        std::thread::spawn(move || {
            for mut stream in listener.incoming().take(4).flatten() {
                let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
                let _ = std::io::Write::write_all(&mut stream, answer);
            }
        });
        let ca =
            Tls::with_ca(crate::tls::tests::TEST_CA.as_bytes(), "spec.x".into()).expect("a CA");
        let made = |tls: &Tls| {
            RestBackend::new(
                &format!("https://{addr}/r"),
                None,
                format!("rest:https://{addr}/r"),
                Duration::from_secs(10),
                false,
                tls,
            )
        };
        let insecure = Tls::Insecure { from: "x".into() };
        assert!(made(&insecure).is_ok());
        let err = made(&ca)
            .expect("made")
            .list(Kind::Lock)
            .expect_err("no TLS there");
        assert!(
            matches!(&err, BackendError::Untrusted(m)
                if m.contains("the TLS handshake failed")
                    && m.contains("the system's roots and the CA from spec.x")),
            "{err:?}"
        );
    }

    /// A storage's answer is never quoted: serde's own messages would
    /// (`invalid type: string "..."`).
    #[test]
    fn a_listing_that_is_not_one_is_said_without_its_text() {
        let bodies: [&[u8]; 5] = [
            br#""INTERNAL-ANSWER""#,
            br#"[{"name": "a", "size": "INTERNAL-ANSWER"}]"#,
            br#"["a", {"INTERNAL-ANSWER": 1}]"#,
            br#"[INTERNAL-ANSWER]"#,
            br#"["INTERNAL-ANSWER"#,
        ];
        for body in bodies {
            for v2 in [true, false] {
                let err = parse_listing(body, v2, "locks/").expect_err("not a listing");
                let text = err.to_string();
                assert!(text.contains("not a REST listing"), "{text}");
                assert!(!text.contains("INTERNAL"), "{text}");
            }
        }
    }

    #[test]
    fn every_refusal_is_denied_and_no_redirect_is_followed() {
        for status in [401, 403] {
            let listing = answered(status, "listing locks/", "rest:http://h/r");
            assert!(
                matches!(listing, Err(BackendError::Denied(_))),
                "{listing:?}"
            );
            let delete = removal(status, "locks/x", "rest:http://h/r");
            assert!(matches!(delete, Err(BackendError::Denied(_))), "{delete:?}");
        }
        for status in [301, 302, 303, 307, 308] {
            let err = answered(status, "reading config", "rest:http://h/r").expect_err("3xx");
            assert!(err.to_string().contains("never follows"), "{err}");
            assert!(matches!(err, BackendError::Other(_)), "{err:?}");
            assert!(removal(status, "locks/x", "rest:http://h/r").is_err());
        }
        assert!(matches!(
            removal(404, "locks/x", "s"),
            Ok(Removal::AlreadyGone)
        ));
        assert!(matches!(
            answered(500, "reading config", "s"),
            Err(BackendError::Other(_))
        ));
    }
}
