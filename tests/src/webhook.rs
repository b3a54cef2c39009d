//! A real HTTP listener on 127.0.0.1 for webhook tests: records every
//! request (method, path, headers, body) and answers with a status the test
//! chooses, or never answers at all.

use std::io::{BufReader, Read};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::http_wire;

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
        let (answer, requests) = (server.answer.clone(), server.requests.clone());
        http_wire::accept_until(listener, server.stopped.clone(), move |stream| {
            serve(stream, &answer, &requests)
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
    let Ok(clone) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(clone);
    while let Some(request) = http_wire::read_request(&mut reader) {
        requests
            .lock()
            .expect("requests")
            .push(Request::from(request));
        let answer = *answer.lock().expect("answer");
        match answer {
            Answer::Status(status) => {
                if http_wire::respond(&mut stream, status, &[], b"", None).is_err() {
                    return;
                }
            }
            Answer::Hang => {
                // Hold the connection open without a word until the client
                // gives up.
                let mut sink = [0u8; 1024];
                let _ = stream.set_read_timeout(None);
                while matches!(reader.read(&mut sink), Ok(n) if n > 0) {}
                return;
            }
        }
    }
}

impl From<http_wire::Request> for Request {
    /// The request as the webhook tests see it: the query back in the path,
    /// header names in lower case, the body as text.
    fn from(request: http_wire::Request) -> Request {
        let path = match request.query.as_str() {
            "" => request.path,
            query => format!("{}?{query}", request.path),
        };
        Request {
            method: request.method,
            path,
            headers: request
                .headers
                .into_iter()
                .map(|(name, value)| (name.to_ascii_lowercase(), value))
                .collect(),
            body: String::from_utf8_lossy(&request.body).into_owned(),
        }
    }
}
