//! The one TLS crypto provider: rustls over ring, for every HTTPS client in
//! the process (object_store's and oci-client's reqwest; ureq names ring
//! itself). reqwest is built without a provider of its own
//! (`rustls-no-provider`, to keep aws-lc-rs out of the binary), so one must be
//! installed before any of its clients is built.

use std::path::Path;

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

/// Whether an HTTPS client can be made here. It cannot when no trusted root
/// certificate is found (an image without a CA bundle, `SSL_CERT_FILE`
/// naming an empty file); oci-client then panics instead of saying so, so
/// its callers ask first, and so do the object stores'. The error says what
/// to do.
pub fn check_roots() -> Result<(), String> {
    let fail = |why: String| {
        format!(
            "cannot set up TLS: {why}; install CA certificates, or point SSL_CERT_FILE at a \
             bundle of them"
        )
    };
    check_cert_env().map_err(fail)?;
    install_provider();
    reqwest::Client::builder().build().map(drop).map_err(|e| {
        let cause = std::error::Error::source(&e).map_or_else(|| e.to_string(), |s| s.to_string());
        fail(crate::text::escape(&cause).into_owned())
    })
}

/// `SSL_CERT_FILE` and the files in `SSL_CERT_DIR`, which the TLS stack
/// reads whole and without a deadline: each must be a regular file of at
/// most [`limits::CERT_FILE`] bytes (in the directory, subdirectories and
/// dangling links are passed over). A FIFO there would hang every
/// connection; an endless file would fill memory.
fn check_cert_env() -> Result<(), String> {
    let shown = |path: &Path| crate::text::escape(&path.display().to_string()).into_owned();
    if let Some(file) = std::env::var_os("SSL_CERT_FILE") {
        let file = Path::new(&file);
        check_cert_file(file).map_err(|why| format!("SSL_CERT_FILE {} {why}", shown(file)))?;
    }
    if let Some(dirs) = std::env::var_os("SSL_CERT_DIR") {
        for dir in std::env::split_paths(&dirs) {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for (n, entry) in entries.flatten().enumerate() {
                if n >= limits::CERT_DIR_ENTRIES {
                    return Err(format!(
                        "SSL_CERT_DIR {} holds more than {} entries",
                        shown(&dir),
                        limits::CERT_DIR_ENTRIES
                    ));
                }
                let path = entry.path();
                // Subdirectories and dangling links are skipped, as the
                // TLS stack skips them.
                match std::fs::metadata(&path) {
                    Ok(meta) if meta.is_dir() => continue,
                    Err(_) => continue,
                    Ok(_) => check_cert_file(&path)
                        .map_err(|why| format!("SSL_CERT_DIR's {} {why}", shown(&path)))?,
                }
            }
        }
    }
    Ok(())
}

/// A regular file (after symlinks) of at most [`limits::CERT_FILE`] bytes;
/// looked at, not opened.
fn check_cert_file(path: &Path) -> Result<(), String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot be read: {e}"))?;
    if !meta.is_file() {
        return Err("is not a regular file".into());
    }
    if meta.len() > limits::CERT_FILE {
        return Err(format!("is larger than {} bytes", limits::CERT_FILE));
    }
    Ok(())
}
