//! The strict policy's rules, first match wins:
//!
//! | rule            | when                                             | action |
//! |-----------------|--------------------------------------------------|--------|
//! | trusted-host    | hostname matches `always-alive`                  | keep   |
//! | holder-alive    | process or host evidence says alive              | keep   |
//! | young-exclusive | exclusive and younger than `exclusive-min-age`   | keep   |
//! | process-dead    | process evidence (same host) says dead           | remove |
//! | host-gone       | host evidence says dead                          | remove |
//! | expired         | older than `stale-after`                         | remove |
//! | fresh           | otherwise                                        | keep   |
//! | unreadable      | the file could not be read                       | keep   |
//!
//! Each function decides about one input and returns its verdict; the glue in
//! `lib.rs` puts them in the request's order.

use crate::bindings::lockwarden::policy::types::{
    Action, Liveness, Lock, PolicyError, PolicyInfo, SettingInfo, Timestamp, UnreadableLock,
    Verdict,
};

const SECOND: i64 = 1_000_000_000;
/// restic's stale age, the shortest `stale-after`: a live restic refreshes its
/// lock every 5 minutes but may go 22.5 minutes between refreshes.
const RESTIC_STALE_AGE: i64 = 30 * 60 * SECOND;

/// The validated settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Older than this (nanoseconds) with no evidence either way: stale.
    pub stale_after: i64,
    /// Exclusive locks younger than this (nanoseconds) are always kept.
    pub exclusive_min_age: i64,
    /// Hostname patterns (`*` matches any run of characters) always kept.
    pub always_alive: Vec<String>,
}

impl Settings {
    /// Validates key/value settings; unknown keys and bad values are errors
    /// that name the key.
    pub fn parse(pairs: &[(String, String)]) -> Result<Settings, PolicyError> {
        let mut settings = Settings {
            stale_after: 30 * 60 * SECOND,
            exclusive_min_age: 2 * 3600 * SECOND,
            always_alive: Vec::new(),
        };
        for (key, value) in pairs {
            match key.as_str() {
                "stale-after" => settings.stale_after = duration(key, value)?,
                "exclusive-min-age" => settings.exclusive_min_age = duration(key, value)?,
                "always-alive" => {
                    settings.always_alive = value
                        .split(',')
                        .map(str::trim)
                        .filter(|p| !p.is_empty())
                        .map(str::to_owned)
                        .collect();
                }
                _ => {
                    return Err(PolicyError::InvalidSetting(format!(
                        "unknown setting `{key}`: this policy accepts stale-after, \
                         exclusive-min-age and always-alive"
                    )));
                }
            }
        }
        if settings.stale_after < RESTIC_STALE_AGE {
            return Err(PolicyError::InvalidSetting(
                "setting `stale-after`: must be at least 30m (restic's stale age): a live restic \
                 may go 22.5 minutes between refreshes, so a shorter age removes live locks. \
                 Evidence removes a dead holder's lock sooner: process-dead for locks from this \
                 machine, host-gone with --hosts-command or --hosts-file (a pod inventory)"
                    .into(),
            ));
        }
        Ok(settings)
    }
}

/// Parses whole hours, minutes and seconds: `2h`, `90m`, `1h30m`, `45s`.
fn duration(key: &str, value: &str) -> Result<i64, PolicyError> {
    let bad = || {
        PolicyError::InvalidSetting(format!(
            "setting `{key}`: `{value}` is not a duration such as 2h, 90m, 1h30m or 45s"
        ))
    };
    let mut total: i64 = 0;
    let mut number: Option<i64> = None;
    for c in value.chars() {
        if let Some(digit) = c.to_digit(10) {
            let n = number.unwrap_or(0).checked_mul(10).ok_or_else(bad)?;
            number = Some(n.checked_add(i64::from(digit)).ok_or_else(bad)?);
            continue;
        }
        let unit = match c {
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => return Err(bad()),
        };
        let part = number.take().ok_or_else(bad)?;
        total = part
            .checked_mul(unit * SECOND)
            .and_then(|p| total.checked_add(p))
            .ok_or_else(bad)?;
    }
    if number.is_some() || value.is_empty() {
        return Err(bad());
    }
    Ok(total)
}

