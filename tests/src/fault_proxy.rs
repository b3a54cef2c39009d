//! A fault-injecting HTTP/1.1 proxy for the network backends' tests: it
//! sits between lockwarden and a server (a REST server, Azurite,
//! fake-gcs-server) and injects one [`Fault`] into every request that its
//! [`Filter`] selects; everything else is forwarded unchanged.
//!
//! It is deliberately simple: one request per client connection and one
//! upstream connection per request (both sides are told `Connection: close`),
//! and the whole request and upstream response read into memory (through
//! [`crate::http_wire`], within its bounds) before either is passed on. A
//! chunked body either way is decoded and passed on with a `Content-Length`,
//! so that every fault sees the body as bytes.

use std::io::{BufReader, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::http_wire::{Request, Response, read_request, read_response};

/// How long the proxy waits on either side before giving a connection up,
/// so that no proxy thread outlives a test by much.
const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// What goes wrong with a selected request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Wait this long, then forward the request and answer normally (a slow
    /// server: the request still reaches it, late).
    Delay(Duration),
    /// Forward the request, send the response head and half the body, then
    /// reset the connection (SO_LINGER 0, a real RST). A response without a
    /// body is cut in the middle of its head instead.
    ResetMidBody,
    /// Answer with this status code and a short body, without forwarding:
    /// the server did nothing.
    Status(u16),
    /// Forward the request, send the head with the full `Content-Length` but
    /// only half the body, then close cleanly (FIN). A response without a
    /// body is cut in the middle of its head instead.
    Truncate,
    /// Forward the request, then send the whole response (head included) one
    /// byte at a time, this long apart.
    Drip(Duration),
    /// Answer `307 Temporary Redirect` to the same path (no query) on this
    /// address, without forwarding: another host, which may record what
    /// reaches it ([`crate::recorder::Recorder`]).
    Redirect(SocketAddr),
    /// Forward the request, and in the answer's body replace the first
    /// occurrence of each pair's first text by its second (odd entries in
    /// a listing page, say).
    Rewrite(&'static [(&'static str, &'static str)]),
    /// Answer `status` with a body of `bytes` bytes, chunked, without
    /// forwarding; the body is streamed, never held in memory.
    HugeBody {
        /// The status (200 for a listing page, 403 for an error body).
        status: u16,
        /// The body's size.
        bytes: u64,
    },
}

impl Fault {
    /// The five faults the REST tests inject: a delay of `delay` (longer than
    /// the client's timeout), a reset mid-body, a 503, a truncated body, and
    /// a drip of one byte every 300 ms.
    pub fn all(delay: Duration) -> [Fault; 5] {
        [
            Fault::Delay(delay),
            Fault::ResetMidBody,
            Fault::Status(503),
            Fault::Truncate,
            Fault::Drip(Duration::from_millis(300)),
        ]
    }
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::Delay(d) => write!(f, "a delay of {d:?}"),
            Fault::ResetMidBody => f.write_str("a connection reset mid-body"),
            Fault::Status(code) => write!(f, "a {code} answer"),
            Fault::Truncate => f.write_str("a body truncated against its Content-Length"),
            Fault::Drip(d) => write!(f, "a drip of one byte every {d:?}"),
            Fault::Redirect(to) => write!(f, "a redirect to {to}"),
            Fault::HugeBody { status, bytes } => write!(f, "a {status} answer of {bytes} bytes"),
            Fault::Rewrite(pairs) => write!(f, "the answer rewritten ({pairs:?})"),
        }
    }
}

/// Whether a request, given its method and path, is selected.
type Matcher = dyn Fn(&str, &str, &str) -> bool + Send + Sync;

/// Which requests get the fault, by method and path (the query string is
/// not part of the path).
pub struct Filter {
    description: String,
    matches: Box<Matcher>,
}

impl Filter {
    /// Requests for which `matches(method, path)` is true; `description`
    /// names them in messages.
    pub fn new(
        description: impl Into<String>,
        matches: impl Fn(&str, &str) -> bool + Send + Sync + 'static,
    ) -> Filter {
        Filter::with_query(description, move |method, path, _| matches(method, path))
    }

    /// Requests for which `matches(method, path, query)` is true (the query
    /// as sent, without `?`).
    pub fn with_query(
        description: impl Into<String>,
        matches: impl Fn(&str, &str, &str) -> bool + Send + Sync + 'static,
    ) -> Filter {
        Filter {
            description: description.into(),
            matches: Box::new(matches),
        }
    }

