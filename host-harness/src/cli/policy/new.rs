//! `lockwarden policy new --lang rust|python|js DIR`: a starting point for a
//! policy of one's own. It is the strict example in that language (the same
//! files as `examples/policies/strict*`, built into the binary), the
//! contract it builds against (`wit/policy.wit`), the strict example's
//! conformance cases (`conformance/`), which it passes as written, and a
//! README saying how to build, test and publish it.

use std::borrow::Cow;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
use clap::{Args, ValueEnum};

use crate::cli::{Failure, Outcome};

/// The languages a policy can be started in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Lang {
    /// Rust, built with cargo for wasm32-wasip2.
    Rust,
    /// Python, built with componentize-py.
    Python,
    /// JavaScript, built with componentize-js.
    Js,
}

#[derive(Debug, Args)]
pub struct NewArgs {
    /// The language to write the policy in.
    #[arg(long, value_enum)]
    lang: Lang,
    /// The directory to create; it must not exist, or be empty.
    #[arg(value_name = "DIR")]
    dir: PathBuf,
}

/// One file of a starting point.
struct File {
    path: Cow<'static, str>,
    text: Cow<'static, str>,
    executable: bool,
}

impl File {
    fn new(path: impl Into<Cow<'static, str>>, text: impl Into<Cow<'static, str>>) -> File {
        File {
            path: path.into(),
            text: text.into(),
            executable: false,
        }
    }

    fn script(path: &'static str, text: &'static str) -> File {
        File {
            executable: true,
            ..File::new(path, text)
        }
    }
}

/// A file of one of the examples, as the binary was built with it.
macro_rules! example {
    ($dir:literal, $file:literal) => {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../examples/policies/",
            $dir,
            "/",
            $file
        ))
    };
}

/// The strict example's conformance cases, by file name.
macro_rules! cases {
    ($($name:literal),* $(,)?) => {
        [$(($name, example!("strict/conformance", $name))),*]
    };
}

const CASES: [(&str, &str); 10] = cases![
    "01-young-exclusive-survives-dead-holder.json",
    "02-old-exclusive-dead-holder.json",
    "03-exclusive-min-age-edge.json",
    "04-shared-follows-restic.json",
    "05-trusted-hosts.json",
    "06-holder-alive.json",
    "07-setting-exclusive-min-age.json",
    "08-invalid-setting.json",
    "09-unreadable-kept.json",
    "10-stale-after-below-restic.json",
];

/// The workspace manifest, for the one line that pins wit-bindgen.
const WORKSPACE_MANIFEST: &str =
    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml"));

pub fn run(args: &NewArgs) -> Outcome<ExitCode> {
    let files = files(args.lang);
    write_all(&args.dir, &files).map_err(|e| {
        Failure::failed(anyhow::anyhow!(
            "cannot write a new policy in {}: {e}",
            args.dir.display()
        ))
    })?;
    outln!(
        "wrote {} files in {}: the strict example in {}, its contract (wit/) and its \
         conformance cases (conformance/)\n\n{}",
        files.len(),
        args.dir.display(),
        name(args.lang),
        steps(args.lang)
    );
    Ok(ExitCode::SUCCESS)
}

fn name(lang: Lang) -> &'static str {
    match lang {
        Lang::Rust => "Rust",
        Lang::Python => "Python",
        Lang::Js => "JavaScript",
    }
}

/// What to run next, in the new directory: build, test, publish.
fn steps(lang: Lang) -> String {
    let (build, native, wasm) = match lang {
        Lang::Rust => (
            "cargo build --release --target wasm32-wasip2",
            "cargo test",
            "target/wasm32-wasip2/release/policy.wasm",
        ),
        Lang::Python => (
            "python3 -m venv .venv && .venv/bin/pip install -r requirements.txt\n./build.sh",
            "rm -rf .venv/bindings\n\
             .venv/bin/componentize-py -d wit -w stale-lock-policy bindings .venv/bindings\n\
             PYTHONPATH=.venv/bindings python3 -m unittest",
            "policy.wasm",
        ),
        Lang::Js => ("npm ci\n./build.sh", "node --test", "policy.wasm"),
    };
    format!(
        "build:\n{build}\n\ntest the rules natively:\n{native}\n\n\
         test the component:\nlockwarden policy conformance --policy {wasm} --cases conformance\n\n\
         publish:\nlockwarden policy push {wasm} oci://REGISTRY/REPOSITORY:TAG\n\n\
         docs/writing-a-policy.md in lockwarden's sources says more."
    )
}

