//! The first-seen store: when this host first saw each lock id, by its own
//! clock. It lets the `unrefreshed` rule work whatever the lock writer's clock
//! says: a live holder replaces its lock (new id) every 5 minutes, so an id
//! seen for longer than `stale-after` belongs to a holder that stopped.
//!
//! One small JSON file per repository under the state directory, named by the
//! repository id. Each update happens under an exclusive `flock` on a sibling
//! `.lock` file (so two lockwarden processes on one repository take turns),
//! writes a temporary file and renames it into place, and prunes ids that are
//! gone.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use rustix::fs::{FlockOperation, flock};
use serde::{Deserialize, Serialize};

use crate::files::{ReadError, read_regular_file};
use crate::repo::LockSet;

use crate::time::{format_rfc3339, parse_rfc3339};

/// Why the store could not be used.
#[derive(Debug, thiserror::Error)]
#[error("first-seen store {path}: {cause}")]
pub struct FirstSeenError {
    path: String,
    cause: FirstSeenCause,
}

/// What failed in the store, after the path [`FirstSeenError`] names.
#[derive(Debug, thiserror::Error)]
pub enum FirstSeenCause {
    /// The directory cannot be created.
    #[error("cannot create the directory: {0}")]
    CreateDir(std::io::Error),
    /// The directory is not private to this user.
    #[error("refusing the state directory: {0}")]
    NotPrivate(crate::files::PrivateDirError),
    /// The state file's lock cannot be taken.
    #[error("cannot lock: {0}")]
    Lock(std::io::Error),
    /// The state file cannot be read.
    #[error("cannot read: it {0}")]
    Read(ReadError),
    /// The state file is no state.
    #[error("is damaged ({0}); move it away to start afresh")]
    Damaged(serde_json::Error),
    /// The state cannot be written.
    #[error("cannot write: {0}")]
    Write(std::io::Error),
}

/// First-seen times, one file per repository, under one directory.
#[derive(Debug, Clone)]
pub struct FirstSeenStore {
    dir: PathBuf,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct StateFile {
    repository: String,
    /// Lock id -> RFC 3339 time first seen (for people; the clock-step-proof
    /// record is `seen_since_boot`).
    first_seen: BTreeMap<String, String>,
    /// The kernel's boot id when these were recorded.
    #[serde(default)]
    boot_id: Option<String>,
    /// Lock id -> CLOCK_BOOTTIME (ns) at first sight: elapsed time that no
    /// wall-clock step can change, valid while `boot_id` is this boot's.
    #[serde(default)]
    seen_since_boot: BTreeMap<String, i64>,
}

/// How far the wall-clock record may drift from the elapsed-time record
/// before the wall clock counts as stepped since.
const STEP_TOLERANCE: i64 = 5_000_000_000;

/// This boot's id, if the kernel says.
fn boot_id() -> Option<String> {
    read_regular_file(Path::new("/proc/sys/kernel/random/boot_id"), 64)
        .ok()
        .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        .filter(|id| !id.is_empty())
}

/// Nanoseconds since boot, suspend included.
fn since_boot() -> i64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    t.tv_sec
        .saturating_mul(1_000_000_000)
        .saturating_add(t.tv_nsec)
}

impl FirstSeenStore {
    /// The default directory: `$XDG_STATE_HOME/lockwarden`, else
    /// `~/.local/state/lockwarden`.
    pub fn default_dir() -> Option<PathBuf> {
        crate::xdg::lockwarden_dir("XDG_STATE_HOME", ".local/state")
    }

    /// A store in `dir` (created on first use).
    pub fn new(dir: PathBuf) -> Self {
        FirstSeenStore { dir }
    }

    /// The state file of repository `repo_id`.
    pub fn path(&self, repo_id: &str) -> PathBuf {
        // Repository ids are hex; anything else is made safe for a file name.
        let safe: String = repo_id
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        self.dir.join(format!("{safe}.json"))
    }

