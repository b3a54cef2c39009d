//! One conformance suite for every backend, as restic's
//! `internal/backend/test` is for restic's: the promises of lockwarden's
//! `Backend` trait and of the repository layer above it (what may be
//! removed, what a failed removal means, which exit code an error gets),
//! and the hostile cases, run through the real binary and real restic
//! against each real storage (`tests/e2e/backend_suite.rs`: one test per
//! backend).
//!
//! It has two tables. The promises that need neither the binary nor restic
//! run first, in process and in milliseconds, against the in-memory backend
//! (as a file system and as an object store) and the local backend, each
//! behind the fault-injecting one (`host-harness/src/repo/backend/suite/`,
//! in `cargo test -p lockwarden --lib`). This table holds what needs the
//! binary, restic or a real server: exit codes, restic reading a lock
//! lockwarden wrote, `hold`, requests a proxy refuses, redirects or answers
//! with hundreds of MiB, and every case again on the real storage.
//!
//! No case names a backend: each asks the storage's [`Properties`]. Adding
//! a backend: its [`Storage`] constructor (declaring its properties), and
//! one line in `tests/e2e/backend_suite.rs`.

pub mod cases;
pub mod storage;

use lockwarden::case_table::Case;
pub use lockwarden::case_table::Verdict;
pub use storage::{Listing, Properties, Storage};

/// Every case, in the table's order.
pub const CASES: [Case<Storage>; 17] = [
    (
        "the reference scenario: exactly the stale locks removed",
        cases::reference_scenario,
    ),
    (
        "with no evidence, keeps what restic unlock keeps",
        cases::parity_with_restic_unlock,
    ),
    (
        "restic's locks judged as restic judges them",
        cases::restic_locks,
    ),
    (
        "a written lock is whole and restic reads it",
        cases::written_lock,
    ),
    (
        "locks/ standing for keys/ or snapshots/ removes nothing",
        cases::locks_standing_for_another_directory,
    ),
    (
        "FIFO, link, directory under lock names never removed",
        cases::entries_that_are_no_files,
    ),
    (
        "odd names ignored without failing the listing",
        cases::odd_names,
    ),
    (
        "removed or replaced between listing and delete",
        cases::changed_between_listing_and_delete,
    ),
    (
        "locks/ swapped for a link after the listing removes nothing",
        cases::lock_directory_swapped_after_listing,
    ),
    (
        "a delete answered 404 while the file stays is a failure",
        cases::delete_answered_gone_while_the_file_stays,
    ),
    (
        "missing repository or bucket exits 10",
        cases::missing_repository,
    ),
    ("unreachable server exits 14", cases::unreachable),
    (
        "hold notices its lock removed (exit 11)",
        cases::hold_notices_its_lock_removed,
    ),
    (
        "concurrent exclusive holds never overlap",
        cases::exclusive_holds_never_overlap,
    ),
    ("401/403 on LIST and on GET exit 13", cases::denied),
    (
        "a 3xx to another host is never followed",
        cases::redirect_not_followed,
    ),
    (
        "300 MiB listing page and error body, memory bounded",
        cases::huge_bodies,
    ),
];

/// Runs every case against a fresh storage from `make` each
/// (`lockwarden::case_table::run`).
pub fn run(backend: &str, make: fn() -> Storage) {
    lockwarden::case_table::run(backend, &CASES, make);
}
