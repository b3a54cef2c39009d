//! Where a repository is, parsed the way restic parses `-r`, with credentials
//! kept out of anything printed.

use std::path::PathBuf;

/// restic's backend schemes that lockwarden reads through the `restic` binary.
const RESTIC_ONLY_SCHEMES: [&str; 7] = ["sftp", "s3", "b2", "azure", "gs", "swift", "rclone"];

/// A repository location.
#[derive(Clone, PartialEq, Eq)]
pub enum Location {
    /// A directory on this machine (`/srv/repo` or `local:/srv/repo`).
    Local(PathBuf),
    /// A REST server (`rest:http://[user:pass@]host:port/path`).
    Rest {
        /// The base URL without credentials, without a trailing slash.
        url: String,
        /// `user:password` from the URL, if any.
        credentials: Option<(String, String)>,
    },
    /// Anything else restic understands; read through the `restic` binary.
    Restic {
        /// The location exactly as given (passed to restic).
        raw: String,
        /// Its scheme (`sftp`, `s3`, ...).
        scheme: String,
    },
}

impl std::fmt::Debug for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl Location {
    /// Parses a repository string as restic does: a known `scheme:` prefix,
    /// else a local path.
    pub fn parse(text: &str) -> Result<Location, String> {
        let text = text.trim();
        if text.is_empty() {
            return Err("the repository location is empty".into());
        }
        if let Some(path) = text.strip_prefix("local:") {
            return Ok(Location::Local(PathBuf::from(path)));
        }
        if let Some(url) = text.strip_prefix("rest:") {
            return parse_rest(url);
        }
        if let Some((scheme, _)) = text.split_once(':')
            && RESTIC_ONLY_SCHEMES.contains(&scheme)
        {
            return Ok(Location::Restic {
                raw: text.to_owned(),
                scheme: scheme.to_owned(),
            });
        }
        Ok(Location::Local(PathBuf::from(text)))
    }

    /// The backend kind, as the contract's `repository.backend` names it.
    pub fn backend(&self) -> &str {
        match self {
            Location::Local(_) => "local",
            Location::Rest { .. } => "rest",
            Location::Restic { scheme, .. } => scheme,
        }
    }

    /// The location for display and logs: passwords replaced by `***`.
    pub fn redacted(&self) -> String {
        match self {
            // A mistyped URL is taken for a path: it may hold a password.
            Location::Local(path) => redact_userinfo(&path.display().to_string()),
            Location::Rest { url, credentials } => match (credentials, url.split_once("://")) {
                (Some((user, _)), Some((scheme, rest))) => {
                    format!("rest:{scheme}://{user}:***@{rest}")
                }
                _ => format!("rest:{url}"),
            },
            Location::Restic { raw, .. } => redact_userinfo(raw),
        }
    }
}

fn parse_rest(url: &str) -> Result<Location, String> {
    let (scheme, rest) = url
        .split_once("://")
        .filter(|(s, _)| matches!(*s, "http" | "https"))
        .ok_or_else(|| {
            format!(
                "`rest:{}` is not rest:http(s)://host:port/path",
                redact_userinfo(url)
            )
        })?;
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    if !authority.contains('@') && path.contains('@') {
        return Err(
            "the rest: URL has an `@` after its first `/`; if the password holds a `/`, \
             write it as %2F"
                .into(),
        );
    }
    let (credentials, host) = match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let (user, pass) = userinfo.split_once(':').unwrap_or((userinfo, ""));
            (Some((percent_decode(user), percent_decode(pass))), host)
        }
        None => (None, authority),
    };
    if host.is_empty() {
        return Err("the rest: URL has no host".into());
    }
    let path = path.trim_end_matches('/');
    let url = if path.is_empty() {
        format!("{scheme}://{host}")
    } else {
        format!("{scheme}://{host}/{path}")
    };
    Ok(Location::Rest { url, credentials })
}

/// Replaces the secrets in a repository string with `***`: the password of
/// a `user:password@host` part (everything up to the last `@` counts as user
/// information, so a password holding a `/` is hidden too, and a malformed
/// URL such as `http//user:pw@host` as well), and the values of
/// `key=value` options whose key names a secret (rclone connection strings
/// such as `:s3,secret_access_key=...:bucket`).
pub(crate) fn redact_userinfo(text: &str) -> String {
    let text = redact_secret_options(text);
    let Some(at) = text.rfind('@') else {
        return text;
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
        None => text.clone(),
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

fn percent_decode(text: &str) -> String {
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

    #[test]
    fn parses_like_restic() {
        assert_eq!(
            Location::parse("/srv/repo"),
            Ok(Location::Local("/srv/repo".into()))
        );
        assert_eq!(
            Location::parse("local:rel/repo"),
            Ok(Location::Local("rel/repo".into()))
        );
        assert_eq!(
            Location::parse("rest:http://u:p%40ss@127.0.0.1:8000/repo/"),
            Ok(Location::Rest {
                url: "http://127.0.0.1:8000/repo".into(),
                credentials: Some(("u".into(), "p@ss".into())),
            })
        );
        let s3 = Location::parse("s3:s3.amazonaws.com/bucket").expect("parses");
        assert_eq!(s3.backend(), "s3");
        assert!(Location::parse("rest:ftp://x").is_err());
        assert!(Location::parse("").is_err());
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
        assert!(!err.contains("secret"), "{err}");
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
        assert!(!malformed.contains("S1"), "{malformed}");
        let path = Location::parse("rst:http://alice:S3@h/r").expect("a path");
        assert!(!path.redacted().contains("S3"));
        let slash = Location::parse("rest:http://user:pa/ss-MARKER@127.0.0.1:1/repo")
            .expect_err("an @ in the path");
        assert!(!slash.contains("MARKER"), "{slash}");
    }
}
