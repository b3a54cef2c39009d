//! Real restic repositories for tests: created by the `restic` binary, with
//! lock holders that are real restic processes. Which restic:
//! [`restic_program`].

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::cloud::RemoteDir;
use crate::restic_version::restic_program;
use crate::{Finished, finish};

/// The password of every test repository.
pub const PASSWORD: &str = "correct horse battery staple";

/// A restic repository in a temporary directory (local) or behind a server.
pub struct TestRepo {
    /// Holds the password file and, for local repositories, the repository.
    pub dir: tempfile::TempDir,
    /// What `-r` takes.
    pub location: String,
    /// The repository directory on disk (for REST and SFTP: the server's
    /// directory; for a cloud store, a path that does not exist: see `remote`).
    pub path: PathBuf,
    /// Variables both restic and lockwarden get (credentials, rclone
    /// remotes; for SFTP, a `PATH` whose `ssh` reaches the test server);
    /// empty for local and REST repositories.
    pub env: Vec<(String, String)>,
    /// What lockwarden's `-r` takes when it differs from `location` (a cloud
    /// store reached by restic through `rclone:`).
    pub lockwarden_location: Option<String>,
    /// The repository in a cloud store, through rclone (for its lock ids and
    /// forged locks); `None` when it is on disk.
    pub remote: Option<RemoteDir>,
}

impl TestRepo {
    /// A new repository in a fresh temporary directory
    /// ([`TestRepo::create`]).
    pub fn init_local() -> TestRepo {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("repo");
        let repo = TestRepo {
            location: path.display().to_string(),
            path,
            dir,
            env: Vec::new(),
            lockwarden_location: None,
            remote: None,
        };
        repo.create();
        repo
    }

    /// A new repository in a fresh temporary directory, made by `restic
    /// init` itself ([`TestRepo::init`]) with the key it calibrates on this
    /// machine: for `make bench`, where deriving that key is part of what
    /// one run of either tool costs.
    pub fn init_local_calibrated() -> TestRepo {
        let mut repo = TestRepo::at(String::new(), PathBuf::new());
        repo.path = repo.dir.path().join("repo");
        repo.location = repo.path.display().to_string();
        repo.init();
        repo
    }

    /// A new repository in a fresh directory ([`TestRepo::create`]),
    /// reached as `rclone::local:<dir>`.
    pub fn init_over_rclone() -> TestRepo {
        let mut repo = TestRepo::at(String::new(), PathBuf::new());
        repo.path = repo.dir.path().join("repo");
        repo.location = format!("rclone::local:{}", repo.path.display());
        repo.create();
        repo
    }

    /// A repository at `location` whose files live in `path`, not yet
    /// initialised.
    pub fn at(location: String, path: PathBuf) -> TestRepo {
        TestRepo {
            dir: tempfile::tempdir().expect("temp dir"),
            location,
            path,
            env: Vec::new(),
            lockwarden_location: None,
            remote: None,
        }
    }

    /// Runs `restic init` (the standard constructors take the faster
    /// [`TestRepo::create`] instead).
    pub fn init(&self) {
        std::fs::write(self.password_file(), PASSWORD).expect("write password file");
        let out = self.restic(&["init"]);
        assert_eq!(out.code, 0, "restic init failed: {out:?}");
    }

    /// The file holding [`PASSWORD`].
    pub fn password_file(&self) -> PathBuf {
        let file = self.dir.path().join("password");
        if !file.exists() {
            std::fs::write(&file, PASSWORD).expect("write password file");
        }
        file
    }

    /// `password_file = "..."`: the line of a watch configuration that
    /// points at [`TestRepo::password_file`].
    pub fn password_file_setting(&self) -> String {
        format!("password_file = \"{}\"", self.password_file().display())
    }

    /// A `restic` command ([`restic_program`]) for this repository.
    pub fn restic_command(&self) -> Command {
        let mut command = Command::new(restic_program());
        command
            .env("RESTIC_REPOSITORY", &self.location)
            .env("RESTIC_PASSWORD_FILE", self.password_file())
            .env("RESTIC_CACHE_DIR", self.dir.path().join("restic-cache"))
            .env_remove("RESTIC_PASSWORD")
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        command
    }

    /// `lockwarden <subcommand> -r <repo> -p <password file>`, with a private
    /// artifact cache, no repository variables from the environment, and
    /// [`TestRepo::env`]. `<repo>` is [`TestRepo::lockwarden_location`] when
    /// set, else [`TestRepo::location`].
    pub fn lockwarden(&self, subcommand: &str) -> Command {
        let location = self.lockwarden_location.as_ref().unwrap_or(&self.location);
        let mut command = crate::lockwarden(&self.dir.path().join("cache"));
        command
            .args([subcommand, "-r", location, "-p"])
            .arg(self.password_file())
            .env_remove("RESTIC_REPOSITORY")
            .env_remove("RESTIC_PASSWORD")
            .env_remove("RESTIC_PASSWORD_FILE")
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        command
    }

