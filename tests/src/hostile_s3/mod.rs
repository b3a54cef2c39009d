//! A hostile S3-compatible server of our own on 127.0.0.1 (std only, like
//! [`crate::fake_rest`]). It serves a real restic repository, copied from a
//! directory `restic init` made, its files held in memory under the keys
//! `repo/...` of the bucket `hostile`: ListObjectsV2 (path style, paged by
//! continuation token, a few keys a page), GetObject, HeadObject,
//! DeleteObject and PutObject, without checking any signature. A [`Mode`]
//! makes it hostile in one way for the whole test:
//!
//! - a listing of `locks/` that never ends ([`Mode::RepeatedToken`],
//!   [`Mode::EndlessListing`]) or that is hundreds of MiB
//!   ([`Mode::HugeListing`]), streamed, never held in memory;
//! - an error body of hundreds of MiB ([`Mode::HugeError`]);
//! - a redirect to a second listener ([`Mode::Redirect`]), which records
//!   what reaches it ([`HostileS3::redirected`]);
//! - any status with an S3 error code ([`Mode::Status`]: 401, 403,
//!   `NoSuchBucket`);
//! - nobody listening at all ([`Mode::Closed`]).
//!
//! Odd keys need no mode: [`HostileS3::put`] stores any key, and listings
//! write it as S3 does (control characters as character references).

mod page;

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufReader;
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use crate::http_wire::{Request, accept_until, decode_path, read_request, respond, stream};
use crate::recorder::Recorder;
pub use page::escape as escape_key;
use page::{Listed, error_body, etag_of, http_date, list_page};

/// The bucket.
pub const BUCKET: &str = "hostile";
/// The repository's prefix in the bucket.
pub const PREFIX: &str = "repo";
/// The access key id lockwarden is given.
pub const ACCESS_KEY_ID: &str = "HOSTILEKEYID";
/// The secret access key: distinctive, so that tests can assert it never
/// appears anywhere.
pub const SECRET_KEY: &str = "hostile-s3-secret-Vb8nQ3xR";
/// The session token (sent as `x-amz-security-token`): distinctive too.
pub const SESSION_TOKEN: &str = "hostile-s3-session-token-Zt5mK1wQ";
/// Keys a listing page holds: few, so that every listing of a few locks
/// takes several pages.
pub const PAGE_SIZE: usize = 3;

/// Which requests a hostile mode answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// ListObjectsV2.
    List,
    /// GetObject.
    Get,
    /// HeadObject.
    Head,
    /// DeleteObject.
    Delete,
    /// PutObject.
    Put,
    /// Every request.
    Any,
}

/// Requests of one kind ([`Op`]) whose key (or listing prefix), relative to
/// the repository, starts with `under` (`""`: all of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct On {
    /// The kind.
    pub op: Op,
    /// The start of the key, relative to the repository.
    pub under: &'static str,
}

impl On {
    /// Every request.
    pub const ANY: On = On {
        op: Op::Any,
        under: "",
    };
    /// The listings of `locks/`.
    pub const LOCK_LISTING: On = On {
        op: Op::List,
        under: "locks/",
    };
    /// Every GetObject (the first one reads a key file).
    pub const GET: On = On {
        op: Op::Get,
        under: "",
    };

    fn matches(self, op: Op, relative: &str) -> bool {
        (self.op == Op::Any || self.op == op) && relative.starts_with(self.under)
    }
}

/// How the server misbehaves, for the whole test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Serves the repository as S3 would.
    Honest,
    /// The listing of `locks/` always has a next page, and every page gives
    /// back the continuation token it was asked with.
    RepeatedToken,
    /// The listing of `locks/` always has a next page, empty, with a new
    /// token each time.
    EndlessListing,
    /// The listing of `locks/` is one page of `bytes` bytes (entries for
    /// keys that do not exist), chunked, or with its length declared.
    HugeListing {
        /// Its size.
        bytes: u64,
        /// Whether `Content-Length` says so up front.
        declared: bool,
    },
    /// The requests `on` are answered `status` with an S3 error body of
    /// `bytes` bytes.
    HugeError {
        /// The status.
        status: u16,
        /// The body's size.
        bytes: u64,
        /// Whether `Content-Length` says so up front.
        declared: bool,
        /// Which requests.
        on: On,
    },
    /// The requests `on` are answered `status` with a `Location` on the
    /// second listener (the same path, no query).
    Redirect {
        /// 301, 302, 307 or 308.
        status: u16,
        /// Which requests.
        on: On,
    },
    /// The requests `on` are answered `status` with the S3 error `code`.
    Status {
        /// The status.
        status: u16,
        /// `AccessDenied`, `NoSuchBucket`, ...
        code: &'static str,
        /// Which requests.
        on: On,
    },
    /// DeleteObjects (`POST ?delete`) deletes what it is asked to, and
    /// answers with an error for a key it was not asked for.
    ForeignDeleteResult,
    /// Nothing listens at the location.
    Closed,
}

