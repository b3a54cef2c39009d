//! BENCHMARKS.md and target/bench/results.json from one run.

use std::fmt::Write as _;
use std::process::Command;

use serde_json::{Value, json};

use crate::hosts::HostPair;
use crate::pod_end::{PodEnd, quantile};
use crate::policy::{Evaluation, Language, Start};
use crate::requests::{LOCKS, StoreCost};
use crate::tools::{Pairs, Round, Run, SECOND_RESTIC, WatchRun};
use lockwarden::stats::short;
use lockwarden_tests::restic_version::restic_program;

/// Everything one `make bench` measured.
pub struct Results {
    pub evaluation: Vec<Evaluation>,
    pub start: Start,
    pub languages: Vec<Language>,
    pub unlock: Vec<Pairs>,
    pub round: Round,
    pub scale: Vec<WatchRun>,
    pub rest: Pairs,
    pub requests: Vec<StoreCost>,
    pub hosts: Vec<HostPair>,
    pub pod_end: PodEnd,
    pub seconds: f64,
}

/// What dominates the remaining costs, from profiling (see BENCHMARKS.md).
const ANALYSIS: &str = include_str!("analysis.md");

fn command_line(program: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .ok()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .to_owned()
        })
        .unwrap_or_else(|| "(not found)".into())
}

fn machine() -> Vec<(String, String)> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_default();
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem = meminfo
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .nth(1)
        .unwrap_or("0");
    let mem_gib = mem.parse::<f64>().unwrap_or(0.0) / 1024.0 / 1024.0;
    let lock = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.lock"))
        .unwrap_or_default();
    let wasmtime = lock
        .split("[[package]]")
        .find(|p| p.contains("name = \"wasmtime\"\n"))
        .and_then(|p| p.lines().find_map(|l| l.strip_prefix("version = ")))
        .unwrap_or("?")
        .trim_matches('"')
        .to_owned();
    vec![
        ("CPU".into(), format!("{cpu}, {cores} cores")),
        ("memory".into(), format!("{mem_gib:.0} GiB")),
        ("rustc".into(), command_line("rustc", &["--version"])),
        (
            "restic".into(),
            command_line(restic_program(), &["version"]),
        ),
        (
            "restic, second column".into(),
            command_line(SECOND_RESTIC, &["version"]),
        ),
        ("rclone".into(), command_line("rclone", &["version"])),
        ("wasmtime".into(), wasmtime),
        ("lockwarden".into(), env!("CARGO_PKG_VERSION").into()),
    ]
}

fn verdict(met: bool) -> &'static str {
    if met { "**met**" } else { "**not met**" }
}

fn run_json(runs: &[Run]) -> Value {
    runs.iter()
        .map(|r| json!({"wall_s": r.wall, "peak_rss_kib": r.rss_kib, "cpu_s": r.cpu}))
        .collect()
}

fn pairs_json(p: &Pairs) -> Value {
    json!({
        "locks": p.locks,
        "key": p.key,
        "lockwarden": run_json(&p.lockwarden),
        "restic": run_json(&p.restic),
        "second_restic": run_json(&p.second),
        "lockwarden_floor": run_json(&p.floor),
        "floor_wall_ratio": (!p.floor.is_empty()).then(|| p.ratio_of(&p.floor, |r| r.wall).json()),
        "wall_ratio": p.ratio(|r| r.wall).json(),
        "rss_ratio": p.ratio(|r| r.rss_kib).json(),
        "cpu_ratio": p.ratio(|r| r.cpu).json(),
    })
}

/// One line of the Targets table: what was promised, what was measured, and
/// whether the measurement keeps the promise.
struct Target {
    name: String,
    measured: String,
    met: bool,
}

/// Writes both files.
pub fn write(r: &Results) {
    let (md, json) = render(r, &machine());
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    std::fs::create_dir_all(format!("{root}/target/bench")).expect("target/bench");
    std::fs::write(
        format!("{root}/target/bench/results.json"),
        serde_json::to_string_pretty(&json).expect("json"),
    )
    .expect("write results.json");
    std::fs::write(format!("{root}/BENCHMARKS.md"), md).expect("write BENCHMARKS.md");
}

