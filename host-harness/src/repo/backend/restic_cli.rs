//! Read-only access through the `restic` binary, for backends lockwarden does
//! not speak natively (b2, swift). restic does
//! the decryption; lockwarden never removes anything this way.

use std::collections::HashSet;
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{
    Backend, BackendError, Capabilities, Contents, EntryKind, FileInfo, Kind, Removal, Scheme,
    Target, checked_listing, checked_name,
};
use crate::command::{self, CommandError};
use crate::limits;
use crate::repo::Password;
use crate::repo::backend::location_text::redact_userinfo;

/// A scheme restic reads for lockwarden: the location goes to restic as it
/// was given.
pub const fn scheme(name: &'static str) -> Scheme {
    Scheme {
        name,
        parse: |location| Ok(location.to_owned()),
        redact: redact_userinfo,
        open: |target: &Target<'_>| {
            Ok(Box::new(ResticCli::new(
                super::scheme_of(target.location).name,
                target.location,
                target.password.clone(),
                target.timeout,
            )))
        },
        modifies: false,
    }
}

/// Runs `restic ... --no-lock` against one repository.
pub struct ResticCli {
    name: &'static str,
    repository: String,
    password: Password,
    timeout: Duration,
    /// The last listing taken to confirm a failed read, with when it was
    /// started: one listing serves every failure that began before it.
    relisted: Mutex<Option<(Instant, HashSet<String>)>>,
}

/// What restic prints when the storage does not answer (Go's net errors and
/// restic's own), as opposed to "no repository there".
const UNREACHABLE: [&str; 6] = [
    "connection refused",
    "no such host",
    "i/o timeout",
    "dial tcp",
    "context deadline exceeded",
    "network is unreachable",
];

impl ResticCli {
    /// A runner for `repository` (as given to restic) with `password`; each
    /// restic run is stopped after `timeout`.
    pub fn new(
        name: &'static str,
        repository: &str,
        password: Password,
        timeout: Duration,
    ) -> ResticCli {
        ResticCli {
            name,
            repository: repository.to_owned(),
            password,
            timeout,
            relisted: Mutex::default(),
        }
    }

    /// Runs restic with `args`, taking at most `limit` bytes of its output.
    fn run(&self, args: &[&str], limit: u64) -> Result<Vec<u8>, BackendError> {
        let mut restic = Command::new("restic");
        restic.args(args).arg("--no-lock");
        crate::repo::restic_env(&mut restic, &self.repository, &self.password);
        let output = command::run(restic, self.timeout, limit).map_err(|e| match e {
            CommandError::Spawn(e) => BackendError::Other(format!(
                "cannot run restic ({e}); this backend is read through the restic binary: install restic"
            )),
            CommandError::TimedOut(_) => BackendError::Unreachable(format!(
                "restic {} on {}: {e} (raise --timeout if the storage is slow)",
                args.join(" "),
                redact_userinfo(&self.repository)
            )),
            CommandError::TooMuchOutput(limit) => BackendError::TooLarge {
                size: limit + 1,
                limit,
            },
            other => BackendError::Other(format!("restic {}: {other}", args.join(" "))),
        })?;
        if output.status.success() {
            return Ok(output.stdout);
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        let first = self.scrub(&output.stderr_line());
        // restic 0.17+ exits 10 and 12; older ones exit 1 with these texts.
        let code = output.status.code();
        if code == Some(12) || stderr.contains("wrong password") {
            Err(BackendError::WrongPassword)
        } else if UNREACHABLE.iter().any(|t| stderr.contains(t)) {
            Err(BackendError::Unreachable(format!(
                "cannot reach {}: {first}",
                redact_userinfo(&self.repository)
            )))
        } else if code == Some(10)
            || stderr.contains("Is there a repository at the following location?")
        {
            Err(BackendError::NoRepository(first))
        } else {
            Err(BackendError::Other(format!(
                "restic {} failed: {first}",
                args.join(" ")
            )))
        }
    }

    /// `text` without the repository's credentials or the password.
    fn scrub(&self, text: &str) -> String {
        let mut text = text.replace(&self.repository, &redact_userinfo(&self.repository));
        let password = self.password.as_str_lossy();
        if password.len() >= 4 {
            text = text.replace(&password, "***");
        }
        text
    }
}

impl Backend for ResticCli {
    fn name(&self) -> &'static str {
        self.name
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            modify: false,
            contents: Contents::Decrypted,
            parallel_reads: 4,
        }
    }

    fn list(&self, kind: Kind) -> Result<Vec<FileInfo>, BackendError> {
        if kind != Kind::Lock {
            return Err(self.unsupported("list keys"));
        }
        // A listing of 100,000 ids is 6.5 MB.
        let out = self.run(&["list", "locks"], limits::LISTING_BODY)?;
        let files = String::from_utf8_lossy(&out)
            .lines()
            .map(|line| FileInfo::unknown(line.trim()))
            .collect::<Vec<_>>();
        checked_listing(files, || "locks/".into())
    }

    fn read(&self, kind: Kind, name: &str) -> Result<Vec<u8>, BackendError> {
        checked_name(kind, name)?;
        match kind {
            Kind::Config => self.run(&["cat", "config"], kind.limit()),
            Kind::Lock => self.read_lock(name),
            _ => Err(self.unsupported("read key files")),
        }
    }

    fn stat(&self, _kind: Kind, _name: &str) -> Result<Option<FileInfo>, BackendError> {
        Err(self.unsupported("look at one file"))
    }

    fn dir_kind(&self, _kind: Kind) -> Result<Option<EntryKind>, BackendError> {
        Ok(Some(EntryKind::Unknown))
    }

    fn remove(&self, _id: &str) -> Result<Removal, BackendError> {
        Err(self.unsupported("remove one lock by id"))
    }

    fn write_lock(&self, _id: &str, _stored: &[u8]) -> Result<(), BackendError> {
        Err(self.unsupported("write a lock"))
    }
}

impl ResticCli {
    /// `restic cat lock ID`. restic's words for a missing file vary with the
    /// storage, so a failure counts as "gone" only when a new listing no
    /// longer has the id; otherwise the lock is reported unreadable.
    fn read_lock(&self, id: &str) -> Result<Vec<u8>, BackendError> {
        let asked = Instant::now();
        let error = match self.run(&["cat", "lock", id], Kind::Lock.limit()) {
            Err(error @ BackendError::Other(_)) => error,
            other => return other,
        };
        match self.listed_since(asked, id) {
            Some(false) => Err(BackendError::NotFound(format!("locks/{id}"))),
            _ => Err(error),
        }
    }

    /// Whether `id` is in `locks/` by a listing started after `asked`; one
    /// listing serves all the reads that failed before it began, so a
    /// repository full of unreadable locks costs a few extra listings, not
    /// one per lock. `None` when listing fails.
    fn listed_since(&self, asked: Instant, id: &str) -> Option<bool> {
        let mut relisted = self
            .relisted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match relisted.as_ref() {
            Some((taken, ids)) if *taken >= asked => Some(ids.contains(id)),
            _ => {
                let taken = Instant::now();
                let files = self.list(Kind::Lock).ok()?;
                let ids: HashSet<String> = files.into_iter().map(|f| f.name).collect();
                let listed = ids.contains(id);
                *relisted = Some((taken, ids));
                Some(listed)
            }
        }
    }

    fn unsupported(&self, operation: &'static str) -> BackendError {
        BackendError::Unsupported {
            backend: self.name,
            operation,
        }
    }
}
