//! Shadow policies (`--shadow-policy`, watch's `shadow_policy`) on real
//! restic repositories: the shadow judges the same locks, only the enforced
//! policy acts, every disagreement is reported, and a failing shadow changes
//! nothing.
//!
//! The scenario: two locks from another host, both written 2 h ago, one
//! shared and one exclusive. The default policy removes both (`expired`).
//! The strict example with `exclusive-min-age=3h` removes the shared one
//! (`expired`) and keeps the exclusive one (`young-exclusive`): the two
//! policies disagree on exactly the exclusive lock.

use std::path::Path;
use std::time::Duration;

use lockwarden_tests::guard::Guarded;
use lockwarden_tests::lock_writer::{LockSpec, LockWriter, time_from_now};
use lockwarden_tests::metrics::scrape_until;
use lockwarden_tests::restic::{TestRepo, free_port};
use lockwarden_tests::restic_version::restic_program;
use lockwarden_tests::{Guest, guests};
use serde_json::Value;

const HOUR: i64 = 3600;
/// The strict policy's setting that makes it keep the 2 h old exclusive lock.
const STRICT_KEEPS_EXCLUSIVE: &str = "exclusive-min-age=3h";

/// A repository with the scenario's two locks: (shared id, exclusive id).
fn two_old_locks() -> (TestRepo, String, String) {
    let repo = TestRepo::init_local();
    let writer = LockWriter::new(&repo);
    let shared = writer.write(LockSpec {
        time: time_from_now(-2 * HOUR),
        hostname: "elsewhere",
        pid: 11,
        ..LockSpec::default()
    });
    let exclusive = writer.write(LockSpec {
        time: time_from_now(-2 * HOUR),
        hostname: "elsewhere",
        pid: 12,
        exclusive: true,
        ..LockSpec::default()
    });
    (repo, shared, exclusive)
}

fn path(guest: Guest) -> &'static str {
    guest.path().to_str().expect("a UTF-8 path")
}

/// `--shadow-policy <strict> --shadow-set exclusive-min-age=3h`.
fn strict_shadow() -> [&'static str; 4] {
    [
        "--shadow-policy",
        path(guests::STRICT),
        "--shadow-set",
        STRICT_KEEPS_EXCLUSIVE,
    ]
}

/// `(id, action, rule)` of every lock in a report document.
fn judged(doc: &Value) -> Vec<(String, String, String)> {
    let field = |v: &Value, k: &str| v[k].as_str().expect(k).to_owned();
    let mut all: Vec<_> = doc["locks"]
        .as_array()
        .expect("locks")
        .iter()
        .map(|l| (field(l, "id"), field(l, "action"), field(l, "rule")))
        .collect();
    all.sort();
    all
}

#[test]
fn check_reports_the_strict_shadows_disagreement_and_acts_on_nothing() {
    let (repo, shared, exclusive) = two_old_locks();
    let before = repo.lock_ids();

    let text = repo.warden("check", &strict_shadow());
    assert_eq!(text.code, 3, "the enforced default would remove: {text:?}");
    let short = &exclusive[..8];
    for want in [
        "shadow policy lockwarden-strict-example",
        "disagrees on 1 of 2:",
        &format!("{short}: enforced remove (expired)"),
        "shadow keep (young-exclusive)",
    ] {
        assert!(
            text.stdout.contains(want),
            "{want:?} missing:\n{}",
            text.stdout
        );
    }
    assert!(
        !text.stdout.contains(&format!("{}: enforced", &shared[..8])),
        "they agree on the shared lock:\n{}",
        text.stdout
    );
    assert!(
        text.stderr
            .contains("shadow policy lockwarden-strict-example disagrees"),
        "one log line per disagreement: {}",
        text.stderr
    );

    let out = repo.warden("check", &[&strict_shadow()[..], &["--json"]].concat());
    assert_eq!(out.code, 3, "{out:?}");
    let doc = out.json().1;
    assert_eq!(doc["policy"]["name"], "lockwarden-default");
    let shadow = &doc["shadow"];
    assert_eq!(shadow["name"], "lockwarden-strict-example", "{shadow}");
    assert_eq!(shadow["source"], path(guests::STRICT));
    assert_eq!(shadow["judged"], 2);
    assert_eq!(shadow["error"], Value::Null);
    let disagreements = shadow["disagreements"].as_array().expect("an array");
    assert_eq!(disagreements.len(), 1, "{shadow}");
    let d = &disagreements[0];
    assert_eq!(d["id"], exclusive.as_str());
    assert_eq!(
        (&d["enforced"]["action"], &d["enforced"]["rule"]),
        (&"remove".into(), &"expired".into())
    );
    assert_eq!(
        (&d["shadow"]["action"], &d["shadow"]["rule"]),
        (&"keep".into(), &"young-exclusive".into())
    );
    assert!(
        d["shadow"]["reason"]
            .as_str()
            .is_some_and(|r| !r.is_empty()),
        "{d}"
    );
    // Without a shadow the document has no `shadow` at all.
    let (_, plain) = repo.check_json();
    assert!(plain.get("shadow").is_none(), "{plain}");
    assert_eq!(
        judged(&plain),
        judged(&doc),
        "the shadow changed no verdict"
    );
    assert_eq!(repo.lock_ids(), before, "check removes nothing");
}

