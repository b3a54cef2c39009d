//! What the object-store backends (`s3:`, `gs:`, `azure:`) share: a
//! [`Backend`] over an [`object_store`] client, whose signing, credential
//! chains and retries are the stores' own; the request deadlines, size
//! bounds and error messages are lockwarden's.
//!
//! Error messages are made here from the error's kind, its HTTP status and
//! the store's error code when it is a well-known one, never from the
//! client's own text: that names the request URL, which holds an Azure SAS
//! token when one is used, and quotes the storage's answer.
//!
//! Every client the stores make is [`http::Connector`]'s: the one HTTP
//! client policy (no redirect followed, no `Referer`, every body bounded,
//! listing pages checked).

pub mod http;
mod listing;
mod refusal;

use std::time::Duration;

use futures::StreamExt as _;
use object_store::client::{HttpError, HttpErrorKind};
use object_store::path::Path;
use object_store::{BackoffConfig, ClientOptions, ObjectStore, ObjectStoreExt as _, RetryConfig};

use super::io_runtime;
use super::{
    Backend, BackendError, Capabilities, EntryKind, FileInfo, Kind, Removal, Target,
    checked_listing, checked_name, checked_read_name,
};
use crate::limits;
use crate::repo::backend::location_text::LocationError;

/// How many retries a request gets after a 5xx, a 429 or a broken
/// connection (with exponential backoff, all within the timeout).
const RETRIES: usize = 3;
/// The longest a connection may take to set up, within the request timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Listing entries taken from the store before giving up: ids and whatever
/// else lies in the directory.
const RAW_LISTING_ENTRIES: usize = 2 * limits::LISTING_ENTRIES;

/// Refuses a credentials or token file that a store's client will read on
/// its own (`AWS_WEB_IDENTITY_TOKEN_FILE`, `AZURE_FEDERATED_TOKEN_FILE`,
/// gcloud's application default credentials) unless it is a regular file
/// of at most [`limits::CREDENTIALS_FILE`] bytes: the clients read it with a
/// plain blocking read, which a FIFO holds forever (no deadline can end it:
/// the read blocks the thread that keeps the deadline) and a device such
/// as `/dev/zero` never ends. `named` says which file it is.
pub fn check_credentials_file(path: &std::path::Path, named: &str) -> Result<(), BackendError> {
    crate::files::read_regular_file(path, limits::CREDENTIALS_FILE)
        .map(drop)
        .map_err(|e| {
            BackendError::Other(format!(
                "cannot use {named} ({}): {e}",
                crate::text::escape(&path.display().to_string())
            ))
        })
}

/// The HTTP settings every object-store client gets: each request (body
/// included) ends within `timeout`, connections within 10 s of it.
pub fn client_options(timeout: Duration) -> ClientOptions {
    ClientOptions::new()
        .with_timeout(timeout)
        .with_connect_timeout(timeout.min(CONNECT_TIMEOUT))
}

/// The retries every object-store client gets: [`RETRIES`], backing off
/// from 100 ms, none started after `timeout`.
pub fn retry_config(timeout: Duration) -> RetryConfig {
    RetryConfig {
        backoff: BackoffConfig {
            init_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(2),
            base: 2.0,
        },
        max_retries: RETRIES,
        retry_timeout: timeout,
    }
}

/// The repository's path inside its bucket, as restic cleans it: no empty,
/// `.` or leading `/` parts, `..` taking one away; `""` for the bucket's
/// root.
pub fn clean_prefix(prefix: &str) -> Result<String, LocationError> {
    let mut parts: Vec<&str> = Vec::new();
    for part in prefix.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            _ if part.chars().any(char::is_control) => {
                return Err(LocationError::Invalid(
                    "the repository path holds a control character".into(),
                ));
            }
            _ => parts.push(part),
        }
    }
    Ok(parts.join("/"))
}

/// `bucket:/prefix` (restic's `gs:` and `azure:` form, after the scheme):
/// the bucket and the cleaned prefix.
pub fn bucket_and_prefix(rest: &str, scheme: &str) -> Result<(String, String), LocationError> {
    let invalid = |why: &str| LocationError::Invalid(format!("{scheme}: {why}"));
    let (bucket, prefix) = rest
        .split_once(':')
        .ok_or_else(|| invalid("write it as {scheme}:bucket:/path"))?;
    if bucket.is_empty() {
        return Err(invalid("the bucket name is missing"));
    }
    check_bucket(bucket, scheme)?;
    Ok((bucket.to_owned(), clean_prefix(prefix)?))
}

