//! Evidence about processes on this machine: does the pid that wrote a lock
//! still run, and is it still the same process?
//!
//! Signal 0 only (never SIGHUP, which kills an unrelated process that reused
//! the pid); EPERM means the process exists; pid <= 0 is never probed. No
//! process with that pid means the holder is gone: no clock is involved.
//!
//! A process that exists but seems to have started after the lock was
//! written has either reused the pid or the wall clock was stepped since
//! (start times come from the boot time, which moves with every clock step,
//! while the lock's time was written before the step). Only a process that
//! is evidently not restic (nor lockwarden, whose `hold` writes locks) is
//! taken as a reused pid; a restic process there is `unknown`, never `dead`. When lockwarden
//! runs in another pid namespace than the host's (a container), pids in locks
//! may belong to processes it cannot see, so the answer is `unknown` unless
//! the operator says the namespace is shared.

use super::Source;
use crate::contract::Liveness;
use crate::time::format_rfc3339;

/// How far a process start time may lie after a lock's time before the pid
/// counts as reused: /proc's start times are only accurate to about a second.
const START_TOLERANCE: i64 = 2_000_000_000;

/// What the operating system says about one pid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// No such process.
    Gone,
    /// A process with that pid exists.
    Running {
        /// When it started (ns since the epoch), if known.
        started: Option<i64>,
        /// Its command name, if known.
        name: Option<String>,
    },
    /// The probe itself failed.
    Failed(String),
}

/// Access to this machine's processes; Linux reads /proc and uses kill(2).
pub trait ProcessTable: Send + Sync {
    /// Probes `pid` (> 0).
    fn probe(&self, pid: i32) -> Probe;
    /// When the machine booted (ns since the epoch), if known.
    fn boot_time(&self) -> Option<i64>;
    /// The host pid of a process that has `pid` inside a nested pid
    /// namespace (a container that shares this hostname), if one does.
    fn nested_holder(&self, pid: i32) -> Option<i32>;
}

/// Evidence from this machine's process table.
pub struct LocalProcesses<T> {
    table: T,
    hostname: Option<String>,
    /// `Some(why)` when pids in locks cannot be trusted to be ours.
    untrusted: Option<String>,
}

impl<T: ProcessTable> LocalProcesses<T> {
    /// Evidence from `table` for locks written on `hostname`. `untrusted`
    /// says why pids cannot be checked, if they cannot.
    pub fn new(table: T, hostname: Option<String>, untrusted: Option<String>) -> Self {
        LocalProcesses {
            table,
            hostname,
            untrusted,
        }
    }
}

/// True for a process name that may be a lock's writer: restic itself (the
/// kernel keeps 15 bytes of it: `restic`, `restic_0.16.4_l`, `/usr/bin/restic`
/// as argv[0]), or lockwarden, whose `hold` writes locks too.
fn looks_like_restic(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    name.contains("restic") || name.contains("lockwarden")
}

impl<T: ProcessTable> Source for LocalProcesses<T> {
    fn process(&self, hostname: &str, pid: i64, since: i64) -> Option<Liveness> {
        Some(self.answer(hostname, pid, since))
    }

    /// A process table knows nothing of hosts.
    fn host(&self, _hostname: &str, _since: i64) -> Option<Liveness> {
        None
    }
}

impl<T: ProcessTable> LocalProcesses<T> {
    /// What the table says of `pid` on `hostname`, locked at `since`.
    fn answer(&self, hostname: &str, pid: i64, since: i64) -> Liveness {
        if self.hostname.as_deref() != Some(hostname) {
            return Liveness::Unknown(format!(
                "{} is not this machine",
                crate::text::escape(hostname)
            ));
        }
        if let Some(why) = &self.untrusted {
            return Liveness::Unknown(why.clone());
        }
        let Some(pid) = i32::try_from(pid).ok().filter(|p| *p > 0) else {
            return Liveness::Unknown(format!("pid {pid} cannot be checked"));
        };
        let answer = self.probe(pid, since);
        if let Liveness::Dead(why) = &answer
            && let Some(host_pid) = self.table.nested_holder(pid)
        {
            return Liveness::Unknown(format!(
                "{why}; but a process in a container on this machine (host pid {host_pid}) has \
                 pid {pid} there and may be the holder"
            ));
        }
        answer
    }

