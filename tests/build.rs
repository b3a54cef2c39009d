//! Builds every component the end-to-end tests load, in one nested cargo
//! build (`lockwarden-guest-build`, inside `OUT_DIR`): the two real policies,
//! the default policy's contract 0.1.0 build (`guests/default-0.1.0/`), and
//! the guests in `guests/` that misbehave on purpose. Writes
//! `$OUT_DIR/guests.rs`, one constant per component, which `src/lib.rs`
//! includes as `lockwarden_tests::guests`: a test naming a guest that is not
//! built here does not compile. Nothing built here is ever committed.

use std::fmt::Write as _;
use std::path::Path;

/// Each component: its constant in `guests`, and the package it is built from.
const COMPONENTS: [(&str, &str); 16] = [
    ("DEFAULT", "lockwarden-policy"),
    ("DEFAULT_0_1", "lockwarden-policy-0-1"),
    ("STRICT", "lockwarden-strict-policy"),
    ("PANIC", "misbehave-panic"),
    ("SPIN", "misbehave-spin"),
    ("HOG", "misbehave-hog"),
    ("OMIT", "misbehave-omit"),
    ("DUPLICATE", "misbehave-duplicate"),
    ("INVENT", "misbehave-invent"),
    ("FAIL", "misbehave-fail"),
    ("SNOOP", "misbehave-snoop"),
    ("WALL_CLOCK", "misbehave-wall-clock"),
    ("READ_FILE", "misbehave-read-file"),
    ("REMOVE_UNREADABLE", "misbehave-remove-unreadable"),
    ("REMOVE_UNREADABLE_0_1", "misbehave-remove-unreadable-0-1"),
    ("WRONG_CONTRACT", "wrong-contract"),
];

fn main() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests sits in the workspace");
    let packages = COMPONENTS.map(|(_, package)| package);
    let built = lockwarden_guest_build::build(workspace, &packages);

    let mut constants = String::new();
    for ((name, package), path) in COMPONENTS.iter().zip(&built) {
        let path = path.to_str().expect("OUT_DIR is UTF-8");
        writeln!(
            constants,
            "/// The component built from package `{package}`.\n\
             pub const {name}: Guest = Guest {{ package: {package:?}, path: {path:?} }};"
        )
        .expect("write to a String");
    }
    let out = Path::new(&std::env::var_os("OUT_DIR").expect("set by cargo")).join("guests.rs");
    std::fs::write(&out, constants)
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", out.display()));
}
