//! What discovery reads of the cluster, per round: the operators' objects
//! (cluster-wide lists, kept to the namespaces asked for) and the values of
//! the Secrets they name (each Secret read once per round).

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Duration;

use base64::Engine;
use serde_json::Value;

use crate::kubernetes::{KubeError, Kubernetes, is_object_name};

use super::Namespaces;

/// One round's view of the cluster.
pub struct ClusterView<'a> {
    client: &'a Kubernetes,
    timeout: Duration,
    namespaces: &'a Namespaces,
    secrets: RefCell<HashMap<(String, String), Result<Value, String>>>,
}

impl<'a> ClusterView<'a> {
    /// A view through `client`, each request within `timeout`.
    pub fn new(client: &'a Kubernetes, timeout: Duration, namespaces: &'a Namespaces) -> Self {
        ClusterView {
            client,
            timeout,
            namespaces,
            secrets: RefCell::new(HashMap::new()),
        }
    }

    /// Every object of `plural` in `group_version` (`velero.io/v1`) in the
    /// namespaces asked for. A kind the cluster does not serve (404: its
    /// operator, or that version of it, is not installed) has no objects;
    /// a refusal or any other failure fails the whole kind.
    pub fn objects(&self, group_version: &str, plural: &str) -> Result<Vec<Value>, KubeError> {
        let path = format!("/apis/{group_version}/{plural}");
        let items = match self.client.list(self.timeout, &path) {
            Err(e) if e.code() == Some(404) => {
                tracing::debug!("{group_version} {plural}: not served by this cluster");
                Vec::new()
            }
            other => other?,
        };
        Ok(items
            .into_iter()
            .filter(|item| {
                item.pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .is_some_and(|ns| self.namespaces.includes(ns))
            })
            .collect())
    }

    /// Key `key` of Secret `name` in `namespace`, as text. The error says
    /// which Secret and key and why, never a value.
    pub fn secret_value(&self, namespace: &str, name: &str, key: &str) -> Result<String, String> {
        let shown = format!(
            "key {} of Secret {}/{}",
            crate::text::escape(key),
            crate::text::escape(namespace),
            crate::text::escape(name)
        );
        let secret = self.secret(namespace, name)?;
        let encoded = secret
            .pointer("/data")
            .and_then(|data| data.get(key))
            .and_then(Value::as_str)
            .ok_or_else(|| format!("{shown} does not exist"))?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|_| format!("{shown} is not base64"))?;
        String::from_utf8(bytes).map_err(|_| format!("{shown} is not UTF-8 text"))
    }

    /// Every key of Secret `name` in `namespace`, as text (keys whose value
    /// is not text are left out).
    pub fn secret_values(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Vec<(String, String)>, String> {
        let secret = self.secret(namespace, name)?;
        let keys: Vec<String> = secret
            .pointer("/data")
            .and_then(Value::as_object)
            .map(|data| data.keys().cloned().collect())
            .unwrap_or_default();
        Ok(keys
            .into_iter()
            .filter_map(|key| {
                let value = self.secret_value(namespace, name, &key).ok()?;
                Some((key, value))
            })
            .collect())
    }

    fn secret(&self, namespace: &str, name: &str) -> Result<Value, String> {
        let slot = (namespace.to_owned(), name.to_owned());
        if let Some(known) = self.secrets.borrow().get(&slot) {
            return known.clone();
        }
        if !is_object_name(namespace) || !is_object_name(name) {
            return Err(format!(
                "Secret {}/{} is not a name the API gives",
                crate::text::escape(namespace),
                crate::text::escape(name)
            ));
        }
        let path = format!("/api/v1/namespaces/{namespace}/secrets/{name}");
        let read = self
            .client
            .get::<Value>(self.timeout, &path)
            .map_err(|e| match e.code() {
                Some(403) => format!(
                    "lockwarden may not read Secret {}/{} (403; see deploy/kubernetes/discover/rbac.yaml)",
                    crate::text::escape(namespace),
                    crate::text::escape(name)
                ),
                Some(404) => format!(
                    "Secret {}/{} does not exist",
                    crate::text::escape(namespace),
                    crate::text::escape(name)
                ),
                _ => e.to_string(),
            });
        self.secrets.borrow_mut().insert(slot, read.clone());
        read
    }
}

/// The string at `pointer` in `object`, if there is a non-empty one.
pub fn text<'v>(object: &'v Value, pointer: &str) -> Option<&'v str> {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}
