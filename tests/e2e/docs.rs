//! The documentation says what the binary does:
//!
//! - every sample block (`<!-- sample NAME ... -->` up to `<!-- /sample -->`
//!   in README.md, ARCHITECTURE.md, SECURITY.md and docs/*.md) is what the
//!   binary prints in the scenario below, with what varies from run to run
//!   (lock and repository ids, pids, the hostname and user, the temporary
//!   path, ages, the commit) replaced by fixed values;
//! - the rules table in docs/policy.md names exactly the rules, with their
//!   actions, that the default policy gives in the conformance suite, plus
//!   the host's own `not-a-lock-file`; its settings table names exactly the
//!   settings `policy info` reports;
//! - every relative link between those files resolves, anchors included.
//!
//! `LOCKWARDEN_BLESS=1` rewrites the sample blocks instead of comparing them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use lockwarden_tests::restic::{Holder, TestRepo};
use lockwarden_tests::restic_version::restic_program;
use lockwarden_tests::{Finished, TESTS_DIR, finish, lockwarden};
use serde_json::Value;

/// The repository's top directory.
fn root() -> PathBuf {
    Path::new(TESTS_DIR)
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// The documentation files the checks read.
fn doc_files() -> Vec<PathBuf> {
    let root = root();
    let mut files: Vec<PathBuf> = ["README.md", "ARCHITECTURE.md", "SECURITY.md"]
        .iter()
        .map(|f| root.join(f))
        .collect();
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

// ---------------------------------------------------------------------------
// Normalizing what varies

/// Replacements that make one run's output the documented one.
#[derive(Default)]
struct Normal {
    /// Exact strings, replaced anywhere (ids, paths), longest first.
    exact: Vec<(String, String)>,
    /// Numbers (pids), replaced where no letter or digit touches them.
    numbers: Vec<(String, String)>,
    /// Hostnames, replaced where no letter, digit, `-` or `.` touches them.
    hosts: Vec<(String, String)>,
    /// Short lock ids as documented, in the order the binary lists them
    /// (it lists by id): lines naming them are put in this order.
    order: Vec<String>,
}

impl Normal {
    /// A lock `id` is shown as `shown` (64 hex digits).
    fn lock(&mut self, id: &str, shown: &str) {
        self.exact.push((id.to_owned(), shown.to_owned()));
        self.exact.push((id[..8].to_owned(), shown[..8].to_owned()));
        self.order.push(shown[..8].to_owned());
        self.order.sort();
    }

    fn apply(&self, text: &str) -> String {
        let mut exact = self.exact.clone();
        exact.sort_by_key(|(from, _)| std::cmp::Reverse(from.len()));
        let mut out = text.to_owned();
        for (from, to) in &exact {
            out = out.replace(from, to);
        }
        for (from, to) in &self.numbers {
            out = replace_token(&out, from, to, |c| c.is_alphanumeric());
        }
        for (from, to) in &self.hosts {
            out = replace_token(&out, from, to, |c| {
                c.is_alphanumeric() || c == '-' || c == '.'
            });
        }
        out
    }

    /// Applies the replacements, re-aligns the `check` table, puts the
    /// lines about locks in id order and sets their ages.
    fn output(&self, text: &str, ages: &BTreeMap<String, String>) -> String {
        let lines: Vec<String> = table(text, |cells| {
            let mut cells: Vec<String> = cells.iter().map(|c| self.apply(c)).collect();
            if let (8, Some(age)) = (cells.len(), ages.get(&cells[0])) {
                cells[3] = age.clone();
            }
            cells
        })
        .unwrap_or_else(|| text.lines().map(|l| self.apply(l)).collect());
        self.in_order(lines).join("\n")
    }

    /// Sorts each run of consecutive lines that name a lock by that lock's
    /// documented id, as the binary sorts them by the real one.
    fn in_order(&self, lines: Vec<String>) -> Vec<String> {
        let key = |line: &str| self.order.iter().position(|id| line.contains(id.as_str()));
        let mut out: Vec<String> = Vec::new();
        let mut run: Vec<(usize, String)> = Vec::new();
        for line in lines {
            match key(&line) {
                Some(k) => run.push((k, line)),
                None => {
                    run.sort_by_key(|(k, _)| *k);
                    out.extend(run.drain(..).map(|(_, l)| l));
                    out.push(line);
                }
            }
        }
        run.sort_by_key(|(k, _)| *k);
        out.extend(run.into_iter().map(|(_, l)| l));
        out
    }
}

/// Replaces `from` in `text` where the characters on either side are not
/// `part` of a longer token.
fn replace_token(text: &str, from: &str, to: &str, part: impl Fn(char) -> bool) -> String {
    let mut out = String::new();
    let mut done = 0;
    for (at, _) in text.match_indices(from) {
        let before = text[..at].chars().last();
        let after = text[at + from.len()..].chars().next();
        if before.is_some_and(&part) || after.is_some_and(&part) {
            continue;
        }
        out.push_str(&text[done..at]);
        out.push_str(to);
        done = at + from.len();
    }
    out.push_str(&text[done..]);
    out
}

/// `check`'s table, its cells rewritten by `cell` and its columns aligned
/// again (two spaces apart, the last one unpadded, as the binary prints
/// it); the other lines as `cell` rewrites a one-cell row. None when the
/// text has no table.
fn table(text: &str, cell: impl Fn(&[String]) -> Vec<String>) -> Option<Vec<String>> {
    let lines: Vec<&str> = text.lines().collect();
    let head = lines.iter().position(|l| l.starts_with("LOCK "))?;
    let starts: Vec<usize> = [
        "LOCK", "HOLDER", "PID", "AGE", "KIND", "ACTION", "RULE", "REASON",
    ]
    .iter()
    .map(|h| lines[head].find(h).expect("a column of the header"))
    .collect();
    let end = head
        + 1
        + lines[head + 1..]
            .iter()
            .take_while(|l| {
                l.len() > starts[7] && l.as_bytes()[..8].iter().all(u8::is_ascii_hexdigit)
            })
            .count();
    let split = |line: &str| -> Vec<String> {
        let chars: Vec<char> = line.chars().collect();
        (0..8)
            .map(|i| {
                let to = starts.get(i + 1).copied().unwrap_or(chars.len());
                chars[starts[i].min(chars.len())..to.min(chars.len())]
                    .iter()
                    .collect::<String>()
                    .trim()
                    .to_owned()
            })
            .collect()
    };
    let rows: Vec<Vec<String>> = lines[head..end]
        .iter()
        .enumerate()
        .map(|(i, l)| if i == 0 { split(l) } else { cell(&split(l)) })
        .collect();
    let mut widths = [0usize; 8];
    for row in &rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let aligned = rows.iter().map(|row| {
        let cells: Vec<String> = (0..8)
            .map(|i| match i {
                7 => row[i].clone(),
                _ => format!("{:w$}", row[i], w = widths[i]),
            })
            .collect();
        cells.join("  ").trim_end().to_owned()
    });
    let one = |l: &&str| cell(&[l.to_string()]).remove(0);
    let mut out: Vec<String> = lines[..head].iter().map(one).collect();
    out.extend(aligned);
    out.extend(lines[end..].iter().map(one));
    Some(out)
}

// ---------------------------------------------------------------------------
// The scenario

/// A sample block: what the reader sees typed, then what was printed.
fn block(typed: &str, out: &Finished, normal: &Normal, ages: &BTreeMap<String, String>) -> String {
    let printed = format!("{}{}", out.stderr, out.stdout);
    let printed = fixed_times(printed.trim_end());
    format!("{typed}\n{}\n", normal.output(&printed, ages).trim_end())
}

/// A sample block followed by the exit code, as `echo $?` shows it.
fn exited(block: String, out: &Finished) -> String {
    format!("{block}$ echo $?\n{}\n", out.code)
}

/// The time at the start of a log line (`run` logs with times) as one
/// fixed time.
fn fixed_times(text: &str) -> String {
    let is_time = |word: &str| {
        let b = word.as_bytes();
        b.len() >= 20
            && (b[4], b[7], b[10]) == (b'-', b'-', b'T')
            && word.ends_with('Z')
            && b.iter().all(|c| c.is_ascii_digit() || b"-:.TZ".contains(c))
    };
    text.lines()
        .map(|line| match line.split_once(' ') {
            Some((word, rest)) if is_time(word) => format!("2026-11-30T03:12:08.412907Z {rest}"),
            _ => line.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `lockwarden ARGS` as the samples run it: the repository and password
/// from restic's variables, as the reader exported them.
fn warden(repo: &TestRepo, args: &[&str]) -> Finished {
    let mut command = lockwarden(&repo.dir.path().join("cache"));
    command
        .args(args)
        .env("RESTIC_REPOSITORY", &repo.location)
        .env("RESTIC_PASSWORD_FILE", repo.password_file())
        .env("RESTIC_CACHE_DIR", repo.dir.path().join("restic-cache"))
        .env_remove("RESTIC_PASSWORD")
        .env_remove("RESTIC_PASSWORD_COMMAND")
        .env_remove("RESTIC_REPOSITORY_FILE")
        .env_remove("LOCKWARDEN_LOG");
    finish(&mut command)
}

const EXPORT: &str =
    "$ export RESTIC_REPOSITORY=/srv/restic RESTIC_PASSWORD_FILE=/etc/restic/password";
const DEAD: &str = "3a7f0c92e61d4b8aa0c5f2d9b7e4318c6d0a9f2e5b1c8d7a4e3f2b1c0d9e8f7a";
const LIVE: &str = "c41d88e5a2b97f3c1e0d6a5b4c3f2e1d0c9b8a7f6e5d4c3b2a1f0e9d8c7b6a59";
const PRUNE: &str = "5e20b7a4c8d1f6e3a9b2c5d8e1f4a7b0c3d6e9f2a5b8c1d4e7f0a3b6c9d2e5f8";

/// Runs the quick start (a killed backup's lock, a running backup's lock;
/// check, unlock; then a killed prune's exclusive lock and `run`) and
/// returns its samples by name.
fn quick_start() -> BTreeMap<&'static str, String> {
    let repo = TestRepo::init_local();
    let live = Holder::start(&repo);
    let dead = Holder::start(&repo);
    let dead_pid = dead.pid;
    let dead_id = dead.kill();
    let (_, doc) = repo.check_json();
    let lock = doc["locks"]
        .as_array()
        .and_then(|l| l.iter().find(|l| l["id"] == live.lock_id.as_str()))
        .unwrap_or_else(|| panic!("the live lock in {doc:#}"))
        .clone();
    let text = |k: &str| lock[k].as_str().expect("a string field").to_owned();
    let (user, host) = (text("username"), text("hostname"));
    let repo_id = doc["repository"]["id"].as_str().expect("repository id");

    let mut normal = Normal::default();
    normal.lock(&dead_id, DEAD);
    normal.lock(&live.lock_id, LIVE);
    normal
        .exact
        .push((repo.location.clone(), "/srv/restic".into()));
    normal.exact.push((repo_id.into(), "5f0c41e2".repeat(8)));
    normal.exact.push((repo_id[..8].into(), "5f0c41e2".into()));
    normal
        .exact
        .push((format!("{user}@{host}"), "root@backup01".into()));
    normal.numbers.push((dead_pid.to_string(), "48213".into()));
    normal.numbers.push((live.pid.to_string(), "48190".into()));
    normal.hosts.push((host.clone(), "backup01".into()));
    let ages = BTreeMap::from([
        (DEAD[..8].to_owned(), "3s".to_owned()),
        (LIVE[..8].to_owned(), "5s".to_owned()),
    ]);

    let mut samples = BTreeMap::new();
    let check = warden(&repo, &["check"]);
    assert_eq!(check.code, 3, "{check:?}");
    let typed = format!("{EXPORT}\n$ lockwarden check");
    samples.insert(
        "check",
        exited(block(&typed, &check, &normal, &ages), &check),
    );
    let unlock = warden(&repo, &["unlock"]);
    assert_eq!(unlock.code, 0, "{unlock:?}");
    let typed = "$ lockwarden unlock";
    samples.insert(
        "unlock",
        exited(block(typed, &unlock, &normal, &ages), &unlock),
    );
    samples.insert("run", run_sample(&repo, &lock, &mut normal));
    drop(live);
    samples
}

/// A killed `restic prune`'s exclusive lock (written as restic writes it, by
/// a process that is gone), then `lockwarden run -- restic backup`.
fn run_sample(repo: &TestRepo, live: &Value, normal: &mut Normal) -> String {
    let mut gone = Command::new("true").spawn().expect("spawn true");
    let pid = gone.id();
    gone.wait().expect("reap true");
    let json = serde_json::json!({
        "time": lockwarden_tests::lock_writer::time_from_now(-2),
        "exclusive": true,
        "hostname": live["hostname"], "username": live["username"],
        "pid": pid, "uid": live["uid"], "gid": live["gid"],
    });
    let writer = lockwarden_tests::lock_writer::LockWriter::new(repo);
    let id = writer.write_json(
        &json.to_string(),
        lockwarden_tests::lock_writer::Encoding::Zstd,
    );
    normal.lock(&id, PRUNE);
    normal.numbers.push((pid.to_string(), "48377".into()));
    let data = repo.dir.path().join("data");
    std::fs::create_dir_all(&data).expect("data dir");
    std::fs::write(data.join("file"), b"backed up").expect("data file");
    let restic = restic_program().display().to_string();
    let data = data.display().to_string();
    let out = warden(repo, &["run", "--", &restic, "backup", "--quiet", &data]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(!repo.lock_ids().contains(&id), "run removed the stale lock");
    let typed = "$ lockwarden run -- restic backup --quiet /srv/data";
    exited(block(typed, &out, normal, &BTreeMap::new()), &out)
}

/// `lockwarden --version` and `lockwarden policy info`.
fn about() -> BTreeMap<&'static str, String> {
    let cache = tempfile::tempdir().expect("temp dir");
    let version = finish(lockwarden(cache.path()).arg("--version"));
    let mut normal = Normal::default();
    if let Some(commit) = version
        .stdout
        .split_once("(commit ")
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(commit, _)| commit.to_owned())
    {
        normal.exact.push((commit, "0123456789ab".into()));
    }
    let none = BTreeMap::new();
    let info = finish(lockwarden(cache.path()).args(["policy", "info"]));
    BTreeMap::from([
        (
            "version",
            block("$ lockwarden --version", &version, &normal, &none),
        ),
        (
            "policy-info",
            block("$ lockwarden policy info", &info, &Normal::default(), &none),
        ),
    ])
}

/// `lockwarden discover --open` in a cluster (the emulator) of two
/// tenants: one VolSync repository on S3 (moto) that opens, one that is
/// refused.
fn discover_sample() -> BTreeMap<&'static str, String> {
    use lockwarden_tests::cloud::{S3_ACCESS_KEY_ID, S3_SECRET_KEY, Store};
    use lockwarden_tests::kube_emulator::KubeEmulator;
    use serde_json::json;
    let bucket = Store::S3.new_bucket();
    let repo = bucket.init_repo("team-a/db");
    let source = |namespace: &str, name: &str, location: &str| {
        json!([
            {"apiVersion": "v1", "kind": "Secret",
             "metadata": {"name": format!("{name}-restic"), "namespace": namespace},
             "stringData": {"RESTIC_REPOSITORY": location,
                            "RESTIC_PASSWORD": lockwarden_tests::restic::PASSWORD,
                            "AWS_ACCESS_KEY_ID": S3_ACCESS_KEY_ID,
                            "AWS_SECRET_ACCESS_KEY": S3_SECRET_KEY}},
            {"apiVersion": "volsync.backube/v1alpha1", "kind": "ReplicationSource",
             "metadata": {"name": name, "namespace": namespace},
             "spec": {"sourcePVC": name, "restic": {"repository": format!("{name}-restic")}}},
        ])
    };
    let kube = KubeEmulator::start(&[]);
    kube.apply(source("team-a", "db", &repo.location));
    kube.apply(source("team-b", "files", "/mnt/backup"));
    let dir = tempfile::tempdir().expect("temp dir");
    let out = finish(
        lockwarden(&dir.path().join("cache"))
            .args(["discover", "--open"])
            .env("KUBECONFIG", kube.write_kubeconfig(dir.path()))
            .env_remove("KUBERNETES_SERVICE_HOST"),
    );
    assert_eq!(out.code, 0, "{out:?}");
    let id = out
        .stdout
        .split_once("opened:   repository ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no repository opened: {out:?}"))
        .to_owned();
    let mut normal = Normal::default();
    normal.exact.push((id, "5f0c41e2".repeat(8)));
    normal.exact.push((
        format!("http://{}/{}", bucket.addr(), bucket.name),
        "https://minio.storage:9000/backups".into(),
    ));
    let typed = "$ lockwarden discover --open";
    BTreeMap::from([(
        "discover",
        exited(block(typed, &out, &normal, &BTreeMap::new()), &out),
    )])
}

// ---------------------------------------------------------------------------
// Sample blocks in the markdown

const OPEN: &str = "<!-- sample ";
const CLOSE: &str = "<!-- /sample -->";

/// `text` with every sample block replaced by the produced one, and the
/// names of the samples it holds.
fn rewrite(
    text: &str,
    samples: &BTreeMap<&str, String>,
    file: &Path,
) -> (String, BTreeSet<String>) {
    let mut out = String::new();
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find(OPEN) {
        let line_end = at + rest[at..].find('\n').expect("a line after the marker");
        let name: String = rest[at + OPEN.len()..line_end]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        let sample = samples
            .get(name.as_str())
            .unwrap_or_else(|| panic!("{}: no sample called `{name}`", file.display()));
        let close = line_end
            + rest[line_end..]
                .find(CLOSE)
                .unwrap_or_else(|| panic!("{}: sample {name} is not closed", file.display()));
        out.push_str(&rest[..=line_end]);
        out.push_str(&format!("```console\n{sample}```\n"));
        names.insert(name);
        rest = &rest[close..];
    }
    out.push_str(rest);
    (out, names)
}

#[test]
fn sample_output_in_the_docs_is_what_the_binary_prints() {
    let mut samples = quick_start();
    samples.extend(about());
    samples.extend(discover_sample());
    let bless = std::env::var_os("LOCKWARDEN_BLESS").is_some_and(|v| v == "1");
    let mut found = BTreeSet::new();
    let mut stale = Vec::new();
    for file in doc_files() {
        let text = read(&file);
        let (new, names) = rewrite(&text, &samples, &file);
        found.extend(names);
        if new != text {
            if bless {
                std::fs::write(&file, &new).expect("rewrite the docs");
            } else {
                stale.push(format!(
                    "{}:\n{}",
                    file.display(),
                    first_difference(&text, &new)
                ));
            }
        }
    }
    let unused: Vec<_> = samples.keys().filter(|k| !found.contains(**k)).collect();
    assert!(unused.is_empty(), "samples in no document: {unused:?}");
    assert!(
        stale.is_empty(),
        "sample output in the docs differs from what the binary prints \
         (LOCKWARDEN_BLESS=1 rewrites it):\n{}",
        stale.join("\n")
    );
}

/// The first line where `old` and `new` differ, both ways.
fn first_difference(old: &str, new: &str) -> String {
    let (old_lines, new_lines): (Vec<_>, Vec<_>) = (old.lines().collect(), new.lines().collect());
    let at = old_lines
        .iter()
        .zip(&new_lines)
        .position(|(a, b)| a != b)
        .unwrap_or(old_lines.len().min(new_lines.len()));
    format!(
        "  line {}\n  documented: {:?}\n  printed:    {:?}",
        at + 1,
        old_lines.get(at).unwrap_or(&""),
        new_lines.get(at).unwrap_or(&"")
    )
}

// ---------------------------------------------------------------------------
// The rules and settings tables

/// The rows of the markdown table between `<!-- NAME` and `<!-- /NAME -->`
/// in docs/policy.md: each row's cells, the header and rule left out.
fn doc_table(name: &str) -> Vec<Vec<String>> {
    let text = read(&root().join("docs/policy.md"));
    let start = text
        .find(&format!("<!-- {name}"))
        .unwrap_or_else(|| panic!("docs/policy.md has no `<!-- {name}` marker"));
    let end = start
        + text[start..]
            .find(&format!("<!-- /{name} -->"))
            .unwrap_or_else(|| panic!("docs/policy.md: {name} is not closed"));
    text[start..end]
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            l.trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_owned())
                .collect()
        })
        .collect()
}