#[test]
fn unlock_removes_what_the_enforced_default_says_though_the_shadow_would_keep_it() {
    let (repo, _, exclusive) = two_old_locks();
    let out = repo.warden("unlock", &[&strict_shadow()[..], &["--json"]].concat());
    assert_eq!(out.code, 0, "{out:?}");
    let doc = out.json().1;
    assert_eq!(doc["removed"].as_array().map(Vec::len), Some(2), "{doc}");
    assert_eq!(doc["shadow"]["disagreements"][0]["id"], exclusive.as_str());
    assert!(
        repo.lock_ids().is_empty(),
        "both went, the shadow's keep did not act"
    );
    repo.assert_usable();
}

#[test]
fn unlock_keeps_what_the_enforced_strict_policy_keeps_though_the_shadow_would_remove_it() {
    let (repo, shared, exclusive) = two_old_locks();
    let out = repo.warden(
        "unlock",
        &[
            "--policy",
            path(guests::STRICT),
            "--set",
            STRICT_KEEPS_EXCLUSIVE,
            "--shadow-policy",
            path(guests::DEFAULT),
        ],
    );
    assert_eq!(out.code, 0, "{out:?}");
    for want in [
        "shadow policy lockwarden-default",
        "disagrees on 1 of 2:",
        "enforced keep (young-exclusive)",
        "shadow remove (expired)",
    ] {
        assert!(
            out.stdout.contains(want),
            "{want:?} missing:\n{}",
            out.stdout
        );
    }
    let left = repo.lock_ids();
    assert!(left.contains(&exclusive), "the shadow's remove did not act");
    assert!(!left.contains(&shared), "the enforced policy's remove did");
    assert_eq!(left.len(), 1);
}

#[test]
fn a_panicking_shadow_leaves_the_enforced_result_and_exit_code_intact() {
    let (repo, _, _) = two_old_locks();
    let panic_shadow = ["--shadow-policy", path(guests::PANIC)];
    let (plain_code, plain) = repo.check_json();
    let out = repo.warden("check", &[&panic_shadow[..], &["--json"]].concat());
    assert_eq!(out.code, plain_code, "{out:?}");
    assert_eq!(out.code, 3);
    let doc = out.json().1;
    assert_eq!(judged(&doc), judged(&plain));
    let error = doc["shadow"]["error"].as_str().expect("an error");
    assert!(error.contains("policy bug: index out of range"), "{error}");
    assert_eq!(doc["shadow"]["disagreements"], serde_json::json!([]));
    assert!(
        out.stderr.contains("shadow policy") && out.stderr.contains("failed"),
        "{}",
        out.stderr
    );

    let text = repo.warden("check", &panic_shadow);
    assert_eq!(text.code, 3, "{text:?}");
    assert!(
        text.stdout
            .contains("failed; the enforced policy's verdicts stand"),
        "{}",
        text.stdout
    );

    let unlock = repo.warden("unlock", &panic_shadow);
    assert_eq!(unlock.code, 0, "{unlock:?}");
    assert!(repo.lock_ids().is_empty(), "the enforced verdicts acted");
    // Locks were removed: no message of this run may say otherwise.
    let said = format!("{}{}", unlock.stdout, unlock.stderr);
    assert!(!said.contains("nothing was removed"), "{said}");
}

#[test]
fn shadow_settings_are_checked_before_anything_is_judged() {
    let (repo, _, _) = two_old_locks();
    let before = repo.lock_ids();
    let out = repo.warden(
        "unlock",
        &[
            "--shadow-policy",
            path(guests::STRICT),
            "--shadow-set",
            "stale-after=soon",
        ],
    );
    out.assert_exit(2, "shadow policy");
    assert!(out.stderr.contains("stale-after"), "{}", out.stderr);
    assert_eq!(repo.lock_ids(), before, "nothing removed");
    // A shadow setting without a shadow policy is refused by the parser.
    let out = repo.warden("check", &["--shadow-set", "stale-after=1h"]);
    out.assert_exit(2, "--shadow-policy");
}

