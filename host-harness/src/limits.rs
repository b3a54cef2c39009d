//! How much of any outside input lockwarden reads: every bound on the size
//! or count of what it reads is here (bounds derived from these sit beside
//! their use; timeouts are settings). restic's own files are a few hundred
//! bytes; these bounds are far above anything restic writes and far below
//! what could exhaust a machine. SECURITY.md has the table.

/// A lock file (restic writes about 200 bytes). A larger one is reported as
/// unreadable with its size.
pub const LOCK_FILE: u64 = 64 * 1024;
/// A lock's JSON once decompressed (restic's are about 150 bytes).
pub const LOCK_JSON: usize = 64 * 1024;
/// Key files tried, at most (as restic).
pub const KEYS: usize = 20;
/// A key file (about 450 bytes).
pub const KEY_FILE: u64 = 64 * 1024;
/// The repository's `config` (about 250 bytes).
pub const CONFIG_FILE: u64 = 64 * 1024;
/// A password, from a file or a command's output.
pub const PASSWORD: u64 = 64 * 1024;
/// A credentials or token file of an object store (`AWS_WEB_IDENTITY_TOKEN_FILE`,
/// a service account's JSON).
pub const CREDENTIALS_FILE: u64 = 64 * 1024;
/// The first-seen state file: at most [`LISTING_ENTRIES`] ids (about 10 MiB).
pub const FIRST_SEEN_STATE: u64 = 32 * 1024 * 1024;
/// The head of a request to the metrics endpoint.
pub const METRICS_REQUEST_HEAD: u64 = 8 * 1024;
/// What a policy may write to stderr (a panic message fits easily).
pub const POLICY_STDERR: usize = 16 * 1024;
/// Log lines one policy evaluation keeps, and the bytes of each.
pub const POLICY_LOG_LINES: usize = 1000;
/// See [`POLICY_LOG_LINES`].
pub const POLICY_LOG_LINE: usize = 1024;
/// The longest rule name a verdict may give, in bytes: a rule is a name
/// (`expired`, `host-gone`); a longer one makes the verdicts an error.
pub const POLICY_RULE: usize = 128;
/// Where a verdict's reason, or a policy's error message, is cut (bytes).
pub const POLICY_REASON: usize = 4096;
/// A repository file (`--repository-file`).
pub const REPOSITORY_FILE: u64 = 64 * 1024;
/// A policy component (the default policy is about 200 KiB).
pub const POLICY: u64 = 64 * 1024 * 1024;
/// A recorded request for `policy eval` or `policy bench`.
pub const REQUEST: u64 = 64 * 1024 * 1024;
/// A host inventory (a PodList of a large cluster is tens of MiB).
pub const INVENTORY: u64 = 128 * 1024 * 1024;
/// One answer of the Kubernetes API (a page of 500 pods is about 5 MiB; the
/// API holds no object over about 1.5 MiB).
pub const KUBERNETES_RESPONSE: usize = 32 * 1024 * 1024;
/// Items of one Kubernetes list, over all its pages: more is an error.
pub const KUBERNETES_ITEMS: usize = 100_000;
/// The most bytes one event of a watch may hold (a pod; the API holds no
/// object over about 1.5 MiB).
pub const KUBERNETES_EVENT: usize = 4 * 1024 * 1024;
/// Bytes of one Kubernetes list, over all its pages (as a host inventory
/// file may be): more is an error.
pub const KUBERNETES_LIST: usize = 128 * 1024 * 1024;
/// Repositories one `watch` discovers and watches at most (and a thread
/// each for their notifications), shared fairly between namespaces
/// (watch/fair_share.rs); watch.toml's `max_repositories` may lower it.
pub const DISCOVERED_REPOSITORIES: usize = 1000;
/// The threads of `watch` that check repositories, each taking the one due
/// first: a check waiting on a slow or unreachable store (each call has its
/// timeout) holds one, the others go on.
pub const WATCH_WORKERS: usize = 32;
/// The watch configuration.
pub const WATCH_CONFIG: u64 = 1024 * 1024;
/// A REST listing of `locks/` or `keys/` (100,000 entries are about 10 MiB).
pub const LISTING_BODY: u64 = 16 * 1024 * 1024;
/// Entries in `locks/`: more is refused as an error (nothing removed).
pub const LISTING_ENTRIES: usize = 100_000;
/// What is kept of an external command's stderr for an error message.
pub const COMMAND_STDERR: u64 = 4 * 1024;
/// `/etc/passwd`, read to name the user in `hold`'s lock.
pub const PASSWD_FILE: u64 = 16 * 1024 * 1024;
/// A lock's hostname and username, in bytes (Linux allows 64 for a hostname,
/// DNS 253).
pub const LOCK_NAME_FIELD: usize = 255;
/// scrypt work one key file may ask for, as N·r·p (restic calibrates to about
/// 2^20; 2^23 is about 3 s here).
pub const SCRYPT_WORK_PER_KEY: u64 = 1 << 23;
/// A file of trusted certificates (`SSL_CERT_FILE`, or one in
/// `SSL_CERT_DIR`): Debian's whole bundle is about 220 KiB.
pub const CERT_FILE: u64 = 16 * 1024 * 1024;
/// Entries of `SSL_CERT_DIR` looked at (Debian's holds about 300).
pub const CERT_DIR_ENTRIES: usize = 10_000;
/// A repository's own CA bundle (a discovered repository's, from its
/// operator's object: PEM, Debian's whole bundle fits), and the
/// certificates in it. Each repository keeps its own in memory.
pub const REPOSITORY_CA: u64 = 256 * 1024;
/// Certificates in [`REPOSITORY_CA`] (Debian's bundle holds about 150).
pub const REPOSITORY_CA_CERTS: usize = 500;
/// scrypt tables (128·r·N bytes each, one per lane) held at once while a key
/// is derived; lanes beyond this wait their turn. At restic's usual N=32768,
/// r=8 that is 2 lanes at once: 1.5 to 2 times as fast as one after another,
/// for 32 MiB more peak memory than restic (BENCHMARKS.md).
pub const SCRYPT_MEMORY: u64 = 64 * 1024 * 1024;
/// scrypt work all key files together may ask for before lockwarden stops
/// trying (20 keys at restic's calibration fit).
pub const SCRYPT_WORK_TOTAL: u64 = 1 << 25;
/// A webhook's bearer token file (`webhook_token_file`).
pub const WEBHOOK_TOKEN: u64 = 64 * 1024;
/// What is kept of a webhook's answer: nothing is read beyond this.
pub const WEBHOOK_RESPONSE: u64 = 64 * 1024;
/// What a notification hook command may print (it is discarded); more and
/// it is stopped.
pub const HOOK_OUTPUT: u64 = 64 * 1024;
/// Notifications waiting to be sent, per repository and sink: more are
/// dropped (and counted), so a slow receiver never holds up a check.
pub const NOTIFY_QUEUE: usize = 64;
/// Threads sending notifications, shared by every repository of a watch:
/// as many sinks can hang at once before the others wait.
pub const NOTIFY_SENDERS: usize = 8;
/// Lock and file ids (and holders) a repository remembers having notified
/// about; pruned at every check to those still present.
pub const NOTIFIED_IDS: usize = LISTING_ENTRIES;
/// How long one check in `watch` may take, in its repository's `timeout`s
/// (4 minutes at the default 60 s, less than the default interval): no call
/// to the storage and no removal is begun after that, so a check ends at
/// most one call's timeout later, failed, whatever its storage does. A
/// repository too large to read in that time is read across checks (the
/// locks read are kept).
pub const CHECK_TIMEOUTS: u32 = 4;
/// Checks of one tenant (the namespace of a discovered repository's object)
/// in flight at once: a quarter of [`WATCH_WORKERS`], so that up to three
/// tenants whose storage never answers leave a quarter of the workers to
/// everyone else, and a tenant with many repositories still has eight at a
/// time. A `[[repository]]` of watch.toml belongs to no tenant and is not
/// held back.
pub const TENANT_WORKERS: usize = WATCH_WORKERS / 4;
/// Items of one namespace in one Kubernetes list: a quarter of
/// [`KUBERNETES_ITEMS`]. A namespace with more is left out of the list and
/// reported (its repositories are blind, its pods unknown), the others kept.
pub const KUBERNETES_NAMESPACE_ITEMS: usize = KUBERNETES_ITEMS / 4;
/// Bytes of one namespace's items in one Kubernetes list: a quarter of
/// [`KUBERNETES_LIST`] (about 3,000 pods of 10 KiB, or 22 objects of the
/// API's largest). Over it, as [`KUBERNETES_NAMESPACE_ITEMS`].
pub const KUBERNETES_NAMESPACE_LIST: usize = KUBERNETES_LIST / 4;
