//! The cases of the in-process suite: each takes a fresh storage behind the
//! fault-injecting backend, acts on it through [`Repository`] and behind
//! its back, and panics with what it saw when a promise is broken. Each
//! says which case of the end-to-end table (`tests/src/backend_suite/`) it
//! stands beside; the ones marked "in process only" have none there.

use std::collections::BTreeSet;

use super::{Ctx, Special};
use crate::case_table::{Case, Verdict};
use crate::repo::backend::{BackendError, Fault, Kind, Operation, Removal};
use crate::repo::{RepoError, Repository};

use Verdict::{NotApplicable, Pass};

/// Every case, in the table's order.
pub(super) const CASES: [Case<Ctx>; 15] = [
    (
        "locks read, and removed by id",
        locks_read_and_removed_by_id,
    ),
    ("a written lock is whole and read back", written_lock),
    (
        "locks/ standing for keys/ or snapshots/ removes nothing",
        locks_standing_for_another_directory,
    ),
    (
        "FIFO, link, directory under lock names never removed",
        entries_that_are_no_files,
    ),
    ("odd names ignored without failing the listing", odd_names),
    (
        "removed or replaced between listing and delete",
        changed_between_listing_and_delete,
    ),
    (
        "locks/ swapped for a link after the listing removes nothing",
        lock_directory_swapped_after_listing,
    ),
    (
        "a delete answered gone while the file stays is a failure",
        delete_answered_gone_while_the_file_stays,
    ),
    (
        "a failed delete is decided by listing again",
        failed_delete_decided_by_listing,
    ),
    (
        "missing config or keys is no repository",
        missing_repository,
    ),
    ("an unreachable storage fails the read", unreachable),
    ("a refused listing or read fails the whole read", denied),
    (
        "only what the last listing showed or this process wrote is removed",
        only_listed_or_written_removed,
    ),
    ("a lock over the size limit is unreadable", oversized_lock),
    (
        "a lock that vanishes after the listing is left out",
        vanished_after_listing,
    ),
];

/// Opens the repository, or panics.
fn open(ctx: &Ctx) -> Repository {
    ctx.open().expect("the repository opens")
}

/// Locks are listed, read and removed by id; the others stay; a removed
/// one is "already gone" after. Beside: "restic's locks judged as restic
/// judges them".
fn locks_read_and_removed_by_id(ctx: &Ctx) -> Verdict {
    let (first, second) = (ctx.lock("h", 10), ctx.lock("h", 11));
    let repo = open(ctx);
    let set = repo.read_locks().expect("reads");
    let mut pids: Vec<i64> = set.locks.iter().map(|l| l.pid).collect();
    pids.sort();
    assert_eq!(pids, [10, 11]);
    assert!(
        set.unreadable.is_empty() && set.foreign.is_empty(),
        "{set:?}"
    );
    assert_eq!(repo.remove_lock(&first).expect("removes"), Removal::Removed);
    assert_eq!(ctx.lock_names(), BTreeSet::from([second]));
    assert_eq!(
        repo.remove_lock(&first).expect("gone"),
        Removal::AlreadyGone
    );
    let refused = repo.remove_lock("../config");
    assert!(
        matches!(refused, Err(RepoError::NotRemovable { .. })),
        "{refused:?}"
    );
    Pass
}

/// A lock lockwarden writes appears whole under its id and nothing beside
/// it, reads back as written, and is removed. Beside: "a written lock is
/// whole and restic reads it".
fn written_lock(ctx: &Ctx) -> Verdict {
    let repo = open(ctx);
    repo.read_locks().expect("reads");
    let lock = crate::hold::own_lock(true);
    let sealed = repo.seal_lock(&lock).expect("seals");
    repo.store_lock(&sealed).expect("writes");
    assert_eq!(ctx.lock_names(), BTreeSet::from([sealed.id.clone()]));
    let set = repo.read_locks().expect("reads");
    let [read] = set.locks.as_slice() else {
        panic!("one lock: {set:?}");
    };
    assert_eq!(read.id, sealed.id);
    assert_eq!(
        (read.exclusive, read.pid, read.hostname.as_str()),
        (true, lock.pid, lock.hostname.as_str())
    );
    assert_eq!(
        repo.remove_lock(&sealed.id).expect("ours"),
        Removal::Removed
    );
    assert!(ctx.lock_names().is_empty(), "{:?}", ctx.lock_names());
    Pass
}