#[test]
fn run_logs_the_disagreement_and_removes_what_the_enforced_policy_says() {
    let (repo, _, exclusive) = two_old_locks();
    let restic = restic_program().to_str().expect("utf-8");
    let out = repo.warden(
        "run",
        &[&strict_shadow()[..], &["--", restic, "cat", "config"]].concat(),
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stderr.contains(
            "shadow policy lockwarden-strict-example disagrees: enforced remove (expired)"
        ) && out.stderr.contains(&exclusive[..8]),
        "{}",
        out.stderr
    );
    assert!(repo.lock_ids().is_empty(), "{out:?}");
}

/// One `[[repository]]` of a watch configuration, in report mode.
fn entry(name: &str, repo: &TestRepo, extra: &str) -> String {
    format!(
        "\n[[repository]]\nname = \"{name}\"\nrepository = \"{}\"\npassword_file = \"{}\"\ninterval = \"2s\"\nmode = \"report\"\n{extra}\n",
        repo.location,
        repo.password_file().display()
    )
}

#[test]
fn watch_counts_disagreements_by_rule_pair_and_shadow_errors() {
    let (strict, _, _) = two_old_locks();
    let (failing, _, _) = two_old_locks();
    let before = (strict.lock_ids(), failing.lock_ids());
    let addr = format!("127.0.0.1:{}", free_port());
    let dir: &Path = strict.dir.path();
    let config = dir.join("watch.toml");
    let text = format!(
        "metrics_addr = \"{addr}\"\nstate_dir = \"{}\"\n{}{}",
        dir.join("state").display(),
        entry(
            "strict",
            &strict,
            &format!(
                "shadow_policy = \"{}\"\nshadow_settings = {{ exclusive-min-age = \"3h\" }}",
                path(guests::STRICT)
            )
        ),
        entry(
            "failing",
            &failing,
            &format!("shadow_policy = \"{}\"", path(guests::PANIC))
        ),
    );
    std::fs::write(&config, text).expect("write config");
    let watch = Guarded::spawn(
        lockwarden_tests::lockwarden(&dir.join("cache"))
            .args(["watch", "--config"])
            .arg(&config),
    );
    let disagreement = r#"lockwarden_shadow_disagreements_total{repository="strict",enforced_rule="expired",shadow_rule="young-exclusive"} "#;
    let error = r#"lockwarden_shadow_errors_total{repository="failing"} "#;
    let metrics = scrape_until(&addr, |m| m.contains(disagreement) && m.contains(error));
    assert!(
        !metrics.contains(r#"lockwarden_shadow_disagreements_total{repository="failing""#),
        "a failed shadow counts no disagreement:\n{metrics}"
    );
    assert!(
        !metrics.contains(r#"lockwarden_shadow_errors_total{repository="strict"}"#),
        "{metrics}"
    );
    watch.signal("TERM");
    let out = watch.finish_within(Duration::from_secs(10), "watch");
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stderr
            .contains("shadow policy lockwarden-strict-example disagrees"),
        "{}",
        out.stderr
    );
    assert_eq!(
        (strict.lock_ids(), failing.lock_ids()),
        before,
        "report mode removes nothing"
    );
}

#[test]
fn watch_refuses_shadow_settings_its_shadow_rejects_at_start() {
    let (repo, _, _) = two_old_locks();
    let dir = repo.dir.path();
    let config = dir.join("watch.toml");
    let text = format!(
        "state_dir = \"{}\"\n{}",
        dir.join("state").display(),
        entry(
            "r",
            &repo,
            &format!(
                "shadow_policy = \"{}\"\nshadow_settings = {{ stale-after = \"0s\" }}",
                path(guests::STRICT)
            )
        ),
    );
    std::fs::write(&config, text).expect("write config");
    let out = Guarded::spawn(
        lockwarden_tests::lockwarden(&dir.join("cache"))
            .args(["watch", "--config"])
            .arg(&config),
    )
    .finish_within(
        Duration::from_secs(30),
        "watch with a refused shadow setting",
    );
    out.assert_exit(2, "shadow policy");
    assert!(out.stderr.contains("`r`"), "{}", out.stderr);

    // Shadow settings with no shadow policy to take them are refused too.
    let text = format!(
        "state_dir = \"{}\"\n{}",
        dir.join("state").display(),
        entry("r", &repo, "shadow_settings = { stale-after = \"1h\" }"),
    );
    std::fs::write(&config, text).expect("write config");
    let out = Guarded::spawn(
        lockwarden_tests::lockwarden(&dir.join("cache"))
            .args(["watch", "--config"])
            .arg(&config),
    )
    .finish_within(Duration::from_secs(30), "watch with orphan shadow settings");
    out.assert_exit(2, "shadow_settings without a shadow policy");
}
