//! The repository reader over the in-memory and fault-injecting backends:
//! the paths from storage to lock set that only the in-memory backend can
//! set up (a key search, the lock cache, a backend that cannot remove or
//! that decrypts, impossible storage times, every kind of misplaced file).
//! The promises every backend keeps are the backend suite's, which runs in
//! process against the in-memory backend too (`backend/suite/`).

use std::sync::Arc;

use super::backend::{
    Backend, BackendError, Capabilities, Contents, EntryKind, Fault, FaultyBackend, Kind,
    MemoryBackend, Operation, Removal,
};
use super::crypto::Key;
use super::location::Location;
use super::{Password, RepoError, Repository};

const PASSWORD: &[u8] = b"geheim";

/// Lock JSON as restic writes it, by `hostname` and `pid`, written long ago.
pub(crate) fn lock_json(hostname: &str, pid: i64) -> String {
    lock_json_at("2026-11-30T12:00:00Z", hostname, pid)
}

/// Lock JSON as restic writes it, written at `time` (RFC 3339).
pub(crate) fn lock_json_at(time: &str, hostname: &str, pid: i64) -> String {
    format!(
        r#"{{"time":"{time}","exclusive":false,"hostname":"{hostname}","username":"u","pid":{pid},"uid":0,"gid":0}}"#
    )
}

fn location() -> Location {
    Location::parse("/memory/repo").expect("a path")
}

/// A repository with one lock per pid, and the lock ids.
fn repository_with(pids: &[i64]) -> (MemoryBackend, Vec<String>) {
    let (backend, key) = MemoryBackend::init(PASSWORD);
    let ids = pids
        .iter()
        .map(|pid| backend.put_lock(&key, &lock_json("h", *pid)))
        .collect();
    (backend, ids)
}

fn open(backend: impl Backend + 'static) -> Result<Repository, RepoError> {
    Repository::with_backend(location(), Box::new(backend), &Password::new(PASSWORD))
}

#[test]
fn opens_with_the_password_and_refuses_another() {
    let (backend, _) = repository_with(&[]);
    let repo = open(backend).expect("opens");
    assert_eq!(repo.config().version, 2);
    assert_eq!(repo.describe().backend, "memory");
    let (backend, _) = repository_with(&[]);
    let wrong = Repository::with_backend(location(), Box::new(backend), &Password::new("no"));
    assert!(
        matches!(wrong, Err(RepoError::WrongPassword { .. })),
        "{wrong:?}"
    );
}

#[test]
fn a_missing_config_or_key_is_no_repository() {
    let empty = open(MemoryBackend::default());
    assert!(
        matches!(empty, Err(RepoError::NoRepository { .. })),
        "{empty:?}"
    );
    let (backend, _) = repository_with(&[]);
    let no_keys = FaultyBackend::new(backend)
        .fail(Fault::always(Operation::List, BackendError::NotFound("keys".into())).of(Kind::Key));
    let result = open(no_keys);
    assert!(
        matches!(result, Err(RepoError::NoRepository { .. })),
        "{result:?}"
    );
}

#[test]
fn a_repository_kept_open_reads_each_lock_once() {
    let (backend, key) = MemoryBackend::init(PASSWORD);
    let ids: Vec<_> = [10, 11]
        .iter()
        .map(|pid| backend.put_lock(&key, &lock_json("h", *pid)))
        .collect();
    let counted = std::sync::Arc::new(FaultyBackend::new(backend));
    let repo = open(counted.clone()).expect("opens");
    let reads_at_open = counted.calls(Operation::Read);
    let first = repo.read_locks().expect("listed");
    assert_eq!(first.locks.len(), 2);
    assert_eq!(counted.calls(Operation::Read), reads_at_open + 2);

    // A new lock and one gone: one read more, and the gone one forgotten.
    let new = counted.inner().put_lock(&key, &lock_json("h", 12));
    counted.inner().remove(&ids[0]).expect("removed");
    let second = repo.read_locks().expect("listed");
    let mut seen: Vec<_> = second.locks.iter().map(|l| l.id.clone()).collect();
    seen.sort();
    let mut expected = vec![ids[1].clone(), new];
    expected.sort();
    assert_eq!(seen, expected);
    assert_eq!(counted.calls(Operation::Read), reads_at_open + 3);
    assert_eq!(
        counted.calls(Operation::List),
        1 + 2,
        "keys, then locks twice"
    );
}

