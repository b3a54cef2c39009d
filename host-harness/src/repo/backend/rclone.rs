//! `rclone:remote:path`, as restic reaches it: lockwarden runs `rclone serve
//! restic --stdio remote:path` and speaks restic's REST protocol (HTTP/2
//! with prior knowledge) over the child's stdin and stdout. Paths, answers
//! and listings are read as the `rest:` backend reads them.
//!
//! The program and its arguments are restic's `rclone.program` and
//! `rclone.args` options, taken from the environment:
//! `LOCKWARDEN_RCLONE_PROGRAM` (default `rclone`) and
//! `LOCKWARDEN_RCLONE_ARGS` (default `serve restic --stdio
//! --b2-hard-delete`), each split into words as a shell would (quotes
//! group, no expansion); the remote is the last argument.
//!
//! The child runs in a process group of its own, which is killed when the
//! backend is dropped. What it prints on stderr is kept (the last
//! [`STDERR_TAIL`] bytes) for error messages, with every option value of the
//! remote and of the arguments hidden ([`remote`] decides what is secret).

mod remote;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http2::SendRequest;
use hyper::{HeaderMap, Method, Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::AsyncReadExt;
use tokio::process::{Child, ChildStderr, Command};

use super::io_runtime;
use super::rest::{
    V2, answered, declared_length_within, is_v2_listing, listing_path, looked_at, parse_listing,
    removal,
};
use super::{
    Backend, BackendError, Capabilities, EntryKind, FileInfo, Kind, Layout, Removal, Scheme,
    Target, checked_name, checked_path, checked_read_name,
};
use crate::command::ChildGroup;
use crate::limits;
use crate::repo::backend::location_text::LocationError;
use remote::Scrubber;

/// The variable naming the rclone program (restic's `rclone.program`).
pub const PROGRAM_VAR: &str = "LOCKWARDEN_RCLONE_PROGRAM";
/// The variable holding rclone's arguments before the remote (restic's
/// `rclone.args`).
pub const ARGS_VAR: &str = "LOCKWARDEN_RCLONE_ARGS";
/// restic's default program.
const DEFAULT_PROGRAM: &str = "rclone";
/// restic's default arguments.
const DEFAULT_ARGS: &str = "serve restic --stdio --b2-hard-delete";
/// How much of rclone's stderr is kept for messages (its last bytes).
pub const STDERR_TAIL: usize = limits::COMMAND_STDERR as usize;
/// How long a failed exchange waits for rclone's last words on stderr.
const LAST_WORDS: Duration = Duration::from_secs(1);

/// `rclone:REMOTE`, REMOTE as rclone takes it (`name:path`, `:type:path`,
/// `:type,option=value:path`); shown with every option value hidden.
pub const SCHEME: Scheme = Scheme {
    name: "rclone",
    redact: remote::redact_location,
    parse: |location| {
        let remote = location.strip_prefix("rclone:").unwrap_or(location);
        if remote.trim().is_empty() {
            return Err(LocationError::Invalid(
                "`rclone:` needs a remote, as in rclone:remote:path".into(),
            ));
        }
        // rclone would take it for one of its options (`--log-file=...`
        // writes wherever it says, `--config=...` reads another file).
        if remote.starts_with('-') {
            return Err(LocationError::Invalid(
                "the rclone remote starts with `-`, which rclone would take for an option".into(),
            ));
        }
        remote::check(remote).map_err(|e| {
            LocationError::Invalid(format!("the rclone remote is not one rclone can read: {e}"))
        })?;
        Ok(location.to_owned())
    },
    open: |target: &Target<'_>| {
        let remote = target
            .location
            .strip_prefix("rclone:")
            .unwrap_or(target.location);
        let command = RcloneCommand::from_env()?;
        Ok(Box::new(RcloneBackend::start(
            &command,
            remote,
            target.shown,
            target.timeout,
        )?))
    },
    modifies: true,
};

/// The program and arguments that serve a remote, before the remote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RcloneCommand {
    /// The program, as given (a name looked up in `PATH`, or a path).
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
}

