//! lockwarden's end-to-end tests: one binary, one module per area, each test
//! in its own temporary directory.
//!
//! A test target of the `lockwarden` package (host-harness/Cargo.toml), so
//! that `cargo test` builds the `lockwarden` binary from the current sources
//! first and hands its path to the tests (`lockwarden_tests::lockwarden_bin`).

// Fails to compile if this target is moved to a package without the binary.
const _: &str = env!("CARGO_BIN_EXE_lockwarden");

mod adversary_backends;
mod adversary_evidence;
mod adversary_inputs;
mod adversary_repo;
mod adversary_watch;
mod backend_suite;
mod cloud;
mod cloud_servers;
mod concurrency;
mod conformance;
mod discover;
mod discover_tls;
mod docs;
mod faults;
mod go_host;
mod hold;
mod hostile_http;
mod image;
mod kube_emulator;
mod kube_real;
mod multi_tenant;
mod notifications;
mod oci;
mod operators;
mod pod_end;
mod pod_identity;
mod policy_cli;
mod polyglot;
mod rclone;
mod rclone_secrets;
mod repo;
mod runtime;
mod sftp;
mod shadow;
mod textfile;
