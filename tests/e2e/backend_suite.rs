//! The backend conformance suite (`lockwarden_tests::backend_suite`) run
//! against every real backend: one test per backend, one line per case in
//! its output (`backend-suite | <backend> | <case> | <outcome>`).

use lockwarden_tests::backend_suite::{Storage, run};
use lockwarden_tests::cloud::Store;

#[test]
fn local() {
    run("local", Storage::local);
}

#[test]
fn rest() {
    run("rest", Storage::rest);
}

#[test]
fn rclone() {
    run("rclone", Storage::rclone);
}

#[test]
fn sftp() {
    run("sftp", Storage::sftp);
}

#[test]
fn s3() {
    run("s3", || Storage::cloud(Store::S3));
}

#[test]
fn azure() {
    run("azure", || Storage::cloud(Store::Azure));
}

#[test]
fn gs() {
    run("gs", || Storage::cloud(Store::Gcs));
}
