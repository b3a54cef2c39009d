//! A REST server that misbehaves: lockwarden reaches it through a
//! [`FaultProxy`] that injects one fault into the lock reads, the lock
//! listing, or the lock deletions, with `--timeout 2s`. Whatever happens,
//! every run ends, says what went wrong, and removes nothing that a clean run
//! did not judge stale; a deletion that fails is reported as failed.

use std::collections::BTreeSet;
use std::time::Duration;

use lockwarden_tests::Finished;
use lockwarden_tests::fault_proxy::{Fault, FaultProxy, Filter};
use lockwarden_tests::guard::{Guarded, HANG_GUARD};
use lockwarden_tests::lock_writer::{Encoding, LockSpec, LockWriter, time_from_now};
use lockwarden_tests::restic::{Holder, REST_PASS, REST_USER, RestServer, TestRepo};
use serde_json::Value;

/// The per-request timeout every run through the proxy is given.
const TIMEOUT: &str = "2s";
/// How long the proxy's delay fault waits: well beyond [`TIMEOUT`].
const DELAY: Duration = Duration::from_secs(10);
/// How many stale locks each scenario holds.
const STALE: usize = 3;

/// A REST repository with a live restic holder; each scenario seeds its own
/// stale locks beside the holder's.
struct Scene {
    _dir: tempfile::TempDir,
    server: RestServer,
    repo: TestRepo,
    writer: LockWriter,
    holder: Option<Holder>,
}

/// The locks one scenario starts with.
struct Seeded {
    /// Stale locks: two hours old, shared, from a host nobody knows.
    stale: Vec<String>,
    /// A young lock from another host, kept (rule `fresh`).
    fresh: String,
    /// Every lock id in the repository after seeding.
    all: BTreeSet<String>,
    /// The ids a clean run (no proxy) judges `remove`.
    clean_stale: BTreeSet<String>,
}

impl Seeded {
    /// What a clean run judges `remove`, but `victim`.
    fn stale_but(&self, victim: &str) -> BTreeSet<String> {
        self.clean_stale
            .iter()
            .filter(|id| *id != victim)
            .cloned()
            .collect()
    }
}

impl Scene {
    /// A server, a repository on it, and a live `restic backup --stdin`
    /// holding a lock there.
    fn new() -> Scene {
        let dir = tempfile::tempdir().expect("temp dir");
        let server = RestServer::start(&dir.path().join("served"));
        let repo = server.init_repo("repo");
        let writer = LockWriter::new(&repo);
        let holder = Holder::start(&repo);
        Scene {
            _dir: dir,
            server,
            repo,
            writer,
            holder: Some(holder),
        }
    }

    /// The live holder's lock.
    fn live(&self) -> &str {
        &self.holder.as_ref().expect("the holder runs").lock_id
    }

    /// Removes every lock but the holder's (what earlier scenarios left),
    /// writes [`STALE`] stale locks and a fresh one, and asks a clean run
    /// which it would remove.
    fn seed(&self) -> Seeded {
        let live = self.live().to_owned();
        for id in self.repo.lock_ids() {
            if id != live {
                let _ = std::fs::remove_file(self.repo.path.join("locks").join(&id));
            }
        }
        let stale: Vec<String> = (0..STALE)
            .map(|n| {
                self.writer.write(LockSpec {
                    time: time_from_now(-2 * 3600),
                    hostname: "far-host",
                    pid: 4000 + n as i64,
                    // Shared: restic checks the other locks again just after
                    // writing its own, and an exclusive lock seen then would
                    // make the holder give up.
                    exclusive: false,
                    encoding: if n % 2 == 0 {
                        Encoding::Zstd
                    } else {
                        Encoding::Raw
                    },
                })
            })
            .collect();
        let fresh = self.writer.write(LockSpec {
            time: time_from_now(-5 * 60),
            hostname: "near-host",
            pid: 4100,
            encoding: Encoding::Raw,
            ..LockSpec::default()
        });
        let all = self.repo.lock_ids();
        let clean = run(&self.repo, "check", &["--json"]);
        assert_eq!(
            clean.code, 3,
            "a clean check finds the stale locks: {clean:?}"
        );
        let doc = clean.json().1;
        let clean_stale = removals(&doc);
        assert_eq!(
            clean_stale,
            stale.iter().cloned().collect::<BTreeSet<_>>(),
            "a clean run judges exactly the seeded stale locks stale: {doc:#}"
        );
        Seeded {
            stale,
            fresh,
            all,
            clean_stale,
        }
    }

