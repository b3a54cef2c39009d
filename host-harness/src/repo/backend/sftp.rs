//! A repository on an SFTP server, reached as restic reaches it: the user's
//! own `ssh` runs the server's `sftp` subsystem (so `~/.ssh/config`, agents
//! and `known_hosts` apply), and lockwarden speaks SFTP over the child's
//! stdin and stdout. `LOCKWARDEN_SFTP_COMMAND` replaces the command
//! completely, as restic's `-o sftp.command=...` does.
//!
//! lockwarden runs unattended, so the default command adds `-o
//! BatchMode=yes`, which restic does not: ssh then never asks for a
//! password, a passphrase or a new host key (it could not: its stdin is
//! the SFTP pipe) and fails at once instead of hanging until the deadline.
//! It also adds `-o ConnectTimeout=` with `--timeout`, so that a host that
//! does not answer is reported as unreachable by ssh itself.
//!
//! The host never becomes an ssh option: it must not start with `-`, and it
//! follows `--` on the command line.
//!
//! Bounds: every operation ends within `--timeout` (russh-sftp's own
//! per-request deadline is set a second later, as a backstop); a reply
//! packet is at most 256 KiB (russh-sftp's default, kept); a listing keeps
//! only restic ids, at most twice [`limits::LISTING_ENTRIES`] before
//! [`checked_listing`]; a read asks for at most the kind's limit + 1
//! bytes, after `lstat` and `fstat` said it is a regular file no larger;
//! ssh's stderr is kept up to [`limits::COMMAND_STDERR`]. The ssh child
//! runs in a process group of its own, killed when the backend is dropped
//! or the handshake fails.

use std::future::Future;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use russh_sftp::client::RawSftpSession;
use russh_sftp::client::error::Error as SftpError;
use russh_sftp::protocol::{FileAttributes, OpenFlags, StatusCode};
use tokio::io::AsyncReadExt;
use tokio::process::{Child, ChildStderr, Command};

use super::io_runtime;
use super::{
    Backend, BackendError, Capabilities, EntryKind, FileInfo, Kind, Removal, Scheme, Target,
    checked_listing, checked_name, checked_read_name,
};
use crate::command::ChildGroup;
use crate::limits;
use crate::repo::backend::location_text::{LocationError, percent_decode, redact_userinfo};
use crate::repo::lockfile::is_valid_id;
use crate::text::escape;

/// The environment variable whose value, split like a shell splits simple
/// quoting, replaces the ssh command (restic's `-o sftp.command=...`), for
/// example `ssh -i ~/.ssh/backup -p 2222 backup@nas -s sftp`.
pub const COMMAND_VARIABLE: &str = "LOCKWARDEN_SFTP_COMMAND";

/// `sftp:[user@]host:path` or `sftp://[user@]host[:port]/path`, as restic
/// parses them; a path is relative to the login directory unless it starts
/// with `/` (`sftp://host//srv/repo`).
pub const SCHEME: Scheme = Scheme {
    name: "sftp",
    redact: redact_userinfo,
    parse: |location| {
        SftpLocation::parse(location)?;
        Ok(location.to_owned())
    },
    open: |target: &Target<'_>| Ok(Box::new(SftpBackend::open(target)?)),
    modifies: true,
};

/// Bytes asked for in one SFTP read (OpenSSH serves up to 256 KiB).
const READ_CHUNK: u32 = 32 * 1024;

/// A location taken apart the way restic's `sftp.ParseConfig` does.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SftpLocation {
    /// The login name, when one is given.
    user: Option<String>,
    /// The host, as ssh takes it (a name, an address, or a `Host` alias of
    /// the ssh configuration).
    host: String,
    /// The port, when one is given (URL form only).
    port: Option<u16>,
    /// The repository directory, cleaned as Go's `path.Clean` does.
    path: String,
}

