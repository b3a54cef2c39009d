//! BENCHMARKS.md and target/bench/results.json from one run.

use std::fmt::Write as _;
use std::process::Command;

use serde_json::{Value, json};

use crate::hosts::HostPair;
use crate::policy::{Evaluation, Start};
use crate::tools::{Pairs, Round, Run};
use lockwarden::stats::short;

/// Everything one `make bench` measured.
pub struct Results {
    pub evaluation: Vec<Evaluation>,
    pub start: Start,
    pub unlock: Vec<Pairs>,
    pub round: Round,
    pub rest: Pairs,
    pub hosts: Vec<HostPair>,
    pub seconds: f64,
}

/// What dominates the remaining costs, from profiling (see BENCHMARKS.md).
const ANALYSIS: &str = include_str!("analysis.md");

fn command_line(program: &str, args: &[&str]) -> String {
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
        ("restic".into(), command_line("restic", &["version"])),
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
        "lockwarden": run_json(&p.lockwarden),
        "restic": run_json(&p.restic),
        "wall_ratio": p.ratio(|r| r.wall).json(),
        "rss_ratio": p.ratio(|r| r.rss_kib).json(),
        "cpu_ratio": p.ratio(|r| r.cpu).json(),
    })
}

/// Writes both files.
pub fn write(r: &Results) {
    let mut md = String::new();
    let mut targets: Vec<(String, String, bool)> = Vec::new();
    let w = &mut md;
    let _ = writeln!(w, "# Benchmarks\n");
    let _ = writeln!(
        w,
        "Written by `make bench` (bench/) in one run of {:.0} s. Every ratio compares two \
         things measured in that same run, alternating where they are commands, because these \
         machines are shared and absolute times drift. Medians with the 10th..90th percentile.\n",
        r.seconds
    );
    let _ = writeln!(w, "## Machine\n\n| | |\n|---|---|");
    for (k, v) in machine() {
        let _ = writeln!(w, "| {k} | {v} |");
    }

    // Policy evaluation.
    let _ = writeln!(
        w,
        "\n## Policy evaluation: component versus native\n\nThe default policy on one request, \
         in the component through `Runtime::evaluate` (fresh store, instantiation, the call, \
         verdict checks) and as the same `rules.rs` compiled natively. Every fourth lock is \
         from this machine (a `process` call), all get a `host` call. Both produce identical \
         verdicts, checked before timing.\n\n| locks | component | native | wasm/native | \
         component per lock |\n|---|---|---|---|---|"
    );
    for e in &r.evaluation {
        let ratio = e.wasm.median / e.native.median;
        let _ = writeln!(
            w,
            "| {} | {} | {} | {}x | {} µs |",
            e.locks,
            e.wasm.show(1e3, "ms"),
            e.native.show(1e3, "ms"),
            short(ratio),
            short(e.wasm.median * 1e6 / e.locks as f64)
        );
        if e.locks == 10_000 {
            targets.push((
                "policy evaluation, 10,000 locks: wasm ≤ 2x native".into(),
                format!("{}x", short(ratio)),
                ratio <= 2.0,
            ));
        }
    }

    // Plugin start.
    let s = &r.start;
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
    targets.push((
        "plugin start: cached load ≤ 1 ms".into(),
        format!("{} ms", short(s.cached_load.median * 1e3)),
        s.cached_load.median <= 1e-3,
    ));
    targets.push((
        "plugin start: instantiate + evaluate one lock ≤ 50 µs".into(),
        format!("{} µs", short(s.instantiate_evaluate_one.median * 1e6)),
        s.instantiate_evaluate_one.median <= 50e-6,
    ));

    // One-shot unlock.
    let _ = writeln!(
        w,
        "\n## One-shot unlock: `lockwarden unlock` versus `restic unlock`\n\nIdentical copies of \
         a local repository (locks from other hosts, zstd, half of them 40 minutes old), one \
         copy per run, the two tools alternating which goes first. Both leave exactly the \
         fresh half (checked). lockwarden's artifact cache is warm, as on every run after the \
         first. Wall time and peak RSS from GNU time.\n\n| locks | lockwarden wall | restic wall \
         | wall ratio | lockwarden RSS | restic RSS | RSS ratio | pairs |\n|---|---|---|---|---|---|---|---|"
    );
    for p in &r.unlock {
        let wall = p.ratio(|x| x.wall);
        let rss = p.ratio(|x| x.rss_kib);
        let _ = writeln!(
            w,
            "| {} | {} | {} | {}x ({}..{}) | {} | {} | {}x ({}..{}) | {} |",
            p.locks,
            Pairs::of(&p.lockwarden, |x| x.wall).show(1.0, "s"),
            Pairs::of(&p.restic, |x| x.wall).show(1.0, "s"),
            short(wall.median),
            short(wall.p10),
            short(wall.p90),
            Pairs::of(&p.lockwarden, |x| x.rss_kib).show(1.0 / 1024.0, "MiB"),
            Pairs::of(&p.restic, |x| x.rss_kib).show(1.0 / 1024.0, "MiB"),
            short(rss.median),
            short(rss.p10),
            short(rss.p90),
            p.lockwarden.len()
        );
        let limit = if p.locks >= 10_000 { 0.8 } else { 1.0 };
        targets.push((
            format!("one-shot unlock, {} locks: wall ≤ {limit}x restic", p.locks),
            format!("{}x", short(wall.median)),
            wall.median <= limit,
        ));
        targets.push((
            format!("one-shot unlock, {} locks: peak RSS ≤ 1.0x restic", p.locks),
            format!("{}x", short(rss.median)),
            rss.median <= 1.0,
        ));
    }

    // Periodic round.
    let round = &r.round;
    let cpu_ratio = round.restic_cpu / round.watch_cpu.max(1e-9);
    let _ = writeln!(
        w,
        "\n## Periodic checks: one round over {} repositories\n\nWhat Velero does every 5 \
         minutes: `restic unlock` once per repository ({} runs back to back), versus one \
         `lockwarden watch` process checking the same {} repositories (each with one fresh \
         lock) whose keys are already in memory: its second round, CPU time from /proc between \
         the end of round one and the end of round two (idle time between rounds included).\n\n\
         | | CPU | wall |\n|---|---|---|\n| {} × `restic unlock` | {} s | {} s |\n\
         | `lockwarden watch`, one round | {} s | {} s of checks (sum of check durations) |\n\
         | restic / lockwarden | **{}x less CPU** | {}x |",
        round.repositories,
        round.repositories,
        round.repositories,
        round.repositories,
        short(round.restic_cpu),
        short(round.restic_wall),
        short(round.watch_cpu),
        short(round.watch_busy),
        short(cpu_ratio),
        short(round.restic_wall / round.watch_busy.max(1e-9))
    );
    targets.push((
        "periodic round over 100 repositories: ≥ 50x less CPU than restic unlock".into(),
        format!("{}x", short(cpu_ratio)),
        cpu_ratio >= 50.0,
    ));

    // REST.
    let p = &r.rest;
    let wall = p.ratio(|x| x.wall);
    let _ = writeln!(
        w,
        "\n## Over REST: {} locks behind `rclone serve restic` on 127.0.0.1\n\n`lockwarden check` \
         versus `restic unlock` on the same repository (every lock fresh, so neither removes \
         anything), alternating.\n\n| | wall | peak RSS |\n|---|---|---|\n| lockwarden check | {} | {} |\n\
         | restic unlock | {} | {} |\n| ratio | {}x ({}..{}) | {}x |",
        p.locks,
        Pairs::of(&p.lockwarden, |x| x.wall).show(1.0, "s"),
        Pairs::of(&p.lockwarden, |x| x.rss_kib).show(1.0 / 1024.0, "MiB"),
        Pairs::of(&p.restic, |x| x.wall).show(1.0, "s"),
        Pairs::of(&p.restic, |x| x.rss_kib).show(1.0 / 1024.0, "MiB"),
        short(wall.median),
        short(wall.p10),
        short(wall.p90),
        short(p.ratio(|x| x.rss_kib).median)
    );

    // Second host.
    let _ = writeln!(
        w,
        "\n## The same component in a second host: Node.js through jco\n\nThe default policy, \
         built once, run by lockwarden (wasmtime, cranelift) and by `tests/node-host` (jco \
         transpile, V8), each timed by its own bench: `lockwarden policy bench` and \
         `tests/node-host/bench.mjs`, a fresh instance and one `evaluate` per call, the \
         recorded answers served through the imports. `make test` checks that both give \
         identical answers on every conformance case. A CPU profile of the Node.js host (53 \
         calls on the 6-entry request) puts 476 of 560 ms in jco's generated instantiation code \
         (`_initGenerator`), not in the policy: Node.js pays for a fresh instance per call far \
         more than wasmtime, whose `InstancePre` and pooling allocator make one cost \
         microseconds.\n\n| request | entries | wasmtime | \
         Node.js | Node.js/wasmtime |\n|---|---|---|---|---|"
    );
    for h in &r.hosts {
        let _ = writeln!(
            w,
            "| `{}` | {} | {} | {} | {}x |",
            h.request,
            h.entries,
            h.wasmtime.show(1e6, "µs"),
            h.node.show(1e6, "µs"),
            short(h.node.median / h.wasmtime.median)
        );
    }

    let _ = writeln!(w, "\n## Targets\n\n| target | measured | |\n|---|---|---|");
    for (name, measured, met) in &targets {
        let _ = writeln!(w, "| {name} | {measured} | {} |", verdict(*met));
    }
    let _ = writeln!(w, "\n{ANALYSIS}");

    let json = json!({
        "seconds": r.seconds,
        "machine": machine().into_iter().map(|(k, v)| (k, Value::String(v))).collect::<serde_json::Map<_, _>>(),
        "policy_evaluation": r.evaluation.iter().map(|e| json!({
            "locks": e.locks, "wasm_s": e.wasm.json(), "native_s": e.native.json(),
            "ratio": e.wasm.median / e.native.median,
        })).collect::<Vec<_>>(),
        "plugin_start": {
            "first_load_s": s.first_load.json(),
            "cached_load_s": s.cached_load.json(),
            "instantiate_evaluate_one_s": s.instantiate_evaluate_one.json(),
        },
        "one_shot_unlock": r.unlock.iter().map(pairs_json).collect::<Vec<_>>(),
        "periodic_round": {
            "repositories": round.repositories, "restic_cpu_s": round.restic_cpu,
            "restic_wall_s": round.restic_wall, "watch_cpu_s": round.watch_cpu,
            "watch_busy_s": round.watch_busy, "cpu_ratio": cpu_ratio,
        },
        "rest": pairs_json(&r.rest),
        "second_host": r.hosts.iter().map(|h| json!({
            "request": h.request, "entries": h.entries,
            "wasmtime_s": h.wasmtime.json(), "node_s": h.node.json(),
            "ratio": h.node.median / h.wasmtime.median,
        })).collect::<Vec<_>>(),
        "targets": targets.iter().map(|(n, m, ok)| json!({"target": n, "measured": m, "met": ok})).collect::<Vec<_>>(),
    });
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    std::fs::create_dir_all(format!("{root}/target/bench")).expect("target/bench");
    std::fs::write(
        format!("{root}/target/bench/results.json"),
        serde_json::to_string_pretty(&json).expect("json"),
    )
    .expect("write results.json");
    std::fs::write(format!("{root}/BENCHMARKS.md"), md).expect("write BENCHMARKS.md");
}
