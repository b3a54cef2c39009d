//! Just enough HTTP/1.1 for the test servers of our own ([`crate::hostile_s3`],
//! [`crate::recorder`]): requests read with their heads and bodies
//! (`Content-Length` or chunked), answers written whole or streamed in
//! chunks, never held in memory.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

/// Accepts connections on `listener` until `stop` is set (the connection
/// that wakes it is dropped), each served by `serve` on a thread of its own.
pub fn accept_until(
    listener: TcpListener,
    stop: Arc<AtomicBool>,
    serve: impl Fn(TcpStream) + Send + Sync + 'static,
) -> JoinHandle<()> {
    let serve = Arc::new(serve);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            let Ok(stream) = stream else { continue };
            let serve = serve.clone();
            std::thread::spawn(move || serve(stream));
        }
    })
}

/// The largest request head read.
const MAX_HEAD: usize = 64 << 10;
/// The largest request body read (a lock file is a few hundred bytes).
const MAX_BODY: usize = 16 << 20;

/// One request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `GET`, `PUT`, ...
    pub method: String,
    /// The path, percent-encoded as sent.
    pub path: String,
    /// The query string (without `?`), as sent.
    pub query: String,
    /// The headers, names as sent.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Request {
    /// The value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The decoded value of query parameter `name`.
    pub fn param(&self, name: &str) -> Option<String> {
        self.query.split('&').find_map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(key) == name).then(|| decode(value))
        })
    }
}

/// Percent-decodes a query's `text`, `+` as a space (form encoding, as
/// clients send queries).
pub fn decode(text: &str) -> String {
    percent_decode(text, true)
}

/// Percent-decodes a path's `text` (`+` is itself there).
pub fn decode_path(text: &str) -> String {
    percent_decode(text, false)
}

fn percent_decode(text: &str, plus_is_space: bool) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
                continue;
            }
            (b'+', _) if plus_is_space => out.push(b' '),
            (b, _) => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The next request on a connection; `None` when it closes or sends
/// something that is not a request.
pub fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Request> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_owned();
    let target = parts.next()?;
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let (path, query) = (path.to_owned(), query.to_owned());
    let mut headers = Vec::new();
    let mut head_size = line.len();
    loop {
        let mut header = String::new();
        head_size += reader.read_line(&mut header).ok()?;
        if head_size > MAX_HEAD || header.is_empty() {
            return None;
        }
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        headers.push((name.trim().to_owned(), value.trim().to_owned()));
    }
    let mut request = Request {
        method,
        path,
        query,
        headers,
        body: Vec::new(),
    };
    let chunked = request
        .header("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
    request.body = if chunked {
        read_chunked(reader)?
    } else {
        let length: usize = request
            .header("content-length")
            .map_or(Some(0), |v| v.parse().ok())?;
        if length > MAX_BODY {
            return None;
        }
        let mut body = vec![0u8; length];
        reader.read_exact(&mut body).ok()?;
        body
    };
    Some(request)
}

/// A chunked body (trailers skipped).
fn read_chunked(reader: &mut BufReader<TcpStream>) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        reader.read_line(&mut size).ok()?;
        let size = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
        if size == 0 {
            loop {
                let mut trailer = String::new();
                if reader.read_line(&mut trailer).ok()? == 0 || trailer.trim().is_empty() {
                    return Some(body);
                }
            }
        }
        if body.len() + size > MAX_BODY {
            return None;
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..]).ok()?;
        let mut crlf = [0u8; 2];
        reader.read_exact(&mut crlf).ok()?;
    }
}

/// The reason phrase of `status`.
fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Other",
    }
}

/// Writes a whole answer: `status`, `headers`, and `body` (not sent for a
/// `HEAD`, whose `Content-Length` is `length` when given).
pub fn respond(
    out: &mut TcpStream,
    status: u16,
    headers: &[(&str, String)],
    body: &[u8],
    head_only: Option<u64>,
) -> std::io::Result<()> {
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    for (name, value) in headers {
        head += &format!("{name}: {value}\r\n");
    }
    let length = head_only.unwrap_or(body.len() as u64);
    head += &format!("Content-Length: {length}\r\n\r\n");
    out.write_all(head.as_bytes())?;
    if head_only.is_none() {
        out.write_all(body)?;
    }
    out.flush()
}

/// Streams an answer of `total` bytes: `prefix`, then `filler` repeated
/// (cut to fit), chunked or with a declared `Content-Length`; at most one
/// filler's worth is ever in memory. Stops at the first failed write (the
/// client gave up).
pub fn stream(
    out: &mut TcpStream,
    status: u16,
    content_type: &str,
    prefix: &[u8],
    filler: &[u8],
    total: u64,
    declared: bool,
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nConnection: close\r\n",
        reason(status)
    );
    head += &if declared {
        format!("Content-Length: {total}\r\n\r\n")
    } else {
        "Transfer-Encoding: chunked\r\n\r\n".to_owned()
    };
    out.write_all(head.as_bytes())?;
    let mut sent = 0u64;
    let mut piece: &[u8] = prefix;
    while sent < total {
        let take = piece
            .len()
            .min(usize::try_from(total - sent).unwrap_or(usize::MAX));
        let data = &piece[..take];
        if declared {
            out.write_all(data)?;
        } else {
            out.write_all(format!("{:x}\r\n", data.len()).as_bytes())?;
            out.write_all(data)?;
            out.write_all(b"\r\n")?;
        }
        sent += take as u64;
        piece = filler;
    }
    if !declared {
        out.write_all(b"0\r\n\r\n")?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_decoded_as_forms() {
        assert_eq!(decode("a%2Fb+c%3D"), "a/b c=");
        assert_eq!(decode("100%"), "100%");
        assert_eq!(decode("%zz"), "%zz");
        assert_eq!(decode_path("a+b%2F..%01"), "a+b/..\u{1}");
        let request = Request {
            method: "GET".into(),
            path: "/b".into(),
            query: "list-type=2&continuation-token=x%2By".into(),
            headers: vec![("X-Amz-Security-Token".into(), "t".into())],
            body: Vec::new(),
        };
        assert_eq!(request.param("continuation-token").as_deref(), Some("x+y"));
        assert_eq!(request.param("prefix"), None);
        assert_eq!(request.header("x-amz-security-token"), Some("t"));
    }
}
