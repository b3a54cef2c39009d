//! When a job on a repository must be over ([`Deadline`]): looked at before
//! each call to the storage (a listing, a read, a removal), so that a job
//! begins nothing after it and ends at most one call's timeout later,
//! whatever the storage does.

use std::time::{Duration, Instant};

/// The instant a job must be over, with the time it was given; or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline(Option<(Instant, Duration)>);

impl Deadline {
    /// No deadline: each call still ends within its timeout.
    pub const NONE: Deadline = Deadline(None);

    /// `budget` from now.
    pub fn after(budget: Duration) -> Deadline {
        let now = Instant::now();
        // A budget too far out to be an instant is no deadline.
        Deadline(now.checked_add(budget).map(|at| (at, budget)))
    }

    /// Whether it has passed.
    pub fn passed(&self) -> bool {
        self.0.is_some_and(|(at, _)| Instant::now() >= at)
    }

    /// The time the job was given (none without a deadline).
    pub fn budget(&self) -> Option<Duration> {
        self.0.map(|(_, budget)| budget)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_passes_and_none_never_does() {
        assert!(Deadline::after(Duration::ZERO).passed());
        let later = Deadline::after(Duration::from_secs(3600));
        assert!(!later.passed());
        assert_eq!(later.budget(), Some(Duration::from_secs(3600)));
        assert!(!Deadline::NONE.passed());
        assert!(!Deadline::after(Duration::MAX).passed());
    }
}