/// BENCHMARKS.md and results.json of `r`, measured on `machine`.
fn render(r: &Results, machine: &[(String, String)]) -> (String, Value) {
    let mut md = String::new();
    let mut targets = Vec::new();
    intro(&mut md, r.seconds, machine);
    policy_evaluation(&mut md, &r.evaluation, &mut targets);
    plugin_start(&mut md, &r.start, &mut targets);
    languages(&mut md, &r.languages);
    one_shot_unlock(&mut md, &r.unlock, &mut targets);
    periodic_round(&mut md, &r.round, &mut targets);
    watch_at_scale(&mut md, &r.scale, &mut targets);
    over_rest(&mut md, &r.rest);
    requests_per_check(&mut md, &r.requests);
    second_host(&mut md, &r.hosts);
    pod_end(&mut md, &r.pod_end, &mut targets);
    targets_table(&mut md, &targets);
    let _ = writeln!(md, "\n{ANALYSIS}");
    (md, results_json(r, machine, &targets))
}

fn intro(w: &mut String, seconds: f64, machine: &[(String, String)]) {
    let _ = writeln!(w, "# Benchmarks\n");
    let _ = writeln!(
        w,
        "Written by `make bench` (bench/) in one run of {seconds:.0} s. Every ratio compares two \
         things measured in that same run, alternating where they are commands, because these \
         machines are shared and absolute times drift. Medians with the 10th..90th percentile.\n",
    );
    let _ = writeln!(w, "## Machine\n\n| | |\n|---|---|");
    for (k, v) in machine {
        let _ = writeln!(w, "| {k} | {v} |");
    }
}

fn policy_evaluation(w: &mut String, evaluation: &[Evaluation], targets: &mut Vec<Target>) {
    let _ = writeln!(
        w,
        "\n## Policy evaluation: component versus native\n\nThe default policy on one request, \
         in the component through `Runtime::evaluate` (fresh store, instantiation, the call, \
         verdict checks) and as the same rules (`plugin/rules/`) compiled natively. Every \
         fourth lock is from this machine (a `process` question), all raise a `host` question; \
         under contract 0.2.0 the policy asks them in one `liveness.ask` batch, each distinct \
         question once, and its verdicts follow the request's order. The 0.1.0 column is the \
         same rules built against contract 0.1.0 (`tests/guests/default-0.1.0`: one host call \
         per question, verdicts naming their lock's id), in the same host. All three produce \
         identical verdicts, checked before timing. \"Boundary alone\" is a 0.2.0 test guest \
         that keeps every lock without reading it or asking anything: lowering the request and \
         lifting one short verdict per lock, the floor any policy pays in this host.\n\n\
         | locks | component (0.2.0) | 0.1.0 build | boundary alone | native | wasm/native | \
         component per lock |\n|---|---|---|---|---|---|---|"
    );
    for e in evaluation {
        let ratio = e.wasm.median / e.native.median;
        let _ = writeln!(
            w,
            "| {} | {} | {} | {} | {} | {}x | {} µs |",
            e.locks,
            e.wasm.show(1e3, "ms"),
            e.v0_1.show(1e3, "ms"),
            e.boundary.show(1e3, "ms"),
            e.native.show(1e3, "ms"),
            short(ratio),
            short(e.wasm.median * 1e6 / e.locks as f64)
        );
        if e.locks == 10_000 {
            targets.push(Target {
                name: "policy evaluation, 10,000 locks: wasm ≤ 2x native".into(),
                measured: format!("{}x", short(ratio)),
                met: ratio <= 2.0,
            });
        }
    }
}

fn plugin_start(w: &mut String, s: &Start, targets: &mut Vec<Target>) {
    let _ = writeln!(
        w,
        "\n## Plugin start\n\n| step | median (p10..p90) | runs |\n|---|---|---|\n\
         | first load (compile with cranelift) | {} | {} |\n\
         | cached load (artifact from the cache, link, `info`) | {} | {} |\n\
         | instantiate + evaluate one lock | {} | {} |",
        s.first_load.show(1e3, "ms"),
        s.first_load.n,
        s.cached_load.show(1e3, "ms"),
        s.cached_load.n,
        s.instantiate_evaluate_one.show(1e6, "µs"),
        s.instantiate_evaluate_one.n
    );
    targets.push(Target {
        name: "plugin start: cached load ≤ 1 ms".into(),
        measured: format!("{} ms", short(s.cached_load.median * 1e3)),
        met: s.cached_load.median <= 1e-3,
    });
    targets.push(Target {
        name: "plugin start: instantiate + evaluate one lock ≤ 20 µs".into(),
        measured: format!("{} µs", short(s.instantiate_evaluate_one.median * 1e6)),
        met: s.instantiate_evaluate_one.median <= 20e-6,
    });
}

