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
/// whose key names a secret get `***` for a value. A value may be quoted
/// as rclone quotes it (`key='a,b:c'`, `""` or `''` for a quote inside):
/// the quoted value is hidden whole, its commas and colons included.
fn redact_secret_options(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let end = option_end(rest);
        let (option, after) = rest.split_at(end);
        out.push_str(&redact_option(option));
        match after.strip_prefix(',') {
            Some(next) => {
                out.push(',');
                rest = next;
            }
            None => return out,
        }
    }
}

/// Words in an option's key that make its value a secret: passwords,
/// keys, tokens, an Azure SAS (`sas_url`), a GCS service account's key
/// (`service_account_credentials`), a Storj access grant, an Azure
/// connection string (which holds the account key).
const SECRET_KEYS: [&str; 8] = [
    "secret",
    "pass",
    "token",
    "key",
    "auth",
    "sas",
    "credential",
    "grant",
];

/// Whether an option's key names a secret ([`SECRET_KEYS`], or an Azure
/// `connection_string`).
fn is_secret_key(key: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    SECRET_KEYS.iter().any(|s| lower.contains(s)) || lower.contains("connection_string")
}

/// `option` (`key=value`, or anything else) with its value hidden when the
/// key names a secret; the value ends at the first `:` after it (where a
/// remote's path begins), outside its quotes.
fn redact_option(option: &str) -> String {
    let Some((key, value)) = option.split_once('=') else {
        return option.to_owned();
    };
    if !is_secret_key(key) {
        return option.to_owned();
    }
    let unquoted_from = quoted_len(value).unwrap_or(0);
    let rest = value[unquoted_from..]
        .find(':')
        .map_or("", |i| &value[unquoted_from + i..]);
    format!("{key}=***{rest}")
}

/// Where the option that starts `text` ends: the first `,` after a secret
/// option's quoted value (quotes hide commas only there, so that no quote
/// elsewhere can hide a secret option that follows), else the first `,`,
/// else the end.
fn option_end(text: &str) -> usize {
    let next_comma = |from: usize| text[from..].find(',').map_or(text.len(), |i| from + i);
    match text.split_once('=') {
        Some((key, value)) if !key.contains(',') && is_secret_key(key) => {
            next_comma(key.len() + 1 + quoted_len(value).unwrap_or(0))
        }
        _ => next_comma(0),
    }
}

/// The length of the quoted string (quotes included) that starts `value`,
/// if it starts with `'` or `"` and the quote is closed (a doubled quote
/// inside is a quote character).
fn quoted_len(value: &str) -> Option<usize> {
    let quote = value.chars().next().filter(|c| matches!(c, '\'' | '"'))?;
    let mut chars = value.char_indices().skip(1).peekable();
    while let Some((i, c)) = chars.next() {
        if c == quote {
            if chars.peek().is_some_and(|&(_, next)| next == quote) {
                chars.next();
                continue;
            }
            return Some(i + c.len_utf8());
        }
    }
    None
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

    /// rclone connection strings hold credentials under other names than
    /// `secret`/`pass`/`token`/`key`/`auth`, and quoted values whose commas
    /// and colons are part of the secret.
    #[test]
    fn rclone_credentials_in_quotes_or_other_names_never_show() {
        for (text, shown) in [
            (
                "rclone::azureblob,account=a,sas_url='https://a.blob.core.windows.net/c?sv=1&sig=S1':c/r",
                "rclone::azureblob,account=a,sas_url=***:c/r",
            ),
            (
                "rclone::gcs,service_account_credentials='{\"private_key\":\"S2\"}':b/r",
                "rclone::gcs,service_account_credentials=***:b/r",
            ),
            (
                "rclone::s3,secret_access_key='S3a,S3b:S3c',region=x:b/r",
                "rclone::s3,secret_access_key=***,region=x:b/r",
            ),
            (
                "rclone::sftp,user=o'neil,pass=\"S4\"\"S4\":r",
                "rclone::sftp,user=o'neil,pass=***:r",
            ),
            (
                "rclone::storj,access_grant=S5:b/r",
                "rclone::storj,access_grant=***:b/r",
            ),
            (
                "rclone::azurefiles,connection_string='AccountName=a;AccountKey=S6':s/r",
                "rclone::azurefiles,connection_string=***:s/r",
            ),
            (
                "rclone::s3,pass='unclosed,region=S7:b",
                "rclone::s3,pass=***,region=S7:b",
            ),
        ] {
            assert_eq!(redact_userinfo(text), shown, "{text}");
        }
    }
}
