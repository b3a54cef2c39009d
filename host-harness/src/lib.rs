//! lockwarden: keeps restic repositories free of stale locks without ever
//! removing a live one.
//!
//! The decision "is this lock stale?" belongs to a policy, a WASI component
//! that implements the `lockwarden:policy` contract (`wit/`). The modules,
//! from the job down:
//!
//! - [`warden`]: the one job every command runs (read, gather evidence,
//!   judge, remove what was judged stale, report); [`watch`] runs it for
//!   many repositories on a timer, [`hold`] takes a lock of lockwarden's own;
//!   [`repository_settings`] how one repository is reached and judged, made
//!   once from the command line or watch.toml, and the warden made of it;
//! - [`repo`]: restic repositories (keys, crypto, lock files) over their
//!   backends, and what may be removed, decided for all of them;
//! - [`runtime`]: the policy sandbox (wasmtime), its limits and the checks
//!   of its verdicts; [`contract`] the types shared with policies;
//!   [`oci`] policies from a registry; [`conformance`] the cases any policy
//!   can be checked against in any host; [`case_table`] how the backend
//!   suites run theirs;
//! - [`evidence`]: what the host tells a policy about lock holders;
//!   [`first_seen`] when this host first saw each lock;
//! - [`report`], [`textfile`] and [`request`]: what is printed and read
//!   back as JSON or metrics;
//! - below them: [`error`] (each failure's kind, hence its exit code),
//!   [`limits`] (every bound on what is read), [`command`] (external
//!   commands with deadlines), [`files`], [`text`] (escaping for terminals),
//!   [`time`], [`tls`], [`stop`] and [`stats`].

pub mod case_table;
pub mod command;
pub mod conformance;
pub mod contract;
#[cfg(test)]
mod decoders_proptest;
pub mod error;
pub mod evidence;
pub mod files;
pub mod first_seen;
pub mod hold;
pub mod kubernetes;
pub mod limits;
pub mod oci;
mod parallel;
pub mod repo;
pub mod report;
pub mod repository_settings;
pub mod request;
pub mod runtime;
pub mod stats;
pub mod stop;
pub mod text;
pub mod textfile;
pub mod time;
pub mod tls;
pub mod warden;
pub mod watch;
mod xdg;