fn languages(w: &mut String, languages: &[Language]) {
    let _ = writeln!(
        w,
        "\n## Policies in Python and JavaScript\n\nThe strict example written in each language \
         (`examples/policies/strict`, `strict-python`, `strict-js`), built from source as \
         `make` builds it, in lockwarden's runtime with the default limits. All three give \
         identical verdicts on the 1,000-lock request, checked before timing. A Python or \
         JavaScript component carries its interpreter (CPython, SpiderMonkey) with the heap \
         its toolchain initialised at build time: compiling it is a one-time cost per \
         component and machine (the artifact cache keeps the result), and every evaluation \
         starts a fresh instance from that snapshot.\n\n\
         | language | component | first load (compile) | cached load | instantiate + evaluate 1 lock | 1,000 locks | 1 lock vs Rust | 1,000 locks vs Rust |\n\
         |---|---|---|---|---|---|---|---|"
    );
    let Some(rust) = languages.first() else {
        return;
    };
    for l in languages {
        let _ = writeln!(
            w,
            "| {} | {} MB | {} | {} | {} | {} | {}x | {}x |",
            l.name,
            short(l.bytes as f64 / 1e6),
            l.first_load.show(1.0, "s"),
            l.cached_load.show(1e3, "ms"),
            l.evaluate_one.show(1e3, "ms"),
            l.evaluate_thousand.show(1e3, "ms"),
            short(l.evaluate_one.median / rust.evaluate_one.median),
            short(l.evaluate_thousand.median / rust.evaluate_thousand.median),
        );
    }
}

/// A tool's wall time and peak RSS, `median (p10..p90)` with units.
fn wall_and_rss(runs: &[Run]) -> (String, String) {
    (
        Pairs::of(runs, |x| x.wall).show(1.0, "s"),
        Pairs::of(runs, |x| x.rss_kib).show(1.0 / 1024.0, "MiB"),
    )
}

fn one_shot_unlock(w: &mut String, unlock: &[Pairs], targets: &mut Vec<Target>) {
    let _ = writeln!(
        w,
        "\n## One-shot unlock: `lockwarden unlock` versus `restic unlock`\n\nIdentical copies of \
         a local repository (locks from other hosts, zstd, half of them 40 minutes old), one \
         copy per run, the tools rotating which goes first. The ratios are against restic \
         (the Environment's); the second restic's wall time and RSS are beside them. All leave exactly the \
         fresh half (checked). lockwarden's artifact cache is warm, as on every run after the \
         first. Wall time and peak RSS from GNU time. Most of a run is deriving the key: the \
         repository's scrypt parameters, which restic calibrates on this machine at `init`, \
         are in the key column; lockwarden runs scrypt's p lanes on all cores (within 64 MiB \
         of tables), restic one after another. `watch` derives each key once and keeps it, so \
         this does not change its checks. The floor is `lockwarden check` on a copy without \
         its locks (in the same rotation): the key, the empty listing and the cached policy, \
         what any run on this repository pays before its first lock.\n\n| locks | key (scrypt) \
         | lockwarden wall | restic wall | wall ratio | lockwarden RSS | restic RSS | RSS ratio \
         | second restic: wall, RSS | lockwarden's floor: wall, ratio, RSS | pairs |\n\
         |---|---|---|---|---|---|---|---|---|---|---|"
    );
    for p in unlock {
        let wall = p.ratio(|x| x.wall);
        let rss = p.ratio(|x| x.rss_kib);
        let (lockwarden_wall, lockwarden_rss) = wall_and_rss(&p.lockwarden);
        let (restic_wall, restic_rss) = wall_and_rss(&p.restic);
        let (second_wall, second_rss) = wall_and_rss(&p.second);
        let (floor_wall, floor_rss) = wall_and_rss(&p.floor);
        let floor = p.ratio_of(&p.floor, |x| x.wall);
        let _ = writeln!(
            w,
            "| {} | {} | {lockwarden_wall} | {restic_wall} | {}x ({}..{}) \
             | {lockwarden_rss} | {restic_rss} | {}x ({}..{}) | {second_wall}, {second_rss} \
             | {floor_wall}, {}x, {floor_rss} | {} |",
            p.locks,
            p.key,
            short(wall.median),
            short(wall.p10),
            short(wall.p90),
            short(rss.median),
            short(rss.p10),
            short(rss.p90),
            short(floor.median),
            p.lockwarden.len()
        );
        let limit = if p.locks >= 10_000 { 0.5 } else { 0.35 };
        targets.push(Target {
            name: format!("one-shot unlock, {} locks: wall ≤ {limit}x restic", p.locks),
            measured: format!("{}x", short(wall.median)),
            met: wall.median <= limit,
        });
        targets.push(Target {
            name: format!("one-shot unlock, {} locks: peak RSS ≤ 1.0x restic", p.locks),
            measured: format!("{}x", short(rss.median)),
            met: rss.median <= 1.0,
        });
    }
}