    /// Runs `lockwarden <command> -r <repo> -p <password file> <extra>` to
    /// completion.
    pub fn warden(&self, command: &str, extra: &[&str]) -> Finished {
        finish(self.lockwarden(command).args(extra))
    }

    /// The repository's id, as restic reads it from `config`.
    pub fn id(&self) -> String {
        let out = self.restic(&["cat", "config", "--no-lock"]);
        assert_eq!(out.code, 0, "restic cat config failed: {out:?}");
        let config: serde_json::Value =
            serde_json::from_str(&out.stdout).expect("restic prints JSON");
        config["id"].as_str().expect("an id").to_owned()
    }

    /// `lockwarden check --json`: its exit code and its document.
    pub fn check_json(&self) -> (i32, serde_json::Value) {
        self.warden("check", &["--json"]).json()
    }

    /// Runs restic with `args` to completion.
    pub fn restic(&self, args: &[&str]) -> Finished {
        finish(self.restic_command().args(args))
    }

    /// The lock ids in `locks/`, read from the directory (through rclone for
    /// a cloud store). restic writes `<id>-tmp-<n>` first and renames it;
    /// such temporary files are not locks yet and are left out.
    pub fn lock_ids(&self) -> BTreeSet<String> {
        if let Some(remote) = &self.remote {
            return remote
                .join("locks")
                .list()
                .into_iter()
                .filter(|name| lockwarden::repo::lockfile::is_valid_id(name))
                .collect();
        }
        match std::fs::read_dir(self.path.join("locks")) {
            Ok(entries) => entries
                .map(|e| {
                    e.expect("dir entry")
                        .file_name()
                        .to_string_lossy()
                        .into_owned()
                })
                .filter(|name| lockwarden::repo::lockfile::is_valid_id(name))
                .collect(),
            Err(_) => BTreeSet::new(),
        }
    }

    /// `restic backup` of a small directory and `restic check` both succeed:
    /// the repository works after whatever the test did.
    pub fn assert_usable(&self) {
        let data = self.dir.path().join("data");
        std::fs::create_dir_all(&data).expect("data dir");
        std::fs::write(data.join("file"), b"backed up after unlock").expect("data file");
        let backup = self.restic(&["backup", data.to_str().expect("utf-8")]);
        assert_eq!(backup.code, 0, "restic backup failed: {backup:?}");
        let check = self.restic(&["check"]);
        assert_eq!(check.code, 0, "restic check failed: {check:?}");
    }

    /// For a repository `restic init` made (with its calibrated key and the
    /// layout restic gives that storage): a killed holder's lock is removed,
    /// a live holder's kept, and restic works after.
    pub fn assert_cleaned_as_restic_made_it(&self) {
        let live = Holder::start(self);
        let dead = Holder::start(self).kill();
        let out = self.warden("unlock", &[]);
        assert_eq!(out.code, 0, "{out:?}");
        assert!(out.stdout.contains(&dead[..8]), "{out:?}");
        assert_eq!(self.lock_ids(), BTreeSet::from([live.lock_id.clone()]));
        drop(live);
        self.assert_usable();
    }
}

