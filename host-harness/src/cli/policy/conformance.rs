//! `lockwarden policy conformance --cases DIR`: runs a policy through the
//! conformance cases and says which pass, and which it skipped because they
//! need a newer contract than the policy implements.

use lockwarden::text::escape;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use lockwarden::conformance::{self, CaseResult, SuiteRun};
use lockwarden::runtime::Policy;
use serde_json::{Value, json};

use crate::cli::{Failure, Outcome, PolicyArgs};
use lockwarden::report::policy_json;

#[derive(Debug, Args)]
pub struct ConformanceArgs {
    #[command(flatten)]
    policy: PolicyArgs,
    /// The directory of *.json cases (e.g. tests/conformance).
    #[arg(long, value_name = "DIR")]
    cases: PathBuf,
    /// Print every case's observed answer as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(args: &ConformanceArgs) -> Outcome<ExitCode> {
    let cases = conformance::load_dir(&args.cases).map_err(|e| Failure::usage(e.to_string()))?;
    let (runtime, policy) = args.policy.load()?;
    let suite = conformance::run_suite(&cases, &runtime, &policy);
    if args.json {
        print_json(&suite, &policy);
    } else {
        print_text(&suite);
    }
    Ok(if suite.failed() == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(crate::cli::code::ERROR)
    })
}

/// The suite's results as one JSON document.
fn print_json(suite: &SuiteRun<'_>, policy: &Policy) {
    let report: Vec<Value> = suite
        .results
        .iter()
        .map(|(case, result)| match result {
            CaseResult::Skipped { needs } => json!({
                "name": case.name,
                "skipped": true,
                "needs_contract": needs,
            }),
            CaseResult::Ran { observed, problems } => json!({
                "name": case.name,
                "passed": problems.is_empty(),
                "problems": problems,
                "observed": observed,
            }),
        })
        .collect();
    let doc = json!({
        "policy": policy_json(policy),
        "contract": suite.contract,
        "skipped": suite.skipped(),
        "cases": report,
    });
    outln!("{}", crate::cli::json_text(&doc));
}

/// The suite's results, one line a case, then the counts.
fn print_text(suite: &SuiteRun<'_>) {
    for (case, result) in &suite.results {
        let name = escape(&case.name);
        match result {
            CaseResult::Skipped { needs } => {
                outln!("skip  {name}: needs contract {}", escape(needs));
            }
            CaseResult::Ran { problems, .. } if problems.is_empty() => outln!("ok    {name}"),
            CaseResult::Ran { problems, .. } => {
                outln!("FAIL  {name}: {}", escape(&case.description));
                for problem in problems {
                    outln!("        {}", escape(problem));
                }
            }
        }
    }
    let skipped = suite.skipped();
    let why = if skipped == 0 {
        String::new()
    } else {
        format!(
            " (they need a newer contract than the policy's {})",
            suite.contract
        )
    };
    outln!(
        "{} passed, {} failed, {skipped} skipped{why}",
        suite.passed(),
        suite.failed()
    );
}
