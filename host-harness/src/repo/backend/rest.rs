//! A repository behind restic's REST protocol (rest-server, `rclone serve
//! restic`): v2 listings with sizes, v1 as a fallback.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::Deserialize;
use ureq::Agent;

use super::{Backend, BackendError, FileInfo, Kind, Removal, checked_name};
use crate::limits;

const V2: &str = "application/vnd.x.restic.rest.v2";
/// The longest a connection may take to set up, within the request timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A REST repository.
pub struct RestBackend {
    agent: Agent,
    base: String,
    authorization: Option<String>,
    display: String,
}

#[derive(Deserialize)]
struct V2Entry {
    name: String,
    size: u64,
}

impl RestBackend {
    /// A store for the repository at `base` (no trailing slash), with
    /// optional basic-auth credentials; `display` is the redacted location.
    /// Each request, body included, ends within `timeout`.
    pub fn new(
        base: &str,
        credentials: Option<&(String, String)>,
        display: String,
        timeout: Duration,
    ) -> RestBackend {
        let agent: Agent = Agent::config_builder()
            .timeout_global(Some(timeout))
            .timeout_connect(Some(timeout.min(CONNECT_TIMEOUT)))
            .http_status_as_error(false)
            .build()
            .into();
        RestBackend {
            agent,
            base: base.to_owned(),
            authorization: credentials
                .map(|(u, p)| format!("Basic {}", BASE64.encode(format!("{u}:{p}")))),
            display,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}/{path}", self.base)
    }

    fn send(
        &self,
        request: ureq::RequestBuilder<ureq::typestate::WithoutBody>,
        what: &str,
    ) -> Result<ureq::http::Response<ureq::Body>, BackendError> {
        let request = match &self.authorization {
            Some(auth) => request.header("Authorization", auth),
            None => request,
        };
        request.call().map_err(|e| match e {
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
        let status = response.status();
        if status == 404 {
            return Err(BackendError::NotFound(format!(
                "{what} at {}",
                self.display
            )));
        }
        if !status.is_success() {
            return Err(BackendError::Other(format!(
                "{what} at {}: the server answered {status}",
                self.display
            )));
        }
        let declared = response
            .headers()
            .get("content-length")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if let Some(size) = declared.filter(|size| *size > limit) {
            return Err(BackendError::TooLarge { size, limit });
        }
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

/// Parses a REST listing (v2: `[{"name", "size"}]`, v1: `["name"]`), keeping
/// only names that are restic ids, each once.
pub fn parse_listing(body: &[u8], v2: bool) -> Result<Vec<FileInfo>, serde_json::Error> {
    let files: Vec<FileInfo> = if v2 {
        serde_json::from_slice::<Vec<V2Entry>>(body)?
            .into_iter()
            .map(|e| FileInfo {
                name: e.name,
                size: e.size,
            })
            .collect()
    } else {
        serde_json::from_slice::<Vec<String>>(body)?
            .into_iter()
            .map(|name| FileInfo { name, size: 0 })
            .collect()
    };
    // A name listed twice is one file: judging it twice would fail the run.
    let mut seen = std::collections::HashSet::new();
    Ok(files
        .into_iter()
        .filter(|f| super::super::lockfile::is_valid_id(&f.name) && seen.insert(f.name.clone()))
        .collect())
}

impl Backend for RestBackend {
    fn read(&self, kind: Kind, name: &str) -> Result<Vec<u8>, BackendError> {
        let path = checked_name(kind, name)?;
        let what = format!("reading {path}");
        let response = self.send(self.agent.get(self.url(&path)), &what)?;
        self.body(response, &what, kind.limit())
    }

    fn list(&self, kind: Kind) -> Result<Vec<FileInfo>, BackendError> {
        let dir = format!("{}/", kind.dir());
        let what = format!("listing {dir}");
        let response = self.send(self.agent.get(self.url(&dir)).header("Accept", V2), &what)?;
        let v2 = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with(V2));
        let body = self.body(response, &what, limits::LISTING_BODY)?;
        let files = parse_listing(&body, v2).map_err(|e| {
            BackendError::Other(format!(
                "listing {dir} at {}: not a REST listing: {e}",
                self.display
            ))
        })?;
        if files.len() > limits::LISTING_ENTRIES {
            return Err(BackendError::TooMany {
                dir: format!("{dir} at {}", self.display),
                limit: limits::LISTING_ENTRIES,
            });
        }
        Ok(files)
    }

    fn remove_lock(&self, id: &str) -> Result<Removal, BackendError> {
        let path = checked_name(Kind::Lock, id)?;
        let response = self.send(
            self.agent.delete(self.url(&path)),
            &format!("deleting {path}"),
        )?;
        match response.status().as_u16() {
            200..=299 => Ok(Removal::Removed),
            404 => Ok(Removal::AlreadyGone),
            status => Err(BackendError::Other(format!(
                "deleting {path} at {}: the server answered {status}",
                self.display
            ))),
        }
    }
}
