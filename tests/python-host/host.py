"""A lockwarden host in Python: runs a policy component with wasmtime-py,
serving the contract's imports (clock, liveness, log) from a recorded request,
the format `lockwarden policy eval` reads.

Like the Rust and Node.js hosts, it gives the policy no environment, no
arguments and no files (WASI is linked with an empty configuration),
instantiates it afresh for every evaluation, and checks the verdicts as the
Rust host does: one per input, in the request's order, and no removal of an
unreadable file without 30 minutes of the host's own age evidence.

It runs policies of the current contract (CONTRACT) and, like the Rust host,
of the one before (CONTRACT_0_1): those get the facts that one has (no
stored-at, no first sighting of unreadable files), one question per liveness
call, and name each verdict's input by id.

    python host.py COMPONENT CASES_DIR

prints {"policy": {...}, "cases": [{"name", "observed"}]}, the form
`lockwarden policy conformance --json` and tests/node-host print; a case that
needs a newer contract than the policy implements is skipped.
"""

import json
import re
import sys
from calendar import timegm
from pathlib import Path

from wasmtime import Engine, Store, WasiConfig
from wasmtime.component import Component, Linker, Record, Variant

CONTRACT = "0.2.0"
"""The contract this host implements."""
CONTRACT_0_1 = "0.1.0"
"""The older contract it also runs."""
UNREADABLE_MIN_AGE = 30 * 60 * 1_000_000_000
"""Restic's stale age (ns): the least age evidence for removing an unreadable file."""
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

    def answer_process(self, hostname, pid, since):
        return self.process.get((hostname, pid, since), NOT_RECORDED)

    def answer_host(self, hostname, since):
        return self.host.get((hostname, since), NOT_RECORDED)

    def ask(self, questions):
        """One answer per question, in order."""
        answers = []
        for q in questions:
            f = q.payload
            if q.tag == "process":
                answers.append(self.answer_process(f.hostname, f.pid, f.since))
            else:
                answers.append(self.answer_host(f.hostname, f.since))
        return answers


NOT_RECORDED = Variant("unknown", "no answer recorded")


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


def optional_time(text):
    return None if text is None else parse_time(text)


