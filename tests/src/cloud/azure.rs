//! Azure Blob Storage: Azurite's blob service (`azurite-blob`), one per test
//! process, in memory, with one account whose key is ours.

use std::sync::OnceLock;

use super::process::ServerProcess;
use super::{Bucket, Locations, Store, free_addr, installed, rclone_remote_env};
use crate::restic::TestRepo;

/// The storage account: Azurite's default name, which object_store's
/// emulator mode also assumes.
pub const AZURE_ACCOUNT: &str = "devstoreaccount1";
/// Azurite's well-known key, the account's first key: rclone 1.60's
/// emulator mode (restic's way in) always signs with it.
pub const AZURITE_WELL_KNOWN_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
/// The account key lockwarden gets: the account's second key, given to
/// Azurite in `AZURITE_ACCOUNTS` besides its well-known one, and
/// distinctive (base64 of
/// `lockwarden-azurite-key-0123456789abcdef-not-a-real-one`) so that tests
/// can assert it never appears in any output.
pub const AZURE_KEY: &str =
    "bG9ja3dhcmRlbi1henVyaXRlLWtleS0wMTIzNDU2Nzg5YWJjZGVmLW5vdC1hLXJlYWwtb25l";
/// The rclone remote's name.
const REMOTE: &str = "lwtestazure";

/// Azurite's blob service on 127.0.0.1.
pub struct AzureServer {
    process: ServerProcess,
    /// `http://127.0.0.1:<port>`: object_store's `AZURITE_BLOB_STORAGE_URL`.
    pub blob_url: String,
}

impl AzureServer {
    /// The server of this test process, started on first use.
    pub fn shared() -> &'static AzureServer {
        static SERVER: OnceLock<AzureServer> = OnceLock::new();
        SERVER.get_or_init(AzureServer::start)
    }

    fn start() -> AzureServer {
        let program = installed(
            std::path::PathBuf::from(crate::TESTS_DIR)
                .join("servers/azurite/node_modules/.bin/azurite-blob"),
            "Azurite",
        );
        let addr = free_addr();
        let (host, port) = addr.split_once(':').expect("host:port");
        let args = [
            "--blobHost",
            host,
            "--blobPort",
            port,
            "--inMemoryPersistence",
            "--skipApiVersionCheck",
            "--loose",
        ]
        .map(str::to_owned);
        let accounts = format!("{AZURE_ACCOUNT}:{AZURITE_WELL_KNOWN_KEY}:{AZURE_KEY}");
        let process = ServerProcess::start(
            "azurite-blob",
            addr.clone(),
            &program,
            &args,
            &[("AZURITE_ACCOUNTS", &accounts)],
        );
        AzureServer {
            blob_url: format!("http://{addr}"),
            process,
        }
    }

    /// The server's process (its start time, its request log).
    pub fn process(&self) -> &ServerProcess {
        &self.process
    }

    /// A fresh container.
    pub fn new_bucket(&'static self) -> Bucket {
        let endpoint = format!("{}/{AZURE_ACCOUNT}", self.blob_url);
        let remote_env = rclone_remote_env(
            REMOTE,
            &[
                ("type", "azureblob"),
                ("use_emulator", "true"),
                ("account", AZURE_ACCOUNT),
                ("key", AZURITE_WELL_KNOWN_KEY),
                ("endpoint", &endpoint),
            ],
        );
        Bucket::new(Store::Azure, &self.process, remote_env, REMOTE, locate)
    }
}

/// restic: `rclone:<remote>:container/prefix`; lockwarden:
/// `azure:container:/prefix` with the account, its key, and object_store's
/// emulator settings.
fn locate(bucket: &Bucket, prefix: &str, _repo: &TestRepo) -> Locations {
    let blob_url = format!("http://{}", bucket.addr());
    Locations {
        restic: format!("rclone:{REMOTE}:{}/{prefix}", bucket.name),
        lockwarden: format!("azure:{}:/{prefix}", bucket.name),
        env: [
            ("AZURE_ACCOUNT_NAME", AZURE_ACCOUNT),
            ("AZURE_ACCOUNT_KEY", AZURE_KEY),
            ("AZURE_STORAGE_USE_EMULATOR", "true"),
            ("AZURITE_BLOB_STORAGE_URL", &blob_url),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .into(),
    }
}
