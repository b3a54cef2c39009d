//! The cases of the backend suite: each takes a fresh [`Storage`], acts on
//! it through the real `lockwarden` binary, real `restic` and behind their
//! backs, and panics with what it saw when a promise is broken.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use super::Storage;
use super::storage::{cloud_prefix, shell_quote};
use crate::adversary::{pair, verdict};
use crate::guard::{Guarded, finish_guarded, wait_until};
use crate::lock_writer::{Encoding, LockSpec, LockWriter, time_from_now};
use crate::restic::{Holder, PASSWORD, TestRepo};
use crate::{Finished, parity};

use Verdict::{NotApplicable, Pass};
use lockwarden::case_table::Verdict;

/// A lock written two hours ago by a host that is not this one: stale by
/// restic's own rule.
fn stale_lock(storage: &Storage) -> String {
    LockWriter::new(&storage.repo).write(LockSpec {
        time: time_from_now(-2 * 3600),
        ..LockSpec::default()
    })
}

/// `lockwarden unlock` (with `extra`) to completion, under a hang guard.
fn unlock(storage: &Storage, extra: &[&str]) -> Finished {
    finish_guarded(storage.lockwarden("unlock").args(extra))
}

/// The locks restic lists (`restic list locks --no-lock`).
fn restic_lock_ids(storage: &Storage) -> BTreeSet<String> {
    let out = storage.repo.restic(&["list", "locks", "--no-lock"]);
    assert_eq!(out.code, 0, "restic list locks: {out:?}");
    out.stdout.lines().map(str::to_owned).collect()
}

/// restic's own locks are judged as restic judges them: a live holder's
/// lock is kept, a stale one removed, and restic's listing agrees.
pub fn restic_locks(storage: &Storage) -> Verdict {
    let stale = stale_lock(storage);
    let holder = Holder::start(&storage.repo);
    let out = unlock(storage, &[]);
    assert_eq!(out.code, 0, "{out:?}");
    let left = restic_lock_ids(storage);
    assert!(!left.contains(&stale), "the stale lock stayed: {out:?}");
    assert!(
        left.contains(&holder.lock_id),
        "the live holder's lock was removed: {out:?}"
    );
    let lock = holder.lock_id.clone();
    assert_eq!(holder.finish(), 0, "the holder's backup failed");
    assert!(!restic_lock_ids(storage).contains(&lock));
    Pass
}

/// A lock lockwarden writes (`hold`) appears whole, restic reads it and is
/// kept out by it, and nothing of it is left afterwards.
pub fn written_lock(storage: &Storage) -> Verdict {
    if !storage.properties.writable {
        return NotApplicable("lockwarden cannot write a lock there");
    }
    let restic = format!(
        "env {} {}",
        storage.restic_env_words(),
        shell_quote(
            &crate::restic_version::restic_program()
                .display()
                .to_string()
        )
    );
    let script = format!(
        "for id in $({restic} list locks --no-lock); do {restic} cat lock --no-lock $id || exit 7; done; \
         {restic} prune --dry-run >/dev/null 2>&1 && exit 8; exit 0"
    );
    let out =
        finish_guarded(
            storage
                .lockwarden("hold")
                .args(["--exclusive", "--", "sh", "-c", &script]),
        );
    assert_eq!(
        out.code, 0,
        "restic could not read the lock, or locked past it: {out:?}"
    );
    assert!(
        out.stdout.contains("\"exclusive\": true"),
        "restic printed no exclusive lock: {out:?}"
    );
    let left = storage.files("locks");
    assert!(left.is_empty(), "left in locks/ after hold: {left:?}");
    Pass
}

