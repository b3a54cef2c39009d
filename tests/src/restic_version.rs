//! Which restic the tests run, and what differs between its versions.
//!
//! `LOCKWARDEN_TEST_RESTIC` names the binary, as an absolute path; unset, it
//! is `restic` from `PATH`. `make test` runs the end-to-end suite with
//! restic 0.19 (built by `scripts/go-tools.sh restic`), and the tests that
//! compare restic's own behaviour with Debian 12's 0.14 (from `PATH`) and
//! Debian 13's 0.18 too (the Makefile says which and why). Every
//! test runs restic through [`restic_program`], and asks [`ResticVersion`]
//! what that restic does where versions differ, instead of accepting either
//! behaviour.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The variable naming the restic binary the tests run.
pub const RESTIC_VARIABLE: &str = "LOCKWARDEN_TEST_RESTIC";

/// The restic binary the tests run, as an absolute path: the one
/// [`RESTIC_VARIABLE`] names, else `restic` from `PATH`. Read once.
pub fn restic_program() -> &'static Path {
    static PROGRAM: OnceLock<PathBuf> = OnceLock::new();
    PROGRAM.get_or_init(|| match std::env::var_os(RESTIC_VARIABLE) {
        Some(path) => {
            let path = PathBuf::from(path);
            assert!(
                path.is_absolute() && path.is_file(),
                "{RESTIC_VARIABLE}={} is not the absolute path of a file",
                path.display()
            );
            path
        }
        None => on_path("restic").unwrap_or_else(|| {
            panic!("no restic in PATH: install it (make setup) or set {RESTIC_VARIABLE}")
        }),
    })
}

/// The first executable file called `name` in a directory of `PATH`.
fn on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|file| {
            file.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// The version of [`restic_program`], from `restic version`. Read once.
pub fn restic_version() -> ResticVersion {
    static VERSION: OnceLock<ResticVersion> = OnceLock::new();
    *VERSION.get_or_init(|| {
        let out = Command::new(restic_program())
            .arg("version")
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", restic_program().display()));
        let text = String::from_utf8_lossy(&out.stdout);
        ResticVersion::parse(&text)
            .unwrap_or_else(|| panic!("`restic version` said {text:?}, no version"))
    })
}

/// A restic release, as `restic version` names it (`restic 0.18.0 compiled
/// with go1.24.4 on linux/amd64`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ResticVersion {
    /// 0 for every restic so far.
    pub major: u32,
    /// 14 for Debian 12's restic, 18 for Debian 13's.
    pub minor: u32,
    /// The patch release.
    pub patch: u32,
}

impl ResticVersion {
    /// Parses `restic X.Y.Z ...` (a suffix such as `-dev` is ignored).
    pub fn parse(text: &str) -> Option<ResticVersion> {
        let mut words = text.split_whitespace();
        (words.next()? == "restic").then_some(())?;
        let mut numbers = words.next()?.split('.').map(|part| {
            let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
            digits.parse::<u32>().ok()
        });
        Some(ResticVersion {
            major: numbers.next()??,
            minor: numbers.next()??,
            patch: numbers.next().flatten().unwrap_or(0),
        })
    }

    /// Whether this is `0.minor` or later.
    fn since(self, minor: u32) -> bool {
        self >= ResticVersion {
            major: 0,
            minor,
            patch: 0,
        }
    }

    /// restic's exit code when a lock blocks it: 1 up to 0.16, 11 from 0.17.
    pub fn locked_exit_code(self) -> i32 {
        if self.since(17) { 11 } else { 1 }
    }

    /// What `restic unlock` prints on stdout after removing `removed` locks:
    /// `successfully removed locks` up to 0.14 (whatever it removed);
    /// `successfully removed N locks` from 0.15, and nothing when N is 0.
    pub fn unlock_message(self, removed: usize) -> String {
        match (self.since(15), removed) {
            (false, _) => "successfully removed locks\n".into(),
            (true, 0) => String::new(),
            (true, n) => format!("successfully removed {n} locks\n"),
        }
    }

    /// Whether `--json` makes restic report a failure as one JSON object on
    /// stderr (`{"message_type":"exit_error","code":11,"message":...}`):
    /// from 0.18; earlier versions print the plain message.
    pub fn prints_json_errors(self) -> bool {
        self.since(18)
    }
}

impl std::fmt::Display for ResticVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

#[cfg(test)]
mod tests {
    use super::ResticVersion;

    #[test]
    fn parses_what_restic_version_prints() {
        let cases = [
            (
                "restic 0.14.0 compiled with go1.19.8 on linux/amd64\n",
                Some((0, 14, 0)),
            ),
            (
                "restic 0.18.0 compiled with go1.24.4 on linux/amd64",
                Some((0, 18, 0)),
            ),
            (
                "restic 0.19.1-dev (compiled manually) compiled with go1.25",
                Some((0, 19, 1)),
            ),
            ("restic 0.17", Some((0, 17, 0))),
            ("rustic 0.18.0", None),
            ("restic", None),
            ("", None),
        ];
        for (text, want) in cases {
            let got = ResticVersion::parse(text).map(|v| (v.major, v.minor, v.patch));
            assert_eq!(got, want, "{text:?}");
        }
    }

    #[test]
    fn what_differs_by_version() {
        // (minor, exit code when locked, JSON errors)
        for (minor, locked, json) in [
            (14, 1, false),
            (16, 1, false),
            (17, 11, false),
            (18, 11, true),
        ] {
            let version = ResticVersion {
                major: 0,
                minor,
                patch: 0,
            };
            assert_eq!(version.locked_exit_code(), locked, "{version}");
            assert_eq!(version.prints_json_errors(), json, "{version}");
        }
    }

    #[test]
    fn unlock_counts_what_it_removed_from_0_15() {
        let at = |minor| ResticVersion {
            major: 0,
            minor,
            patch: 0,
        };
        assert_eq!(at(14).unlock_message(0), "successfully removed locks\n");
        assert_eq!(at(14).unlock_message(3), "successfully removed locks\n");
        assert_eq!(at(15).unlock_message(0), "");
        assert_eq!(at(18).unlock_message(3), "successfully removed 3 locks\n");
    }
}
