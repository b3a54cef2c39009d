//! The container image `make image` builds (`scripts/image.sh`): pushed to a
//! real registry with the script's own `push`, pulled back by digest,
//! unpacked, and run on a real restic repository. `make test` builds the
//! image first; `LOCKWARDEN_IMAGE_LAYOUT` points at another layout.

use std::path::{Path, PathBuf};
use std::process::Command;

use lockwarden_tests::guard::finish_guarded;
use lockwarden_tests::lock_writer::{LockSpec, LockWriter, time_from_now};
use lockwarden_tests::registry::Registry;
use lockwarden_tests::restic::{PASSWORD, TestRepo};
use lockwarden_tests::{Finished, lockwarden};
use serde_json::Value;

/// The user the image runs as.
const IMAGE_USER: u64 = 65532;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The layout `make image` wrote.
fn layout() -> PathBuf {
    let layout = std::env::var_os("LOCKWARDEN_IMAGE_LAYOUT")
        .map_or_else(|| workspace().join("target/image"), PathBuf::from);
    assert!(
        layout.join("index.json").is_file(),
        "no OCI layout at {}: run `make image` first (`make test` does)",
        layout.display()
    );
    layout
}

fn run(command: &mut Command) -> Finished {
    let out = finish_guarded(command);
    assert_eq!(out.code, 0, "{command:?}: {out:?}");
    out
}

#[test]
fn the_image_pulled_by_digest_runs_lockwarden_on_a_real_repository() {
    let layout = layout();
    let dir = tempfile::tempdir().expect("temp dir");
    let registry = Registry::start(&dir.path().join("registry"));

    // Pushed as `make image IMAGE=...` pushes it.
    let image = format!("{}/team/lockwarden:candidate", registry.host);
    let pushed = run(Command::new(workspace().join("scripts/image.sh"))
        .args(["push"])
        .arg(&layout)
        .arg(&image)
        .env("IMAGE_TLS_VERIFY", "false"));
    let by_digest = pushed.stdout.trim().to_owned();
    let digest = by_digest
        .strip_prefix(&format!("{}/team/lockwarden@", registry.host))
        .unwrap_or_else(|| panic!("push prints IMAGE@digest: {pushed:?}"));
    let (manifest, served) = registry.manifest("team/lockwarden", digest);
    assert_eq!(served, digest);
    assert_eq!(
        manifest["config"]["mediaType"], "application/vnd.oci.image.config.v1+json",
        "{manifest:#}"
    );
    assert_eq!(
        manifest["layers"].as_array().map(Vec::len),
        Some(1),
        "{manifest:#}"
    );

    // Pulled back by digest, not by tag, and unpacked as a runtime would.
    let pulled = dir.path().join("pulled");
    run(Command::new("skopeo")
        .args(["copy", "--quiet", "--src-tls-verify=false"])
        .arg(format!("docker://{by_digest}"))
        .arg(format!("oci:{}:pulled", pulled.display())));
    let bundle = dir.path().join("bundle");
    run(Command::new("umoci")
        .args(["unpack", "--rootless", "--image"])
        .arg(format!("{}:pulled", pulled.display()))
        .arg(&bundle));
    let rootfs = bundle.join("rootfs");
    let spec: Value =
        serde_json::from_slice(&std::fs::read(bundle.join("config.json")).expect("runtime config"))
            .expect("JSON");
    let process = &spec["process"];
    assert_eq!(process["args"][0], "/usr/bin/lockwarden", "{process:#}");
    assert_eq!(process["user"]["uid"], IMAGE_USER, "{process:#}");
    assert_eq!(process["user"]["gid"], IMAGE_USER, "{process:#}");
    let env: Vec<&str> = process["env"]
        .as_array()
        .expect("env")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(env.contains(&"XDG_CACHE_HOME=/tmp/cache"), "{env:?}");

    // lockwarden in it is static and is this checkout's.
    let bin = rootfs.join("usr/bin/lockwarden");
    let headers = run(Command::new("readelf").arg("-l").arg(&bin));
    assert!(
        !headers.stdout.contains("INTERP"),
        "the image's lockwarden is dynamically linked:\n{}",
        headers.stdout
    );
    let ours = run(lockwarden(dir.path()).arg("--version"));
    let theirs = run(Command::new(&bin).arg("--version"));
    assert_eq!(
        theirs.stdout, ours.stdout,
        "the image was built from another commit: run `make image`"
    );

    // On a real repository: the stale lock goes, the fresh one stays.
    let repo = TestRepo::init_local();
    let writer = LockWriter::new(&repo);
    let stale = writer.write(LockSpec {
        time: time_from_now(-40 * 60),
        hostname: "evicted-pod",
        ..LockSpec::default()
    });
    let fresh = writer.write(LockSpec::default());
    let out = run(Command::new(&bin)
        .args(["unlock", "-r", &repo.location, "-p"])
        .arg(repo.password_file())
        .env("LOCKWARDEN_CACHE_DIR", dir.path().join("cache")));
    assert!(
        out.stdout.contains(&format!("removed {}", &stale[..8])),
        "{out:?}"
    );
    assert_eq!(repo.lock_ids(), [fresh].into_iter().collect());

    in_the_image_as_its_user(&rootfs, &repo);
}

/// As root: inside the unpacked root filesystem, as the image's user, with
/// the image's environment, `lockwarden run` starts the image's restic (with
/// the image's own glibc) on a repository copied in, and kubectl starts.
fn in_the_image_as_its_user(rootfs: &Path, repo: &TestRepo) {
    if !rustix::process::geteuid().is_root() {
        eprintln!("not root: the image is not entered with chroot");
        return;
    }
    let state = rootfs.join("state");
    run(Command::new("cp")
        .arg("-a")
        .arg(&repo.path)
        .arg(state.join("repo")));
    std::fs::write(state.join("password"), PASSWORD).expect("password file");
    run(Command::new("chown")
        .args(["-R", &format!("{IMAGE_USER}:{IMAGE_USER}")])
        .arg(&state));
    let tmp = rootfs.join("tmp");
    let in_image = |args: &[&str]| {
        let mut command = Command::new("/usr/sbin/chroot");
        command
            .arg(format!("--userspec={IMAGE_USER}:{IMAGE_USER}"))
            .arg(rootfs)
            .args(args)
            .env_clear()
            .env("PATH", "/usr/bin")
            .env("HOME", "/home/lockwarden")
            .env("XDG_CACHE_HOME", "/tmp/cache");
        run(&mut command)
    };
    assert!(tmp.is_dir());
    let out = in_image(&[
        "/usr/bin/lockwarden",
        "run",
        "-r",
        "/state/repo",
        "-p",
        "/state/password",
        "--",
        "restic",
        "cat",
        "config",
    ]);
    assert!(out.stdout.contains("\"chunker_polynomial\""), "{out:?}");
    let out = in_image(&["/usr/bin/kubectl", "version", "--client"]);
    assert!(out.stdout.contains("Client Version"), "{out:?}");
}