/// `locks/` that stands for `keys/` or `snapshots/` (a link where the
/// storage has links, copies of their files where it does not): nothing is
/// removed, the command says why and fails.
pub fn locks_standing_for_another_directory(storage: &Storage) -> Verdict {
    let backup = storage.repo.dir.path().join("data");
    std::fs::create_dir_all(&backup).expect("mkdir");
    std::fs::write(backup.join("f"), b"x").expect("write");
    let out = storage
        .repo
        .restic(&["backup", backup.to_str().expect("utf-8")]);
    assert_eq!(out.code, 0, "restic backup: {out:?}");
    let stale = stale_lock(storage);
    for other in ["keys", "snapshots"] {
        let before: Vec<_> = storage
            .files(other)
            .into_iter()
            .map(|f| (storage.read(&format!("{other}/{f}")), f))
            .collect();
        let restore = alias(storage, other);
        for command in ["check", "unlock"] {
            let out = finish_guarded(storage.lockwarden(command).arg("--json"));
            assert_eq!(out.code, 1, "{command} over locks/ -> {other}/: {out:?}");
            assert!(out.stderr.contains("locks/"), "{out:?}");
        }
        restore(storage);
        let after: Vec<_> = storage
            .files(other)
            .into_iter()
            .map(|f| (storage.read(&format!("{other}/{f}")), f))
            .collect();
        assert_eq!(before, after, "{other}/ changed");
        assert!(
            storage.files("locks").contains(&stale),
            "a lock was removed"
        );
    }
    Pass
}

/// Makes `locks/` stand for `other`: a symbolic link on a file system,
/// copies of `other`'s files on an object store. Returns what undoes it.
fn alias(storage: &Storage, other: &str) -> fn(&Storage) {
    if let Some(dir) = storage.fs() {
        std::fs::rename(dir.join("locks"), dir.join("locks.real")).expect("move locks/");
        std::os::unix::fs::symlink(other, dir.join("locks")).expect("symlink");
        return |storage| {
            let dir = storage.fs().expect("a directory");
            std::fs::remove_file(dir.join("locks")).expect("remove the link");
            std::fs::rename(dir.join("locks.real"), dir.join("locks")).expect("move back");
        };
    }
    for name in storage.files(other) {
        let bytes = storage.read(&format!("{other}/{name}")).expect("a file");
        storage.write(&format!("locks/{name}"), &bytes);
    }
    match other {
        "keys" => |storage| unalias(storage, "keys"),
        _ => |storage| unalias(storage, "snapshots"),
    }
}

/// Removes from `locks/` the copies of `other`'s files.
fn unalias(storage: &Storage, other: &str) {
    for name in storage.files(other) {
        storage.remove(&format!("locks/{name}"));
    }
}

/// A FIFO, a symbolic link (to a key file) and a directory under lock
/// names, all old, beside a stale lock: the stale lock goes, they stay,
/// and nobody waits on the FIFO.
pub fn entries_that_are_no_files(storage: &Storage) -> Verdict {
    let Some(dir) = storage.fs() else {
        return nested_object_under_a_lock_name(storage);
    };
    let stale = stale_lock(storage);
    let locks = dir.join("locks");
    let key = storage
        .files("keys")
        .into_iter()
        .next()
        .expect("a key file");
    let (fifo, link, sub) = ("f".repeat(64), "e".repeat(64), "d".repeat(64));
    crate::adversary::mkfifo(&locks.join(&fifo));
    std::os::unix::fs::symlink(format!("../keys/{key}"), locks.join(&link)).expect("symlink");
    std::fs::create_dir(locks.join(&sub)).expect("mkdir");
    for name in [&fifo, &link, &sub] {
        make_old(&locks.join(name));
    }
    let out = unlock(storage, &["--json"]);
    assert_eq!(out.code, 0, "{out:?}");
    let left = storage.files("locks");
    assert!(!left.contains(&stale), "the stale lock stayed: {out:?}");
    for name in [&fifo, &link, &sub] {
        assert!(left.contains(name), "{name} was removed: {out:?}");
    }
    assert!(storage.files("keys").contains(&key), "the key file went");
    if storage.properties.shows_special_files {
        let doc: serde_json::Value = serde_json::from_str(&out.stdout).expect("json");
        for name in [&fifo, &link, &sub] {
            let (action, rule) = crate::adversary::verdict(&doc, name);
            assert_eq!(
                (action.as_str(), rule.as_str()),
                ("keep", "not-a-lock-file")
            );
        }
    }
    Pass
}