/// Every file of the starting point in `lang`.
fn files(lang: Lang) -> Vec<File> {
    let mut files = vec![File::new("wit/policy.wit", lockwarden_wit::WIT)];
    files.extend(
        CASES
            .iter()
            .map(|(name, text)| File::new(format!("conformance/{name}"), *text)),
    );
    files.push(File::new("README.md", readme(lang)));
    match lang {
        Lang::Rust => files.extend(rust_files()),
        Lang::Python => files.extend([
            File::new("app.py", example!("strict-python", "app.py")),
            File::new("rules.py", example!("strict-python", "rules.py")),
            File::new("questions.py", example!("strict-python", "questions.py")),
            File::new("test_rules.py", example!("strict-python", "test_rules.py")),
            File::new(
                "requirements.txt",
                example!("strict-python", "requirements.txt"),
            ),
            File::script("build.sh", example!("strict-python", "build.sh")),
        ]),
        Lang::Js => files.extend([
            File::new("policy.js", example!("strict-js", "policy.js")),
            File::new("rules.js", example!("strict-js", "rules.js")),
            File::new("questions.js", example!("strict-js", "questions.js")),
            File::new("rules.test.js", example!("strict-js", "rules.test.js")),
            File::new("package.json", example!("strict-js", "package.json")),
            File::new(
                "package-lock.json",
                example!("strict-js", "package-lock.json"),
            ),
            File::script("build.sh", example!("strict-js", "build.sh")),
        ]),
    }
    files
}

/// The workspace's cargo configuration: the small wasm stack that makes a
/// fresh instance cheap.
const CARGO_CONFIG: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../.cargo/config.toml"
));

/// The Rust example outside this workspace: its own manifest, the contract
/// beside it, and the contract version written out.
fn rust_files() -> [File; 5] {
    let lib = replace_once(
        example!("strict/src", "lib.rs"),
        r#"path: "../../../wit""#,
        r#"path: "wit""#,
    );
    let rules = replace_once(
        example!("strict/src", "rules.rs"),
        "lockwarden_wit::VERSION",
        &format!("{:?}", lockwarden_wit::VERSION),
    );
    [
        File::new("Cargo.toml", rust_manifest()),
        File::new(".cargo/config.toml", CARGO_CONFIG),
        File::new("src/lib.rs", lib),
        File::new("src/rules.rs", rules),
        File::new("src/questions.rs", example!("strict/src", "questions.rs")),
    ]
}

fn rust_manifest() -> String {
    let wit_bindgen = WORKSPACE_MANIFEST
        .lines()
        .find(|line| line.starts_with("wit-bindgen = "))
        .expect("the workspace manifest pins wit-bindgen");
    format!(
        "[package]\n\
         name = \"policy\"\n\
         description = \"A lockwarden stale-lock policy, started from lockwarden's strict example\"\n\
         version = \"0.1.0\"\n\
         edition = \"2024\"\n\
         publish = false\n\n\
         [lib]\n\
         # cdylib: the component (cargo build --release --target wasm32-wasip2);\n\
         # rlib: the rules' native tests (cargo test).\n\
         crate-type = [\"cdylib\", \"rlib\"]\n\n\
         [dependencies]\n\
         {wit_bindgen}\n\n\
         [profile.release]\n\
         opt-level = \"s\"\n\
         lto = true\n\
         codegen-units = 1\n\
         strip = true\n"
    )
}

/// `text` with its one `from` replaced; a second or a missing `from` is a
/// bug in this file (its tests write every language).
fn replace_once(text: &str, from: &str, to: &str) -> String {
    assert_eq!(text.matches(from).count(), 1, "{from:?} in an example");
    text.replacen(from, to, 1)
}

