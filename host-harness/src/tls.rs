//! The one TLS crypto provider: rustls over ring, for every HTTPS client in
//! the process (object_store's and oci-client's reqwest; ureq names ring
//! itself). reqwest is built without a provider of its own
//! (`rustls-no-provider`, to keep aws-lc-rs out of the binary), so one must be
//! installed before any of its clients is built.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::CertificateDer;

use crate::limits;

/// Installs ring as the process's rustls provider, once; a later call, or a
/// provider installed first by someone else, changes nothing.
pub fn install_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // Err only when a provider is already installed: that one serves.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// The advice every [`RootsError::Setup`] and [`RootsError::Client`] ends with.
const INSTALL: &str = "install CA certificates, or point SSL_CERT_FILE at a bundle of them";

/// Why the trusted roots cannot be read, or no HTTPS client made.
#[derive(Debug, thiserror::Error)]
pub enum RootsError {
    /// `SSL_CERT_FILE` or `SSL_CERT_DIR` is refused ([`check_roots`]).
    #[error("cannot set up TLS: {0}; {INSTALL}")]
    Setup(CertEnvError),
    /// The TLS stack made no client (no root found, most often).
    #[error("cannot set up TLS: {}; {INSTALL}", client_cause(.0))]
    Client(reqwest::Error),
    /// `SSL_CERT_FILE` or `SSL_CERT_DIR` is refused ([`system_roots`]).
    #[error("cannot read the system's CA certificates: {0}")]
    System(CertEnvError),
}

/// What under reqwest's error made the client fail, escaped.
fn client_cause(e: &reqwest::Error) -> String {
    let cause = std::error::Error::source(e).map_or_else(|| e.to_string(), |s| s.to_string());
    crate::text::escape(&cause).into_owned()
}

/// Why `SSL_CERT_FILE` or `SSL_CERT_DIR` is refused; paths are shown escaped.
#[derive(Debug, thiserror::Error)]
pub enum CertEnvError {
    /// `SSL_CERT_FILE` names a file that is refused.
    #[error("SSL_CERT_FILE {} {why}", shown(.path))]
    File {
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong with it.
        why: CertFileError,
    },
    /// A directory of `SSL_CERT_DIR` holds too many entries.
    #[error("SSL_CERT_DIR {} holds more than {} entries", shown(.dir), limits::CERT_DIR_ENTRIES)]
    Crowded {
        /// The directory.
        dir: std::path::PathBuf,
    },
    /// A file in a directory of `SSL_CERT_DIR` is refused.
    #[error("SSL_CERT_DIR's {} {why}", shown(.path))]
    DirFile {
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong with it.
        why: CertFileError,
    },
}

/// Why one file of trusted roots is refused, as the end of a sentence naming it.
#[derive(Debug, thiserror::Error)]
pub enum CertFileError {
    /// Its metadata cannot be read.
    #[error("cannot be read: {0}")]
    Unreadable(std::io::Error),
    /// It is no regular file (a FIFO, a device).
    #[error("is not a regular file")]
    NotRegular,
    /// It is larger than [`limits::CERT_FILE`].
    #[error("is larger than {} bytes", limits::CERT_FILE)]
    TooLarge,
}

/// A path as messages show it: control characters escaped.
fn shown(path: &Path) -> String {
    crate::text::escape(&path.display().to_string()).into_owned()
}

/// Why a repository's CA bundle is refused. Each message names the field it
/// came from and the fault, never the content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("its {from} {fault}")]
pub struct CaError {
    /// The field the bundle came from.
    pub from: String,
    /// What is wrong with it.
    pub fault: CaFault,
}

/// What is wrong with a repository's CA bundle.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CaFault {
    /// Larger than [`limits::REPOSITORY_CA`].
    #[error(
        "is larger than the {} bytes lockwarden takes of a CA bundle",
        limits::REPOSITORY_CA
    )]
    TooLarge,
    /// A PEM block is damaged.
    #[error("is not a PEM bundle of certificates")]
    NotPem,
    /// More than [`limits::REPOSITORY_CA_CERTS`] certificates.
    #[error("holds more than {} certificates", limits::REPOSITORY_CA_CERTS)]
    TooMany,
    /// Certificate number `.0` (from 1) does not parse.
    #[error("holds a certificate (number {0}) that does not parse")]
    BadCertificate(usize),
    /// No certificate at all.
    #[error("holds no PEM certificate (-----BEGIN CERTIFICATE-----)")]
    Empty,
}