/// Refuses a bucket (or container) name that is not one: only ASCII
/// letters, digits, `.`, `-` and `_`, not `.` or `..`. The store clients put
/// the name into URLs as it is, where a `#`, `?` or `%` would move the
/// request elsewhere (on AWS, to another host, signed and with the session
/// token).
pub fn check_bucket(bucket: &str, scheme: &str) -> Result<(), LocationError> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_');
    if bucket.chars().all(allowed) && bucket != "." && bucket != ".." {
        return Ok(());
    }
    Err(LocationError::Invalid(format!(
        "{scheme}: a bucket name holds only letters, digits, `.`, `-` and `_`"
    )))
}

/// Whether an HTTPS client can be made ([`crate::tls::check_roots`]): asked
/// before each store's builder makes one.
pub fn tls_ready() -> Result<(), BackendError> {
    crate::tls::check_roots().map_err(|e| BackendError::Other(e.to_string()))
}

/// The backend over a client the builder made (or why it could not).
pub fn open(
    name: &'static str,
    built: Result<impl ObjectStore, object_store::Error>,
    bucket: &str,
    prefix: String,
    target: &Target<'_>,
) -> Result<Box<dyn Backend>, BackendError> {
    // The builder's errors name settings, not secrets; still, only its
    // first line, escaped.
    let store = built.map_err(|e| {
        let text = e.to_string();
        BackendError::Other(format!(
            "cannot use {}: {}",
            target.shown,
            crate::text::escape(text.lines().next().unwrap_or_default())
        ))
    })?;
    Ok(Box::new(CloudBackend {
        name,
        store: Box::new(store),
        prefix,
        bucket: bucket.to_owned(),
        shown: target.shown.to_owned(),
        timeout: target.timeout,
        trusted: target.variables.tls().trusted("the system's roots"),
    }))
}

/// A repository in a bucket (or container) of an object store.
pub struct CloudBackend {
    name: &'static str,
    store: Box<dyn ObjectStore>,
    /// The repository's path in the bucket ([`clean_prefix`]).
    prefix: String,
    /// The bucket, for messages.
    bucket: String,
    /// The redacted location, for messages.
    shown: String,
    timeout: Duration,
    /// What the storage's certificate is checked against, for the message
    /// of one refused ([`crate::tls::Tls::trusted`]).
    trusted: String,
}

impl CloudBackend {
    /// The object path of a repository file (`locks/<id>`, `config`).
    fn path(&self, file: &str) -> Path {
        if self.prefix.is_empty() {
            Path::from(file)
        } else {
            Path::from(format!("{}/{file}", self.prefix))
        }
    }

    /// Runs one operation on `file` with the deadline; `verb` and `file`
    /// start its messages. A panic in the client (object_store indexes by
    /// numbers a storage's answer gives, as in an Azure batch answer's
    /// `Content-ID`) is an error of this operation, not the end of
    /// lockwarden.
    fn run<T>(
        &self,
        verb: &str,
        file: &str,
        operation: impl Future<Output = Result<T, object_store::Error>>,
    ) -> Result<T, BackendError> {
        use futures::FutureExt as _;
        io_runtime::within(
            self.timeout,
            || format!("{verb} {file} at {}", self.shown),
            async {
                match std::panic::AssertUnwindSafe(operation).catch_unwind().await {
                    Ok(result) => result.map_err(|e| self.error(verb, file, &e)),
                    Err(_) => Err(BackendError::Other(format!(
                        "{verb} {file} at {}: the storage's answer made its client fail; \
                         nothing more was done",
                        self.shown
                    ))),
                }
            },
        )
    }

    /// An object-store error as a [`BackendError`], in words of our own.
    fn error(&self, verb: &str, file: &str, e: &object_store::Error) -> BackendError {
        let at = format!("{verb} {file} at {}", self.shown);
        let answer = Answer::of(e);
        if answer.missing_bucket {
            return BackendError::NoRepository(format!(
                "the {} `{}` does not exist",
                self.container_word(),
                crate::text::escape(&self.bucket)
            ));
        }
        match e {
            object_store::Error::NotFound { .. } => {
                BackendError::NotFound(format!("{file} at {}", self.shown))
            }
            object_store::Error::Unauthenticated { .. }
            | object_store::Error::PermissionDenied { .. } => {
                BackendError::Denied(format!("{at}: the storage refused access ({answer})"))
            }
            // A listing's 401 or 403 reaches here as a generic error.
            _ if answer.denied() => {
                BackendError::Denied(format!("{at}: the storage refused access ({answer})"))
            }
            _ => match answer.transport {
                Some(HttpErrorKind::Connect) if answer.handshake.is_some() => {
                    BackendError::Untrusted(format!(
                        "cannot reach {}: {answer} ({})",
                        self.shown, self.trusted
                    ))
                }
                Some(HttpErrorKind::Connect) => {
                    BackendError::Unreachable(format!("cannot reach {}: {answer}", self.shown))
                }
                _ => BackendError::Other(format!("{at}: {answer}")),
            },
        }
    }