/// `locks/` standing for `keys/` or `snapshots/` (a link where the storage
/// shows links, copies of their files where it does not): the read is
/// refused, nothing is removed, and both directories stay as they were.
/// Beside: the case of the same name.
fn locks_standing_for_another_directory(ctx: &Ctx) -> Verdict {
    ctx.storage
        .put(Kind::Snapshot, &"5".repeat(64), b"a snapshot");
    let stale = ctx.lock("h", 1);
    for other in [Kind::Key, Kind::Snapshot] {
        let before = ctx.storage.names(other);
        ctx.storage.alias_locks(other);
        let repo = open(ctx);
        let refused = repo.read_locks();
        assert!(
            matches!(refused, Err(RepoError::NotLockDirectory { .. })),
            "{other:?}: {refused:?}"
        );
        assert!(repo.remove_lock(&stale).is_err(), "{other:?}");
        ctx.storage.unalias_locks(other);
        assert_eq!(ctx.storage.names(other), before, "{other:?}");
        assert!(ctx.lock_names().contains(&stale), "{other:?}");
    }
    assert_eq!(ctx.faults.calls(Operation::Remove), 0);
    Pass
}

/// A FIFO, a link and a directory under lock names, beside a lock: they are
/// foreign, named for what they are, never removed; the lock is. Where the
/// storage shows regular files only, an object nested under a lock's name.
/// Beside: the case of the same name.
fn entries_that_are_no_files(ctx: &Ctx) -> Verdict {
    if !ctx.storage.knobs().shows_special_files {
        return nested_object_under_a_lock_name(ctx);
    }
    let lock = ctx.lock("h", 1);
    let (dir, link, fifo) = ("d".repeat(64), "c".repeat(64), "b".repeat(64));
    ctx.storage.put_special(&dir, Special::Directory);
    ctx.storage.put_special(&link, Special::Link);
    ctx.storage.put_special(&fifo, Special::Fifo);
    let repo = open(ctx);
    let set = repo.read_locks().expect("reads");
    assert_eq!(set.locks.len(), 1);
    assert!(set.unreadable.is_empty(), "{:?}", set.unreadable);
    let foreign: Vec<(&str, &str)> = set
        .foreign
        .iter()
        .map(|f| (f.id.as_str(), f.what.as_str()))
        .collect();
    for expected in [
        (dir.as_str(), "a directory"),
        (link.as_str(), "a symbolic link"),
        (fifo.as_str(), "a FIFO"),
    ] {
        assert!(foreign.contains(&expected), "{foreign:?}");
    }
    for id in [&dir, &link, &fifo] {
        let refused = repo.remove_lock(id);
        assert!(
            matches!(refused, Err(RepoError::NotRemovable { .. })),
            "{refused:?}"
        );
    }
    assert_eq!(repo.remove_lock(&lock).expect("a lock"), Removal::Removed);
    assert_eq!(ctx.faults.calls(Operation::Remove), 1);
    assert_eq!(ctx.lock_names(), BTreeSet::from([dir, link, fifo]));
    Pass
}

/// An object nested under a lock's name (`locks/<id>/x`) is no lock file:
/// not listed, never removed.
fn nested_object_under_a_lock_name(ctx: &Ctx) -> Verdict {
    let nested = format!("{}/x", "d".repeat(64));
    if !ctx.storage.put_odd(&nested, b"nested") {
        return NotApplicable("no object can nest under a lock's name");
    }
    let lock = ctx.lock("h", 1);
    let repo = open(ctx);
    let set = repo.read_locks().expect("reads");
    assert_eq!(set.locks.len(), 1);
    assert!(
        set.unreadable.is_empty() && set.foreign.is_empty(),
        "{set:?}"
    );
    assert_eq!(repo.remove_lock(&lock).expect("a lock"), Removal::Removed);
    assert!(ctx.lock_names().contains(&nested), "the nested object went");
    Pass
}

