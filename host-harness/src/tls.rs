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
