//! The one way lockwarden's build scripts build WebAssembly components.
//!
//! `host-harness/build.rs` builds the default policy the binary embeds;
//! `tests/build.rs` builds every component the end-to-end tests load. Each
//! calls [`build`] once, and [`build`] runs one `cargo build` for all the
//! packages it is given:
//!
//! - for `wasm32-wasip2` with the workspace's `wasm` profile, after checking
//!   that the target is installed, and with none of the outer build's host
//!   flags or wrappers ([`CLEARED`]);
//! - into one target directory for every build script and outer profile,
//!   `wasm-guests` in the outer target directory ([`target_dir`]), so that
//!   the guests' dependencies (wit-bindgen and its proc macros) compile once
//!   per target directory, not once per build script and outer profile (a
//!   lock of its own makes two build scripts take turns at building and
//!   copying); each component is then copied into the calling build
//!   script's `OUT_DIR`, only when its bytes changed, so that what a build
//!   embeds or names is its own and changes only when it does;
//! - then printing `cargo::rerun-if-changed` for every source file listed in
//!   the dep-info (`.d`) file cargo writes next to each component, for the
//!   manifest of each package those files belong to, and for the workspace's
//!   `Cargo.toml` (the `wasm` profile), `Cargo.lock` (the wit-bindgen
//!   version), `.cargo/config.toml` (the guests' rustflags) and `wit/`. cargo
//!   check, clippy and rust-analyzer therefore run the nested build again only
//!   when one of its inputs changed.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The target every component is built for.
pub const TARGET: &str = "wasm32-wasip2";

/// The cargo profile they are built with: `[profile.wasm]` in the workspace's
/// `Cargo.toml`.
pub const PROFILE: &str = "wasm";

/// What cargo sets for the outer (host) build that must not reach the nested
/// one: host rustflags, compiler wrappers (clippy's, say), the outer target
/// and target directory, and the outer jobserver.
pub const CLEARED: [&str; 8] = [
    "RUSTFLAGS",
    "CARGO_ENCODED_RUSTFLAGS",
    "RUSTC_WORKSPACE_WRAPPER",
    "RUSTC_WRAPPER",
    "CARGO_BUILD_TARGET",
    "CARGO_TARGET_DIR",
    "CARGO_MAKEFLAGS",
    "MAKEFLAGS",
];

/// Builds `packages`, members of the workspace whose root directory is
/// `workspace`, as components in one `cargo build`; prints what makes cargo
/// run the calling build script again; returns the path of each package's
/// component, in the order given, inside `OUT_DIR`.
///
/// On failure (the target is not installed, a package does not compile) it
/// tells cargo why and exits, which fails the calling build script.
pub fn build(workspace: &Path, packages: &[&str]) -> Vec<PathBuf> {
    require_target();
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_else(|| {
        fail("OUT_DIR is not set: lockwarden-guest-build runs in build scripts")
    }));
    let target_dir = target_dir(&out_dir);
    let _turn = take_turn(&target_dir);
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .current_dir(workspace)
        .args(["build", "--quiet", "--target", TARGET, "--profile", PROFILE])
        .arg("--target-dir")
        .arg(&target_dir);
    for package in packages {
        command.args(["--package", package]);
    }
    for name in CLEARED {
        command.env_remove(name);
    }
    let names = packages.join(", ");
    match command.status() {
        Ok(status) if status.success() => {}
        Ok(status) => {
            // A non-zero exit: cargo then shows the nested cargo's messages.
            println!(
                "cargo::error=building {names} for {TARGET} failed ({status}): \
                 the compiler's messages follow"
            );
            std::process::exit(1)
        }
        Err(e) => fail(&format!("cannot run cargo to build {names}: {e}")),
    }

    let built = target_dir.join(TARGET).join(PROFILE);
    let mut inputs = Inputs::new(workspace, [out_dir.as_path(), target_dir.as_path()]);
    let components = packages
        .iter()
        .map(|package| {
            let component = built.join(format!("{}.wasm", package.replace('-', "_")));
            if !component.is_file() {
                fail(&format!(
                    "building {package} produced no {}: is it a cdylib?",
                    component.display()
                ));
            }
            inputs.dep_info(&component.with_extension("d"));
            own_copy(&component, &out_dir)
        })
        .collect();
    inputs.print();
    components
}

/// Where the guests are built: `wasm-guests` in the outer build's target
/// directory, the nearest directory above `out_dir` that cargo marked as
/// one (its `CACHEDIR.TAG`); `out_dir` itself where there is none.
fn target_dir(out_dir: &Path) -> PathBuf {
    let outer = out_dir
        .ancestors()
        .find(|dir| dir.join("CACHEDIR.TAG").is_file());
    match outer {
        Some(outer) => outer.join("wasm-guests"),
        None => out_dir.join("wasm"),
    }
}

/// Waits for, then holds until dropped, this machine's one turn at
/// `target_dir`: a build and the copying of what it built, so that no other
/// build script (another checkout's or toolchain's sharing the directory)
/// relinks a component between the two.
fn take_turn(target_dir: &Path) -> std::fs::File {
    let fail_with =
        |e: std::io::Error| -> ! { fail(&format!("cannot lock {}: {e}", target_dir.display())) };
    std::fs::create_dir_all(target_dir).unwrap_or_else(|e| fail_with(e));
    let file = std::fs::File::create(target_dir.join("lockwarden-guests.lock"))
        .unwrap_or_else(|e| fail_with(e));
    file.lock().unwrap_or_else(|e| fail_with(e));
    file
}

