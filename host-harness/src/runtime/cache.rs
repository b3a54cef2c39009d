//! Precompiled policies, cached so that a cached load costs a file read rather
//! than a compilation.
//!
//! Artifacts are native code: loading one is as dangerous as running a binary.
//! So they are only ever read from this cache's own directory (created 0700),
//! only files owned by this user and writable by no one else are loaded, and
//! every file is written to a temporary name and renamed into place, so a
//! reader never sees half a file. A file that fails any check is compiled
//! again and replaced.

use std::fs;
use std::hash::{Hash, Hasher};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// A directory of precompiled components, keyed by the component's SHA-256
/// and the engine's compatibility hash.
#[derive(Debug, Clone)]
pub struct ArtifactCache {
    dir: PathBuf,
}

impl ArtifactCache {
    /// The default location: `$XDG_CACHE_HOME/lockwarden`, else
    /// `~/.cache/lockwarden`. `None` when neither variable is set.
    pub fn default_dir() -> Option<PathBuf> {
        crate::xdg::lockwarden_dir("XDG_CACHE_HOME", ".cache")
    }

    /// A cache in `dir` (created on first store).
    pub fn new(dir: PathBuf) -> Self {
        ArtifactCache { dir }
    }

    /// The cache's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file an artifact for `component` would be stored in.
    pub fn path_for(&self, engine: &Engine, component: &[u8]) -> PathBuf {
        let digest = hex::encode(Sha256::digest(component));
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        self.dir
            .join(format!("{digest}-{:016x}.cwasm", hasher.finish()))
    }

    /// Loads the cached artifact for `component`, or `None` when there is
    /// none or it fails a check.
    pub fn load(&self, engine: &Engine, component: &[u8]) -> Option<Component> {
        // Nothing cached yet.
        if !self.dir.is_dir() {
            return None;
        }
        // In a directory others can write, a trusted file could be swapped
        // between the check below and the load: then compile afresh.
        if let Err(why) = crate::files::check_private_dir(&self.dir) {
            tracing::warn!(
                "not using the policy cache {}: {}",
                crate::text::escape(&self.dir.display().to_string()),
                why
            );
            return None;
        }
        let path = self.path_for(engine, component);
        let meta = fs::symlink_metadata(&path).ok()?;
        let trusted = meta.is_file() && meta.uid() == current_uid() && meta.mode() & 0o022 == 0;
        if !trusted {
            return None;
        }
        #[allow(unsafe_code)]
        // SAFETY: the file was written by `store` below (owned by this user,
        // writable only by them, renamed into place whole) from the output of
        // `Engine::precompile_component`; its name carries the engine's
        // compatibility hash, and wasmtime checks its header too.
        unsafe {
            Component::deserialize_file(engine, &path).ok()
        }
    }

    /// Stores `artifact` (from `Engine::precompile_component`) for
    /// `component`, atomically.
    pub fn store(&self, engine: &Engine, component: &[u8], artifact: &[u8]) -> std::io::Result<()> {
        crate::files::create_private_dir(&self.dir)?;
        crate::files::check_private_dir(&self.dir).map_err(std::io::Error::other)?;
        crate::files::write_atomically(&self.path_for(engine, component), artifact)
    }
}

fn current_uid() -> u32 {
    // The owner of a file this process creates is its effective uid; reading
    // it back from the cache directory avoids an unsafe libc call.
    fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(u32::MAX)
}