    /// What a bucket is called in this store.
    fn container_word(&self) -> &'static str {
        if self.name == "azure" {
            "container"
        } else {
            "bucket"
        }
    }

    async fn list_async(&self, dir: &Path) -> Result<Vec<FileInfo>, object_store::Error> {
        let mut stream = self.store.list(Some(dir));
        let mut files = Vec::new();
        let mut seen = 0usize;
        while let Some(meta) = stream.next().await {
            let meta = meta?;
            seen += 1;
            if seen > RAW_LISTING_ENTRIES {
                files.push(FileInfo::file(""));
                break;
            }
            // Only the directory's own files: restic nests nothing here.
            let Some(mut rest) = meta.location.prefix_match(dir) else {
                continue;
            };
            let (Some(name), None) = (rest.next(), rest.next()) else {
                continue;
            };
            files.push(file_info(name.as_ref(), &meta));
        }
        Ok(files)
    }

    async fn read_async(&self, path: &Path, limit: u64) -> Result<Read, object_store::Error> {
        let result = self.store.get(path).await?;
        if result.meta.size > limit {
            return Ok(Read::TooLarge(result.meta.size));
        }
        let mut stream = result.into_stream();
        let mut bytes = Vec::new();
        while let Some(chunk) = stream.next().await {
            bytes.extend_from_slice(&chunk?);
            if bytes.len() as u64 > limit {
                return Ok(Read::TooLarge(bytes.len() as u64));
            }
        }
        Ok(Read::Bytes(bytes))
    }

    async fn remove_async(&self, path: &Path) -> Result<Removal, object_store::Error> {
        // Object stores answer a delete of nothing with success: ask first,
        // so that the report can say the lock was already gone.
        match self.store.head(path).await {
            Err(object_store::Error::NotFound { .. }) => return Ok(Removal::AlreadyGone),
            Err(e) => return Err(e),
            Ok(_) => {}
        }
        self.store.delete(path).await?;
        Ok(Removal::Removed)
    }
}

/// An object as a file of the repository (an object store holds nothing
/// but objects).
fn file_info(name: &str, meta: &object_store::ObjectMeta) -> FileInfo {
    FileInfo {
        size: Some(meta.size),
        modified: meta.last_modified.timestamp_nanos_opt(),
        ..FileInfo::file(name)
    }
}

/// A bounded read's outcome.
enum Read {
    Bytes(Vec<u8>),
    TooLarge(u64),
}

/// How S3 and Azure (error codes) and GCS (its message) say that a bucket
/// or container does not exist.
const MISSING_BUCKET: [&str; 3] = [
    "<Code>NoSuchBucket<",
    "<Code>ContainerNotFound<",
    "The specified bucket does not exist",
];

/// What the store answered, in parts that hold no secret: the HTTP status,
/// the store's error code (`NoSuchBucket`, `AuthorizationFailure`, ...), or
/// the kind of transport failure.
struct Answer {
    status: Option<u16>,
    code: Option<String>,
    transport: Option<HttpErrorKind>,
    missing_bucket: bool,
    /// Why the HTTP client policy refused the answer, when it did.
    refused: Option<refusal::Refusal>,
    /// Why the TLS handshake failed, when it did
    /// ([`crate::tls::handshake_failure`]).
    handshake: Option<&'static str>,
}

