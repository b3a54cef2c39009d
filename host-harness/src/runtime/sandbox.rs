//! The sandbox a policy runs in: the store's data, the imports the host
//! serves, the WASI it links (standard streams only, granting nothing), and
//! the memory cap.

use std::sync::Arc;

use wasmtime::component::{HasData, HasSelf, Linker, ResourceTable};
use wasmtime::{Engine, ResourceLimiter};
use wasmtime_wasi::cli::{WasiCli, WasiCliView};
use wasmtime_wasi::p2::bindings::{cli, sync::io};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::log::{LogLevel, LogLine};
use super::ticker::Ticking;
use crate::contract::{self, Liveness, Question, clock, liveness, log, types, v0_1};
use crate::evidence::Evidence;

/// WASI interface prefixes a policy may never import. Everything the host
/// links is listed in [`linker`]; these get a clear refusal rather than
/// wasmtime's generic "not found".
pub const FORBIDDEN_IMPORTS: [&str; 5] = [
    "wasi:clocks/",
    "wasi:filesystem/",
    "wasi:random/",
    "wasi:sockets/",
    "wasi:http/",
];

/// The data of one evaluation's store.
pub struct HostState {
    /// Made when the policy first calls WASI: a policy that imports none
    /// (the default policy, the Python and JavaScript builds) never pays
    /// for one.
    wasi: Option<WasiCtx>,
    table: ResourceTable,
    stderr: MemoryOutputPipe,
    limiter: MemoryCap,
    now: i64,
    evidence: Arc<dyn Evidence>,
    /// How many more questions of a batch the evidence answers; the rest are
    /// answered `unknown` without asking it.
    questions_left: usize,
    logs: Vec<LogLine>,
    /// Keeps the epoch advancing while this store exists.
    _ticking: Ticking,
}

impl HostState {
    /// A state granting nothing but the given clock reading and evidence;
    /// `ticking` keeps the deadline clock running while it lives.
    pub fn new(
        now: i64,
        evidence: Arc<dyn Evidence>,
        memory_limit: usize,
        ticking: Ticking,
    ) -> Self {
        let stderr = MemoryOutputPipe::new(crate::limits::POLICY_STDERR);
        HostState {
            wasi: None,
            table: ResourceTable::new(),
            stderr,
            limiter: MemoryCap {
                limit: memory_limit,
                refused: None,
            },
            now,
            evidence,
            questions_left: 0,
            logs: Vec::new(),
            _ticking: ticking,
        }
    }

    /// Lets the evidence answer, over all `liveness.ask` batches of one
    /// evaluation, at most the questions `locks` locks can raise (a process
    /// and a host question each). The host's answers run outside the
    /// policy's deadline, so a policy asking millions of questions must not
    /// make the host read the process table millions of times; questions
    /// past the limit are answered `unknown`, which never removes a lock.
    pub fn limit_questions(&mut self, locks: usize) {
        self.questions_left = locks.saturating_mul(2);
    }

    /// The memory limiter, for [`wasmtime::Store::limiter`].
    pub fn limiter(&mut self) -> &mut dyn ResourceLimiter {
        &mut self.limiter
    }

    /// The size a refused memory growth asked for, if any.
    pub fn memory_refused(&self) -> Option<usize> {
        self.limiter.refused
    }

    /// What the policy wrote to stderr, lossily decoded.
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.contents()).into_owned()
    }

    /// The messages the policy logged.
    pub fn take_logs(&mut self) -> Vec<LogLine> {
        std::mem::take(&mut self.logs)
    }
}

/// Refuses memory growth past a fixed size and remembers that it did.
pub struct MemoryCap {
    limit: usize,
    refused: Option<usize>,
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.limit {
            self.refused = Some(desired);
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        let stderr = &self.stderr;
        // No args, no env, no preopened directories, no network: the builder
        // grants nothing unless asked, and nothing is asked but a stderr pipe.
        let wasi = self
            .wasi
            .get_or_insert_with(|| WasiCtx::builder().stderr(stderr.clone()).build());
        WasiCtxView {
            ctx: wasi,
            table: &mut self.table,
        }
    }
}

impl types::Host for HostState {}

impl clock::Host for HostState {
    fn now(&mut self) -> i64 {
        self.now
    }
}

impl liveness::Host for HostState {
    fn local_hostname(&mut self) -> Option<String> {
        self.evidence.local_hostname()
    }
    fn ask(&mut self, questions: Vec<Question>) -> Vec<Liveness> {
        questions
            .iter()
            .map(|question| {
                if self.questions_left == 0 {
                    return Liveness::Unknown(
                        "not asked: more questions than the locks of this request raise".into(),
                    );
                }
                self.questions_left -= 1;
                match question {
                    Question::Process(q) => self.evidence.process(&q.hostname, q.pid, q.since),
                    Question::Host(q) => self.evidence.host(&q.hostname, q.since),
                }
            })
            .collect()
    }
}

impl log::Host for HostState {
    fn log(&mut self, level: LogLevel, message: String) {
        self.push_log(level, message);
    }
}

impl v0_1::types::Host for HostState {}

impl v0_1::clock::Host for HostState {
    fn now(&mut self) -> i64 {
        self.now
    }
}

