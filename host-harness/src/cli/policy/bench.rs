//! `lockwarden policy bench`: how long a policy takes on a recorded request,
//! in the host's real call path (a fresh instance per evaluation, limits on).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use lockwarden::stats::{Summary, short};
use serde_json::json;

use super::read_request;
use crate::cli::{Outcome, PolicyArgs, parse_duration};
use lockwarden::report::policy_json;
use lockwarden::runtime::Policy;

#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(flatten)]
    policy: PolicyArgs,
    /// The recorded request (JSON), or `-` for standard input.
    #[arg(long, value_name = "FILE")]
    request: PathBuf,
    /// How long to measure, after one warm-up call.
    #[arg(long, value_name = "DURATION", default_value = "3s", value_parser = parse_duration)]
    measurement_time: Duration,
    /// At most this many evaluations.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    max_iterations: usize,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(args: &BenchArgs) -> Outcome<ExitCode> {
    let prepared = read_request(&args.request)?;
    let started = Instant::now();
    let (runtime, policy) = args.policy.load()?;
    let load = started.elapsed();
    let evidence = Arc::new(prepared.evidence);
    let evaluate = || {
        let started = Instant::now();
        runtime
            .evaluate(&policy, prepared.now, evidence.clone(), &prepared.request)
            .map(|_| started.elapsed().as_secs_f64())
    };
    let first = evaluate()?;
    let mut samples = Vec::new();
    let deadline = Instant::now() + args.measurement_time;
    while samples.len() < args.max_iterations.max(1) && Instant::now() < deadline {
        samples.push(evaluate()?);
    }
    let s = Summary::of(&samples);
    let locks = prepared.request.locks.len() + prepared.request.unreadable.len();
    if args.json {
        let doc = json!({
            "policy": policy_json(&policy),
            "locks": locks,
            "load_seconds": load.as_secs_f64(),
            "first_evaluation_seconds": first,
            "evaluation_seconds": s.json(),
        });
        outln!("{}", crate::cli::json_text(&doc));
        return Ok(ExitCode::SUCCESS);
    }
    let timings = Timings { load, first, s };
    print_text(&policy, &args.request, locks, &timings);
    Ok(ExitCode::SUCCESS)
}

/// What was measured.
struct Timings {
    load: Duration,
    first: f64,
    s: Summary,
}

fn print_text(policy: &Policy, request: &Path, locks: usize, t: &Timings) {
    let us = |x: f64| format!("{} µs", short(x * 1e6));
    let s = &t.s;
    outln!(
        "policy:      {} ({})",
        lockwarden::text::escape(&policy.info().name),
        lockwarden::text::escape(policy.source())
    );
    outln!(
        "request:     {} ({locks} locks and unreadable files)",
        request.display()
    );
    outln!(
        "load:        {} (compile, or read from the cache)",
        us(t.load.as_secs_f64())
    );
    outln!("first call:  {}", us(t.first));
    outln!(
        "evaluate:    mean {}, median {}, min {}, max {}, p90 {} over {} calls",
        us(s.mean),
        us(s.median),
        us(s.min),
        us(s.max),
        us(s.p90),
        s.n
    );
    if locks > 0 {
        outln!(
            "per lock:    {} (median / locks)",
            us(s.median / locks as f64)
        );
    }
    outln!("each call instantiates the policy afresh and runs under its limits, as check does");
}
