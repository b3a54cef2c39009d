//! Byte-level access to a repository's files. Every backend implements
//! [`Backend`] in one file and registers in [`SCHEMES`]; nothing else in
//! lockwarden names a backend. Only `config`, `keys/` and `locks/` are ever
//! read (the other directories are only looked at by name, to tell a
//! `locks/` that aliases them), and only `locks/<64 hex>` can be deleted.
//!
//! Adding a backend: write `foo.rs` with a `pub const SCHEME: Scheme` and
//! `impl Backend`, add `mod foo;` and `foo::SCHEME` to [`SCHEMES`] (before
//! the restic-binary entry that served `foo:` until then, if any), and add
//! the real storage to the backend suite every backend passes, hostile
//! cases included (`tests/src/backend_suite/`; the storages this process
//! can make in memory run the in-process table, `suite/`, as well).

mod azure;
mod cloud;
#[cfg(test)]
mod faulty;
mod gs;
pub(crate) mod io_runtime;
mod local;
pub(crate) mod location_text;
#[cfg(test)]
mod memory;
mod rclone;
mod rest;
mod restic_cli;
pub(crate) mod s3;
mod sftp;
#[cfg(test)]
mod suite;

use std::collections::BTreeMap;
use std::time::Duration;

#[cfg(test)]
pub use faulty::{Fault, FaultyBackend, Operation};
#[cfg(test)]
pub use memory::MemoryBackend;
pub use rest::parse_listing;

use super::Password;
use crate::tls::Tls;
use location_text::LocationError;

/// Every backend lockwarden knows, by the `scheme:` that starts a location.
/// The first match wins; a location that matches none is a local path, as
/// in restic.
pub const SCHEMES: &[Scheme] = &[
    local::SCHEME,
    rest::SCHEME,
    sftp::SCHEME,
    s3::SCHEME,
    restic_cli::scheme("b2"),
    azure::SCHEME,
    gs::SCHEME,
    restic_cli::scheme("swift"),
    rclone::SCHEME,
];

/// What a location without a known scheme is.
pub const FALLBACK: &Scheme = &local::SCHEME;

/// One kind of backend: how its locations are written and how it is opened.
#[derive(Debug)]
pub struct Scheme {
    /// The backend's name, as the contract's `repository.backend` has it,
    /// and the prefix (`NAME:`) of its locations.
    pub name: &'static str,
    /// Checks a location of this scheme (the whole string, prefix included)
    /// and returns it in the form [`Scheme::open`] takes. The result may hold
    /// credentials: it is never shown (see [`super::location`]).
    pub parse: fn(&str) -> Result<String, LocationError>,
    /// What may be shown of a location [`Scheme::parse`] accepted (in
    /// messages, reports, logs, metrics), its secrets replaced by `***`.
    pub redact: fn(&str) -> String,
    /// Opens the backend at a location [`Scheme::parse`] accepted.
    pub open: fn(&Target<'_>) -> Result<Box<dyn Backend>, BackendError>,
    /// Whether the backends it opens remove and write lock files
    /// ([`Capabilities::modify`]), known before anything is opened, so
    /// that a command that needs it refuses at once.
    pub modifies: bool,
}

/// Where a backend reads its storage's variables (`AWS_ACCESS_KEY_ID`,
/// `AZURE_ACCOUNT_KEY`, ...): the process environment, each name behind an
/// optional prefix (as restic reads `RESTIC_FROM_`-prefixed variables for a
/// second repository), so that one `watch` holds other credentials per
/// repository; or values given whole (a discovered repository's, from the
/// Secrets its operator names). With a prefix or given values, only the
/// repository's own are read.
///
/// With them goes how the storage is reached over TLS ([`Tls`]: a CA of
/// the repository's own, or no verification), as restic is handed it with
/// its variables (`RESTIC_CACERT`, `--cacert`, `--insecure-tls`): every
/// backend is given both ([`Target::variables`]), and a repository whose
/// TLS changes is another repository (the [`Debug`] form shows the CA's
/// digest).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Variables {
    source: VariableSource,
    tls: Tls,
}

#[derive(Clone, PartialEq, Eq)]
enum VariableSource {
    /// The environment, names behind this prefix.
    Environment(String),
    /// These values, and no others.
    Given(BTreeMap<String, String>),
}

impl Default for VariableSource {
    fn default() -> Self {
        VariableSource::Environment(String::new())
    }
}

