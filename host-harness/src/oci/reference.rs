//! `oci://HOST/REPOSITORY:TAG` and `oci://HOST/REPOSITORY@sha256:DIGEST`.

use std::fmt;
use std::net::IpAddr;

/// A policy's address in a registry: a tag, a digest, or both (the digest
/// wins).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OciReference {
    /// `host` or `host:port`.
    pub registry: String,
    /// `org/policy`.
    pub repository: String,
    /// A tag, if given.
    pub tag: Option<String>,
    /// `sha256:<64 hex>`, if pinned.
    pub digest: Option<String>,
}

/// The scheme every OCI policy address starts with.
pub const SCHEME: &str = "oci://";

/// The accepted form, shown with each [`ReferenceError`].
const FORM: &str =
    "use oci://HOST[:PORT]/REPOSITORY:TAG or oci://HOST[:PORT]/REPOSITORY@sha256:DIGEST";

/// Why a text is no [`OciReference`]; each message shows the text and, where
/// it helps, the accepted form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReferenceError {
    /// The text does not start with [`SCHEME`].
    #[error("`{text}` does not start with {SCHEME}; {FORM}")]
    NoScheme {
        /// The reference as given.
        text: String,
    },
    /// No `HOST/REPOSITORY` follows the scheme.
    #[error("`{text}` names no registry host and repository; {FORM}")]
    NoRepository {
        /// The reference as given.
        text: String,
    },
    /// Neither a tag nor a digest is given.
    #[error("`{text}` has neither a tag nor a digest; {FORM} (pin a digest for production)")]
    Unpinned {
        /// The reference as given.
        text: String,
    },
    /// The tag breaks the OCI grammar.
    #[error("`{tag}` in `{text}` is not a valid tag (letters, digits, `.`, `_`, `-`, at most 128)")]
    Tag {
        /// The tag.
        tag: String,
        /// The reference as given.
        text: String,
    },
    /// The repository name breaks the OCI grammar.
    #[error(
        "`{repository}` in `{text}` is not a valid repository name (lowercase letters, \
         digits, `.`, `_`, `-`, separated by `/`)"
    )]
    Repository {
        /// The repository name.
        repository: String,
        /// The reference as given.
        text: String,
    },
    /// The digest is not sha256.
    #[error("digest `{digest}` is not sha256:<64 hex digits>; only sha256 is supported")]
    DigestAlgorithm {
        /// The digest as given.
        digest: String,
    },
    /// The sha256 digest is not 64 lowercase hex digits.
    #[error("digest `{digest}` is not sha256:<64 lowercase hex digits>")]
    DigestHex {
        /// The digest as given.
        digest: String,
    },
}

impl OciReference {
    /// Parses `oci://HOST[:PORT]/REPOSITORY[:TAG][@sha256:DIGEST]`. The error
    /// says what is wrong and shows the accepted form.
    pub fn parse(text: &str) -> Result<OciReference, ReferenceError> {
        let text_owned = || text.to_owned();
        let rest = text
            .strip_prefix(SCHEME)
            .ok_or_else(|| ReferenceError::NoScheme { text: text_owned() })?;
        let (name, digest) = match rest.split_once('@') {
            Some((name, digest)) => (name, Some(parse_digest(digest)?)),
            None => (rest, None),
        };
        let (registry, path) = name
            .split_once('/')
            .filter(|(host, path)| !host.is_empty() && !path.is_empty())
            .ok_or_else(|| ReferenceError::NoRepository { text: text_owned() })?;
        // A colon after the last slash separates the tag.
        let (repository, tag) = match path.rsplit_once(':') {
            Some((repo, tag)) if !tag.contains('/') => (repo, Some(tag)),
            _ => (path, None),
        };
        if tag.is_none() && digest.is_none() {
            return Err(ReferenceError::Unpinned { text: text_owned() });
        }
        if let Some(tag) = tag {
            let valid = !tag.is_empty()
                && tag.len() <= 128
                && tag
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
                && !tag.starts_with(['.', '-']);
            if !valid {
                return Err(ReferenceError::Tag {
                    tag: tag.to_owned(),
                    text: text_owned(),
                });
            }
        }
        let repo_valid = repository.split('/').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
        });
        if !repo_valid {
            return Err(ReferenceError::Repository {
                repository: repository.to_owned(),
                text: text_owned(),
            });
        }
        Ok(OciReference {
            registry: registry.to_owned(),
            repository: repository.to_owned(),
            tag: tag.map(str::to_owned),
            digest,
        })
    }

    /// The same artifact, pinned to `digest`.
    pub fn pinned(&self, digest: &str) -> OciReference {
        OciReference {
            digest: Some(digest.to_owned()),
            ..self.clone()
        }
    }

    /// True when the registry is on this machine (127.0.0.0/8, ::1,
    /// localhost): the only place plain HTTP is allowed.
    pub fn is_loopback(&self) -> bool {
        let host = match self.registry.strip_prefix('[') {
            Some(bracketed) => bracketed.split(']').next().unwrap_or(""),
            None => self.registry.split(':').next().unwrap_or(""),
        };
        host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
    }

    /// The reference in the form oci-client parses (no scheme).
    pub(crate) fn to_client(&self) -> oci_client::Reference {
        let registry = self.registry.clone();
        let repository = self.repository.clone();
        match (&self.digest, &self.tag) {
            (Some(digest), Some(tag)) => oci_client::Reference::with_tag_and_digest(
                registry,
                repository,
                tag.clone(),
                digest.clone(),
            ),
            (Some(digest), None) => {
                oci_client::Reference::with_digest(registry, repository, digest.clone())
            }
            (None, tag) => oci_client::Reference::with_tag(
                registry,
                repository,
                tag.clone().unwrap_or_else(|| "latest".into()),
            ),
        }
    }
}