/// On an object store, an object nested under a lock's name
/// (`locks/<id>/x`) is no lock file: ignored, never removed.
fn nested_object_under_a_lock_name(storage: &Storage) -> Verdict {
    let stale = stale_lock(storage);
    let nested = "d".repeat(64);
    storage.write(&format!("locks/{nested}/x"), b"nested");
    let out = unlock(storage, &[]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(!storage.files("locks").contains(&stale), "{out:?}");
    assert!(
        storage.read(&format!("locks/{nested}/x")).is_some(),
        "the nested object was removed"
    );
    Pass
}

/// Sets the modification time of `path` (a link itself, not its target)
/// to two hours ago.
fn make_old(path: &Path) {
    let status = std::process::Command::new("touch")
        .args(["-h", "-d", "2 hours ago"])
        .arg(path)
        .status()
        .expect("touch");
    assert!(status.success(), "touch -h {}", path.display());
}

/// Names no restic file has (a control character, dots, a key with an
/// empty or `..` part on an object store) are ignored without failing the
/// listing: the stale lock beside them is still removed.
pub fn odd_names(storage: &Storage) -> Verdict {
    use crate::fault_proxy::{Fault, FaultProxy, Filter};
    let stale = stale_lock(storage);
    let out = if let Some(dir) = storage.fs() {
        for name in ["x\u{1}y", "..x", "-rf", &"a".repeat(63)] {
            std::fs::write(dir.join("locks").join(name), b"odd").expect("write");
        }
        unlock(storage, &[])
    } else if ODD_KEYS.iter().all(|key| storage.put_raw(key, b"odd")) {
        unlock(storage, &[])
    } else {
        // Azurite takes no unsigned request: the proxy puts the odd keys
        // into its listing instead.
        let server = storage.http.as_deref().expect("an HTTP backend");
        let odd = Fault::Rewrite(&[("<Blobs>", AZURE_ODD_BLOBS)]);
        let proxy = FaultProxy::start(server, Filter::object_lock_listing(), odd);
        let out = finish_guarded(&mut storage.lockwarden_via(&proxy.addr, "unlock"));
        assert!(proxy.injected() > 0, "{:?}", proxy.seen());
        out
    };
    assert_eq!(out.code, 0, "an odd name failed the run: {out:?}");
    assert!(!storage.files("locks").contains(&stale), "{out:?}");
    Pass
}

/// Object keys under `locks/` that no file system holds and that object
/// stores keep as they are.
const ODD_KEYS: [&str; 4] = ["locks//x", "locks/../x", "locks/./x", "locks/\u{1}x"];

/// Azure blobs with odd names, as a listing page of Azurite's would hold
/// them (under the repository's prefix).
const AZURE_ODD_BLOBS: &str = concat!(
    "<Blobs>",
    "<Blob><Name>",
    cloud_prefix!(),
    "/locks//x</Name><Properties><Last-Modified>Mon, 01 Jan 2024 00:00:00 GMT</Last-Modified><Content-Length>1</Content-Length><Content-Type>application/octet-stream</Content-Type></Properties></Blob>",
    "<Blob><Name>",
    cloud_prefix!(),
    "/locks/../x</Name><Properties><Last-Modified>Mon, 01 Jan 2024 00:00:00 GMT</Last-Modified><Content-Length>1</Content-Length><Content-Type>application/octet-stream</Content-Type></Properties></Blob>",
    "<Blob><Name>",
    cloud_prefix!(),
    "/locks/&#x1;x</Name><Properties><Last-Modified>Mon, 01 Jan 2024 00:00:00 GMT</Last-Modified><Content-Length>1</Content-Length><Content-Type>application/octet-stream</Content-Type></Properties></Blob>",
);

/// A lock removed, and (on a file system) one replaced by a directory
/// holding a file, between the listing and the delete: the first is
/// "already gone", the second is not removed, and the directory and its
/// file stay.
pub fn changed_between_listing_and_delete(storage: &Storage) -> Verdict {
    let (gone, swapped) = (stale_lock(storage), stale_lock(storage));
    let paused = Paused::unlock(storage);
    storage.remove(&format!("locks/{gone}"));
    let directory = storage.fs().map(|dir| {
        let path = dir.join("locks").join(&swapped);
        std::fs::remove_file(&path).expect("remove");
        std::fs::create_dir(&path).expect("mkdir");
        std::fs::write(path.join("kept"), b"not a lock").expect("write");
        path
    });
    let out = paused.go();
    let doc: serde_json::Value =
        serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    let outcome = doc["removed"]
        .as_array()
        .and_then(|removed| removed.iter().find(|r| r["id"] == gone.as_str()))
        .map(|r| r["result"].clone());
    assert_eq!(outcome, Some("already gone".into()), "{out:?}");
    match directory {
        Some(path) => {
            // Over REST the server alone knows what a name is (rest-server
            // and rclone delete an empty directory asked to delete a
            // file): this one is not empty, so nothing may be lost.
            assert!(path.join("kept").is_file(), "the directory went: {out:?}");
            assert!(
                matches!(out.code, 0 | 1),
                "neither removed nor a failure: {out:?}"
            );
        }
        None => {
            assert_eq!(out.code, 0, "{out:?}");
            assert!(!storage.files("locks").contains(&swapped), "{out:?}");
        }
    }
    Pass
}

/// `lockwarden unlock --json`, paused after it listed and read the locks
/// and before it removes any: its hosts command says so, and waits for
/// [`Paused::go`].
struct Paused {
    running: Guarded,
    go: std::path::PathBuf,
    _sync: tempfile::TempDir,
}

impl Paused {
    fn unlock(storage: &Storage) -> Paused {
        let sync = tempfile::tempdir().expect("temp dir");
        let (listed, go) = (sync.path().join("listed"), sync.path().join("go"));
        let hook = format!(
            "touch {0}; i=0; while [ ! -e {1} ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; echo '[]'",
            shell_quote(&listed.display().to_string()),
            shell_quote(&go.display().to_string())
        );
        let mut command = storage.lockwarden("unlock");
        command.args([
            "--json",
            "--hosts-command",
            &hook,
            "--inventory-hosts",
            "^elsewhere$",
        ]);
        let running = Guarded::spawn(&mut command);
        wait_until("lockwarden listed the locks", || listed.exists());
        Paused {
            running,
            go,
            _sync: sync,
        }
    }

    /// Lets it go on, and waits for it to end.
    fn go(self) -> Finished {
        std::fs::write(&self.go, b"").expect("go");
        self.running
            .finish_within(Duration::from_secs(120), "unlock")
    }
}

/// `locks/` swapped, after the listing, for a link to a directory holding a
/// copy of a listed lock: nothing there is removed, and the run fails. Only
/// where lockwarden can look at `locks/` itself (a REST server or rclone
/// resolves names on its side; SECURITY.md says what that leaves).
pub fn lock_directory_swapped_after_listing(storage: &Storage) -> Verdict {
    let Some(dir) = storage.fs().map(Path::to_owned) else {
        return NotApplicable("no file system of ours");
    };
    if storage.properties.resolves_names_on_server {
        return NotApplicable("the server resolves names");
    }
    let stale = stale_lock(storage);
    let paused = Paused::unlock(storage);
    let victim = dir.join("victim");
    std::fs::create_dir(&victim).expect("mkdir");
    std::fs::copy(dir.join("locks").join(&stale), victim.join(&stale)).expect("copy");
    std::fs::rename(dir.join("locks"), dir.join("locks.real")).expect("rename");
    std::os::unix::fs::symlink("victim", dir.join("locks")).expect("symlink");
    let out = paused.go();
    assert!(victim.join(&stale).is_file(), "the copy went: {out:?}");
    assert!(dir.join("locks.real").join(&stale).is_file(), "{out:?}");
    assert_eq!(out.code, 1, "{out:?}");
    Pass
}

/// A delete answered 404 while the file stays (a proxy, a lying server) is
/// a failure, not "already gone": a listing decides.
pub fn delete_answered_gone_while_the_file_stays(storage: &Storage) -> Verdict {
    use crate::fault_proxy::{Fault, FaultProxy, Filter};

    let Some(server) = storage.http.clone() else {
        return NotApplicable("not an HTTP backend");
    };
    let stale = stale_lock(storage);
    let delete = if storage.properties.batch_delete {
        Filter::with_query("a batch delete", |method, _, query| {
            method == "POST" && query.contains("comp=batch")
        })
    } else {
        Filter::lock_delete(None)
    };
    let proxy = FaultProxy::start(&server, delete, Fault::Status(404));
    let out = finish_guarded(storage.lockwarden_via(&proxy.addr, "unlock").args([
        "--json",
        "--timeout",
        "10s",
    ]));
    assert!(
        proxy.injected() > 0,
        "no delete: {:?} {out:?}",
        proxy.seen()
    );
    assert_eq!(out.code, 1, "{out:?}");
    let doc: serde_json::Value =
        serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    let listed = |key: &str| {
        doc[key]
            .as_array()
            .is_some_and(|entries| entries.iter().any(|r| r["id"] == stale.as_str()))
    };
    assert!(listed("failed") && !listed("removed"), "{out:?}");
    assert!(storage.files("locks").contains(&stale), "{out:?}");
    Pass
}

/// A repository that is not there: exit 10, on every backend.
pub fn missing_repository(storage: &Storage) -> Verdict {
    let location = storage.location();
    let missing = match &storage.repo.remote {
        // Another bucket: the first path part of the remote's.
        Some(remote) => {
            let bucket = remote.path.split_once(':').map_or("", |(_, b)| b);
            let bucket = bucket.split('/').next().expect("a bucket");
            location.replacen(bucket, "lockwardenmissing", 1)
        }
        None => format!("{}-missing", location.trim_end_matches('/')),
    };
    let out = finish_guarded(
        storage
            .lockwarden_at(&missing, "check", str::to_owned)
            .args(["--timeout", "10s"]),
    );
    assert_eq!(out.code, 10, "{out:?}");
    Pass
}

/// A server that does not answer (its address in the location, and in
/// the variables, for a dead port): exit 14.
pub fn unreachable(storage: &Storage) -> Verdict {
    let nowhere = format!("127.0.0.1:{}", crate::restic::free_port());
    let out = match (&storage.http, &storage.server) {
        (Some(_), _) => finish_guarded(
            storage
                .lockwarden_via(&nowhere, "check")
                .args(["--timeout", "5s"]),
        ),
        (None, Some(server)) => {
            let location = storage.repo.location.replace(server.as_str(), &nowhere);
            finish_guarded(
                storage
                    .lockwarden_at(&location, "check", str::to_owned)
                    .args(["--timeout", "5s"]),
            )
        }
        (None, None) => return NotApplicable("no server to be unreachable"),
    };
    assert_eq!(out.code, 14, "{out:?}");
    Pass
}

/// `restic unlock --remove-all` behind a `hold`'s back: the hold notices
/// at its next refresh (whatever the storage answers its delete) and exits
/// 11, having stopped its command.
pub fn hold_notices_its_lock_removed(storage: &Storage) -> Verdict {
    if !storage.properties.writable {
        return NotApplicable("lockwarden cannot write a lock there");
    }
    let mut command = storage.lockwarden("hold");
    command.args(["--refresh-interval", "1s", "--", "sleep", "300"]);
    let hold = Guarded::spawn(&mut command);
    wait_until("the hold's lock is there", || {
        !storage.files("locks").is_empty()
    });
    let out = storage.repo.restic(&["unlock", "--remove-all"]);
    assert_eq!(out.code, 0, "restic unlock --remove-all: {out:?}");
    let out = hold.finish_within(Duration::from_secs(60), "hold after its lock was removed");
    assert_eq!(out.code, 11, "{out:?}");
    assert!(out.stderr.contains("lost"), "{out:?}");
    Pass
}

/// Two `hold --exclusive` started together, round after round with random
/// offsets: their commands never run at the same time.
pub fn exclusive_holds_never_overlap(storage: &Storage) -> Verdict {
    if !storage.properties.writable {
        return NotApplicable("lockwarden cannot write a lock there");
    }
    let marks = tempfile::tempdir().expect("temp dir");
    let mark = shell_quote(&marks.path().join("held").display().to_string());
    let section = format!("mkdir {mark} || exit 99; sleep 0.4; rmdir {mark}");
    let mut ran = 0;
    for round in 0..5u64 {
        let offset = Duration::from_millis(jitter(round) % 400);
        let mut first = storage.lockwarden("hold");
        first.args(["--exclusive", "--", "sh", "-c", &section]);
        let mut second = storage.lockwarden("hold");
        second.args(["--exclusive", "--", "sh", "-c", &section]);
        let a = Guarded::spawn(&mut first);
        std::thread::sleep(offset);
        let b = Guarded::spawn(&mut second);
        let outs = [a, b].map(|g| g.finish_within(Duration::from_secs(120), "hold"));
        for out in &outs {
            assert_ne!(out.code, 99, "two exclusive holds overlapped: {outs:?}");
            assert!(matches!(out.code, 0 | 11), "round {round}: {outs:?}");
        }
        // Both may back off (each saw the other's lock); then nothing ran.
        ran += outs.iter().filter(|out| out.code == 0).count();
        let left = storage.files("locks");
        assert!(left.is_empty(), "a hold left its lock: {left:?} {outs:?}");
    }
    assert!(ran > 0, "no hold ever ran its command");
    Pass
}

/// A number that differs from round to round and run to run.
fn jitter(round: u64) -> u64 {
    let nanos = Instant::now().elapsed().as_nanos() as u64
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| u64::from(d.subsec_nanos()))
            .unwrap_or(0);
    nanos
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(round)
        >> 7
}