/// One stored object.
struct Object {
    bytes: Vec<u8>,
    modified: SystemTime,
}

/// What the connection threads share.
struct Shared {
    mode: Mode,
    objects: Mutex<BTreeMap<String, Object>>,
    requests: Mutex<Vec<String>>,
    other: Recorder,
}

/// A running hostile server; stops accepting when dropped.
pub struct HostileS3 {
    addr: String,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl HostileS3 {
    /// A server with an empty bucket.
    pub fn start(mode: Mode) -> HostileS3 {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the hostile S3 server");
        let addr = listener.local_addr().expect("its address").to_string();
        let shared = Arc::new(Shared {
            mode,
            objects: Mutex::new(BTreeMap::new()),
            requests: Mutex::new(Vec::new()),
            other: Recorder::start(),
        });
        let stop = Arc::new(AtomicBool::new(false));
        if shared.mode == Mode::Closed {
            drop(listener);
            return HostileS3 {
                addr,
                shared,
                stop,
                thread: None,
            };
        }
        let serving = shared.clone();
        let thread = accept_until(listener, stop.clone(), move |stream| {
            serve(stream, &serving)
        });
        HostileS3 {
            addr,
            shared,
            stop,
            thread: Some(thread),
        }
    }

    /// A server holding the repository in directory `dir` (each file under
    /// `repo/`, its path relative to `dir`).
    pub fn serving(dir: &Path, mode: Mode) -> HostileS3 {
        let server = HostileS3::start(mode);
        load(&server, dir, dir);
        server
    }

    /// What lockwarden's `-r` takes: `s3:http://127.0.0.1:<port>/hostile/repo`.
    pub fn location(&self) -> String {
        format!("s3:http://{}/{BUCKET}/{PREFIX}", self.addr)
    }

    /// `127.0.0.1:<port>`.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The credentials and region lockwarden is given, a session token
    /// among them.
    pub fn env(&self) -> Vec<(String, String)> {
        [
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY_ID),
            ("AWS_SECRET_ACCESS_KEY", SECRET_KEY),
            ("AWS_SESSION_TOKEN", SESSION_TOKEN),
            ("AWS_DEFAULT_REGION", "us-east-1"),
            ("AWS_REGION", "us-east-1"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .into()
    }

    /// Stores `bytes` under `name`, relative to the repository (any name:
    /// `locks/../x` too).
    pub fn put(&self, name: &str, bytes: &[u8]) {
        self.objects().insert(
            format!("{PREFIX}/{name}"),
            Object {
                bytes: bytes.to_vec(),
                modified: SystemTime::now(),
            },
        );
    }

    /// Removes `name`, relative to the repository; whether it was there.
    pub fn remove(&self, name: &str) -> bool {
        self.objects().remove(&format!("{PREFIX}/{name}")).is_some()
    }

    /// Every stored name, relative to the repository, under `dir` (`locks/`).
    pub fn list(&self, dir: &str) -> Vec<String> {
        let start = format!("{PREFIX}/{dir}");
        self.objects()
            .keys()
            .filter_map(|k| k.strip_prefix(&start).map(|name| format!("{dir}{name}")))
            .collect()
    }

    /// The restic ids in `locks/`.
    pub fn lock_ids(&self) -> BTreeSet<String> {
        self.list("locks/")
            .iter()
            .filter_map(|name| name.strip_prefix("locks/"))
            .filter(|id| lockwarden::repo::lockfile::is_valid_id(id))
            .map(str::to_owned)
            .collect()
    }

    /// Every request received, as `METHOD /path?query`, in order.
    pub fn requests(&self) -> Vec<String> {
        self.shared
            .requests
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }

    /// What reached the second listener, where [`Mode::Redirect`] points.
    pub fn redirected(&self) -> Vec<Request> {
        self.shared.other.requests()
    }

    fn objects(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Object>> {
        self.shared
            .objects
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Drop for HostileS3 {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = TcpStream::connect(&self.addr);
            let _ = thread.join();
        }
    }
}

/// Puts every file under `dir` into the server, named relative to `root`.
fn load(server: &HostileS3, root: &Path, dir: &Path) {
    for entry in std::fs::read_dir(dir).expect("read the repository directory") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            load(server, root, &path);
        } else {
            let name = path.strip_prefix(root).expect("under the root");
            let bytes = std::fs::read(&path).expect("read a repository file");
            server.put(&name.to_string_lossy(), &bytes);
        }
    }
}

/// Answers the requests of one connection until it closes.
fn serve(stream: TcpStream, shared: &Shared) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let Ok(clone) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(clone);
    let mut out = stream;
    while let Some(request) = read_request(&mut reader) {
        if let Ok(mut seen) = shared.requests.lock() {
            seen.push(format!(
                "{} {}?{}",
                request.method, request.path, request.query
            ));
        }
        match answer(shared, &request, &mut out) {
            Ok(true) => {}
            Ok(false) | Err(_) => return,
        }
    }
}