    /// Starts a proxy in front of the server that injects `fault` into the
    /// requests `filter` selects, and the same repository as seen through it.
    fn through(&self, filter: Filter, fault: Fault) -> (FaultProxy, TestRepo) {
        let proxy = FaultProxy::start(self.server.addr(), filter, fault);
        let via = TestRepo::at(
            format!("rest:http://{REST_USER}:{REST_PASS}@{}/repo", proxy.addr),
            self.repo.path.clone(),
        );
        (proxy, via)
    }

    /// The holder ends its backup; it must exit 0 and take its lock along.
    fn finish(mut self) {
        let holder = self.holder.take().expect("the holder runs");
        let live = holder.lock_id.clone();
        assert_eq!(holder.finish(), 0, "the live restic backup succeeded");
        assert!(
            !self.repo.lock_ids().contains(&live),
            "restic removed its own lock"
        );
    }
}

/// Runs `lockwarden <command> --timeout 2s <extra>` on `via` (the
/// repository directly, or through a proxy) under the hang guard.
fn run(via: &TestRepo, command: &str, extra: &[&str]) -> Finished {
    let what = format!("lockwarden {command} {}", extra.join(" "));
    let out = Guarded::spawn(
        via.lockwarden(command)
            .args(["--timeout", TIMEOUT])
            .args(extra),
    )
    .finish_within(HANG_GUARD, &what);
    assert!(
        !out.stdout.contains(REST_PASS) && !out.stderr.contains(REST_PASS),
        "the server password is never printed: {out:?}"
    );
    out
}

/// The ids a check document judges `remove`.
fn removals(doc: &Value) -> BTreeSet<String> {
    ["locks", "unreadable"]
        .iter()
        .flat_map(|k| doc[*k].as_array().into_iter().flatten())
        .filter(|l| l["action"] == "remove")
        .map(|l| l["id"].as_str().expect("id").to_owned())
        .collect()
}

/// The ids listed under `key` (`removed`, `failed`) in an unlock document.
fn listed(doc: &Value, key: &str) -> BTreeSet<String> {
    doc[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key} list in {doc:#}"))
        .iter()
        .map(|e| e["id"].as_str().expect("id").to_owned())
        .collect()
}

/// Words of which a message about `fault` must contain one (lowercase).
fn words_for(fault: Fault) -> &'static [&'static str] {
    match fault {
        Fault::Delay(_) | Fault::Drip(_) => &["timed out", "timeout"],
        Fault::Status(_) => &["503"],
        Fault::ResetMidBody => &["reset", "connection", "closed", "eof", "disconnect"],
        Fault::Truncate => &[
            "eof",
            "truncat",
            "closed",
            "incomplete",
            "content-length",
            "end of",
            "short",
            "disconnect",
        ],
        Fault::Redirect(_) => &["never follows"],
        Fault::HugeBody { .. } => &["more than lockwarden reads"],
        Fault::Rewrite(_) => &[],
    }
}

/// Whether `text` names the problem `fault` causes.
fn names(text: &str, fault: Fault) -> bool {
    let text = text.to_lowercase();
    words_for(fault).iter().any(|w| text.contains(w))
}

/// A run that failed as a whole: exit 1, a message naming the problem, and
/// not one lock removed.
fn assert_failed_cleanly(
    what: &str,
    out: &Finished,
    fault: Fault,
    before: &BTreeSet<String>,
    repo: &TestRepo,
) {
    assert_eq!(out.code, 1, "{what}: exit 1 on {fault}: {out:?}");
    assert!(
        names(&out.stderr, fault),
        "{what}: the error names the problem ({fault}; one of {:?}): {}",
        words_for(fault),
        out.stderr
    );
    assert_eq!(
        &repo.lock_ids(),
        before,
        "{what}: nothing removed after {fault}"
    );
}

/// The lock-level invariant of every run: nothing removed that a clean run
/// kept; the live holder's and the fresh lock are still there.
fn assert_only_stale_removed(what: &str, scene: &Scene, seeded: &Seeded, fault: Fault) {
    let now = scene.repo.lock_ids();
    let gone: BTreeSet<String> = seeded.all.difference(&now).cloned().collect();
    assert!(
        gone.is_subset(&seeded.clean_stale),
        "{what} after {fault}: removed {gone:?}, of which not judged stale by a clean run: {:?}",
        gone.difference(&seeded.clean_stale).collect::<Vec<_>>()
    );
    assert!(now.contains(scene.live()), "{what}: the live lock stays");
    assert!(now.contains(&seeded.fresh), "{what}: the fresh lock stays");
}

