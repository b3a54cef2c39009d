//! Evidence about processes on this machine: does the pid that wrote a lock
//! still run, and is it still the same process?
//!
//! Signal 0 only (never SIGHUP, which kills an unrelated process that reused
//! the pid); EPERM means the process exists; pid <= 0 is never probed. A
//! process that started after the lock was written has reused the pid, and a
//! lock older than the last boot cannot have a living holder. When lockwarden
//! runs in another pid namespace than the host's (a container), pids in locks
//! may belong to processes it cannot see, so the answer is `unknown` unless
//! the operator says the namespace is shared.

use super::Evidence;
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

impl<T: ProcessTable> Evidence for LocalProcesses<T> {
    fn local_hostname(&self) -> Option<String> {
        self.hostname.clone()
    }

    fn process(&self, hostname: &str, pid: i64, since: i64) -> Liveness {
        if self.hostname.as_deref() != Some(hostname) {
            return Liveness::Unknown(format!("{hostname} is not this machine"));
        }
        if let Some(why) = &self.untrusted {
            return Liveness::Unknown(why.clone());
        }
        let Some(pid) = i32::try_from(pid).ok().filter(|p| *p > 0) else {
            return Liveness::Unknown(format!("pid {pid} cannot be checked"));
        };
        if let Some(boot) = self.table.boot_time()
            && boot > since.saturating_add(START_TOLERANCE)
        {
            return Liveness::Dead(format!(
                "this machine booted at {}, after the lock was written",
                format_rfc3339(boot)
            ));
        }
        match self.table.probe(pid) {
            Probe::Gone => Liveness::Dead(format!("no process {pid} runs on this machine")),
            Probe::Failed(why) => Liveness::Unknown(format!("cannot check process {pid}: {why}")),
            Probe::Running { started, name } => {
                let name = name.map(|n| format!(" ({n})")).unwrap_or_default();
                match started {
                    Some(started) if started > since.saturating_add(START_TOLERANCE) => {
                        Liveness::Dead(format!(
                            "pid {pid} now belongs to a process{name} started at {}, after the lock was written (pid reused)",
                            format_rfc3339(started)
                        ))
                    }
                    Some(_) => Liveness::Alive(format!(
                        "process {pid}{name} runs and started before the lock was written"
                    )),
                    None => {
                        Liveness::Alive(format!("process {pid}{name} runs (start time unknown)"))
                    }
                }
            }
        }
    }

    fn host(&self, hostname: &str, _since: i64) -> Liveness {
        Liveness::Unknown(format!("no inventory says whether host {hostname} exists"))
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
    }

    fn running(started: i64) -> Probe {
        Probe::Running {
            started: Some(started),
            name: Some("restic".into()),
        }
    }

    fn ask(table: Table, untrusted: Option<&str>, hostname: &str, pid: i64) -> Liveness {
        LocalProcesses::new(table, Some("vm".into()), untrusted.map(str::to_owned))
            .process(hostname, pid, LOCK)
    }

    #[test]
    fn process_table() {
        let boot = Some(LOCK - 3600 * S);
        #[rustfmt::skip]
        let rows: [(Table, Option<&str>, &str, i64, &str); 9] = [
            (Table(Probe::Gone, boot),                 None,                 "vm",    42, "dead"),
            (Table(running(LOCK - 10 * S), boot),      None,                 "vm",    42, "alive"),
            (Table(running(LOCK + S), boot),           None,                 "vm",    42, "alive"),
            (Table(running(LOCK + 60 * S), boot),      None,                 "vm",    42, "dead"),
            (Table(running(LOCK - 10 * S), Some(LOCK + 60 * S)), None,       "vm",    42, "dead"),
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
    fn details_say_why() {
        let reused = ask(Table(running(LOCK + 60 * S), None), None, "vm", 42);
        assert!(
            matches!(&reused, Liveness::Dead(d) if d.contains("pid reused") && d.contains("(restic)")),
            "{reused:?}"
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
