//! A listener on 127.0.0.1 that records every request it gets (method,
//! target, headers) and answers each with an empty S3 listing: the "other
//! host" a hostile server redirects lockwarden to, which must see nothing
//! (no request, no credential, no `Referer`).

use std::io::BufReader;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::http_wire::{Request, accept_until, read_request, respond};

/// What the recorder answers: a listing with nothing in it, so that a
/// client that followed a redirect here would judge an empty directory.
const EMPTY_LISTING: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>";

/// A running recorder; stops accepting when dropped.
pub struct Recorder {
    /// Where it listens.
    pub addr: SocketAddr,
    requests: Arc<Mutex<Vec<Request>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Recorder {
    /// Starts one on a free port.
    pub fn start() -> Recorder {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the recorder");
        let addr = listener.local_addr().expect("its address");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let kept = requests.clone();
        let thread = accept_until(listener, stop.clone(), move |stream| record(stream, &kept));
        Recorder {
            addr,
            requests,
            stop,
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Records and answers the requests of one connection.
fn record(stream: TcpStream, kept: &Mutex<Vec<Request>>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let Ok(clone) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(clone);
    let mut out = stream;
    while let Some(request) = read_request(&mut reader) {
        if let Ok(mut kept) = kept.lock() {
            kept.push(request);
        }
        let headers = [("Content-Type", "application/xml".to_owned())];
        if respond(&mut out, 200, &headers, EMPTY_LISTING.as_bytes(), None).is_err() {
            return;
        }
    }
}