impl RcloneCommand {
    /// The command from [`PROGRAM_VAR`] and [`ARGS_VAR`], restic's defaults
    /// for what is unset or empty. The program's value may itself hold
    /// words (`"rclone --config /etc/rclone.conf"`), as in restic.
    pub fn from_env() -> Result<RcloneCommand, BackendError> {
        let var = |name: &str, default: &str| {
            std::env::var(name)
                .ok()
                .filter(|v| !v.trim().is_empty())
                .unwrap_or_else(|| default.to_owned())
        };
        RcloneCommand::new(
            &var(PROGRAM_VAR, DEFAULT_PROGRAM),
            &var(ARGS_VAR, DEFAULT_ARGS),
        )
    }

    /// The command from a program and arguments line, split as restic does.
    pub fn new(program: &str, args: &str) -> Result<RcloneCommand, BackendError> {
        let mut words = shlex::split(program).ok_or_else(|| unbalanced(PROGRAM_VAR))?;
        words.extend(shlex::split(args).ok_or_else(|| unbalanced(ARGS_VAR))?);
        let mut words = words.into_iter();
        let program = words
            .next()
            .ok_or_else(|| BackendError::Other(format!("{PROGRAM_VAR} names no program to run")))?;
        Ok(RcloneCommand {
            program,
            args: words.collect(),
        })
    }
}

impl RcloneCommand {
    /// Every word of the command, the program first.
    fn words(&self) -> Vec<String> {
        std::iter::once(&self.program)
            .chain(&self.args)
            .cloned()
            .collect()
    }
}

fn unbalanced(var: &str) -> BackendError {
    // The value is not quoted: it may hold credentials.
    BackendError::Other(format!("{var} has an unterminated quote"))
}

/// A repository served by one `rclone serve restic --stdio` child.
pub struct RcloneBackend {
    requests: SendRequest<Full<Bytes>>,
    /// The child, killed with its process group when this is dropped.
    _served: Served,
    stderr: Arc<Mutex<StderrTail>>,
    /// Hides the remote's and the arguments' secrets in rclone's messages.
    scrubber: Scrubber,
    /// The location with its secrets hidden.
    shown: String,
    timeout: Duration,
}

/// The running child; dropping it kills the child's whole process group
/// (the child itself is killed and reaped by tokio too: `kill_on_drop`).
struct Served {
    /// Dropped first: the group is killed while the child still pins it.
    _group: Option<ChildGroup>,
    /// Held only to be dropped: never waited for before.
    _child: Child,
}

/// The end of what the child printed on stderr.
#[derive(Default)]
struct StderrTail {
    kept: Vec<u8>,
    closed: bool,
}

impl RcloneBackend {
    /// Starts `command remote` and opens an HTTP/2 connection over its
    /// stdio; `shown` is the redacted location, `timeout` bounds the start
    /// and every request.
    // Longer than 60 lines: the child, its stderr tail and the HTTP/2
    // handshake, in the order they are made, the child owned (and killed on
    // every early return) by what is being built.
    pub fn start(
        command: &RcloneCommand,
        remote: &str,
        shown: &str,
        timeout: Duration,
    ) -> Result<RcloneBackend, BackendError> {
        let mut child = io_runtime::enter(|| {
            Command::new(&command.program)
                .args(&command.args)
                .arg(remote)
                .env_remove("RESTIC_PASSWORD")
                .env_remove("RESTIC_PASSWORD_FILE")
                .env_remove("RESTIC_PASSWORD_COMMAND")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .process_group(0)
                .kill_on_drop(true)
                .spawn()
        })?
        .map_err(|e| {
            BackendError::Other(format!(
                "cannot start `{}` to serve {shown}: {e}; install rclone or set {PROGRAM_VAR}",
                crate::text::escape(&command.program)
            ))
        })?;
        let group = ChildGroup::of(child.id());
        let (stdin, stdout) = (child.stdin.take(), child.stdout.take());
        let stderr_pipe = child.stderr.take();
        let child = Served {
            _group: group,
            _child: child,
        };
        let (Some(stdin), Some(stdout)) = (stdin, stdout) else {
            return Err(BackendError::Other("rclone's stdio was not piped".into()));
        };
        let stderr = Arc::new(Mutex::new(StderrTail::default()));
        if let Some(pipe) = stderr_pipe {
            io_runtime::spawn(keep_tail(pipe, Arc::clone(&stderr)))?;
        }
        // The client's preface goes out here; rclone's answer is awaited
        // with the first request.
        let (requests, connection) = io_runtime::within(
            timeout,
            || format!("starting rclone for {shown}"),
            async move {
                let io = TokioIo::new(tokio::io::join(stdout, stdin));
                hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                    .await
                    .map_err(|e| {
                        BackendError::Other(format!("cannot talk to rclone for {shown}: {e}"))
                    })
            },
        )?;
        io_runtime::spawn(async move {
            let _ = connection.await;
        })?;
        Ok(RcloneBackend {
            requests,
            _served: child,
            stderr,
            scrubber: Scrubber::new(remote, &command.words()),
            shown: shown.to_owned(),
            timeout,
        })
    }