/// A repository on disk that lockwarden reaches as `swift:test:/repo`, one
/// of the schemes it reads through restic: a `restic` shim first in `PATH`
/// logs each command line (to the returned file) and runs the tests' restic
/// ([`restic_program`]) on the directory instead.
pub fn swift_through_restic(dir: &Path) -> (TestRepo, std::path::PathBuf) {
    let path = dir.join("repo");
    let mut repo = TestRepo::at(path.display().to_string(), path.clone());
    repo.init();
    let shim = dir.join("shim");
    std::fs::create_dir(&shim).expect("shim dir");
    let log = dir.join("calls.log");
    let script = format!(
        "#!/bin/sh\necho \"$*\" >> {}\nRESTIC_REPOSITORY={} exec {} \"$@\"\n",
        log.display(),
        path.display(),
        restic_program().display()
    );
    let restic = shim.join("restic");
    std::fs::write(&restic, script).expect("write shim");
    std::fs::set_permissions(&restic, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let path_var = format!(
        "{}:{}",
        shim.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    repo.lockwarden_location = Some("swift:test:/repo".into());
    repo.env.push(("PATH".into(), path_var));
    (repo, log)
}

/// A real `restic backup --stdin` that holds a lock while its stdin is open.
pub struct Holder {
    child: Child,
    stdin: Option<std::process::ChildStdin>,
    /// The lock it wrote.
    pub lock_id: String,
    /// Its pid.
    pub pid: u32,
}

impl Holder {
    /// Starts a holder and waits for its lock to appear.
    pub fn start(repo: &TestRepo) -> Holder {
        Holder::start_with(repo, repo.restic_command())
    }

    /// Starts a holder in its own UTS namespace with hostname `hostname`
    /// (`unshare --uts`, which needs root).
    pub fn start_on_host(repo: &TestRepo, hostname: &str) -> Holder {
        let inner = repo.restic_command();
        let mut command = Command::new("unshare");
        command
            .args(["--uts", "sh", "-c"])
            .arg(format!(
                "hostname {hostname} && exec \"$0\" backup -v --stdin --stdin-filename held"
            ))
            .arg(restic_program());
        for (k, v) in inner.get_envs() {
            match v {
                Some(v) => command.env(k, v),
                None => command.env_remove(k),
            };
        }
        Holder::spawn(repo, command)
    }

    fn start_with(repo: &TestRepo, mut command: Command) -> Holder {
        command.args(["backup", "-v", "--stdin", "--stdin-filename", "held"]);
        Holder::spawn(repo, command)
    }

    fn spawn(repo: &TestRepo, mut command: Command) -> Holder {
        let before = repo.lock_ids();
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn restic backup -v --stdin");
        let stdin = child.stdin.take();
        stdin
            .as_ref()
            .map(|mut s| s.write_all(b"some data"))
            .transpose()
            .expect("write to restic");
        // restic writes its lock, waits 200 ms, then looks for other locks
        // and, finding an exclusive one, removes its own and exits. It holds
        // the lock once past that look, when it says "load index files"
        // (both 0.14 and 0.18, with -v); a test that writes an exclusive
        // lock sooner would make its live holder go.
        let (locked, said) = std::sync::mpsc::channel();
        let stdout = child.stdout.take().expect("restic's stdout");
        std::thread::spawn(move || {
            let mut sent = false;
            for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)) {
                let Ok(line) = line else { break };
                if !sent && line.starts_with("load index files") {
                    sent = locked.send(()).is_ok();
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match said.recv_timeout(Duration::from_millis(50)) {
                Ok(()) => break,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    let status = child.wait().expect("reap restic");
                    panic!("restic backup --stdin exited before holding its lock: {status}");
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    assert!(Instant::now() < deadline, "restic held no lock within 30 s")
                }
            }
        }
        let lock_id = repo
            .lock_ids()
            .difference(&before)
            .next()
            .expect("the holder's lock is listed")
            .clone();
        let pid = child.id();
        Holder {
            child,
            stdin,
            lock_id,
            pid,
        }
    }

    /// Ends stdin so restic finishes its backup and removes its own lock, and
    /// returns its exit code (-1 when killed by a signal). Panics if it has
    /// not exited within 60 s (it is killed first).
    pub fn finish(mut self) -> i32 {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().expect("poll restic") {
                return status.code().unwrap_or(-1);
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("restic backup --stdin did not finish within 60 s of its stdin closing");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGKILL: the holder dies and leaves its lock behind.
    pub fn kill(mut self) -> String {
        self.child.kill().expect("kill restic");
        self.child.wait().expect("reap restic");
        self.lock_id.clone()
    }
}

impl Drop for Holder {
    /// Ends stdin so restic finishes its backup and removes its own lock;
    /// kills it only if it has not exited within 30 s.
    fn drop(&mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `rclone serve restic` on 127.0.0.1, with basic auth, serving `root`.
pub struct RestServer {
    child: Child,
    /// `http://user:pass@127.0.0.1:port`.
    pub base: String,
    /// The directory it serves.
    pub root: PathBuf,
}

/// The REST server's credentials.
pub const REST_USER: &str = "warden";
/// The REST server's password.
pub const REST_PASS: &str = "s3cr3t-pass";

impl RestServer {
    /// Starts a server for `root` and waits until it accepts connections.
    pub fn start(root: &Path) -> RestServer {
        std::fs::create_dir_all(root).expect("server root");
        let port = free_port();
        let addr = format!("127.0.0.1:{port}");
        let child = Command::new("rclone")
            .args([
                "serve", "restic", "--addr", &addr, "--user", REST_USER, "--pass", REST_PASS,
            ])
            .arg(root)
            .env("RCLONE_CONFIG", "/dev/null")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start rclone serve restic (apt-get install rclone)");
        wait_for_port(&addr, "rclone serve restic");
        RestServer {
            child,
            base: format!("http://{REST_USER}:{REST_PASS}@{addr}"),
            root: root.to_owned(),
        }
    }
}

impl RestServer {
    /// `127.0.0.1:<port>`, where the server listens.
    pub fn addr(&self) -> &str {
        self.base.rsplit('@').next().unwrap_or(&self.base)
    }

    /// A new repository `name` on this server ([`TestRepo::create`], in
    /// the directory it serves).
    pub fn init_repo(&self, name: &str) -> TestRepo {
        let repo = self.repo(name);
        repo.create();
        repo
    }

    /// Repository `name` on this server, not yet initialised.
    pub fn repo(&self, name: &str) -> TestRepo {
        TestRepo::at(format!("rest:{}/{name}", self.base), self.root.join(name))
    }
}

impl Drop for RestServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits up to 20 s until `addr` accepts connections; `what` names the
/// server in the panic message.
pub fn wait_for_port(addr: &str, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(Instant::now() < deadline, "{what} did not start on {addr}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A TCP port on 127.0.0.1 that nothing listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}