/// How many times more CPU `restic unlock` spent on a round than `watch`.
fn cpu_ratio(round: &Round) -> f64 {
    round.restic_cpu / round.watch_cpu.max(1e-9)
}

fn periodic_round(w: &mut String, round: &Round, targets: &mut Vec<Target>) {
    let cpu_ratio = cpu_ratio(round);
    let _ = writeln!(
        w,
        "\n## Periodic checks: one round over {n} repositories\n\nWhat Velero does every 5 \
         minutes: `restic unlock` once per repository ({n} runs back to back), versus one \
         `lockwarden watch` process checking the same {n} repositories (each with one fresh \
         lock) whose keys are already in memory: its second round, CPU time from /proc between \
         the end of round one and the end of round two (idle time between rounds included).\n\n\
         | | CPU | wall |\n|---|---|---|\n| {n} × `restic unlock` | {} s | {} s |\n\
         | `lockwarden watch`, one round | {} s | {} s of checks (sum of check durations) |\n\
         | restic / lockwarden | **{}x less CPU** | {}x |",
        short(round.restic_cpu),
        short(round.restic_wall),
        short(round.watch_cpu),
        short(round.watch_busy),
        short(cpu_ratio),
        short(round.restic_wall / round.watch_busy.max(1e-9)),
        n = round.repositories,
    );
    targets.push(Target {
        name: "periodic round over 100 repositories: ≥ 50x less CPU than restic unlock".into(),
        measured: format!("{}x", short(cpu_ratio)),
        met: cpu_ratio >= 50.0,
    });
}

/// CPU seconds per repository per round.
fn per_repository(run: &WatchRun) -> f64 {
    run.round_cpu / run.repositories.max(1) as f64
}

fn watch_at_scale(w: &mut String, runs: &[WatchRun], targets: &mut Vec<Target>) {
    let _ = writeln!(
        w,
        "\n## watch at scale\n\nOne `lockwarden watch` process over more and more \
         repositories (each one fresh lock, checked every 40 s), observed through its first two \
         rounds. The copies share the template's cheap key, because a key is derived once, in \
         round one, and what grows with the count is every round after it. CPU is the \
         process's, from /proc, between the end of round one and the end of round two; RSS is \
         its peak (VmHWM); descriptors and threads are counted after round two; requests are \
         those the store logged between the ends of the two rounds, per check, times the \
         repositories. \"Repositories per core\" is how many one core checks every 5 minutes \
         at that round's CPU per repository.\n\n| store | repositories | first round (wall) \
         | CPU per round | per repository | peak RSS | per repository | open descriptors \
         | threads | requests per round | repositories per core at 5 min |\n\
         |---|---|---|---|---|---|---|---|---|---|---|"
    );
    for run in runs {
        let n = run.repositories.max(1) as f64;
        let _ = writeln!(
            w,
            "| {} | {} | {} s | {} s | {} ms | {} MiB | {} KiB | {} | {} | {} | {:.0} |",
            run.store,
            run.repositories,
            short(run.first_round),
            short(run.round_cpu),
            short(per_repository(run) * 1e3),
            short(run.peak_rss_kib / 1024.0),
            short(run.peak_rss_kib / n),
            run.fds,
            run.threads,
            run.requests_per_round.map_or("none".to_owned(), short),
            300.0 / per_repository(run).max(1e-9),
        );
    }
    let local: Vec<&WatchRun> = runs
        .iter()
        .filter(|r| r.requests_per_round.is_none())
        .collect();
    if let (Some(small), Some(large)) = (local.first(), local.last()) {
        let growth = per_repository(large) / per_repository(small).max(1e-9);
        targets.push(Target {
            name: format!(
                "watch: CPU per repository per round at {} ≤ 1.5x at {} (linear growth)",
                large.repositories, small.repositories
            ),
            measured: format!("{}x", short(growth)),
            met: growth <= 1.5,
        });
    }
}

