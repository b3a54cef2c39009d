//! The runner of a conformance table: named cases run one after another
//! against a fresh subject each, every outcome printed, every broken case
//! named at the end. Both backend suites use it: the in-process one
//! (`repo/backend/suite/`) and the end-to-end one (`tests/src/backend_suite/`),
//! which cannot share one table (the second needs the binary, restic and
//! the real servers) but share how a table runs.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Instant;

/// What a case found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every promise the case checks held.
    Pass,
    /// The case does not apply here, and why.
    NotApplicable(&'static str),
}

/// One case: its name in the table, and what it does with a subject. A
/// broken promise panics.
pub type Case<T> = (&'static str, fn(&T) -> Verdict);

/// Runs every case of `cases` against a fresh subject from `make` each;
/// prints one line per case (`backend-suite | <subject> | <case> |
/// <outcome>`) and the time the whole table took, then fails with every
/// broken case if any broke.
pub fn run<T>(subject: &str, cases: &[Case<T>], make: impl Fn() -> T) {
    let started = Instant::now();
    let mut broken = Vec::new();
    for (name, case) in cases {
        let outcome = catch_unwind(AssertUnwindSafe(|| case(&make())));
        let shown = match &outcome {
            Ok(Verdict::Pass) => "pass".to_owned(),
            Ok(Verdict::NotApplicable(why)) => format!("n/a ({why})"),
            Err(panic) => {
                let message = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_default();
                broken.push(format!("{name}: {message}"));
                "FAIL".to_owned()
            }
        };
        eprintln!("backend-suite | {subject} | {name} | {shown}");
    }
    eprintln!(
        "backend-suite | {subject} | {} cases in {:?}",
        cases.len(),
        started.elapsed()
    );
    assert!(
        broken.is_empty(),
        "{subject} broke {} case(s):\n{}",
        broken.len(),
        broken.join("\n")
    );
}
