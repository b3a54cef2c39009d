//! Parity with `restic unlock`: forged locks of every age around restic's
//! 30 minutes, and the check that lockwarden kept exactly the ones restic
//! kept, on any backend.

use std::collections::BTreeSet;

use crate::lock_writer::{Encoding, LockSpec, LockWriter, time_from_now};
use crate::restic::TestRepo;
use crate::restic_version::restic_version;

/// Ages, in minutes from now, of the forged locks: on either side of
/// restic's 30 minutes (a minute's margin), fresh, and in the future.
pub const AGES: [i64; 8] = [-200, -61, -31, -29, -5, 0, 3, 90];

/// Writes one lock per [`AGES`] entry, each from its own host, with both
/// encodings and both kinds; returns their ids in that order.
pub fn write_ages(writer: &LockWriter) -> Vec<String> {
    AGES.iter()
        .enumerate()
        .map(|(n, minutes)| {
            writer.write(LockSpec {
                time: time_from_now(minutes * 60),
                hostname: &format!("host-{n}"),
                pid: 100 + n as i64,
                exclusive: n % 3 == 0,
                encoding: if n % 2 == 0 {
                    Encoding::Raw
                } else {
                    Encoding::Zstd
                },
            })
        })
        .collect()
}

/// Which of `ids` (by position) `repo` still holds.
pub fn kept(repo: &TestRepo, ids: &[String]) -> BTreeSet<usize> {
    let left = repo.lock_ids();
    (0..ids.len()).filter(|n| left.contains(&ids[*n])).collect()
}

/// Asserts that lockwarden (`ours`) kept the same forged locks as restic
/// (`theirs`), and that both kept some and removed some.
pub fn assert_same_kept(ours: &BTreeSet<usize>, theirs: &BTreeSet<usize>) {
    assert_eq!(
        ours, theirs,
        "lockwarden kept exactly what restic unlock kept"
    );
    assert!(
        !ours.is_empty() && ours.len() < AGES.len(),
        "both kept some and removed some: {ours:?}"
    );
}

/// After lockwarden unlocked `ours`: runs `restic unlock` on `theirs` and
/// asserts, as [`assert_same_kept`], that both kept the same forged locks
/// (`our_ids` and `their_ids`, written by [`write_ages`] in each), and that
/// restic said it removed the others.
pub fn restic_unlock_keeps_the_same(
    ours: &TestRepo,
    our_ids: &[String],
    theirs: &TestRepo,
    their_ids: &[String],
) {
    let before = theirs.lock_ids().len();
    let restic = theirs.restic(&["unlock"]);
    assert_eq!(restic.code, 0, "{restic:?}");
    let removed = before - theirs.lock_ids().len();
    assert_eq!(
        restic.stdout,
        restic_version().unlock_message(removed),
        "restic {} removed {removed}",
        restic_version()
    );
    assert_same_kept(&kept(ours, our_ids), &kept(theirs, their_ids));
}
