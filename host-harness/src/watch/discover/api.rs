//! What discovery reads of the cluster, per round: the operators' objects
//! (cluster-wide lists, kept to the namespaces asked for) and the values of
//! the Secrets they name (each Secret read once per round; a ConfigMap too
//! for VolSync's `customCA`), each reference checked by [`Access`] before
//! anything is read.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use base64::Engine;
use serde_json::Value;

use crate::kubernetes::{KubeError, Kubernetes, is_object_name};
use crate::limits;

use super::access::{Access, AccessRefused};
use super::field::text;

mod reference_error;
pub use reference_error::{Named, ReferenceError};

/// One round's view of the cluster.
pub struct ClusterView<'a> {
    client: &'a Kubernetes,
    timeout: Duration,
    access: &'a Access,
    /// The Secrets and ConfigMaps read this round, by resource, namespace
    /// and name.
    secrets: RefCell<HashMap<Slot, Result<Value, ReferenceError>>>,
    /// The namespaces whose objects a list since the last
    /// [`ClusterView::take_blind`] could not hold, and why.
    blind: RefCell<BTreeMap<String, String>>,
    /// The keys of each Secret read since the last [`ClusterView::reading`].
    used: RefCell<BTreeMap<(String, String), BTreeSet<String>>>,
    /// The Secrets asked of the API this round, per namespace.
    asked: RefCell<HashMap<String, usize>>,
}

/// A Secret a repository's settings were read from: names only, never a
/// value.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SecretUse {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The keys read.
    pub keys: Vec<String>,
}

impl<'a> ClusterView<'a> {
    /// A view through `client`, each request within `timeout`, reading what
    /// `access` allows.
    pub fn new(client: &'a Kubernetes, timeout: Duration, access: &'a Access) -> Self {
        ClusterView {
            client,
            timeout,
            access,
            secrets: RefCell::new(HashMap::new()),
            blind: RefCell::new(BTreeMap::new()),
            used: RefCell::new(BTreeMap::new()),
            asked: RefCell::new(HashMap::new()),
        }
    }

    /// What `read` gives, and the Secrets (and their keys) it read.
    pub fn reading<T>(&self, read: impl FnOnce() -> T) -> (T, Vec<SecretUse>) {
        self.used.borrow_mut().clear();
        let value = read();
        let used = std::mem::take(&mut *self.used.borrow_mut());
        let used = used
            .into_iter()
            .map(|((namespace, name), keys)| SecretUse {
                namespace,
                name,
                keys: keys.into_iter().collect(),
            })
            .collect();
        (value, used)
    }

    /// Every object of `plural` in `group_version` (`velero.io/v1`) in the
    /// namespaces asked for. A kind the cluster does not serve (404: its
    /// operator, or that version of it, is not installed) has no objects;
    /// a refusal or any other failure fails the whole kind. A namespace
    /// whose objects the list could not hold (too many, too large) has
    /// none here and is kept for [`ClusterView::take_blind`].
    pub fn objects(&self, group_version: &str, plural: &str) -> Result<Vec<Value>, KubeError> {
        let path = format!("/apis/{group_version}/{plural}");
        let listing = match self.client.list(self.timeout, &path) {
            Err(e) if e.code() == Some(404) => {
                tracing::debug!("{group_version} {plural}: not served by this cluster");
                return Ok(Vec::new());
            }
            other => other?,
        };
        let included = |ns: &str| self.access.namespaces.includes(ns);
        let mut blind = self.blind.borrow_mut();
        for (namespace, why) in listing.failed.into_iter().filter(|(ns, _)| included(ns)) {
            blind
                .entry(namespace)
                .or_insert_with(|| format!("its {plural}: {why}"));
        }
        Ok(listing
            .items
            .into_iter()
            .filter(|item| text(item, "/metadata/namespace").is_some_and(included))
            .collect())
    }

    /// The namespaces whose objects could not be read since the last call,
    /// with why: their repositories are left as they were.
    pub fn take_blind(&self) -> BTreeMap<String, String> {
        std::mem::take(&mut self.blind.borrow_mut())
    }

    /// Whether an object in `from` may name `what` in `to` ([`Access::check`]).
    pub fn may_name(
        &self,
        from: &str,
        to: &str,
        what: &str,
        granted: bool,
    ) -> Result<(), AccessRefused> {
        self.access.check(from, to, what, granted)
    }

    /// Key `key` of Secret `name` in `namespace`, named by an object of the
    /// same namespace, as text. The error says which Secret and key and
    /// why, never a value.
    pub fn secret_value(
        &self,
        namespace: &str,
        name: &str,
        key: &str,
    ) -> Result<String, ReferenceError> {
        self.named_secret_value(namespace, namespace, name, key)
    }

    /// Key `key` of Secret `name` in `namespace`, named by an object of the
    /// same namespace, as text, when the Secret has that key: `None` when
    /// it has not (a key the operator reads only when it is there, such as
    /// `CA_CERT_DATA`).
    pub fn secret_value_if_any(
        &self,
        namespace: &str,
        name: &str,
        key: &str,
    ) -> Result<Option<String>, ReferenceError> {
        let secret = self.secret(namespace, namespace, name)?;
        if secret
            .pointer("/data")
            .and_then(|data| data.get(key))
            .is_none()
        {
            return Ok(None);
        }
        self.secret_value(namespace, name, key).map(Some)
    }

