//! What the backends share for reading location strings: why one is
//! refused, and how the user information of a URL is decoded and hidden.

/// Why a location string is refused. Never quotes a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LocationError {
    /// Nothing was given.
    #[error("the repository location is empty")]
    Empty,
    /// The string is not a location of its scheme.
    #[error("{0}")]
    Invalid(String),
}

/// A location is what the user gave.
impl crate::error::Classify for LocationError {
    fn kind(&self) -> crate::error::ErrorKind {
        match self {
            LocationError::Empty | LocationError::Invalid(_) => crate::error::ErrorKind::Usage,
        }
    }
}

/// Replaces the password of a `user:password@host` part of a repository
/// string with `***` (everything up to the last `@` counts as user
/// information, so a password holding a `/` is hidden too, and a malformed
/// URL such as `http//user:pw@host` as well). The `redact` of every scheme
/// whose locations are URLs or `user@host` forms; rclone's connection
/// strings are redacted by allowlist instead (`rclone/remote.rs`).
pub(crate) fn redact_userinfo(text: &str) -> String {
    let Some(at) = text.rfind('@') else {
        return text.to_owned();
    };
    let head = &text[..at];
    // The user information starts after `://`; in a malformed URL, after
    // the last `/` before the `@`, or after the scheme's `:`.
    let start = head
        .find("://")
        .map(|i| i + 3)
        .or_else(|| head.rfind('/').map(|i| i + 1))
        .or_else(|| head.find(':').map(|i| i + 1))
        .unwrap_or(0);
    let userinfo = &head[start..];
    match userinfo.split_once(':') {
        Some((user, _)) => format!("{}{user}:***{}", &text[..start], &text[at..]),
        None => text.to_owned(),
    }
}

/// Decodes `%XX` escapes (invalid ones stay as they are; invalid UTF-8 is
/// replaced), as restic reads user information in URLs.
pub(crate) fn percent_decode(text: &str) -> String {
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
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
