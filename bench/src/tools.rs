//! lockwarden against restic, as whole commands: one-shot unlock, a periodic
//! round over many repositories, and a check over REST.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lockwarden_tests::lock_writer::{Encoding, LockSpec, LockWriter, time_from_now};
use lockwarden_tests::lockwarden_bin;
use lockwarden_tests::restic::{RestServer, TestRepo, free_port};

use lockwarden::stats::Summary;

/// What GNU time reports about one command.
#[derive(Debug, Clone, Copy)]
pub struct Run {
    /// Wall seconds.
    pub wall: f64,
    /// Peak resident set, KiB.
    pub rss_kib: f64,
    /// User + system CPU seconds.
    pub cpu: f64,
}

/// Runs `command` under `/usr/bin/time` and returns what it measured. Panics
/// when the command fails with an exit code not in `ok`.
pub fn measure(command: &mut Command, ok: &[i32]) -> Run {
    let program = command.get_program().to_owned();
    let mut timed = Command::new("/usr/bin/time");
    timed
        .args(["-f", "TIMED %e %M %U %S"])
        .arg(program)
        .args(command.get_args())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in command.get_envs() {
        match v {
            Some(v) => timed.env(k, v),
            None => timed.env_remove(k),
        };
    }
    let out = timed
        .output()
        .expect("run /usr/bin/time (apt-get install time)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let code = out.status.code().unwrap_or(-1);
    assert!(ok.contains(&code), "{command:?} exited {code}: {stderr}");
    let line = stderr
        .lines()
        .rfind(|l| l.starts_with("TIMED "))
        .expect("GNU time's line");
    let f: Vec<f64> = line[6..]
        .split_whitespace()
        .map(|x| x.parse().expect("number"))
        .collect();
    Run {
        wall: f[0],
        rss_kib: f[1],
        cpu: f[2] + f[3],
    }
}

fn copy_dir(from: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    let status = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .expect("cp");
    assert!(status.success());
}

fn lock_count(repo: &Path) -> usize {
    std::fs::read_dir(repo.join("locks"))
        .map(|d| d.count())
        .unwrap_or(0)
}

fn restic(repo: &str, password: &Path, cache: &Path) -> Command {
    let mut c = Command::new("restic");
    c.env("RESTIC_REPOSITORY", repo)
        .env("RESTIC_PASSWORD_FILE", password)
        .env("RESTIC_CACHE_DIR", cache)
        .env_remove("RESTIC_PASSWORD");
    c
}

fn lockwarden(cache: &Path) -> Command {
    let mut c = Command::new(lockwarden_bin());
    c.env("LOCKWARDEN_CACHE_DIR", cache)
        .env_remove("RESTIC_REPOSITORY");
    c
}

/// How old the locks [`fill`] writes are.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ages {
    /// Even ones 40 minutes old (stale), odd ones 5 minutes old.
    HalfStale,
    /// All 5 minutes old.
    AllFresh,
}

/// Writes `n` locks from other hosts, zstd-compressed, every tenth one
/// exclusive, as old as `ages` says.
fn fill(repo: &TestRepo, n: usize, ages: Ages) {
    let writer = LockWriter::new(repo);
    let old = time_from_now(-40 * 60);
    let young = time_from_now(-5 * 60);
    for i in 0..n {
        let time = if i % 2 == 0 && ages == Ages::HalfStale {
            &old
        } else {
            &young
        };
        writer.write(LockSpec {
            time: time.clone(),
            hostname: &format!("host-{}", i % 50),
            pid: 1000 + i as i64,
            exclusive: i % 10 == 0,
            encoding: Encoding::Zstd,
        });
    }
}

/// The scrypt parameters of the repository's key file at `repo` (restic
/// calibrates them per machine at `init`), as `N=32768, r=8, p=6`.
fn key_params(repo: &Path) -> String {
    let keys: Vec<_> = std::fs::read_dir(repo.join("keys"))
        .expect("keys/")
        .map(|e| e.expect("key entry").path())
        .collect();
    assert_eq!(keys.len(), 1, "one key file in {}", repo.display());
    let key: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&keys[0]).expect("key file")).expect("key JSON");
    format!("N={}, r={}, p={}", key["N"], key["r"], key["p"])
}

/// Paired runs of the two tools.
pub struct Pairs {
    /// Locks in the repository.
    pub locks: usize,
    /// Its key's scrypt parameters ([`key_params`]).
    pub key: String,
    /// lockwarden's runs.
    pub lockwarden: Vec<Run>,
    /// restic's runs.
    pub restic: Vec<Run>,
}