/// Whether an HTTPS client can be made here. It cannot when no trusted root
/// certificate is found (an image without a CA bundle, `SSL_CERT_FILE`
/// naming an empty file); oci-client then panics instead of saying so, so
/// its callers ask first, and so do the object stores'. The error says what
/// to do.
pub fn check_roots() -> Result<(), RootsError> {
    check_cert_env().map_err(RootsError::Setup)?;
    install_provider();
    reqwest::Client::builder()
        .build()
        .map(drop)
        .map_err(RootsError::Client)
}

/// `SSL_CERT_FILE` and the files in `SSL_CERT_DIR`, which the TLS stack
/// reads whole and without a deadline: each must be a regular file of at
/// most [`limits::CERT_FILE`] bytes (in the directory, subdirectories and
/// dangling links are passed over). A FIFO there would hang every
/// connection; an endless file would fill memory.
fn check_cert_env() -> Result<(), CertEnvError> {
    if let Some(file) = std::env::var_os("SSL_CERT_FILE") {
        let path = std::path::PathBuf::from(file);
        if let Err(why) = check_cert_file(&path) {
            return Err(CertEnvError::File { path, why });
        }
    }
    if let Some(dirs) = std::env::var_os("SSL_CERT_DIR") {
        for dir in std::env::split_paths(&dirs) {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for (n, entry) in entries.flatten().enumerate() {
                if n >= limits::CERT_DIR_ENTRIES {
                    return Err(CertEnvError::Crowded { dir });
                }
                let path = entry.path();
                // Subdirectories and dangling links are skipped, as the
                // TLS stack skips them.
                match std::fs::metadata(&path) {
                    Ok(meta) if meta.is_dir() => continue,
                    Err(_) => continue,
                    Ok(_) => {
                        if let Err(why) = check_cert_file(&path) {
                            return Err(CertEnvError::DirFile { path, why });
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// A regular file (after symlinks) of at most [`limits::CERT_FILE`] bytes;
/// looked at, not opened.
fn check_cert_file(path: &Path) -> Result<(), CertFileError> {
    let meta = std::fs::metadata(path).map_err(CertFileError::Unreadable)?;
    if !meta.is_file() {
        return Err(CertFileError::NotRegular);
    }
    if meta.len() > limits::CERT_FILE {
        return Err(CertFileError::TooLarge);
    }
    Ok(())
}

/// How one repository's storage is reached over TLS, beyond the roots every
/// connection of lockwarden trusts: a CA bundle of the repository's own,
/// added to those roots for it alone, or no certificate verification at
/// all. A discovered repository's comes from its operator's object
/// (`docs/kubernetes.md`); every other repository's is [`Tls::Default`]. It
/// travels with the repository's storage variables
/// ([`crate::repo::backend::Variables::tls`]), where every backend reads
/// how to reach its storage: the object stores' HTTP client and the REST
/// backend's.
#[derive(Clone, Default, PartialEq, Eq)]
pub enum Tls {
    /// The roots lockwarden trusts for every repository: the system's for
    /// the object stores, the built-in (Mozilla's) for the REST backend.
    #[default]
    Default,
    /// The system's roots and a CA bundle of the repository's own.
    Roots(Arc<Roots>),
    /// No certificate verification: the repository's object says so
    /// (`from` names the field) and watch.toml's `[discover]
    /// allow_insecure_tls` allows it.
    Insecure {
        /// The field that asked for it, for messages.
        from: String,
    },
}

/// A repository's own CA bundle: its certificates, parsed, and where it
/// came from (a field of an object, never its content).
pub struct Roots {
    certs: Vec<CertificateDer<'static>>,
    digest: [u8; 32],
    from: String,
}

impl PartialEq for Roots {
    fn eq(&self, other: &Roots) -> bool {
        self.digest == other.digest && self.from == other.from
    }
}

impl Eq for Roots {}

impl Roots {
    /// Its certificates (DER).
    pub fn certs(&self) -> &[CertificateDer<'static>] {
        &self.certs
    }

    /// The SHA-256 of its certificates: what tells two bundles apart (the
    /// object stores share one HTTP client per bundle).
    pub fn digest(&self) -> [u8; 32] {
        self.digest
    }

    /// Where it came from (`spec.restic.customCA (key ca.crt of Secret
    /// app/minio-ca)`).
    pub fn from(&self) -> &str {
        &self.from
    }
}

impl Tls {
    /// The system's roots and the CA bundle `pem` (PEM), which `from` names
    /// (a field, for messages): at most [`limits::REPOSITORY_CA`] bytes and
    /// [`limits::REPOSITORY_CA_CERTS`] certificates, each of which must
    /// parse, at least one. The error names `from` and the fault, never the
    /// content.
    pub fn with_ca(pem: &[u8], from: String) -> Result<Tls, CaError> {
        use rustls::pki_types::pem::PemObject as _;
        let bad = |fault: CaFault| CaError {
            from: from.clone(),
            fault,
        };
        if pem.len() as u64 > limits::REPOSITORY_CA {
            return Err(bad(CaFault::TooLarge));
        }
        let mut certs = Vec::new();
        for item in CertificateDer::pem_slice_iter(pem) {
            let cert = item.map_err(|_| bad(CaFault::NotPem))?;
            if certs.len() == limits::REPOSITORY_CA_CERTS {
                return Err(bad(CaFault::TooMany));
            }
            // What every verifier does with a root: take its subject, key
            // and constraints from it.
            rustls::RootCertStore::empty()
                .add(cert.clone())
                .map_err(|_| bad(CaFault::BadCertificate(certs.len() + 1)))?;
            certs.push(cert);
        }
        if certs.is_empty() {
            return Err(bad(CaFault::Empty));
        }
        let digest = {
            use sha2::{Digest, Sha256};
            let mut digest = Sha256::new();
            for cert in &certs {
                digest.update((cert.len() as u64).to_le_bytes());
                digest.update(cert.as_ref());
            }
            digest.finalize().into()
        };
        Ok(Tls::Roots(Arc::new(Roots {
            certs,
            digest,
            from,
        })))
    }

    /// Whether certificates go unverified.
    pub fn is_insecure(&self) -> bool {
        matches!(self, Tls::Insecure { .. })
    }

    /// What it is, for a reader (`lockwarden discover` shows it): `default
    /// roots`, `CA from <field>`, or `insecure (<field>, allowed by
    /// allow_insecure_tls)`.
    pub fn mode(&self) -> String {
        match self {
            Tls::Default => "default roots".to_owned(),
            Tls::Roots(roots) => format!("CA from {}", roots.from),
            Tls::Insecure { from } => {
                format!("insecure ({from}, allowed by allow_insecure_tls)")
            }
        }
    }

    /// What a certificate was checked against, for the message of a
    /// certificate refused: `default` (the roots the backend trusts for
    /// every repository), or the system's roots and the repository's CA.
    pub fn trusted(&self, default: &str) -> String {
        match self {
            Tls::Roots(roots) => format!(
                "it was checked against the system's roots and the CA from {}",
                roots.from
            ),
            _ => {
                format!("it was checked against {default}; no CA of the repository's own is named")
            }
        }
    }

    /// What tells it apart from another, as bytes (a discovered repository's
    /// identity includes it).
    pub fn identity(&self) -> Vec<u8> {
        match self {
            Tls::Default => b"default".to_vec(),
            Tls::Roots(roots) => [b"ca:".as_slice(), &roots.digest].concat(),
            Tls::Insecure { .. } => b"insecure".to_vec(),
        }
    }
}

/// Names and digests only.
impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Tls::Default => f.write_str("default roots"),
            Tls::Roots(roots) => write!(
                f,
                "CA sha256:{} from {}",
                hex::encode(roots.digest),
                roots.from
            ),
            Tls::Insecure { from } => write!(f, "insecure from {from}"),
        }
    }
}

/// The system's trusted roots, as reqwest's verifier reads them here
/// (`SSL_CERT_FILE`, `SSL_CERT_DIR`, else the system's bundle), each file
/// bounded first ([`check_cert_env`]); read once. What the REST backend
/// trusts besides a repository's own CA.
pub fn system_roots() -> Result<Arc<Vec<CertificateDer<'static>>>, RootsError> {
    static ROOTS: std::sync::OnceLock<Arc<Vec<CertificateDer<'static>>>> =
        std::sync::OnceLock::new();
    if let Some(roots) = ROOTS.get() {
        return Ok(roots.clone());
    }
    check_cert_env().map_err(RootsError::System)?;
    let found = rustls_native_certs::load_native_certs();
    Ok(ROOTS.get_or_init(|| Arc::new(found.certs)).clone())
}

/// What made a TLS handshake fail, when `e` (or an error under it) is
/// rustls' refusal, in words of our own: the server's certificate's fault,
/// or the handshake's. `None` when it is no TLS failure.
pub fn handshake_failure(e: &(dyn std::error::Error + 'static)) -> Option<&'static str> {
    let mut next = Some(e);
    // A chain is a few errors long; a bound all the same.
    for _ in 0..64 {
        let err = next?;
        if let Some(tls) = err.downcast_ref::<rustls::Error>() {
            return Some(described(tls));
        }
        // An I/O error's `source` skips the error it wraps (the HTTP stacks
        // wrap rustls' error in one, and that in another): that one is next.
        next = match err
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref)
        {
            Some(wrapped) => Some(wrapped as &(dyn std::error::Error + 'static)),
            None => err.source(),
        };
    }
    None
}

/// [`handshake_failure`]'s words for `e`.
pub fn described(e: &rustls::Error) -> &'static str {
    use rustls::CertificateError as Cert;
    let rustls::Error::InvalidCertificate(cert) = e else {
        return "the TLS handshake failed";
    };
    match cert {
        Cert::UnknownIssuer => "the server's certificate is not signed by a CA lockwarden trusts",
        Cert::Expired | Cert::ExpiredContext { .. } => "the server's certificate has expired",
        Cert::NotValidYet | Cert::NotValidYetContext { .. } => {
            "the server's certificate is not valid yet"
        }
        Cert::NotValidForName | Cert::NotValidForNameContext { .. } => {
            "the server's certificate is not for the host lockwarden reached"
        }
        Cert::Revoked => "the server's certificate is revoked",
        Cert::BadEncoding => "the server's certificate does not parse",
        Cert::BadSignature => "the server's certificate has a bad signature",
        _ => "the server's certificate was refused",
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A CA certificate (P-256, self-signed, valid for a century) for the
    /// tests of anything that takes a CA bundle.
    pub(crate) const TEST_CA: &str = "\
-----BEGIN CERTIFICATE-----\n\
MIIBoTCCAUegAwIBAgIUB/eQYugjzVH9iO6kBlj2NRvTpzcwCgYIKoZIzj0EAwIw\n\
HTEbMBkGA1UEAwwSbG9ja3dhcmRlbiB0ZXN0IENBMCAXDTI2MTIwNTE0MDEzN1oY\n\
DzIxMjYxMTExMTQwMTM3WjAdMRswGQYDVQQDDBJsb2Nrd2FyZGVuIHRlc3QgQ0Ew\n\
WTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAARRSBCVtrrlEXQkbK1KWybaI1RruNfX\n\
SAd3pyusmTryPw/UbDsw4J/JT5Ak8phS/ryToz9ga4wt86wTZSZQPZ4ho2MwYTAd\n\
BgNVHQ4EFgQUaWzcGd9rn8KJENp8ZRRXng/0YBEwHwYDVR0jBBgwFoAUaWzcGd9r\n\
n8KJENp8ZRRXng/0YBEwDwYDVR0TAQH/BAUwAwEB/zAOBgNVHQ8BAf8EBAMCAQYw\n\
CgYIKoZIzj0EAwIDSAAwRQIgYTSRtrp9+U6Pv+5WPAPR410Ut6cUuSrz98KedD6O\n\
vsMCIQCl8gVjXshpyRHMzPSxR0oHd7f7LgYS6afjoOK93h0W1A==\n\
-----END CERTIFICATE-----\n\
";

    fn with_ca(pem: &[u8]) -> Result<Tls, CaError> {
        Tls::with_ca(pem, "spec.x (key ca.crt of Secret app/ca)".into())
    }

    #[test]
    fn a_ca_bundle_is_parsed_bounded_and_named_never_quoted() {
        let Ok(Tls::Roots(one)) = with_ca(TEST_CA.as_bytes()) else {
            panic!("a CA parses")
        };
        assert_eq!(one.certs().len(), 1);
        assert_eq!(one.from(), "spec.x (key ca.crt of Secret app/ca)");
        // Text around the certificates changes nothing.
        let spaced = format!("# the storage's CA\n\n{TEST_CA}\n\n");
        assert_eq!(with_ca(spaced.as_bytes()), with_ca(TEST_CA.as_bytes()));
        let Ok(Tls::Roots(two)) = with_ca(format!("{TEST_CA}{TEST_CA}").as_bytes()) else {
            panic!("a bundle parses")
        };
        assert_eq!(two.certs().len(), 2);
        assert_ne!(one.digest(), two.digest());

        let not_a_cert = "-----BEGIN CERTIFICATE-----\nc2VjcmV0LXZhbHVlLW5vdC1hLWNlcnQ=\n\
                          -----END CERTIFICATE-----\n";
        let key_only = "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LXZhbHVl\n-----END PRIVATE KEY-----\n";
        let cases: [(&[u8], &str); 5] = [
            (b"", "holds no PEM certificate"),
            (b"secret-value, no PEM at all", "holds no PEM certificate"),
            (key_only.as_bytes(), "holds no PEM certificate"),
            (not_a_cert.as_bytes(), "(number 1) that does not parse"),
            (
                b"-----BEGIN CERTIFICATE-----\n%%secret-value%%\n-----END CERTIFICATE-----\n",
                "is not a PEM bundle",
            ),
        ];
        for (pem, fault) in cases {
            let why = with_ca(pem).expect_err(fault).to_string();
            assert!(
                why.starts_with("its spec.x (key ca.crt of Secret app/ca) "),
                "{why}"
            );
            assert!(why.contains(fault), "{why}");
            assert!(!why.contains("secret-value"), "{why}");
        }
        let large = TEST_CA.repeat(limits::REPOSITORY_CA as usize / TEST_CA.len() + 1);
        let why = with_ca(large.as_bytes())
            .expect_err("too large")
            .to_string();
        assert!(why.contains("larger than"), "{why}");
    }

    #[test]
    fn the_mode_and_the_trust_say_where_a_ca_came_from() {
        let ca = with_ca(TEST_CA.as_bytes()).expect("parses");
        let insecure = Tls::Insecure {
            from: "spec.backend.s3.insecureTLS".into(),
        };
        assert_eq!(Tls::Default.mode(), "default roots");
        assert_eq!(ca.mode(), "CA from spec.x (key ca.crt of Secret app/ca)");
        assert_eq!(
            insecure.mode(),
            "insecure (spec.backend.s3.insecureTLS, allowed by allow_insecure_tls)"
        );
        assert!(
            Tls::Default
                .trusted("the system's roots")
                .contains("no CA of the repository's own"),
        );
        assert!(ca.trusted("x").contains("and the CA from spec.x"));
        let identities = [Tls::Default.identity(), ca.identity(), insecure.identity()];
        assert!(identities[0] != identities[1] && identities[1] != identities[2]);
        assert!(format!("{ca:?}").contains("sha256:"), "{ca:?}");
        assert!(insecure.is_insecure() && !ca.is_insecure());
    }

    /// An error that wraps another, as the HTTP stacks' do.
    #[derive(Debug)]
    struct Wrapped(std::io::Error);

    impl std::fmt::Display for Wrapped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("client error (Connect)")
        }
    }

    impl std::error::Error for Wrapped {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_refused_certificate_is_said_under_the_errors_that_wrap_it() {
        use rustls::CertificateError as Cert;
        let wrapped =
            |e: rustls::Error| Wrapped(std::io::Error::new(std::io::ErrorKind::InvalidData, e));
        let cases = [
            (
                rustls::Error::InvalidCertificate(Cert::UnknownIssuer),
                "not signed by a CA lockwarden trusts",
            ),
            (
                rustls::Error::InvalidCertificate(Cert::Expired),
                "has expired",
            ),
            (
                rustls::Error::InvalidCertificate(Cert::NotValidForName),
                "not for the host",
            ),
            (
                rustls::Error::AlertReceived(rustls::AlertDescription::HandshakeFailure),
                "the TLS handshake failed",
            ),
        ];
        for (e, words) in cases {
            let said = handshake_failure(&wrapped(e.clone())).expect("a TLS failure");
            assert!(said.contains(words), "{said}");
            // As hyper-rustls hands tokio-rustls' error on: wrapped twice.
            let inner = std::io::Error::new(std::io::ErrorKind::InvalidData, e);
            let twice = Wrapped(std::io::Error::other(inner));
            assert_eq!(handshake_failure(&twice), Some(said));
        }
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(handshake_failure(&Wrapped(refused)), None);
    }
}