/// Names only: the values are credentials (and the TLS setting by its
/// digest).
impl std::fmt::Debug for Variables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.source {
            VariableSource::Environment(prefix) => write!(f, "Variables(environment {prefix:?}")?,
            VariableSource::Given(values) => {
                write!(f, "Variables(given {:?}", values.keys().collect::<Vec<_>>())?;
            }
        }
        match &self.tls {
            Tls::Default => f.write_str(")"),
            tls => write!(f, ", TLS {tls:?})"),
        }
    }
}

impl Variables {
    /// Variables read as `<prefix><NAME>`.
    pub fn prefixed(prefix: &str) -> Variables {
        Variables {
            source: VariableSource::Environment(prefix.to_owned()),
            tls: Tls::Default,
        }
    }

    /// These values, of the names in [`Variables::GIVEN`] (the others are
    /// left out); the environment is not read.
    pub fn given(mut values: BTreeMap<String, String>) -> Variables {
        values.retain(|name, _| Variables::GIVEN.iter().any(|(given, _)| given == name));
        Variables {
            source: VariableSource::Given(values),
            tls: Tls::Default,
        }
    }

    /// These variables, with the storage reached over TLS as `tls` says.
    pub fn with_tls(self, tls: Tls) -> Variables {
        Variables { tls, ..self }
    }

    /// How the storage is reached over TLS.
    pub fn tls(&self) -> &Tls {
        &self.tls
    }

    /// The names values may be given for ([`Variables::given`]), and
    /// whether each is a secret. Values only: never a file, a URL or a
    /// profile to look up, which would have lockwarden read a file of its
    /// own or send its own credentials where whoever wrote the values
    /// chose (a discovered repository's come from a Secret in someone
    /// else's namespace).
    pub const GIVEN: [(&'static str, bool); 10] = [
        ("AWS_ACCESS_KEY_ID", false),
        ("AWS_SECRET_ACCESS_KEY", true),
        ("AWS_SESSION_TOKEN", true),
        ("AWS_DEFAULT_REGION", false),
        ("AWS_REGION", false),
        ("AZURE_ACCOUNT_NAME", false),
        ("AZURE_ACCOUNT_KEY", true),
        ("AZURE_ACCOUNT_SAS", true),
        ("AZURE_ENDPOINT_SUFFIX", false),
        ("GOOGLE_ACCESS_TOKEN", true),
    ];

    /// Whether only the repository's own variables are read (behind a
    /// prefix, or given): then no default that is not the repository's
    /// own, such as `~/.aws/credentials`, applies.
    pub fn is_prefixed(&self) -> bool {
        match &self.source {
            VariableSource::Environment(prefix) => !prefix.is_empty(),
            VariableSource::Given(_) => true,
        }
    }

    /// Whether the values were given whole (a discovered repository's):
    /// then nothing of lockwarden's environment applies to reaching its
    /// storage, its proxy settings (`HTTPS_PROXY`, ...) included, so that
    /// every request goes straight to the host its object names.
    pub fn are_given(&self) -> bool {
        matches!(self.source, VariableSource::Given(_))
    }

    /// The value of `name`, when set and not empty.
    pub fn get(&self, name: &str) -> Option<String> {
        match &self.source {
            VariableSource::Environment(prefix) => std::env::var(format!("{prefix}{name}")).ok(),
            VariableSource::Given(values) => values.get(name).cloned(),
        }
        .filter(|v| !v.is_empty())
    }

    /// The given values that are secrets (none for the environment's):
    /// what a message must never show.
    pub fn secrets(&self) -> Vec<String> {
        let VariableSource::Given(values) = &self.source else {
            return Vec::new();
        };
        let secret = |name: &str| Variables::GIVEN.iter().any(|(n, s)| *n == name && *s);
        values
            .iter()
            .filter(|(name, value)| secret(name) && !value.is_empty())
            .map(|(_, value)| value.clone())
            .collect()
    }
}

/// Why a storage's JSON answer did not parse, in words of our own: the
/// kind of fault and where it is, never serde's message, which quotes
/// what it met (`invalid type: string "..."`): an answer is the storage's
/// text, and a discovered repository's storage is whatever host a tenant
/// named.
pub(crate) fn unparsed(e: &serde_json::Error) -> String {
    let what = match e.classify() {
        serde_json::error::Category::Io => "could not be read",
        serde_json::error::Category::Syntax => "is not JSON",
        serde_json::error::Category::Data => "is JSON of another shape",
        serde_json::error::Category::Eof => "ends early",
    };
    format!(
        "the answer {what} (line {}, column {})",
        e.line(),
        e.column()
    )
}

/// What opening a backend is given.
pub struct Target<'a> {
    /// The location, as [`Scheme::parse`] returned it.
    pub location: &'a str,
    /// The location with credentials hidden, for messages.
    pub shown: &'a str,
    /// The repository password (for backends that hand it to restic).
    pub password: &'a Password,
    /// How long one request or command may take.
    pub timeout: Duration,
    /// Where the storage's variables are read.
    pub variables: &'a Variables,
}

