//! The network backends under attack: inputs an adversary (or an accident)
//! controls, each of which must end within `--timeout` and print no secret.
//! The credential files that the storage clients read themselves (the token
//! files of workload identity, gcloud's application default credentials)
//! are the inputs here: a FIFO there blocks a plain `read_to_string`
//! forever, whatever deadline the request has.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use lockwarden_tests::adversary::{all_output, mkfifo};
use lockwarden_tests::guard::Guarded;
use lockwarden_tests::restic::free_port;
use lockwarden_tests::{Finished, lockwarden};

/// The `--timeout` every run here gets.
const TIMEOUT: &str = "2s";
/// How long a run may take before it counts as hung: the timeout, one retry
/// round and the start of the binary, with room for a loaded machine.
const HUNG_AFTER: Duration = Duration::from_secs(20);

/// `lockwarden check -r <location> --timeout 2s` in `dir`, with `HOME` in
/// `dir`, none of the storage variables of the environment, and `env`.
fn check_at(dir: &Path, location: &str, env: &[(&str, String)]) -> Command {
    let password = dir.join("password");
    std::fs::write(&password, "not-used").expect("write the password file");
    let mut command = lockwarden(&dir.join("cache"));
    command
        .args(["check", "-r", location, "-p"])
        .arg(&password)
        .args(["--timeout", TIMEOUT])
        .env("HOME", dir)
        .env_remove("RESTIC_REPOSITORY")
        .env_remove("RESTIC_PASSWORD");
    for (name, _) in std::env::vars() {
        if ["AWS_", "AZURE_", "GOOGLE_", "GCS_"]
            .iter()
            .any(|p| name.starts_with(p))
        {
            command.env_remove(name);
        }
    }
    command.envs(env.iter().map(|(k, v)| (*k, v.as_str())));
    command
}

/// Runs `command` and fails the test if it is still running after
/// [`HUNG_AFTER`] (it is then killed with its process group).
fn finishes_in_time(mut command: Command, what: &str) -> Finished {
    let started = Instant::now();
    let out = Guarded::spawn(&mut command)
        .wait_within(HUNG_AFTER)
        .unwrap_or_else(|out| {
            panic!("{what}: still running after {HUNG_AFTER:?} with --timeout {TIMEOUT}: {out:?}")
        });
    eprintln!("{what}: ended in {:?}", started.elapsed());
    out
}

/// An address on 127.0.0.1 where nothing listens.
fn nowhere() -> String {
    format!("127.0.0.1:{}", free_port())
}

/// EKS web identity: `AWS_WEB_IDENTITY_TOKEN_FILE` is read by the S3
/// client inside the request (a blocking read on the thread that waits for
/// the deadline). A FIFO there must be refused, not waited on forever.
#[test]
fn an_aws_web_identity_token_fifo_does_not_hang_s3() {
    let dir = tempfile::tempdir().expect("temp dir");
    let fifo = dir.path().join("token");
    mkfifo(&fifo);
    let env = [
        (
            "AWS_ROLE_ARN",
            "arn:aws:iam::123456789012:role/backup".to_owned(),
        ),
        ("AWS_WEB_IDENTITY_TOKEN_FILE", fifo.display().to_string()),
        ("AWS_ENDPOINT_URL_STS", format!("http://{}", nowhere())),
    ];
    let location = format!("s3:http://{}/bucket/repo", nowhere());
    let out = finishes_in_time(
        check_at(dir.path(), &location, &env),
        "s3 with a FIFO token",
    );
    assert_ne!(out.code, 0, "{out:?}");
    assert!(
        out.stderr.contains("AWS_WEB_IDENTITY_TOKEN_FILE"),
        "the message names the variable: {}",
        out.stderr
    );
}

/// AKS workload identity: `AZURE_FEDERATED_TOKEN_FILE`, read the same way.
#[test]
fn an_azure_federated_token_fifo_does_not_hang_azure() {
    let dir = tempfile::tempdir().expect("temp dir");
    let fifo = dir.path().join("token");
    mkfifo(&fifo);
    let env = [
        ("AZURE_ACCOUNT_NAME", "account".to_owned()),
        ("AZURE_CLIENT_ID", "client".to_owned()),
        ("AZURE_TENANT_ID", "tenant".to_owned()),
        ("AZURE_FEDERATED_TOKEN_FILE", fifo.display().to_string()),
        ("AZURE_ENDPOINT_SUFFIX", format!("{}.invalid", free_port())),
    ];
    let out = finishes_in_time(
        check_at(dir.path(), "azure:container:/repo", &env),
        "azure with a FIFO token",
    );
    assert_ne!(out.code, 0, "{out:?}");
    assert!(
        out.stderr.contains("AZURE_FEDERATED_TOKEN_FILE"),
        "the message names the variable: {}",
        out.stderr
    );
}

