//! Go, as the tests and the benches run it: the Go host's module
//! (`hosts/go`) and a `go` command that builds it offline.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::TESTS_DIR;

/// The Go host's module.
pub fn host_module() -> PathBuf {
    Path::new(TESTS_DIR).join("../hosts/go")
}

/// A `go` command in `dir` that builds without network, toolchain
/// downloads or a go.work, and without cgo (`make setup` downloaded the
/// modules), stopped after 15 minutes.
pub fn go(dir: &Path) -> Command {
    let mut command = Command::new("timeout");
    command
        .args(["900", "go"])
        .current_dir(dir)
        .env("GOTOOLCHAIN", "local")
        .env("GOWORK", "off")
        .env("GOPROXY", "off")
        .env("GOFLAGS", "-mod=readonly -buildvcs=false")
        .env("CGO_ENABLED", "0");
    command
}
