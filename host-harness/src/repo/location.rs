//! Where a repository is, parsed the way restic parses `-r`, with credentials
//! kept out of anything printed. Which backend serves a location, and what
//! of it may be shown, is the registry's business
//! ([`super::backend::SCHEMES`], [`Scheme::redact`]); this module keeps the
//! string, and hides the password of a URL's `user:password@` for the
//! schemes that have one.

use std::time::Duration;

use super::Password;
pub use super::backend::location_text::LocationError;
use super::backend::{Backend, BackendError, Scheme, Target, Variables, scheme_of};

/// A repository location: its backend's scheme and the string that backend
/// parsed (which may hold credentials, so it is never shown as is).
#[derive(Clone)]
pub struct Location {
    scheme: &'static Scheme,
    text: String,
    given: String,
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
        let given = text.to_owned();
        let text = text.trim();
        if text.is_empty() {
            return Err(LocationError::Empty);
        }
        let scheme = scheme_of(text);
        Ok(Location {
            scheme,
            text: (scheme.parse)(text)?,
            given,
        })
    }

    /// The location exactly as it was given: what a restic that lockwarden
    /// starts is handed (`run`), and what a notification must never show.
    /// It may hold credentials: never print it.
    pub fn as_given(&self) -> &str {
        &self.given
    }

    /// The backend's name, as the contract's `repository.backend` has it.
    pub fn backend(&self) -> &'static str {
        self.scheme.name
    }

    /// Whether its backend removes and writes lock files
    /// ([`super::backend::Scheme::modifies`]).
    pub fn modifies(&self) -> bool {
        self.scheme.modifies
    }

    /// The location for display and logs: secrets replaced by `***`, as its
    /// scheme decides ([`Scheme::redact`]).
    pub fn redacted(&self) -> String {
        (self.scheme.redact)(&self.text)
    }

    /// Opens the backend that serves this location; each request or command
    /// it makes ends within `timeout`; the storage's variables are read
    /// from `variables`. A storage reached without verifying its TLS
    /// certificate (its [`crate::tls::Tls`] says so) is warned of at every
    /// opening.
    pub fn open(
        &self,
        password: &Password,
        timeout: Duration,
        variables: &Variables,
    ) -> Result<Box<dyn Backend>, BackendError> {
        let shown = self.redacted();
        if let crate::tls::Tls::Insecure { from } = variables.tls() {
            tracing::warn!(
                "TLS certificates are not verified for {} ({from}, allowed by [discover] \
                 allow_insecure_tls): whoever can intercept its traffic can answer for the \
                 storage, and have stale-looking locks removed",
                crate::text::escape(&shown)
            );
        }
        let backend = (self.scheme.open)(&Target {
            location: &self.text,
            shown: &shown,
            password,
            timeout,
            variables,
        })?;
        debug_assert_eq!(backend.capabilities().modify, self.scheme.modifies);
        Ok(backend)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::repo::backend::location_text::redact_userinfo;

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
        let no_scheme =
            Location::parse("rest:user:S7@127.0.0.1:8000/repo").expect_err("no http://");
        assert!(!no_scheme.to_string().contains("S7"), "{no_scheme}");
        let slash = Location::parse("rest:http://user:pa/ss-MARKER@127.0.0.1:1/repo")
            .expect_err("an @ in the path");
        assert!(!slash.to_string().contains("MARKER"), "{slash}");
    }

    /// A location is shown as its scheme says: an rclone connection string
    /// by allowlist, every option value hidden (the cases are in
    /// `backend/rclone/remote/tests.rs`).
    #[test]
    fn each_scheme_redacts_its_own_locations() {
        let rclone =
            Location::parse("rclone::s3,region=x,secret_access_key=S4:bucket/r").expect("ok");
        assert_eq!(
            rclone.redacted(),
            "rclone::s3,region=***,secret_access_key=***:bucket/r"
        );
        assert!(!format!("{rclone:?}").contains("S4"));
        let headers =
            Location::parse("rclone::http,headers=\"Authorization,Bearer S5\":p").expect("ok");
        assert_eq!(headers.redacted(), "rclone::http,headers=***:p");
        let rest = Location::parse("rest:http://u:S6@h/r,key=v").expect("ok");
        assert_eq!(rest.redacted(), "rest:http://u:***@h/r,key=v");
    }
}