/// `component` copied into `out_dir` (written only when its bytes differ
/// from the copy there, so its time changes only with them).
fn own_copy(component: &Path, out_dir: &Path) -> PathBuf {
    let copy = out_dir.join(component.file_name().expect("a component's file name"));
    let read = |path: &Path| std::fs::read(path).ok();
    let bytes =
        read(component).unwrap_or_else(|| fail(&format!("cannot read {}", component.display())));
    if read(&copy).as_ref() != Some(&bytes) {
        std::fs::write(&copy, &bytes)
            .unwrap_or_else(|e| fail(&format!("cannot write {}: {e}", copy.display())));
    }
    copy
}

/// Fails early, with the command that fixes it, when the toolchain has no
/// standard library for [`TARGET`]: otherwise cargo would stop deep in the
/// build with "can't find crate for `core`".
fn require_target() {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let libdir = Command::new(&rustc)
        .args(["--print", "target-libdir", "--target", TARGET])
        .output();
    let installed = match libdir {
        Ok(out) if out.status.success() => {
            let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
            std::fs::read_dir(dir).is_ok_and(|mut entries| {
                entries.any(|entry| {
                    entry.is_ok_and(|e| e.file_name().to_string_lossy().starts_with("libstd-"))
                })
            })
        }
        _ => false,
    };
    if !installed {
        fail(&format!(
            "the {TARGET} target is not installed for this toolchain: \
             run `rustup target add {TARGET}` (`make setup` does)"
        ));
    }
}

/// Reports `message` to cargo as the build script's one error and exits: cargo
/// fails the build and shows just `message`.
fn fail(message: &str) -> ! {
    println!("cargo::error={message}");
    std::process::exit(0)
}

/// The files whose change makes the nested build's outputs stale.
struct Inputs<'a> {
    workspace: &'a Path,
    /// The calling build script's `OUT_DIR` and the guests' target
    /// directory: files written there during the build are newer than the
    /// build script's run, and watching them would run it again every time.
    generated: [&'a Path; 2],
    files: BTreeSet<PathBuf>,
}

impl<'a> Inputs<'a> {
    fn new(workspace: &'a Path, generated: [&'a Path; 2]) -> Self {
        let mut inputs = Inputs {
            workspace,
            generated,
            files: BTreeSet::new(),
        };
        for fixed in ["Cargo.toml", "Cargo.lock", ".cargo/config.toml", "wit"] {
            let path = workspace.join(fixed);
            if path.exists() {
                inputs.files.insert(path);
            }
        }
        inputs
    }

    /// Every file in the dep-info file `path`, and the manifest of each
    /// workspace package they belong to.
    fn dep_info(&mut self, path: &Path) {
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|e| fail(&format!("cannot read {}: {e}", path.display())));
        for file in dep_info_files(&text) {
            if self.generated.iter().any(|dir| file.starts_with(dir)) {
                continue;
            }
            if let Some(manifest) = self.manifest_of(&file) {
                self.files.insert(manifest);
            }
            self.files.insert(file);
        }
    }

    /// The `Cargo.toml` of the workspace package that holds `file`.
    fn manifest_of(&self, file: &Path) -> Option<PathBuf> {
        file.ancestors()
            .skip(1)
            .take_while(|dir| dir.starts_with(self.workspace))
            .map(|dir| dir.join("Cargo.toml"))
            .find(|manifest| manifest.is_file())
    }

    fn print(&self) {
        for file in &self.files {
            println!("cargo::rerun-if-changed={}", file.display());
        }
    }
}

/// The prerequisites listed in a makefile-style dep-info file, as cargo writes
/// them next to an artifact: `target: file file ...`, with a space inside a
/// path written `\ `.
fn dep_info_files(text: &str) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for line in text.lines().filter(|line| !line.starts_with('#')) {
        let Some((_, prerequisites)) = line.split_once(": ") else {
            continue;
        };
        let mut file = String::new();
        let mut chars = prerequisites.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\\' if chars.peek() == Some(&' ') => {
                    file.push(' ');
                    chars.next();
                }
                ' ' => {
                    if !file.is_empty() {
                        files.push(PathBuf::from(std::mem::take(&mut file)));
                    }
                }
                c => file.push(c),
            }
        }
        if !file.is_empty() {
            files.push(PathBuf::from(file));
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dep_info_lists_every_prerequisite_with_escaped_spaces() {
        let text = "/t/a.wasm: /w/plugin/src/lib.rs /w/my\\ dir/x.rs /w/wit/policy.wit\n\
                    \n\
                    # env-dep:CARGO_PKG_NAME=x\n\
                    /w/plugin/src/lib.rs:\n";
        assert_eq!(
            dep_info_files(text),
            [
                "/w/plugin/src/lib.rs",
                "/w/my dir/x.rs",
                "/w/wit/policy.wit"
            ]
            .map(PathBuf::from)
        );
    }

    #[test]
    fn a_file_belongs_to_the_nearest_manifest_inside_the_workspace() {
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("in the workspace");
        let out = workspace.join("target");
        let inputs = Inputs::new(workspace, [out.as_path(), out.as_path()]);
        assert!(inputs.files.contains(&workspace.join("Cargo.lock")));
        assert_eq!(
            inputs.manifest_of(&workspace.join("guest-build/src/lib.rs")),
            Some(workspace.join("guest-build/Cargo.toml"))
        );
        assert_eq!(inputs.manifest_of(Path::new("/elsewhere/src/lib.rs")), None);
    }
}
