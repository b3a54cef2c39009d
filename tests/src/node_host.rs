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

/// `node`, ready to run a transpiled policy: Node.js 20's V8 still needs a
/// flag for extended constant expressions (on by default from V8 11.4),
/// which componentize-py's CPython uses in its globals' initializers.
pub fn node() -> Command {
    let mut command = Command::new("node");
    command.arg("--experimental-wasm-extended-const");
    command
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