    /// Records `now` for every lock and unreadable file not seen before,
    /// forgets ids no longer present, and sets each one's `first_seen`. Elapsed time is kept by
    /// the boot-time clock, so a wall-clock step between two checks cannot
    /// make a lock look older than it is; a record from another boot starts
    /// afresh.
    pub fn observe(
        &self,
        repo_id: &str,
        set: &mut LockSet,
        now: i64,
    ) -> Result<(), FirstSeenError> {
        let path = self.path(repo_id);
        let fail = |cause: FirstSeenCause| FirstSeenError {
            path: path.display().to_string(),
            cause,
        };
        crate::files::create_private_dir(&self.dir)
            .map_err(|e| fail(FirstSeenCause::CreateDir(e)))?;
        crate::files::check_private_dir(&self.dir).map_err(|e| FirstSeenError {
            path: self.dir.display().to_string(),
            cause: FirstSeenCause::NotPrivate(e),
        })?;
        let guard =
            lock_file(&path.with_extension("lock")).map_err(|e| fail(FirstSeenCause::Lock(e)))?;
        let mut state = read_state(&path).map_err(fail)?;
        let boot = boot_id();
        let clocks = Clocks {
            now,
            uptime: since_boot(),
            same_boot: boot.is_some() && state.boot_id == boot,
        };
        let mut next = BTreeMap::new();
        let mut next_boot = BTreeMap::new();
        let locks = set.locks.iter_mut().map(|l| (&l.id, &mut l.first_seen));
        let files = set
            .unreadable
            .iter_mut()
            .map(|u| (&u.id, &mut u.first_seen));
        for (id, first_seen) in locks.chain(files) {
            let wall = state
                .first_seen
                .remove(id)
                .and_then(|t| parse_rfc3339(&t).ok());
            let since_boot = state.seen_since_boot.remove(id);
            let (seen, seen_boot) = clocks.first_sight(wall, since_boot);
            *first_seen = Some(seen);
            next.insert(id.clone(), format_rfc3339(seen));
            next_boot.insert(id.clone(), seen_boot);
        }
        state.repository = repo_id.to_owned();
        state.first_seen = next;
        state.boot_id = boot;
        state.seen_since_boot = next_boot;
        serde_json::to_vec_pretty(&state)
            .map_err(std::io::Error::other)
            .and_then(|bytes| crate::files::write_atomically(&path, &bytes))
            .map_err(|e| fail(FirstSeenCause::Write(e)))?;
        drop(guard);
        Ok(())
    }
}

/// The state file at `path`; none yet is an empty one. The error is the
/// cause, for a [`FirstSeenError`].
fn read_state(path: &Path) -> Result<StateFile, FirstSeenCause> {
    match read_regular_file(path, crate::limits::FIRST_SEEN_STATE) {
        Ok(bytes) => serde_json::from_slice::<StateFile>(&bytes).map_err(FirstSeenCause::Damaged),
        Err(ReadError::NotFound) => Ok(StateFile::default()),
        Err(e) => Err(FirstSeenCause::Read(e)),
    }
}

/// The clocks of one observation.
struct Clocks {
    /// Wall-clock time, ns since the epoch.
    now: i64,
    /// Boot-time clock, ns since boot.
    uptime: i64,
    /// Whether the state file was written in this boot.
    same_boot: bool,
}

impl Clocks {
    /// When a lock was first seen, as (wall-clock, boot-time) ns, from what
    /// the state file recorded for it (`wall`, `since_boot`).
    fn first_sight(&self, wall: Option<i64>, since_boot: Option<i64>) -> (i64, i64) {
        let Clocks {
            now,
            uptime,
            same_boot,
        } = *self;
        match (wall, since_boot) {
            // Elapsed time since the first sight, by a clock no step
            // moves; the wall-clock record only while it agrees.
            (Some(wall), Some(at)) if same_boot && at <= uptime => {
                let elapsed = now.saturating_sub(uptime.saturating_sub(at));
                let seen = if (wall - elapsed).abs() <= STEP_TOLERANCE {
                    wall
                } else {
                    elapsed
                };
                (seen, at)
            }
            // Recorded in another boot (or by an older lockwarden): how
            // much time passed is unknown, so the lock is new again.
            _ => (now, uptime),
        }
    }
}

