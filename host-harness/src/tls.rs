//! The one TLS crypto provider: rustls over ring, for every HTTPS client in
//! the process (object_store's and oci-client's reqwest; ureq names ring
//! itself). reqwest is built without a provider of its own
//! (`rustls-no-provider`, to keep aws-lc-rs out of the binary), so one must be
//! installed before any of its clients is built.

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
/// its caller asks first. The error says what to do.
pub fn check_roots() -> Result<(), String> {
    install_provider();
    reqwest::Client::builder().build().map(drop).map_err(|e| {
        let cause = std::error::Error::source(&e).map_or_else(|| e.to_string(), |s| s.to_string());
        format!(
            "cannot set up TLS: {}; install CA certificates, or point SSL_CERT_FILE at a \
             bundle of them",
            crate::text::escape(&cause)
        )
    })
}
