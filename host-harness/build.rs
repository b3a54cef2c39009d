//! Builds the default policy (`plugin/`) as a wasm32-wasip2 component and
//! points `LOCKWARDEN_DEFAULT_POLICY` at it, so the `lockwarden` binary embeds
//! it. The nested cargo uses a target directory of its own, so it never waits
//! on the outer build's lock.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let manifest_dir = PathBuf::from(env("CARGO_MANIFEST_DIR"));
    let workspace = manifest_dir
        .parent()
        .expect("host-harness sits in the workspace");
    let target_dir = workspace.join("target").join("policy");
    for watched in [
        "plugin/src",
        "plugin/Cargo.toml",
        "duration/src",
        "duration/Cargo.toml",
        "wit",
        ".cargo/config.toml",
    ] {
        println!(
            "cargo:rerun-if-changed={}",
            workspace.join(watched).display()
        );
    }

    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut build = Command::new(cargo);
    build
        .current_dir(workspace)
        .args(["build", "--quiet", "-p", "lockwarden-policy"])
        .args(["--target", "wasm32-wasip2", "--profile", "wasm"])
        .arg("--target-dir")
        .arg(&target_dir);
    // Whatever the outer build set for the host must not leak into the guest.
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTC_WRAPPER",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
        "CARGO_MAKEFLAGS",
        "MAKEFLAGS",
    ] {
        build.env_remove(var);
    }
    let status = build
        .status()
        .unwrap_or_else(|e| panic!("cannot run cargo to build the default policy: {e}"));
    assert!(
        status.success(),
        "building the default policy failed ({status}); is the target installed? run `make setup` \
         (rustup target add wasm32-wasip2)"
    );
    let wasm = target_dir.join("wasm32-wasip2/wasm/lockwarden_policy.wasm");
    assert!(
        wasm.exists(),
        "the policy build produced no {}",
        wasm.display()
    );
    println!(
        "cargo:rustc-env=LOCKWARDEN_DEFAULT_POLICY={}",
        wasm.display()
    );
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("cargo sets {name}"))
}
