//! A real HTTP listener on 127.0.0.1 for webhook tests: records every
//! request (method, path, headers, body) and answers with a status the test
//! chooses, or never answers at all.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How the server answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// With this status and an empty body.
    Status(u16),
    /// Reads the request, then never answers (the connection stays open).
    Hang,
}

/// One request as received.
#[derive(Debug, Clone)]
pub struct Request {
    /// `POST`, ...
    pub method: String,
    /// The path and query.
    pub path: String,
    /// Header names (lower-case) and values.
    pub headers: Vec<(String, String)>,
    /// The body, as text.
    pub body: String,
}

impl Request {
    /// The value of header `name` (lower-case), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("webhook body is not JSON: {e}: {}", self.body))
    }
}

/// The server; stops accepting when dropped.
pub struct WebhookServer {
    addr: String,
    answer: Arc<Mutex<Answer>>,
    requests: Arc<Mutex<Vec<Request>>>,
    stopped: Arc<AtomicBool>,
}

impl WebhookServer {
    /// Starts a server answering `answer` on a free port of 127.0.0.1.
    pub fn start(answer: Answer) -> WebhookServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let addr = listener.local_addr().expect("local address").to_string();
        let server = WebhookServer {
            addr,
            answer: Arc::new(Mutex::new(answer)),
            requests: Arc::default(),
            stopped: Arc::default(),
        };
        let (answer, requests, stopped) = (
            server.answer.clone(),
            server.requests.clone(),
            server.stopped.clone(),
        );
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let (answer, requests) = (answer.clone(), requests.clone());
                std::thread::spawn(move || serve(stream, &answer, &requests));
            }
        });
        server
    }

    /// `http://127.0.0.1:PORT/PATH`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}/{}", self.addr, path.trim_start_matches('/'))
    }

    /// Changes how later requests are answered.
    pub fn answer(&self, answer: Answer) {
        *self.answer.lock().expect("answer") = answer;
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().expect("requests").clone()
    }

    /// The bodies received so far, as JSON.
    pub fn events(&self) -> Vec<serde_json::Value> {
        self.requests().iter().map(Request::json).collect()
    }
}

impl Drop for WebhookServer {
    fn drop(&mut self) {
        self.stopped.store(true, Ordering::SeqCst);
        // Wake the accepting thread so it sees the flag.
        let _ = TcpStream::connect(&self.addr);
    }
}

/// Reads requests from one connection (keep-alive), recording each and
/// answering as told.
fn serve(mut stream: TcpStream, answer: &Mutex<Answer>, requests: &Mutex<Vec<Request>>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut buffer = Vec::new();
    loop {
        let Some(request) = read_request(&mut stream, &mut buffer) else {
            return;
        };
        requests.lock().expect("requests").push(request);
        let answer = *answer.lock().expect("answer");
        match answer {
            Answer::Status(status) => {
                let reply = format!("HTTP/1.1 {status} Whatever\r\nContent-Length: 0\r\n\r\n");
                if stream.write_all(reply.as_bytes()).is_err() {
                    return;
                }
            }
            Answer::Hang => {
                // Hold the connection open without a word until the client
                // gives up.
                let mut sink = [0u8; 1024];
                let _ = stream.set_read_timeout(None);
                while matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
                return;
            }
        }
    }
}

/// Reads one request (headers, then a Content-Length body) from `stream`;
/// `buffer` keeps what was read past it.
fn read_request(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<Request> {
    let mut chunk = [0u8; 16 * 1024];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        let n = stream.read(&mut chunk).ok().filter(|n| *n > 0)?;
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut start = lines.next()?.split(' ');
    let (method, path) = (start.next()?.to_owned(), start.next()?.to_owned());
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let body_start = head_end + 4;
    while buffer.len() < body_start + length {
        let n = stream.read(&mut chunk).ok().filter(|n| *n > 0)?;
        buffer.extend_from_slice(&chunk[..n]);
    }
    let body = String::from_utf8_lossy(&buffer[body_start..body_start + length]).into_owned();
    buffer.drain(..body_start + length);
    Some(Request {
        method,
        path,
        headers,
        body,
    })
}
