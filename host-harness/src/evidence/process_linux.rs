//! The Linux process table: kill(pid, 0) through rustix, start times from
//! /proc/<pid>/stat, the boot time from /proc/stat.

use std::collections::HashMap;
use std::io::ErrorKind;
use std::sync::OnceLock;

use rustix::io::Errno;
use rustix::process::{Pid, test_kill_process};

use super::process::{Probe, ProcessTable};

/// The inode of the initial pid namespace (`PROC_PID_INIT_INO` in the
/// kernel): a process in it sees every pid on the machine.
const INITIAL_PID_NAMESPACE: &str = "pid:[4026531836]";

/// This machine's processes.
pub struct LinuxProcesses {
    boot_time: Option<i64>,
    ticks_per_second: u64,
    /// Pids as seen inside nested pid namespaces (containers sharing this
    /// hostname) -> the host's pid; read once, when first needed.
    nested: OnceLock<HashMap<i32, i32>>,
}

impl LinuxProcesses {
    /// Reads the boot time once.
    pub fn new() -> Self {
        LinuxProcesses {
            boot_time: boot_time(),
            ticks_per_second: rustix::param::clock_ticks_per_second(),
            nested: OnceLock::new(),
        }
    }

    fn start_time(&self, pid: i32) -> (Option<i64>, Option<String>) {
        let Some(stat) = stat(pid) else {
            return (None, None);
        };
        let started = match (stat.start_ticks, self.boot_time) {
            (Some(ticks), Some(boot)) if self.ticks_per_second > 0 => {
                let nanos = i128::from(ticks) * 1_000_000_000 / i128::from(self.ticks_per_second);
                i64::try_from(nanos).ok().map(|n| boot.saturating_add(n))
            }
            _ => None,
        };
        (started, stat.name)
    }
}

/// What `/proc/<pid>/stat` says of a process.
struct Stat {
    name: Option<String>,
    parent: Option<i32>,
    /// Clock ticks after boot.
    start_ticks: Option<u64>,
}

/// Reads `/proc/<pid>/stat`, or `None` when there is no such process.
fn stat(pid: i32) -> Option<Stat> {
    let path = format!("/proc/{pid}/stat");
    let stat = crate::files::read_regular_file(path.as_ref(), crate::limits::LOCK_FILE).ok()?;
    let stat = String::from_utf8_lossy(&stat);
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
    let (open, close) = (stat.find('(')?, stat.rfind(')')?);
    let name = stat.get(open + 1..close).map(str::to_owned);
    // The fields after ")" start at field 3: ppid is field 4, starttime 22.
    let fields: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    Some(Stat {
        name,
        parent: fields.get(1).and_then(|p| p.parse().ok()),
        start_ticks: fields.get(19).and_then(|t| t.parse().ok()),
    })
}

/// A process, told apart from a later one given its pid by its start time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessId {
    /// Its pid.
    pub pid: i32,
    /// When it started, in clock ticks after boot.
    pub start_ticks: u64,
}

impl ProcessId {
    /// Whether this very process still runs (its pid not taken by another).
    pub fn runs(&self) -> bool {
        stat(self.pid).and_then(|s| s.start_ticks) == Some(self.start_ticks)
    }
}

/// `root` and every process below it (children, their children, ...), from
/// one pass over /proc.
pub fn process_tree(root: i32) -> Vec<ProcessId> {
    let mut parents: HashMap<i32, Vec<ProcessId>> = HashMap::new();
    let mut tree = Vec::new();
    for pid in all_pids() {
        let Some(stat) = stat(pid) else { continue };
        let (Some(parent), Some(start_ticks)) = (stat.parent, stat.start_ticks) else {
            continue;
        };
        let id = ProcessId { pid, start_ticks };
        if pid == root {
            tree.push(id);
        }
        parents.entry(parent).or_default().push(id);
    }
    let mut next = 0;
    while next < tree.len() {
        if let Some(children) = parents.remove(&tree[next].pid) {
            tree.extend(children);
        }
        next += 1;
    }
    tree
}

/// Every pid in /proc.
fn all_pids() -> impl Iterator<Item = i32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str().and_then(|n| n.parse().ok()))
}

impl Default for LinuxProcesses {
    fn default() -> Self {
        LinuxProcesses::new()
    }
}

impl ProcessTable for LinuxProcesses {
    fn probe(&self, pid: i32) -> Probe {
        let Some(target) = Pid::from_raw(pid) else {
            return Probe::Failed(format!("pid {pid} is not a process id"));
        };
        match test_kill_process(target) {
            // EPERM: it exists, it is just not ours to signal.
            Ok(()) | Err(Errno::PERM) => {
                let (started, name) = self.start_time(pid);
                Probe::Running { started, name }
            }
            Err(Errno::SRCH) => Probe::Gone,
            Err(e) => Probe::Failed(e.to_string()),
        }
    }

    fn boot_time(&self) -> Option<i64> {
        self.boot_time
    }

    fn nested_holder(&self, pid: i32) -> Option<i32> {
        self.nested.get_or_init(nested_pids).get(&pid).copied()
    }
}

/// Every process that lives in a pid namespace below this one, by its pid
/// there (`NSpid:` in /proc/<pid>/status lists the pid in each namespace,
/// outermost first).
fn nested_pids() -> HashMap<i32, i32> {
    let mut nested = HashMap::new();
    for host_pid in all_pids() {
        let path = format!("/proc/{host_pid}/status");
        let Ok(status) = crate::files::read_regular_file(path.as_ref(), crate::limits::LOCK_FILE)
        else {
            continue;
        };
        let status = String::from_utf8_lossy(&status);
        let Some(line) = status.lines().find_map(|l| l.strip_prefix("NSpid:")) else {
            continue;
        };
        for inner in line
            .split_whitespace()
            .skip(1)
            .filter_map(|p| p.parse().ok())
        {
            nested.insert(inner, host_pid);
        }
    }
    nested
}

fn boot_time() -> Option<i64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let seconds: i64 = stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    seconds.checked_mul(1_000_000_000)
}

/// This machine's hostname, as restic reads it (uname's nodename).
pub fn hostname() -> Option<String> {
    let uname = rustix::system::uname();
    let name = uname.nodename().to_string_lossy().into_owned();
    (!name.is_empty()).then_some(name)
}

/// Why pids in locks cannot be trusted to be this machine's, or `None` when
/// lockwarden runs in the initial pid namespace.
pub fn pid_namespace_problem() -> Option<String> {
    match std::fs::read_link("/proc/self/ns/pid") {
        Ok(link) if link.to_string_lossy() == INITIAL_PID_NAMESPACE => None,
        Ok(_) => Some(
            "lockwarden runs in its own pid namespace (a container), so it cannot see the holder's \
             process; pass --trust-local-pids if it shares the pid namespace of the processes that \
             write locks"
                .into(),
        ),
        Err(e) if e.kind() == ErrorKind::NotFound => {
            Some("cannot tell which pid namespace lockwarden runs in (/proc/self/ns/pid is missing)".into())
        }
        Err(e) => Some(format!("cannot read /proc/self/ns/pid: {e}")),
    }
}
