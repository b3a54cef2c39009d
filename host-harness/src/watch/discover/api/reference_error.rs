//! Why a Secret or ConfigMap an operator's object names, or a key of it,
//! gives no value: each case a variant, said as the reason the object gives
//! no repository. Never holds a value read.

use std::fmt;

use crate::kubernetes::KubeError;
use crate::limits;
use crate::text::escape;

use super::super::access::AccessRefused;

/// A Secret or ConfigMap an object names: its kind (`Secret`), namespace
/// and name, shown escaped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    /// `Secret` or `ConfigMap`.
    pub word: &'static str,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl fmt::Display for Named {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Named {
            word,
            namespace,
            name,
        } = self;
        write!(f, "{word} {}/{}", escape(namespace), escape(name))
    }
}

/// Why a Secret or ConfigMap an object names, or one key of it, cannot be
/// read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReferenceError {
    /// The object may not have lockwarden read there.
    #[error(transparent)]
    Access(#[from] AccessRefused),
    /// The namespace or name is not one the API gives.
    #[error("{0} is not a name the API gives")]
    NotAName(Named),
    /// The namespace's objects named more than a round reads.
    #[error(
        "namespace {} names more than {} Secrets and ConfigMaps; the objects naming the others \
         are not read",
        escape(.0),
        limits::DISCOVERED_REPOSITORIES
    )]
    TooMany(String),
    /// The API refused the read (403).
    #[error(
        "lockwarden may not read {0} (403: its RBAC grants no get there; \
         docs/kubernetes.md#installing)"
    )]
    Forbidden(Named),
    /// It does not exist (404).
    #[error("{0} does not exist")]
    Missing(Named),
    /// Any other failure of the API.
    #[error(transparent)]
    Api(KubeError),
    /// It has no such key.
    #[error("key {} of {object} does not exist", escape(.key))]
    NoKey {
        /// The key.
        key: String,
        /// Where it was looked for.
        object: Named,
    },
    /// The key's value is not base64 (a Secret's `data`).
    #[error("key {} of {object} is not base64", escape(.key))]
    NotBase64 {
        /// The key.
        key: String,
        /// Where.
        object: Named,
    },
    /// The key's value is not text.
    #[error("key {} of {object} is not UTF-8 text", escape(.key))]
    NotText {
        /// The key.
        key: String,
        /// Where.
        object: Named,
    },
}

/// A reference that cannot be read is shown as the reason its object gives
/// no repository.
impl From<ReferenceError> for String {
    fn from(error: ReferenceError) -> String {
        error.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_reason_is_said_with_the_object_escaped() {
        let named = |name: &str| Named {
            word: "Secret",
            namespace: "app".into(),
            name: name.into(),
        };
        let rows = [
            (
                ReferenceError::NotAName(named("a/b")),
                "Secret app/a/b is not a name the API gives".to_owned(),
            ),
            (
                ReferenceError::TooMany("app\t".into()),
                format!(
                    "namespace app\\t names more than {} Secrets and ConfigMaps; the objects \
                     naming the others are not read",
                    limits::DISCOVERED_REPOSITORIES
                ),
            ),
            (
                ReferenceError::Forbidden(named("s")),
                "lockwarden may not read Secret app/s (403: its RBAC grants no get there; \
                 docs/kubernetes.md#installing)"
                    .to_owned(),
            ),
            (
                ReferenceError::Missing(named("s\u{1b}")),
                "Secret app/s\\u{1b} does not exist".to_owned(),
            ),
            (
                ReferenceError::NoKey {
                    key: "ca\n".into(),
                    object: named("s"),
                },
                "key ca\\n of Secret app/s does not exist".to_owned(),
            ),
            (
                ReferenceError::NotBase64 {
                    key: "k".into(),
                    object: named("s"),
                },
                "key k of Secret app/s is not base64".to_owned(),
            ),
            (
                ReferenceError::NotText {
                    key: "k".into(),
                    object: named("s"),
                },
                "key k of Secret app/s is not UTF-8 text".to_owned(),
            ),
        ];
        for (error, said) in rows {
            assert_eq!(error.to_string(), said, "{error:?}");
        }
    }
}