/// The lock cache: other bytes under a lock's name (restic never writes
/// them: a name is the hash of its contents; a tool that overwrites, or an
/// attacker, might) must be read, not judged by what was there before. Here
/// a dead holder's lock is replaced by a live holder's lock; the cached
/// lock would have the new file judged, and removed, as the dead one.
#[test]
fn a_lock_replaced_under_its_name_is_read_again() {
    let (backend, key) = MemoryBackend::init(PASSWORD);
    let backend = std::sync::Arc::new(backend);
    let id = backend.put_lock(&key, &lock_json("gone-host", 10));
    let repo = open(backend.clone()).expect("opens");
    let first = repo.read_locks().expect("listed");
    assert_eq!(first.locks[0].hostname, "gone-host");
    let (_, other) = super::lockfile::seal(
        &key,
        lock_json("a-live-holder-host", 11).as_bytes(),
        super::crypto::unique_bytes(),
    );
    backend.put(Kind::Lock, &id, other);
    let second = repo.read_locks().expect("listed");
    assert!(
        second.locks.iter().all(|l| l.hostname != "gone-host"),
        "the replaced lock was judged from the cache: {:?}",
        second.locks
    );
    assert_eq!(second.unreadable.len(), 1, "its name is not its hash");
}

#[test]
fn a_failed_read_makes_one_lock_unreadable_and_a_failed_listing_an_error() {
    let (backend, ids) = repository_with(&[10, 11]);
    let flaky = FaultyBackend::new(backend).fail(
        Fault::always(Operation::Read, BackendError::Other("disk on fire".into())).on(&ids[1]),
    );
    let set = open(flaky).expect("opens").read_locks().expect("listed");
    assert_eq!(set.locks.len(), 1);
    assert!(set.unreadable[0].problem.contains("disk on fire"));

    // A refusal of the credentials is about the storage, not the file: the
    // whole read fails (exit 13), as a refused listing does.
    let (backend, ids) = repository_with(&[10, 11]);
    let refused = FaultyBackend::new(backend)
        .fail(Fault::always(Operation::Read, BackendError::Denied("403".into())).on(&ids[1]));
    let result = open(refused).expect("opens").read_locks();
    assert!(
        matches!(result, Err(RepoError::Denied { .. })),
        "{result:?}"
    );

    let (backend, _) = repository_with(&[10]);
    let down = FaultyBackend::new(backend).fail(
        Fault::always(
            Operation::List,
            BackendError::Unreachable("no route".into()),
        )
        .of(Kind::Lock),
    );
    let result = open(down).expect("opens").read_locks();
    assert!(
        matches!(result, Err(RepoError::Unreachable { .. })),
        "{result:?}"
    );

    let (backend, _) = repository_with(&[10]);
    let no_dir = FaultyBackend::new(backend).fail(
        Fault::always(Operation::List, BackendError::NotFound("locks".into())).of(Kind::Lock),
    );
    let set = open(no_dir)
        .expect("opens")
        .read_locks()
        .expect("no locks/");
    assert!(set.locks.is_empty() && set.unreadable.is_empty());
}