/// A storage that refuses the credentials (401 on a listing, 403 on a
/// lock file's read) fails the run with exit 13, whichever request it
/// refused, and nothing is removed.
pub fn denied(storage: &Storage) -> Verdict {
    use crate::fault_proxy::{Fault, FaultProxy, Filter};

    let Some(server) = storage.http.clone() else {
        return NotApplicable("not an HTTP backend");
    };
    let stale = stale_lock(storage);
    let listing = storage.properties.listing.of_any();
    // A lock file's read; GCS percent-encodes the object's slashes.
    let lock_read = Filter::new("a lock file's read", |method, path| {
        let path = path.replace("%2F", "/");
        method == "GET"
            && path
                .rsplit_once("/locks/")
                .is_some_and(|(_, id)| lockwarden::repo::lockfile::is_valid_id(id))
    });
    for (filter, status) in [(listing, 401), (lock_read, 403)] {
        let proxy = FaultProxy::start(&server, filter, Fault::Status(status));
        let out = finish_guarded(
            storage
                .lockwarden_via(&proxy.addr, "unlock")
                .args(["--timeout", "10s"]),
        );
        assert!(
            proxy.injected() > 0,
            "nothing was refused: {:?} {out:?}",
            proxy.seen()
        );
        assert_eq!(out.code, 13, "{status}: {out:?}");
    }
    assert!(
        storage.files("locks").contains(&stale),
        "a lock was removed"
    );
    Pass
}

