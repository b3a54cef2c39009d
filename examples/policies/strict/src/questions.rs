//! The questions of one evaluation, asked in one batch.
//!
//! Contract 0.2.0 has a single evidence import, `liveness.ask`: a policy
//! collects every question it has, each distinct question once, and calls it
//! once per evaluation; the answers come back in the questions' order. Many
//! locks share a question (every lock a host wrote at one time shares its
//! host question; a holder that refreshed its lock wrote a new file with the
//! same pid and time), so asking each once keeps the host's work and the
//! boundary small.

use std::collections::BTreeMap;

use crate::bindings::lockwarden::policy::types::{
    HostQuestion, Liveness, ProcessQuestion, Question, Timestamp,
};

/// Every distinct question asked so far, and where each one is.
#[derive(Debug, Default)]
pub struct Batch {
    questions: Vec<Question>,
    /// (hostname, pid for a process question or `None` for a host question,
    /// since) to the question's index. Ordered, not hashed: hostnames come
    /// from lock files.
    index: BTreeMap<(String, Option<i64>, Timestamp), usize>,
}

impl Batch {
    /// Whether process `pid` on `hostname`, which wrote a lock at `since`,
    /// still holds it: the index of the answer to come.
    pub fn process(&mut self, hostname: &str, pid: i64, since: Timestamp) -> usize {
        self.add((hostname.to_owned(), Some(pid), since), || {
            Question::Process(ProcessQuestion {
                hostname: hostname.to_owned(),
                pid,
                since,
            })
        })
    }

    /// Whether host `hostname`, which wrote a lock at `since`, still exists:
    /// the index of the answer to come.
    pub fn host(&mut self, hostname: &str, since: Timestamp) -> usize {
        self.add((hostname.to_owned(), None, since), || {
            Question::Host(HostQuestion {
                hostname: hostname.to_owned(),
                since,
            })
        })
    }

    fn add(
        &mut self,
        key: (String, Option<i64>, Timestamp),
        question: impl FnOnce() -> Question,
    ) -> usize {
        *self.index.entry(key).or_insert_with(|| {
            self.questions.push(question());
            self.questions.len() - 1
        })
    }

    /// The questions, in the order they were first added.
    pub fn questions(&self) -> &[Question] {
        &self.questions
    }

    /// Asks every question at once with `ask` (the host's `liveness::ask`),
    /// or not at all when there is none.
    pub fn answer(self, ask: impl FnOnce(&[Question]) -> Vec<Liveness>) -> Answers {
        let answers = if self.questions.is_empty() {
            Vec::new()
        } else {
            ask(&self.questions)
        };
        Answers { answers }
    }
}

/// The host's answers, by the index [`Batch`] gave each question.
#[derive(Debug)]
pub struct Answers {
    answers: Vec<Liveness>,
}

impl Answers {
    /// The answer at `index`; `unknown` if the host gave none, which is never
    /// a reason to remove a lock.
    pub fn get(&self, index: usize) -> Liveness {
        self.answers
            .get(index)
            .cloned()
            .unwrap_or_else(|| Liveness::Unknown("the host gave no answer".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_distinct_question_is_asked_once_in_one_call() {
        let mut batch = Batch::default();
        let first = batch.process("vm", 7, 100);
        let host = batch.host("vm", 100);
        assert_eq!(batch.process("vm", 7, 100), first);
        assert_eq!(batch.host("vm", 100), host);
        let other_pid = batch.process("vm", 8, 100);
        let other_time = batch.host("vm", 200);
        assert_eq!([first, host, other_pid, other_time], [0, 1, 2, 3]);
        assert_eq!(batch.questions().len(), 4);

        let mut calls = 0;
        let answers = batch.answer(|questions| {
            calls += 1;
            questions
                .iter()
                .map(|q| match q {
                    Question::Process(p) => Liveness::Dead(format!("no process {}", p.pid)),
                    Question::Host(h) => Liveness::Alive(format!("{} is up", h.hostname)),
                })
                .collect()
        });
        assert_eq!(calls, 1);
        assert!(matches!(answers.get(other_pid), Liveness::Dead(d) if d == "no process 8"));
        assert!(matches!(answers.get(host), Liveness::Alive(_)));
        assert!(matches!(answers.get(9), Liveness::Unknown(_)));
    }

    #[test]
    fn no_question_no_call() {
        let answers = Batch::default().answer(|_| panic!("asked with no question"));
        assert!(matches!(answers.get(0), Liveness::Unknown(_)));
    }
}