impl Answer {
    fn of(e: &object_store::Error) -> Answer {
        let mut answer = Answer {
            status: None,
            code: None,
            transport: None,
            missing_bucket: false,
            refused: None,
            handshake: crate::tls::handshake_failure(e),
        };
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
        while let Some(err) = source {
            if let Some(http) = err.downcast_ref::<HttpError>() {
                answer.transport = Some(http.kind());
            }
            if let Some(refusal) = err.downcast_ref::<refusal::Refusal>() {
                answer.status = answer.status.or(refusal.status());
                answer.refused = Some(refusal.clone());
            }
            // The client's status error reads "... status code: 404 Not
            // Found: <body>"; only the number and the body's error code are
            // taken from it.
            let text = err.to_string();
            if let Some(status) = status_in(&text) {
                answer.status = Some(status);
                answer.code = error_code(&text);
                answer.missing_bucket |= MISSING_BUCKET.iter().any(|m| text.contains(m));
            }
            source = err.source();
        }
        answer
    }
}

impl Answer {
    /// Whether the storage refused the credentials (401) or the access
    /// (403).
    fn denied(&self) -> bool {
        matches!(self.status, Some(401 | 403))
    }
}

impl std::fmt::Display for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(refusal) = &self.refused {
            return write!(f, "{refusal}");
        }
        if let (None, Some(handshake)) = (self.status, self.handshake) {
            return f.write_str(handshake);
        }
        match (self.status, &self.code, self.transport) {
            (Some(status), Some(code), _) => write!(f, "the storage answered {status} {code}"),
            (Some(status), None, _) => write!(f, "the storage answered {status}"),
            (None, _, Some(HttpErrorKind::Connect)) => f.write_str("the connection failed"),
            (None, _, Some(HttpErrorKind::Timeout)) => f.write_str("no answer within --timeout"),
            (None, _, Some(HttpErrorKind::Decode)) => f.write_str("the answer was malformed"),
            (None, _, Some(_)) => f.write_str("the connection broke"),
            (None, _, None) => f.write_str("the storage client failed"),
        }
    }
}

/// The status in "status code: 404 Not Found".
fn status_in(text: &str) -> Option<u16> {
    let rest = text.split_once("status code: ")?.1;
    rest.get(..3)?.parse().ok()
}

/// The error code of an S3/Azure (`<Code>X</Code>`) or GCS
/// (`"reason": "X"`) error body, when it is one of [`ERROR_CODES`]. This is
/// all of an error body any message shows, for every repository: the body
/// is the storage's text, and a discovered repository's storage is
/// whatever host a tenant named, which could have lockwarden fetch another
/// service's answer and quote it in an Event.
fn error_code(text: &str) -> Option<String> {
    let code = if let Some((_, rest)) = text.split_once("<Code>") {
        rest.split('<').next()?
    } else {
        let (_, rest) = text.split_once("\"reason\"")?;
        rest.trim_start_matches([':', ' ', '"']).split('"').next()?
    };
    ERROR_CODES
        .iter()
        .find(|known| **known == code)
        .map(|known| (*known).to_owned())
}

/// The error codes of S3 (and MinIO, Ceph), Azure Blob Storage and GCS
/// that say why a request failed in a way someone can act on.
const ERROR_CODES: &[&str] = &[
    // S3 and its kin.
    "AccessDenied",
    "AccountProblem",
    "AllAccessDisabled",
    "AuthorizationHeaderMalformed",
    "ExpiredToken",
    "InternalError",
    "InvalidAccessKeyId",
    "InvalidArgument",
    "InvalidBucketName",
    "InvalidObjectState",
    "InvalidRequest",
    "InvalidSecurity",
    "InvalidToken",
    "MethodNotAllowed",
    "NoSuchBucket",
    "NoSuchKey",
    "NotImplemented",
    "PermanentRedirect",
    "PreconditionFailed",
    "RequestTimeTooSkewed",
    "RequestTimeout",
    "ServiceUnavailable",
    "SignatureDoesNotMatch",
    "SlowDown",
    "TemporaryRedirect",
    "TokenRefreshRequired",
    "XAmzContentSHA256Mismatch",
    "XMinioStorageFull",
    "XMinioServerNotInitialized",
    // Azure Blob Storage.
    "AccountIsDisabled",
    "AuthenticationFailed",
    "AuthorizationFailure",
    "AuthorizationPermissionMismatch",
    "AuthorizationProtocolMismatch",
    "AuthorizationResourceTypeMismatch",
    "AuthorizationServiceMismatch",
    "AuthorizationSourceIPMismatch",
    "BlobNotFound",
    "ContainerBeingDeleted",
    "ContainerDisabled",
    "ContainerNotFound",
    "InsufficientAccountPermissions",
    "InvalidAuthenticationInfo",
    "NoAuthenticationInformation",
    "OperationTimedOut",
    "ResourceNotFound",
    "ServerBusy",
    // GCS (`reason`).
    "accountDisabled",
    "authError",
    "backendError",
    "forbidden",
    "notFound",
    "rateLimitExceeded",
    "unauthorized",
    "userProjectMissing",
    "userRateLimitExceeded",
];

