//! Which namespaces an object may make lockwarden read from: decided here,
//! once, for every operator's every reference (a Secret, a KubeStash
//! `BackupStorage`). A tenant that may create an operator's objects in its
//! own namespace must not be able to name what another namespace holds and
//! have lockwarden, which may read every Secret, read it on its behalf.
//!
//! An object in namespace `from` may have lockwarden read what namespace
//! `to` holds when `to` is a namespace discovery looks in (never an
//! excluded or not-included one, whatever else is said) and
//! - `to` is `from`, or
//! - the referenced object's owner allows `from` as the operator itself
//!   enforces it (a KubeStash `BackupStorage`'s `usagePolicy`: [`granted`]), or
//! - watch.toml says `single_tenant = true` (a cluster whose namespaces
//!   trust each other).
//!
//! A refusal names the object's own fields and nothing read from `to`; it
//! is decided before anything in `to` is read, so that it answers nothing
//! about what `to` holds.

use serde_json::Value;

use super::Namespaces;
use super::field::text;
use crate::text::escape;

/// What discovery may read where.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Access {
    /// The namespaces discovery looks in.
    pub namespaces: Namespaces,
    /// Whether every included namespace trusts every other.
    pub single_tenant: bool,
}

impl Access {
    /// Whether an object in `from` may have lockwarden read `what` (`Secret
    /// x`) in `to`; `granted` when the referenced object's owner allows
    /// `from` ([`granted`]). The error says why not, for the object's owner.
    pub fn check(
        &self,
        from: &str,
        to: &str,
        what: &str,
        granted: bool,
    ) -> Result<(), AccessRefused> {
        if !self.namespaces.includes(to) {
            return Err(AccessRefused::NotLooked {
                what: what.to_owned(),
                to: to.to_owned(),
            });
        }
        if from == to || granted || self.single_tenant {
            return Ok(());
        }
        Err(AccessRefused::NotGranted {
            what: what.to_owned(),
            to: to.to_owned(),
            from: from.to_owned(),
        })
    }
}

/// Why an object may not have lockwarden read `what` (`Secret x`) in
/// namespace `to`: the object's own fields, nothing read from `to`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AccessRefused {
    /// `to` is not a namespace discovery looks in.
    #[error(
        "it names {what} in namespace {}, where discovery does not look (namespaces, \
         exclude_namespaces)",
        escape(.to)
    )]
    NotLooked {
        /// What the object names (`Secret x`).
        what: String,
        /// Where.
        to: String,
    },
    /// `to` is another namespace, which does not allow `from` to use it.
    #[error(
        "it names {what} in namespace {}, another namespace, which does not allow namespace {} \
         to use it; an object may name only what its own namespace holds (single_tenant = true \
         lifts this where namespaces trust each other)",
        escape(.to),
        escape(.from)
    )]
    NotGranted {
        /// What the object names (`Secret x`).
        what: String,
        /// Where.
        to: String,
        /// The object's namespace.
        from: String,
    },
}

/// A refusal is shown as the reason its object gives no repository.
impl From<AccessRefused> for String {
    fn from(refused: AccessRefused) -> String {
        refused.to_string()
    }
}

/// Whether KubeStash's `BackupStorage` `storage` allows Repositories of
/// namespace `from`, as KubeStash decides it (`UsageAllowed`): no
/// `usagePolicy`, its own namespace only; `allowedNamespaces.from` `All`,
/// every namespace; `Same`, its own; none, no namespace. `Selector` (by the
/// namespace's labels, which lockwarden does not read) allows none here.
pub fn granted(storage: &Value, from: &str) -> bool {
    let own = text(storage, "/metadata/namespace") == Some(from);
    let Some(policy) = storage
        .pointer("/spec/usagePolicy")
        .filter(|p| !p.is_null())
    else {
        return own;
    };
    match text(policy, "/allowedNamespaces/from") {
        Some("All") => true,
        Some("Same") => own,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn access(only: &[&str], except: &[&str], single_tenant: bool) -> Access {
        Access {
            namespaces: Namespaces {
                only: only.iter().map(|s| (*s).to_owned()).collect(),
                except: except.iter().map(|s| (*s).to_owned()).collect(),
            },
            single_tenant,
        }
    }

    #[test]
    fn an_object_reads_its_own_namespace_and_what_it_is_granted_only() {
        let open = access(&[], &["kube-system"], false);
        assert!(open.check("a", "a", "Secret s", false).is_ok());
        assert!(open.check("a", "b", "Secret s", true).is_ok());
        let refused = open
            .check("a", "b", "Secret s", false)
            .expect_err("refused")
            .to_string();
        assert!(refused.contains("Secret s in namespace b"), "{refused}");
        // Never into an excluded or not-included namespace, granted or not,
        // single tenant or not.
        let trusting = access(&["a", "b"], &["kube-system"], true);
        assert!(trusting.check("a", "b", "Secret s", false).is_ok());
        for to in ["kube-system", "c"] {
            for granted in [false, true] {
                assert!(
                    trusting.check("a", to, "Secret s", granted).is_err(),
                    "{to}"
                );
            }
        }
        assert!(open.check("a", "kube-system", "Secret s", true).is_err());
        // A name with controls is shown escaped.
        let shown = open
            .check("a", "b\n", "Secret s", false)
            .expect_err("refused")
            .to_string();
        assert!(shown.contains("b\\n"), "{shown}");
    }

    #[test]
    fn a_refusal_names_the_setting_that_refuses_it() {
        let open = access(&[], &["kube-system"], false);
        let said = |to: &str| {
            open.check("a", to, "Secret s", false)
                .expect_err("refused")
                .to_string()
        };
        assert_eq!(
            said("kube-system"),
            "it names Secret s in namespace kube-system, where discovery does not look \
             (namespaces, exclude_namespaces)"
        );
        assert_eq!(
            said("b"),
            "it names Secret s in namespace b, another namespace, which does not allow \
             namespace a to use it; an object may name only what its own namespace holds \
             (single_tenant = true lifts this where namespaces trust each other)"
        );
    }

    #[test]
    fn a_backup_storage_grants_as_kubestash_does() {
        let storage = |policy: Value| json!({"metadata": {"namespace": "ops", "name": "s3"}, "spec": {"usagePolicy": policy}});
        let rows = [
            (Value::Null, "ops", true),
            (Value::Null, "a", false),
            (json!({"allowedNamespaces": {"from": "All"}}), "a", true),
            (json!({"allowedNamespaces": {"from": "Same"}}), "a", false),
            (json!({"allowedNamespaces": {"from": "Same"}}), "ops", true),
            (json!({"allowedNamespaces": {}}), "ops", false),
            (
                json!({"allowedNamespaces": {"from": "Selector", "selector": {}}}),
                "a",
                false,
            ),
        ];
        for (policy, from, want) in rows {
            assert_eq!(
                granted(&storage(policy.clone()), from),
                want,
                "{policy} {from}"
            );
        }
        let without = json!({"metadata": {"namespace": "ops"}, "spec": {}});
        assert!(granted(&without, "ops"));
        assert!(!granted(&without, "a"));
    }
}
