//! The `/metrics` endpoint: a deliberately small HTTP/1.1 server. Each
//! connection gets a thread of its own (at most [`MAX_CLIENTS`] at once), a
//! bounded request head, and a deadline for reading and writing, so a client
//! that sends without reading, or reads without sending, holds up only
//! itself, and only for a few seconds.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::metrics::Metrics;
use crate::stop::Stop;

/// Clients served at once; more are turned away until one finishes.
const MAX_CLIENTS: usize = 16;
/// How long one client may take to send its request or read the answer.
const CLIENT_DEADLINE: Duration = Duration::from_secs(5);
/// How often the listener looks at the stop signal.
const POLL: Duration = Duration::from_millis(100);

/// Serves `GET /metrics` on `listener` until `stop`.
pub fn serve(listener: TcpListener, metrics: Arc<Metrics>, stop: Arc<Stop>) -> JoinHandle<()> {
    let clients = Arc::new(AtomicUsize::new(0));
    std::thread::spawn(move || {
        if listener.set_nonblocking(true).is_err() {
            tracing::error!("cannot serve metrics: the listener cannot poll");
            return;
        }
        while !stop.is_stopped() {
            let stream = match listener.accept() {
                Ok((stream, _)) => stream,
                // Nobody waiting, or an error that may persist (out of
                // descriptors: EMFILE comes back at once, nobody waiting
                // or not): wait a poll either way, never spin.
                Err(_) => {
                    stop.sleep(POLL);
                    continue;
                }
            };
            if clients.fetch_add(1, Ordering::SeqCst) >= MAX_CLIENTS {
                clients.fetch_sub(1, Ordering::SeqCst);
                continue; // dropped: the client sees the connection close
            }
            let (metrics, clients) = (metrics.clone(), clients.clone());
            std::thread::spawn(move || {
                let _ = answer(stream, &metrics);
                clients.fetch_sub(1, Ordering::SeqCst);
            });
        }
    })
}

/// Reads one request head and answers it, then closes the connection.
fn answer(mut stream: TcpStream, metrics: &Metrics) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(CLIENT_DEADLINE))?;
    stream.set_write_timeout(Some(CLIENT_DEADLINE))?;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    let started = Instant::now();
    let mut limited =
        std::io::BufReader::new(&mut stream).take(crate::limits::METRICS_REQUEST_HEAD);
    while !head.ends_with(b"\r\n\r\n") && !head.ends_with(b"\n\n") {
        // A whole-request deadline, not only one per read: a client that
        // drips one byte at a time is cut off too.
        if started.elapsed() > CLIENT_DEADLINE || limited.read(&mut byte)? == 0 {
            break;
        }
        head.push(byte[0]);
    }
    let line = head.split(|b| *b == b'\n').next().unwrap_or_default();
    let mut parts = line.split(|b| *b == b' ');
    let (method, target) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    let (status, content_type, body) = match (method, target) {
        (b"GET", b"/metrics") => (
            "200 OK",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            metrics.encode(),
        ),
        (b"GET", _) => (
            "404 Not Found",
            "text/plain; charset=utf-8",
            "lockwarden serves /metrics\n".to_owned(),
        ),
        _ => (
            "400 Bad Request",
            "text/plain; charset=utf-8",
            "lockwarden serves GET /metrics\n".to_owned(),
        ),
    };
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    stream.flush()
}
