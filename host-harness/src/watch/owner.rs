//! The object a discovered repository was found in: what its name, its
//! Events and its messages refer to. Discovery finds it, notifications and
//! the pool refer to it; it depends on neither.

/// The object a repository was found in: what its name, its Events and its
/// messages refer to.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Owner {
    /// `velero.io/v1`.
    pub api_version: String,
    /// `BackupRepository`.
    pub kind: String,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its uid, when the API gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}

impl Owner {
    /// `namespace/Kind/name`: the repository's name in logs, metrics and
    /// notifications.
    pub fn label(&self) -> String {
        format!("{}/{}/{}", self.namespace, self.kind, self.name)
    }
}