/// Names no restic file has, as a file system or an object store holds
/// them, are ignored without failing the listing: the lock beside them is
/// read and removed, they stay. Beside: the case of the same name.
fn odd_names(ctx: &Ctx) -> Verdict {
    let long = "a".repeat(63);
    let odd = [
        "x\u{1}y", "..x", "-rf", &long, "/x", "../x", "./x", "\u{1}x",
    ];
    let planted: Vec<&str> = odd
        .into_iter()
        .filter(|name| ctx.storage.put_odd(name, b"odd"))
        .collect();
    assert!(planted.len() >= 4, "only {planted:?} planted");
    let lock = ctx.lock("h", 1);
    let repo = open(ctx);
    let set = repo.read_locks().expect("an odd name fails no listing");
    assert_eq!(set.locks.len(), 1);
    assert!(
        set.unreadable.is_empty() && set.foreign.is_empty(),
        "{set:?}"
    );
    assert_eq!(repo.remove_lock(&lock).expect("a lock"), Removal::Removed);
    let left = ctx.lock_names();
    for name in planted {
        assert!(left.contains(name), "{name:?} went: {left:?}");
    }
    Pass
}

/// A lock removed, and (where the storage shows directories) one replaced
/// by a directory holding a file, between the listing and the delete: the
/// first is "already gone", the second is a failure and the directory
/// stays. Beside: the case of the same name.
fn changed_between_listing_and_delete(ctx: &Ctx) -> Verdict {
    let (gone, swapped) = (ctx.lock("h", 1), ctx.lock("h", 2));
    let repo = open(ctx);
    repo.read_locks().expect("reads");
    ctx.storage.delete(Kind::Lock, &gone);
    let specials = ctx.storage.knobs().shows_special_files;
    if specials {
        ctx.storage.delete(Kind::Lock, &swapped);
        ctx.storage.put_special(&swapped, Special::Directory);
    }
    let outcomes = repo.remove_locks(&[gone.as_str(), swapped.as_str()]);
    assert_eq!(
        outcomes[0].as_ref().ok(),
        Some(&Removal::AlreadyGone),
        "{outcomes:?}"
    );
    if specials {
        assert!(outcomes[1].is_err(), "{outcomes:?}");
        assert!(ctx.lock_names().contains(&swapped), "the directory went");
    } else {
        assert_eq!(outcomes[1].as_ref().ok(), Some(&Removal::Removed));
        assert!(!ctx.lock_names().contains(&swapped));
    }
    Pass
}

/// `locks/` swapped, after the listing, for a link to a directory holding
/// a file of a listed lock's name: nothing is removed, there or in the real
/// `locks/`. Only where the storage shows links (where a server resolves
/// names, lockwarden cannot look). Beside: the case of the same name.
fn lock_directory_swapped_after_listing(ctx: &Ctx) -> Verdict {
    if !ctx.storage.knobs().shows_special_files {
        return NotApplicable("the storage shows no links");
    }
    let id = ctx.lock("h", 1);
    ctx.storage.put(Kind::Snapshot, &id, b"a victim");
    let repo = open(ctx);
    repo.read_locks().expect("reads");
    ctx.storage.alias_locks(Kind::Snapshot);
    let outcomes = repo.remove_locks(&[id.as_str()]);
    assert!(
        matches!(outcomes[0], Err(RepoError::NotLockDirectory { .. })),
        "{:?}",
        outcomes[0]
    );
    assert_eq!(ctx.faults.calls(Operation::Remove), 0);
    assert!(
        ctx.storage.names(Kind::Snapshot).contains(&id),
        "the copy went"
    );
    ctx.storage.unalias_locks(Kind::Snapshot);
    assert!(ctx.lock_names().contains(&id));
    Pass
}