impl SftpLocation {
    /// Parses `sftp:...` as restic does, and refuses what restic would hand
    /// to ssh unchecked: a host that would be read as an option, control
    /// characters anywhere.
    // Longer than 60 lines: restic's two forms (`sftp:user@host:path` and
    // `sftp://user@host:port/path`) and each refusal, read top to bottom as
    // restic's own parser is; the refusals share the one `invalid` message.
    fn parse(location: &str) -> Result<SftpLocation, LocationError> {
        let invalid = |why: &str| {
            LocationError::Invalid(format!(
                "`{}` is not an sftp location: {why}",
                escape(&redact_userinfo(location))
            ))
        };
        if location.chars().any(char::is_control) {
            return Err(invalid("it holds a control character"));
        }
        let (user, host, port, dir) = if let Some(url) = location.strip_prefix("sftp://") {
            if url.contains(['?', '#']) {
                return Err(invalid(
                    "a `?` or `#` in the URL (write them as %3F and %23)",
                ));
            }
            let Some((authority, path)) = url.split_once('/') else {
                return Err(invalid("no directory given (sftp://host/path)"));
            };
            let (user, host_port) = match authority.rsplit_once('@') {
                // Only the name counts: restic ignores a password here.
                Some((info, host)) => (
                    Some(percent_decode(
                        info.split_once(':').map_or(info, |(u, _)| u),
                    )),
                    host,
                ),
                None => (None, authority),
            };
            let (host, port) =
                split_port(host_port).ok_or_else(|| invalid("a bad host or port"))?;
            (user, percent_decode(host), port, percent_decode(path))
        } else if let Some(rest) = location.strip_prefix("sftp:") {
            let Some((user_host, dir)) = rest.split_once(':') else {
                return Err(invalid("expected sftp:[user@]host:path"));
            };
            // restic: `a@b@host` is user `a@b` on `host`.
            let parts: Vec<&str> = user_host.splitn(3, '@').collect();
            let (user, host) = match parts.as_slice() {
                [a, b, host] => (Some(format!("{a}@{b}")), *host),
                [user, host] => (Some((*user).to_owned()), *host),
                _ => (None, user_host),
            };
            (user, host.to_owned(), None, dir.to_owned())
        } else {
            return Err(invalid("it does not start with sftp:"));
        };
        let user = user.filter(|u| !u.is_empty());
        if host.is_empty() {
            return Err(invalid("no host given"));
        }
        if host.starts_with('-') {
            return Err(invalid(
                "the host starts with `-`, which ssh would take for an option",
            ));
        }
        if host.contains(|c: char| c.is_whitespace() || c == '@') {
            return Err(invalid("the host holds a space or an `@`"));
        }
        let decoded = [Some(&host), user.as_ref(), Some(&dir)];
        if decoded
            .into_iter()
            .flatten()
            .any(|s| s.chars().any(char::is_control))
        {
            return Err(invalid("it holds a control character"));
        }
        let path = clean_path(&dir);
        if path.starts_with('~') {
            return Err(invalid(
                "the path starts with `~`, which most SFTP servers do not expand; \
                 a relative path is relative to the login directory",
            ));
        }
        Ok(SftpLocation {
            user,
            host,
            port,
            path,
        })
    }

    /// The default command: `ssh -o BatchMode=yes -o ConnectTimeout=N
    /// [-p port] [-l user] -s -- host sftp`.
    fn ssh_command(&self, timeout: Duration) -> Vec<String> {
        let mut argv: Vec<String> = vec![
            "ssh".into(),
            "-o".into(),
            "BatchMode=yes".into(),
            "-o".into(),
            format!("ConnectTimeout={}", whole_seconds(timeout)),
        ];
        if let Some(port) = self.port {
            argv.extend(["-p".into(), port.to_string()]);
        }
        if let Some(user) = &self.user {
            argv.extend(["-l".into(), user.clone()]);
        }
        argv.extend(["-s".into(), "--".into(), self.host.clone(), "sftp".into()]);
        argv
    }

    /// The path of `file` (`locks/<id>`, `config`) on the server.
    fn join(&self, file: &str) -> String {
        match self.path.as_str() {
            "." => file.to_owned(),
            "/" => format!("/{file}"),
            dir => format!("{dir}/{file}"),
        }
    }
}

/// `host[:port]` or `[v6]:port` of a URL: the host without brackets and
/// the port, when given (an empty port is none, as in Go).
fn split_port(host_port: &str) -> Option<(&str, Option<u16>)> {
    let (host, port) = if let Some(bracketed) = host_port.strip_prefix('[') {
        let (host, after) = bracketed.split_once(']')?;
        match after {
            "" => (host, ""),
            _ => (host, after.strip_prefix(':')?),
        }
    } else {
        match host_port.rsplit_once(':') {
            Some((host, port)) => (host, port),
            None => (host_port, ""),
        }
    };
    if port.is_empty() {
        return Some((host, None));
    }
    if !port.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let port: u16 = port.parse().ok().filter(|p| *p != 0)?;
    Some((host, Some(port)))
}