/// A fault on reading one stale lock file: either that lock is reported
/// unreadable and kept while the others are judged and removed as usual, or
/// the whole run fails, names the problem and removes nothing.
#[test]
fn a_faulty_lock_read_makes_that_lock_unreadable_or_fails_the_run() {
    let scene = Scene::new();
    for fault in Fault::all(DELAY) {
        let seeded = scene.seed();
        let victim = seeded.stale[1].clone();
        let (proxy, via) = scene.through(Filter::lock_read(Some(&victim)), fault);
        let before = scene.repo.lock_ids();

        let check = run(&via, "check", &["--json"]);
        assert_injected(&proxy);
        assert_eq!(scene.repo.lock_ids(), before, "check removes nothing");
        let per_lock = match check.code {
            3 => {
                assert_only_victim_unreadable(&check.json().1, &seeded, &victim, fault);
                true
            }
            _ => {
                assert_failed_cleanly("check", &check, fault, &before, &scene.repo);
                false
            }
        };

        let unlock = run(&via, "unlock", &["--json"]);
        if per_lock && unlock.code == 0 {
            assert_all_but_victim_removed(&unlock.json().1, &scene, &victim, fault);
        } else {
            assert_failed_cleanly("unlock", &unlock, fault, &before, &scene.repo);
        }
        assert_only_stale_removed("unlock", &scene, &seeded, fault);
    }
    scene.finish();
}

/// A fault on listing `locks/`: the run fails, names the problem, and
/// removes nothing.
#[test]
fn a_faulty_lock_listing_fails_the_run_and_removes_nothing() {
    let scene = Scene::new();
    for fault in Fault::all(DELAY) {
        let seeded = scene.seed();
        let (proxy, via) = scene.through(Filter::lock_listing(), fault);
        let before = scene.repo.lock_ids();
        for command in ["check", "unlock"] {
            let out = run(&via, command, &["--json"]);
            assert_injected(&proxy);
            assert_failed_cleanly(command, &out, fault, &before, &scene.repo);
        }
        assert_only_stale_removed("unlock", &scene, &seeded, fault);
    }
    scene.finish();
}

/// A fault on deleting one stale lock: `check` is unaffected; `unlock`
/// removes the other stale locks, and decides what became of that one by
/// listing again: gone is "already gone", still there is a failure (exit 1,
/// not among the removed); a 5xx leaves the file in place. The text summary
/// of a run whose only removal failed counts nothing as removed.
#[test]
fn a_failed_delete_is_reported_as_a_failure() {
    let scene = Scene::new();
    for fault in Fault::all(DELAY) {
        let seeded = scene.seed();
        let victim = seeded.stale[2].clone();
        let (proxy, via) = scene.through(Filter::lock_delete(Some(&victim)), fault);
        let before = scene.repo.lock_ids();

        let check = run(&via, "check", &["--json"]);
        assert_eq!(
            check.code, 3,
            "{fault}: check deletes nothing, so sees no fault: {check:?}"
        );
        assert_eq!(removals(&check.json().1), seeded.clean_stale, "{fault}");
        assert_eq!(scene.repo.lock_ids(), before, "check removes nothing");

        let unlock = run(&via, "unlock", &["--json"]);
        assert_injected(&proxy);
        let doc = unlock.json().1;
        let (removed, failed) = (listed(&doc, "removed"), listed(&doc, "failed"));
        assert!(
            seeded.stale_but(&victim).is_subset(&removed),
            "{fault}: the other stale locks are removed: {doc:#}"
        );
        assert!(
            removed.is_subset(&seeded.clean_stale) && failed.is_subset(&seeded.clean_stale),
            "{fault}: only stale locks are touched: {doc:#}"
        );
        let on_disk = scene.repo.lock_ids().contains(&victim);
        // A broken, cut, late or dripped answer may come after the server
        // deleted the file; the listing after the failed delete then finds
        // it gone, which is a success ("already gone"). A file still there
        // is a failure, said so.
        let found_gone = !matches!(fault, Fault::Status(_))
            && unlock.code == 0
            && removed.contains(&victim)
            && !on_disk;
        if !found_gone {
            assert_only_victim_failed(&unlock, &doc, &victim, fault);
        }
        if let Fault::Status(_) = fault {
            assert!(on_disk, "the server refused: the file is still there");
        }
        assert_only_stale_removed("unlock", &scene, &seeded, fault);

        if let Fault::Status(_) = fault {
            // Only the victim is stale now, and its removal fails again.
            assert_text_summary_counts_no_removal(&scene, &via, &victim);
        }
    }
    scene.finish();
}

