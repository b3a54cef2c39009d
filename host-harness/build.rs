//! Builds the default policy (`plugin/`) as a wasm32-wasip2 component and
//! points `LOCKWARDEN_DEFAULT_POLICY` at it, so the `lockwarden` binary embeds
//! it. Only the default policy: building the binary never builds the test
//! guests. `lockwarden-guest-build` runs the nested cargo, inside `OUT_DIR`,
//! and tells cargo when to run this again.
//!
//! Also tells `lockwarden --version` the git commit it is built from
//! (`LOCKWARDEN_GIT_COMMIT`, which a build outside a git checkout may set
//! itself) and the wasmtime version in `Cargo.lock`.

use std::path::Path;
use std::process::Command;

fn main() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host-harness sits in the workspace");
    let built = lockwarden_guest_build::build(workspace, &["lockwarden-policy"]);
    println!(
        "cargo::rustc-env=LOCKWARDEN_DEFAULT_POLICY={}",
        built[0].display()
    );
    println!(
        "cargo::rustc-env=LOCKWARDEN_GIT_COMMIT={}",
        git_commit(workspace)
    );
    println!(
        "cargo::rustc-env=LOCKWARDEN_WASMTIME_VERSION={}",
        locked_version(workspace, "wasmtime")
    );
}

/// The commit checked out in `workspace` (12 hex digits), or "unknown".
fn git_commit(workspace: &Path) -> String {
    println!("cargo::rerun-if-env-changed=LOCKWARDEN_GIT_COMMIT");
    if let Ok(given) = std::env::var("LOCKWARDEN_GIT_COMMIT") {
        let hex = (7..=40).contains(&given.len()) && given.bytes().all(|b| b.is_ascii_hexdigit());
        assert!(
            hex || given == "unknown",
            "LOCKWARDEN_GIT_COMMIT must be 7 to 40 hex digits or `unknown`"
        );
        return given;
    }
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(workspace)
            .args(args)
            .output()
            .ok()
            .filter(|out| out.status.success())
            .and_then(|out| String::from_utf8(out.stdout).ok())
            .map(|text| text.trim().to_owned())
    };
    // HEAD moves on a checkout; its log grows on every commit too.
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        for file in ["HEAD", "logs/HEAD"] {
            println!("cargo::rerun-if-changed={dir}/{file}");
        }
    }
    git(&["rev-parse", "--short=12", "HEAD"])
        .filter(|commit| !commit.is_empty() && commit.bytes().all(|b| b.is_ascii_hexdigit()))
        .unwrap_or_else(|| "unknown".to_owned())
}

/// The version of `package` that `Cargo.lock` pins (the guest build already
/// runs this again when `Cargo.lock` changes).
fn locked_version(workspace: &Path, package: &str) -> String {
    let lock = std::fs::read_to_string(workspace.join("Cargo.lock")).unwrap_or_default();
    let name = format!("name = \"{package}\"");
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line == name
            && let Some(version) = lines
                .next()
                .and_then(|l| l.strip_prefix("version = \""))
                .and_then(|l| l.strip_suffix('"'))
        {
            return version.to_owned();
        }
    }
    "unknown".to_owned()
}