/// A 3xx to another host is never followed: nothing reaches that host (so
/// no credential, token or `Referer` can), the run fails saying why, and
/// nothing is removed.
pub fn redirect_not_followed(storage: &Storage) -> Verdict {
    use crate::fault_proxy::{Fault, FaultProxy, Filter};
    let Some(server) = storage.http.clone() else {
        return NotApplicable("not an HTTP backend");
    };
    let stale = stale_lock(storage);
    let other = crate::recorder::Recorder::start();
    let proxy = FaultProxy::start(&server, Filter::all(), Fault::Redirect(other.addr));
    let out = finish_guarded(
        storage
            .lockwarden_via(&proxy.addr, "unlock")
            .args(["--timeout", "10s"]),
    );
    assert!(proxy.injected() > 0, "{:?}", proxy.seen());
    assert_ne!(out.code, 0, "{out:?}");
    assert!(out.stderr.contains("redirect"), "{out:?}");
    let followed = other.requests();
    assert!(
        followed.is_empty(),
        "the redirect was followed: {followed:?}"
    );
    assert!(
        storage.files("locks").contains(&stale),
        "a lock was removed"
    );
    Pass
}

/// How large a hostile answer is: hundreds of MiB.
const HUGE: u64 = 300 << 20;
/// What a run may take above an honest run's peak with a huge answer in
/// front of it (KiB): far below the answer itself.
const HEADROOM_KIB: u64 = 128 << 10;

