"""The strict policy's rules, first match wins (the same rules, in the same
order and with the same words, as lockwarden's Rust example,
examples/policies/strict):

| rule            | when                                             | action |
|-----------------|--------------------------------------------------|--------|
| trusted-host    | hostname matches `always-alive`                  | keep   |
| holder-alive    | process or host evidence says alive              | keep   |
| young-exclusive | exclusive and younger than `exclusive-min-age`   | keep   |
| process-dead    | process evidence (same host) says dead           | remove |
| host-gone       | host evidence says dead                          | remove |
| expired         | older than `stale-after`                         | remove |
| fresh           | otherwise                                        | keep   |
| unreadable      | the file could not be read                       | keep   |

Each function decides about one input and returns its verdict; the glue in
`app.py` puts them in the request's order. Times are nanoseconds since the
epoch, as the contract gives them; arithmetic on them saturates at the
contract's 64-bit bounds, as the Rust example's does.
"""

from dataclasses import dataclass, field
from typing import List, Optional

from componentize_py_types import Err
from wit_world.imports.types import (
    Action,
    Liveness,
    Liveness_Alive,
    Liveness_Dead,
    Lock,
    PolicyError_InvalidSetting,
    PolicyInfo,
    SettingInfo,
    UnreadableLock,
    Verdict,
)

NAME = "lockwarden-strict-example-python"
VERSION = "0.2.0"
CONTRACT = "0.2.0"

SECOND = 1_000_000_000
# restic's stale age, the shortest `stale-after`: a live restic refreshes its
# lock every 5 minutes but may go 22.5 minutes between refreshes.
RESTIC_STALE_AGE = 30 * 60 * SECOND
I64_MIN, I64_MAX = -(2**63), 2**63 - 1
# What Rust's `str::trim` takes off (Unicode's White_Space): Python's own
# `strip()` takes more (U+001C..U+001F) and would read a setting otherwise.
WHITE_SPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + (
    "\u2028\u2029\u202f\u205f\u3000"
)


@dataclass
class Settings:
    """The validated settings (durations in nanoseconds)."""

    stale_after: int = 30 * 60 * SECOND
    exclusive_min_age: int = 2 * 3600 * SECOND
    always_alive: List[str] = field(default_factory=list)


def invalid(message: str) -> Err:
    """The contract's invalid-setting error, raised out of `evaluate`."""
    return Err(PolicyError_InvalidSetting(message))


def parse_settings(pairs) -> Settings:
    """Validates key/value settings; unknown keys and bad values are errors
    that name the key."""
    settings = Settings()
    for key, value in pairs:
        if key == "stale-after":
            settings.stale_after = duration(key, value)
        elif key == "exclusive-min-age":
            settings.exclusive_min_age = duration(key, value)
        elif key == "always-alive":
            patterns = (p.strip(WHITE_SPACE) for p in value.split(","))
            settings.always_alive = [p for p in patterns if p]
        else:
            raise invalid(
                f"unknown setting `{key}`: this policy accepts stale-after, "
                "exclusive-min-age and always-alive"
            )
    if settings.stale_after < RESTIC_STALE_AGE:
        raise invalid(
            "setting `stale-after`: must be at least 30m (restic's stale age): a live restic "
            "may go 22.5 minutes between refreshes, so a shorter age removes live locks. "
            "Evidence removes a dead holder's lock sooner: process-dead for locks from this "
            "machine, host-gone with --hosts-command or --hosts-file (a pod inventory)"
        )
    return settings


def duration(key: str, value: str) -> int:
    """Parses whole hours, minutes and seconds: `2h`, `90m`, `1h30m`, `45s`."""
    bad = invalid(f"setting `{key}`: `{value}` is not a duration such as 2h, 90m, 1h30m or 45s")
    total, number = 0, None
    for c in value:
        if c in "0123456789":
            number = (number or 0) * 10 + int(c)
            if number > I64_MAX:
                raise bad
            continue
        unit = {"h": 3600, "m": 60, "s": 1}.get(c)
        if unit is None or number is None:
            raise bad
        total += number * unit * SECOND
        number = None
        if total > I64_MAX:
            raise bad
    if number is not None or not value:
        raise bad
    return total


def matches(pattern: str, hostname: str) -> bool:
    """`*` matches any run of characters; everything else matches itself,
    ignoring ASCII case (hostnames are case-insensitive). One pass that lets
    the last `*` seen take one more character whenever the rest fails."""

    def fold(c: str) -> str:
        return c.lower() if "A" <= c <= "Z" else c

    pi = hi = 0
    # The last `*`, and how much of the hostname it covers so far.
    star, covered = -1, 0
    while hi < len(hostname):
        if pi < len(pattern) and pattern[pi] == "*":
            star, covered = pi, hi
            pi += 1
        elif pi < len(pattern) and fold(pattern[pi]) == fold(hostname[hi]):
            pi += 1
            hi += 1
        elif star >= 0:
            covered += 1
            pi, hi = star + 1, covered
        else:
            return False
    return all(c == "*" for c in pattern[pi:])


