//! The policy: evaluation in the component versus the same rules compiled
//! natively, and the cost of starting a plugin.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use lockwarden::contract::{self, EvaluateRequest, Liveness, Repository};
use lockwarden::evidence::Recorded;
use lockwarden::runtime::{ArtifactCache, Limits, Runtime};
use lockwarden_policy_rules::{self as rules, Facts, Question, Settings};

use lockwarden::stats::Summary;

const NOW: i64 = 1_796_040_000_000_000_000;
const MINUTE: i64 = 60_000_000_000;

/// One lock of the benchmark request: every fourth is from this machine with
/// a dead process, the rest from other hosts with unknown evidence, ages
/// spread from 0 to 60 minutes.
struct Spec {
    id: String,
    time: i64,
    hostname: String,
    pid: i64,
    local: bool,
}

/// The lock a [`Spec`] describes, as the host's contract type.
fn host_lock(s: &Spec) -> contract::Lock {
    contract::Lock {
        id: s.id.clone(),
        time: s.time,
        exclusive: false,
        hostname: s.hostname.clone(),
        username: "root".into(),
        pid: s.pid,
        uid: 0,
        gid: 0,
        first_seen: None,
        stored_at: None,
    }
}

/// The same lock as the rules' own type.
fn native_lock(s: &Spec) -> rules::Lock {
    rules::Lock {
        id: s.id.clone(),
        time: s.time,
        exclusive: false,
        hostname: s.hostname.clone(),
        username: "root".into(),
        pid: s.pid,
        first_seen: None,
        stored_at: None,
    }
}

fn specs(n: usize) -> Vec<Spec> {
    (0..n)
        .map(|i| {
            let local = i % 4 == 0;
            Spec {
                id: format!("{i:064x}"),
                time: NOW - (i as i64 % 60) * MINUTE,
                hostname: if local {
                    "vm".into()
                } else {
                    format!("backup-pod-{}", i % 97)
                },
                pid: 1000 + i as i64,
                local,
            }
        })
        .collect()
}

fn host_request(specs: &[Spec]) -> (EvaluateRequest, Recorded) {
    let mut evidence = Recorded::new(Some("vm".into()));
    let locks = specs
        .iter()
        .map(|s| {
            let process = if s.local {
                Liveness::Dead("no such process".into())
            } else {
                Liveness::Unknown("not this machine".into())
            };
            evidence.insert(
                &s.hostname,
                s.pid,
                s.time,
                process,
                Liveness::Unknown("no inventory".into()),
            );
            host_lock(s)
        })
        .collect();
    let request = EvaluateRequest {
        repository: Repository {
            id: "bench".into(),
            location: "/bench".into(),
            backend: "local".into(),
            version: 2,
        },
        locks,
        unreadable: vec![],
        settings: vec![],
    };
    (request, evidence)
}

/// The same answers as the host's recorded evidence, served natively: the
/// same lookups, without the boundary.
struct NativeFacts {
    process: HashMap<(String, i64, i64), rules::Liveness>,
}

impl Facts for NativeFacts {
    fn local_hostname(&self) -> Option<String> {
        Some("vm".into())
    }
    fn ask(&self, questions: Vec<Question>) -> Vec<rules::Liveness> {
        questions
            .into_iter()
            .map(|q| match q {
                Question::Process {
                    hostname,
                    pid,
                    since,
                } => self
                    .process
                    .get(&(hostname, pid, since))
                    .cloned()
                    .unwrap_or(rules::Liveness::Unknown("not this machine".into())),
                Question::Host { .. } => rules::Liveness::Unknown("no inventory".into()),
            })
            .collect()
    }
    fn warn(&self, _message: &str) {}
}

fn native_request(specs: &[Spec]) -> (Vec<rules::Lock>, NativeFacts) {
    let mut process = HashMap::new();
    let locks = specs
        .iter()
        .map(|s| {
            if s.local {
                process.insert(
                    (s.hostname.clone(), s.pid, s.time),
                    rules::Liveness::Dead("no such process".into()),
                );
            }
            native_lock(s)
        })
        .collect();
    (locks, NativeFacts { process })
}

