//! A real OpenSSH server (Debian's `openssh-server`) on 127.0.0.1 for the
//! SFTP backend's tests: its own host key, its own authorized client key,
//! its own configuration (`-f`), in the foreground (`-D -e`), killed on
//! drop. It logs in the user the tests run as (root in CI:
//! `PermitRootLogin prohibit-password`, with the key).
//!
//! restic and lockwarden reach it with their default command, `ssh`: a
//! shim named `ssh`, first in the `PATH` that [`Sshd::env`] gives, runs the
//! real ssh with a client configuration of the test's own (`-F`: the
//! client key, a `known_hosts` holding the server's key, and the `Host`
//! alias [`SSH_ALIAS`]), so nothing of the user's `~/.ssh` is used or
//! changed.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::restic::{TestRepo, free_port, wait_for_port};

/// Where Debian installs the server (`apt-get install openssh-server`).
pub const SSHD: &str = "/usr/sbin/sshd";

/// A `Host` of the shim's ssh configuration that names this server
/// (`sftp:ALIAS:/path` reaches it without a port).
pub const SSH_ALIAS: &str = "lockwarden-sftp-test";

/// A running test server.
pub struct Sshd {
    child: Child,
    /// Keys, configurations, the shim and the server's log.
    dir: tempfile::TempDir,
    /// The port on 127.0.0.1.
    pub port: u16,
    /// The user it logs in (the one running the tests).
    pub user: String,
    /// A directory for repositories (served as it is on the local disk).
    pub root: PathBuf,
    /// How long it took from nothing to accepting connections, key
    /// generation included.
    pub started_in: Duration,
}