/// What a request is: its kind and its key (or listing prefix) relative to
/// the repository; `None` for a request outside the bucket's repository.
fn classify(request: &Request) -> Option<(Op, String, String)> {
    let path = decode_path(&request.path);
    let rest = path.strip_prefix('/')?.strip_prefix(BUCKET)?;
    if (rest.is_empty() || rest == "/") && request.method == "POST" {
        // DeleteObjects (`POST /bucket?delete`), as object_store deletes.
        let key = deleted_keys(&request.body).into_iter().next()?;
        let relative = key.strip_prefix(&format!("{PREFIX}/"))?.to_owned();
        return request
            .query
            .split('&')
            .any(|p| p == "delete" || p == "delete=")
            .then_some((Op::Delete, key, relative));
    }
    if rest.is_empty() || rest == "/" {
        let prefix = request.param("prefix").unwrap_or_default();
        let relative = prefix
            .strip_prefix(&format!("{PREFIX}/"))
            .unwrap_or("")
            .to_owned();
        return (request.method == "GET").then_some((Op::List, prefix, relative));
    }
    let key = rest.strip_prefix('/')?.to_owned();
    let relative = key
        .strip_prefix(&format!("{PREFIX}/"))
        .unwrap_or("")
        .to_owned();
    let op = match request.method.as_str() {
        "GET" => Op::Get,
        "HEAD" => Op::Head,
        "DELETE" => Op::Delete,
        "PUT" => Op::Put,
        _ => return None,
    };
    Some((op, key, relative))
}

/// Answers one request; `Ok(false)` when the connection must close.
fn answer(shared: &Shared, request: &Request, out: &mut TcpStream) -> std::io::Result<bool> {
    let Some((op, key, relative)) = classify(request) else {
        let body = error_body("NoSuchBucket");
        respond(out, 404, &xml(), body.as_bytes(), None)?;
        return Ok(true);
    };
    if let Some(done) = hostile(shared, request, op, &relative, out)? {
        return Ok(done);
    }
    match op {
        Op::List => {
            let page = listing(shared, &key, request.param("continuation-token"));
            respond(out, 200, &xml(), page.as_bytes(), None)?;
        }
        Op::Get | Op::Head => {
            let objects = shared
                .objects
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            match objects.get(&key) {
                Some(object) => {
                    let headers = [
                        ("Content-Type", "application/octet-stream".to_owned()),
                        ("ETag", format!("\"{}\"", etag_of(&key, object.bytes.len()))),
                        ("Last-Modified", http_date(object.modified)),
                    ];
                    let head_only = (op == Op::Head).then_some(object.bytes.len() as u64);
                    respond(out, 200, &headers, &object.bytes, head_only)?;
                }
                None if op == Op::Head => respond(out, 404, &[], b"", Some(0))?,
                None => respond(out, 404, &xml(), error_body("NoSuchKey").as_bytes(), None)?,
            }
        }
        Op::Delete if request.method == "POST" => {
            let mut objects = shared
                .objects
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let mut result =
                String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<DeleteResult>");
            for key in deleted_keys(&request.body) {
                objects.remove(&key);
                result += &format!("<Deleted><Key>{}</Key></Deleted>", page::escape(&key));
            }
            if shared.mode == Mode::ForeignDeleteResult {
                result += &format!(
                    "<Error><Key>{PREFIX}/not-asked-for</Key><Code>AccessDenied</Code><Message>x</Message></Error>"
                );
            }
            result += "</DeleteResult>";
            respond(out, 200, &xml(), result.as_bytes(), None)?;
        }
        Op::Delete => {
            shared
                .objects
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .remove(&key);
            respond(out, 204, &[], b"", None)?;
        }
        Op::Put | Op::Any => {
            let etag = format!("\"{}\"", etag_of(&key, request.body.len()));
            shared
                .objects
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(
                    key,
                    Object {
                        bytes: request.body.clone(),
                        modified: SystemTime::now(),
                    },
                );
            respond(out, 200, &[("ETag", etag)], b"", None)?;
        }
    }
    Ok(true)
}