/// The fault of `proxy` reached at least one request.
fn assert_injected(proxy: &FaultProxy) {
    assert!(
        proxy.injected() >= 1,
        "{} was injected: {:?}",
        proxy.fault(),
        proxy.seen()
    );
}

/// A check document after `fault` on reading `victim`: that lock is
/// unreadable, kept, its problem named; the others are judged as a clean run
/// judged them.
fn assert_only_victim_unreadable(doc: &Value, seeded: &Seeded, victim: &str, fault: Fault) {
    let entry = doc["unreadable"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|u| u["id"] == victim)
        .unwrap_or_else(|| panic!("{fault}: {victim} is reported unreadable: {doc:#}"));
    assert_eq!(entry["action"], "keep", "{fault}: {entry:#}");
    assert_eq!(entry["rule"], "unreadable", "{fault}: {entry:#}");
    let problem = entry["problem"].as_str().unwrap_or_default();
    assert!(
        names(problem, fault),
        "{fault}: the problem is named (one of {:?}): {problem}",
        words_for(fault)
    );
    assert_eq!(
        removals(doc),
        seeded.stale_but(victim),
        "{fault}: the other locks are judged as usual"
    );
}

/// An unlock document after `fault` on reading `victim`: every other stale
/// lock removed, none failed, and `victim` still there.
fn assert_all_but_victim_removed(doc: &Value, scene: &Scene, victim: &str, fault: Fault) {
    let removed = listed(doc, "removed");
    assert!(
        !removed.contains(victim),
        "{fault}: the unread lock is not removed: {doc:#}"
    );
    assert_eq!(
        removed.len(),
        STALE - 1,
        "{fault}: the other stale locks are removed: {doc:#}"
    );
    assert!(listed(doc, "failed").is_empty(), "{fault}: {doc:#}");
    assert!(
        scene.repo.lock_ids().contains(victim),
        "{fault}: the unread lock stays"
    );
}

/// An unlock (`out`, its document `doc`) after `fault` on deleting `victim`:
/// exit 1, `victim` failed and not removed, the failure naming the problem.
fn assert_only_victim_failed(out: &Finished, doc: &Value, victim: &str, fault: Fault) {
    assert_eq!(out.code, 1, "{fault}: a failed removal is exit 1: {out:?}");
    assert_eq!(
        listed(doc, "failed"),
        BTreeSet::from([victim.to_owned()]),
        "{fault}: {doc:#}"
    );
    assert!(
        !listed(doc, "removed").contains(victim),
        "{fault}: a failure is not a removal: {doc:#}"
    );
    let error = doc["failed"][0]["error"].as_str().unwrap_or_default();
    assert!(
        names(error, fault),
        "{fault}: the failure names the problem (one of {:?}): {error}",
        words_for(fault)
    );
}

/// A text unlock `via` the proxy whose only removal, of `victim`, fails:
/// exit 1, the lock named, and a summary that counts nothing as removed.
fn assert_text_summary_counts_no_removal(scene: &Scene, via: &TestRepo, victim: &str) {
    let text = run(via, "unlock", &[]);
    assert_eq!(text.code, 1, "{text:?}");
    assert!(
        text.stderr.contains(&victim[..8]),
        "names the lock it could not remove: {}",
        text.stderr
    );
    let summary = text.stdout.lines().last().unwrap_or_default();
    assert!(
        removed_count(summary) == Some(0),
        "the summary counts nothing as removed: {summary:?}\n{}",
        text.stdout
    );
    assert!(scene.repo.lock_ids().contains(victim));
}

/// The number before the word `removed` in a summary line.
fn removed_count(summary: &str) -> Option<usize> {
    let words: Vec<&str> = summary
        .split(|c: char| c.is_whitespace() || c == ',' || c == ':')
        .filter(|w| !w.is_empty())
        .collect();
    words
        .windows(2)
        .find(|w| w[1] == "removed")
        .and_then(|w| w[0].parse().ok())
}
