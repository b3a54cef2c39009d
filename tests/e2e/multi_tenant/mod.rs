//! The multi-tenant suite: `watch` in discovery mode over a cluster (the
//! Kubernetes emulator) shared by tenants that each hold one namespace and
//! may create the operators' objects there, nothing else. Each case is one
//! way a tenant could try to turn lockwarden against another (SECURITY.md,
//! "A tenant's objects"): read what another namespace holds, aim requests
//! where it likes, starve or blind the others, or have a live lock removed.
//!
//! The namespaces: [`TENANT_A`] and [`TENANT_B`] (tenants), [`EXCLUDED`]
//! (in `exclude_namespaces`), [`OPERATOR`] (where an operator keeps shared
//! storage objects).

mod aim;
mod attack;
mod blind;
mod secrets;
mod starve;

/// A tenant's namespace.
pub const TENANT_A: &str = "tenant-a";
/// Another tenant's namespace.
pub const TENANT_B: &str = "tenant-b";
/// A namespace watch.toml excludes.
pub const EXCLUDED: &str = "excluded";
/// The namespace an operator keeps shared objects in (KubeStash's
/// BackupStorages).
pub const OPERATOR: &str = "backup-system";
