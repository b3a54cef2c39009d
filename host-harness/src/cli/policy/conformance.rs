//! `lockwarden policy conformance --cases DIR`: runs a policy through the
//! conformance cases and says which pass.

use lockwarden::text::escape;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use lockwarden::conformance;
use serde_json::json;

use crate::cli::PolicyArgs;
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

pub fn run(args: &ConformanceArgs) -> anyhow::Result<ExitCode> {
    let cases = conformance::load_dir(&args.cases).map_err(anyhow::Error::msg)?;
    let (runtime, policy) = args.policy.load()?;
    let mut failed = 0;
    let mut report = Vec::with_capacity(cases.len());
    for case in &cases {
        let (observed, problems) = match case.run(&runtime, &policy) {
            Ok(observed) => {
                let problems = case.check(&observed);
                (observed, problems)
            }
            Err(e) => (json!({"host_error": e}), vec![e]),
        };
        if !problems.is_empty() {
            failed += 1;
        }
        if !args.json {
            if problems.is_empty() {
                outln!("ok    {}", escape(&case.name));
            } else {
                outln!(
                    "FAIL  {}: {}",
                    escape(&case.name),
                    escape(&case.description)
                );
                for problem in &problems {
                    outln!("        {}", escape(problem));
                }
            }
        }
        report.push(json!({
            "name": case.name,
            "passed": problems.is_empty(),
            "problems": problems,
            "observed": observed,
        }));
    }
    if args.json {
        let doc = json!({"policy": policy_json(&policy), "cases": report});
        outln!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        outln!("{} passed, {failed} failed", cases.len() - failed);
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(crate::cli::code::ERROR)
    })
}