/// "Already gone" is the storage's word, and a listing decides it: a delete
/// answered so for a file still listed is a failure. Beside: "a delete
/// answered 404 while the file stays is a failure".
fn delete_answered_gone_while_the_file_stays(ctx: &Ctx) -> Verdict {
    let (stays, gone) = (ctx.lock("h", 1), ctx.lock("h", 2));
    let repo = open(ctx);
    repo.read_locks().expect("reads");
    ctx.faults.claim_gone(&stays);
    ctx.faults.claim_gone(&gone);
    ctx.storage.delete(Kind::Lock, &gone);
    let outcomes = repo.remove_locks(&[stays.as_str(), gone.as_str()]);
    let failure = outcomes[0].as_ref().expect_err("still listed");
    assert!(failure.to_string().contains("still listed"), "{failure}");
    assert_eq!(outcomes[1].as_ref().ok(), Some(&Removal::AlreadyGone));
    assert!(ctx.lock_names().contains(&stays));
    Pass
}

/// A delete that fails is decided by one listing after it: a file gone
/// meanwhile is "already gone", one still there a failure (rclone answers
/// the delete of a vanished file with a 500). In process only.
fn failed_delete_decided_by_listing(ctx: &Ctx) -> Verdict {
    let (gone, stays) = (ctx.lock("h", 1), ctx.lock("h", 2));
    let repo = open(ctx);
    repo.read_locks().expect("reads");
    ctx.storage.delete(Kind::Lock, &gone);
    for id in [&gone, &stays] {
        let failed = BackendError::Other("answered 500".into());
        ctx.faults
            .inject(Fault::always(Operation::Remove, failed).on(id));
    }
    let listings = ctx.faults.calls(Operation::List);
    let outcomes = repo.remove_locks(&[gone.as_str(), stays.as_str()]);
    assert_eq!(outcomes[0].as_ref().ok(), Some(&Removal::AlreadyGone));
    assert!(outcomes[1].is_err(), "{:?}", outcomes[1]);
    assert_eq!(
        ctx.faults.calls(Operation::List) - listings,
        1,
        "one listing decides for both"
    );
    assert!(ctx.lock_names().contains(&stays));
    Pass
}

/// No `keys/` listing, or no config: no repository (exit 10). Beside:
/// "missing repository or bucket exits 10".
fn missing_repository(ctx: &Ctx) -> Verdict {
    let no_keys = BackendError::NotFound("keys".into());
    let fault = Fault::always(Operation::List, no_keys)
        .of(Kind::Key)
        .times(1);
    ctx.faults.inject(fault);
    let result = ctx.open();
    assert!(
        matches!(result, Err(RepoError::NoRepository { .. })),
        "{result:?}"
    );
    ctx.storage.delete(Kind::Config, "");
    let result = ctx.open();
    assert!(
        matches!(result, Err(RepoError::NoRepository { .. })),
        "{result:?}"
    );
    Pass
}

/// A storage that cannot be reached, opening or listing: the run fails as
/// unreachable (exit 14), and nothing becomes removable. Beside:
/// "unreachable server exits 14".
fn unreachable(ctx: &Ctx) -> Verdict {
    let stale = ctx.lock("h", 1);
    let down = || BackendError::Unreachable("no route".into());
    ctx.faults.inject(
        Fault::always(Operation::Read, down())
            .of(Kind::Config)
            .times(1),
    );
    let result = ctx.open();
    assert!(
        matches!(result, Err(RepoError::Unreachable { .. })),
        "{result:?}"
    );
    let repo = open(ctx);
    ctx.faults
        .inject(Fault::always(Operation::List, down()).of(Kind::Lock));
    let result = repo.read_locks();
    assert!(
        matches!(result, Err(RepoError::Unreachable { .. })),
        "{result:?}"
    );
    let refused = repo.remove_lock(&stale);
    assert!(
        matches!(refused, Err(RepoError::NotRemovable { .. })),
        "{refused:?}"
    );
    assert_eq!(ctx.faults.calls(Operation::Remove), 0);
    assert!(ctx.lock_names().contains(&stale));
    Pass
}

