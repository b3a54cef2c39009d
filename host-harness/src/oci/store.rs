//! Content-addressed storage of pulled manifests and layers: one file per
//! digest, checked against that digest every time it is read, so a damaged or
//! altered file is fetched again rather than run.

use std::path::PathBuf;

use sha2::{Digest, Sha256};

/// `sha256:<hex>` of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// A directory of blobs named by digest.
#[derive(Debug, Clone)]
pub(crate) struct BlobStore {
    dir: PathBuf,
}

impl BlobStore {
    /// Blobs under `dir` (created 0700 on first store).
    pub(crate) fn new(dir: PathBuf) -> Self {
        BlobStore { dir }
    }

    fn path(&self, digest: &str) -> PathBuf {
        self.dir.join(digest.replace(':', "-"))
    }

    /// The blob with this digest, if stored and intact.
    pub(crate) fn get(&self, digest: &str) -> Option<Vec<u8>> {
        let bytes =
            crate::files::read_regular_file(&self.path(digest), crate::limits::POLICY).ok()?;
        (sha256_digest(&bytes) == digest).then_some(bytes)
    }

    /// Stores a blob whose digest the caller has checked.
    pub(crate) fn put(&self, digest: &str, bytes: &[u8]) -> std::io::Result<()> {
        crate::files::create_private_dir(&self.dir)?;
        crate::files::write_atomically(&self.path(digest), bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serves_only_intact_blobs() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = BlobStore::new(dir.path().join("oci"));
        let digest = sha256_digest(b"component");
        assert_eq!(store.get(&digest), None);
        store.put(&digest, b"component").expect("store");
        assert_eq!(store.get(&digest).as_deref(), Some(&b"component"[..]));
        std::fs::write(store.path(&digest), b"tampered").expect("tamper");
        assert_eq!(store.get(&digest), None);
    }
}