impl Pairs {
    /// Per-pair ratios lockwarden/restic of `f`.
    pub fn ratio(&self, f: impl Fn(&Run) -> f64) -> Summary {
        let r: Vec<f64> = self
            .lockwarden
            .iter()
            .zip(&self.restic)
            .map(|(a, b)| f(a) / f(b))
            .collect();
        Summary::of(&r)
    }

    /// Summary of one tool's `f`.
    pub fn of(runs: &[Run], f: impl Fn(&Run) -> f64) -> Summary {
        Summary::of(&runs.iter().map(f).collect::<Vec<_>>())
    }
}

/// `lockwarden unlock` and `restic unlock` on identical copies of a local
/// repository holding `n` locks, half of them stale, alternating which runs
/// first.
pub fn one_shot_unlock(n: usize, reps: usize) -> Pairs {
    let base = TestRepo::init_local();
    fill(&base, n, Ages::HalfStale);
    let work = base.dir.path();
    let (pw, cache, lw_cache) = (
        base.password_file(),
        work.join("restic-cache"),
        work.join("lw-cache"),
    );
    // Warm lockwarden's artifact cache, as any run after the first finds it.
    measure(
        lockwarden(&lw_cache)
            .args(["check", "-r"])
            .arg(&base.path)
            .arg("-p")
            .arg(&pw),
        &[3],
    );
    let unlock_copy = |ours: bool| {
        let copy = work.join("copy");
        copy_dir(&base.path, &copy);
        let run = if ours {
            measure(
                lockwarden(&lw_cache)
                    .args(["unlock", "-r"])
                    .arg(&copy)
                    .arg("-p")
                    .arg(&pw),
                &[0],
            )
        } else {
            measure(
                restic(&copy.display().to_string(), &pw, &cache).arg("unlock"),
                &[0],
            )
        };
        assert_eq!(
            lock_count(&copy),
            n / 2,
            "both tools remove exactly the stale half"
        );
        run
    };
    alternate(n, key_params(&base.path), reps, unlock_copy)
}

/// A periodic round over many repositories.
pub struct Round {
    /// Repositories.
    pub repositories: usize,
    /// CPU seconds of `repositories` runs of `restic unlock`.
    pub restic_cpu: f64,
    /// Wall seconds of those runs, back to back.
    pub restic_wall: f64,
    /// CPU seconds the `watch` process used for one round, keys in memory.
    pub watch_cpu: f64,
    /// Sum of the round's check durations in `watch`.
    pub watch_busy: f64,
}

fn metrics(addr: &str) -> String {
    ureq::get(&format!("http://{addr}/metrics"))
        .call()
        .ok()
        .and_then(|mut r| r.body_mut().read_to_string().ok())
        .unwrap_or_default()
}