/// The kinds of file lockwarden reads, and the directories it looks into
/// to tell a lock file from another restic file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// `config` (the name is ignored).
    Config,
    /// `keys/<id>`.
    Key,
    /// `locks/<id>`.
    Lock,
    /// `snapshots/<id>`: only ever looked at ([`Backend::stat`]).
    Snapshot,
    /// `index/<id>`: only ever looked at ([`Backend::stat`]).
    Index,
    /// `data/<first two digits>/<id>`: only ever looked at
    /// ([`Backend::stat`]).
    Data,
}

impl Kind {
    /// The kinds of the repository's other directories, where a file under
    /// `locks/` must not also be (see [`crate::repo::Repository::read_locks`]).
    pub const OTHERS: [Kind; 4] = [Kind::Key, Kind::Snapshot, Kind::Index, Kind::Data];

    /// The directory holding files of this kind.
    pub fn dir(self) -> &'static str {
        match self {
            Kind::Config => "",
            Kind::Key => "keys",
            Kind::Lock => "locks",
            Kind::Snapshot => "snapshots",
            Kind::Index => "index",
            Kind::Data => "data",
        }
    }

    /// The most bytes a file of this kind may hold (`crate::limits`); 0 for
    /// the kinds lockwarden never reads.
    pub fn limit(self) -> u64 {
        match self {
            Kind::Config => crate::limits::CONFIG_FILE,
            Kind::Key => crate::limits::KEY_FILE,
            Kind::Lock => crate::limits::LOCK_FILE,
            Kind::Snapshot | Kind::Index | Kind::Data => 0,
        }
    }
}

/// What an entry of the storage is, as the storage says (links are never
/// followed to say it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file; on a store that holds nothing else (an object store,
    /// a REST server), every object.
    File,
    /// A directory.
    Directory,
    /// Something else, named: `a symbolic link`, `a FIFO`, ...
    Other(&'static str),
    /// The storage does not say.
    Unknown,
}

impl EntryKind {
    /// The kind a Unix file mode's type bits name; [`EntryKind::Unknown`]
    /// without a mode.
    pub fn of_mode(mode: Option<u32>) -> EntryKind {
        const TYPE_MASK: u32 = 0o170_000;
        match mode.map(|m| m & TYPE_MASK) {
            Some(0o100_000) => EntryKind::File,
            Some(0o040_000) => EntryKind::Directory,
            Some(0o120_000) => EntryKind::Other("a symbolic link"),
            Some(0o010_000) => EntryKind::Other("a FIFO"),
            Some(0o140_000) => EntryKind::Other("a socket"),
            Some(0o020_000) => EntryKind::Other("a character device"),
            Some(0o060_000) => EntryKind::Other("a block device"),
            Some(_) => EntryKind::Other("not a regular file"),
            None => EntryKind::Unknown,
        }
    }

    /// How it is named in messages.
    pub fn describe(self) -> &'static str {
        match self {
            EntryKind::File => "a regular file",
            EntryKind::Directory => "a directory",
            EntryKind::Other(what) => what,
            EntryKind::Unknown => "of a kind the storage does not say",
        }
    }
}

/// A file from a listing, or one looked at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileInfo {
    /// The file name (an id).
    pub name: String,
    /// What it is; only a [`EntryKind::File`] is ever read or removed.
    pub entry: EntryKind,
    /// Its size in bytes, when the storage says without extra work.
    pub size: Option<u64>,
    /// When the storage last wrote it (ns since the epoch, the storage's
    /// clock), when the storage says.
    pub modified: Option<i64>,
}

impl FileInfo {
    /// A regular file (an object) with nothing else known yet.
    pub fn file(name: impl Into<String>) -> FileInfo {
        FileInfo {
            name: name.into(),
            entry: EntryKind::File,
            size: None,
            modified: None,
        }
    }

