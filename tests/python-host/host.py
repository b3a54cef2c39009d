"""A lockwarden host in Python: runs a policy component with wasmtime-py,
serving the contract's imports (clock, liveness, log) from a recorded request,
the format `lockwarden policy eval` reads.

Like the Rust and Node.js hosts, it gives the policy no environment, no
arguments and no files (WASI is linked with an empty configuration),
instantiates it afresh for every evaluation, and checks the verdicts.

    python host.py COMPONENT CASES_DIR

prints {"policy": {...}, "cases": [{"name", "observed"}]}, the form
`lockwarden policy conformance --json` and tests/node-host print.
"""

import json
import re
import sys
from calendar import timegm
from pathlib import Path

from wasmtime import Engine, Store, WasiConfig
from wasmtime.component import Component, Linker, Record, Variant

CONTRACT = "0.1.0"
MAX_LOG_LINES = 1000
MAX_LOG_BYTES = 1024
TIME = re.compile(
    r"^(\d{4})-(\d\d)-(\d\d)[Tt](\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d\d):(\d\d))$"
)


def parse_time(text):
    """Nanoseconds since the epoch of an RFC 3339 time, any offset."""
    m = TIME.match(text)
    if not m:
        raise ValueError(f"`{text}` is not an RFC 3339 time")
    y, mo, d, h, mi, s, frac, _, sign, oh, om = m.groups()
    seconds = timegm((int(y), int(mo), int(d), int(h), int(mi), int(s)))
    if sign:
        offset = int(oh) * 3600 + int(om) * 60
        seconds += -offset if sign == "+" else offset
    return seconds * 1_000_000_000 + int((frac or "").ljust(9, "0"))


SAFETY = {"dead": 0, "unknown": 1, "alive": 2}


class Recorded:
    """The answers a recorded request holds, looked up as the Rust host does:
    where two locks ask the same question, the safer answer wins."""

    def __init__(self, local_hostname):
        self.local_hostname = local_hostname
        self.process = {}
        self.host = {}

    @staticmethod
    def merge(table, key, answer):
        old = table.get(key)
        if old is None or SAFETY[answer.tag] > SAFETY[old.tag]:
            table[key] = answer

    def insert(self, hostname, pid, since, process, host):
        self.merge(self.process, (hostname, pid, since), process)
        self.merge(self.host, (hostname, since), host)


def liveness(recorded="unknown"):
    if isinstance(recorded, str):
        state, detail = recorded, None
    else:
        state, detail = recorded["state"], recorded.get("detail")
    if state not in SAFETY:
        raise ValueError(f"`{state}` is not alive, dead or unknown")
    return Variant(state, detail if detail is not None else "recorded in the request")


def record(**fields):
    """A WIT record: field names as the contract spells them (with dashes)."""
    r = Record()
    for name, value in fields.items():
        setattr(r, name.replace("_", "-"), value)
    return r


def prepare(recorded):
    """The contract's request, the clock reading and the evidence."""
    evidence = Recorded(recorded.get("local_hostname"))
    locks = []
    for lock in recorded.get("locks", []):
        time = parse_time(lock["time"])
        first = lock.get("first_seen")
        hostname, pid = lock.get("hostname", ""), lock.get("pid", 0)
        evidence.insert(hostname, pid, time, liveness(lock.get("process", "unknown")),
                        liveness(lock.get("host", "unknown")))
        locks.append(record(
            id=lock["id"], time=time, exclusive=lock.get("exclusive", False),
            hostname=hostname, username=lock.get("username", ""), pid=pid,
            uid=lock.get("uid", 0), gid=lock.get("gid", 0),
            first_seen=None if first is None else parse_time(first)))
    unreadable = [record(id=u["id"], size=u.get("size", 0), problem=u["problem"])
                  for u in recorded.get("unreadable", [])]
    repo = recorded["repository"]
    # Settings in byte order of their keys, as the Rust host passes them.
    settings = sorted(recorded.get("settings", {}).items(), key=lambda kv: kv[0].encode())
    request = record(repository=record(**repo), locks=locks, unreadable=unreadable,
                     settings=settings)
    return parse_time(recorded["now"]), request, evidence


def truncate(message):
    raw = message.encode()
    if len(raw) <= MAX_LOG_BYTES:
        return message
    end = MAX_LOG_BYTES
    while raw[end] & 0xC0 == 0x80:
        end -= 1
    return raw[:end].decode() + "…"


class Policy:
    """A policy component, instantiated afresh for every call."""

    def __init__(self, path):
        self.engine = Engine()
        self.component = Component.from_file(self.engine, str(path))
        info = self._call(0, Recorded(None), [], "info")
        if info.__dict__["contract-version"] != CONTRACT:
            raise RuntimeError(f"policy implements contract {info.__dict__['contract-version']}, "
                               f"this host {CONTRACT}")
        self.info = info

    def _call(self, now, evidence, logs, name, *args):
        store = Store(self.engine)
        store.set_wasi(WasiConfig())  # no environment, arguments, files or stdio
        linker = Linker(self.engine)
        linker.add_wasip2()
        with linker.root() as root:
            with root.add_instance(f"lockwarden:policy/clock@{CONTRACT}") as clock:
                clock.add_func("now", lambda _store: now)
            with root.add_instance(f"lockwarden:policy/liveness@{CONTRACT}") as live:
                unknown = Variant("unknown", "no answer recorded")
                live.add_func("local-hostname", lambda _store: evidence.local_hostname)
                live.add_func("process", lambda _store, host, pid, since:
                              evidence.process.get((host, pid, since), unknown))
                live.add_func("host", lambda _store, host, since:
                              evidence.host.get((host, since), unknown))
            with root.add_instance(f"lockwarden:policy/log@{CONTRACT}") as log:
                def write(_store, level, message):
                    if len(logs) < MAX_LOG_LINES:
                        logs.append({"level": level, "message": truncate(message)})
                log.add_func("log", write)
        instance = linker.instantiate(store, self.component)
        interface = instance.get_export_index(store, f"lockwarden:policy/policy@{CONTRACT}")
        func = instance.get_func(store, instance.get_export_index(store, name, interface))
        result = func(store, *args)
        func.post_return(store)
        return result

    def evaluate(self, recorded):
        """{verdicts, logs}, or {error: {kind, message}} when the policy refuses."""
        now, request, evidence = prepare(recorded)
        logs = []
        result = self._call(now, evidence, logs, "evaluate", request)
        if isinstance(result, Variant):
            return {"error": {"kind": result.tag, "message": result.payload}}
        expected = {x.id for x in request.locks + request.unreadable}
        ids = [v.id for v in result]
        if sorted(ids) != sorted(expected) or len(set(ids)) != len(ids):
            raise RuntimeError("the policy's verdicts do not cover every lock exactly once")
        return {
            "verdicts": [{"id": v.id, "action": v.action, "rule": v.rule, "reason": v.reason}
                         for v in result],
            "logs": logs,
        }


def main():
    if len(sys.argv) != 3:
        print("usage: python host.py COMPONENT CASES_DIR", file=sys.stderr)
        sys.exit(2)
    policy = Policy(sys.argv[1])
    cases = []
    for path in sorted(Path(sys.argv[2]).glob("*.json")):
        recorded = json.loads(path.read_text(encoding="utf-8"))
        cases.append({"name": path.stem, "observed": policy.evaluate(recorded)})
    info = policy.info.__dict__
    doc = {"policy": {"name": info["name"], "version": info["version"],
                      "contract_version": info["contract-version"]}, "cases": cases}
    print(json.dumps(doc, ensure_ascii=False, indent=2))


if __name__ == "__main__":
    main()
