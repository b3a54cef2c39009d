//! The Node.js host in `tests/node-host/`: where it is, and turning a policy
//! component into JavaScript it can run.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::finish;

/// The Node.js host's directory, with its packages installed (`make test` and
/// `make bench` run `npm ci` there).
pub fn dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("node-host");
    assert!(
        dir.join("node_modules/.bin/jco").exists(),
        "the Node.js host's packages are missing: run `make test` (npm ci --prefix tests/node-host)"
    );
    dir
}

/// `jco transpile COMPONENT --instantiation async --name policy -o OUT`: the
/// form `host.mjs` loads.
pub fn transpile(component: &Path, out: &Path) {
    let done = finish(
        Command::new(dir().join("node_modules/.bin/jco"))
            .arg("transpile")
            .arg(component)
            .args([
                "--instantiation",
                "async",
                "--name",
                "policy",
                "--quiet",
                "-o",
            ])
            .arg(out),
    );
    assert_eq!(
        done.code,
        0,
        "jco transpile {}: {done:?}",
        component.display()
    );
}