    /// Every request.
    pub fn all() -> Filter {
        Filter::new("every request", |_, _| true)
    }

    /// An object store's listing of `locks/`: a `GET` whose `prefix`
    /// parameter ends in `locks/` (S3, GCS's XML API, Azure).
    pub fn object_lock_listing() -> Filter {
        Filter::with_query("GET ?prefix=.../locks/ (listing)", |method, _, query| {
            method == "GET"
                && query.split('&').any(|pair| {
                    pair.split_once('=').is_some_and(|(key, value)| {
                        key == "prefix" && crate::http_wire::decode(value).ends_with("locks/")
                    })
                })
        })
    }

    /// Whether `method path?query` is selected.
    pub fn selects(&self, method: &str, path: &str, query: &str) -> bool {
        (self.matches)(method, path, query)
    }

    /// `GET .../locks/<id>`: reading the lock file `id`, or any lock file
    /// when `id` is `None`.
    pub fn lock_read(id: Option<&str>) -> Filter {
        let id = id.map(str::to_owned);
        Filter::new(
            format!("GET locks/{}", id.as_deref().unwrap_or("<any>")),
            move |method, path| method == "GET" && lock_in_path(path, id.as_deref()),
        )
    }

    /// `GET .../locks/`: the listing of the lock files.
    pub fn lock_listing() -> Filter {
        Filter::new("GET locks/ (listing)", |method, path| {
            method == "GET" && path.ends_with("/locks/")
        })
    }

    /// `DELETE .../locks/<id>`: removing the lock file `id`, or any lock file
    /// when `id` is `None`.
    pub fn lock_delete(id: Option<&str>) -> Filter {
        let id = id.map(str::to_owned);
        Filter::new(
            format!("DELETE locks/{}", id.as_deref().unwrap_or("<any>")),
            move |method, path| method == "DELETE" && lock_in_path(path, id.as_deref()),
        )
    }
}

impl std::fmt::Debug for Filter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.description)
    }
}

/// Whether `path` ends in `locks/<64 hex>` (and that id is `id`, if given).
fn lock_in_path(path: &str, id: Option<&str>) -> bool {
    // GCS percent-encodes an object name's slashes.
    let path = path.replace("%2F", "/");
    let Some((dir, name)) = path.rsplit_once('/') else {
        return false;
    };
    let is_lock = (dir == "locks" || dir.ends_with("/locks"))
        && name.len() == 64
        && name.bytes().all(|b| b.is_ascii_hexdigit());
    is_lock && id.is_none_or(|id| id == name)
}

/// What the proxy shares with its connection threads.
struct Shared {
    upstream: String,
    filter: Filter,
    fault: Fault,
    injected: AtomicUsize,
    seen: Mutex<Vec<String>>,
}

/// A running proxy on 127.0.0.1; stops accepting when dropped. Connection
/// threads still busy with a delay or a drip end on their own (at the latest
/// when the client has gone and a write fails, or after [`IO_TIMEOUT`]).
pub struct FaultProxy {
    /// `127.0.0.1:<port>`, where clients connect.
    pub addr: String,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl FaultProxy {
    /// Starts a proxy in front of `upstream` (`host:port`) that injects
    /// `fault` into the requests `filter` selects.
    pub fn start(upstream: &str, filter: Filter, fault: Fault) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fault proxy");
        let addr = listener.local_addr().expect("proxy address").to_string();
        let shared = Arc::new(Shared {
            upstream: upstream.to_owned(),
            filter,
            fault,
            injected: AtomicUsize::new(0),
            seen: Mutex::new(Vec::new()),
        });
        let stop = Arc::new(AtomicBool::new(false));
        let acceptor = {
            let shared = shared.clone();
            crate::http_wire::accept_until(listener, stop.clone(), move |client| {
                // A failure on either side ends this one connection; the
                // client sees a closed connection.
                let _ = serve(&shared, client);
            })
        };
        FaultProxy {
            addr,
            shared,
            stop,
            acceptor: Some(acceptor),
        }
    }

    /// How many requests the fault was injected into so far.
    pub fn injected(&self) -> usize {
        self.shared.injected.load(Ordering::SeqCst)
    }

    /// Every request seen so far, as `METHOD path`, in arrival order.
    pub fn seen(&self) -> Vec<String> {
        self.shared
            .seen
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default()
    }