/// A listing page, and an error body, of hundreds of MiB: refused (exit 1,
/// and 13 for the refusal) with memory bounded, nothing removed.
pub fn huge_bodies(storage: &Storage) -> Verdict {
    use crate::fault_proxy::{Fault, FaultProxy};
    let Some(server) = storage.http.clone() else {
        return NotApplicable("not an HTTP backend");
    };
    let stale = stale_lock(storage);
    let cap = 4 << 30;
    let (honest, baseline) = crate::guard::finish_measured(&storage.lockwarden("check"), cap);
    assert_eq!(honest.code, 3, "{honest:?}");
    let listing = || storage.properties.listing.of_locks();
    for (status, code) in [(200, 1), (403, 13)] {
        let huge = Fault::HugeBody {
            status,
            bytes: HUGE,
        };
        let proxy = FaultProxy::start(&server, listing(), huge);
        let command = storage.lockwarden_via(&proxy.addr, "check");
        let (out, peak) = crate::guard::finish_measured(&command, cap);
        assert!(proxy.injected() > 0, "{status}: {:?}", proxy.seen());
        assert_eq!(out.code, code, "{status}: {out:?}");
        assert!(
            peak < baseline + HEADROOM_KIB,
            "{status}: {peak} KiB, an honest check {baseline} KiB"
        );
    }
    assert!(
        storage.files("locks").contains(&stale),
        "a lock was removed"
    );
    Pass
}