/// `*` matches any run of characters; everything else matches itself,
/// ignoring ASCII case (hostnames are case-insensitive). One pass that lets
/// the last `*` seen take one more character whenever the rest fails, so
/// time grows with the lengths' product at worst, never exponentially.
pub fn matches(pattern: &str, hostname: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let h: Vec<char> = hostname.chars().collect();
    let (mut pi, mut hi) = (0, 0);
    // The last `*`, and how much of the hostname it covers so far.
    let mut star: Option<(usize, usize)> = None;
    while hi < h.len() {
        if p.get(pi) == Some(&'*') {
            star = Some((pi, hi));
            pi += 1;
        } else if p.get(pi).is_some_and(|c| c.eq_ignore_ascii_case(&h[hi])) {
            pi += 1;
            hi += 1;
        } else if let Some((at, covered)) = star {
            star = Some((at, covered + 1));
            pi = at + 1;
            hi = covered + 1;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// `text` in double quotes, escaped: a quote, a backslash, tab, carriage
/// return, newline and NUL by name, every other control character as
/// `\u{hex}` (a lock's hostname is the holder's word: no control character
/// reaches a reason raw). The Python and JavaScript examples quote the same
/// way.
pub fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\n' => out.push_str("\\n"),
            '\0' => out.push_str("\\0"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The policy's description of itself.
pub fn info() -> PolicyInfo {
    let setting = |name: &str, default: &str, help: &str| SettingInfo {
        name: name.into(),
        default_value: default.into(),
        help: help.into(),
    };
    PolicyInfo {
        name: "lockwarden-strict-example".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        contract_version: lockwarden_wit::VERSION.into(),
        description: "An example policy, stricter than the default: never removes locks from \
            hosts matching always-alive, nor exclusive locks younger than exclusive-min-age; \
            otherwise removes locks whose holder is known gone or that are older than \
            stale-after."
            .into(),
        settings: vec![
            setting(
                "stale-after",
                "30m",
                "a lock older than this, holder unknown, is stale; at least 30m (2h, 90m, 1h30m)",
            ),
            setting(
                "exclusive-min-age",
                "2h",
                "exclusive locks younger than this are never removed",
            ),
            setting(
                "always-alive",
                "",
                "comma-separated hostname patterns (* wildcard) whose locks are never removed",
            ),
        ],
    }
}

/// Decides about one lock. `process` is `None` when the lock is from another
/// host.
// Longer than 60 lines: the strict policy's rules as one chain, first match
// wins, so that an author reads the order in which they apply in one place.
pub fn decide(
    now: i64,
    settings: &Settings,
    lock: &Lock,
    process: Option<&Liveness>,
    host: &Liveness,
) -> Verdict {
    let age = now.saturating_sub(lock.time);
    let (action, rule, reason) = if let Some(pattern) = settings
        .always_alive
        .iter()
        .find(|p| matches(p, &lock.hostname))
    {
        (
            Action::Keep,
            "trusted-host",
            format!(
                "host {} matches always-alive pattern {}",
                quoted(&lock.hostname),
                quoted(pattern)
            ),
        )
    } else if let Some(Liveness::Alive(d)) = process.filter(|p| matches!(p, Liveness::Alive(_))) {
        (
            Action::Keep,
            "holder-alive",
            format!("holder process is alive: {d}"),
        )
    } else if let Liveness::Alive(d) = host {
        (
            Action::Keep,
            "holder-alive",
            format!("holder host is alive: {d}"),
        )
    } else if lock.exclusive && age < settings.exclusive_min_age {
        (
            Action::Keep,
            "young-exclusive",
            format!(
                "exclusive lock is {}s old, younger than exclusive-min-age {}s",
                age / SECOND,
                settings.exclusive_min_age / SECOND
            ),
        )
    } else if let Some(Liveness::Dead(d)) = process {
        (
            Action::Remove,
            "process-dead",
            format!("holder process {} is gone: {d}", lock.pid),
        )
    } else if let Liveness::Dead(d) = host {
        (
            Action::Remove,
            "host-gone",
            format!("holder host {} is gone: {d}", quoted(&lock.hostname)),
        )
    } else if age > settings.stale_after {
        (
            Action::Remove,
            "expired",
            format!(
                "lock is {}s old, older than stale-after {}s, and no holder is known",
                age / SECOND,
                settings.stale_after / SECOND
            ),
        )
    } else {
        (
            Action::Keep,
            "fresh",
            format!("lock is {}s old", age / SECOND),
        )
    };
    Verdict {
        action,
        rule: rule.into(),
        reason,
    }
}

/// Unreadable files are kept for a person to look at, with the host's age
/// evidence for them (`stored-at`, `first-seen`) in the reason when it has
/// any.
pub fn unreadable(now: Timestamp, file: &UnreadableLock) -> Verdict {
    let ages: Vec<String> = [(file.stored_at, "stored"), (file.first_seen, "first seen")]
        .into_iter()
        .filter_map(|(at, what)| Some(format!("{what} {}s ago", now.saturating_sub(at?) / SECOND)))
        .collect();
    let ages = if ages.is_empty() {
        String::new()
    } else {
        format!(", {}", ages.join(", "))
    };
    Verdict {
        action: Action::Keep,
        rule: "unreadable".into(),
        reason: format!("cannot read the lock file ({}){ages}; kept", file.problem),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: i64 = 3600 * SECOND;

    fn lock(exclusive: bool, time: i64, hostname: &str) -> Lock {
        Lock {
            id: "l".into(),
            time,
            exclusive,
            hostname: hostname.into(),
            username: "u".into(),
            pid: 1,
            uid: 0,
            gid: 0,
            first_seen: None,
            stored_at: None,
        }
    }

    fn rule(settings: &Settings, lock: &Lock, process: Option<Liveness>, host: Liveness) -> String {
        decide(10 * HOUR, settings, lock, process.as_ref(), &host).rule
    }

    #[test]
    fn young_exclusive_locks_survive_even_a_dead_holder() {
        let s = Settings::parse(&[]).expect("defaults");
        let dead = || Liveness::Dead("gone".into());
        let unknown = || Liveness::Unknown("?".into());
        let young = lock(true, 10 * HOUR - HOUR, "a");
        assert_eq!(rule(&s, &young, Some(dead()), dead()), "young-exclusive");
        let old = lock(true, 10 * HOUR - 2 * HOUR - SECOND, "a");
        assert_eq!(rule(&s, &old, Some(dead()), unknown()), "process-dead");
        let shared = lock(false, 10 * HOUR - HOUR, "a");
        assert_eq!(rule(&s, &shared, None, unknown()), "expired");
        assert_eq!(
            rule(&s, &shared, None, Liveness::Alive("up".into())),
            "holder-alive"
        );
    }

    #[test]
    fn trusted_hosts_match_patterns_case_insensitively() {
        assert!(matches("db-*", "DB-primary"));
        assert!(matches("*.lan", "nas.lan"));
        assert!(!matches("db-*", "web-1"));
        assert!(matches("ßackup-*", "ßackup-1"));
        assert!(matches("*a*b", "xxaxxbxb"));
        assert!(!matches("*a*b", "xxaxxbxc"));
        assert!(matches("**", "") && matches("a*", "a") && !matches("a", ""));
        // Stars that once took exponential time.
        assert!(!matches("*a*a*a*a*a*a*a*a*b", &"a".repeat(40)));
        assert_eq!(
            quoted("a\"b\\\n\u{1b}\u{85}é"),
            "\"a\\\"b\\\\\\n\\u{1b}\\u{85}é\""
        );
        let pairs = [("always-alive".to_owned(), "db-*, nas".to_owned())];
        let s = Settings::parse(&pairs).expect("valid");
        let old = lock(false, 0, "nas");
        assert_eq!(
            rule(&s, &old, None, Liveness::Dead("x".into())),
            "trusted-host"
        );
    }

    #[test]
    fn unreadable_files_are_kept_with_their_ages() {
        let file = |stored_at, first_seen| UnreadableLock {
            id: "junk".into(),
            size: 3,
            problem: "not JSON".into(),
            stored_at,
            first_seen,
        };
        let now = 10 * HOUR;
        let bare = unreadable(now, &file(None, None));
        assert_eq!(
            (bare.action, bare.rule.as_str()),
            (Action::Keep, "unreadable")
        );
        assert_eq!(bare.reason, "cannot read the lock file (not JSON); kept");
        let aged = unreadable(now, &file(Some(now - HOUR), Some(now - 90 * SECOND)));
        assert_eq!(aged.action, Action::Keep);
        assert_eq!(
            aged.reason,
            "cannot read the lock file (not JSON), stored 3600s ago, first seen 90s ago; kept"
        );
    }

    #[test]
    fn settings_are_checked() {
        for (key, value) in [
            ("stale-after", "0"),
            ("stale-after", "30"),
            ("stale-after", "90s"),
            ("stale-after", "29m59s"),
            ("colour", "red"),
        ] {
            let pairs = [(key.to_owned(), value.to_owned())];
            assert!(Settings::parse(&pairs).is_err(), "{key}={value}");
        }
        let short = [("stale-after".to_owned(), "5m".to_owned())];
        match Settings::parse(&short) {
            Err(PolicyError::InvalidSetting(m)) => {
                assert!(m.contains("at least 30m") && m.contains("host-gone"), "{m}")
            }
            other => panic!("5m accepted: {other:?}"),
        }
        for ok in ["30m", "1800s", "2h"] {
            let pairs = [("stale-after".to_owned(), ok.to_owned())];
            assert!(Settings::parse(&pairs).is_ok(), "{ok}");
        }
        let pairs = [("exclusive-min-age".to_owned(), "1h30m".to_owned())];
        assert_eq!(
            Settings::parse(&pairs).expect("valid").exclusive_min_age,
            90 * 60 * SECOND
        );
    }
}