/// Credentials refused on the listing, or on one lock file's read: the
/// whole read fails (exit 13), whichever it was, and nothing is removed.
/// Beside: "401/403 on LIST and on GET exit 13".
fn denied(ctx: &Ctx) -> Verdict {
    let (first, second) = (ctx.lock("h", 1), ctx.lock("h", 2));
    let repo = open(ctx);
    let refused = || BackendError::Denied("403".into());
    let faults = [
        Fault::always(Operation::List, refused())
            .of(Kind::Lock)
            .times(1),
        Fault::always(Operation::Read, refused())
            .on(&second)
            .times(1),
    ];
    for fault in faults {
        ctx.faults.inject(fault);
        let result = repo.read_locks();
        assert!(
            matches!(result, Err(RepoError::Denied { .. })),
            "{result:?}"
        );
        assert!(repo.remove_lock(&first).is_err());
    }
    assert_eq!(ctx.faults.calls(Operation::Remove), 0);
    assert_eq!(ctx.lock_names(), BTreeSet::from([first, second]));
    Pass
}

/// Only what the last listing showed as a lock file, or what this process
/// wrote, is removed; a lock stored after the listing is refused before the
/// storage is asked. In process only.
fn only_listed_or_written_removed(ctx: &Ctx) -> Verdict {
    let repo = open(ctx);
    let listed = ctx.lock("h", 1);
    let early = repo.remove_lock(&listed);
    assert!(
        matches!(early, Err(RepoError::NotRemovable { .. })),
        "{early:?}"
    );
    assert_eq!(ctx.faults.calls(Operation::Remove), 0);
    repo.read_locks().expect("reads");
    let later = ctx.lock("h", 2);
    let refused = repo.remove_lock(&later);
    assert!(
        matches!(refused, Err(RepoError::NotRemovable { .. })),
        "{refused:?}"
    );
    assert_eq!(repo.remove_lock(&listed).expect("listed"), Removal::Removed);
    let own = repo
        .seal_lock(&crate::hold::own_lock(false))
        .expect("seals");
    repo.store_lock(&own).expect("writes");
    assert_eq!(repo.remove_lock(&own.id).expect("ours"), Removal::Removed);
    assert_eq!(ctx.lock_names(), BTreeSet::from([later]));
    Pass
}

/// A lock file over the size a lock may have, and one of garbage, beside
/// two locks: both unreadable, named for why; the locks read. Beside: "300
/// MiB listing page and error body, memory bounded".
fn oversized_lock(ctx: &Ctx) -> Verdict {
    let ids = [ctx.lock("h", 10), ctx.lock("h", 11)];
    let (big, garbage) = ("e".repeat(64), "f".repeat(64));
    let limit = usize::try_from(crate::limits::LOCK_FILE).expect("fits");
    ctx.storage.put(Kind::Lock, &big, &vec![0; limit + 1]);
    ctx.storage.put(Kind::Lock, &garbage, b"not a lock");
    let set = open(ctx).read_locks().expect("reads");
    let mut pids: Vec<i64> = set.locks.iter().map(|l| l.pid).collect();
    pids.sort();
    assert_eq!(pids, [10, 11]);
    assert!(set.locks.iter().all(|l| ids.contains(&l.id)), "{set:?}");
    let mut problems: Vec<(&str, &str)> = set
        .unreadable
        .iter()
        .map(|u| (u.id.as_str(), u.problem.as_str()))
        .collect();
    problems.sort();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert_eq!(problems[0].0, big);
    assert!(problems[0].1.contains("larger than"), "{problems:?}");
    assert_eq!(problems[1].0, garbage);
    assert!(
        problems[1].1.contains("does not match its name"),
        "{problems:?}"
    );
    Pass
}

/// A lock listed and then gone before its read is simply left out: neither
/// a lock nor unreadable. In process only.
fn vanished_after_listing(ctx: &Ctx) -> Verdict {
    let (gone, stays) = (ctx.lock("h", 10), ctx.lock("h", 11));
    let vanished = BackendError::NotFound("gone".into());
    ctx.faults
        .inject(Fault::always(Operation::Read, vanished).on(&gone));
    let set = open(ctx).read_locks().expect("listed");
    assert_eq!(set.locks.len(), 1);
    assert_eq!(set.locks[0].id, stays);
    assert!(set.unreadable.is_empty(), "{:?}", set.unreadable);
    Pass
}
