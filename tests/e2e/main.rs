//! lockwarden's end-to-end tests: one binary, one module per area, each test
//! in its own temporary directory.

mod conformance;
mod oci;
mod operators;
mod policy_cli;
mod repo;
mod runtime;