/// Go's `path.Clean`: one `/` between elements, no `.`, `..` resolved
/// lexically (kept at the start of a relative path), `.` for nothing.
fn clean_path(path: &str) -> String {
    let rooted = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => match parts.last() {
                Some(&last) if last != ".." => {
                    parts.pop();
                }
                _ if rooted => {}
                _ => parts.push(".."),
            },
            _ => parts.push(part),
        }
    }
    let joined = parts.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".into(),
        (false, false) => joined,
    }
}

/// Splits a command line into words as a POSIX shell does for quoting
/// (`'...'`, `"..."`, `\`); nothing is expanded. The error never quotes
/// the line (it may hold a secret).
fn split_command(line: &str) -> Result<Vec<String>, String> {
    let words =
        shlex::split(line).ok_or("a quote is not closed, or the command ends with a backslash")?;
    if words.is_empty() {
        return Err("the command is empty".into());
    }
    Ok(words)
}

/// `timeout` in whole seconds, rounded up, at least 1 (ssh's and
/// russh-sftp's timeouts count seconds).
fn whole_seconds(timeout: Duration) -> u64 {
    let secs = timeout.as_secs() + u64::from(timeout.subsec_nanos() > 0);
    secs.max(1)
}

/// What ssh printed that explains a failure: its last line that is not a
/// warning, escaped.
fn last_line(stderr: &[u8]) -> Option<String> {
    String::from_utf8_lossy(stderr)
        .lines()
        .map(str::trim)
        .rev()
        .find(|l| !l.is_empty() && !l.starts_with("Warning:"))
        .map(|l| escape(l).into_owned())
}

/// What ssh's stderr says of a connection that ended before SFTP started.
fn refusal(stderr: &[u8], display: &str, program: &str) -> BackendError {
    const UNREACHABLE: [&str; 8] = [
        "Connection refused",
        "Could not resolve hostname",
        "Name or service not known",
        "Temporary failure in name resolution",
        "No route to host",
        "Network is unreachable",
        "Connection timed out",
        "timed out",
    ];
    const DENIED: [&str; 2] = ["Permission denied", "Too many authentication failures"];
    let text = String::from_utf8_lossy(stderr);
    let said = last_line(stderr).unwrap_or_else(|| "(no message)".into());
    if DENIED.iter().any(|t| text.contains(t)) {
        BackendError::Denied(format!(
            "{display}: the SSH server refused the login: {said}"
        ))
    } else if UNREACHABLE.iter().any(|t| text.contains(t)) {
        BackendError::Unreachable(format!("cannot reach {display}: {said}"))
    } else if text.contains("Host key verification failed") {
        BackendError::Other(format!(
            "ssh does not trust the server's host key ({said}); \
             add it to known_hosts (lockwarden runs ssh with BatchMode=yes, so it never asks)"
        ))
    } else {
        BackendError::Other(format!(
            "`{}` ended before the SFTP session started: {said}",
            escape(program)
        ))
    }
}

/// Keeps the first [`limits::COMMAND_STDERR`] bytes of the child's stderr
/// in `kept`, and drains the rest so it never blocks on a full pipe.
async fn collect_stderr(mut stderr: ChildStderr, kept: Arc<Mutex<Vec<u8>>>) {
    let mut buffer = [0u8; 4096];
    while let Ok(n @ 1..) = stderr.read(&mut buffer).await {
        if let Ok(mut kept) = kept.lock() {
            let room = usize::try_from(limits::COMMAND_STDERR)
                .unwrap_or(usize::MAX)
                .saturating_sub(kept.len());
            kept.extend_from_slice(&buffer[..n.min(room)]);
        }
    }
}

/// The ssh child: killed, with its process group, when dropped.
struct Connection {
    /// Dropped first: the group is killed while the child still pins it.
    _group: Option<ChildGroup>,
    child: Mutex<Child>,
    stderr: Arc<Mutex<Vec<u8>>>,
    program: String,
}