fn over_rest(w: &mut String, p: &Pairs) {
    let wall = p.ratio(|x| x.wall);
    let (lockwarden_wall, lockwarden_rss) = wall_and_rss(&p.lockwarden);
    let (restic_wall, restic_rss) = wall_and_rss(&p.restic);
    let _ = writeln!(
        w,
        "\n## Over REST: {} locks behind `rclone serve restic` on 127.0.0.1\n\n`lockwarden check` \
         versus `restic unlock` on the same repository (every lock fresh, so neither removes \
         anything), alternating; the key's scrypt parameters: {}.\n\n| | wall | peak RSS |\n|---|---|---|\n\
         | lockwarden check | {lockwarden_wall} | {lockwarden_rss} |\n\
         | restic unlock | {restic_wall} | {restic_rss} |\n| ratio | {}x ({}..{}) | {}x |",
        p.locks,
        p.key,
        short(wall.median),
        short(wall.p10),
        short(wall.p90),
        short(p.ratio(|x| x.rss_kib).median)
    );
}

fn requests_per_check(w: &mut String, stores: &[StoreCost]) {
    let _ = writeln!(
        w,
        "\n## Requests to object storage, per repository\n\nCounted by the servers on 127.0.0.1 \
         (moto, Azurite, fake-gcs-server) for one repository holding {LOCKS} live locks that \
         nobody removes. restic reaches Azure and GCS through `rclone:`, as in the tests (restic \
         0.14 cannot be pointed at their emulators). Velero ran `restic unlock` every 5 minutes per \
         repository; `watch` at the same interval lists `locks/` once per check and reads only \
         locks it has not read (a lock's name is the hash of its contents).\n\n\
         | store | restic unlock | lockwarden unlock | watch, first check | watch, each later check | per hour at 5 min: restic unlock / watch |\n\
         |---|---|---|---|---|---|"
    );
    for s in stores {
        let c = &s.cost;
        let _ = writeln!(
            w,
            "| {} | {} | {} | {} | {:.1} | {} / {:.0} |",
            s.store,
            c.restic_unlock,
            c.lockwarden_unlock,
            c.watch_first,
            c.watch_per_check,
            12 * c.restic_unlock,
            12.0 * c.watch_per_check
        );
    }
}

fn second_host(w: &mut String, hosts: &[HostPair]) {
    let _ = writeln!(
        w,
        "\n## The same component in other hosts: Node.js through jco, Go through wazero\n\n\
         The default policy, built once, run by lockwarden (wasmtime, cranelift), by \
         `tests/node-host` (jco transpile, V8) and by the Go host `hosts/go` (wazero's \
         compiler, pure Go), each timed by its own bench: `lockwarden policy bench`, \
         `tests/node-host/bench.mjs` and `go test -bench BenchmarkEvaluate`, a fresh instance \
         and one `evaluate` per call, the recorded answers served through the imports. The Go \
         column's spread is over 10 runs of `go test -bench`, each the mean of the calls that \
         fit in a second. `make test` checks that all three give identical answers on every \
         conformance case. A CPU profile of the Node.js host (53 calls on the 6-entry request) \
         puts 476 of 560 ms in jco's generated instantiation code (`_initGenerator`), not in \
         the policy: Node.js pays for a fresh instance per call far more than wasmtime, whose \
         `InstancePre` and pooling allocator make one cost microseconds.\n\n\
         | request | entries | wasmtime | Node.js | Node.js/wasmtime | Go (wazero) | \
         wazero/wasmtime |\n|---|---|---|---|---|---|---|"
    );
    for h in hosts {
        let _ = writeln!(
            w,
            "| `{}` | {} | {} | {} | {}x | {} | {}x |",
            h.request,
            h.entries,
            h.wasmtime.show(1e6, "µs"),
            h.node.show(1e6, "µs"),
            short(h.node.median / h.wasmtime.median),
            h.go.show(1e6, "µs"),
            short(h.go.median / h.wasmtime.median)
        );
    }
}

/// Seconds, with two decimals, or `missed` when none were measured.
fn seconds(time: Option<std::time::Duration>) -> String {
    time.map_or("missed".into(), |t| format!("{:.2} s", t.as_secs_f64()))
}