    /// Sends `method path` and reads the answer's body (at most `limit`
    /// bytes), all within the timeout; returns the status, the headers, and
    /// the body (empty unless the status is success, and for a HEAD).
    fn exchange(
        &self,
        method: Method,
        path: &str,
        what: &str,
        limit: u64,
        body: Bytes,
    ) -> Result<(u16, HeaderMap, Vec<u8>), BackendError> {
        let head = method == Method::HEAD;
        let request = Request::builder()
            .method(method)
            .uri(format!("http://localhost/{path}"))
            .header("Accept", V2)
            .body(Full::new(body))
            .map_err(|e| BackendError::Other(format!("{what}: {e}")))?;
        let mut requests = self.requests.clone();
        io_runtime::within(
            self.timeout,
            || format!("{what} at {}", self.shown),
            async move {
                let response = match requests.ready().await {
                    Ok(()) => requests.send_request(request).await,
                    Err(e) => Err(e),
                };
                let response = match response {
                    Ok(response) => response,
                    Err(e) => return Err(self.broken(what, &e).await),
                };
                let status = response.status().as_u16();
                let headers = response.headers().clone();
                if head || !(200..300).contains(&status) {
                    return Ok((status, headers, Vec::new()));
                }
                declared_length_within(response.headers(), limit)?;
                let body = match read_bounded(response, limit).await {
                    Ok(body) => body,
                    Err(BodyError::TooLarge) => {
                        return Err(BackendError::TooLarge {
                            size: limit + 1,
                            limit,
                        });
                    }
                    Err(BodyError::Broken(e)) => return Err(self.broken(what, &e).await),
                };
                Ok((status, headers, body))
            },
        )
    }

