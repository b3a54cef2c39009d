//! A repository behind restic's REST protocol (rest-server, `rclone serve
//! restic`): v2 listings with sizes, v1 as a fallback.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::Deserialize;
use ureq::Agent;

use super::{FileInfo, Kind, Removal, Store, StoreError, checked_name};

const V2: &str = "application/vnd.x.restic.rest.v2";
/// Keys and locks are small; a listing of 100,000 locks is about 10 MB.
const MAX_BODY: u64 = 256 << 20;

/// A REST repository.
pub struct RestStore {
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

impl RestStore {
    /// A store for the repository at `base` (no trailing slash), with
    /// optional basic-auth credentials; `display` is the redacted location.
    pub fn new(base: &str, credentials: Option<&(String, String)>, display: String) -> RestStore {
        let agent: Agent = Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(60)))
            .timeout_connect(Some(Duration::from_secs(10)))
            .http_status_as_error(false)
            .build()
            .into();
        RestStore {
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
    ) -> Result<ureq::http::Response<ureq::Body>, StoreError> {
        let request = match &self.authorization {
            Some(auth) => request.header("Authorization", auth),
            None => request,
        };
        request.call().map_err(|e| match e {
            ureq::Error::Io(_)
            | ureq::Error::ConnectionFailed
            | ureq::Error::HostNotFound
            | ureq::Error::Timeout(_) => {
                StoreError::Unreachable(format!("cannot reach {}: {e}", self.display))
            }
            other => StoreError::Other(format!("{what} at {}: {other}", self.display)),
        })
    }

    fn body(
        &self,
        mut response: ureq::http::Response<ureq::Body>,
        what: &str,
    ) -> Result<Vec<u8>, StoreError> {
        let status = response.status();
        if status == 404 {
            return Err(StoreError::NotFound(format!("{what} at {}", self.display)));
        }
        if !status.is_success() {
            return Err(StoreError::Other(format!(
                "{what} at {}: the server answered {status}",
                self.display
            )));
        }
        response
            .body_mut()
            .with_config()
            .limit(MAX_BODY)
            .read_to_vec()
            .map_err(|e| StoreError::Other(format!("{what} at {}: {e}", self.display)))
    }
}

impl Store for RestStore {
    fn read(&self, kind: Kind, name: &str) -> Result<Vec<u8>, StoreError> {
        let path = checked_name(kind, name)?;
        let response = self.send(self.agent.get(self.url(&path)), &path)?;
        self.body(response, &path)
    }

    fn list(&self, kind: Kind) -> Result<Vec<FileInfo>, StoreError> {
        let dir = format!("{}/", kind.dir());
        let response = self.send(self.agent.get(self.url(&dir)).header("Accept", V2), &dir)?;
        let v2 = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with(V2));
        let body = self.body(response, &dir)?;
        let bad = |e: serde_json::Error| {
            StoreError::Other(format!(
                "listing {dir} at {}: not a REST listing: {e}",
                self.display
            ))
        };
        let files: Vec<FileInfo> = if v2 {
            serde_json::from_slice::<Vec<V2Entry>>(&body)
                .map_err(bad)?
                .into_iter()
                .map(|e| FileInfo {
                    name: e.name,
                    size: e.size,
                })
                .collect()
        } else {
            serde_json::from_slice::<Vec<String>>(&body)
                .map_err(bad)?
                .into_iter()
                .map(|name| FileInfo { name, size: 0 })
                .collect()
        };
        Ok(files
            .into_iter()
            .filter(|f| super::super::lockfile::is_valid_id(&f.name))
            .collect())
    }

    fn remove_lock(&self, id: &str) -> Result<Removal, StoreError> {
        let path = checked_name(Kind::Lock, id)?;
        let response = self.send(self.agent.delete(self.url(&path)), &path)?;
        match response.status().as_u16() {
            200..=299 => Ok(Removal::Removed),
            404 => Ok(Removal::AlreadyGone),
            status => Err(StoreError::Other(format!(
                "deleting {path} at {}: the server answered {status}",
                self.display
            ))),
        }
    }
}