/// `Content-Type: application/xml`.
fn xml() -> [(&'static str, String); 1] {
    [("Content-Type", "application/xml".to_owned())]
}

/// The hostile answer to a request, when the mode has one: `Some(keep
/// the connection open)`.
fn hostile(
    shared: &Shared,
    request: &Request,
    op: Op,
    relative: &str,
    out: &mut TcpStream,
) -> std::io::Result<Option<bool>> {
    let lock_listing = op == Op::List && relative.starts_with("locks/");
    match &shared.mode {
        Mode::RepeatedToken | Mode::EndlessListing if lock_listing => {
            let asked = request.param("continuation-token");
            let next = match (&shared.mode, asked) {
                (Mode::RepeatedToken, Some(token)) => token,
                (_, Some(token)) => format!("{token}x"),
                (_, None) => "more".to_owned(),
            };
            let page = list_page(BUCKET, &format!("{PREFIX}/locks/"), &[], Some(&next));
            respond(out, 200, &xml(), page.as_bytes(), None)?;
            Ok(Some(true))
        }
        Mode::HugeListing { bytes, declared } if lock_listing => {
            let head = list_page(BUCKET, &format!("{PREFIX}/locks/"), &[], None);
            let head = head.trim_end_matches("</ListBucketResult>");
            let entry = format!(
                "<Contents><Key>{PREFIX}/locks/{}</Key><LastModified>2024-01-01T00:00:00.000Z</LastModified><ETag>&quot;0&quot;</ETag><Size>200</Size></Contents>",
                "0".repeat(64)
            );
            stream(
                out,
                200,
                "application/xml",
                head.as_bytes(),
                entry.as_bytes(),
                *bytes,
                *declared,
            )?;
            Ok(Some(false))
        }
        Mode::HugeError {
            status,
            bytes,
            declared,
            on,
        } if on.matches(op, relative) => {
            let head = error_body("AccessDenied");
            let head = head.trim_end_matches("</Error>");
            let filler = "<Padding>hostile</Padding>".repeat(64);
            stream(
                out,
                *status,
                "application/xml",
                head.as_bytes(),
                filler.as_bytes(),
                *bytes,
                *declared,
            )?;
            Ok(Some(false))
        }
        Mode::Redirect { status, on } if on.matches(op, relative) => {
            let headers = [("Location", shared.other.url(&request.path))];
            respond(out, *status, &headers, b"", None)?;
            Ok(Some(true))
        }
        Mode::Status { status, code, on } if on.matches(op, relative) => {
            let head_only = (op == Op::Head).then_some(0);
            respond(out, *status, &xml(), error_body(code).as_bytes(), head_only)?;
            Ok(Some(true))
        }
        _ => Ok(None),
    }
}

/// A ListObjectsV2 page of the keys under `prefix`, after the key the
/// continuation token names (hex), at most [`PAGE_SIZE`] of them.
fn listing(shared: &Shared, prefix: &str, token: Option<String>) -> String {
    let after = token.and_then(|t| {
        let bytes: Option<Vec<u8>> = (0..t.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(t.get(i..i + 2)?, 16).ok())
            .collect();
        bytes.map(|b| String::from_utf8_lossy(&b).into_owned())
    });
    let objects = shared
        .objects
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut matching = objects
        .iter()
        .filter(|(key, _)| key.starts_with(prefix))
        .filter(|(key, _)| after.as_ref().is_none_or(|a| key.as_str() > a.as_str()));
    let page: Vec<Listed<'_>> = matching
        .by_ref()
        .take(PAGE_SIZE)
        .map(|(key, object)| Listed {
            key,
            size: object.bytes.len(),
            modified: object.modified,
        })
        .collect();
    let next = match (matching.next(), page.last()) {
        (Some(_), Some(last)) => Some(
            last.key
                .bytes()
                .map(|b| format!("{b:02x}"))
                .collect::<String>(),
        ),
        _ => None,
    };
    list_page(BUCKET, prefix, &page, next.as_deref())
}

/// The keys of a DeleteObjects request body (`<Object><Key>K</Key>`),
/// the five XML entities decoded.
fn deleted_keys(body: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(body);
    text.split("<Key>")
        .skip(1)
        .filter_map(|rest| rest.split_once("</Key>").map(|(key, _)| key))
        .map(|key| {
            key.replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&quot;", "\"")
                .replace("&apos;", "'")
                .replace("&amp;", "&")
        })
        .collect()
}
