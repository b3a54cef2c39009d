//! Builds the misbehaving test guests in `guests/` from source, one component
//! per behaviour, into `$OUT_DIR/guests/<behaviour>.wasm`, and the two real
//! policies (`default.wasm` from `plugin/`, `strict.wasm` from
//! `examples/policies/strict/`), and tells the tests where they are through
//! `LOCKWARDEN_TEST_GUESTS`. Nothing built here is ever committed.

use std::path::{Path, PathBuf};
use std::process::Command;

/// One component per feature of the `misbehave` crate.
const BEHAVIOURS: [&str; 11] = [
    "panic",
    "spin",
    "hog",
    "omit",
    "duplicate",
    "invent",
    "fail",
    "snoop",
    "wall-clock",
    "read-file",
    "remove-unreadable",
];

fn main() {
    let here = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let guests = here.join("guests");
    let target_dir = here
        .parent()
        .expect("in the workspace")
        .join("target/guests");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("set by cargo")).join("guests");
    std::fs::create_dir_all(&out).expect("create the guests output directory");
    println!("cargo:rerun-if-changed={}", guests.display());
    let workspace = here.parent().expect("in the workspace");
    for watched in ["wit", "plugin", "examples/policies/strict"] {
        println!(
            "cargo:rerun-if-changed={}",
            workspace.join(watched).display()
        );
    }

    let built = target_dir.join("wasm32-wasip2/release");
    for behaviour in BEHAVIOURS {
        cargo(
            &guests,
            &target_dir,
            &["--release", "-p", "misbehave", "--features", behaviour],
        );
        copy(
            &built.join("misbehave.wasm"),
            &out.join(format!("{behaviour}.wasm")),
        );
    }
    cargo(&guests, &target_dir, &["--release", "-p", "wrong-contract"]);
    copy(
        &built.join("wrong_contract.wasm"),
        &out.join("wrong-contract.wasm"),
    );

    // The real policies, built exactly as host-harness/build.rs builds the
    // default it embeds (same profile, same target directory).
    let policies = workspace.join("target/policy");
    cargo(
        workspace,
        &policies,
        &[
            "--profile",
            "wasm",
            "-p",
            "lockwarden-policy",
            "-p",
            "lockwarden-strict-policy",
        ],
    );
    for (crate_file, name) in [
        ("lockwarden_policy", "default"),
        ("lockwarden_strict_policy", "strict"),
    ] {
        copy(
            &policies.join(format!("wasm32-wasip2/wasm/{crate_file}.wasm")),
            &out.join(format!("{name}.wasm")),
        );
    }
    println!("cargo:rustc-env=LOCKWARDEN_TEST_GUESTS={}", out.display());
}

/// `cargo build --target wasm32-wasip2` in `dir` (release unless `args`
/// name a profile).
fn cargo(dir: &Path, target_dir: &Path, args: &[&str]) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .current_dir(dir)
        .args(["build", "--quiet", "--target", "wasm32-wasip2"])
        .args(args)
        .arg("--target-dir")
        .arg(target_dir);
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
        command.env_remove(var);
    }
    let status = command.status().expect("run cargo for the test guests");
    assert!(
        status.success(),
        "building test guest {args:?} failed; run `make setup` for the wasm32-wasip2 target"
    );
}

fn copy(from: &Path, to: &Path) {
    std::fs::copy(from, to)
        .unwrap_or_else(|e| panic!("copy {} to {}: {e}", from.display(), to.display()));
}