def saturating_sub(a: int, b: int) -> int:
    """`a - b` within the contract's 64-bit timestamps."""
    return max(I64_MIN, min(I64_MAX, a - b))


def seconds(nanoseconds: int) -> int:
    """Whole seconds, rounded toward zero as the Rust example's `/` does."""
    whole = abs(nanoseconds) // SECOND
    return whole if nanoseconds >= 0 else -whole


def quoted(text: str) -> str:
    """`text` in double quotes, escaped: a quote, a backslash, tab, carriage
    return, newline and NUL by name, every other control character as
    `\\u{hex}` (a lock's hostname is the holder's word: no control character
    reaches a reason raw), as the Rust example quotes."""
    out = []
    for c in text:
        if c in '"\\':
            out.append("\\" + c)
        elif c in "\t\r\n":
            out.append({"\t": "\\t", "\r": "\\r", "\n": "\\n"}[c])
        elif c == "\0":
            out.append("\\0")
        elif ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0:
            out.append("\\u{%x}" % ord(c))
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def info() -> PolicyInfo:
    """The policy's description of itself."""
    return PolicyInfo(
        NAME,
        VERSION,
        CONTRACT,
        "An example policy, stricter than the default: never removes locks from hosts "
        "matching always-alive, nor exclusive locks younger than exclusive-min-age; "
        "otherwise removes locks whose holder is known gone or that are older than "
        "stale-after. Written in Python.",
        [
            SettingInfo(
                "stale-after",
                "30m",
                "a lock older than this, holder unknown, is stale; at least 30m (2h, 90m, 1h30m)",
            ),
            SettingInfo(
                "exclusive-min-age", "2h", "exclusive locks younger than this are never removed"
            ),
            SettingInfo(
                "always-alive",
                "",
                "comma-separated hostname patterns (* wildcard) whose locks are never removed",
            ),
        ],
    )


def decide(
    now: int,
    settings: Settings,
    lock: Lock,
    process: Optional[Liveness],
    host: Liveness,
) -> Verdict:
    """Decides about one lock. `process` is None when the lock is from another
    host."""
    age = saturating_sub(now, lock.time)
    trusted = next((p for p in settings.always_alive if matches(p, lock.hostname)), None)
    if trusted is not None:
        return keep("trusted-host", f"host {quoted(lock.hostname)} matches always-alive pattern {quoted(trusted)}")
    if isinstance(process, Liveness_Alive):
        return keep("holder-alive", f"holder process is alive: {process.value}")
    if isinstance(host, Liveness_Alive):
        return keep("holder-alive", f"holder host is alive: {host.value}")
    if lock.exclusive and age < settings.exclusive_min_age:
        return keep(
            "young-exclusive",
            f"exclusive lock is {seconds(age)}s old, younger than exclusive-min-age "
            f"{seconds(settings.exclusive_min_age)}s",
        )
    if isinstance(process, Liveness_Dead):
        return remove("process-dead", f"holder process {lock.pid} is gone: {process.value}")
    if isinstance(host, Liveness_Dead):
        return remove("host-gone", f"holder host {quoted(lock.hostname)} is gone: {host.value}")
    if age > settings.stale_after:
        return remove(
            "expired",
            f"lock is {seconds(age)}s old, older than stale-after "
            f"{seconds(settings.stale_after)}s, and no holder is known",
        )
    return keep("fresh", f"lock is {seconds(age)}s old")


def unreadable(now: int, file: UnreadableLock) -> Verdict:
    """Unreadable files are kept for a person to look at, with the host's age
    evidence for them (`stored-at`, `first-seen`) in the reason when it has
    any."""
    ages = [
        f"{what} {seconds(saturating_sub(now, at))}s ago"
        for at, what in ((file.stored_at, "stored"), (file.first_seen, "first seen"))
        if at is not None
    ]
    listed = "".join(", " + age for age in ages)
    return keep("unreadable", f"cannot read the lock file ({file.problem}){listed}; kept")


def keep(rule: str, reason: str) -> Verdict:
    """A verdict that keeps the lock."""
    return Verdict(Action.KEEP, rule, reason)


def remove(rule: str, reason: str) -> Verdict:
    """A verdict that removes the lock."""
    return Verdict(Action.REMOVE, rule, reason)