fn pod_end(w: &mut String, p: &PodEnd, targets: &mut Vec<Target>) {
    let _ = writeln!(
        w,
        "\n## From a pod's end to its lock's removal\n\nOn the real API server \
         (kube-apiserver with etcd, no kubelet), one `lockwarden watch` with one repository per \
         operator's pod names (`hosts_kubernetes`, checked every 5 minutes, so only the pod \
         watch can be this fast). Each trial makes a pod of the pattern, writes its lock, then \
         deletes the pod or sets it Failed, and times until the lock file is gone. A live \
         holder's lock beside each was kept through every trial: {}. KubeStash documents no \
         pod names, so pods are no evidence for it and its locks go by age (30 minutes). The \
         anchors: restic alone waits 30 minutes after the last refresh, Stash unlocks \
         (`--remove-all`) at the next job, KubeStash polls for up to an hour, K8up waits \
         unbounded, VolSync waits for a human.\n\n| operator | pod, e.g. | deleted: p50 | p99 | \
         Failed: p50 | p99 | missed |\n|---|---|---|---|---|---|---|",
        if p.live_kept { "yes" } else { "**NO**" }
    );
    let mut worst = None;
    for row in &p.rows {
        let missed = (row.deleted.iter().chain(&row.failed))
            .filter(|t| t.is_none())
            .count();
        let p99 = [quantile(&row.deleted, 0.99), quantile(&row.failed, 0.99)];
        worst = worst.max(p99.into_iter().flatten().max());
        let _ = writeln!(
            w,
            "| {} | `{}` | {} | {} | {} | {} | {missed} of {} |",
            row.operator,
            row.example,
            seconds(quantile(&row.deleted, 0.5)),
            seconds(p99[0]),
            seconds(quantile(&row.failed, 0.5)),
            seconds(p99[1]),
            row.deleted.len() + row.failed.len()
        );
    }
    let c = &p.churn;
    let _ = writeln!(
        w,
        "\nThe cost, while 1,000 job pods (named like K8up's) were deleted and made again, {} ends in \
         a minute: {:.1} pod LISTs and {:.1} pod WATCHes per minute by `watch` (the API \
         server's own `apiserver_request_total`), and {} checks, each a listing of `locks/` \
         and a read of each lock: a pod's end costs no request to the storage until a check \
         runs, and events close together share one check.",
        c.pod_ends, c.lists, c.watches, c.checks
    );
    let missed = p
        .rows
        .iter()
        .any(|r| (r.deleted.iter().chain(&r.failed)).any(Option::is_none));
    targets.push(Target {
        name: "a dead holder's lock removed within 10 s of its pod's end (p99)".into(),
        measured: seconds(worst),
        met: p.live_kept
            && !missed
            && worst.is_some_and(|t| t < std::time::Duration::from_secs(10)),
    });
}

fn pod_end_json(p: &PodEnd) -> Value {
    let times = |ts: &[Option<std::time::Duration>]| -> Vec<Value> {
        ts.iter()
            .map(|t| t.map_or(Value::Null, |t| json!(t.as_secs_f64())))
            .collect()
    };
    json!({
        "live_kept": p.live_kept,
        "rows": p.rows.iter().map(|r| json!({
            "operator": r.operator, "example": r.example,
            "deleted_s": times(&r.deleted), "failed_s": times(&r.failed),
        })).collect::<Vec<_>>(),
        "churn": {"pods": crate::pod_end::CHURN, "pod_ends": p.churn.pod_ends,
                  "lists_per_minute": p.churn.lists, "watches_per_minute": p.churn.watches,
                  "checks": p.churn.checks},
    })
}

fn targets_table(w: &mut String, targets: &[Target]) {
    let _ = writeln!(w, "\n## Targets\n\n| target | measured | |\n|---|---|---|");
    for t in targets {
        let _ = writeln!(w, "| {} | {} | {} |", t.name, t.measured, verdict(t.met));
    }
}