impl Connection {
    /// Starts `argv` with piped stdin, stdout and stderr in a process group
    /// of its own; returns it with its stdout and stdin.
    fn start(
        argv: &[String],
        display: &str,
    ) -> Result<
        (
            Connection,
            tokio::process::ChildStdout,
            tokio::process::ChildStdin,
        ),
        BackendError,
    > {
        let Some((program, args)) = argv.split_first() else {
            return Err(BackendError::Other(format!("{COMMAND_VARIABLE} is empty")));
        };
        let spawned = io_runtime::enter(|| {
            Command::new(program)
                .args(args)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true)
                .process_group(0)
                .spawn()
        })?;
        let mut child = spawned.map_err(|e| {
            BackendError::Other(format!(
                "cannot run `{}` to reach {display}: {e}",
                escape(program)
            ))
        })?;
        let group = ChildGroup::of(child.id());
        let stderr = Arc::new(Mutex::new(Vec::new()));
        if let Some(pipe) = child.stderr.take() {
            io_runtime::spawn(collect_stderr(pipe, stderr.clone()))?;
        }
        let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
            return Err(BackendError::Other("the ssh child has no pipes".into()));
        };
        let connection = Connection {
            _group: group,
            child: Mutex::new(child),
            stderr,
            program: program.clone(),
        };
        Ok((connection, stdout, stdin))
    }

    /// Waits up to `wait` for the child to exit and its stderr to be read,
    /// and returns what it said.
    fn stderr_after_exit(&self, wait: Duration) -> Vec<u8> {
        let deadline = std::time::Instant::now() + wait;
        while std::time::Instant::now() < deadline {
            let exited = self
                .child
                .lock()
                .map(|mut c| matches!(c.try_wait(), Ok(Some(_))))
                .unwrap_or(true);
            if exited {
                // Its stderr pipe closes with it; give the reader a moment.
                std::thread::sleep(Duration::from_millis(20));
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.stderr.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// What ssh said last, if it said anything.
    fn said(&self) -> Option<String> {
        self.stderr.lock().ok().and_then(|s| last_line(&s))
    }
}

/// Why one SFTP operation failed, before it gets its context.
enum Failed {
    /// The server or the connection said no.
    Sftp(SftpError),
    /// A listing longer than lockwarden handles.
    TooMany,
    /// A file of at least `size` bytes, more than `limit`.
    TooLarge {
        /// Its size, or what was read of it.
        size: u64,
        /// The most its kind may hold.
        limit: u64,
    },
    /// Not a regular file (a directory, symlink, FIFO, ...): never opened
    /// nor removed.
    NotRegular(EntryKind),
}

impl From<SftpError> for Failed {
    fn from(e: SftpError) -> Failed {
        Failed::Sftp(e)
    }
}

/// A repository on an SFTP server.
pub struct SftpBackend {
    // Dropped first: its end of the pipe closes before the child is killed.
    session: RawSftpSession,
    connection: Connection,
    location: SftpLocation,
    display: String,
    timeout: Duration,
}

impl SftpBackend {
    /// Starts the ssh command for `target` (or [`COMMAND_VARIABLE`]'s) and
    /// the SFTP session over it, within the target's timeout.
    // Longer than 60 lines: the ssh command line, the handshake under one
    // deadline and, when it fails, ssh's last words within what is left of
    // that deadline, in the order they happen.
    pub fn open(target: &Target<'_>) -> Result<SftpBackend, BackendError> {
        let location =
            SftpLocation::parse(target.location).map_err(|e| BackendError::Other(e.to_string()))?;
        let display = target.shown.to_owned();
        let argv = match std::env::var_os(COMMAND_VARIABLE) {
            Some(line) if !line.is_empty() => {
                let line = line.to_str().ok_or_else(|| {
                    BackendError::Other(format!("{COMMAND_VARIABLE} is not UTF-8"))
                })?;
                split_command(line)
                    .map_err(|why| BackendError::Other(format!("{COMMAND_VARIABLE}: {why}")))?
            }
            _ => location.ssh_command(target.timeout),
        };
        let (connection, stdout, stdin) = Connection::start(&argv, &display)?;
        // russh-sftp's own deadline per request (10 s by default) only
        // backs ours up: a second later, so that `within` speaks first.
        let config = russh_sftp::client::Config {
            request_timeout_secs: whole_seconds(target.timeout) + 1,
            ..russh_sftp::client::Config::default()
        };
        // The inner result is the handshake's; an outer error is the deadline.
        let deadline = std::time::Instant::now() + target.timeout;
        let handshake = io_runtime::within(
            target.timeout,
            || format!("cannot reach {display}: starting the SFTP session"),
            async move {
                let session =
                    RawSftpSession::new_with_config(tokio::io::join(stdout, stdin), config);
                Ok(session.init().await.map(|_| session))
            },
        );
        let session = match handshake {
            Ok(Ok(session)) => session,
            Ok(Err(_)) => {
                // ssh's last words, waited for within what is left of the
                // deadline (a child that closed its stdout but lives on
                // must not hold the open past --timeout).
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                let stderr = connection.stderr_after_exit(left.min(Duration::from_secs(5)));
                return Err(refusal(&stderr, &display, &connection.program));
            }
            Err(late) => {
                let stderr = connection
                    .stderr
                    .lock()
                    .map(|s| s.clone())
                    .unwrap_or_default();
                return Err(match refusal(&stderr, &display, &connection.program) {
                    known @ (BackendError::Unreachable(_) | BackendError::Denied(_)) => known,
                    _ => BackendError::Unreachable(late.to_string()),
                });
            }
        };
        Ok(SftpBackend {
            session,
            connection,
            location,
            display,
            timeout: target.timeout,
        })
    }

    /// Runs one operation on `path` within the timeout, and gives its
    /// failure a message: `doing` says what it was (`reading`, ...).
    fn call<T>(
        &self,
        doing: &str,
        path: &str,
        operation: impl Future<Output = Result<T, Failed>>,
    ) -> Result<T, BackendError> {
        let outcome = io_runtime::within(
            self.timeout,
            || format!("{doing} {path} at {}", self.display),
            async { Ok(operation.await) },
        )?;
        outcome.map_err(|failed| self.failure(doing, path, failed))
    }

    /// The error for a failed operation.
    fn failure(&self, doing: &str, path: &str, failed: Failed) -> BackendError {
        let at = &self.display;
        match failed {
            Failed::TooMany => BackendError::TooMany {
                dir: format!("{path} at {at}"),
                limit: limits::LISTING_ENTRIES,
            },
            Failed::TooLarge { size, limit } => BackendError::TooLarge { size, limit },
            Failed::NotRegular(entry) => BackendError::NotAFile {
                path: format!("{path} at {at}"),
                entry,
            },
            Failed::Sftp(SftpError::Status(status)) => {
                let said = escape(&status.error_message).into_owned();
                match status.status_code {
                    StatusCode::NoSuchFile => BackendError::NotFound(format!("{path} at {at}")),
                    StatusCode::PermissionDenied => BackendError::Denied(format!(
                        "{doing} {path} at {at}: the server refused: {said}"
                    )),
                    code => BackendError::Other(format!(
                        "{doing} {path} at {at}: the server answered {code}: {said}"
                    )),
                }
            }
            Failed::Sftp(SftpError::Timeout) => {
                io_runtime::no_answer(&format!("{doing} {path} at {at}"), self.timeout)
            }
            Failed::Sftp(other) => {
                let ssh = self
                    .connection
                    .said()
                    .map(|s| format!("; ssh said: {s}"))
                    .unwrap_or_default();
                BackendError::Other(format!(
                    "{doing} {path} at {at}: the SFTP connection failed ({}){ssh}",
                    escape(&other.to_string())
                ))
            }
        }
    }
}

/// What attributes say an entry is (no permissions: unknown).
fn entry_kind(attrs: &FileAttributes) -> EntryKind {
    EntryKind::of_mode(attrs.permissions)
}

/// The entry `name` as attributes (from `lstat` or a listing) describe it.
fn file_info(name: String, attrs: &FileAttributes) -> FileInfo {
    let entry = entry_kind(attrs);
    FileInfo {
        name,
        entry,
        size: attrs.size.filter(|_| entry == EntryKind::File),
        modified: attrs.mtime.map(|s| i64::from(s) * 1_000_000_000),
    }
}

/// `lstat` of `path`, or `None` when nothing is there.
async fn lstat(session: &RawSftpSession, path: &str) -> Result<Option<FileAttributes>, Failed> {
    match session.lstat(path).await {
        Ok(attrs) => Ok(Some(attrs.attrs)),
        Err(SftpError::Status(s)) if s.status_code == StatusCode::NoSuchFile => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Removes `path` if it is a regular file (by `lstat` just before; the
/// server unlinks a link itself, never its target, if one is swapped in
/// between).
async fn remove_file(session: &RawSftpSession, path: &str) -> Result<Removal, Failed> {
    match lstat(session, path).await?.map(|attrs| entry_kind(&attrs)) {
        None => return Ok(Removal::AlreadyGone),
        Some(EntryKind::File) => {}
        Some(other) => return Err(Failed::NotRegular(other)),
    }
    match session.remove(path).await {
        Ok(_) => Ok(Removal::Removed),
        Err(SftpError::Status(s)) if s.status_code == StatusCode::NoSuchFile => {
            Ok(Removal::AlreadyGone)
        }
        Err(e) => Err(Failed::Sftp(e)),
    }
}

/// Lists the restic ids in directory `dir` with their size and time (the
/// listing's attributes are the server's `lstat`: links are not followed).
/// Non-ids are dropped as they arrive, so memory stays bounded;
/// [`checked_listing`] then applies the exact rules.
async fn list_dir(session: &RawSftpSession, dir: &str) -> Result<Vec<FileInfo>, Failed> {
    let handle = session.opendir(dir).await?.handle;
    let mut files = Vec::new();
    let listed: Result<(), Failed> = async {
        loop {
            let names = match session.readdir(handle.as_str()).await {
                Ok(names) => names,
                Err(SftpError::Status(s)) if s.status_code == StatusCode::Eof => return Ok(()),
                Err(e) => return Err(e.into()),
            };
            for file in names.files {
                if !is_valid_id(&file.filename) {
                    continue;
                }
                // Room for a server that lists some twice; more is too many.
                if files.len() >= 2 * limits::LISTING_ENTRIES {
                    return Err(Failed::TooMany);
                }
                files.push(file_info(file.filename, &file.attrs));
            }
        }
    }
    .await;
    let _ = session.close(handle).await;
    listed.map(|()| files)
}

/// Reads the regular file at `path`, at most `limit` + 1 bytes of it.
async fn read_file(session: &RawSftpSession, path: &str, limit: u64) -> Result<Vec<u8>, Failed> {
    let attrs = session.lstat(path).await?.attrs;
    check_file(&attrs, limit)?;
    let handle = session
        .open(path, OpenFlags::READ, FileAttributes::empty())
        .await?
        .handle;
    let read = read_handle(session, &handle, limit).await;
    let _ = session.close(handle).await;
    read
}

/// Refuses what is not a regular file, or is larger than `limit`.
fn check_file(attrs: &FileAttributes, limit: u64) -> Result<(), Failed> {
    match entry_kind(attrs) {
        EntryKind::File => {}
        other => return Err(Failed::NotRegular(other)),
    }
    match attrs.size {
        Some(size) if size > limit => Err(Failed::TooLarge { size, limit }),
        _ => Ok(()),
    }
}

/// Reads an open file to its end, asking for at most `limit` + 1 bytes in
/// all.
async fn read_handle(
    session: &RawSftpSession,
    handle: &str,
    limit: u64,
) -> Result<Vec<u8>, Failed> {
    // The file opened may not be the one looked at (swapped since).
    check_file(&session.fstat(handle).await?.attrs, limit)?;
    let mut bytes = Vec::new();
    loop {
        let got = bytes.len() as u64;
        if got > limit {
            return Err(Failed::TooLarge { size: got, limit });
        }
        let want =
            u32::try_from((limit + 1 - got).min(u64::from(READ_CHUNK))).unwrap_or(READ_CHUNK);
        let data = match session.read(handle, got, want).await {
            Ok(data) => data.data,
            Err(SftpError::Status(s)) if s.status_code == StatusCode::Eof => return Ok(bytes),
            Err(e) => return Err(e.into()),
        };
        if data.is_empty() {
            return Ok(bytes);
        }
        let take = data.len().min(usize::try_from(want).unwrap_or(usize::MAX));
        bytes.extend_from_slice(&data[..take]);
    }
}

/// Writes `data` to a new file at `temporary`, read-only, then renames it to
/// `path`: no reader ever sees half a lock (restic's SFTP backend does the
/// same). The temporary file is removed when anything fails.
async fn write_file(
    session: &RawSftpSession,
    temporary: &str,
    path: &str,
    data: &[u8],
) -> Result<(), Failed> {
    let attrs = FileAttributes {
        permissions: Some(0o400),
        ..FileAttributes::empty()
    };
    let flags = OpenFlags::WRITE | OpenFlags::CREATE | OpenFlags::EXCLUDE;
    let handle = session.open(temporary, flags, attrs).await?.handle;
    let written = session.write(handle.as_str(), 0, data.to_vec()).await;
    let closed = session.close(handle).await;
    let renamed = match (written, closed) {
        (Ok(_), Ok(_)) => session.rename(temporary, path).await,
        (Err(e), _) | (_, Err(e)) => Err(e),
    };
    if let Err(e) = renamed {
        let _ = session.remove(temporary).await;
        return Err(e.into());
    }
    Ok(())
}

impl Backend for SftpBackend {
    fn name(&self) -> &'static str {
        SCHEME.name
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::NATIVE
    }

    fn list(&self, kind: Kind) -> Result<Vec<FileInfo>, BackendError> {
        let dir = format!("{}/", kind.dir());
        let path = self.location.join(kind.dir());
        let files = self.call("listing", &dir, list_dir(&self.session, &path))?;
        checked_listing(files, || format!("{dir} at {}", self.display))
    }

    fn read(&self, kind: Kind, name: &str) -> Result<Vec<u8>, BackendError> {
        let file = checked_read_name(kind, name)?;
        let path = self.location.join(&file);
        self.call(
            "reading",
            &file,
            read_file(&self.session, &path, kind.limit()),
        )
    }

    fn stat(&self, kind: Kind, name: &str) -> Result<Option<FileInfo>, BackendError> {
        let file = checked_name(kind, name)?;
        let path = self.location.join(&file);
        let attrs = self.call("looking at", &file, lstat(&self.session, &path))?;
        Ok(attrs.map(|attrs| file_info(name.to_owned(), &attrs)))
    }

    fn dir_kind(&self, kind: Kind) -> Result<Option<EntryKind>, BackendError> {
        let dir = format!("{}/", kind.dir());
        let path = self.location.join(kind.dir());
        let attrs = self.call("looking at", &dir, lstat(&self.session, &path))?;
        Ok(attrs.map(|attrs| entry_kind(&attrs)))
    }

    fn remove(&self, id: &str) -> Result<Removal, BackendError> {
        let file = checked_name(Kind::Lock, id)?;
        let path = self.location.join(&file);
        self.call("deleting", &file, remove_file(&self.session, &path))
    }

    fn write_lock(&self, id: &str, stored: &[u8]) -> Result<(), BackendError> {
        let file = checked_name(Kind::Lock, id)?;
        let suffix = crate::repo::crypto::random_bytes::<6>().map_err(BackendError::Other)?;
        let temporary = self
            .location
            .join(&format!("{file}-tmp-{}", hex::encode(suffix)));
        let path = self.location.join(&file);
        self.call(
            "writing",
            &file,
            write_file(&self.session, &temporary, &path, stored),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(location: &str) -> SftpLocation {
        SftpLocation::parse(location).unwrap_or_else(|e| panic!("{location}: {e}"))
    }

    fn location(user: Option<&str>, host: &str, port: Option<u16>, path: &str) -> SftpLocation {
        SftpLocation {
            user: user.map(str::to_owned),
            host: host.to_owned(),
            port,
            path: path.to_owned(),
        }
    }

    #[test]
    fn parses_both_forms_as_restic_does() {
        assert_eq!(
            parsed("sftp:user@host:/srv/repo"),
            location(Some("user"), "host", None, "/srv/repo")
        );
        assert_eq!(
            parsed("sftp:host:relative/repo/"),
            location(None, "host", None, "relative/repo")
        );
        assert_eq!(
            parsed("sftp:a@b@host:x"),
            location(Some("a@b"), "host", None, "x")
        );
        assert_eq!(
            parsed("sftp://user@host:2222//srv/repo"),
            location(Some("user"), "host", Some(2222), "/srv/repo")
        );
        assert_eq!(
            parsed("sftp://host/relative"),
            location(None, "host", None, "relative")
        );
        assert_eq!(
            parsed("sftp://u:secret@[::1]:22/r"),
            location(Some("u"), "::1", Some(22), "r")
        );
        assert_eq!(
            parsed("sftp://us%40er@host/a%20b/./c/../d"),
            location(Some("us@er"), "host", None, "a b/d")
        );
        assert_eq!(parsed("sftp:host:").path, ".");
    }

    #[test]
    fn refuses_what_would_reach_ssh_as_an_option_or_control_characters() {
        for hostile in [
            "sftp:-oProxyCommand=touch /tmp/x:repo",
            "sftp:user@-oProxyCommand=sh:repo",
            "sftp://-oProxyCommand=x/repo",
            "sftp://user@-p1/repo",
            "sftp:ho\nst:repo",
            "sftp:host:re\u{7}po",
            "sftp://host/re%0Apo",
            "sftp://us%0Aer@host/repo",
            "sftp://ho%0Ast/repo",
            "sftp:host with space:repo",
            "sftp:host:~/repo",
            "sftp://host",
            "sftp://host:port/repo",
            "sftp://host:0/repo",
            "sftp://host:99999/repo",
            "sftp://host/repo?x",
            "sftp:hostonly",
            "sftp::repo",
            "sftp:a@b@c@d:repo",
        ] {
            assert!(
                SftpLocation::parse(hostile).is_err(),
                "accepted {hostile:?}: {:?}",
                SftpLocation::parse(hostile)
            );
        }
    }

    #[test]
    fn refusals_never_quote_a_password() {
        let err = SftpLocation::parse("sftp://u:hunter2@-oX/repo").expect_err("option host");
        assert!(!err.to_string().contains("hunter2"), "{err}");
        assert!(err.to_string().contains("u:***@"), "{err}");
    }

    #[test]
    fn the_host_follows_a_double_dash_and_batch_mode_is_on() {
        let argv = parsed("sftp://backup@nas:2222//srv/r").ssh_command(Duration::from_millis(2500));
        assert_eq!(
            argv,
            [
                "ssh",
                "-o",
                "BatchMode=yes",
                "-o",
                "ConnectTimeout=3",
                "-p",
                "2222",
                "-l",
                "backup",
                "-s",
                "--",
                "nas",
                "sftp"
            ]
        );
        let plain = parsed("sftp:nas:r").ssh_command(Duration::from_secs(60));
        assert_eq!(plain[5..], ["-s", "--", "nas", "sftp"]);
    }

    #[test]
    fn paths_are_cleaned_like_go() {
        for (dirty, clean) in [
            ("", "."),
            ("/", "/"),
            ("//a//b/", "/a/b"),
            ("a/./b/..", "a"),
            ("../a", "../a"),
            ("/../a", "/a"),
            ("a/../..", ".."),
        ] {
            assert_eq!(clean_path(dirty), clean, "{dirty}");
        }
        assert_eq!(parsed("sftp:h:/").join("config"), "/config");
        assert_eq!(parsed("sftp:h:").join("locks"), "locks");
        assert_eq!(parsed("sftp:h:r").join("locks/x"), "r/locks/x");
    }

    #[test]
    fn commands_split_like_a_shell_for_simple_quoting() {
        let words =
            split_command(r#"ssh -i '/my keys/k' -o "ProxyCommand=nc \"h\" 22" a\ b  -s sftp"#)
                .expect("splits");
        assert_eq!(
            words,
            [
                "ssh",
                "-i",
                "/my keys/k",
                "-o",
                r#"ProxyCommand=nc "h" 22"#,
                "a b",
                "-s",
                "sftp"
            ]
        );
        assert_eq!(split_command("x ''").expect("empty word"), ["x", ""]);
        for bad in ["", "   ", "ssh 'secret", "ssh \"secret", "ssh \\"] {
            let err = split_command(bad).expect_err(bad);
            assert!(!err.contains("secret"), "{err}");
        }
    }

    #[test]
    fn ssh_failures_are_classified() {
        let shown = "sftp:u@h:/r";
        let refused = refusal(
            b"ssh: connect to host h port 22: Connection refused\r\n",
            shown,
            "ssh",
        );
        assert!(
            matches!(&refused, BackendError::Unreachable(m) if m.contains(shown) && m.contains("Connection refused")),
            "{refused:?}"
        );
        let unknown = refusal(
            b"ssh: Could not resolve hostname h: Name or service not known\n",
            shown,
            "ssh",
        );
        assert!(
            matches!(unknown, BackendError::Unreachable(_)),
            "{unknown:?}"
        );
        let denied = refusal(
            b"Warning: Permanently added 'h' (ED25519) to the list of known hosts.\nu@h: Permission denied (publickey).\n",
            shown,
            "ssh",
        );
        assert!(
            matches!(&denied, BackendError::Denied(m) if m.ends_with("u@h: Permission denied (publickey).")),
            "{denied:?}"
        );
        let host_key = refusal(b"Host key verification failed.\n", shown, "ssh");
        assert!(matches!(host_key, BackendError::Other(_)), "{host_key:?}");
        let odd = refusal(b"\x1b[31mboom\n", shown, "my-ssh");
        assert!(
            matches!(&odd, BackendError::Other(m) if m.contains("my-ssh") && !m.contains('\x1b')),
            "{odd:?}"
        );
    }

    #[test]
    fn a_missing_program_is_named() {
        let err = Connection::start(&["/nonexistent/ssh".into()], "sftp:h:/r")
            .err()
            .expect("no such program");
        assert!(err.to_string().contains("/nonexistent/ssh"), "{err}");
    }
}
