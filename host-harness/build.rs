//! Builds the default policy (`plugin/`) as a wasm32-wasip2 component and
//! points `LOCKWARDEN_DEFAULT_POLICY` at it, so the `lockwarden` binary embeds
//! it. Only the default policy: building the binary never builds the test
//! guests. `lockwarden-guest-build` runs the nested cargo, inside `OUT_DIR`,
//! and tells cargo when to run this again.

use std::path::Path;

fn main() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host-harness sits in the workspace");
    let built = lockwarden_guest_build::build(workspace, &["lockwarden-policy"]);
    println!(
        "cargo::rustc-env=LOCKWARDEN_DEFAULT_POLICY={}",
        built[0].display()
    );
}
