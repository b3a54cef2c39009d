//! Where a repository is, parsed the way restic parses `-r`, with credentials
//! kept out of anything printed. Which backend serves a location is the
//! registry's business ([`super::backend::SCHEMES`]); this module only keeps
//! the string and hides its secrets.

use std::time::Duration;

use super::Password;
use super::backend::{Backend, BackendError, Scheme, Target, Variables, scheme_of};

/// A repository location: its backend's scheme and the string that backend
/// parsed (which may hold credentials, so it is never shown as is).
#[derive(Clone)]
pub struct Location {
    scheme: &'static Scheme,
    text: String,
}

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

impl PartialEq for Location {
    fn eq(&self, other: &Location) -> bool {
        self.scheme.name == other.scheme.name && self.text == other.text
    }
}

impl Eq for Location {}

impl std::fmt::Debug for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl Location {
    /// Parses a repository string as restic does: a known `scheme:` prefix,
    /// else a local path.
    pub fn parse(text: &str) -> Result<Location, LocationError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(LocationError::Empty);
        }
        let scheme = scheme_of(text);
        Ok(Location {
            scheme,
            text: (scheme.parse)(text)?,
        })
    }

    /// The backend's name, as the contract's `repository.backend` has it.
    pub fn backend(&self) -> &'static str {
        self.scheme.name
    }

    /// The location for display and logs: secrets replaced by `***`.
    pub fn redacted(&self) -> String {
        redact_userinfo(&self.text)
    }

    /// Opens the backend that serves this location; each request or command
    /// it makes ends within `timeout`; the storage's variables are read
    /// from `variables`.
    pub fn open(
        &self,
        password: &Password,
        timeout: Duration,
        variables: &Variables,
    ) -> Result<Box<dyn Backend>, BackendError> {
        (self.scheme.open)(&Target {
            location: &self.text,
            shown: &self.redacted(),
            password,
            timeout,
            variables,
        })
    }
}

/// Replaces the secrets in a repository string with `***`: the password of
/// a `user:password@host` part (everything up to the last `@` counts as user
/// information, so a password holding a `/` is hidden too, and a malformed
/// URL such as `http//user:pw@host` as well), and the values of
/// `key=value` options whose key names a secret (rclone connection strings
/// such as `:s3,secret_access_key=...:bucket`).
pub(crate) fn redact_userinfo(text: &str) -> String {
    // User information first: a password may itself look like `,key=...`.
    redact_secret_options(&redact_password(text))
}

/// `text` with the password of its `user:password@` part replaced.
fn redact_password(text: &str) -> String {
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

/// `key=value` options (comma-separated, as in rclone connection strings)
/// whose key names a secret get `***` for a value.
fn redact_secret_options(text: &str) -> String {
    const SECRET_KEYS: [&str; 5] = ["secret", "pass", "token", "key", "auth"];
    let mut out = String::with_capacity(text.len());
    for (i, part) in text.split(',').enumerate() {
        if i > 0 {
            out.push(',');
        }
        match part.split_once('=') {
            Some((key, value))
                if SECRET_KEYS
                    .iter()
                    .any(|s| key.to_ascii_lowercase().contains(s)) =>
            {
                // The value ends where the remote's path begins (`:`).
                let rest = value.find(':').map_or("", |i| &value[i..]);
                out.push_str(key);
                out.push_str("=***");
                out.push_str(rest);
            }
            _ => out.push_str(part),
        }
    }
    out
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> (&'static str, String) {
        let location = Location::parse(text).expect("parses");
        (location.backend(), location.text)
    }

    #[test]
    fn parses_like_restic() {
        assert_eq!(parsed("/srv/repo"), ("local", "/srv/repo".into()));
        assert_eq!(parsed("local:rel/repo"), ("local", "rel/repo".into()));
        assert_eq!(
            parsed("rest:http://u:p%40ss@127.0.0.1:8000/repo/"),
            ("rest", "rest:http://u:p%40ss@127.0.0.1:8000/repo".into())
        );
        assert_eq!(parsed("s3:s3.amazonaws.com/bucket").0, "s3");
        assert!(Location::parse("rest:ftp://x").is_err());
        assert_eq!(Location::parse(" "), Err(LocationError::Empty));
    }

    #[test]
    fn credentials_never_show() {
        let rest = Location::parse("rest:https://alice:hunter2@backup.example:8000/r").expect("ok");
        assert_eq!(
            rest.redacted(),
            "rest:https://alice:***@backup.example:8000/r"
        );
        assert!(!format!("{rest:?}").contains("hunter2"));
        let sftp = Location::parse("rclone:remote:path").expect("ok");
        assert_eq!(sftp.redacted(), "rclone:remote:path");
        let err = Location::parse("rest:ftp://bob:secret@h/").expect_err("bad scheme");
        assert!(!err.to_string().contains("secret"), "{err}");
        assert_eq!(
            redact_userinfo("s3:https://k:s@h/b"),
            "s3:https://k:***@h/b"
        );
        assert_eq!(
            redact_userinfo("s3:https://k:se/cret@h/b"),
            "s3:https://k:***@h/b"
        );
        for (text, shown) in [
            (
                "rest:http//alice:S1@h:8000/r",
                "rest:http//alice:***@h:8000/r",
            ),
            ("rst:http://alice:S3@h/r", "rst:http://alice:***@h/r"),
            (
                "rclone::s3,region=x,secret_access_key=S4:bucket/r",
                "rclone::s3,region=x,secret_access_key=***:bucket/r",
            ),
        ] {
            assert_eq!(redact_userinfo(text), shown);
        }
        let malformed = Location::parse("rest:http//alice:S1@h:8000/r").expect_err("no ://");
        assert!(!malformed.to_string().contains("S1"), "{malformed}");
        let path = Location::parse("rst:http://alice:S3@h/r").expect("a path");
        assert!(!path.redacted().contains("S3"));
        for text in [
            "rest:http://alice:Tr0ub4dor,key=3@127.0.0.1:18080/",
            "rest:ftp://u:SECRET,token=zz@h/",
        ] {
            let shown = match Location::parse(text) {
                Ok(location) => location.redacted(),
                Err(e) => e.to_string(),
            };
            assert!(
                !shown.contains("Tr0ub4dor") && !shown.contains("SECRET"),
                "{shown}"
            );
        }
        let slash = Location::parse("rest:http://user:pa/ss-MARKER@127.0.0.1:1/repo")
            .expect_err("an @ in the path");
        assert!(!slash.to_string().contains("MARKER"), "{slash}");
    }
}
