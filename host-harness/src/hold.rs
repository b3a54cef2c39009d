//! A lock of lockwarden's own, taken, refreshed and released as restic does
//! it, so that restic honours it (`lockwarden hold`).
//!
//! Taking: no conflicting lock may be there; the lock file is written; after
//! [`CHECK_DELAY`] the locks are read again and any conflict but our own
//! lock undoes it (two takers racing both back off rather than both win).
//! Refreshing: a new lock file with the current time, then the old one
//! removed, every [`REFRESH_INTERVAL`]. Whether the lock is still held is
//! decided by looking, never by what a delete answered: the lock is lost
//! when a fresh listing no longer shows the file that stands for it. A
//! holder that cannot refresh for 4.5 intervals (restic: 22.5 minutes)
//! gives up before its lock looks stale to others.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::contract::Lock;
use crate::files::read_regular_file;
use crate::limits;
use crate::repo::backend::Removal;
use crate::repo::lockfile::short;
use crate::repo::{LockSet, RepoError, Repository};
use crate::stop::Stop;
use crate::text::escape;

/// How often restic refreshes its locks.
pub const REFRESH_INTERVAL: Duration = Duration::from_secs(5 * 60);

/// How long restic waits after writing its lock before it looks for
/// conflicting ones again.
pub const CHECK_DELAY: Duration = Duration::from_millis(200);

/// How many refresh intervals a holder keeps trying before it gives its
/// lock up: restic's 22.5 minutes at 5 minutes, well inside the 30 minutes
/// after which others take the lock for stale.
const GIVE_UP_INTERVALS: f64 = 4.5;

/// Why a lock could not be taken or kept.
#[derive(Debug, thiserror::Error)]
pub enum HoldError {
    /// Another lock conflicts with the one asked for.
    #[error("the repository is already locked {0}")]
    Locked(String),
    /// The lock was taken, and then lost.
    #[error("the lock was lost: {0}")]
    Lost(String),
    /// The repository failed.
    #[error(transparent)]
    Repo(#[from] RepoError),
    /// Our lock could not be removed at the end.
    #[error(
        "could not remove our lock {id}, which stays until it is stale (restic's 30 minutes \
         after its last refresh) or `lockwarden unlock` removes it: {}",
        escape(&cause.to_string())
    )]
    NotReleased {
        /// The lock's short id.
        id: String,
        /// Why.
        cause: RepoError,
    },
}

/// A lock not taken or lost is restic's "cannot lock"; a repository's
/// failure keeps its kind.
impl crate::error::Classify for HoldError {
    fn kind(&self) -> crate::error::ErrorKind {
        match self {
            HoldError::Locked(_) | HoldError::Lost(_) => crate::error::ErrorKind::Locked,
            HoldError::Repo(e) | HoldError::NotReleased { cause: e, .. } => e.kind(),
        }
    }
}

/// What conflicts with a lock of kind `exclusive` among `set`, our own lock
/// `own` aside, in restic's words; `None` when nothing does. An exclusive
/// lock conflicts with every other lock, a shared one with exclusive locks.
/// A file that cannot be read may be either, so it conflicts with both
/// (restic, too, will not lock past a lock it cannot read).
pub fn conflict(set: &LockSet, exclusive: bool, own: Option<&str>) -> Option<String> {
    let other = |id: &str| Some(id) != own;
    if let Some(lock) = set
        .locks
        .iter()
        .find(|l| other(&l.id) && (exclusive || l.exclusive))
    {
        return Some(format!(
            "{}by PID {} on {} by {} (lock {}, written {})",
            if lock.exclusive { "exclusively " } else { "" },
            lock.pid,
            escape(&lock.hostname),
            escape(&lock.username),
            short(&lock.id),
            crate::time::format_rfc3339(lock.time),
        ));
    }
    let unreadable = set.unreadable.iter().map(|u| (&u.id, &u.problem));
    let foreign = set.foreign.iter().map(|f| (&f.id, &f.what));
    unreadable
        .chain(foreign)
        .find(|(id, _)| other(id))
        .map(|(id, problem)| {
            format!(
                "by a lock file lockwarden cannot read ({}: {})",
                short(id),
                escape(problem)
            )
        })
}