    /// What the process table says about `pid`, judged against a lock
    /// written at `since`.
    fn probe(&self, pid: i32, since: i64) -> Liveness {
        match self.table.probe(pid) {
            Probe::Gone => Liveness::Dead(format!("no process {pid} runs on this machine")),
            Probe::Failed(why) => Liveness::Unknown(format!("cannot check process {pid}: {why}")),
            Probe::Running { started, name } => {
                // Without its own start time, the process started after the
                // last boot: that bound says as much.
                let (began, what) = match (started, self.table.boot_time()) {
                    (Some(started), _) => (Some(started), "started"),
                    (None, boot) => (boot, "runs since the machine booted"),
                };
                let shown = name
                    .as_deref()
                    .map(|n| format!(" ({})", crate::text::escape(n)))
                    .unwrap_or_default();
                match began {
                    Some(began) if began > since.saturating_add(START_TOLERANCE) => {
                        let when = format_rfc3339(began);
                        if name.as_deref().is_some_and(|n| !looks_like_restic(n)) {
                            Liveness::Dead(format!(
                                "pid {pid} now belongs to a process{shown} that {what} at {when}, after the lock was written (pid reused)"
                            ))
                        } else {
                            Liveness::Unknown(format!(
                                "pid {pid} is a process{shown} that {what} at {when}, after the lock's time: \
                                 either a new restic reused the pid or the clock was stepped since; not proof either way"
                            ))
                        }
                    }
                    Some(_) => Liveness::Alive(format!(
                        "process {pid}{shown} runs and started before the lock was written"
                    )),
                    None => {
                        Liveness::Alive(format!("process {pid}{shown} runs (start time unknown)"))
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;
    const LOCK: i64 = 1_000_000 * S;

    struct Table(Probe, Option<i64>);

    impl ProcessTable for Table {
        fn probe(&self, _pid: i32) -> Probe {
            self.0.clone()
        }
        fn boot_time(&self) -> Option<i64> {
            self.1
        }
        fn nested_holder(&self, pid: i32) -> Option<i32> {
            (pid == 4242).then_some(9000)
        }
    }

    fn running(started: i64) -> Probe {
        named("restic", started)
    }

    fn named(name: &str, started: i64) -> Probe {
        Probe::Running {
            started: Some(started),
            name: Some(name.into()),
        }
    }

    fn ask(table: Table, untrusted: Option<&str>, hostname: &str, pid: i64) -> Liveness {
        LocalProcesses::new(table, Some("vm".into()), untrusted.map(str::to_owned))
            .answer(hostname, pid, LOCK)
    }

    #[test]
    fn process_table() {
        let boot = Some(LOCK - 3600 * S);
        #[rustfmt::skip]
        let rows: [(Table, Option<&str>, &str, i64, &str); 14] = [
            (Table(Probe::Gone, boot),                 None,                 "vm",    42, "dead"),
            (Table(running(LOCK - 10 * S), boot),      None,                 "vm",    42, "alive"),
            (Table(running(LOCK + S), boot),           None,                 "vm",    42, "alive"),
            // A restic that seems younger than its lock: the clock may have
            // been stepped forward (boot time moves with it), or another
            // restic took the pid. Either way, not proof.
            (Table(running(LOCK + 60 * S), boot),      None,                 "vm",    42, "unknown"),
            (Table(running(LOCK + 60 * S), Some(LOCK + 30 * S)), None,       "vm",    42, "unknown"),
            (Table(named("restic_0.16.4_l", LOCK + 9 * S), boot), None,      "vm",    42, "unknown"),
            // lockwarden hold writes locks too.
            (Table(named("lockwarden", LOCK + 9 * S), boot), None,           "vm",    42, "unknown"),
            // Any other program there reused the pid.
            (Table(named("sleep", LOCK + 60 * S), boot), None,               "vm",    42, "dead"),
            // The boot time after the lock (e.g. a clock step at boot) with
            // the process still running says nothing about the holder.
            (Table(running(LOCK - 10 * S), Some(LOCK + 60 * S)), None,       "vm",    42, "alive"),
            (Table(Probe::Running { started: None, name: None }, Some(LOCK + 60 * S)), None, "vm", 42, "unknown"),
            (Table(Probe::Gone, boot),                 Some("in a container"), "vm",  42, "unknown"),
            (Table(Probe::Gone, boot),                 None,                 "other", 42, "unknown"),
            (Table(Probe::Gone, boot),                 None,                 "vm",    0,  "unknown"),
            (Table(Probe::Failed("EIO".into()), boot), None,                 "vm",    -1, "unknown"),
        ];
        for (n, (table, untrusted, host, pid, want)) in rows.into_iter().enumerate() {
            let got = match ask(table, untrusted, host, pid) {
                Liveness::Alive(_) => "alive",
                Liveness::Dead(_) => "dead",
                Liveness::Unknown(_) => "unknown",
            };
            assert_eq!(got, want, "row {n}");
        }
    }

    #[test]
    fn a_pid_taken_inside_a_container_is_not_proof_of_death() {
        // pid 4242 is free on the host but used in a nested namespace.
        let boot = Some(LOCK - 3600 * S);
        let gone = ask(Table(Probe::Gone, boot), None, "vm", 4242);
        assert!(
            matches!(&gone, Liveness::Unknown(d) if d.contains("host pid 9000")),
            "{gone:?}"
        );
        let reused = ask(Table(named("bash", LOCK + 60 * S), boot), None, "vm", 4242);
        assert!(matches!(reused, Liveness::Unknown(_)), "{reused:?}");
    }

    #[test]
    fn details_say_why() {
        let reused = ask(Table(named("bash", LOCK + 60 * S), None), None, "vm", 42);
        assert!(
            matches!(&reused, Liveness::Dead(d) if d.contains("pid reused") && d.contains("(bash)")),
            "{reused:?}"
        );
        let stepped = ask(Table(running(LOCK + 60 * S), None), None, "vm", 42);
        assert!(
            matches!(&stepped, Liveness::Unknown(d) if d.contains("clock was stepped")),
            "{stepped:?}"
        );
        let container = ask(
            Table(Probe::Gone, None),
            Some("runs in a container"),
            "vm",
            42,
        );
        assert_eq!(container, Liveness::Unknown("runs in a container".into()));
    }
}
