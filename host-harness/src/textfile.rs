//! `check --textfile DIR`: the check's result in node-exporter's textfile
//! format, for cron users who do not run `watch`.
//!
//! One file per repository, `lockwarden_<key>.prom`, where the key is the
//! first 12 hex digits of the SHA-256 of the location with any password
//! redacted: it is the same whether the check succeeds or fails (the
//! repository id sits in the encrypted config, unknown with a wrong
//! password), so a failure replaces the last success with
//! `lockwarden_check_success 0`, and several cron jobs can share one
//! directory. The metric names are `watch`'s where they mean the same,
//! labelled `repository_id` instead of a configured name.
//!
//! The file is written atomically: a new temporary file in DIR (created
//! exclusively, so no planted link is followed), renamed over the old one.
//! DIR itself may be a symlink to a directory; in it, a target name that is
//! anything but a regular file (a symlink, a FIFO, a directory) is refused.

use std::io::Write;
use std::path::{Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
use sha2::{Digest, Sha256};

use crate::warden::Report;
use crate::watch::metrics::help;

/// Why the textfile was not written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write the textfile {}: {cause}", crate::text::escape(&path.display().to_string()))]
pub struct TextfileError {
    /// The file that was to be written.
    pub path: PathBuf,
    /// Why.
    pub cause: String,
}

/// The key of the repository at `redacted_location` (its location with any
/// password replaced): 12 hex digits of its hash, the same whether the check
/// succeeds or fails, and the same for every spelling of one repository
/// ([`crate::repo::backend::identity`]).
pub fn key(redacted_location: &str) -> String {
    let canonical = crate::repo::backend::identity(redacted_location);
    hex::encode(Sha256::digest(canonical.as_bytes()))[..12].to_owned()
}

/// The file a repository of key `key` writes: `lockwarden_<key>.prom`.
pub fn file_name(key: &str) -> String {
    format!("lockwarden_{key}.prom")
}

/// The metrics of a check of the repository `key` that ended at `now` (ns):
/// with its report, or none when it failed. Every sample carries the `key`
/// label, so the files of several repositories in one directory never
/// repeat a series (node-exporter refuses duplicates).
pub fn render(key: &str, report: Option<&Report>, now: i64) -> String {
    let mut out = String::new();
    let mut metric = |name: &str, help: &str, samples: &[(String, String)]| {
        out += &format!("# HELP lockwarden_{name} {help}\n# TYPE lockwarden_{name} gauge\n");
        for (labels, value) in samples {
            out += &format!("lockwarden_{name}{labels} {value}\n");
        }
    };
    let seconds = |nanos: i64| format!("{}", nanos as f64 / 1e9);
    let key = label_value(key);
    let keyed = format!("{{key=\"{key}\"}}");
    metric(
        "check_success",
        "1 if the last check succeeded, else 0",
        &[(keyed.clone(), u8::from(report.is_some()).to_string())],
    );
    metric(
        "last_check_timestamp_seconds",
        "Unix time of the last check, successful or not",
        &[(keyed, seconds(now))],
    );
    let Some(report) = report else {
        return out;
    };
    let a = &report.assessment;
    let id = label_value(&report.repository.id);
    let labels = format!("{{key=\"{key}\",repository_id=\"{id}\"}}");
    let count = |n: usize| n.to_string();
    let kinds: Vec<(String, String)> = a
        .verdicts
        .lock_kinds()
        .iter()
        .map(|(kind, n)| {
            (
                format!("{{key=\"{key}\",repository_id=\"{id}\",kind=\"{kind}\"}}"),
                count(*n),
            )
        })
        .collect();
    metric("locks", help::LOCKS, &kinds);
    let stale = a.verdicts.stale().count();
    metric(
        "stale_locks_not_removed",
        "Locks judged stale but still there (check removes nothing)",
        &[(labels.clone(), count(stale))],
    );
    metric(
        "unreadable_locks",
        help::UNREADABLE_LOCKS,
        &[(labels.clone(), count(a.verdicts.unreadable.len()))],
    );
    let oldest = a.oldest_lock_age();
    metric(
        "oldest_lock_age_seconds",
        help::OLDEST_LOCK_AGE,
        &[(labels, seconds(oldest))],
    );
    out
}

/// A label value escaped as the text format wants: backslash, double quote
/// and newline.
fn label_value(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Writes `content` to `dir/name` atomically (mode 0644 less the umask:
/// node-exporter often runs as another user); returns the path.
pub fn write(dir: &Path, name: &str, content: &str) -> Result<PathBuf, TextfileError> {
    let path = dir.join(name);
    let fail = |cause: String| TextfileError {
        path: path.clone(),
        cause,
    };
    let handle = Dir::open_ambient_dir(dir, ambient_authority())
        .map_err(|e| fail(format!("cannot open the directory: {e}")))?;
    match handle.symlink_metadata(name) {
        Ok(meta) if !meta.is_file() => {
            let what = if meta.is_symlink() {
                "a symlink"
            } else if meta.is_dir() {
                "a directory"
            } else {
                "a special file (a FIFO, a socket or a device)"
            };
            return Err(fail(format!(
                "it is {what}, not a regular file; remove it and run again"
            )));
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(fail(e.to_string())),
    }
    let temp = format!(".{name}.{}-{}.tmp", std::process::id(), crate::time::now());
    let written = (|| -> std::io::Result<()> {
        let mut file = handle.open_with(
            &temp,
            OpenOptions::new().write(true).create_new(true).mode(0o644),
        )?;
        file.write_all(content.as_bytes())?;
        file.sync_all()?;
        handle.rename(&temp, &handle, name)
    })();
    if let Err(e) = written {
        let _ = handle.remove_file(&temp);
        return Err(fail(e.to_string()));
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::{Action, Repository, Verdict, test_lock};
    use crate::runtime::Verdicts;
    use crate::warden::{Act, Assessment};

    fn report(id: &str) -> Report {
        let keep = Verdict {
            action: Action::Keep,
            rule: "fresh".into(),
            reason: "r".into(),
        };
        let remove = Verdict {
            action: Action::Remove,
            ..keep.clone()
        };
        let mut exclusive = test_lock("b");
        exclusive.exclusive = true;
        Report {
            repository: Repository {
                id: id.into(),
                location: "rest:http://u:SECRET@h/".into(),
                backend: "rest".into(),
                version: 2,
            },
            act: Act::Judge,
            assessment: Assessment {
                now: 90 * 1_000_000_000,
                verdicts: Verdicts {
                    locks: vec![(test_lock("a"), keep), (exclusive, remove)],
                    unreadable: Vec::new(),
                },
                logs: Vec::new(),
                shadow: None,
            },
            removals: Vec::new(),
        }
    }

    #[test]
    fn the_format_and_its_escaping() {
        let text = render("k1", Some(&report("c0ffee")), 1_500_000_000);
        for line in [
            "# TYPE lockwarden_check_success gauge",
            r#"lockwarden_check_success{key="k1"} 1"#,
            r#"lockwarden_last_check_timestamp_seconds{key="k1"} 1.5"#,
            r#"lockwarden_locks{key="k1",repository_id="c0ffee",kind="exclusive"} 1"#,
            r#"lockwarden_locks{key="k1",repository_id="c0ffee",kind="shared"} 1"#,
            r#"lockwarden_stale_locks_not_removed{key="k1",repository_id="c0ffee"} 1"#,
            r#"lockwarden_unreadable_locks{key="k1",repository_id="c0ffee"} 0"#,
            r#"lockwarden_oldest_lock_age_seconds{key="k1",repository_id="c0ffee"} 90"#,
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "{line} missing from\n{text}"
            );
        }
        assert!(!text.contains("SECRET"), "{text}");
        let odd = render("k1", Some(&report("a\"b\\c\nd")), 0);
        assert!(odd.contains(r#",repository_id="a\"b\\c\nd"}"#), "{odd}");
        let failed = render("k1", None, 2_000_000_000);
        assert!(
            failed.contains("lockwarden_check_success{key=\"k1\"} 0\n"),
            "{failed}"
        );
        assert!(!failed.contains("repository_id"), "{failed}");
    }

    #[test]
    fn writes_atomically_and_refuses_what_is_not_a_regular_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let name = file_name(&key("/srv/restic"));
        assert!(name.starts_with("lockwarden_") && name.ends_with(".prom") && name.len() == 28);
        let path = write(dir.path(), &name, "one\n").expect("written");
        write(dir.path(), &name, "two\n").expect("replaced");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "two\n");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(
            names,
            [std::ffi::OsString::from(&name)],
            "no temporary file left"
        );
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").expect("write");
        std::fs::remove_file(&path).expect("remove");
        std::os::unix::fs::symlink(&victim, &path).expect("symlink");
        let err = write(dir.path(), &name, "x")
            .expect_err("a symlink")
            .to_string();
        assert!(err.contains("a symlink"), "{err}");
        assert_eq!(
            std::fs::read_to_string(&victim).expect("victim"),
            "precious"
        );
        assert!(write(&victim, &name, "x").is_err(), "not a directory");
    }
}