impl v0_1::liveness::Host for HostState {
    fn local_hostname(&mut self) -> Option<String> {
        self.evidence.local_hostname()
    }
    fn process(&mut self, hostname: String, pid: i64, since: i64) -> v0_1::Liveness {
        v0_1::liveness(self.evidence.process(&hostname, pid, since))
    }
    fn host(&mut self, hostname: String, since: i64) -> v0_1::Liveness {
        v0_1::liveness(self.evidence.host(&hostname, since))
    }
}

impl v0_1::log::Host for HostState {
    fn log(&mut self, level: v0_1::log::Level, message: String) {
        let level = match level {
            v0_1::log::Level::Debug => LogLevel::Debug,
            v0_1::log::Level::Info => LogLevel::Info,
            v0_1::log::Level::Warn => LogLevel::Warn,
            v0_1::log::Level::Error => LogLevel::Error,
        };
        self.push_log(level, message);
    }
}

impl HostState {
    /// Keeps one log line, bounded in number and length.
    fn push_log(&mut self, level: LogLevel, mut message: String) {
        if self.logs.len() >= crate::limits::POLICY_LOG_LINES {
            return;
        }
        crate::text::cut(&mut message, crate::limits::POLICY_LOG_LINE);
        self.logs.push(LogLine { level, message });
    }
}

fn table(state: &mut HostState) -> &mut ResourceTable {
    &mut state.table
}

/// Selects the resource table for the wasi:io host traits.
struct Table;

impl HasData for Table {
    type Data<'a> = &'a mut ResourceTable;
}

/// The linker every policy is instantiated with: the contract's imports, and
/// of WASI only the standard streams and what they need (which Rust's standard
/// library imports even when unused). stdin is empty, stdout is discarded,
/// stderr is captured for error messages, args and environment are empty.
pub fn linker(engine: &Engine) -> wasmtime::Result<Linker<HostState>> {
    let mut l: Linker<HostState> = Linker::new(engine);
    contract::StaleLockPolicy::add_to_linker::<_, HasSelf<_>>(&mut l, |s: &mut HostState| s)?;
    v0_1::StaleLockPolicy::add_to_linker::<_, HasSelf<_>>(&mut l, |s: &mut HostState| s)?;
    io::error::add_to_linker::<_, Table>(&mut l, table)?;
    io::poll::add_to_linker::<_, Table>(&mut l, table)?;
    io::streams::add_to_linker::<_, Table>(&mut l, table)?;
    cli::exit::add_to_linker::<_, WasiCli>(&mut l, HostState::cli)?;
    cli::environment::add_to_linker::<_, WasiCli>(&mut l, HostState::cli)?;
    cli::stdin::add_to_linker::<_, WasiCli>(&mut l, HostState::cli)?;
    cli::stdout::add_to_linker::<_, WasiCli>(&mut l, HostState::cli)?;
    cli::stderr::add_to_linker::<_, WasiCli>(&mut l, HostState::cli)?;
    cli::terminal_input::add_to_linker::<_, WasiCli>(&mut l, HostState::cli)?;
    cli::terminal_output::add_to_linker::<_, WasiCli>(&mut l, HostState::cli)?;
    cli::terminal_stdin::add_to_linker::<_, WasiCli>(&mut l, HostState::cli)?;
    cli::terminal_stdout::add_to_linker::<_, WasiCli>(&mut l, HostState::cli)?;
    cli::terminal_stderr::add_to_linker::<_, WasiCli>(&mut l, HostState::cli)?;
    Ok(l)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::contract::HostQuestion;
    use crate::runtime::ticker::Ticker;

    /// Says alive to everything and counts what it was asked.
    #[derive(Default)]
    struct Counting(AtomicUsize);

    impl Evidence for Counting {
        fn local_hostname(&self) -> Option<String> {
            None
        }
        fn process(&self, _: &str, _: i64, _: i64) -> Liveness {
            self.0.fetch_add(1, Ordering::SeqCst);
            Liveness::Alive("counted".into())
        }
        fn host(&self, _: &str, _: i64) -> Liveness {
            self.0.fetch_add(1, Ordering::SeqCst);
            Liveness::Alive("counted".into())
        }
    }

    #[test]
    fn questions_beyond_what_the_locks_raise_are_answered_unknown_unasked() {
        let engine = Engine::default();
        let ticker = Ticker::start(&engine);
        let evidence = Arc::new(Counting::default());
        let mut state = HostState::new(0, evidence.clone(), 1 << 20, ticker.ticking());
        state.limit_questions(2);
        let question = Question::Host(HostQuestion {
            hostname: "h".into(),
            since: 0,
        });
        let first = liveness::Host::ask(&mut state, vec![question.clone(); 3]);
        let second = liveness::Host::ask(&mut state, vec![question; 3]);
        assert_eq!(
            evidence.0.load(Ordering::SeqCst),
            4,
            "two per lock, over all batches"
        );
        let alive = |answers: &[Liveness]| {
            answers
                .iter()
                .map(|a| matches!(a, Liveness::Alive(_)))
                .collect::<Vec<_>>()
        };
        assert_eq!(alive(&first), [true, true, true]);
        assert_eq!(alive(&second), [true, false, false]);
        assert!(matches!(&second[2], Liveness::Unknown(d) if d.contains("more questions")));
    }
}