    /// Key `key` of ConfigMap `name` in `namespace` (its `data`), named by
    /// an object of the same namespace: read only when [`Access`] allows
    /// it, as a Secret is. The error says which ConfigMap and key and why.
    pub fn config_map_value(
        &self,
        namespace: &str,
        name: &str,
        key: &str,
    ) -> Result<String, ReferenceError> {
        let map = self.fetch(&CONFIG_MAP, namespace, namespace, name)?;
        map.pointer("/data")
            .and_then(|data| data.get(key))
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| ReferenceError::NoKey {
                key: key.to_owned(),
                object: CONFIG_MAP.named(namespace, name),
            })
    }

    /// Key `key` of Secret `name` in `namespace`, named by an object in
    /// `from`: read only when [`Access`] allows it (no operator grants
    /// Secrets to other namespaces).
    pub fn named_secret_value(
        &self,
        from: &str,
        namespace: &str,
        name: &str,
        key: &str,
    ) -> Result<String, ReferenceError> {
        let secret = self.secret(from, namespace, name)?;
        let object = || SECRET.named(namespace, name);
        let encoded = secret
            .pointer("/data")
            .and_then(|data| data.get(key))
            .and_then(Value::as_str)
            .ok_or_else(|| ReferenceError::NoKey {
                key: key.to_owned(),
                object: object(),
            })?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|_| ReferenceError::NotBase64 {
                key: key.to_owned(),
                object: object(),
            })?;
        let value = String::from_utf8(bytes).map_err(|_| ReferenceError::NotText {
            key: key.to_owned(),
            object: object(),
        })?;
        let slot = (namespace.to_owned(), name.to_owned());
        self.used
            .borrow_mut()
            .entry(slot)
            .or_default()
            .insert(key.to_owned());
        Ok(value)
    }

    /// The keys of Secret (`secret`) or ConfigMap `name` in `namespace`,
    /// named by an object of the same namespace; no value is read.
    pub fn keys_of(
        &self,
        secret: bool,
        namespace: &str,
        name: &str,
    ) -> Result<Vec<String>, ReferenceError> {
        let kind = if secret { &SECRET } else { &CONFIG_MAP };
        let object = self.fetch(kind, namespace, namespace, name)?;
        let keys = ["/data", "/binaryData"]
            .into_iter()
            .filter_map(|field| object.pointer(field)?.as_object())
            .flat_map(|data| data.keys().cloned())
            .collect();
        Ok(keys)
    }

    /// Every key of Secret `name` in `namespace`, as text (keys whose value
    /// is not text are left out).
    pub fn secret_values(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Vec<(String, String)>, ReferenceError> {
        let secret = self.secret(namespace, namespace, name)?;
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

    /// Secret `name` in `namespace`, named by an object in `from`: what
    /// [`Access`] allows, asked before anything is read.
    fn secret(&self, from: &str, namespace: &str, name: &str) -> Result<Value, ReferenceError> {
        self.fetch(&SECRET, from, namespace, name)
    }

    /// The object of `kind` named `name` in `namespace`, named by an object
    /// in `from`: what [`Access`] allows, asked before anything is read;
    /// each read once per round, and at most
    /// [`limits::DISCOVERED_REPOSITORIES`] Secrets and ConfigMaps of one
    /// namespace.
    fn fetch(
        &self,
        kind: &Referenced,
        from: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Value, ReferenceError> {
        let what = format!("{} {}", kind.word, crate::text::escape(name));
        self.access.check(from, namespace, &what, false)?;
        let slot = (kind.plural, namespace.to_owned(), name.to_owned());
        if let Some(known) = self.secrets.borrow().get(&slot) {
            return known.clone();
        }
        if !is_object_name(namespace) || !is_object_name(name) {
            return Err(ReferenceError::NotAName(kind.named(namespace, name)));
        }
        // One namespace's objects cannot make a round as long as they like:
        // the Secrets of one namespace asked for in a round are bounded.
        let mut asked = self.asked.borrow_mut();
        let count = asked.entry(namespace.to_owned()).or_default();
        if *count >= limits::DISCOVERED_REPOSITORIES {
            return Err(ReferenceError::TooMany(namespace.to_owned()));
        }
        *count += 1;
        drop(asked);
        let path = format!("/api/v1/namespaces/{namespace}/{}/{name}", kind.plural);
        let read = self
            .client
            .get::<Value>(self.timeout, &path)
            .map_err(|e| match e.code() {
                Some(403) => ReferenceError::Forbidden(kind.named(namespace, name)),
                Some(404) => ReferenceError::Missing(kind.named(namespace, name)),
                _ => ReferenceError::Api(e),
            });
        self.secrets.borrow_mut().insert(slot, read.clone());
        read
    }
}

/// A Secret or ConfigMap read: its resource (`secrets`), namespace and
/// name.
type Slot = (&'static str, String, String);

/// A kind of object an operator's object names by name: a Secret, or a
/// ConfigMap (VolSync's `customCA`).
struct Referenced {
    /// Its resource in `/api/v1`.
    plural: &'static str,
    /// Its kind, for messages.
    word: &'static str,
}

impl Referenced {
    /// The object of this kind named `name` in `namespace`.
    fn named(&self, namespace: &str, name: &str) -> Named {
        Named {
            word: self.word,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }
}

const SECRET: Referenced = Referenced {
    plural: "secrets",
    word: "Secret",
};

const CONFIG_MAP: Referenced = Referenced {
    plural: "configmaps",
    word: "ConfigMap",
};