#[test]
fn removal_is_by_id_and_only_where_the_backend_can() {
    let (backend, ids) = repository_with(&[10]);
    let repo = open(backend).expect("opens");
    repo.read_locks().expect("reads");
    assert_eq!(
        repo.remove_lock(&ids[0]).expect("removes"),
        Removal::Removed
    );
    assert_eq!(
        repo.remove_lock(&ids[0]).expect("gone"),
        Removal::AlreadyGone
    );
    assert!(matches!(
        repo.remove_lock("../config"),
        Err(RepoError::NotRemovable { .. })
    ));

    let (backend, ids) = repository_with(&[10]);
    let read_only = backend.with_capabilities(Capabilities {
        modify: false,
        contents: Contents::Encrypted,
        parallel_reads: 1,
    });
    let repo = open(read_only).expect("opens");
    let refused = repo.remove_lock(&ids[0]);
    assert!(
        matches!(
            refused,
            Err(RepoError::RemovalUnsupported {
                backend: "memory",
                ..
            })
        ),
        "{refused:?}"
    );
    assert_eq!(repo.read_locks().expect("still there").locks.len(), 1);
}

#[test]
fn a_backend_that_decrypts_needs_no_key() {
    let backend = MemoryBackend::default().with_capabilities(Capabilities {
        modify: false,
        contents: Contents::Decrypted,
        parallel_reads: 2,
    });
    backend.put(Kind::Config, "", br#"{"version":1,"id":"abc"}"#.to_vec());
    let id = "c".repeat(64);
    backend.put(Kind::Lock, &id, lock_json("h", 5).into_bytes());
    let repo = open(backend).expect("opens without keys/");
    assert_eq!(repo.config().id, "abc");
    let set = repo.read_locks().expect("reads");
    assert_eq!(
        (set.locks[0].id.as_str(), set.locks[0].pid),
        (id.as_str(), 5)
    );
}

#[test]
fn a_sealed_lock_round_trips_through_the_key() {
    let (backend, key) = MemoryBackend::init(PASSWORD);
    let id = backend.put_lock(&key, &lock_json("h", 1));
    let stored = backend.read(Kind::Lock, &id).expect("stored");
    let other = Key::new([7; 32], [7; 16], [7; 16]);
    assert!(super::lockfile::decode(&id, &stored, &key).is_ok());
    assert!(super::lockfile::decode(&id, &stored, &other).is_err());
}

/// A storage that does not know a file's modification time may report the
/// epoch (0) or another impossible time; taken at face value, a live lock
/// would look decades old to `stored-long-ago`, and an unreadable file
/// being written would pass the host's 30-minute rule at once. Such a time
/// is no evidence: the request carries none.
#[test]
fn an_impossible_storage_time_is_no_age_evidence() {
    let (backend, key) = MemoryBackend::init(PASSWORD);
    let live = backend.put_lock(&key, &lock_json("h", 10));
    let empty = "a".repeat(64);
    backend.put(Kind::Lock, &empty, Vec::new());
    let real = crate::time::now() - 3_600_000_000_000;
    let garbage = "b".repeat(64);
    backend.put(Kind::Lock, &garbage, b"not a lock".to_vec());
    backend.set_modified(Kind::Lock, &garbage, real);
    for (name, modified) in [(&live, 0), (&empty, i64::MIN)] {
        backend.set_modified(Kind::Lock, name, modified);
    }
    let set = open(backend).expect("opens").read_locks().expect("listed");
    assert_eq!(set.locks.len(), 1);
    assert_eq!(set.locks[0].stored_at, None, "mtime 0 is not 1970");
    let stored: std::collections::HashMap<_, _> = set
        .unreadable
        .iter()
        .map(|u| (u.id.clone(), u.stored_at))
        .collect();
    assert_eq!(stored[&empty], None, "mtime i64::MIN is no age");
    assert_eq!(stored[&garbage], Some(real), "a real time is kept");
}

/// A repository over a fault-injecting memory backend, read once, with a
/// handle on the backend and its master key.
fn faulty_repository() -> (Repository, Arc<FaultyBackend<MemoryBackend>>, Key) {
    let (memory, key) = MemoryBackend::init(PASSWORD);
    let backend = Arc::new(FaultyBackend::new(memory));
    let repo = open(backend.clone()).expect("opens");
    (repo, backend, key)
}

#[test]
fn a_locks_directory_that_is_no_directory_is_refused_whole() {
    for what in [
        EntryKind::Other("a symbolic link"),
        EntryKind::File,
        EntryKind::Other("a FIFO"),
    ] {
        let (repo, backend, key) = faulty_repository();
        let id = backend.inner().put_lock(&key, &lock_json("h", 1));
        backend.inner().set_dir_kind(Kind::Lock, Some(what));
        let refused = repo.read_locks();
        assert!(
            matches!(refused, Err(RepoError::NotLockDirectory { .. })),
            "{what:?}: {refused:?}"
        );
        assert!(matches!(
            repo.remove_lock(&id),
            Err(RepoError::NotRemovable { .. })
        ));
        assert!(repo.lock_ids().is_err());
    }
}

#[test]
fn other_restic_files_under_locks_are_misplaced_and_kept() {
    let (repo, backend, key) = faulty_repository();
    // A snapshot, sealed with the master key, under a name of its own.
    let snapshot = br#"{"time":"2020-01-02T03:04:05Z","tree":"ab","paths":["/d"],"hostname":"vm","username":"root"}"#;
    let (id, stored) = crate::repo::lockfile::seal(&key, snapshot, [7; 16]);
    backend.inner().put(Kind::Lock, &id, stored);
    backend.inner().set_modified(Kind::Lock, &id, 0);
    let set = repo
        .read_locks()
        .expect("reads: nothing says locks/ is another directory");
    assert_eq!(set.foreign.len(), 1);
    assert!(
        set.foreign[0].what.starts_with("a restic snapshot"),
        "{:?}",
        set.foreign
    );
    assert!(set.unreadable.is_empty());
    assert!(repo.remove_lock(&id).is_err());
}

#[test]
fn files_under_locks_found_in_another_directory_show_an_alias_and_nothing_is_removed() {
    for other in Kind::OTHERS {
        let (repo, backend, key) = faulty_repository();
        let lock = backend.inner().put_lock(&key, &lock_json("h", 1));
        let name = "a".repeat(64);
        backend
            .inner()
            .put(Kind::Lock, &name, b"PACK bytes".to_vec());
        backend.inner().put(other, &name, b"PACK bytes".to_vec());
        // Where the storage shows links, lstat decides, and a copy is only
        // unreadable; where it cannot, the names do.
        assert_eq!(repo.read_locks().expect("a copy").unreadable.len(), 1);
        backend
            .inner()
            .set_dir_kind(Kind::Lock, Some(EntryKind::Unknown));
        let refused = repo.read_locks();
        let Err(RepoError::NotLockDirectory { why, .. }) = refused else {
            panic!("{other:?}: {refused:?}");
        };
        assert!(why.contains(other.dir()), "{why}");
        assert!(repo.remove_lock(&lock).is_err(), "{other:?}");
        assert_eq!(backend.calls(Operation::Remove), 0);
    }
}

#[test]
fn a_look_elsewhere_that_fails_is_doubt_and_fails_the_read() {
    let (repo, backend, _) = faulty_repository();
    backend
        .inner()
        .put(Kind::Lock, &"a".repeat(64), b"junk".to_vec());
    backend
        .inner()
        .put(Kind::Lock, &"b".repeat(64), b"junk".to_vec());
    backend
        .inner()
        .set_dir_kind(Kind::Lock, Some(EntryKind::Unknown));
    backend.inject(
        Fault::always(Operation::Stat, BackendError::Unreachable("down".into())).of(Kind::Index),
    );
    let refused = repo.read_locks();
    assert!(
        matches!(refused, Err(RepoError::Unreachable { .. })),
        "{refused:?}"
    );
}