/// The lock that this process would write: this machine's hostname, this
/// user, this process's pid, as restic fills them in.
pub fn own_lock(exclusive: bool) -> Lock {
    let uid = rustix::process::getuid().as_raw();
    Lock {
        id: String::new(),
        time: crate::time::now(),
        exclusive,
        hostname: crate::evidence::hostname().unwrap_or_default(),
        username: username(uid).unwrap_or_default(),
        pid: i64::from(std::process::id()),
        uid,
        gid: rustix::process::getgid().as_raw(),
        first_seen: None,
        stored_at: None,
    }
}

/// The name of user `uid` in `/etc/passwd`, as restic looks it up.
fn username(uid: u32) -> Option<String> {
    let passwd = read_regular_file("/etc/passwd".as_ref(), limits::PASSWD_FILE).ok()?;
    String::from_utf8_lossy(&passwd).lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let id = fields.nth(1)?.parse::<u32>().ok()?;
        (id == uid && name.len() <= limits::LOCK_NAME_FIELD).then(|| name.to_owned())
    })
}

/// A lock this process holds on one repository.
pub struct Holder<'r> {
    repo: &'r Repository,
    template: Lock,
    state: Mutex<Held>,
}

/// The lock file that stands for the lock now, and other files of ours that
/// could not be removed yet (or may have been stored by a write that
/// failed).
struct Held {
    id: String,
    /// The time written into it, and when (by the monotonic clock) that
    /// time was taken.
    time: i64,
    stamped: Instant,
    leftovers: Vec<String>,
}