def prepare(recorded):
    """The contract's request, the clock reading and the evidence."""
    evidence = Recorded(recorded.get("local_hostname"))
    locks = []
    for lock in recorded.get("locks", []):
        time = parse_time(lock["time"])
        hostname, pid = lock.get("hostname", ""), lock.get("pid", 0)
        evidence.insert(hostname, pid, time, liveness(lock.get("process", "unknown")),
                        liveness(lock.get("host", "unknown")))
        locks.append(record(
            id=lock["id"], time=time, exclusive=lock.get("exclusive", False),
            hostname=hostname, username=lock.get("username", ""), pid=pid,
            uid=lock.get("uid", 0), gid=lock.get("gid", 0),
            first_seen=optional_time(lock.get("first_seen")),
            stored_at=optional_time(lock.get("stored_at"))))
    unreadable = [record(id=u["id"], size=u.get("size", 0), problem=u["problem"],
                         stored_at=optional_time(u.get("stored_at")),
                         first_seen=optional_time(u.get("first_seen")))
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


def fields(r, *names):
    """A copy of record `r` with only the fields `names`."""
    return record(**{n: getattr(r, n.replace("_", "-")) for n in names})


LOCK_FIELDS_0_1 = ("id", "time", "exclusive", "hostname", "username", "pid", "uid", "gid",
                   "first_seen")


def request_0_1(request):
    """The CONTRACT_0_1 form of a request: the same locks and files without the
    newer facts."""
    return record(repository=request.repository,
                  locks=[fields(x, *LOCK_FIELDS_0_1) for x in request.locks],
                  unreadable=[fields(x, "id", "size", "problem") for x in request.unreadable],
                  settings=request.settings)


def positional(request, verdicts):
    """Puts a CONTRACT_0_1 policy's verdicts, which name their input by id, in the
    request's order, as the Rust host does: no unknown id, none twice, none missing,
    and no `remove` of an unreadable file."""
    slots = {x.id: None for x in request.locks + request.unreadable}
    for v in verdicts:
        if v.id not in slots:
            raise RuntimeError(f"a verdict for `{v.id}`, which was not in its input")
        if slots[v.id] is not None:
            raise RuntimeError(f"two verdicts for `{v.id}`")
        slots[v.id] = v
    missing = [i for i, v in slots.items() if v is None]
    if missing:
        raise RuntimeError(f"no verdict for {len(missing)} of {len(slots)} inputs "
                           f"(first: `{missing[0]}`)")
    # Contract 0.1.0 promised that no unreadable file is ever removed.
    for x in request.unreadable:
        if slots[x.id].action == "remove":
            raise RuntimeError(f"`remove` for `{x.id}`, an unreadable file: a contract 0.1.0 "
                               "policy never removes one")
    return ([slots[x.id] for x in request.locks], [slots[x.id] for x in request.unreadable])


def check_verdicts(request, now, locks, unreadable):
    """One verdict per lock and unreadable file, and no `remove` of an unreadable
    file without 30 minutes of the host's own age evidence (stored-at or
    first-seen against now)."""
    for what, want, got in (("locks", len(request.locks), len(locks)),
                            ("unreadable files", len(request.unreadable), len(unreadable))):
        if want != got:
            raise RuntimeError(f"{got} verdicts for {want} {what}")
    for file, verdict in zip(request.unreadable, unreadable):
        ages = [now - at for at in (getattr(file, "stored-at"), getattr(file, "first-seen"))
                if at is not None]
        if verdict.action == "remove" and not any(a >= UNREADABLE_MIN_AGE for a in ages):
            raise RuntimeError(f"`remove` for `{file.id}`, an unreadable file for which the host "
                               "holds no age evidence of at least 30m")


def compatible(found, supported):
    """Semver compatibility as the component model uses it: 0.x.* with 0.x.*,
    N.* with N.*."""
    def key(v):
        parts = v.split(".")
        return tuple(parts[:2]) if parts[0] == "0" else parts[0]
    return key(found) == key(supported)


def exported_contract(engine, component):
    """The contract of the `lockwarden:policy/policy` interface the component exports."""
    prefix = "lockwarden:policy/policy@"
    names = [n for n in component.type.exports(engine) if n.startswith(prefix)]
    if not names:
        raise RuntimeError("the component does not export lockwarden:policy/policy; "
                           "is it a lockwarden policy?")
    found = names[0][len(prefix):]
    for contract in (CONTRACT, CONTRACT_0_1):
        if compatible(found, contract):
            return contract, names[0]
    raise RuntimeError(f"policy implements contract {found}, this host {CONTRACT} or "
                       f"{CONTRACT_0_1}")


def newer(needs, has):
    """Whether contract version `needs` is newer than `has`, by number."""
    def key(v):
        return tuple(int(p) for p in v.split("."))
    return key(needs) > key(has)


class Policy:
    """A policy component, instantiated afresh for every call."""

    def __init__(self, path):
        self.engine = Engine()
        self.component = Component.from_file(self.engine, str(path))
        self.contract, self.interface = exported_contract(self.engine, self.component)
        self.info = self._call(0, Recorded(None), [], "info")

    def _call(self, now, evidence, logs, name, *args):
        store = Store(self.engine)
        store.set_wasi(WasiConfig())  # no environment, arguments, files or stdio
        linker = Linker(self.engine)
        linker.add_wasip2()
        version = self.interface.split("@", 1)[1]
        with linker.root() as root:
            with root.add_instance(f"lockwarden:policy/clock@{version}") as clock:
                clock.add_func("now", lambda _store: now)
            with root.add_instance(f"lockwarden:policy/liveness@{version}") as live:
                live.add_func("local-hostname", lambda _store: evidence.local_hostname)
                if self.contract == CONTRACT_0_1:
                    live.add_func("process", lambda _store, host, pid, since:
                                  evidence.answer_process(host, pid, since))
                    live.add_func("host", lambda _store, host, since:
                                  evidence.answer_host(host, since))
                else:
                    live.add_func("ask", lambda _store, questions: evidence.ask(questions))
            with root.add_instance(f"lockwarden:policy/log@{version}") as log:
                def write(_store, level, message):
                    if len(logs) < MAX_LOG_LINES:
                        logs.append({"level": level, "message": truncate(message)})
                log.add_func("log", write)
        instance = linker.instantiate(store, self.component)
        interface = instance.get_export_index(store, self.interface)
        func = instance.get_func(store, instance.get_export_index(store, name, interface))
        result = func(store, *args)
        func.post_return(store)
        return result

    def evaluate(self, recorded):
        """{verdicts, logs}, or {error: {kind, message}} when the policy refuses."""
        now, request, evidence = prepare(recorded)
        logs = []
        old = self.contract == CONTRACT_0_1
        result = self._call(now, evidence, logs, "evaluate",
                            request_0_1(request) if old else request)
        if isinstance(result, Variant):
            return {"error": {"kind": result.tag, "message": result.payload}}
        locks, unreadable = positional(request, result) if old else (result.locks,
                                                                     result.unreadable)
        check_verdicts(request, now, locks, unreadable)
        inputs = zip(request.locks + request.unreadable, locks + unreadable)
        return {
            "verdicts": [{"id": x.id, "action": v.action, "rule": v.rule, "reason": v.reason}
                         for x, v in inputs],
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
        needs = recorded.get("contract")
        if needs is not None and newer(needs, policy.contract):
            cases.append({"name": path.stem, "skipped": True, "needs_contract": needs})
        else:
            cases.append({"name": path.stem, "observed": policy.evaluate(recorded)})
    info = policy.info.__dict__
    doc = {"policy": {"name": info["name"], "version": info["version"],
                      "contract_version": info["contract-version"]},
           "contract": policy.contract, "cases": cases}
    print(json.dumps(doc, ensure_ascii=False, indent=2))


if __name__ == "__main__":
    main()