/// Per repository: (check count, sum of check durations).
fn counts(text: &str) -> (Vec<u64>, f64) {
    let value = |l: &str| {
        l.rsplit(' ')
            .next()
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let counts = text
        .lines()
        .filter(|l| l.starts_with("lockwarden_check_duration_seconds_count"))
        .map(|l| value(l) as u64)
        .collect();
    let busy = text
        .lines()
        .filter(|l| l.starts_with("lockwarden_check_duration_seconds_sum"))
        .map(value)
        .sum();
    (counts, busy)
}

fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let after = &stat[stat.rfind(')').expect(")") + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    // utime and stime are fields 14 and 15; `after` starts at field 3.
    let ticks: f64 = f[11].parse::<f64>().expect("utime") + f[12].parse::<f64>().expect("stime");
    ticks / 100.0
}

/// One round over `n` repositories (each holding one fresh lock, so nothing
/// is removed): `n` runs of `restic unlock` versus one `lockwarden watch`
/// process whose keys are already in memory (its second round).
pub fn periodic_round(n: usize) -> Round {
    let base = TestRepo::init_local();
    fill(&base, 1, Ages::AllFresh);
    let work = base.dir.path();
    let (pw, cache) = (base.password_file(), work.join("restic-cache"));
    let repos: Vec<PathBuf> = (0..n)
        .map(|i| {
            let p = work.join(format!("repo-{i}"));
            copy_dir(&base.path, &p);
            p
        })
        .collect();
    let mut restic_cpu = 0.0;
    let mut restic_wall = 0.0;
    for repo in &repos {
        let run = measure(
            restic(&repo.display().to_string(), &pw, &cache).arg("unlock"),
            &[0],
        );
        restic_cpu += run.cpu;
        restic_wall += run.wall;
    }
    let (watch_cpu, watch_busy) = watch_second_round(&base, &repos);
    Round {
        repositories: n,
        restic_cpu,
        restic_wall,
        watch_cpu,
        watch_busy,
    }
}

/// Runs `lockwarden watch` over `repos`, copies of `base` (its password,
/// its files beside it), and measures its second round: (CPU seconds, sum
/// of check durations).
fn watch_second_round(base: &TestRepo, repos: &[PathBuf]) -> (f64, f64) {
    let work = base.dir.path();
    let addr = format!("127.0.0.1:{}", free_port());
    let config_file = work.join("watch.toml");
    std::fs::write(&config_file, watch_config(&addr, base, repos)).expect("config");
    let mut child = lockwarden(&work.join("lw-cache"))
        .args(["watch", "--config"])
        .arg(&config_file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("watch");
    let busy1 = wait_for_round(&addr, repos, 1);
    let cpu1 = cpu_seconds(child.id());
    let busy2 = wait_for_round(&addr, repos, 2);
    let cpu2 = cpu_seconds(child.id());
    let _ = child.kill();
    let _ = child.wait();
    (cpu2 - cpu1, busy2 - busy1)
}

/// A watch configuration serving metrics on `addr`, with its state beside
/// `base`, checking each of `repos` (`base`'s password) every 40 s.
fn watch_config(addr: &str, base: &TestRepo, repos: &[PathBuf]) -> String {
    let pw = base.password_file();
    let mut config = format!(
        "metrics_addr = \"{addr}\"\nstate_dir = \"{}\"\n",
        base.dir.path().join("state").display()
    );
    for (i, repo) in repos.iter().enumerate() {
        config += &format!(
            "\n[[repository]]\nname = \"r{i}\"\nrepository = \"{}\"\npassword_file = \"{}\"\ninterval = \"40s\"\n",
            repo.display(),
            pw.display()
        );
    }
    config
}

/// Waits until the watch serving metrics on `addr` has checked each of
/// `repos` at least `round` times; returns the sum of its check durations
/// then.
fn wait_for_round(addr: &str, repos: &[PathBuf], round: u64) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let text = metrics(addr);
        let (c, busy) = counts(&text);
        if c.len() == repos.len() && c.iter().all(|x| *x >= round) {
            return busy;
        }
        assert!(
            Instant::now() < deadline,
            "watch did not finish round {round}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `lockwarden check` versus `restic unlock` on one repository of `n` fresh
/// locks behind `rclone serve restic` on 127.0.0.1.
pub fn over_rest(n: usize, reps: usize) -> Pairs {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = RestServer::start(&dir.path().join("served"));
    let repo = server.init_repo("repo");
    fill(&repo, n, Ages::AllFresh);
    let work = repo.dir.path();
    let (pw, cache, lw_cache) = (
        repo.password_file(),
        work.join("restic-cache"),
        work.join("lw-cache"),
    );
    measure(
        lockwarden(&lw_cache)
            .args(["check", "-r", &repo.location, "-p"])
            .arg(&pw),
        &[0],
    );
    let pairs = alternate(n, key_params(&repo.path), reps, |ours| {
        if ours {
            measure(
                lockwarden(&lw_cache)
                    .args(["check", "-r", &repo.location, "-p"])
                    .arg(&pw),
                &[0],
            )
        } else {
            measure(restic(&repo.location, &pw, &cache).arg("unlock"), &[0])
        }
    });
    assert_eq!(
        lock_count(&repo.path),
        n,
        "nothing was stale, nothing removed"
    );
    pairs
}

/// Runs `run(true)` (lockwarden) and `run(false)` (restic) `reps` times each,
/// alternating which goes first.
fn alternate(locks: usize, key: String, reps: usize, mut run: impl FnMut(bool) -> Run) -> Pairs {
    let mut pairs = Pairs {
        locks,
        key,
        lockwarden: vec![],
        restic: vec![],
    };
    for rep in 0..reps {
        for turn in 0..2 {
            let ours = (rep + turn) % 2 == 0;
            let result = run(ours);
            if ours {
                pairs.lockwarden.push(result)
            } else {
                pairs.restic.push(result)
            }
        }
    }
    pairs
}