fn time<R>(reps: usize, mut f: impl FnMut() -> R) -> Summary {
    let samples: Vec<f64> = (0..reps)
        .map(|_| {
            let started = Instant::now();
            std::hint::black_box(f());
            started.elapsed().as_secs_f64()
        })
        .collect();
    Summary::of(&samples)
}

/// Evaluation at one request size.
pub struct Evaluation {
    /// Locks per request.
    pub locks: usize,
    /// The component, through `Runtime::evaluate` (fresh store, checks).
    pub wasm: Summary,
    /// The same rules built against contract 0.1.0 (one host call per
    /// question, verdicts naming their lock's id), the same way.
    pub v0_1: Summary,
    /// The boundary alone: a 0.2.0 component that keeps every lock without
    /// reading it or asking anything, the same way.
    pub boundary: Summary,
    /// The rules compiled natively.
    pub native: Summary,
}

/// Evaluates requests of 1, 100 and 10,000 locks both ways.
pub fn evaluation() -> Vec<Evaluation> {
    let runtime = Runtime::new(Limits::default(), None).expect("engine");
    let policy = runtime.load_default().expect("default policy");
    let path = lockwarden_tests::guests::DEFAULT_0_1.path();
    let bytes = std::fs::read(path).expect("the 0.1.0 build of the default policy");
    let v0_1_policy = runtime
        .load(&path.display().to_string(), &bytes)
        .expect("0.1.0 policy");
    // The misbehave test guest that judges unreadable files stale keeps
    // every lock unread: on requests without unreadable files it is the
    // boundary alone (lowering the request, lifting one verdict per lock).
    let path = lockwarden_tests::guests::REMOVE_UNREADABLE.path();
    let bytes = std::fs::read(path).expect("a keep-all test guest");
    let keep_all = runtime
        .load(&path.display().to_string(), &bytes)
        .expect("keep-all guest");
    let settings = Settings::default();
    [(1, 2000), (100, 500), (10_000, 30)]
        .into_iter()
        .map(|(n, reps)| {
            let specs = specs(n);
            let (request, evidence) = host_request(&specs);
            let evidence = Arc::new(evidence);
            let (locks, facts) = native_request(&specs);
            // Both must agree before their speed means anything.
            let wasm_out = runtime
                .evaluate(&policy, NOW, evidence.clone(), &request)
                .expect("evaluate");
            let native_out = rules::evaluate(NOW, &facts, &settings, &locks, &[]);
            assert_eq!(wasm_out.verdicts.locks.len(), native_out.locks.len());
            for (w, n) in wasm_out.verdicts.locks.iter().zip(&native_out.locks) {
                assert_eq!((w.rule.as_str(), &w.reason), (n.rule, &n.reason));
            }
            let wasm = time(reps, || {
                runtime
                    .evaluate(&policy, NOW, evidence.clone(), &request)
                    .expect("evaluate")
            });
            let native = time(reps, || {
                rules::evaluate(NOW, &facts, &settings, &locks, &[])
            });
            let v0_1_out = runtime
                .evaluate(&v0_1_policy, NOW, evidence.clone(), &request)
                .expect("evaluate 0.1.0");
            assert_eq!(
                v0_1_out.verdicts, wasm_out.verdicts,
                "0.1.0 and 0.2.0 agree"
            );
            let v0_1 = time(reps, || {
                runtime
                    .evaluate(&v0_1_policy, NOW, evidence.clone(), &request)
                    .expect("evaluate")
            });
            let boundary = time(reps, || {
                runtime
                    .evaluate(&keep_all, NOW, evidence.clone(), &request)
                    .expect("evaluate")
            });
            Evaluation {
                locks: n,
                wasm,
                v0_1,
                boundary,
                native,
            }
        })
        .collect()
}

