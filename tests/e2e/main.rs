//! lockwarden's end-to-end tests: one binary, one module per area, each test
//! in its own temporary directory.

mod adversary_evidence;
mod adversary_inputs;
mod adversary_repo;
mod adversary_watch;
mod concurrency;
mod conformance;
mod faults;
mod oci;
mod operators;
mod policy_cli;
mod repo;
mod runtime;