/// With no GOOGLE_* variable, the GCS client reads gcloud's application
/// default credentials from `$HOME` while the backend is built (before any
/// deadline applies).
#[test]
fn a_gcloud_credentials_fifo_does_not_hang_gs() {
    let dir = tempfile::tempdir().expect("temp dir");
    let gcloud = dir.path().join(".config/gcloud");
    std::fs::create_dir_all(&gcloud).expect("mkdir");
    mkfifo(&gcloud.join("application_default_credentials.json"));
    let out = finishes_in_time(
        check_at(dir.path(), "gs:bucket:/repo", &[]),
        "gs with a FIFO for gcloud's credentials",
    );
    assert_ne!(out.code, 0, "{out:?}");
    assert!(
        out.stderr.contains("application_default_credentials.json"),
        "the message names the file: {}",
        out.stderr
    );
}

/// A SAS URL in an rclone connection string (azureblob's `sas_url`) is a
/// credential: it must not show in what lockwarden prints about the
/// location.
#[test]
fn an_rclone_sas_url_is_never_printed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let secret = "sig=SASSIGNATURE0123456789";
    let location = format!(
        "rclone::azureblob,account=acct,sas_url='https://acct.blob.core.windows.net/c?sv=2022-11-02&{secret}':c/repo"
    );
    let mut command = check_at(dir.path(), &location, &[]);
    // An rclone that cannot start: the message names the location.
    command.env("LOCKWARDEN_RCLONE_PROGRAM", dir.path().join("no-rclone"));
    let out = finishes_in_time(command, "rclone with a SAS URL");
    assert_ne!(out.code, 0, "{out:?}");
    let all = all_output(&out);
    assert!(all.contains("rclone:"), "the location is named: {all}");
    assert!(!all.contains("SASSIGNATURE"), "a secret was printed: {all}");
}

/// The remote is rclone's last argument: one that starts with `-` is an
/// rclone option, and `--log-file=PATH` makes rclone write a file anywhere
/// before it notices that the remote is missing.
#[test]
fn an_rclone_remote_that_is_an_option_writes_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let written = dir.path().join("written-by-rclone");
    let location = format!("rclone:--log-file={}", written.display());
    let out = finishes_in_time(
        check_at(dir.path(), &location, &[]),
        "rclone with an option for a remote",
    );
    assert_ne!(out.code, 0, "{out:?}");
    assert!(
        !written.exists(),
        "rclone wrote {} (the location was read as an option): {out:?}",
        written.display()
    );
}

/// On AWS the bucket becomes part of the host name. A `#` in it made the
/// rest of the URL a fragment, so `s3:http://s3.amazonaws.com/HOST#/repo`
/// sent every signed request, `x-amz-security-token` included, to HOST.
#[test]
fn a_bucket_name_cannot_send_the_credentials_to_another_host() {
    use std::net::TcpListener;
    let dir = tempfile::tempdir().expect("temp dir");
    let listener = TcpListener::bind("127.0.0.1:0").expect("listen");
    listener.set_nonblocking(true).expect("non-blocking");
    let port = listener.local_addr().expect("address").port();
    let token = "SESSION-TOKEN-MARKER-7f3a";
    let env = [
        ("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE".to_owned()),
        ("AWS_SECRET_ACCESS_KEY", "not-a-real-secret".to_owned()),
        ("AWS_SESSION_TOKEN", token.to_owned()),
    ];
    let location = format!("s3:http://s3.amazonaws.com/127.0.0.1:{port}#/repo");
    let out = finishes_in_time(check_at(dir.path(), &location, &env), "s3 with a # bucket");
    assert_ne!(out.code, 0, "{out:?}");
    assert!(!all_output(&out).contains(token), "{out:?}");
    match listener.accept() {
        Ok((mut stream, _)) => {
            use std::io::Read as _;
            stream
                .set_read_timeout(Some(Duration::from_secs(2)))
                .expect("timeout");
            let mut request = vec![0u8; 8192];
            let n = stream.read(&mut request).unwrap_or(0);
            panic!(
                "lockwarden connected to 127.0.0.1:{port}, which the location only pretended to name: {}",
                String::from_utf8_lossy(&request[..n])
            );
        }
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock, "{e}"),
    }
}

/// An ssh command that closes its stdout and lives on: the SFTP handshake
/// fails at once, then lockwarden waited for the child's last words as long
/// again as --timeout (up to 5 s) after the deadline.
#[test]
fn an_ssh_that_closes_its_stdout_and_lingers_ends_within_the_timeout() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut command = check_at(dir.path(), "sftp:host:/repo", &[]);
    command.env(
        "LOCKWARDEN_SFTP_COMMAND",
        "sh -c 'sleep 1.5; exec >&-; exec sleep 30'",
    );
    // Ended by the hang guard's limit, long before the lingering child
    // would end (tests assert no finer timing: a loaded machine varies).
    let out = finishes_in_time(command, "sftp with a lingering ssh");
    assert_ne!(out.code, 0, "{out:?}");
}