/// Plugin start-up costs.
pub struct Start {
    /// Compile the component (no cache).
    pub first_load: Summary,
    /// Load from the artifact cache.
    pub cached_load: Summary,
    /// Fresh store, instantiate, evaluate one lock, check the verdict.
    pub instantiate_evaluate_one: Summary,
}

/// Measures plugin start.
pub fn start() -> Start {
    let uncached = Runtime::new(Limits::default(), None).expect("engine");
    let first_load = time(5, || uncached.load_default().expect("load"));
    let dir = tempfile::tempdir().expect("temp dir");
    let cached = Runtime::new(
        Limits::default(),
        Some(ArtifactCache::new(dir.path().to_owned())),
    )
    .expect("engine");
    let policy = cached.load_default().expect("warm the cache");
    let cached_load = time(200, || cached.load_default().expect("load"));
    let (request, evidence) = host_request(&specs(1));
    let evidence = Arc::new(evidence);
    let instantiate_evaluate_one = time(5000, || {
        cached
            .evaluate(&policy, NOW, evidence.clone(), &request)
            .expect("evaluate")
    });
    Start {
        first_load,
        cached_load,
        instantiate_evaluate_one,
    }
}

/// What one language costs: the strict example written in it, built from
/// source, in lockwarden's runtime.
pub struct Language {
    /// The language.
    pub name: &'static str,
    /// The component's size in bytes.
    pub bytes: u64,
    /// Compile the component (no cache).
    pub first_load: Summary,
    /// Load from the artifact cache.
    pub cached_load: Summary,
    /// Fresh store, instantiate, evaluate one lock, check the verdict.
    pub evaluate_one: Summary,
    /// The same with 1,000 locks.
    pub evaluate_thousand: Summary,
}

/// The strict example in Rust, Python and JavaScript: the same verdicts
/// (checked first), then each one's start and evaluation costs.
pub fn languages() -> Vec<Language> {
    let examples = [
        ("Rust", lockwarden_tests::guests::STRICT.path().to_owned()),
        ("Python", lockwarden_tests::polyglot::STRICT_PYTHON.path()),
        ("JavaScript", lockwarden_tests::polyglot::STRICT_JS.path()),
    ];
    let (one, one_evidence) = host_request(&specs(1));
    let (thousand, thousand_evidence) = host_request(&specs(1000));
    let (one_evidence, thousand_evidence) = (Arc::new(one_evidence), Arc::new(thousand_evidence));
    let uncached = Runtime::new(Limits::default(), None).expect("engine");
    let dir = tempfile::tempdir().expect("temp dir");
    let cached = Runtime::new(
        Limits::default(),
        Some(ArtifactCache::new(dir.path().to_owned())),
    )
    .expect("engine");
    let mut agreed: Option<Vec<(String, String)>> = None;
    examples
        .into_iter()
        .map(|(name, path)| {
            let bytes = std::fs::read(&path).expect("the strict example's component");
            let source = path.display().to_string();
            let first_load = time(3, || uncached.load(&source, &bytes).expect("load"));
            let policy = cached.load(&source, &bytes).expect("warm the cache");
            let verdicts: Vec<(String, String)> = cached
                .evaluate(&policy, NOW, thousand_evidence.clone(), &thousand)
                .expect("evaluate")
                .verdicts
                .locks
                .into_iter()
                .map(|v| (v.rule, v.reason))
                .collect();
            assert_eq!(
                *agreed.get_or_insert_with(|| verdicts.clone()),
                verdicts,
                "{name}"
            );
            let evaluate = |request: &EvaluateRequest, evidence: &Arc<Recorded>| {
                cached
                    .evaluate(&policy, NOW, evidence.clone(), request)
                    .expect("evaluate")
            };
            Language {
                name,
                bytes: bytes.len() as u64,
                first_load,
                cached_load: time(20, || cached.load(&source, &bytes).expect("load")),
                evaluate_one: time(300, || evaluate(&one, &one_evidence)),
                evaluate_thousand: time(30, || evaluate(&thousand, &thousand_evidence)),
            }
        })
        .collect()
}
