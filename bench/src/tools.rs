//! lockwarden against restic, as whole commands: one-shot unlock, a periodic
//! round over many repositories, and a check over REST.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lockwarden_tests::cloud::{Bucket, Store};
use lockwarden_tests::lock_writer::{Encoding, LockSpec, LockWriter, time_from_now};
use lockwarden_tests::lockwarden_bin;
use lockwarden_tests::restic::{RestServer, TestRepo, free_port};
use lockwarden_tests::restic_version::restic_program;

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

/// The restic every ratio is against: the tests' ([`restic_program`]),
/// which `make bench` sets to restic 0.18.
fn restic(repo: &str, password: &Path, cache: &Path) -> Command {
    restic_at(restic_program(), repo, password, cache)
}

/// The restic of the second column: `restic` from `PATH` (Debian 12's 0.14).
pub const SECOND_RESTIC: &str = "restic";

fn restic_at(program: &Path, repo: &str, password: &Path, cache: &Path) -> Command {
    let mut c = Command::new(program);
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

/// Paired runs of lockwarden and restic, and of a second restic where one
/// was measured.
pub struct Pairs {
    /// Locks in the repository.
    pub locks: usize,
    /// Its key's scrypt parameters ([`key_params`]).
    pub key: String,
    /// lockwarden's runs.
    pub lockwarden: Vec<Run>,
    /// restic's runs ([`restic_program`]).
    pub restic: Vec<Run>,
    /// The second restic's runs ([`SECOND_RESTIC`]), or none.
    pub second: Vec<Run>,
    /// lockwarden's floor on this repository, or none: `lockwarden check`
    /// on a copy without its locks (the key, the listing, the policy).
    pub floor: Vec<Run>,
}

/// Which tool a measured run is of.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Tool {
    Lockwarden,
    Restic,
    Second,
    /// `lockwarden check` with no locks to read.
    Floor,
}

impl Pairs {
    /// Per-pair ratios lockwarden/restic of `f`.
    pub fn ratio(&self, f: impl Fn(&Run) -> f64) -> Summary {
        self.ratio_of(&self.lockwarden, f)
    }