/// Checks `sha256:<64 lowercase hex>`.
fn parse_digest(text: &str) -> Result<String, ReferenceError> {
    let hex = text
        .strip_prefix("sha256:")
        .ok_or_else(|| ReferenceError::DigestAlgorithm {
            digest: text.to_owned(),
        })?;
    if hex.len() != 64
        || !hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(ReferenceError::DigestHex {
            digest: text.to_owned(),
        });
    }
    Ok(text.to_owned())
}

impl fmt::Display for OciReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SCHEME}{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn parses_tags_digests_and_ports() {
        let r = OciReference::parse("oci://127.0.0.1:5000/lockwarden/default:0.1.0").expect("ok");
        assert_eq!(r.registry, "127.0.0.1:5000");
        assert_eq!(r.repository, "lockwarden/default");
        assert_eq!(r.tag.as_deref(), Some("0.1.0"));
        assert!(r.is_loopback());
        let text = format!("oci://ghcr.io/org/policy@{DIGEST}");
        let r = OciReference::parse(&text).expect("ok");
        assert_eq!(r.digest.as_deref(), Some(DIGEST));
        assert!(r.tag.is_none() && !r.is_loopback());
        assert_eq!(r.to_string(), text);
        assert!(
            OciReference::parse("oci://[::1]:5000/p:t")
                .expect("ok")
                .is_loopback()
        );
        assert!(
            OciReference::parse("oci://localhost/p:t")
                .expect("ok")
                .is_loopback()
        );
    }

    #[test]
    fn refuses_what_it_cannot_pin_or_read() {
        for (text, says) in [
            ("ghcr.io/org/p:1", "does not start with oci://"),
            ("oci://ghcr.io/org/p", "neither a tag nor a digest"),
            ("oci://p:1", "no registry host"),
            ("oci://ghcr.io/org/p@sha512:ab", "only sha256"),
            ("oci://ghcr.io/org/p@sha256:abc", "64 lowercase hex"),
            ("oci://ghcr.io/Org/p:1", "not a valid repository"),
            ("oci://ghcr.io/org/p:bad tag", "not a valid tag"),
        ] {
            let error = OciReference::parse(text).expect_err(text).to_string();
            assert!(error.contains(says), "{text}: {error}");
        }
    }

    #[test]
    fn each_refusal_reads_as_before() {
        let form = "use oci://HOST[:PORT]/REPOSITORY:TAG or \
                    oci://HOST[:PORT]/REPOSITORY@sha256:DIGEST";
        for (text, message) in [
            (
                "ghcr.io/org/p:1",
                format!("`ghcr.io/org/p:1` does not start with oci://; {form}"),
            ),
            (
                "oci://p:1",
                format!("`oci://p:1` names no registry host and repository; {form}"),
            ),
            (
                "oci://ghcr.io/org/p",
                format!(
                    "`oci://ghcr.io/org/p` has neither a tag nor a digest; {form} \
                     (pin a digest for production)"
                ),
            ),
            (
                "oci://ghcr.io/org/p:-t",
                "`-t` in `oci://ghcr.io/org/p:-t` is not a valid tag (letters, digits, \
                 `.`, `_`, `-`, at most 128)"
                    .into(),
            ),
            (
                "oci://ghcr.io/Org/p:1",
                "`Org/p` in `oci://ghcr.io/Org/p:1` is not a valid repository name \
                 (lowercase letters, digits, `.`, `_`, `-`, separated by `/`)"
                    .into(),
            ),
            (
                "oci://ghcr.io/org/p@md5:ab",
                "digest `md5:ab` is not sha256:<64 hex digits>; only sha256 is supported".into(),
            ),
            (
                "oci://ghcr.io/org/p@sha256:AB",
                "digest `sha256:AB` is not sha256:<64 lowercase hex digits>".into(),
            ),
        ] {
            let error = OciReference::parse(text).expect_err(text);
            assert_eq!(error.to_string(), message, "{text}");
        }
    }
}