impl Sshd {
    /// Generates the keys, writes the configurations and starts the
    /// server; returns once it accepts connections.
    pub fn start() -> Sshd {
        let begin = Instant::now();
        let dir = tempfile::tempdir().expect("temp dir");
        let d = dir.path();
        for key in ["host_key", "client_key", "stranger_key"] {
            keygen(&d.join(key));
        }
        std::fs::copy(d.join("client_key.pub"), d.join("authorized_keys"))
            .expect("authorized_keys");
        let port = free_port();
        let user = current_user();
        let host_key = std::fs::read_to_string(d.join("host_key.pub")).expect("host key");
        let host_key: Vec<&str> = host_key.split_whitespace().take(2).collect();
        std::fs::write(
            d.join("known_hosts"),
            format!("[127.0.0.1]:{port} {}\n", host_key.join(" ")),
        )
        .expect("known_hosts");
        std::fs::write(
            d.join("sshd_config"),
            format!(
                "ListenAddress 127.0.0.1:{port}\n\
                 HostKey {host}\n\
                 AuthorizedKeysFile {auth}\n\
                 PidFile none\n\
                 UsePAM no\n\
                 StrictModes no\n\
                 PermitRootLogin prohibit-password\n\
                 PasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\n\
                 AllowUsers {user}\n\
                 Subsystem sftp internal-sftp\n",
                host = d.join("host_key").display(),
                auth = d.join("authorized_keys").display(),
            ),
        )
        .expect("sshd_config");
        for (config, key) in [
            ("ssh_config", "client_key"),
            ("stranger_config", "stranger_key"),
        ] {
            std::fs::write(
                d.join(config),
                format!(
                    "Host {SSH_ALIAS}\n  HostName 127.0.0.1\n  Port {port}\n\
                     Host *\n  IdentityFile {key}\n  IdentitiesOnly yes\n  \
                     UserKnownHostsFile {known}\n  GlobalKnownHostsFile /dev/null\n  \
                     StrictHostKeyChecking yes\n  LogLevel ERROR\n",
                    key = d.join(key).display(),
                    known = d.join("known_hosts").display(),
                ),
            )
            .expect("ssh config");
        }
        write_shim(d);
        // As root, sshd insists on its privilege separation directory,
        // which only the Debian service's unit creates.
        if user == "root" {
            std::fs::create_dir_all("/run/sshd").expect("mkdir /run/sshd");
        }
        let log = std::fs::File::create(d.join("sshd.log")).expect("sshd log");
        let child = Command::new(SSHD)
            .args(["-D", "-e", "-f"])
            .arg(d.join("sshd_config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start /usr/sbin/sshd (apt-get install openssh-server)");
        let mut sshd = Sshd {
            child,
            root: d.join("served"),
            dir,
            port,
            user,
            started_in: Duration::ZERO,
        };
        std::fs::create_dir(&sshd.root).expect("served dir");
        wait_for_port(&format!("127.0.0.1:{port}"), "sshd");
        sshd.started_in = begin.elapsed();
        sshd
    }

    /// The variables that make `ssh` (restic's and lockwarden's default
    /// command) reach this server: `PATH` with the shim first.
    pub fn env(&self) -> Vec<(String, String)> {
        let path = format!(
            "{}:{}",
            self.dir.path().join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        vec![("PATH".into(), path)]
    }

    /// `sftp://USER@127.0.0.1:PORT//PATH`, with `secret` as a password when
    /// given (restic ignores it; lockwarden must never show it).
    pub fn url(&self, path: &Path, secret: Option<&str>) -> String {
        let password = secret.map(|s| format!(":{s}")).unwrap_or_default();
        format!(
            "sftp://{}{password}@127.0.0.1:{}/{}",
            self.user,
            self.port,
            path.display()
        )
    }

    /// A new repository `name` under [`Sshd::root`] ([`TestRepo::create`],
    /// in the directory it serves) at `location` (which must name that
    /// directory).
    pub fn init_repo_at(&self, name: &str, location: impl FnOnce(&Path) -> String) -> TestRepo {
        let path = self.root.join(name);
        let mut repo = TestRepo::at(location(&path), path);
        repo.env = self.env();
        repo.create();
        repo
    }

    /// A repository `name` reached as `sftp://USER@127.0.0.1:PORT//...`.
    pub fn init_repo(&self, name: &str) -> TestRepo {
        self.init_repo_at(name, |path| self.url(path, None))
    }

    /// A complete ssh command line for `LOCKWARDEN_SFTP_COMMAND` (or
    /// restic's `-o sftp.command=`) that logs in with a key this server
    /// does not accept.
    pub fn stranger_command(&self) -> String {
        format!(
            "ssh -F {} -o BatchMode=yes -p {} {}@127.0.0.1 -s sftp",
            self.dir.path().join("stranger_config").display(),
            self.port,
            self.user
        )
    }

    /// What the server logged so far, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sshd.log")).unwrap_or_default()
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `ssh-keygen -q -N '' -t ed25519 -f path`.
fn keygen(path: &Path) {
    let status = Command::new("ssh-keygen")
        .args([
            "-q",
            "-N",
            "",
            "-t",
            "ed25519",
            "-C",
            "lockwarden-test",
            "-f",
        ])
        .arg(path)
        .stdin(Stdio::null())
        .status()
        .expect("ssh-keygen (apt-get install openssh-client)");
    assert!(status.success(), "ssh-keygen failed");
}

/// The name of the user running the tests.
fn current_user() -> String {
    let out = Command::new("id").arg("-un").output().expect("id -un");
    let user = String::from_utf8(out.stdout).expect("utf-8 user name");
    user.trim().to_owned()
}

/// `bin/ssh`: the real ssh with the test's client configuration.
fn write_shim(dir: &Path) {
    let real = Command::new("sh")
        .args(["-c", "command -v ssh"])
        .output()
        .expect("sh");
    let real = String::from_utf8(real.stdout).expect("utf-8");
    assert!(
        !real.trim().is_empty(),
        "no ssh (apt-get install openssh-client)"
    );
    let bin = dir.join("bin");
    std::fs::create_dir(&bin).expect("shim dir");
    let shim = bin.join("ssh");
    std::fs::write(
        &shim,
        format!(
            "#!/bin/sh\nexec {} -F {} \"$@\"\n",
            real.trim(),
            dir.join("ssh_config").display()
        ),
    )
    .expect("write shim");
    std::fs::set_permissions(&shim, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod shim");
}
