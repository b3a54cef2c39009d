//! A backend that fails on purpose: wraps another and answers chosen
//! operations with chosen errors, the way restic's own tests wrap their
//! backends, so that every error path above the storage has a fast test.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{Backend, BackendError, Capabilities, EntryKind, FileInfo, Kind, Removal};

/// An operation of [`Backend`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// [`Backend::list`].
    List = 0,
    /// [`Backend::read`].
    Read,
    /// [`Backend::remove`].
    Remove,
    /// [`Backend::write_lock`].
    Write,
    /// [`Backend::stat`] and [`Backend::dir_kind`].
    Stat,
}

/// One injected failure.
#[derive(Debug, Clone)]
pub struct Fault {
    /// The operation that fails.
    pub operation: Operation,
    /// Only for this kind of file (any when `None`).
    pub kind: Option<Kind>,
    /// Only for this file name (any when `None`).
    pub name: Option<String>,
    /// What the operation returns instead.
    pub error: BackendError,
    /// How many times it fails before it works again (`usize::MAX`: always).
    pub times: usize,
}

impl Fault {
    /// `operation` always fails with `error`, for every file.
    pub fn always(operation: Operation, error: BackendError) -> Fault {
        Fault {
            operation,
            kind: None,
            name: None,
            error,
            times: usize::MAX,
        }
    }

    /// The same fault, only for file `name`.
    pub fn on(mut self, name: &str) -> Fault {
        self.name = Some(name.to_owned());
        self
    }

    /// The same fault, only for files of `kind`.
    pub fn of(mut self, kind: Kind) -> Fault {
        self.kind = Some(kind);
        self
    }

    /// The same fault, only the first `times` times.
    pub fn times(mut self, times: usize) -> Fault {
        self.times = times;
        self
    }
}

/// `inner`, with [`Fault`]s injected and every call counted.
pub struct FaultyBackend<B> {
    inner: B,
    faults: Mutex<Vec<Fault>>,
    /// Ids whose delete is answered "already gone" while nothing is done
    /// (a proxy that answers 404, a server that lies).
    claimed_gone: Mutex<Vec<String>>,
    /// Calls so far, by [`Operation`].
    calls: [AtomicUsize; 5],
}

impl<B: Backend> FaultyBackend<B> {
    /// `inner` with no fault yet.
    pub fn new(inner: B) -> Self {
        FaultyBackend {
            inner,
            faults: Mutex::default(),
            claimed_gone: Mutex::default(),
            calls: Default::default(),
        }
    }

    /// Adds a fault.
    pub fn fail(self, fault: Fault) -> Self {
        self.inject(fault);
        self
    }

    /// Adds a fault to a backend in use.
    pub fn inject(&self, fault: Fault) {
        self.faults
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(fault);
    }

    /// From now on, a delete of `id` answers [`Removal::AlreadyGone`] and
    /// does nothing.
    pub fn claim_gone(&self, id: &str) {
        self.claimed_gone
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(id.to_owned());
    }

    /// The wrapped backend.
    pub fn inner(&self) -> &B {
        &self.inner
    }

    /// How many times `operation` was called (failed calls too).
    pub fn calls(&self, operation: Operation) -> usize {
        self.calls[operation as usize].load(Ordering::Relaxed)
    }

    /// The error of the first fault that matches, counting it down.
    fn injected(
        &self,
        operation: Operation,
        kind: Kind,
        name: Option<&str>,
    ) -> Result<(), BackendError> {
        self.calls[operation as usize].fetch_add(1, Ordering::Relaxed);
        let mut faults = self
            .faults
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let found = faults.iter_mut().find(|f| {
            f.operation == operation
                && f.times > 0
                && f.kind.is_none_or(|k| k == kind)
                && f.name.as_deref().is_none_or(|n| Some(n) == name)
        });
        match found {
            Some(fault) => {
                fault.times = fault.times.saturating_sub(1);
                Err(fault.error.clone())
            }
            None => Ok(()),
        }
    }
}

impl<B: Backend> Backend for FaultyBackend<B> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    fn list(&self, kind: Kind) -> Result<Vec<FileInfo>, BackendError> {
        self.injected(Operation::List, kind, None)?;
        self.inner.list(kind)
    }

    fn read(&self, kind: Kind, name: &str) -> Result<Vec<u8>, BackendError> {
        self.injected(Operation::Read, kind, Some(name))?;
        self.inner.read(kind, name)
    }

    fn stat(&self, kind: Kind, name: &str) -> Result<Option<FileInfo>, BackendError> {
        self.injected(Operation::Stat, kind, Some(name))?;
        self.inner.stat(kind, name)
    }

    fn dir_kind(&self, kind: Kind) -> Result<Option<EntryKind>, BackendError> {
        self.injected(Operation::Stat, kind, None)?;
        self.inner.dir_kind(kind)
    }

    fn remove(&self, id: &str) -> Result<Removal, BackendError> {
        self.injected(Operation::Remove, Kind::Lock, Some(id))?;
        let claimed = self
            .claimed_gone
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .any(|c| c == id);
        if claimed {
            return Ok(Removal::AlreadyGone);
        }
        self.inner.remove(id)
    }

    fn write_lock(&self, id: &str, stored: &[u8]) -> Result<(), BackendError> {
        self.injected(Operation::Write, Kind::Lock, Some(id))?;
        self.inner.write_lock(id, stored)
    }
}
