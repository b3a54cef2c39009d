//! The backend conformance suite (`lockwarden_tests::backend_suite`) run
//! against every real backend through the binary: one test per backend, one
//! line per case in its output (`backend-suite | <backend> | <case> |
//! <outcome>`). The promises that need neither the binary nor restic run in
//! process first (`host-harness/src/repo/backend/suite.rs`).
//!
//! Adding a backend: its constructor in `backend_suite/storage.rs`, and one
//! line here.

use lockwarden_tests::backend_suite::{Storage, run};
use lockwarden_tests::cloud::Store;

/// One `#[test]` per storage: `name => constructor`.
macro_rules! storages {
    ($($name:ident => $make:expr;)*) => {
        $(
            #[test]
            fn $name() {
                run(stringify!($name), $make);
            }
        )*
    };
}

storages! {
    local => Storage::local;
    rest => Storage::rest;
    rclone => Storage::rclone;
    sftp => Storage::sftp;
    s3 => || Storage::cloud(Store::S3);
    azure => || Storage::cloud(Store::Azure);
    gs => || Storage::cloud(Store::Gcs);
}
