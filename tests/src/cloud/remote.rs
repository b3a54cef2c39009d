//! A directory in a cloud store reached through an rclone remote defined by
//! environment variables (`RCLONE_CONFIG_<NAME>_...`, with
//! `RCLONE_CONFIG=/dev/null`): how the tests list, read and write files in
//! S3, Azure and GCS repositories without lockwarden. Every call is bounded
//! by rclone's own timeouts and a deadline on the whole command.

use std::process::Command;
use std::time::Duration;

/// The longest any one rclone call may take.
const RCLONE_DEADLINE: Duration = Duration::from_secs(60);
/// The longest an upload of many files ([`RemoteDir::upload`]) may take.
const UPLOAD_DEADLINE: Duration = Duration::from_secs(600);
/// The most bytes an rclone call may print (a listing, a key file).
const RCLONE_OUTPUT_LIMIT: u64 = 16 << 20;
/// rclone's own limits: connect, idle I/O, and no retries that could
/// outlast the deadline.
const RCLONE_FLAGS: [&str; 8] = [
    "--contimeout",
    "5s",
    "--timeout",
    "20s",
    "--retries",
    "1",
    "--low-level-retries",
    "2",
];

/// A directory `path` (`remote:bucket/prefix`) of an rclone remote that
/// `env` defines.
#[derive(Debug, Clone)]
pub struct RemoteDir {
    /// `remote:bucket/prefix`, no trailing slash.
    pub path: String,
    /// The variables that define the remote (and `RCLONE_CONFIG=/dev/null`).
    pub env: Vec<(String, String)>,
}

impl RemoteDir {
    /// The subdirectory `name` (`locks`, say).
    pub fn join(&self, name: &str) -> RemoteDir {
        RemoteDir {
            path: format!("{}/{name}", self.path),
            env: self.env.clone(),
        }
    }

    /// The names of the files directly in this directory (none when it does
    /// not exist).
    pub fn list(&self) -> Vec<String> {
        let out = self.rclone(&["lsf", "--files-only", &self.path]);
        String::from_utf8_lossy(&out)
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// The content of the file `name`.
    pub fn read(&self, name: &str) -> Vec<u8> {
        self.rclone(&["cat", &format!("{}/{name}", self.path)])
    }

    /// Stores `bytes` as the file `name` (through a temporary file).
    pub fn write(&self, name: &str, bytes: &[u8]) {
        let file = tempfile::NamedTempFile::new().expect("temp file");
        std::fs::write(file.path(), bytes).expect("write temp file");
        let source = file.path().to_str().expect("utf-8 temp path");
        self.rclone(&["copyto", source, &format!("{}/{name}", self.path)]);
    }

    /// Copies the local directory `dir`'s tree into this directory, 32
    /// files at once, within [`UPLOAD_DEADLINE`].
    pub fn upload(&self, dir: &std::path::Path) {
        let source = dir.to_str().expect("utf-8 path");
        self.rclone_within(
            &[
                "copy",
                "--transfers",
                "32",
                "--checkers",
                "32",
                source,
                &self.path,
            ],
            UPLOAD_DEADLINE,
        );
    }

    /// Creates the bucket or container this directory is in.
    pub fn make_bucket(&self) {
        self.rclone(&["mkdir", &self.path]);
    }

    /// Removes the file `name`.
    pub fn remove(&self, name: &str) {
        self.rclone(&["deletefile", &format!("{}/{name}", self.path)]);
    }

    /// Runs rclone with `args`, returning its standard output; panics when
    /// it fails or runs past its deadline.
    fn rclone(&self, args: &[&str]) -> Vec<u8> {
        self.rclone_within(args, RCLONE_DEADLINE)
    }

    /// [`RemoteDir::rclone`] with a deadline of `deadline`.
    fn rclone_within(&self, args: &[&str], deadline: Duration) -> Vec<u8> {
        let mut command = Command::new("rclone");
        command
            .args(args)
            .args(RCLONE_FLAGS)
            .env("RCLONE_CONFIG", "/dev/null")
            // rclone's S3 client refuses a custom CA bundle for its plain
            // HTTP transport ("LoadCustomCABundleError"); the test servers
            // speak plain HTTP and need none.
            .env_remove("AWS_CA_BUNDLE")
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        match lockwarden::command::run(command, deadline, RCLONE_OUTPUT_LIMIT) {
            Ok(out) if out.status.success() => out.stdout,
            Ok(out) => panic!("rclone {args:?} failed: {}", out.stderr_line()),
            Err(e) => panic!("rclone {args:?}: {e}"),
        }
    }
}
