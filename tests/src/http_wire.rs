//! Just enough HTTP/1.1 for the test servers and proxies of our own
//! ([`crate::hostile_s3`], [`crate::recorder`], [`crate::fake_rest`],
//! [`crate::webhook`], [`crate::fault_proxy`]): requests and responses read
//! with their heads and bodies (`Content-Length`, chunked, or to the end),
//! every read bounded; answers written whole or streamed in chunks, never
//! held in memory. Timeouts are the callers': each sets them on its
//! sockets.

use std::io::{BufRead, Read, Write};
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
        header(&self.headers, name)
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
/// something that is not a request (or a head or body over the bounds).
pub fn read_request(reader: &mut impl BufRead) -> Option<Request> {
    let (line, headers) = read_head(reader)?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_owned();
    let target = parts.next()?;
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let mut request = Request {
        method,
        path: path.to_owned(),
        query: query.to_owned(),
        headers,
        body: Vec::new(),
    };
    request.body = read_body(reader, &request.headers, false)?;
    Some(request)
}

/// One response, its body decoded from chunked if it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// `HTTP/1.1 200 OK`, as sent.
    pub status_line: String,
    /// The headers, names as sent.
    pub headers: Vec<(String, String)>,
    /// The body (empty for the answer to a `HEAD`).
    pub body: Vec<u8>,
}

/// The response on a connection the server closes after it (its body runs
/// to the end when it has neither a length nor chunks); `head` when it
/// answers a `HEAD`, so has no body. `None` when it is not a response or
/// is over the bounds.
pub fn read_response(reader: &mut impl BufRead, head: bool) -> Option<Response> {
    let (status_line, headers) = read_head(reader)?;
    let body = if head {
        Vec::new()
    } else {
        read_body(reader, &headers, true)?
    };
    Some(Response {
        status_line,
        headers,
        body,
    })
}

/// A head: its first line (without the line end) and its headers, at most
/// [`MAX_HEAD`] bytes in all.
fn read_head(reader: &mut impl BufRead) -> Option<(String, Vec<(String, String)>)> {
    let mut left = MAX_HEAD;
    let first = read_line(reader, &mut left)?.trim_end().to_owned();
    let mut headers = Vec::new();
    loop {
        let line = read_line(reader, &mut left)?;
        let line = line.trim_end();
        if line.is_empty() {
            return Some((first, headers));
        }
        let (name, value) = line.split_once(':')?;
        headers.push((name.trim().to_owned(), value.trim().to_owned()));
    }
}

/// One line, its end included, of at most `*left` bytes, which it takes
/// from `*left`; `None` at the end of the stream, on an error, or when the
/// line is longer.
fn read_line(reader: &mut impl BufRead, left: &mut usize) -> Option<String> {
    let mut line = Vec::new();
    let limit = u64::try_from(*left).unwrap_or(u64::MAX);
    let n = reader
        .by_ref()
        .take(limit)
        .read_until(b'\n', &mut line)
        .ok()?;
    if n == 0 || !line.ends_with(b"\n") {
        return None;
    }
    *left -= n;
    Some(String::from_utf8_lossy(&line).into_owned())
}

/// The value of header `name` (any case) in `headers`.
fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// The body its `headers` announce: chunked, `Content-Length` bytes, or
/// else none, or (`to_end`) all up to the end of the stream; at most
/// [`MAX_BODY`] bytes.
fn read_body(
    reader: &mut impl BufRead,
    headers: &[(String, String)],
    to_end: bool,
) -> Option<Vec<u8>> {
    let chunked = header(headers, "transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    if chunked {
        return read_chunked(reader);
    }
    let mut body = Vec::new();
    match header(headers, "content-length") {
        Some(length) => {
            let length: usize = length.parse().ok()?;
            if length > MAX_BODY {
                return None;
            }
            body.resize(length, 0);
            reader.read_exact(&mut body).ok()?;
        }
        None if to_end => {
            let limit = u64::try_from(MAX_BODY + 1).unwrap_or(u64::MAX);
            reader.by_ref().take(limit).read_to_end(&mut body).ok()?;
            if body.len() > MAX_BODY {
                return None;
            }
        }
        None => {}
    }
    Some(body)
}

/// A chunked body (trailers skipped).
fn read_chunked(reader: &mut impl BufRead) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    let mut left = MAX_HEAD;
    loop {
        let size = read_line(reader, &mut left)?;
        let size = usize::from_str_radix(size.trim().split(';').next()?.trim(), 16).ok()?;
        if size == 0 {
            // Trailers, up to the blank line or the end of the stream.
            while read_line(reader, &mut left).is_some_and(|t| !t.trim().is_empty()) {}
            return Some(body);
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

    #[test]
    fn chunked_bodies_are_decoded() {
        let body = read_chunked(&mut &b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n"[..]);
        assert_eq!(body.as_deref(), Some(&b"hello world"[..]));
        assert!(read_chunked(&mut &b"5\r\nhel"[..]).is_none());
    }

    #[test]
    fn heads_and_bodies_are_read_within_their_bounds() {
        let wire = b"PUT /r/locks/x?a=1 HTTP/1.1\r\nContent-Length: 3\r\nHost: h\r\n\r\nabcGET /";
        let mut reader = &wire[..];
        let request = read_request(&mut reader).expect("a request");
        assert_eq!(
            (request.method.as_str(), request.path.as_str()),
            ("PUT", "/r/locks/x")
        );
        assert_eq!(
            (request.query.as_str(), &request.body[..]),
            ("a=1", &b"abc"[..])
        );
        assert_eq!(request.header("host"), Some("h"));
        assert_eq!(reader, b"GET /", "what follows the body is left unread");
        let long = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(MAX_HEAD));
        assert!(read_request(&mut long.as_bytes()).is_none());
        let huge = format!("PUT / HTTP/1.1\r\nContent-Length: {}\r\n\r\n", MAX_BODY + 1);
        assert!(read_request(&mut huge.as_bytes()).is_none());
        let answer = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n";
        let response = read_response(&mut &answer[..], false).expect("a response");
        assert_eq!(
            (response.status_line.as_str(), &response.body[..]),
            ("HTTP/1.1 200 OK", &b"ok"[..])
        );
        let to_end = read_response(&mut &b"HTTP/1.1 200 OK\r\n\r\nall of it"[..], false);
        assert_eq!(to_end.expect("a response").body, b"all of it");
        let head = read_response(
            &mut &b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n"[..],
            true,
        );
        assert!(head.expect("a response").body.is_empty());
    }
}