fn readme(lang: Lang) -> String {
    format!(
        "# A lockwarden policy in {}\n\n\
         Started with `lockwarden policy new --lang {}`: lockwarden's strict example \
         (never removes locks from hosts matching `always-alive`, nor exclusive locks \
         younger than `exclusive-min-age`; otherwise the holder's evidence decides, and \
         a lock older than `stale-after` with none is removed). Rename it (its name is \
         in its `info`), change its rules, and add a case to `conformance/` for every \
         rule you change: a case is a request, the evidence the host answers with, and \
         the verdicts you expect.\n\n\
         `wit/policy.wit` is the contract it is built against, \
         lockwarden:policy@{}.\n\n```sh\n{}\n```\n",
        name(lang),
        lang.to_possible_value()
            .map(|v| v.get_name().to_owned())
            .unwrap_or_default(),
        lockwarden_wit::VERSION,
        steps(lang)
    )
}

/// Creates `dir` (or takes it when it is an empty directory of this user's,
/// not a link) and writes `files` in it, never over an existing file and
/// never through a link.
fn write_all(dir: &Path, files: &[File]) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt as _;
    let refuse = |why: &str| Err(std::io::Error::other(why.to_owned()));
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir(dir)?,
        Err(e) => return Err(e),
        Ok(meta) if meta.file_type().is_symlink() => return refuse("it is a symbolic link"),
        Ok(meta) if !meta.is_dir() => return refuse("it is not a directory"),
        Ok(meta) if meta.uid() != rustix::process::geteuid().as_raw() => {
            return refuse("it belongs to another user");
        }
        Ok(_) if std::fs::read_dir(dir)?.next().is_some() => return refuse("it is not empty"),
        Ok(_) => {}
    }
    let root = Dir::open_ambient_dir(dir, ambient_authority())?;
    for file in files {
        if let Some((parent, _)) = file.path.rsplit_once('/') {
            root.create_dir_all(parent)?;
        }
        let mut options = OpenOptions::new();
        options
            .write(true)
            .create_new(true)
            .mode(if file.executable { 0o755 } else { 0o644 });
        root.open_with(file.path.as_ref(), &options)?
            .write_all(file.text.as_bytes())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_language_is_written_whole() {
        for lang in [Lang::Rust, Lang::Python, Lang::Js] {
            let dir = tempfile::tempdir().expect("temp dir");
            let target = dir.path().join("mine");
            write_all(&target, &files(lang)).expect("written");
            assert!(target.join("wit/policy.wit").is_file());
            assert_eq!(
                std::fs::read_dir(target.join("conformance"))
                    .expect("cases")
                    .count(),
                10
            );
            let refused = write_all(&target, &files(lang)).expect_err("not empty");
            assert!(refused.to_string().contains("not empty"), "{refused}");
            let empty = dir.path().join("empty");
            std::fs::create_dir(&empty).expect("an empty directory");
            let link = dir.path().join("link");
            std::os::unix::fs::symlink(&empty, &link).expect("a link to it");
            let refused = write_all(&link, &files(lang)).expect_err("a link");
            assert!(refused.to_string().contains("symbolic link"), "{refused}");
            write_all(&empty, &files(lang)).expect("an empty directory is filled");
        }
    }

    #[test]
    fn every_case_of_the_strict_example_is_written() {
        let dir =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/policies/strict/conformance");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .expect("cases")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        on_disk.sort();
        let embedded: Vec<&str> = CASES.iter().map(|(name, _)| *name).collect();
        assert_eq!(on_disk, embedded);
    }

    #[test]
    fn the_rust_starting_point_names_no_workspace() {
        let files = rust_files();
        let manifest = &files[0].text;
        assert!(
            manifest.contains("wit-bindgen = { version = "),
            "{manifest}"
        );
        assert!(!manifest.contains("workspace"), "{manifest}");
        assert!(files[2].text.contains(r#"path: "wit""#));
        assert!(!files[3].text.contains("lockwarden_wit"));
    }
}
