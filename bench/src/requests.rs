//! What watching a repository on object storage costs in requests, per
//! store, counted by the test servers (moto, Azurite, fake-gcs-server):
//! `restic unlock` (Velero's loop, run every 5 minutes), `lockwarden
//! unlock`, and `lockwarden watch` per check.

use lockwarden_tests::cloud::Store;
use lockwarden_tests::cloud::cost::{Cost, measure};
use lockwarden_tests::lock_writer::{LockSpec, LockWriter, time_from_now};

/// Locks in the measured repository (young, on another host: kept by all).
pub const LOCKS: usize = 5;
/// Checks of `watch` counted after its first.
const CHECKS: usize = 5;

/// One store's costs.
pub struct StoreCost {
    pub store: Store,
    pub cost: Cost,
}

/// Measures every store.
pub fn per_store() -> Vec<StoreCost> {
    Store::ALL
        .into_iter()
        .map(|store| {
            let bucket = store.new_bucket();
            let repo = bucket.init_repo("repo");
            let writer = LockWriter::new(&repo);
            for n in 0..LOCKS {
                writer.write(LockSpec {
                    time: time_from_now(-300),
                    hostname: &format!("busy-{n}"),
                    ..LockSpec::default()
                });
            }
            StoreCost {
                store,
                cost: measure(&bucket, &repo, CHECKS),
            }
        })
        .collect()
}
