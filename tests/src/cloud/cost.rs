//! What one repository costs in requests to its store, counted by the
//! server: one `restic unlock`, one `lockwarden unlock`, and `lockwarden
//! watch` (its first check, then each check after it). For the e2e tests
//! (which assert it) and `make bench` (which reports it).

use std::time::{Duration, Instant};

use super::Bucket;
use crate::guard::Guarded;
use crate::restic::{TestRepo, free_port};

/// Requests to the store, counted by the server.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cost {
    /// One `restic unlock` (for Azure and GCS: through `rclone:`).
    pub restic_unlock: usize,
    /// One `lockwarden unlock`.
    pub lockwarden_unlock: usize,
    /// `watch`'s first check (opening the repository included).
    pub watch_first: usize,
    /// Each later check of `watch`, on average, while nothing changes.
    pub watch_per_check: f64,
    /// How many later checks were counted.
    pub checks: usize,
}

/// Measures [`Cost`] on `repo` in `bucket`, with `checks` later checks of
/// `watch` (each a second apart). Nothing is removed: the caller's locks
/// must be ones both tools keep.
pub fn measure(bucket: &Bucket, repo: &TestRepo, checks: usize) -> Cost {
    let before = bucket.requests();
    let restic = repo.restic(&["unlock"]);
    assert_eq!(restic.code, 0, "restic unlock: {restic:?}");
    let after_restic = bucket.requests();
    let ours = crate::finish(&mut repo.lockwarden("unlock"));
    assert_eq!(ours.code, 0, "lockwarden unlock: {ours:?}");
    let after_ours = bucket.requests();

    let metrics = format!("127.0.0.1:{}", free_port());
    let config = repo.dir.path().join("cost-watch.toml");
    let location = repo.lockwarden_location.as_ref().unwrap_or(&repo.location);
    std::fs::write(
        &config,
        format!(
            "metrics_addr = \"{metrics}\"\nstate_dir = \"{state}\"\n\n[[repository]]\nname = \"cost\"\nrepository = \"{location}\"\npassword_file = \"{password}\"\ninterval = \"1s\"\n",
            state = repo.dir.path().join("cost-state").display(),
            password = repo.password_file().display(),
        ),
    )
    .expect("write the watch configuration");
    let mut command = crate::lockwarden(&repo.dir.path().join("cache"));
    command
        .args(["watch", "--config"])
        .arg(&config)
        .envs(repo.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    let watch = Guarded::spawn(&mut command);
    let start = after_ours;
    wait_for_checks(&metrics, 1);
    let after_first = bucket.requests();
    let first_done = checks_done(&metrics).unwrap_or(1);
    wait_for_checks(&metrics, first_done + checks);
    let after_all = bucket.requests();
    let all_done = checks_done(&metrics).unwrap_or(first_done + checks);
    watch.signal("TERM");
    let _ = watch.wait_within(Duration::from_secs(20));
    Cost {
        restic_unlock: after_restic - before,
        lockwarden_unlock: after_ours - after_restic,
        watch_first: after_first - start,
        watch_per_check: (after_all - after_first) as f64 / (all_done - first_done) as f64,
        checks: all_done - first_done,
    }
}

/// Waits (at most 60 s) until `watch` has finished `n` checks.
fn wait_for_checks(metrics: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while checks_done(metrics).unwrap_or(0) < n {
        assert!(Instant::now() < deadline, "watch did not finish {n} checks");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// How many checks `watch` has finished, from its metrics.
fn checks_done(metrics: &str) -> Option<usize> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(5)))
        .build()
        .into();
    let body = agent
        .get(&format!("http://{metrics}/metrics"))
        .call()
        .ok()?
        .body_mut()
        .read_to_string()
        .ok()?;
    body.lines()
        .find(|l| l.starts_with("lockwarden_check_duration_seconds_count"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|n| n.parse::<f64>().ok())
        .map(|n| n as usize)
}