    /// A listed name the storage says nothing else about, not even its kind.
    pub fn unknown(name: impl Into<String>) -> FileInfo {
        FileInfo {
            entry: EntryKind::Unknown,
            ..FileInfo::file(name)
        }
    }
}

/// What a backend can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// It changes the `locks/` directory: deletes one lock file by id
    /// ([`Backend::remove`]) and writes one ([`Backend::write_lock`]).
    pub modify: bool,
    /// What [`Backend::read`] returns.
    pub contents: Contents,
    /// How many reads may run at once.
    pub parallel_reads: usize,
}

impl Capabilities {
    /// A backend lockwarden speaks natively: it reads the stored bytes,
    /// removes by id, and reads 8 files at once.
    pub const NATIVE: Capabilities = Capabilities {
        modify: true,
        contents: Contents::Encrypted,
        parallel_reads: 8,
    };
}

/// What a backend's reads return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contents {
    /// The stored bytes; lockwarden decrypts them with the master key.
    Encrypted,
    /// The plaintext (restic decrypted it); no key is needed or read.
    Decrypted,
}

/// What a delete did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    /// The file was deleted now.
    Removed,
    /// The file was already gone (its holder may have refreshed it away).
    AlreadyGone,
}

/// Why a backend operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    /// The file or directory does not exist.
    #[error("{0} does not exist")]
    NotFound(String),
    /// The storage says there is no repository (in its own words).
    #[error("{0}")]
    NoRepository(String),
    /// The storage cannot be reached.
    #[error("{0}")]
    Unreachable(String),
    /// The storage answered, but its TLS certificate was refused (or the
    /// handshake failed): the message says why and what it was checked
    /// against ([`crate::tls::Tls::trusted`]).
    #[error("{0}")]
    Untrusted(String),
    /// The storage refused the credentials (or they allow too little).
    #[error("{0}")]
    Denied(String),
    /// The password opens no key (a backend that decrypts itself says so).
    #[error("wrong password")]
    WrongPassword,
    /// A file or a listing is larger than its kind allows; it was not read
    /// (a listing: not past the limit).
    #[error("is larger than the {limit} bytes lockwarden reads of it (at least {size} bytes)")]
    TooLarge {
        /// Its size (at least this much when the server did not say).
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// A directory lists more files than lockwarden handles.
    #[error("{dir} holds more than {limit} files; lockwarden judges none of them")]
    TooMany {
        /// The directory.
        dir: String,
        /// The limit.
        limit: usize,
    },
    /// The entry is not a regular file, so it was neither read nor removed.
    #[error("{path} is {} now, not a regular file; lockwarden reads and removes only regular files", .entry.describe())]
    NotAFile {
        /// The file, for messages.
        path: String,
        /// What it is.
        entry: EntryKind,
    },
    /// The backend cannot do this (see [`Capabilities`]).
    #[error("the {backend} backend cannot {operation}")]
    Unsupported {
        /// The backend's name.
        backend: &'static str,
        /// What it cannot do.
        operation: &'static str,
    },
    /// Anything else, said in full.
    #[error("{0}")]
    Other(String),
}

/// Access to one repository's storage: what every backend promises, stated
/// once here and proven for each by the backend suite (`suite/` in
/// process, `tests/src/backend_suite/` on the real storages). What may be removed, and what a failed
/// removal means, is decided above the backends
/// ([`crate::repo::Repository`]), from the facts these methods supply.
pub trait Backend: Send + Sync {
    /// The backend's name ([`Scheme::name`]).
    fn name(&self) -> &'static str;
    /// What it can do.
    fn capabilities(&self) -> Capabilities;
    /// Lists the files of a kind (`Key` or `Lock`), each name a restic id,
    /// each once, at most [`crate::limits::LISTING_ENTRIES`] of them, each
    /// with its [`EntryKind`] as the storage says it without following a
    /// link ([`EntryKind::Unknown`] where it cannot tell). Names that are
    /// not restic ids, however odd, are left out without failing the
    /// listing. A missing directory is [`BackendError::NotFound`].
    fn list(&self, kind: Kind) -> Result<Vec<FileInfo>, BackendError>;
    /// Reads a whole regular file, at most [`Kind::limit`] bytes; anything
    /// else at that name is [`BackendError::NotAFile`] where the storage can
    /// tell, and is never opened.
    fn read(&self, kind: Kind, name: &str) -> Result<Vec<u8>, BackendError>;
    /// What is at `<dir of kind>/<name>` (a link is not followed), or `None`
    /// when nothing is.
    fn stat(&self, kind: Kind, name: &str) -> Result<Option<FileInfo>, BackendError>;
    /// What the directory of `kind` is (a link is not followed): `None` when
    /// there is none, [`EntryKind::Unknown`] where the storage has no
    /// directories of its own (object stores, REST servers).
    fn dir_kind(&self, kind: Kind) -> Result<Option<EntryKind>, BackendError>;
    /// Deletes `locks/<id>` when it is a regular file; `id` must be 64
    /// lowercase hex. Anything else at that name is
    /// [`BackendError::NotAFile`] where the storage can tell, and is left
    /// alone; a name already gone is [`Removal::AlreadyGone`] where the
    /// storage says so. Only a backend whose [`Capabilities::modify`] is
    /// true does.
    fn remove(&self, id: &str) -> Result<Removal, BackendError>;
    /// Writes a new `locks/<id>` holding `stored` (a sealed lock whose
    /// SHA-256 is `id`), so that no reader sees it half written. Only a
    /// backend whose [`Capabilities::modify`] is true does.
    fn write_lock(&self, id: &str, stored: &[u8]) -> Result<(), BackendError>;
}

