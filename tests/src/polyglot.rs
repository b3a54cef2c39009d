//! The policies written in Python and JavaScript that the tests load. Cargo
//! does not build them: `make test` does, with the examples' own `build.sh`
//! and the toolchains their lock files pin, into `target/policies/`.

use std::path::PathBuf;

use crate::TESTS_DIR;

/// A component built by `make test` from Python or JavaScript sources.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Polyglot(&'static str);

/// The strict example in Python (`examples/policies/strict-python`).
pub const STRICT_PYTHON: Polyglot = Polyglot("strict-python");
/// The strict example in JavaScript (`examples/policies/strict-js`).
pub const STRICT_JS: Polyglot = Polyglot("strict-js");
/// `tests/polyglot/misbehave-python`, built as the example is (`--stub-wasi`).
pub const MISBEHAVE_PYTHON: Polyglot = Polyglot("misbehave-python");
/// The same sources with componentize-py's defaults: it imports WASI.
pub const MISBEHAVE_PYTHON_WASI: Polyglot = Polyglot("misbehave-python-wasi");
/// `tests/polyglot/misbehave-js`, built as the example is (no optional feature).
pub const MISBEHAVE_JS: Polyglot = Polyglot("misbehave-js");
/// The same sources with componentize-js's default features: it imports WASI.
pub const MISBEHAVE_JS_WASI: Polyglot = Polyglot("misbehave-js-wasi");

impl Polyglot {
    /// The component file; panics, saying how to build it, when it is missing.
    pub fn path(self) -> PathBuf {
        let path = PathBuf::from(TESTS_DIR)
            .join("../target/policies")
            .join(format!("{}.wasm", self.0));
        assert!(
            path.exists(),
            "{} is missing: `make test` builds the Python and JavaScript components \
             (make polyglot builds only them)",
            path.display()
        );
        path
    }
}

impl std::fmt::Display for Polyglot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}
