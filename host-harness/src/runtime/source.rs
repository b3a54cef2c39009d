//! Where a policy comes from: the built-in default, a file, or an OCI
//! registry.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use super::{PluginError, Policy, Runtime};
use crate::files::{ReadError, read_regular_file};
use crate::limits;
use crate::oci::{OciError, OciReference, ReferenceError, Registry, SCHEME};

/// A policy's origin, as `--policy` and the watch configuration name it:
/// `oci://...` is a registry reference, anything else a file.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Deserialize)]
#[serde(try_from = "String")]
pub enum PolicySource {
    /// The default policy built into lockwarden.
    Builtin,
    /// A component file.
    File(PathBuf),
    /// A component in an OCI registry.
    Oci(OciReference),
}

/// Why a text names no policy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    /// The text is empty.
    #[error("the policy is empty: name a .wasm file or an oci:// reference")]
    Empty,
    /// The text starts with `oci://` but is no reference.
    #[error(transparent)]
    Oci(#[from] ReferenceError),
}

impl FromStr for PolicySource {
    type Err = SourceError;

    fn from_str(text: &str) -> Result<Self, SourceError> {
        if text.starts_with(SCHEME) {
            Ok(PolicySource::Oci(OciReference::parse(text)?))
        } else if text.is_empty() {
            Err(SourceError::Empty)
        } else {
            Ok(PolicySource::File(PathBuf::from(text)))
        }
    }
}

impl TryFrom<String> for PolicySource {
    type Error = SourceError;

    fn try_from(text: String) -> Result<Self, SourceError> {
        text.parse()
    }
}

impl fmt::Display for PolicySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicySource::Builtin => f.write_str("(built-in default policy)"),
            PolicySource::File(path) => write!(f, "{}", path.display()),
            PolicySource::Oci(reference) => write!(f, "{reference}"),
        }
    }
}

/// A policy could not be fetched or loaded; nothing may be removed.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file cannot be read.
    #[error("cannot read policy {path}: it {cause}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        cause: ReadError,
    },
    /// The registry failed, or served something that is not a policy.
    #[error(transparent)]
    Oci(#[from] OciError),
    /// The component failed to load.
    #[error(transparent)]
    Plugin(#[from] PluginError),
}

/// A registry's or a component's failure has its kind; a file that cannot
/// be read failed.
impl crate::error::Classify for LoadError {
    fn kind(&self) -> crate::error::ErrorKind {
        match self {
            LoadError::Read { .. } => crate::error::ErrorKind::Failed,
            LoadError::Oci(e) => e.kind(),
            LoadError::Plugin(e) => e.kind(),
        }
    }
}

impl Runtime {
    /// Fetches (from a file or a registry) and loads the policy at `source`.
    /// A policy pulled from a registry is named by its digest in every
    /// message and report.
    pub fn load_from(
        &self,
        source: &PolicySource,
        registry: &Registry,
    ) -> Result<Policy, LoadError> {
        match source {
            PolicySource::Builtin => Ok(self.load_default()?),
            PolicySource::File(path) => {
                let bytes =
                    read_regular_file(path, limits::POLICY).map_err(|cause| LoadError::Read {
                        path: path.display().to_string(),
                        cause,
                    })?;
                Ok(self.load(&path.display().to_string(), &bytes)?)
            }
            PolicySource::Oci(reference) => {
                let pulled = registry.pull(reference)?;
                Ok(self.load(&pulled.reference.to_string(), &pulled.component)?)
            }
        }
    }
}