/// A shared backend is a backend (tests keep a handle on the one a
/// repository uses).
impl<B: Backend + ?Sized> Backend for std::sync::Arc<B> {
    fn name(&self) -> &'static str {
        (**self).name()
    }
    fn capabilities(&self) -> Capabilities {
        (**self).capabilities()
    }
    fn list(&self, kind: Kind) -> Result<Vec<FileInfo>, BackendError> {
        (**self).list(kind)
    }
    fn read(&self, kind: Kind, name: &str) -> Result<Vec<u8>, BackendError> {
        (**self).read(kind, name)
    }
    fn stat(&self, kind: Kind, name: &str) -> Result<Option<FileInfo>, BackendError> {
        (**self).stat(kind, name)
    }
    fn dir_kind(&self, kind: Kind) -> Result<Option<EntryKind>, BackendError> {
        (**self).dir_kind(kind)
    }
    fn remove(&self, id: &str) -> Result<Removal, BackendError> {
        (**self).remove(id)
    }
    fn write_lock(&self, id: &str, stored: &[u8]) -> Result<(), BackendError> {
        (**self).write_lock(id, stored)
    }
}

/// The scheme of `location`: the entry of [`SCHEMES`] whose `NAME:` starts
/// it, else [`FALLBACK`].
pub fn scheme_of(location: &str) -> &'static Scheme {
    SCHEMES
        .iter()
        .find(|s| {
            location
                .strip_prefix(s.name)
                .is_some_and(|rest| rest.starts_with(':'))
        })
        .unwrap_or(FALLBACK)
}

/// What identifies the repository at `redacted_location` (its location with
/// any password replaced) across spellings: a local path made absolute and
/// canonical (so `repo` and `/srv/repo` are one repository), any other
/// location as it is.
pub fn identity(redacted_location: &str) -> String {
    if scheme_of(redacted_location).name == local::SCHEME.name {
        local::canonical(redacted_location)
    } else {
        redacted_location.to_owned()
    }
}

/// Refuses a name that is not a restic id, before it becomes part of a path
/// or URL; returns the file's path in the repository, as restic lays files
/// out on a file system or an object store (`data/<2 digits>/<id>`).
fn checked_name(kind: Kind, name: &str) -> Result<String, BackendError> {
    checked_path(kind, name, Layout::Nested)
}

/// [`checked_name`] of a file lockwarden reads: `config`, `keys/<id>` or
/// `locks/<id>`; the other kinds are only ever looked at.
fn checked_read_name(kind: Kind, name: &str) -> Result<String, BackendError> {
    match kind {
        Kind::Config | Kind::Key | Kind::Lock => checked_name(kind, name),
        Kind::Snapshot | Kind::Index | Kind::Data => Err(BackendError::Other(format!(
            "lockwarden never reads {}/",
            kind.dir()
        ))),
    }
}

/// How a repository's data files are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Layout {
    /// `data/<first two digits>/<id>`: file systems and object stores.
    Nested,
    /// `data/<id>`: restic's REST protocol.
    Flat,
}

/// [`checked_name`] in a given [`Layout`].
pub(super) fn checked_path(kind: Kind, name: &str, layout: Layout) -> Result<String, BackendError> {
    match kind {
        Kind::Config => Ok("config".to_owned()),
        _ if !super::lockfile::is_valid_id(name) => Err(BackendError::Other(format!(
            "`{}` is not a restic file id (64 lowercase hex digits)",
            crate::text::escape(name)
        ))),
        Kind::Data if layout == Layout::Nested => Ok(format!("data/{}/{name}", &name[..2])),
        _ => Ok(format!("{}/{name}", kind.dir())),
    }
}