    /// The fault this proxy injects.
    pub fn fault(&self) -> Fault {
        self.shared.fault
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the acceptor, which then sees the flag.
        let _ = TcpStream::connect(&self.addr);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

/// `response` as bytes, with a `Content-Length` of its body (kept as sent
/// for a `HEAD`) and `Connection: close`: (head, body).
fn encode(response: &Response, method: &str) -> (Vec<u8>, Vec<u8>) {
    let mut head = format!("{}\r\n", response.status_line);
    for (name, value) in &response.headers {
        let lower = name.to_ascii_lowercase();
        let keep_length = method == "HEAD" && lower == "content-length";
        if keep_length
            || !matches!(
                lower.as_str(),
                "content-length" | "transfer-encoding" | "connection" | "keep-alive"
            )
        {
            head += &format!("{name}: {value}\r\n");
        }
    }
    if method != "HEAD" {
        head += &format!("Content-Length: {}\r\n", response.body.len());
    }
    head += "Connection: close\r\n\r\n";
    (head.into_bytes(), response.body.clone())
}

/// Handles one client connection: one request, one answer, then close.
fn serve(shared: &Shared, mut client: TcpStream) -> std::io::Result<()> {
    client.set_read_timeout(Some(IO_TIMEOUT))?;
    client.set_write_timeout(Some(IO_TIMEOUT))?;
    let request = read_request(&mut BufReader::new(client.try_clone()?))
        .ok_or_else(|| std::io::Error::other("not a request, or one over the bounds"))?;
    let selected = shared
        .filter
        .selects(&request.method, &request.path, &request.query);
    if let Ok(mut seen) = shared.seen.lock() {
        seen.push(format!("{} {}", request.method, request.path));
    }
    if !selected {
        let (head, body) = forwarded(&shared.upstream, &request)?;
        client.write_all(&head)?;
        client.write_all(&body)?;
        client.flush()?;
        return client.shutdown(Shutdown::Write);
    }
    shared.injected.fetch_add(1, Ordering::SeqCst);
    inject(shared.fault, &shared.upstream, &request, client)
}

/// Answers `request` to `client` with `fault`, asking `upstream` where the
/// fault forwards the request.
fn inject(
    fault: Fault,
    upstream: &str,
    request: &Request,
    mut client: TcpStream,
) -> std::io::Result<()> {
    match fault {
        Fault::Delay(delay) => {
            std::thread::sleep(delay);
            let (head, body) = forwarded(upstream, request)?;
            client.write_all(&head)?;
            client.write_all(&body)?;
            client.shutdown(Shutdown::Write)
        }
        Fault::Status(code) => {
            let body = format!("injected fault: {code}\n");
            let answer = format!(
                "HTTP/1.1 {code} Injected Fault\r\nContent-Type: text/plain\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            client.write_all(answer.as_bytes())?;
            client.shutdown(Shutdown::Write)
        }
        Fault::ResetMidBody => {
            let (head, body) = forwarded(upstream, request)?;
            client.write_all(&half_of(&head, &body))?;
            client.flush()?;
            // Let the partial answer reach the client before the reset
            // (SO_LINGER 0 discards whatever is still unsent).
            std::thread::sleep(Duration::from_millis(200));
            rustix::net::sockopt::set_socket_linger(&client, Some(Duration::ZERO))?;
            drop(client);
            Ok(())
        }
        Fault::Truncate => {
            let (head, body) = forwarded(upstream, request)?;
            client.write_all(&half_of(&head, &body))?;
            client.flush()?;
            client.shutdown(Shutdown::Write)
        }
        Fault::Redirect(to) => {
            let answer = format!(
                "HTTP/1.1 307 Temporary Redirect\r\nLocation: http://{to}{}\r\n\
                 Content-Length: 0\r\nConnection: close\r\n\r\n",
                request.path
            );
            client.write_all(answer.as_bytes())?;
            client.shutdown(Shutdown::Write)
        }
        Fault::Rewrite(pairs) => {
            let mut response = forward(upstream, request)?;
            for (from, to) in pairs {
                if let Some(at) = find(&response.body, from.as_bytes()) {
                    response.body.splice(at..at + from.len(), to.bytes());
                }
            }
            let (head, body) = encode(&response, &request.method);
            client.write_all(&head)?;
            client.write_all(&body)?;
            client.shutdown(Shutdown::Write)
        }
        Fault::HugeBody { status, bytes } => {
            let prefix = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>Hostile</Code>";
            let filler = "<Padding>hostile</Padding>".repeat(64);
            crate::http_wire::stream(
                &mut client,
                status,
                "application/xml",
                prefix.as_bytes(),
                filler.as_bytes(),
                bytes,
                false,
            )?;
            client.shutdown(Shutdown::Write)
        }
        Fault::Drip(every) => {
            let (head, body) = forwarded(upstream, request)?;
            for byte in head.iter().chain(&body) {
                client.write_all(std::slice::from_ref(byte))?;
                client.flush()?;
                std::thread::sleep(every);
            }
            client.shutdown(Shutdown::Write)
        }
    }
}

/// `upstream`'s answer to `request`, encoded for the client: (head, body).
fn forwarded(upstream: &str, request: &Request) -> std::io::Result<(Vec<u8>, Vec<u8>)> {
    let response = forward(upstream, request)?;
    Ok(encode(&response, &request.method))
}

/// The head and the first half of `body`; when there is no body, the first
/// half of the head.
fn half_of(head: &[u8], body: &[u8]) -> Vec<u8> {
    if body.is_empty() {
        head[..head.len() / 2].to_vec()
    } else {
        let mut bytes = head.to_vec();
        bytes.extend_from_slice(&body[..body.len() / 2]);
        bytes
    }
}

/// The position of `needle` in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Sends `request` upstream on a fresh connection (`Connection: close`,
/// its body with a `Content-Length`) and reads the whole response.
fn forward(upstream: &str, request: &Request) -> std::io::Result<Response> {
    let mut server = TcpStream::connect(upstream)?;
    server.set_read_timeout(Some(IO_TIMEOUT))?;
    server.set_write_timeout(Some(IO_TIMEOUT))?;
    let target = match request.query.as_str() {
        "" => request.path.clone(),
        query => format!("{}?{query}", request.path),
    };
    let mut head = format!("{} {target} HTTP/1.1\r\n", request.method);
    // The upstream's own name: fake-gcs-server tells its XML API by it.
    // (No test server here checks a signature over it.)
    head += &format!("Host: {upstream}\r\n");
    let mut framed = false;
    for (name, value) in &request.headers {
        let lower = name.to_ascii_lowercase();
        framed |= matches!(lower.as_str(), "content-length" | "transfer-encoding");
        let dropped = [
            "host",
            "connection",
            "keep-alive",
            "proxy-connection",
            "content-length",
            "transfer-encoding",
        ];
        if !dropped.contains(&lower.as_str()) {
            head += &format!("{name}: {value}\r\n");
        }
    }
    if framed || !request.body.is_empty() {
        head += &format!("Content-Length: {}\r\n", request.body.len());
    }
    head += "Connection: close\r\n\r\n";
    server.write_all(head.as_bytes())?;
    server.write_all(&request.body)?;
    server.flush()?;
    read_response(&mut BufReader::new(server), request.method == "HEAD")
        .ok_or_else(|| std::io::Error::other("no answer from upstream, or one over the bounds"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_select_by_method_and_path() {
        let id = "ab".repeat(32);
        let other = "cd".repeat(32);
        let read = Filter::lock_read(Some(&id));
        assert!(read.selects("GET", &format!("/repo/locks/{id}"), ""));
        assert!(!read.selects("GET", &format!("/repo/locks/{other}"), ""));
        assert!(!read.selects("DELETE", &format!("/repo/locks/{id}"), ""));
        assert!(!read.selects("GET", "/repo/locks/", ""));
        let any = Filter::lock_read(None);
        assert!(any.selects("GET", &format!("/locks/{other}"), ""));
        assert!(!any.selects("GET", &format!("/repo/keys/{id}"), ""));
        let listing = Filter::lock_listing();
        assert!(listing.selects("GET", "/repo/locks/", ""));
        assert!(!listing.selects("GET", "/repo/keys/", ""));
        let delete = Filter::lock_delete(None);
        assert!(delete.selects("DELETE", &format!("/repo/locks/{id}"), ""));
        assert!(!delete.selects("GET", &format!("/repo/locks/{id}"), ""));
        let objects = Filter::object_lock_listing();
        assert!(objects.selects("GET", "/b", "list-type=2&prefix=repo%2Flocks%2F"));
        assert!(!objects.selects("GET", "/b", "list-type=2&prefix=repo%2Fkeys%2F"));
        assert!(!objects.selects("GET", "/b/repo/locks/", ""));
    }
}