/// (rule, action) of every verdict in a check document or a conformance
/// case's observed answer.
fn verdict_pairs(verdicts: &[Value]) -> BTreeSet<(String, String)> {
    verdicts
        .iter()
        .map(|v| {
            let s = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
            (s("rule"), s("action"))
        })
        .collect()
}

/// Every (rule, action) the built-in policy gives in the conformance suite.
fn policy_rules(cache: &Path) -> BTreeSet<(String, String)> {
    let cases = Path::new(TESTS_DIR).join("conformance");
    let out = finish(
        lockwarden(cache)
            .args(["policy", "conformance", "--json", "--cases"])
            .arg(cases),
    );
    assert_eq!(out.code, 0, "{out:?}");
    let doc: Value = serde_json::from_str(&out.stdout).expect("conformance --json");
    doc["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .filter_map(|c| c["observed"]["verdicts"].as_array())
        .flat_map(|v| verdict_pairs(v))
        .collect()
}

/// The host's own verdict on a directory under a lock's name.
fn host_rules() -> BTreeSet<(String, String)> {
    let repo = TestRepo::init_local();
    std::fs::create_dir(repo.path.join("locks").join("d".repeat(64))).expect("mkdir");
    let (_, doc) = repo.check_json();
    ["locks", "unreadable"]
        .iter()
        .filter_map(|list| doc[list].as_array())
        .flat_map(|v| verdict_pairs(v))
        .collect()
}

#[test]
fn the_rules_table_names_the_rules_the_default_policy_gives() {
    let documented: Vec<(String, String)> = doc_table("rules table")
        .into_iter()
        .map(|row| {
            let rule = row[0].trim_matches('`').to_owned();
            let action = row[2].split_whitespace().next().unwrap_or("").to_owned();
            (rule, action.trim_end_matches(',').to_owned())
        })
        .collect();
    let unique: BTreeSet<_> = documented.iter().cloned().collect();
    assert_eq!(
        unique.len(),
        documented.len(),
        "a rule twice: {documented:?}"
    );
    let cache = tempfile::tempdir().expect("temp dir");
    let mut given = policy_rules(cache.path());
    given.extend(host_rules());
    assert_eq!(
        unique, given,
        "docs/policy.md's rules table (left) against the rules and actions given (right)"
    );
}

#[test]
fn the_settings_table_names_the_settings_policy_info_reports() {
    let documented: BTreeSet<String> = doc_table("settings table")
        .into_iter()
        .map(|row| row[0].trim_matches('`').to_owned())
        .collect();
    let cache = tempfile::tempdir().expect("temp dir");
    let out = finish(lockwarden(cache.path()).args(["policy", "info", "--json"]));
    assert_eq!(out.code, 0, "{out:?}");
    let doc: Value = serde_json::from_str(&out.stdout).expect("policy info --json");
    let reported: BTreeSet<String> = doc["settings"]
        .as_array()
        .expect("settings")
        .iter()
        .map(|s| s["name"].as_str().expect("a name").to_owned())
        .collect();
    assert_eq!(documented, reported);
}

// ---------------------------------------------------------------------------
// Links

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces
/// as `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a markdown file's headings (outside code blocks).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.insert(anchor(line.trim_start_matches('#')));
        }
    }
    out
}

/// The targets of the inline links `[text](target)` in `text`, outside
/// code.
fn links(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let tail = &rest[at + 2..];
            let Some(end) = tail.find(')') else { break };
            out.push(tail[..end].to_owned());
            rest = &tail[end..];
        }
    }
    out
}

#[test]
fn relative_links_between_the_docs_resolve() {
    let mut broken = Vec::new();
    for file in doc_files() {
        let text = read(&file);
        for link in links(&text) {
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            let (path, fragment) = link.split_once('#').unwrap_or((&link, ""));
            let target = if path.is_empty() {
                file.clone()
            } else {
                file.parent().expect("a directory").join(path)
            };
            if !target.exists() {
                broken.push(format!("{}: {link}: no such file", file.display()));
            } else if !fragment.is_empty()
                && target.extension().is_some_and(|e| e == "md")
                && !anchors(&read(&target)).contains(fragment)
            {
                broken.push(format!("{}: {link}: no such heading", file.display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}
