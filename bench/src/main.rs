//! `make bench`: lockwarden measured the way its users would compare it, in
//! one run, as ratios: against restic (`LOCKWARDEN_TEST_RESTIC`, which
//! `make bench` sets to restic 0.18; Debian 12's 0.14 beside it) and against the
//! policy's rules compiled natively, and the component in a second host
//! (Node.js), and requests per check on object storage. Writes BENCHMARKS.md and
//! target/bench/results.json. Never part of `make test`.

mod hosts;
mod pod_end;
mod policy;
mod report;
mod requests;
mod tools;

use std::time::Instant;

fn main() {
    let started = Instant::now();
    let step = |name: &str| eprintln!("[{:>5.0}s] {name}", started.elapsed().as_secs_f64());

    // `lockwarden-bench scale N...`: only `watch` over N repositories, each.
    let args: Vec<String> = std::env::args().collect();
    // `lockwarden-bench prepare N DIR`: one-shot unlock's repository, kept.
    if args.get(1).map(String::as_str) == Some("prepare") {
        let n = args[2].parse().expect("a number of locks");
        tools::prepare(n, std::path::Path::new(&args[3]));
        return;
    }
    // `lockwarden-bench pod-end`: only a pod's end to its lock's removal.
    if args.get(1).map(String::as_str) == Some("pod-end") {
        let p = pod_end::measure();
        for row in &p.rows {
            eprintln!(
                "{}: deleted p50 {:?} p99 {:?}, failed p50 {:?} p99 {:?}",
                row.operator,
                pod_end::quantile(&row.deleted, 0.5),
                pod_end::quantile(&row.deleted, 0.99),
                pod_end::quantile(&row.failed, 0.5),
                pod_end::quantile(&row.failed, 0.99)
            );
        }
        let c = &p.churn;
        eprintln!(
            "live kept: {}; churn: {} ends, {:.1} lists/min, {:.1} watches/min, {} checks",
            p.live_kept, c.pod_ends, c.lists, c.watches, c.checks
        );
        return;
    }
    // `lockwarden-bench scale-s3 N...`: the same on moto's S3.
    let scale_on = match args.get(1).map(String::as_str) {
        Some("scale") => Some(tools::watch_at_scale as fn(usize) -> tools::WatchRun),
        Some("scale-s3") => Some(tools::watch_at_scale_on_s3 as fn(usize) -> tools::WatchRun),
        _ => None,
    };
    if let Some(watch_at_scale) = scale_on {
        for n in &args[2..] {
            let n = n.parse().expect("a number of repositories");
            eprintln!("{:?}", watch_at_scale(n));
        }
        return;
    }
    step("policy evaluation: component vs native");
    let evaluation = policy::evaluation();
    step("plugin start");
    let start = policy::start();
    step("the strict example in Rust, Python and JavaScript");
    let languages = policy::languages();
    // `lockwarden-bench policy` stops here: a quick loop for profiling.
    if std::env::args().nth(1).as_deref() == Some("policy") {
        for e in &evaluation {
            eprintln!(
                "{} locks: wasm {:?}, native {:?}",
                e.locks, e.wasm, e.native
            );
        }
        eprintln!(
            "start: {:?} {:?} {:?}",
            start.first_load, start.cached_load, start.instantiate_evaluate_one
        );
        for l in &languages {
            eprintln!(
                "{}: first {:?} cached {:?} one {:?} 1000 {:?}",
                l.name, l.first_load, l.cached_load, l.evaluate_one, l.evaluate_thousand
            );
        }
        return;
    }
    step("one-shot unlock, 1,000 locks");
    let unlock_1k = tools::one_shot_unlock(1_000, 7);
    step("one-shot unlock, 10,000 locks");
    let unlock_10k = tools::one_shot_unlock(10_000, 3);
    step("periodic round over 100 repositories");
    let round = tools::periodic_round(100);
    let mut scale: Vec<_> = [100, 1_000, 5_000]
        .into_iter()
        .map(|n| {
            step(&format!("watch over {n} repositories"));
            tools::watch_at_scale(n)
        })
        .collect();
    step("watch over 1,000 repositories on S3 (moto)");
    scale.push(tools::watch_at_scale_on_s3(1_000));
    step("check over REST, 1,000 locks");
    let rest = tools::over_rest(1_000, 5);
    step("requests per check on S3, Azure and GCS");
    let requests = requests::per_store();
    step("the same component in Node.js (jco) and in wasmtime");
    let hosts = hosts::compare();
    step("a pod's end to its lock's removal, on the real API server");
    let pod_end = pod_end::measure();
    step("writing BENCHMARKS.md and target/bench/results.json");

    let results = report::Results {
        evaluation,
        start,
        languages,
        unlock: vec![unlock_1k, unlock_10k],
        round,
        scale,
        rest,
        requests,
        hosts,
        pod_end,
        seconds: started.elapsed().as_secs_f64(),
    };
    report::write(&results);
    step("done");
}