fn results_json(r: &Results, machine: &[(String, String)], targets: &[Target]) -> Value {
    let s = &r.start;
    let round = &r.round;
    json!({
        "seconds": r.seconds,
        "machine": machine.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect::<serde_json::Map<_, _>>(),
        "policy_evaluation": r.evaluation.iter().map(|e| json!({
            "locks": e.locks, "wasm_s": e.wasm.json(), "contract_0_1_s": e.v0_1.json(), "boundary_s": e.boundary.json(), "native_s": e.native.json(),
            "ratio": e.wasm.median / e.native.median,
        })).collect::<Vec<_>>(),
        "plugin_start": {
            "first_load_s": s.first_load.json(),
            "cached_load_s": s.cached_load.json(),
            "instantiate_evaluate_one_s": s.instantiate_evaluate_one.json(),
        },
        "languages": r.languages.iter().map(|l| json!({
            "language": l.name, "bytes": l.bytes, "first_load_s": l.first_load.json(),
            "cached_load_s": l.cached_load.json(), "evaluate_one_s": l.evaluate_one.json(),
            "evaluate_thousand_s": l.evaluate_thousand.json(),
        })).collect::<Vec<_>>(),
        "one_shot_unlock": r.unlock.iter().map(pairs_json).collect::<Vec<_>>(),
        "periodic_round": {
            "repositories": round.repositories, "restic_cpu_s": round.restic_cpu,
            "restic_wall_s": round.restic_wall, "watch_cpu_s": round.watch_cpu,
            "watch_busy_s": round.watch_busy, "cpu_ratio": cpu_ratio(round),
        },
        "watch_at_scale": r.scale.iter().map(|w| json!({
            "store": w.store, "requests_per_round": w.requests_per_round,
            "repositories": w.repositories, "first_round_s": w.first_round,
            "round_cpu_s": w.round_cpu, "round_busy_s": w.round_busy,
            "peak_rss_kib": w.peak_rss_kib, "fds": w.fds, "threads": w.threads,
        })).collect::<Vec<_>>(),
        "rest": pairs_json(&r.rest),
        "requests": r.requests.iter().map(|s| json!({
            "store": s.store.to_string(), "locks": LOCKS,
            "restic_unlock": s.cost.restic_unlock, "lockwarden_unlock": s.cost.lockwarden_unlock,
            "watch_first": s.cost.watch_first, "watch_per_check": s.cost.watch_per_check,
        })).collect::<Vec<_>>(),
        "second_host": r.hosts.iter().map(|h| json!({
            "request": h.request, "entries": h.entries,
            "wasmtime_s": h.wasmtime.json(), "node_s": h.node.json(), "go_s": h.go.json(),
            "ratio": h.node.median / h.wasmtime.median,
            "go_ratio": h.go.median / h.wasmtime.median,
        })).collect::<Vec<_>>(),
        "pod_end": pod_end_json(&r.pod_end),
        "targets": targets.iter().map(|t| json!({"target": t.name, "measured": t.measured, "met": t.met})).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use lockwarden::stats::Summary;

    fn summary(base: f64) -> Summary {
        Summary::of(&[base * 0.9, base, base * 1.1, base * 1.3, base * 0.7])
    }

    fn runs(wall: f64, rss: f64, cpu: f64) -> Vec<Run> {
        (0..3)
            .map(|i| Run {
                wall: wall + i as f64 * 0.01,
                rss_kib: rss + i as f64 * 100.0,
                cpu: cpu + i as f64 * 0.001,
            })
            .collect()
    }

    fn fixture() -> Results {
        Results {
            evaluation: [
                (1, 12e-6, 3e-6),
                (100, 0.4e-3, 0.2e-3),
                (10_000, 31e-3, 17e-3),
            ]
            .into_iter()
            .map(|(locks, wasm, native)| Evaluation {
                locks,
                wasm: summary(wasm),
                v0_1: summary(wasm * 2.0),
                boundary: summary(wasm / 2.0),
                native: summary(native),
            })
            .collect(),
            start: Start {
                first_load: summary(0.85),
                cached_load: summary(0.7e-3),
                instantiate_evaluate_one: summary(41e-6),
            },
            languages: [
                ("Rust", 0.2e6, 0.4, 0.3e-3, 40e-6, 3e-3),
                ("Python", 18e6, 9.5, 4e-3, 2e-3, 40e-3),
            ]
            .into_iter()
            .map(|(name, bytes, first, cached, one, thousand)| Language {
                name,
                bytes: bytes as u64,
                first_load: summary(first),
                cached_load: summary(cached),
                evaluate_one: summary(one),
                evaluate_thousand: summary(thousand),
            })
            .collect(),
            unlock: vec![
                Pairs {
                    locks: 1_000,
                    key: "N=32768, r=8, p=6".into(),
                    lockwarden: runs(0.12, 21_000.0, 0.09),
                    restic: runs(0.31, 45_000.0, 0.4),
                    second: runs(0.33, 40_000.0, 0.42),
                    floor: runs(0.2, 70_000.0, 0.3),
                },
                Pairs {
                    locks: 10_000,
                    key: "N=32768, r=8, p=6".into(),
                    lockwarden: runs(0.9, 60_000.0, 0.8),
                    restic: runs(1.4, 58_000.0, 2.1),
                    second: runs(1.5, 55_000.0, 2.2),
                    floor: runs(0.2, 70_000.0, 0.3),
                },
            ],
            round: Round {
                repositories: 100,
                restic_cpu: 12.5,
                restic_wall: 9.75,
                watch_cpu: 0.11,
                watch_busy: 0.42,
            },
            scale: vec![
                WatchRun {
                    repositories: 100,
                    first_round: 1.5,
                    round_cpu: 0.3,
                    round_busy: 0.4,
                    peak_rss_kib: 40_000.0,
                    fds: 209,
                    threads: 37,
                    store: "local".into(),
                    requests_per_round: None,
                },
                WatchRun {
                    repositories: 5_000,
                    first_round: 30.0,
                    round_cpu: 20.0,
                    round_busy: 30.0,
                    peak_rss_kib: 400_000.0,
                    fds: 10_009,
                    threads: 37,
                    store: "local".into(),
                    requests_per_round: None,
                },
                WatchRun {
                    repositories: 1_000,
                    first_round: 12.0,
                    round_cpu: 3.0,
                    round_busy: 9.0,
                    peak_rss_kib: 90_000.0,
                    fds: 40,
                    threads: 37,
                    store: "S3 (moto)".into(),
                    requests_per_round: Some(1_000.0),
                },
            ],
            rest: Pairs {
                locks: 1_000,
                key: "N=16384, r=8, p=1".into(),
                lockwarden: runs(0.5, 30_000.0, 0.2),
                restic: runs(0.8, 50_000.0, 0.6),
                second: vec![],
                floor: vec![],
            },
            requests: vec![StoreCost {
                store: lockwarden_tests::cloud::Store::S3,
                cost: lockwarden_tests::cloud::cost::Cost {
                    restic_unlock: 12,
                    lockwarden_unlock: 9,
                    watch_first: 9,
                    watch_per_check: 1.0,
                    checks: 5,
                },
            }],
            hosts: vec![
                HostPair {
                    request: "examples/request.json".into(),
                    entries: 6,
                    wasmtime: summary(30e-6),
                    node: summary(9e-3),
                    go: summary(600e-6),
                },
                HostPair {
                    request: "tests/conformance/32-thousands-of-locks.json".into(),
                    entries: 3000,
                    wasmtime: summary(4e-3),
                    node: summary(21e-3),
                    go: summary(40e-3),
                },
            ],
            pod_end: crate::pod_end::PodEnd {
                rows: vec![crate::pod_end::Row {
                    operator: "volsync",
                    example: "volsync-src-db-1-x2b8q".into(),
                    deleted: [1.2, 1.4, 1.3]
                        .map(|s| Some(Duration::from_secs_f64(s)))
                        .into(),
                    failed: vec![Some(Duration::from_secs_f64(1.5)), None],
                }],
                live_kept: true,
                churn: crate::pod_end::Churn {
                    pod_ends: 1500,
                    lists: 40.0,
                    watches: 1.0,
                    checks: 55,
                },
            },
            seconds: 1234.5,
        }
    }

    fn machine() -> Vec<(String, String)> {
        [
            ("CPU", "Test CPU, 2 cores"),
            ("memory", "8 GiB"),
            ("lockwarden", "0.1.0"),
        ]
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect()
    }

    /// The report of a fixed set of results, byte for byte. Regenerate the
    /// files with `BLESS=1 cargo test -p lockwarden-bench` after a deliberate
    /// change of the report, and read the diff.
    #[test]
    fn the_report_renders_as_recorded() {
        let (md, json) = render(&fixture(), &machine());
        let json = serde_json::to_string_pretty(&json).expect("json");
        let md = md
            .strip_suffix(&format!("\n{ANALYSIS}\n"))
            .expect("the analysis closes the report");
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/testdata");
        if std::env::var_os("BLESS").is_some() {
            std::fs::write(format!("{dir}/report.md"), md).expect("write report.md");
            std::fs::write(format!("{dir}/report.json"), &json).expect("write report.json");
            return;
        }
        assert_eq!(md, include_str!("testdata/report.md"));
        assert_eq!(json, include_str!("testdata/report.json"));
    }
}
