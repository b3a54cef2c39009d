//! Evidence answered once per question: what lets a shadow policy judge with
//! exactly the evidence the enforced policy was given.
//!
//! The enforced policy asks first; every answer is remembered by its
//! question, so the shadow asking the same question gets the same answer
//! (even if the process or host changed in between), and a question only the
//! shadow asks is answered once and remembered the same way. A policy asking
//! in one batch is still served question by question through [`Evidence`],
//! so remembering per question stays right.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use super::Evidence;
use crate::contract::Liveness;

/// At most this many answers are remembered (several per lock of the longest
/// listing); past it, answers are served without being remembered, so a
/// policy asking endless distinct questions cannot grow memory without end.
const MAX_REMEMBERED: usize = 4 * crate::limits::LISTING_ENTRIES;

/// A `process` question: hostname, pid, since.
type ProcessQuestion = (String, i64, i64);
/// A `host` question: hostname, since.
type HostQuestion = (String, i64);

/// Wraps evidence so that each distinct question is answered once.
pub struct Remembered {
    inner: Arc<dyn Evidence>,
    local_hostname: OnceLock<Option<String>>,
    process: Mutex<HashMap<ProcessQuestion, Liveness>>,
    host: Mutex<HashMap<HostQuestion, Liveness>>,
}

impl Remembered {
    /// Remembers what `inner` answers.
    pub fn new(inner: Arc<dyn Evidence>) -> Self {
        Remembered {
            inner,
            local_hostname: OnceLock::new(),
            process: Mutex::new(HashMap::new()),
            host: Mutex::new(HashMap::new()),
        }
    }
}

/// The answer remembered for `question`, else `ask`'s, remembered. The
/// table is not held while `ask` runs (a probe or an inventory lookup may
/// take a while); when two callers race, the first answer stored wins and
/// both return it.
fn remembered<Q: Eq + std::hash::Hash>(
    answers: &Mutex<HashMap<Q, Liveness>>,
    question: Q,
    ask: impl FnOnce() -> Liveness,
) -> Liveness {
    if let Some(answer) = answers.lock().ok().and_then(|a| a.get(&question).cloned()) {
        return answer;
    }
    let answer = ask();
    match answers.lock() {
        Ok(mut answers) if answers.len() < MAX_REMEMBERED || answers.contains_key(&question) => {
            answers.entry(question).or_insert(answer).clone()
        }
        _ => answer,
    }
}

impl Evidence for Remembered {
    fn local_hostname(&self) -> Option<String> {
        self.local_hostname
            .get_or_init(|| self.inner.local_hostname())
            .clone()
    }

    fn process(&self, hostname: &str, pid: i64, since: i64) -> Liveness {
        remembered(&self.process, (hostname.to_owned(), pid, since), || {
            self.inner.process(hostname, pid, since)
        })
    }

    fn host(&self, hostname: &str, since: i64) -> Liveness {
        remembered(&self.host, (hostname.to_owned(), since), || {
            self.inner.host(hostname, since)
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Evidence whose every answer is new: it counts the questions and says
    /// so in the detail, so a repeated answer can only come from the memo.
    #[derive(Default)]
    struct Changing {
        asked: AtomicUsize,
    }

    impl Changing {
        fn next(&self) -> usize {
            self.asked.fetch_add(1, Ordering::SeqCst) + 1
        }
    }

    impl Evidence for Changing {
        fn local_hostname(&self) -> Option<String> {
            Some(format!("host-{}", self.next()))
        }
        fn process(&self, hostname: &str, pid: i64, since: i64) -> Liveness {
            let n = self.next();
            // Alternates, so that a second, unremembered answer would differ.
            if n % 2 == 1 {
                Liveness::Dead(format!("{hostname}/{pid}/{since}: answer {n}"))
            } else {
                Liveness::Alive(format!("{hostname}/{pid}/{since}: answer {n}"))
            }
        }
        fn host(&self, hostname: &str, since: i64) -> Liveness {
            Liveness::Unknown(format!("{hostname}/{since}: answer {}", self.next()))
        }
    }

    #[test]
    fn the_same_question_gets_the_same_answer_and_is_asked_once() {
        let inner = Arc::new(Changing::default());
        let memo = Remembered::new(inner.clone());
        let first = memo.process("a", 7, 100);
        assert_eq!(memo.process("a", 7, 100), first);
        assert_eq!(memo.host("a", 100), memo.host("a", 100));
        assert_eq!(memo.local_hostname(), memo.local_hostname());
        assert_eq!(
            inner.asked.load(Ordering::SeqCst),
            3,
            "one ask per question"
        );
    }

    #[test]
    fn every_part_of_a_question_tells_it_apart() {
        let inner = Arc::new(Changing::default());
        let memo = Remembered::new(inner.clone());
        let base = memo.process("a", 7, 100);
        for other in [
            memo.process("b", 7, 100),
            memo.process("a", 8, 100),
            memo.process("a", 7, 101),
        ] {
            assert_ne!(other, base);
        }
        assert_ne!(memo.host("a", 100), memo.host("a", 101));
        assert_ne!(memo.host("a", 100), memo.host("b", 100));
        // Asked once each: 4 process and 3 host questions.
        assert_eq!(inner.asked.load(Ordering::SeqCst), 7);
        // A question only a later caller asks is remembered as well.
        let late = memo.process("c", 1, 1);
        assert_eq!(memo.process("c", 1, 1), late);
        assert_eq!(inner.asked.load(Ordering::SeqCst), 8);
    }

    #[test]
    fn past_the_bound_answers_are_served_but_not_remembered() {
        let inner = Arc::new(Changing::default());
        let memo = Remembered::new(inner.clone());
        let answers = Mutex::new(
            (0..MAX_REMEMBERED)
                .map(|i| ((format!("h{i}"), 0), Liveness::Unknown(String::new())))
                .collect::<HashMap<_, _>>(),
        );
        let first = remembered(&answers, ("new".to_owned(), 0), || {
            memo.inner.host("new", 0)
        });
        let second = remembered(&answers, ("new".to_owned(), 0), || {
            memo.inner.host("new", 0)
        });
        assert_ne!(first, second, "not remembered past the bound");
        assert_eq!(answers.lock().map(|a| a.len()).ok(), Some(MAX_REMEMBERED));
    }
}