/// Holds an exclusive flock on `path` until dropped; a link planted there is
/// refused, not followed.
fn lock_file(path: &Path) -> std::io::Result<File> {
    let file = crate::files::open_nofollow_for_lock(path)?;
    flock(&file, FlockOperation::LockExclusive)?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::contract::{UnreadableLock, test_lock};

    /// Locks with these ids.
    fn locks(ids: &[&str]) -> LockSet {
        LockSet {
            locks: ids.iter().map(|id| test_lock(id)).collect(),
            ..LockSet::default()
        }
    }

    fn seen(set: &LockSet) -> Vec<Option<i64>> {
        let locks = set.locks.iter().map(|l| l.first_seen);
        locks
            .chain(set.unreadable.iter().map(|u| u.first_seen))
            .collect()
    }

    #[test]
    fn remembers_first_sight_and_prunes_what_is_gone() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = FirstSeenStore::new(dir.path().join("state"));
        let mut first = locks(&["a", "b"]);
        store.observe("repo", &mut first, 100).expect("observe");
        assert_eq!(seen(&first), [Some(100), Some(100)]);

        // A new process, later: "a" keeps its time, "c" is new, "b" is gone.
        let again = FirstSeenStore::new(dir.path().join("state"));
        let mut second = locks(&["a", "c"]);
        again.observe("repo", &mut second, 500).expect("observe");
        assert_eq!(seen(&second), [Some(100), Some(500)]);
        let text = std::fs::read_to_string(again.path("repo")).expect("state file");
        assert!(!text.contains("\"b\""), "pruned: {text}");

        std::fs::write(again.path("repo"), "{not json").expect("damage");
        let err = again
            .observe("repo", &mut second, 600)
            .expect_err("damaged file");
        assert!(err.to_string().contains("move it away"), "{err}");
    }

    #[test]
    fn unreadable_files_are_remembered_too() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = FirstSeenStore::new(dir.path().join("state"));
        let unreadable = |id: &str| UnreadableLock {
            id: id.into(),
            size: 0,
            problem: "empty file".into(),
            stored_at: None,
            first_seen: None,
        };
        let mut first = LockSet {
            locks: vec![test_lock("a")],
            unreadable: vec![unreadable("bad")],
            ..LockSet::default()
        };
        store.observe("repo", &mut first, 100).expect("observe");
        let mut later = LockSet {
            locks: Vec::new(),
            unreadable: vec![unreadable("bad"), unreadable("new")],
            ..LockSet::default()
        };
        store.observe("repo", &mut later, 900).expect("observe");
        assert_eq!(seen(&later), [Some(100), Some(900)]);
    }

    #[test]
    fn a_wall_clock_step_does_not_age_a_lock() {
        const DAY: i64 = 86_400 * 1_000_000_000;
        let dir = tempfile::tempdir().expect("temp dir");
        let store = FirstSeenStore::new(dir.path().join("state"));
        // First seen while the clock was a day behind; corrected since.
        let mut locks = locks(&["a"]);
        store
            .observe("repo", &mut locks, 10 * DAY - DAY)
            .expect("observe");
        store
            .observe("repo", &mut locks, 10 * DAY)
            .expect("observe");
        let seen = locks.locks[0].first_seen.expect("seen");
        assert!(
            10 * DAY - seen < 60 * 1_000_000_000,
            "aged by the step: {seen}"
        );

        // A record from another boot starts afresh.
        let file = store.path("repo");
        let text = std::fs::read_to_string(&file).expect("state");
        let mut doc: serde_json::Value = serde_json::from_str(&text).expect("json");
        doc["boot_id"] = serde_json::json!("another-boot");
        doc["first_seen"]["a"] = serde_json::json!(format_rfc3339(DAY));
        std::fs::write(&file, doc.to_string()).expect("write");
        store
            .observe("repo", &mut locks, 10 * DAY)
            .expect("observe");
        assert_eq!(locks.locks[0].first_seen, Some(10 * DAY));
    }

    #[test]
    fn refuses_a_shared_state_dir_and_planted_links() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("temp dir");
        let shared = dir.path().join("shared");
        std::fs::create_dir(&shared).expect("mkdir");
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
        let err = FirstSeenStore::new(shared)
            .observe("repo", &mut locks(&["a"]), 1)
            .expect_err("world-writable");
        assert!(err.to_string().contains("writable by others"), "{err}");

        let private = dir.path().join("private");
        let store = FirstSeenStore::new(private.clone());
        store
            .observe("repo", &mut locks(&["a"]), 1)
            .expect("observe");
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "root's file").expect("write");
        std::fs::remove_file(private.join("repo.lock")).expect("rm");
        std::os::unix::fs::symlink(&victim, private.join("repo.lock")).expect("plant");
        assert!(store.observe("repo", &mut locks(&["a"]), 2).is_err());
        assert_eq!(
            std::fs::read_to_string(&victim).expect("victim"),
            "root's file"
        );
    }
}
