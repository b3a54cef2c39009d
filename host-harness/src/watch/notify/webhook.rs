//! The webhook sink: one `POST` of the event's JSON per event, with an
//! optional bearer token, each attempt within the timeout, retried with
//! backoff after a broken connection, a timeout, a 5xx or a 429, never after
//! another answer. Redirects are not followed (a token must not travel to
//! another host). The answer's body is not read. Messages show the URL's
//! scheme and host only: its path or query may be a secret (a Slack URL is).

use std::time::Duration;

use ureq::Agent;

use super::settings::{TokenError, Webhook, read_token};

/// The first retry waits this long, doubling.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// The longest wait between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// A webhook ready to send.
pub struct WebhookSink {
    agent: Agent,
    hook: Webhook,
    retries: u32,
}

/// Why an event was not delivered; never the URL's path or query, nor the
/// token.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// The receiver answered with a status other than 2xx.
    #[error("answered HTTP {0}")]
    Status(u16),
    /// No answer within the timeout.
    #[error("no answer within the timeout")]
    Timeout,
    /// The host's name does not resolve.
    #[error("host not found")]
    HostNotFound,
    /// No connection could be made.
    #[error("cannot connect")]
    ConnectionFailed,
    /// The connection broke.
    #[error("the connection failed: {0}")]
    Io(std::io::ErrorKind),
    /// TLS failed (the reason, without the URL).
    #[error("TLS failed: {0}")]
    Tls(String),
    /// The request failed otherwise.
    #[error("the request failed")]
    Request,
    /// The bearer token cannot be read.
    #[error(transparent)]
    Token(#[from] TokenError),
    /// Every attempt failed; the last one's reason.
    #[error("{last} (after {attempts} attempts)")]
    GaveUp {
        /// Why the last attempt failed.
        last: Box<WebhookError>,
        /// How many were made.
        attempts: u32,
    },
}

/// How one attempt went.
enum Attempt {
    Delivered,
    /// Worth another try.
    Retry(WebhookError),
    /// Not worth another try.
    Fail(WebhookError),
}

