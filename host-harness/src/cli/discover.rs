//! `lockwarden discover`: one round of discovery, printed: what `watch`
//! would watch, with what, and what it would not, and why.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use lockwarden::kubernetes::Kubernetes;
use lockwarden::text::escape;
use lockwarden::watch::config::WatchConfig;
use lockwarden::watch::discover::{Opening, Preview, Seen};
use lockwarden::watch::repository::Defaults;

use super::{Failure, Outcome, json_text};

/// The `[discover]` table used without `--config`: every operator, every
/// namespace, the defaults.
const EVERY_OPERATOR: &str =
    "[discover]\nvelero = true\nstash = true\nkubestash = true\nk8up = true\nvolsync = true\n";

#[derive(Debug, Args)]
pub struct DiscoverArgs {
    /// The watch configuration whose [discover] table to use (default: every
    /// operator, every namespace).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Also open each repository it would watch (password and keys tried; no
    /// lock is judged).
    #[arg(long)]
    open: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Prints the preview; exit 1 when some of it could not be told (an
/// operator or namespace not listed, a repository that did not open).
pub fn run(args: &DiscoverArgs) -> Outcome<ExitCode> {
    let defaults = Defaults::default();
    let config = match &args.config {
        Some(path) => WatchConfig::load(path, &defaults)?,
        None => WatchConfig::parse(EVERY_OPERATOR, &defaults)
            .map_err(|e| Failure::failed(anyhow::anyhow!("the default [discover]{e}")))?,
    };
    let Some((discovery, template)) = config.discover else {
        return Err(Failure::usage("the configuration has no [discover] table"));
    };
    let client = Kubernetes::connect(template.timeout.get()).map_err(Failure::failed)?;
    let preview = discovery.preview(&client, &template, args.open);
    if args.json {
        let doc = serde_json::to_value(&preview).map_err(Failure::failed)?;
        outln!("{}", json_text(&doc));
    } else {
        print(&preview);
    }
    Ok(if preview.complete() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(super::code::ERROR)
    })
}

/// The preview as text: a paragraph per repository, then what could not be
/// listed. Every name and reason is escaped: a tenant chose them.
fn print(preview: &Preview) {
    for seen in &preview.repositories {
        print_one(seen);
    }
    if preview.repositories.is_empty() {
        outln!("no repositories found");
    }
    for operator in &preview.operators {
        if let Some(why) = &operator.error {
            outln!(
                "{}: cannot list its objects: {}",
                operator.operator,
                escape(why)
            );
        }
        for (namespace, why) in &operator.blind {
            outln!(
                "{}: cannot read the objects of namespace {}: {}",
                operator.operator,
                escape(namespace),
                escape(why)
            );
        }
    }
}

fn print_one(seen: &Seen) {
    let object = &seen.object;
    outln!("{} ({})", escape(&seen.repository), seen.operator);
    outln!(
        "  object:   {} {}",
        escape(&object.api_version),
        escape(&object.label())
    );
    match &seen.refused {
        Some(why) => outln!("  NOT WATCHED: {}", escape(why)),
        None => outln!("  watched"),
    }
    if let Some(location) = &seen.location {
        outln!("  location: {}", escape(location));
    }
    if let Some(tls) = &seen.tls {
        outln!("  tls:      {}", escape(tls));
    }
    for secret in &seen.secrets {
        let keys: Vec<String> = secret.keys.iter().map(|k| escape(k).into_owned()).collect();
        outln!(
            "  secret:   {}/{} ({})",
            escape(&secret.namespace),
            escape(&secret.name),
            keys.join(", ")
        );
    }
    if seen.location.is_some() {
        match &seen.pods {
            Some(pods) => outln!("  pods:     {}", escape(pods)),
            None => outln!("  pods:     none (its locks go by age alone)"),
        }
    }
    if !seen.shared_with.is_empty() {
        let namespaces: Vec<String> = (seen.shared_with.iter())
            .map(|ns| escape(ns).into_owned())
            .collect();
        outln!(
            "  shared:   also named in namespaces {}; their pods answer too",
            namespaces.join(", ")
        );
    }
    match &seen.open {
        Some(Opening::Opened(id)) => outln!("  opened:   repository {}", escape(id)),
        Some(Opening::Failed(why)) => outln!("  OPEN FAILED: {}", escape(why)),
        None => {}
    }
    outln!();
}