/// Minutes, in seconds.
const MINUTE: i64 = 60;

/// The reference scenario: a killed holder's lock and a 2 h old foreign lock
/// are removed; a live `restic backup`'s lock and a young foreign lock are
/// kept; restic's listing agrees, restic works afterwards, no output shows
/// a credential, and no process lockwarden started (rclone, ssh) outlives
/// it.
pub fn reference_scenario(storage: &Storage) -> Verdict {
    let repo = &storage.repo;
    let secrets: Vec<&str> = storage.secrets.iter().copied().chain([PASSWORD]).collect();
    let live = Holder::start(repo);
    let dead = Holder::start(repo).kill();
    let writer = LockWriter::new(repo);
    let old = writer.write(LockSpec {
        time: time_from_now(-120 * MINUTE),
        hostname: "gone-host",
        pid: 9,
        exclusive: true,
        encoding: Encoding::Zstd,
    });
    let young = writer.write(LockSpec {
        time: time_from_now(-10 * MINUTE),
        hostname: "other-host",
        pid: 10,
        ..LockSpec::default()
    });

    let out = finish_guarded(storage.lockwarden("check").arg("--json"));
    out.assert_no_secret(&secrets);
    let (code, doc) = out.json();
    assert_eq!(code, 3, "{doc:#}");
    assert_eq!(doc["repository"]["backend"], storage.backend);
    assert_eq!(verdict(&doc, &dead), pair("remove", "process-dead"));
    assert_eq!(verdict(&doc, &old), pair("remove", "expired"));
    assert_eq!(verdict(&doc, &live.lock_id), pair("keep", "holder-alive"));
    assert_eq!(verdict(&doc, &young), pair("keep", "fresh"));
    storage.assert_no_process_left();

    let out = unlock(storage, &[]);
    out.assert_no_secret(&secrets);
    storage.assert_no_process_left();
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.contains(&format!("removed {}", &dead[..8])),
        "{}",
        out.stdout
    );
    let left = BTreeSet::from([live.lock_id.clone(), young.clone()]);
    assert_eq!(repo.lock_ids(), left, "exactly the stale locks are gone");
    assert_eq!(restic_lock_ids(storage), left, "restic sees the same");

    drop(live);
    storage.remove(&format!("locks/{young}"));
    repo.assert_usable();
    Pass
}

/// Parity with `restic unlock`: in this repository and in a sibling on the
/// same storage, forged locks of every age around restic's 30 minutes and
/// a killed restic's lock from another host, about which nothing is known.
/// `lockwarden unlock` here keeps exactly what `restic unlock` keeps there;
/// both keep the killed restic's (fresh) lock; restic works afterwards.
pub fn parity_with_restic_unlock(storage: &Storage) -> Verdict {
    let (ours, theirs) = (&storage.repo, storage.sibling());
    let forge = |repo: &TestRepo| {
        let restic_lock = Holder::start_on_host(repo, "parity-host").kill();
        (restic_lock, parity::write_ages(&LockWriter::new(repo)))
    };
    let (our_restic_lock, our_ids) = forge(ours);
    let (their_restic_lock, their_ids) = forge(&theirs);
    let out = unlock(storage, &[]);
    assert_eq!(out.code, 0, "{out:?}");
    parity::restic_unlock_keeps_the_same(ours, &our_ids, &theirs, &their_ids);
    assert!(ours.lock_ids().contains(&our_restic_lock), "{out:?}");
    assert!(theirs.lock_ids().contains(&their_restic_lock));
    let cleared = ours.restic(&["unlock", "--remove-all"]);
    assert_eq!(cleared.code, 0, "{cleared:?}");
    ours.assert_usable();
    Pass
}
