//! Evidence from several sources, combined by one rule.
//!
//! Each [`Source`] answers the questions it can (a process table answers
//! about processes on this machine, an inventory about the hosts it covers)
//! and says nothing about the rest. The answers given are combined so that
//! doubt always keeps a lock:
//!
//! - `alive` if any source says alive;
//! - else `unknown` if any source says unknown;
//! - else `dead` (every source that answered says dead);
//! - no answer at all is `unknown`.
//!
//! Recorded answers ([`super::Recorded`]) follow the same rule where two
//! locks asked one question with different answers.

use crate::contract::Liveness;

use super::Evidence;

/// One source of evidence about lock holders.
pub trait Source: Send + Sync {
    /// What this source knows of process `pid` on `hostname`, which wrote a
    /// lock at `since` (ns since the epoch); `None` when it has nothing to
    /// say.
    fn process(&self, hostname: &str, pid: i64, since: i64) -> Option<Liveness>;
    /// What this source knows of host `hostname`, which wrote a lock at
    /// `since`; `None` when it has nothing to say.
    fn host(&self, hostname: &str, since: i64) -> Option<Liveness>;
}

/// Combines answers by the rule above; `None` when there are none.
pub fn combine(answers: impl IntoIterator<Item = Liveness>) -> Option<Liveness> {
    answers.into_iter().reduce(|kept, next| {
        if rank(&next) > rank(&kept) {
            next
        } else {
            kept
        }
    })
}

/// How strongly an answer keeps a lock: the highest wins.
fn rank(answer: &Liveness) -> u8 {
    match answer {
        Liveness::Dead(_) => 0,
        Liveness::Unknown(_) => 1,
        Liveness::Alive(_) => 2,
    }
}

/// Sources combined, serving a policy.
pub struct Composed {
    local_hostname: Option<String>,
    sources: Vec<Box<dyn Source>>,
}

impl Composed {
    /// Evidence from `sources`, on a machine called `local_hostname`.
    pub fn new(local_hostname: Option<String>, sources: Vec<Box<dyn Source>>) -> Self {
        Composed {
            local_hostname,
            sources,
        }
    }
}

impl Evidence for Composed {
    fn local_hostname(&self) -> Option<String> {
        self.local_hostname.clone()
    }

    fn process(&self, hostname: &str, pid: i64, since: i64) -> Liveness {
        combine(
            self.sources
                .iter()
                .filter_map(|s| s.process(hostname, pid, since)),
        )
        .unwrap_or_else(|| {
            Liveness::Unknown(format!(
                "nothing says whether process {pid} on {} runs",
                crate::text::escape(hostname)
            ))
        })
    }

    fn host(&self, hostname: &str, since: i64) -> Liveness {
        combine(self.sources.iter().filter_map(|s| s.host(hostname, since))).unwrap_or_else(|| {
            Liveness::Unknown(format!(
                "no inventory says whether host {} exists",
                crate::text::escape(hostname)
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Says(Option<Liveness>);

    impl Source for Says {
        fn process(&self, _: &str, _: i64, _: i64) -> Option<Liveness> {
            self.0.clone()
        }
        fn host(&self, _: &str, _: i64) -> Option<Liveness> {
            self.0.clone()
        }
    }

    fn state(answers: &[Option<Liveness>]) -> Liveness {
        let sources = answers
            .iter()
            .map(|a| Box::new(Says(a.clone())) as Box<dyn Source>)
            .collect();
        Composed::new(None, sources).host("h", 0)
    }

    #[test]
    fn doubt_keeps_and_silence_is_unknown() {
        let alive = || Some(Liveness::Alive("a".into()));
        let dead = || Some(Liveness::Dead("d".into()));
        let unknown = || Some(Liveness::Unknown("u".into()));
        let cases = [
            (vec![dead(), alive()], Liveness::Alive("a".into())),
            (vec![dead(), unknown()], Liveness::Unknown("u".into())),
            (vec![None, dead()], Liveness::Dead("d".into())),
            (vec![dead(), dead()], Liveness::Dead("d".into())),
            (
                vec![unknown(), alive(), dead()],
                Liveness::Alive("a".into()),
            ),
        ];
        for (answers, want) in cases {
            assert_eq!(state(&answers), want, "{answers:?}");
        }
        assert!(matches!(state(&[None, None]), Liveness::Unknown(_)));
        assert!(matches!(state(&[]), Liveness::Unknown(_)));
    }
}
