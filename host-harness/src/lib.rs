//! lockwarden: keeps restic repositories free of stale locks without ever
//! removing a live one.
//!
//! The decision "is this lock stale?" belongs to a policy, a WASI component
//! that implements the `lockwarden:policy` contract (`wit/`). This library
//! loads and runs policies in a sandbox ([`runtime`]), serves them the facts
//! they may not gather themselves ([`evidence`]), and reads recorded requests
//! ([`request`]).

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
pub mod limits;
pub mod oci;
mod parallel;
pub mod repo;
pub mod report;
pub mod request;
pub mod runtime;
pub mod stats;
pub mod text;
pub mod textfile;
pub mod time;
pub mod tls;
pub mod warden;
pub mod watch;
mod xdg;