    /// The error for an exchange that broke: when rclone has exited (its
    /// stderr closed), its last words (secrets hidden), else the
    /// connection's error. The child is not reaped here: until the backend
    /// is dropped, its pid pins its process group's id, so the group kill
    /// can never reach a stranger that was given the id again.
    async fn broken(&self, what: &str, error: &hyper::Error) -> BackendError {
        // rclone's stderr closes when it exits; give it a moment.
        let exited = tokio::time::timeout(LAST_WORDS, async {
            while !self.tail().closed {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .is_ok();
        let said = self.last_words();
        if exited {
            BackendError::Other(format!("{what} at {}: rclone exited: {said}", self.shown))
        } else {
            BackendError::Other(format!(
                "{what} at {}: the connection to rclone broke ({error}); rclone said: {said}",
                self.shown
            ))
        }
    }

    fn tail(&self) -> std::sync::MutexGuard<'_, StderrTail> {
        self.stderr
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The last non-empty lines rclone printed (at most three), with the
    /// remote's secrets hidden and control characters escaped.
    fn last_words(&self) -> String {
        let text = String::from_utf8_lossy(&self.tail().kept).into_owned();
        let lines: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        if lines.is_empty() {
            return "(nothing on stderr)".into();
        }
        let last = &lines[lines.len().saturating_sub(3)..];
        last.iter()
            .map(|line| self.scrub(line))
            .collect::<Vec<_>>()
            .join(" / ")
    }

    /// `line` (from rclone's stderr) without the secrets of the remote or
    /// the arguments, escaped.
    fn scrub(&self, line: &str) -> String {
        crate::text::escape(&self.scrubber.scrub(line)).into_owned()
    }
}

/// Keeps the last [`STDERR_TAIL`] bytes of `pipe` in `tail`, until it closes.
async fn keep_tail(mut pipe: ChildStderr, tail: Arc<Mutex<StderrTail>>) {
    let mut buffer = [0u8; 1024];
    loop {
        let read = pipe.read(&mut buffer).await;
        let mut tail = tail
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match read {
            Ok(n) if n > 0 => {
                tail.kept.extend_from_slice(&buffer[..n]);
                let excess = tail.kept.len().saturating_sub(STDERR_TAIL);
                tail.kept.drain(..excess);
            }
            _ => {
                tail.closed = true;
                return;
            }
        }
    }
}

/// Why a body was not read.
enum BodyError {
    TooLarge,
    Broken(hyper::Error),
}

/// The whole body of `response`, refused past `limit` bytes.
async fn read_bounded(response: Response<Incoming>, limit: u64) -> Result<Vec<u8>, BodyError> {
    let mut body = response.into_body();
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(BodyError::Broken)?;
        if let Ok(data) = frame.into_data() {
            if (out.len() + data.len()) as u64 > limit {
                return Err(BodyError::TooLarge);
            }
            out.extend_from_slice(&data);
        }
    }
    Ok(out)
}

impl Backend for RcloneBackend {
    fn name(&self) -> &'static str {
        SCHEME.name
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::NATIVE
    }

    fn list(&self, kind: Kind) -> Result<Vec<FileInfo>, BackendError> {
        let dir = listing_path(kind);
        let what = format!("listing {dir}");
        let (status, headers, body) =
            self.exchange(Method::GET, &dir, &what, limits::LISTING_BODY, Bytes::new())?;
        answered(status, &what, &self.shown)?;
        let v2 = is_v2_listing(&headers);
        parse_listing(&body, v2, &format!("{dir} at {}", self.shown))
    }

    fn read(&self, kind: Kind, name: &str) -> Result<Vec<u8>, BackendError> {
        let path = checked_read_name(kind, name)?;
        let what = format!("reading {path}");
        let (status, _, body) =
            self.exchange(Method::GET, &path, &what, kind.limit(), Bytes::new())?;
        answered(status, &what, &self.shown)?;
        Ok(body)
    }

    fn stat(&self, kind: Kind, name: &str) -> Result<Option<FileInfo>, BackendError> {
        let path = checked_path(kind, name, Layout::Flat)?;
        let what = format!("looking at {path}");
        let (status, headers, _) = self.exchange(Method::HEAD, &path, &what, 0, Bytes::new())?;
        looked_at(status, &headers, name, &what, &self.shown)
    }

    fn dir_kind(&self, _kind: Kind) -> Result<Option<EntryKind>, BackendError> {
        Ok(Some(EntryKind::Unknown))
    }

    fn remove(&self, id: &str) -> Result<Removal, BackendError> {
        let path = checked_name(Kind::Lock, id)?;
        let what = format!("deleting {path}");
        let (status, _, _) = self.exchange(
            Method::DELETE,
            &path,
            &what,
            Kind::Lock.limit(),
            Bytes::new(),
        )?;
        removal(status, &path, &self.shown)
    }

    fn write_lock(&self, id: &str, stored: &[u8]) -> Result<(), BackendError> {
        let path = checked_name(Kind::Lock, id)?;
        let what = format!("writing {path}");
        let body = Bytes::copy_from_slice(stored);
        let (status, _, _) = self.exchange(Method::POST, &path, &what, Kind::Lock.limit(), body)?;
        answered(status, &what, &self.shown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_as_a_shell_splits_them() {
        let command = RcloneCommand::new(
            r#"rclone --config "/etc/my rclone.conf""#,
            "serve restic  --stdio ''",
        )
        .expect("splits");
        assert_eq!(command.program, "rclone");
        assert_eq!(
            command.args,
            [
                "--config",
                "/etc/my rclone.conf",
                "serve",
                "restic",
                "--stdio",
                ""
            ]
        );
        let err = RcloneCommand::new("rclone", "serve 'secret").expect_err("unterminated");
        assert!(!err.to_string().contains("secret"), "{err}");
    }

    #[test]
    fn the_program_may_carry_arguments() {
        let command = RcloneCommand::new("rclone --config /x.conf", DEFAULT_ARGS).expect("splits");
        assert_eq!(command.program, "rclone");
        assert_eq!(command.args[..3], ["--config", "/x.conf", "serve"]);
        let err =
            RcloneCommand::new("rclone", "--s3-secret-access-key 'S3CRET").expect_err("quote");
        assert!(!err.to_string().contains("S3CRET"), "{err}");
        assert!(RcloneCommand::new(" ", "").is_err());
    }

    #[test]
    fn rclones_messages_lose_the_secrets_of_the_remote_and_the_arguments() {
        let command = RcloneCommand::new(
            "rclone",
            "serve restic --stdio --s3-secret-access-key ARG-S3CRET --s3-region=eu-x-1",
        )
        .expect("splits");
        let remote = ":s3,access_key_id=AKIDEXAMPLE,secret_access_key=REMOTE-S3CRET:bucket/repo";
        let scrubber = Scrubber::new(remote, &command.words());
        let echoed = format!(
            "DEBUG : rclone: starting with parameters [\"--s3-secret-access-key\" \"ARG-S3CRET\" \"{remote}\"]"
        );
        let shown = crate::text::escape(&scrubber.scrub(&echoed)).into_owned();
        for secret in ["S3CRET", "AKIDEXAMPLE"] {
            assert!(!shown.contains(secret), "{shown}");
        }
        assert!(
            shown.contains(":s3,access_key_id=***,secret_access_key=***:bucket/repo"),
            "{shown}"
        );
        let requoted = scrubber.scrub(
            "Failed to create file system for \":s3,secret_access_key='REMOTE-S3CRET',x=eu-x-1:\"",
        );
        assert!(!requoted.contains("S3CRET"), "{requoted}");
        assert!(!requoted.contains("eu-x-1"), "{requoted}");
    }

    #[test]
    fn the_shown_location_hides_every_option_value() {
        let location =
            "rclone::http,url='https://h.example/',headers=\"Authorization,Bearer T0KEN\":p";
        assert_eq!((SCHEME.parse)(location).as_deref(), Ok(location));
        assert_eq!(
            (SCHEME.redact)(location),
            "rclone::http,url=***,headers=***:p"
        );
    }

    #[test]
    fn a_remote_rclone_cannot_read_is_refused_without_quoting_it() {
        for bad in [
            "rclone::s3,pass='unclosed-S3CRET,region=x:b",
            "rclone::s3,pass='S3CRET'x:b",
            "rclone::s3,pass=S3CRET",
            "rclone:my=S3CRET,x:b",
        ] {
            let err = (SCHEME.parse)(bad).expect_err(bad);
            assert!(!err.to_string().contains("S3CRET"), "{err}");
            assert!(err.to_string().contains("rclone can read"), "{err}");
        }
    }

    #[test]
    fn a_remote_rclone_would_take_for_an_option_is_refused() {
        for bad in [
            "rclone:--log-file=/tmp/x",
            "rclone:-vv",
            "rclone:--config=/x",
        ] {
            assert!((SCHEME.parse)(bad).is_err(), "{bad}");
        }
        assert!((SCHEME.parse)("rclone::local:/srv/-repo").is_ok());
    }

    #[test]
    fn an_empty_remote_is_refused() {
        assert!((SCHEME.parse)("rclone:").is_err());
        assert_eq!(
            (SCHEME.parse)("rclone:remote:path").as_deref(),
            Ok("rclone:remote:path")
        );
    }
}