    /// Per-pair ratios `runs`/restic of `f`.
    pub fn ratio_of(&self, runs: &[Run], f: impl Fn(&Run) -> f64) -> Summary {
        let r: Vec<f64> = runs
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

/// `lockwarden unlock`, `restic unlock` and the second restic's on identical
/// copies of a local repository holding `n` locks, half of them stale, and
/// lockwarden's floor on a copy without them, rotating which runs first.
pub fn one_shot_unlock(n: usize, reps: usize) -> Pairs {
    let base = TestRepo::init_local_calibrated();
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
    let unlock_copy = |tool: Tool| {
        let copy = work.join("copy");
        copy_dir(&base.path, &copy);
        let location = copy.display().to_string();
        let run = match tool {
            Tool::Floor => {
                std::fs::remove_dir_all(copy.join("locks")).expect("remove the locks");
                std::fs::create_dir(copy.join("locks")).expect("an empty locks/");
                let mut check = lockwarden(&lw_cache);
                check.args(["check", "-r"]).arg(&copy).arg("-p").arg(&pw);
                return measure(&mut check, &[0]);
            }
            Tool::Lockwarden => measure(
                lockwarden(&lw_cache)
                    .args(["unlock", "-r"])
                    .arg(&copy)
                    .arg("-p")
                    .arg(&pw),
                &[0],
            ),
            Tool::Restic => measure(restic(&location, &pw, &cache).arg("unlock"), &[0]),
            Tool::Second => measure(
                restic_at(Path::new(SECOND_RESTIC), &location, &pw, &cache).arg("unlock"),
                &[0],
            ),
        };
        assert_eq!(
            lock_count(&copy),
            n / 2,
            "both tools remove exactly the stale half"
        );
        run
    };
    let tools = [Tool::Lockwarden, Tool::Restic, Tool::Second, Tool::Floor];
    rotate(n, key_params(&base.path), reps, &tools, unlock_copy)
}

/// The repository [`one_shot_unlock`] measures, kept as `dir/repo` with its
/// password in `dir/password`, for profiling one command on it
/// (`lockwarden-bench prepare N DIR`).
pub fn prepare(n: usize, dir: &Path) {
    let base = TestRepo::init_local_calibrated();
    fill(&base, n, Ages::HalfStale);
    std::fs::create_dir_all(dir).expect("mkdir");
    copy_dir(&base.path, &dir.join("repo"));
    std::fs::copy(base.password_file(), dir.join("password")).expect("copy the password");
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
/// is removed, and restic's calibrated key): `n` runs of `restic unlock`
/// versus one `lockwarden watch` process whose keys are already in memory
/// (its second round).
pub fn periodic_round(n: usize) -> Round {
    let base = TestRepo::init_local_calibrated();
    fill(&base, 1, Ages::AllFresh);
    let work = base.dir.path();
    let (pw, cache) = (base.password_file(), work.join("restic-cache"));
    let repos: Vec<String> = (0..n)
        .map(|i| {
            let p = work.join(format!("repo-{i}"));
            copy_dir(&base.path, &p);
            p.display().to_string()
        })
        .collect();
    let mut restic_cpu = 0.0;
    let mut restic_wall = 0.0;
    for repo in &repos {
        let run = measure(restic(repo, &pw, &cache).arg("unlock"), &[0]);
        restic_cpu += run.cpu;
        restic_wall += run.wall;
    }
    let watch = watch_two_rounds(&base, &repos, &[], None);
    Round {
        repositories: n,
        restic_cpu,
        restic_wall,
        watch_cpu: watch.round_cpu,
        watch_busy: watch.round_busy,
    }
}

/// One `lockwarden watch` process over many repositories, observed over
/// its first two rounds.
#[derive(Debug)]
pub struct WatchRun {
    /// Where the repositories are: `local`, or the object store's name.
    pub store: String,
    /// Repositories.
    pub repositories: usize,
    /// Wall seconds from its start until each repository was checked once
    /// (keys derived, policy loaded).
    pub first_round: f64,
    /// CPU seconds between the end of round one and the end of round two.
    pub round_cpu: f64,
    /// The sum of round two's check durations.
    pub round_busy: f64,
    /// Peak resident set after round two, KiB.
    pub peak_rss_kib: f64,
    /// Open file descriptors after round two.
    pub fds: usize,
    /// Threads after round two.
    pub threads: usize,
    /// Requests to the store per round (per check between the ends of
    /// rounds one and two, times the repositories); none for local ones.
    pub requests_per_round: Option<f64>,
}

/// `watch` over `n` local repositories, each one fresh lock and a cheap key
/// (the template's: keys are derived once, in round one, and the rounds
/// after are what grows with `n`). Each copy holds what a check reads
/// (`config`, `keys/`, `locks/`), not restic's 256 empty `data/`
/// directories.
pub fn watch_at_scale(n: usize) -> WatchRun {
    let (base, copies) = template_and_copies(n, "");
    let locations: Vec<String> = copies.iter().map(|p| p.display().to_string()).collect();
    watch_two_rounds(&base, &locations, &[], None)
}

/// [`watch_at_scale`] with the `n` repositories in one bucket of moto's S3,
/// uploaded at once from local copies, and the requests each round makes.
pub fn watch_at_scale_on_s3(n: usize) -> WatchRun {
    let (base, _) = template_and_copies(n, "staging");
    let bucket = Store::S3.new_bucket();
    bucket.upload(&base.dir.path().join("staging"));
    let repos: Vec<TestRepo> = (0..n).map(|i| bucket.repo(&format!("repo-{i}"))).collect();
    let locations: Vec<String> = repos
        .iter()
        .map(|r| {
            r.lockwarden_location
                .clone()
                .expect("a location for lockwarden")
        })
        .collect();
    watch_two_rounds(&base, &locations, &repos[0].env, Some(&bucket))
}

/// A template repository holding one fresh lock, and `n` copies of what a
/// check reads from it, `repo-<i>` in its directory's `under`.
fn template_and_copies(n: usize, under: &str) -> (TestRepo, Vec<PathBuf>) {
    let base = TestRepo::init_local();
    fill(&base, 1, Ages::AllFresh);
    let copies = (0..n)
        .map(|i| {
            let to = base.dir.path().join(under).join(format!("repo-{i}"));
            copy_what_a_check_reads(&base.path, &to);
            to
        })
        .collect();
    (base, copies)
}

fn copy_what_a_check_reads(from: &Path, to: &Path) {
    for dir in ["keys", "locks"] {
        std::fs::create_dir_all(to.join(dir)).expect("mkdir");
        for entry in std::fs::read_dir(from.join(dir)).expect("read_dir") {
            let entry = entry.expect("entry");
            std::fs::copy(entry.path(), to.join(dir).join(entry.file_name())).expect("copy");
        }
    }
    std::fs::copy(from.join("config"), to.join("config")).expect("copy config");
}

/// Runs `lockwarden watch` with `env` over `locations`, repositories with
/// `base`'s password, its files beside `base`, through its first two
/// rounds; counts the requests `bucket` (where the repositories are, if
/// anywhere) logs between the ends of the two rounds.
fn watch_two_rounds(
    base: &TestRepo,
    locations: &[String],
    env: &[(String, String)],
    bucket: Option<&Bucket>,
) -> WatchRun {
    let work = base.dir.path();
    let addr = format!("127.0.0.1:{}", free_port());
    let config_file = work.join("watch.toml");
    std::fs::write(&config_file, watch_config(&addr, base, locations)).expect("config");
    let started = Instant::now();
    let mut child = lockwarden(&work.join("lw-cache"))
        .args(["watch", "--config"])
        .arg(&config_file)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("watch");
    let round1 = wait_for_round(&addr, locations.len(), 1);
    let first_round = started.elapsed().as_secs_f64();
    let cpu1 = cpu_seconds(child.id());
    let round2 = wait_for_round(&addr, locations.len(), 2);
    let cpu2 = cpu_seconds(child.id());
    let status = |key: &str| status_field(child.id(), key);
    let requests_per_round = bucket.map(|b| {
        let requests = b.requests_by(round2.at) - b.requests_by(round1.at);
        let checks = (round2.checks - round1.checks).max(1);
        requests as f64 / checks as f64 * locations.len() as f64
    });
    let run = WatchRun {
        store: bucket.map_or("local".to_owned(), |b| b.store.to_string()),
        repositories: locations.len(),
        first_round,
        round_cpu: cpu2 - cpu1,
        round_busy: round2.busy - round1.busy,
        peak_rss_kib: status("VmHWM:"),
        fds: std::fs::read_dir(format!("/proc/{}/fd", child.id()))
            .map(|d| d.count())
            .unwrap_or(0),
        threads: status("Threads:") as usize,
        requests_per_round,
    };
    let _ = child.kill();
    let _ = child.wait();
    run
}

/// A number field of `/proc/<pid>/status` (`VmHWM:` in KiB, `Threads:`).
fn status_field(pid: u32, key: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .expect("status")
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("the field")
}

/// A watch configuration serving metrics on `addr`, with its state beside
/// `base`, checking each of `locations` (`base`'s password) every 40 s.
fn watch_config(addr: &str, base: &TestRepo, locations: &[String]) -> String {
    let pw = base.password_file();
    let mut config = format!(
        "metrics_addr = \"{addr}\"\nstate_dir = \"{}\"\n",
        base.dir.path().join("state").display()
    );
    for (i, location) in locations.iter().enumerate() {
        config += &format!(
            "\n[[repository]]\nname = \"r{i}\"\nrepository = \"{location}\"\npassword_file = \"{}\"\ninterval = \"40s\"\n",
            pw.display()
        );
    }
    config
}

/// What `watch`'s metrics said at one moment.
struct Snapshot {
    /// When they were read.
    at: Instant,
    /// Checks of all repositories so far.
    checks: u64,
    /// The sum of their durations, seconds.
    busy: f64,
}

/// Waits until the watch serving metrics on `addr` has checked each of its
/// `n` repositories at least `round` times.
fn wait_for_round(addr: &str, n: usize, round: u64) -> Snapshot {
    let deadline = Instant::now() + Duration::from_secs(300 + n as u64 / 10);
    loop {
        let at = Instant::now();
        let text = metrics(addr);
        let (c, busy) = counts(&text);
        if c.len() == n && c.iter().all(|x| *x >= round) {
            return Snapshot {
                at,
                checks: c.iter().sum(),
                busy,
            };
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
    let repo = server.repo("repo");
    repo.init();
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
    let tools = [Tool::Lockwarden, Tool::Restic];
    let pairs = rotate(n, key_params(&repo.path), reps, &tools, |tool| {
        if tool == Tool::Lockwarden {
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

/// Runs each of `tools` `reps` times, rotating which goes first.
fn rotate(
    locks: usize,
    key: String,
    reps: usize,
    tools: &[Tool],
    mut run: impl FnMut(Tool) -> Run,
) -> Pairs {
    let mut pairs = Pairs {
        locks,
        key,
        lockwarden: vec![],
        restic: vec![],
        second: vec![],
        floor: vec![],
    };
    for rep in 0..reps {
        for turn in 0..tools.len() {
            let tool = tools[(rep + turn) % tools.len()];
            let result = run(tool);
            match tool {
                Tool::Lockwarden => pairs.lockwarden.push(result),
                Tool::Restic => pairs.restic.push(result),
                Tool::Second => pairs.second.push(result),
                Tool::Floor => pairs.floor.push(result),
            }
        }
    }
    pairs
}
