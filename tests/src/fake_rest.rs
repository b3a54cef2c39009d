//! A small restic REST server for adversarial tests: it serves a real
//! repository directory the way rest-server does (v2 listings), except where
//! a test's hook answers differently: a listing too large, a refused delete,
//! a request never answered.

use std::io::BufReader;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The media type of REST v2 listings.
pub const V2: &str = "application/vnd.x.restic.rest.v2";

/// What the server answers to one request.
pub enum Reply {
    /// Serve the repository directory as rest-server would.
    Default,
    /// A status with an empty body.
    Status(u16),
    /// A 200 with this content type and body.
    Body(&'static str, Vec<u8>),
    /// Never answer (until the server stops).
    Hang,
}

/// Decides the reply to `(method, path)`, `path` relative to the repository
/// (`config`, `keys/`, `locks/<id>`).
pub type Hook = dyn Fn(&str, &str) -> Reply + Send + Sync;

/// A running fake server on 127.0.0.1, stopped when dropped.
pub struct FakeRest {
    /// What `-r` takes: `rest:http://127.0.0.1:PORT/repo`.
    pub location: String,
    addr: String,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl FakeRest {
    /// Serves the repository directory `root`, asking `hook` first.
    pub fn start(
        root: &Path,
        hook: impl Fn(&str, &str) -> Reply + Send + Sync + 'static,
    ) -> FakeRest {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fake REST server");
        let addr = listener.local_addr().expect("its address").to_string();
        let stop = Arc::new(AtomicBool::new(false));
        let hook: Arc<Hook> = Arc::new(hook);
        let (root, flag) = (root.to_owned(), stop.clone());
        let thread = crate::http_wire::accept_until(listener, stop.clone(), move |stream| {
            serve(stream, &root, hook.as_ref(), &flag)
        });
        FakeRest {
            location: format!("rest:http://{addr}/repo"),
            addr,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for FakeRest {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(&self.addr);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Answers requests on one connection until it closes.
fn serve(stream: TcpStream, root: &Path, hook: &Hook, stop: &AtomicBool) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut reader = BufReader::new(match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return,
    });
    let mut out = stream;
    while let Some(request) = read_request(&mut reader) {
        let response = match hook(&request.method, &request.path) {
            Reply::Default => default_reply(root, &request),
            Reply::Status(status) => Response::empty(status),
            Reply::Body(content_type, body) => Response {
                status: 200,
                content_type,
                body,
            },
            Reply::Hang => {
                hang(stop);
                return;
            }
        };
        if response.send(&mut out, request.method == "HEAD").is_err() {
            return;
        }
    }
}

/// One request to the server, its body read and dropped.
struct Request {
    /// `GET`, `HEAD`, `DELETE`, ...
    method: String,
    /// Relative to the repository (`config`, `keys/`, `locks/<id>`).
    path: String,
    /// The client accepts REST v2 listings.
    v2: bool,
}

/// The next request on the connection; `None` when it closes or fails.
fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Request> {
    let request = crate::http_wire::read_request(reader)?;
    let v2 = request
        .header("accept")
        .is_some_and(|accept| accept.to_ascii_lowercase().contains(V2));
    let path = request.path.strip_prefix("/repo/").unwrap_or("").to_owned();
    Some(Request {
        method: request.method,
        path,
        v2,
    })
}

/// Answers nothing until the server stops (or ten minutes pass).
fn hang(stop: &AtomicBool) {
    let until = Instant::now() + Duration::from_secs(600);
    while !stop.load(Ordering::SeqCst) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One response of the server.
struct Response {
    status: u16,
    content_type: &'static str,
    body: Vec<u8>,
}

impl Response {
    /// `status` with an empty plain-text body.
    fn empty(status: u16) -> Response {
        Response {
            status,
            content_type: "text/plain",
            body: Vec::new(),
        }
    }

    /// Writes the response to `out`; without its body, and with a
    /// `Content-Length` of 0, when `head_only` (a `HEAD`).
    fn send(&self, out: &mut TcpStream, head_only: bool) -> std::io::Result<()> {
        let headers = [("Content-Type", self.content_type.to_owned())];
        crate::http_wire::respond(
            out,
            self.status,
            &headers,
            &self.body,
            head_only.then_some(0),
        )
    }
}

/// What rest-server answers to `request` for the repository at `root`.
fn default_reply(root: &Path, request: &Request) -> Response {
    let (method, path, v2) = (request.method.as_str(), request.path.as_str(), request.v2);
    let safe = !path.contains("..");
    let file: PathBuf = root.join(path);
    match method {
        "GET" | "HEAD" if safe && (path == "keys/" || path == "locks/") => {
            let mut entries: Vec<(String, u64)> = std::fs::read_dir(&file)
                .map(|d| {
                    d.filter_map(Result::ok)
                        .map(|e| {
                            let size = e.metadata().map(|m| m.len()).unwrap_or(0);
                            (e.file_name().to_string_lossy().into_owned(), size)
                        })
                        .collect()
                })
                .unwrap_or_default();
            entries.sort();
            if v2 {
                let list: Vec<serde_json::Value> = entries
                    .iter()
                    .map(|(name, size)| serde_json::json!({"name": name, "size": size}))
                    .collect();
                Response {
                    status: 200,
                    content_type: V2,
                    body: serde_json::Value::from(list).to_string().into_bytes(),
                }
            } else {
                let names: Vec<&String> = entries.iter().map(|(n, _)| n).collect();
                Response {
                    status: 200,
                    content_type: "application/vnd.x.restic.rest.v1",
                    body: serde_json::to_vec(&names).unwrap_or_default(),
                }
            }
        }
        "GET" | "HEAD" if safe => match std::fs::read(&file) {
            Ok(bytes) => Response {
                status: 200,
                content_type: "application/octet-stream",
                body: bytes,
            },
            Err(_) => Response::empty(404),
        },
        "DELETE" if safe && path.starts_with("locks/") => match std::fs::remove_file(&file) {
            Ok(()) => Response::empty(200),
            Err(_) => Response::empty(404),
        },
        _ => Response::empty(405),
    }
}
