//! `lockwarden policy push FILE oci://HOST/REPO:TAG`.

use lockwarden::files::read_regular_file;
use lockwarden::limits;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use lockwarden::oci::{OciReference, Registry};
use lockwarden::runtime::{Limits, LoadError, Runtime};

use crate::cli::{Outcome, UsageError};

#[derive(Debug, Args)]
pub struct PushArgs {
    /// The policy component (.wasm) to push.
    file: PathBuf,
    /// Where to push it: oci://HOST[:PORT]/REPOSITORY:TAG.
    #[arg(value_name = "OCI", value_parser = OciReference::parse)]
    reference: OciReference,
    /// Speak plain HTTP; only for registries on this machine.
    #[arg(long)]
    insecure_registry: bool,
}

/// Loads the file as a policy first (so only a working policy of this contract
/// is published), pushes it, and prints the reference pinned by digest.
pub fn run(args: &PushArgs) -> Outcome<ExitCode> {
    let path = args.file.display().to_string();
    let bytes = read_regular_file(&args.file, limits::POLICY).map_err(|cause| LoadError::Read {
        path: path.clone(),
        cause,
    })?;
    let runtime = Runtime::new(Limits::default(), None).map_err(crate::cli::engine_failed)?;
    let policy = runtime
        .load(&path, &bytes)
        .map_err(|e| UsageError(format!("refusing to push {path}: {e}")))?;
    let info = policy.info();
    let annotations = BTreeMap::from([
        ("org.opencontainers.image.title".into(), info.name.clone()),
        (
            "org.opencontainers.image.version".into(),
            info.version.clone(),
        ),
        (
            "org.opencontainers.image.description".into(),
            info.description.clone(),
        ),
        (
            "dev.lockwarden.contract".into(),
            format!("lockwarden:policy@{}", info.contract_version),
        ),
    ]);
    let registry = Registry::new(args.insecure_registry, None);
    let pinned = registry.push(&bytes, &args.reference, annotations)?;
    eprintln!(
        "pushed {} {} to {}; pin it as:",
        lockwarden::text::escape(&info.name),
        lockwarden::text::escape(&info.version),
        args.reference
    );
    outln!("{pinned}");
    Ok(ExitCode::SUCCESS)
}