impl WebhookSink {
    /// A sink for `hook`: each attempt ends within `timeout`; `retries`
    /// more attempts after a failure worth retrying.
    pub fn new(hook: Webhook, timeout: Duration, retries: u32) -> WebhookSink {
        crate::tls::install_provider();
        let agent: Agent = Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .max_redirects(0)
            .user_agent(concat!("lockwarden/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        WebhookSink {
            agent,
            hook,
            retries,
        }
    }

    /// The URL as messages show it.
    pub fn shown(&self) -> &str {
        &self.hook.shown
    }

    /// POSTs `body` (the event `id`, sent as `Idempotency-Key` in every
    /// attempt), retrying as configured; the error says why the last attempt
    /// failed.
    pub fn deliver(&self, id: &str, body: &[u8]) -> Result<(), WebhookError> {
        let mut backoff = FIRST_BACKOFF;
        let mut attempt = 0;
        loop {
            match self.attempt(id, body) {
                Attempt::Delivered => return Ok(()),
                Attempt::Fail(why) => return Err(why),
                Attempt::Retry(why) if attempt >= self.retries => {
                    return Err(WebhookError::GaveUp {
                        last: Box::new(why),
                        attempts: attempt + 1,
                    });
                }
                Attempt::Retry(why) => {
                    tracing::debug!(
                        "webhook {}: {why}; retrying in {}ms",
                        self.hook.shown,
                        backoff.as_millis()
                    );
                }
            }
            std::thread::sleep(backoff);
            backoff = (backoff * 2).min(MAX_BACKOFF);
            attempt += 1;
        }
    }

    fn attempt(&self, id: &str, body: &[u8]) -> Attempt {
        let mut request = self
            .agent
            .post(&self.hook.url)
            .header("Content-Type", "application/json")
            .header("Idempotency-Key", id);
        if let Some(file) = &self.hook.token_file {
            // Read at each attempt, so a rotated secret is used at once.
            match read_token(file) {
                Ok(token) => request = request.header("Authorization", &format!("Bearer {token}")),
                Err(why) => return Attempt::Fail(why.into()),
            }
        }
        match request.send(body) {
            Ok(response) => {
                let status = response.status().as_u16();
                match status {
                    200..=299 => Attempt::Delivered,
                    429 | 500..=599 => Attempt::Retry(WebhookError::Status(status)),
                    _ => Attempt::Fail(WebhookError::Status(status)),
                }
            }
            Err(e) => Attempt::Retry(describe(&e)),
        }
    }
}

/// A ureq error as one that never holds the URL.
fn describe(e: &ureq::Error) -> WebhookError {
    match e {
        ureq::Error::Timeout(_) => WebhookError::Timeout,
        ureq::Error::HostNotFound => WebhookError::HostNotFound,
        ureq::Error::ConnectionFailed => WebhookError::ConnectionFailed,
        ureq::Error::Io(io) => WebhookError::Io(io.kind()),
        ureq::Error::Tls(why) => WebhookError::Tls((*why).to_owned()),
        ureq::Error::Rustls(e) => WebhookError::Tls(e.to_string()),
        _ => WebhookError::Request,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    /// A server answering each request with the next of `statuses`; returns
    /// its URL and a handle giving the requests it read.
    fn server(statuses: Vec<u16>) -> (String, std::thread::JoinHandle<Vec<String>>) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!(
            "http://{}/hook/SECRETPATH",
            listener.local_addr().expect("addr")
        );
        let handle = std::thread::spawn(move || {
            let mut seen = Vec::new();
            for status in statuses {
                let (mut stream, _) = listener.accept().expect("accept");
                let mut buf = vec![0u8; 64 * 1024];
                let mut request = Vec::new();
                // Headers, then the body by Content-Length.
                loop {
                    let n = stream.read(&mut buf).expect("read");
                    request.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&request).to_string();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length = text
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                            })
                            .unwrap_or(0);
                        if request.len() >= end + 4 + length || n == 0 {
                            break;
                        }
                    }
                }
                seen.push(String::from_utf8_lossy(&request).into_owned());
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                );
            }
            seen
        });
        (url, handle)
    }

    fn hook(url: String, token: Option<std::path::PathBuf>) -> Webhook {
        Webhook {
            url,
            shown: "http://127.0.0.1".into(),
            token_file: token,
        }
    }

    #[test]
    fn retries_5xx_and_429_then_delivers_with_the_token() {
        let dir = tempfile::tempdir().expect("temp dir");
        let token = dir.path().join("token");
        std::fs::write(&token, "tok-1\n").expect("write");
        let (url, server) = server(vec![503, 429, 204]);
        let sink = WebhookSink::new(hook(url, Some(token)), Duration::from_secs(10), 3);
        sink.deliver("e1", br#"{"event":"x"}"#)
            .expect("delivered on the third attempt");
        let seen = server.join().expect("server");
        assert_eq!(seen.len(), 3);
        for request in &seen {
            assert!(request.starts_with("POST /hook/SECRETPATH "), "{request}");
            assert!(
                request.contains("Authorization: Bearer tok-1\r\n")
                    || request.contains("authorization: Bearer tok-1\r\n"),
                "{request}"
            );
            assert!(request.ends_with(r#"{"event":"x"}"#), "{request}");
        }
    }

    #[test]
    fn a_4xx_is_not_retried_and_errors_hide_the_path() {
        let (url, first) = server(vec![400]);
        let sink = WebhookSink::new(hook(url, None), Duration::from_secs(10), 3);
        let err = sink.deliver("e1", b"{}").expect_err("400");
        assert!(matches!(err, WebhookError::Status(400)), "{err:?}");
        let err = err.to_string();
        assert_eq!(err, "answered HTTP 400");
        assert_eq!(first.join().expect("server").len(), 1);
        let (url, server) = server(vec![500, 500]);
        let sink = WebhookSink::new(hook(url, None), Duration::from_secs(10), 1);
        let err = sink.deliver("e1", b"{}").expect_err("500").to_string();
        assert_eq!(err, "answered HTTP 500 (after 2 attempts)");
        assert_eq!(server.join().expect("server").len(), 2);
        assert!(!err.contains("SECRET"));
    }
}