impl<'r> Holder<'r> {
    /// Takes a lock on `repo` (exclusive or shared), as restic takes one.
    pub fn take(repo: &'r Repository, exclusive: bool) -> Result<Holder<'r>, HoldError> {
        let locked = |set: &LockSet, own| conflict(set, exclusive, own).map(HoldError::Locked);
        if let Some(e) = locked(&repo.read_locks()?, None) {
            return Err(e);
        }
        let template = own_lock(exclusive);
        let stamped = Instant::now();
        let sealed = repo.seal_lock(&template)?;
        if let Err(e) = repo.store_lock(&sealed) {
            // The storage may have kept it all the same.
            let _ = repo.remove_lock(&sealed.id);
            return Err(e.into());
        }
        let id = sealed.id;
        let holder = Holder {
            repo,
            state: Mutex::new(Held {
                id: id.clone(),
                time: template.time,
                stamped,
                leftovers: Vec::new(),
            }),
            template,
        };
        std::thread::sleep(CHECK_DELAY);
        let found = match repo.read_locks() {
            Ok(set) if !set.locks.iter().any(|l| l.id == id) => Some(HoldError::Lost(format!(
                "lock {} was not in locks/ after it was written",
                short(&id)
            ))),
            Ok(set) => locked(&set, Some(&id)),
            Err(e) => Some(HoldError::Repo(e)),
        };
        match found {
            Some(e) => {
                if let Err(not_released) = holder.release() {
                    tracing::warn!("{not_released}");
                }
                Err(e)
            }
            None => Ok(holder),
        }
    }

    /// The id of the lock file that stands for the lock now.
    pub fn id(&self) -> String {
        self.held().id.clone()
    }

    /// The age of the lock file that stands for the lock: since the time
    /// written into it, by the wall clock or the monotonic one, whichever
    /// says longer (the monotonic clock stops while the machine sleeps,
    /// others' clocks do not).
    pub fn age(&self) -> Duration {
        let held = self.held();
        let wall = crate::time::now().saturating_sub(held.time);
        let wall = Duration::from_nanos(u64::try_from(wall).unwrap_or(0));
        held.stamped.elapsed().max(wall)
    }

    /// Writes a new lock file with the current time, then removes the old
    /// one. Whatever the write answered, a fresh listing then decides: when
    /// the file that stands for the lock is no longer there, someone
    /// removed the lock (`restic unlock --remove-all`, say), and it is
    /// [`HoldError::Lost`]; the new file is removed too. Any other failure
    /// leaves the lock as it was, to be refreshed again soon.
    pub fn refresh(&self) -> Result<(), HoldError> {
        let stamped = Instant::now();
        let fresh = Lock {
            time: crate::time::now(),
            ..self.template.clone()
        };
        let sealed = self.repo.seal_lock(&fresh)?;
        let written = self.repo.store_lock(&sealed);
        let listed = self.repo.lock_ids();
        let current = self.id();
        if let Ok(ids) = &listed
            && !ids.contains(&current)
        {
            return Err(self.lost(&current, sealed.id));
        }
        let listed = match (written, listed) {
            (Ok(()), Ok(ids)) => ids,
            (Err(e), _) | (Ok(()), Err(e)) => {
                // The storage may have kept the new file all the same.
                self.held().leftovers.push(sealed.id);
                return Err(e.into());
            }
        };
        if !listed.contains(&sealed.id) {
            self.held().leftovers.push(sealed.id);
            return Err(HoldError::Repo(RepoError::Other {
                location: self.repo.location().redacted(),
                cause: "the new lock file was written but is not listed".into(),
            }));
        }
        let old = {
            let mut held = self.held();
            held.time = fresh.time;
            held.stamped = stamped;
            std::mem::replace(&mut held.id, sealed.id)
        };
        match self.repo.remove_lock(&old) {
            Ok(Removal::Removed) => self.remove_leftovers(),
            // Gone between the listing and the delete: someone is removing
            // our files; the new one must still be there.
            Ok(Removal::AlreadyGone) => self.still_listed()?,
            Err(e) => {
                tracing::warn!(
                    "could not remove the previous lock {} (tried again later): {}",
                    short(&old),
                    escape(&e.to_string())
                );
                self.held().leftovers.push(old);
            }
        }
        Ok(())
    }

    /// Fails with [`HoldError::Lost`] when a fresh listing does not show the
    /// file that stands for the lock (a failed listing is not loss).
    fn still_listed(&self) -> Result<(), HoldError> {
        let current = self.id();
        match self.repo.lock_ids() {
            Ok(ids) if !ids.contains(&current) => Err(self.lost(&current, String::new())),
            _ => Ok(()),
        }
    }

    /// The lock is lost: `current` is gone; `written` (if any) and the files
    /// left over are removed.
    fn lost(&self, current: &str, written: String) -> HoldError {
        if !written.is_empty() {
            self.held().leftovers.push(written);
        }
        self.remove_leftovers();
        HoldError::Lost(format!(
            "lock {} is no longer in locks/: someone removed it",
            short(current)
        ))
    }

    /// Refreshes every `every` until `quit`, retrying a failed refresh every
    /// fifth of that. Returns [`HoldError::Lost`] when the lock was removed by
    /// someone else. That a lock cannot be refreshed in time is the
    /// [`Holder::watchdog`]'s to say: a refresh may hang for the whole
    /// request timeout.
    pub fn keep(&self, every: Duration, quit: &Stop) -> Result<(), HoldError> {
        let mut wait = every;
        loop {
            if quit.sleep(wait) {
                return Ok(());
            }
            match self.refresh() {
                Ok(()) => wait = every,
                Err(lost @ HoldError::Lost(_)) => return Err(lost),
                Err(e) => {
                    wait = every / 5;
                    tracing::warn!(
                        "could not refresh the lock, trying again in {}s: {}",
                        wait.as_secs_f64(),
                        escape(&e.to_string())
                    );
                }
            }
        }
    }

    /// Watches the lock's age until `quit`: once it is 4.5 refresh
    /// intervals old (restic's 22.5 minutes at 5 minutes), before anyone
    /// takes it for stale, the lock is [`HoldError::Lost`], whatever a
    /// refresh still under way may bring.
    pub fn watchdog(&self, every: Duration, quit: &Stop) -> Result<(), HoldError> {
        let give_up = every.mul_f64(GIVE_UP_INTERVALS);
        let tick = (every / 10).min(Duration::from_secs(1));
        loop {
            let age = self.age();
            if age >= give_up {
                return Err(HoldError::Lost(format!(
                    "it could not be refreshed for {}s",
                    age.as_secs()
                )));
            }
            if quit.sleep(tick.min(give_up - age)) {
                return Ok(());
            }
        }
    }

    /// Removes our lock file (and any older one left over). When ours
    /// cannot be removed, says why: the lock then stays until it is stale
    /// by the ordinary rules, once this process has ended.
    pub fn release(&self) -> Result<(), HoldError> {
        let id = self.id();
        let removed = self.repo.remove_lock(&id);
        self.remove_leftovers();
        removed.map(drop).map_err(|cause| HoldError::NotReleased {
            id: short(&id).to_owned(),
            cause,
        })
    }

    fn remove_leftovers(&self) {
        let leftovers = std::mem::take(&mut self.held().leftovers);
        for old in leftovers {
            if self.repo.remove_lock(&old).is_err() {
                self.held().leftovers.push(old);
            }
        }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::repo::Password;
    use crate::repo::backend::{Backend, Fault, FaultyBackend, Kind, MemoryBackend, Operation};
    use crate::repo::crypto::Key;
    use crate::repo::location::Location;
    use crate::repo::tests::lock_json_at;

    const PASSWORD: &[u8] = b"geheim";

    /// A repository over `backend`, with a handle on the backend and its key.
    fn repository() -> (Repository, Arc<FaultyBackend<MemoryBackend>>, Key) {
        let (memory, key) = MemoryBackend::init(PASSWORD);
        let backend = Arc::new(FaultyBackend::new(memory));
        let location = Location::parse("/memory/repo").expect("a path");
        let repo = Repository::with_backend(
            location,
            Box::new(backend.clone()),
            &Password::new(PASSWORD),
        )
        .expect("opens");
        (repo, backend, key)
    }

    fn exclusive_json(exclusive: bool) -> String {
        let json = lock_json_at(&crate::time::format_rfc3339(crate::time::now()), "other", 7);
        json.replace("\"exclusive\":false", &format!("\"exclusive\":{exclusive}"))
    }

    #[test]
    fn a_taken_lock_reads_back_as_ours_and_goes_on_release() {
        let (repo, backend, _) = repository();
        let holder = Holder::take(&repo, true).expect("takes");
        let set = repo.read_locks().expect("reads");
        assert_eq!(set.locks.len(), 1);
        let lock = &set.locks[0];
        assert_eq!(lock.id, holder.id());
        assert!(lock.exclusive);
        assert_eq!(lock.pid, i64::from(std::process::id()));
        assert_eq!(lock.hostname, own_lock(true).hostname);
        assert!(crate::time::now() - lock.time < 60_000_000_000);
        holder.release().expect("released");
        assert!(backend.inner().names(Kind::Lock).is_empty());
    }

    #[test]
    fn conflicts_follow_restics_rules() {
        for (theirs, ours, conflicts) in [
            (false, false, false),
            (false, true, true),
            (true, false, true),
            (true, true, true),
        ] {
            let (repo, backend, key) = repository();
            backend.inner().put_lock(&key, &exclusive_json(theirs));
            let taken = Holder::take(&repo, ours);
            assert_eq!(
                matches!(taken, Err(HoldError::Locked(_))),
                conflicts,
                "theirs exclusive {theirs}, ours {ours}"
            );
            let left = backend.inner().names(Kind::Lock).len();
            assert_eq!(left, if conflicts { 1 } else { 2 });
        }
    }

    #[test]
    fn an_unreadable_lock_file_blocks_both_kinds() {
        let (repo, backend, _) = repository();
        backend
            .inner()
            .put(Kind::Lock, &"ab".repeat(32), b"not a lock".to_vec());
        for exclusive in [false, true] {
            let taken = Holder::take(&repo, exclusive);
            let Err(HoldError::Locked(why)) = taken else {
                panic!("taken past an unreadable file");
            };
            assert!(why.contains("cannot read"), "{why}");
        }
        assert_eq!(backend.inner().names(Kind::Lock).len(), 1);
    }

    #[test]
    fn a_refresh_writes_a_new_file_then_removes_the_old_one() {
        let (repo, backend, _) = repository();
        let holder = Holder::take(&repo, false).expect("takes");
        let first = holder.id();
        holder.refresh().expect("refreshes");
        assert_ne!(holder.id(), first);
        assert_eq!(backend.inner().names(Kind::Lock), vec![holder.id()]);
    }

    #[test]
    fn a_lock_removed_by_someone_else_is_lost_and_leaves_nothing() {
        let (repo, backend, _) = repository();
        let holder = Holder::take(&repo, false).expect("takes");
        repo.remove_lock(&holder.id()).expect("removed by another");
        let refreshed = holder.refresh();
        assert!(
            matches!(refreshed, Err(HoldError::Lost(_))),
            "{refreshed:?}"
        );
        assert!(backend.inner().names(Kind::Lock).is_empty());
    }

    /// rclone answers the delete of a file already gone with a 500: what
    /// the delete answered decides nothing, the listing does.
    #[test]
    fn a_lock_removed_behind_a_failing_delete_is_lost() {
        let (repo, backend, _) = repository();
        let holder = Holder::take(&repo, true).expect("takes");
        let first = holder.id();
        backend.inner().remove(&first).expect("unlock --remove-all");
        backend.inject(Fault::always(
            Operation::Remove,
            crate::repo::backend::BackendError::Other("answered 500".into()),
        ));
        let refreshed = holder.refresh();
        assert!(
            matches!(refreshed, Err(HoldError::Lost(_))),
            "{refreshed:?}"
        );
    }

    /// A refresh whose write fails, while someone removes the lock, finds
    /// the loss at once, whatever the write answered.
    #[test]
    fn a_failed_write_then_absence_is_lost_too() {
        let (repo, backend, _) = repository();
        let holder = Holder::take(&repo, false).expect("takes");
        backend.inject(
            Fault::always(
                Operation::Write,
                crate::repo::backend::BackendError::Unreachable("timeout".into()),
            )
            .times(1),
        );
        let transient = holder.refresh();
        assert!(
            matches!(transient, Err(HoldError::Repo(_))),
            "{transient:?}"
        );
        backend
            .inner()
            .remove(&holder.id())
            .expect("removed by another");
        backend.inject(
            Fault::always(
                Operation::Write,
                crate::repo::backend::BackendError::Unreachable("timeout".into()),
            )
            .times(1),
        );
        let lost = holder.refresh();
        assert!(matches!(lost, Err(HoldError::Lost(_))), "{lost:?}");
    }

    /// A release the storage refuses says so, with the refusal's kind (a
    /// 403 is exit 13), and never that the lock was released.
    #[test]
    fn a_release_that_cannot_remove_the_lock_says_so() {
        let (repo, backend, _) = repository();
        let holder = Holder::take(&repo, false).expect("takes");
        backend.inject(Fault::always(
            Operation::Remove,
            crate::repo::backend::BackendError::Denied("403".into()),
        ));
        let refused = holder.release().expect_err("refused");
        assert!(
            matches!(refused, HoldError::NotReleased { .. }),
            "{refused:?}"
        );
        assert_eq!(
            crate::error::Classify::kind(&refused),
            crate::error::ErrorKind::Denied
        );
        assert!(
            refused.to_string().contains("stays until it is stale"),
            "{refused}"
        );
        assert_eq!(backend.inner().names(Kind::Lock), vec![holder.id()]);
    }

    #[test]
    fn an_old_file_that_cannot_be_removed_is_removed_later() {
        let (repo, backend, _) = repository();
        let holder = Holder::take(&repo, false).expect("takes");
        let first = holder.id();
        backend.inject(Fault {
            operation: Operation::Remove,
            kind: None,
            name: Some(first.clone()),
            times: 1,
            error: crate::repo::backend::BackendError::Other("flaky".into()),
        });
        holder
            .refresh()
            .expect("refreshes, keeping the old file for later");
        assert_eq!(backend.inner().names(Kind::Lock).len(), 2);
        holder.refresh().expect("refreshes again");
        assert_eq!(backend.inner().names(Kind::Lock), vec![holder.id()]);
    }

    #[test]
    fn a_holder_that_cannot_refresh_gives_up_after_four_and_a_half_intervals() {
        let (repo, backend, _) = repository();
        let holder = Holder::take(&repo, false).expect("takes");
        backend.inject(Fault {
            operation: Operation::Write,
            kind: None,
            name: None,
            times: usize::MAX,
            error: crate::repo::backend::BackendError::Unreachable("gone".into()),
        });
        // Taking waited CHECK_DELAY (200 ms) already.
        let every = Duration::from_millis(100);
        let quit = Stop::default();
        let watched = std::thread::scope(|scope| {
            let keeper = scope.spawn(|| holder.keep(every, &quit));
            let watched = holder.watchdog(every, &quit);
            quit.stop();
            let kept = keeper.join().expect("keeper");
            assert!(kept.is_ok(), "{kept:?}");
            watched
        });
        let Err(HoldError::Lost(why)) = watched else {
            panic!("kept a lock it could not refresh: {watched:?}");
        };
        assert!(why.contains("could not be refreshed"), "{why}");
        assert!(holder.age() >= Duration::from_millis(450));
        // Each failed write's file is removed on release, in case the
        // storage kept it.
        assert!(
            backend.calls(Operation::Write) > 2,
            "{} writes, age {:?}",
            backend.calls(Operation::Write),
            holder.age()
        );
    }

    #[test]
    fn usernames_come_from_passwd() {
        assert_eq!(username(0).as_deref(), Some("root"));
        assert_eq!(username(u32::MAX - 7), None);
    }
}
