//! `lockwarden policy ...`: inspect a policy, run it on a recorded request,
//! time it, test it, publish it, or start a new one.

use lockwarden::files::{read_bounded, read_regular_file};
use lockwarden::limits;
use lockwarden::text::escape;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Subcommand};
use lockwarden::contract::PolicyInfo;
use lockwarden::report::{policy_json, verdicts_json};
use lockwarden::request::Prepared;
use lockwarden::runtime::Policy;
use serde_json::json;

use super::{Outcome, PolicyArgs, UsageError};

mod bench;
mod conformance;
mod new;
mod push;

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Show a policy's name, versions, description and settings.
    Info(InfoArgs),
    /// Run a policy on a recorded request and print its verdicts as JSON.
    Eval(EvalArgs),
    /// Time a policy's evaluations of a recorded request.
    Bench(bench::BenchArgs),
    /// Run a policy through conformance cases (e.g. tests/conformance).
    Conformance(conformance::ConformanceArgs),
    /// Push a policy component to an OCI registry and print its digest.
    Push(push::PushArgs),
    /// Start a policy of your own in Rust, Python or JavaScript: write the
    /// strict example, its contract and its conformance cases into DIR.
    New(new::NewArgs),
}

#[derive(Debug, Args)]
pub struct InfoArgs {
    #[command(flatten)]
    policy: PolicyArgs,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct EvalArgs {
    #[command(flatten)]
    policy: PolicyArgs,
    /// The recorded request (JSON), or `-` for standard input.
    #[arg(long, value_name = "FILE")]
    request: PathBuf,
}

pub fn run(command: PolicyCommand) -> Outcome<ExitCode> {
    match command {
        PolicyCommand::Info(args) => info(&args),
        PolicyCommand::Eval(args) => eval(&args),
        PolicyCommand::Bench(args) => bench::run(&args),
        PolicyCommand::Conformance(args) => conformance::run(&args),
        PolicyCommand::Push(args) => push::run(&args),
        PolicyCommand::New(args) => new::run(&args),
    }
}

fn info(args: &InfoArgs) -> Outcome<ExitCode> {
    let (_, policy) = args.policy.load()?;
    let info = policy.info();
    if args.json {
        let mut doc = policy_json(&policy);
        doc["description"] = json!(info.description);
        doc["settings"] = info
            .settings
            .iter()
            .map(|s| json!({"name": s.name, "default": s.default_value, "help": s.help}))
            .collect();
        outln!("{}", crate::cli::json_text(&doc));
    } else {
        outln!("{}", info_text(&policy).trim_end());
    }
    Ok(ExitCode::SUCCESS)
}

fn info_text(policy: &Policy) -> String {
    let PolicyInfo {
        name,
        version,
        contract_version,
        description,
        settings,
    } = policy.info();
    // Every word of it is the policy's own: escaped before it is shown.
    let mut out = format!(
        "policy:   {} {}\ncontract: lockwarden:policy@{}\nsource:   {}\n\n{}\n\nsettings:\n",
        escape(name),
        escape(version),
        escape(contract_version),
        escape(policy.source()),
        escape(description)
    );
    let width = settings.iter().map(|s| s.name.len()).max().unwrap_or(0);
    for s in settings {
        out += &format!(
            "  {:width$}  (default {})  {}\n",
            escape(&s.name),
            escape(&s.default_value),
            escape(&s.help)
        );
    }
    out
}

/// Reads and prepares a recorded request from a file or `-` (stdin).
fn read_request(path: &Path) -> Outcome<Prepared> {
    let name = path.display().to_string();
    let bytes = if name == "-" {
        read_bounded(std::io::stdin().lock(), limits::REQUEST)
    } else {
        read_regular_file(path, limits::REQUEST)
    }
    .map_err(|e| UsageError(format!("cannot read request {name}: it {e}")))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        UsageError(format!(
            "request {name} is not valid: it is not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ))
    })?;
    let prepared = Prepared::from_json(&text)
        .map_err(|e| UsageError(format!("request {name} is not valid: {e}")))?;
    Ok(prepared)
}

fn eval(args: &EvalArgs) -> Outcome<ExitCode> {
    let prepared = read_request(&args.request)?;
    let (runtime, policy) = args.policy.load()?;
    let outcome = runtime.evaluate(
        &policy,
        prepared.now,
        Arc::new(prepared.evidence),
        &prepared.request,
    )?;
    policy.emit(&outcome.logs);
    let doc = json!({
        "policy": policy_json(&policy),
        "verdicts": verdicts_json(&prepared.request, &outcome.verdicts),
    });
    outln!("{}", crate::cli::json_text(&doc));
    Ok(ExitCode::SUCCESS)
}