impl Backend for CloudBackend {
    fn name(&self) -> &'static str {
        self.name
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::NATIVE
    }

    fn list(&self, kind: Kind) -> Result<Vec<FileInfo>, BackendError> {
        let dir = self.path(kind.dir());
        let files = self.run(
            "listing",
            &format!("{}/", kind.dir()),
            self.list_async(&dir),
        )?;
        if files.len() > RAW_LISTING_ENTRIES {
            return Err(BackendError::TooMany {
                dir: format!("{}/ at {}", kind.dir(), self.shown),
                limit: limits::LISTING_ENTRIES,
            });
        }
        checked_listing(files, || format!("{}/ at {}", kind.dir(), self.shown))
    }

    fn read(&self, kind: Kind, name: &str) -> Result<Vec<u8>, BackendError> {
        let file = checked_read_name(kind, name)?;
        let limit = kind.limit();
        match self.run("reading", &file, self.read_async(&self.path(&file), limit))? {
            Read::Bytes(bytes) => Ok(bytes),
            Read::TooLarge(size) => Err(BackendError::TooLarge { size, limit }),
        }
    }

    fn stat(&self, kind: Kind, name: &str) -> Result<Option<FileInfo>, BackendError> {
        let file = checked_name(kind, name)?;
        let path = self.path(&file);
        self.run("looking at", &file, async {
            match self.store.head(&path).await {
                Ok(meta) => Ok(Some(file_info(name, &meta))),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        })
    }

    fn dir_kind(&self, _kind: Kind) -> Result<Option<EntryKind>, BackendError> {
        Ok(Some(EntryKind::Unknown))
    }

    fn remove(&self, id: &str) -> Result<Removal, BackendError> {
        let file = checked_name(Kind::Lock, id)?;
        self.run("deleting", &file, self.remove_async(&self.path(&file)))
    }

    fn write_lock(&self, id: &str, stored: &[u8]) -> Result<(), BackendError> {
        let file = checked_name(Kind::Lock, id)?;
        // An object appears whole or not at all.
        let payload = object_store::PutPayload::from(stored.to_vec());
        self.run("writing", &file, async {
            self.store.put(&self.path(&file), payload).await.map(drop)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_cleaned_as_restic_cleans_them() {
        assert_eq!(clean_prefix("").expect("root"), "");
        assert_eq!(clean_prefix("/a//b/./c/").expect("clean"), "a/b/c");
        assert_eq!(clean_prefix("a/../b").expect("dot-dot"), "b");
        assert_eq!(clean_prefix("../../x").expect("above the root"), "x");
        assert!(clean_prefix("a/\u{1b}[31m").is_err());
    }

    #[test]
    fn a_bucket_name_cannot_move_the_request_elsewhere() {
        for bad in ["evil.example#", "b?x=", "b%2F..", "..", "b\\c", "b@h"] {
            assert!(check_bucket(bad, "s3").is_err(), "{bad}");
            assert!(
                bucket_and_prefix(&format!("{bad}:/r"), "gs").is_err(),
                "{bad}"
            );
        }
        for good in ["restic", "my-bucket.example", "Legacy_Bucket"] {
            assert!(check_bucket(good, "s3").is_ok(), "{good}");
        }
    }

    #[test]
    fn only_the_status_and_code_of_an_error_body_are_kept() {
        let text = "Server returned non-2xx status code: 403 Forbidden: <Error><Code>SignatureDoesNotMatch</Code><StringToSign>secret-token</StringToSign></Error>";
        assert_eq!(status_in(text), Some(403));
        assert_eq!(error_code(text).as_deref(), Some("SignatureDoesNotMatch"));
        let gcs = r#"status code: 404 Not Found: {"error": {"errors": [{"reason": "notFound"}]}}"#;
        assert_eq!(error_code(gcs).as_deref(), Some("notFound"));
        assert_eq!(error_code("<Code>bad code; rm -rf</Code>"), None);
        // A code of the storage's own choosing is not shown: it could be
        // another service's answer.
        assert_eq!(
            error_code("status code: 500: <Code>Hunter2Token</Code>"),
            None
        );
        assert_eq!(error_code(r#"{"reason": "internalSecretX"}"#), None);
    }
}
