//! XDG base directories, as the spec defines them (no crate needed for two
//! variables).

use std::path::PathBuf;

/// `$<var>/lockwarden`, else `$HOME/<fallback>/lockwarden`; `None` when
/// neither variable is set.
pub(crate) fn lockwarden_dir(var: &str, fallback: &str) -> Option<PathBuf> {
    let base = std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(fallback)))?;
    Some(base.join("lockwarden"))
}