/// Keeps the names of a listing that are restic ids, each once, and refuses
/// a listing longer than [`crate::limits::LISTING_ENTRIES`]: what every
/// backend's [`Backend::list`] promises.
fn checked_listing(
    files: impl IntoIterator<Item = FileInfo>,
    dir: impl FnOnce() -> String,
) -> Result<Vec<FileInfo>, BackendError> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for file in files {
        // restic writes nothing but ids here; anything else (editor
        // droppings, temp files, odd keys) is not ours to judge.
        if !super::lockfile::is_valid_id(&file.name) || !seen.insert(file.name.clone()) {
            continue;
        }
        if out.len() == crate::limits::LISTING_ENTRIES {
            return Err(BackendError::TooMany {
                dir: dir(),
                limit: crate::limits::LISTING_ENTRIES,
            });
        }
        out.push(file);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_variables_are_values_only_and_show_only_their_names() {
        let values = [
            ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
            ("AWS_SECRET_ACCESS_KEY", "s3cr3t-value"),
            ("AWS_DEFAULT_REGION", "eu-west-1"),
            ("AWS_SHARED_CREDENTIALS_FILE", "/etc/passwd"),
            (
                "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                "http://169.254.170.2/creds",
            ),
            ("AWS_WEB_IDENTITY_TOKEN_FILE", "/var/run/secrets/token"),
            ("GOOGLE_APPLICATION_CREDENTIALS", "/etc/shadow"),
            ("AWS_PROFILE", "other"),
        ];
        let given = Variables::given(
            values
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        assert_eq!(
            given.get("AWS_ACCESS_KEY_ID").as_deref(),
            Some("AKIDEXAMPLE")
        );
        assert_eq!(
            given.get("AWS_DEFAULT_REGION").as_deref(),
            Some("eu-west-1")
        );
        for reference in &values[3..] {
            assert_eq!(given.get(reference.0), None, "{}", reference.0);
        }
        assert!(
            given.is_prefixed(),
            "no default of lockwarden's own applies"
        );
        assert_eq!(given.secrets(), ["s3cr3t-value"]);
        assert!(!format!("{given:?}").contains("s3cr3t"), "{given:?}");
        // Nothing of lockwarden's environment: cargo sets PATH for tests.
        assert!(std::env::var_os("PATH").is_some());
        assert_eq!(given.get("PATH"), None);
        assert!(given.are_given());
        assert!(!Variables::prefixed("REPO_A_").are_given());
        assert!(!Variables::default().are_given());
    }

    #[test]
    fn schemes_are_found_by_prefix_and_local_takes_the_rest() {
        assert_eq!(scheme_of("rest:http://h/r").name, "rest");
        assert_eq!(scheme_of("s3:host/bucket").name, "s3");
        assert_eq!(scheme_of("local:/srv/r").name, "local");
        assert_eq!(scheme_of("/srv/rest:x").name, "local");
        assert_eq!(scheme_of("restic:/x").name, "local");
        let names: std::collections::HashSet<_> = SCHEMES.iter().map(|s| s.name).collect();
        assert_eq!(names.len(), SCHEMES.len(), "a scheme registered twice");
    }

    #[test]
    fn listings_keep_ids_once() {
        let id = "a".repeat(64);
        let files = [
            FileInfo::file(id.clone()),
            FileInfo::file(id.clone()),
            FileInfo::file("notes.txt"),
            FileInfo::file("../x"),
        ];
        let kept = checked_listing(files, || "locks".into()).expect("short");
        assert_eq!(kept, vec![FileInfo::file(id)]);
    }

    #[test]
    fn data_files_are_nested_except_in_the_rest_protocol() {
        let id = "ab".repeat(32);
        assert_eq!(
            checked_name(Kind::Data, &id).expect("an id"),
            format!("data/ab/{id}")
        );
        assert_eq!(
            checked_path(Kind::Data, &id, Layout::Flat).expect("an id"),
            format!("data/{id}")
        );
        assert_eq!(
            checked_name(Kind::Snapshot, &id).expect("an id"),
            format!("snapshots/{id}")
        );
        assert!(checked_name(Kind::Data, "../../config").is_err());
    }
}
