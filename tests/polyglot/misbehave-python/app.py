"""A Python policy that misbehaves on purpose, in the way its setting
`misbehave` names, so the tests can show that lockwarden stops a Python
policy with the same limits as a Rust one:

- `spin`: loops for ever (the epoch deadline stops it);
- `hog`: allocates without end (the memory cap stops it);
- `open-file`: reads /etc/passwd (a stubbed WASI call: it traps);
- `clock`: reads the wall clock (a stubbed WASI call: it traps);
- `print`: writes to stdout (a stubbed WASI call: it traps);
- `random`: draws from `random` (seeded when the component was built, so
  every evaluation draws the same numbers);
- anything else: keeps every lock, saying so.

Built like the Python example (examples/policies/strict-python/build.sh),
and once more without --stub-wasi, which lockwarden refuses at load.
"""

from wit_world import exports
from wit_world.imports.types import Action, PolicyInfo, SettingInfo, Verdict, Verdicts


def misbehave(how: str) -> str:
    if how == "spin":
        while True:
            pass
    if how == "hog":
        hoard = []
        while True:
            hoard.append(bytearray(1 << 20))
    if how == "open-file":
        with open("/etc/passwd", encoding="utf-8") as f:
            return "read: " + f.read(64)
    if how == "clock":
        import time

        return "time: %d" % time.time_ns()
    if how == "print":
        print("a word on stdout")
        return "printed"
    if how == "random":
        import random

        return "random: %r" % random.random()
    return "behaved"


class Policy(exports.Policy):
    def info(self) -> PolicyInfo:
        return PolicyInfo(
            "misbehave-python",
            "0.0.0",
            "0.2.0",
            "Misbehaves on purpose, as its setting says.",
            [SettingInfo("misbehave", "", "spin, hog, open-file, clock, print or random")],
        )

    def evaluate(self, request) -> Verdicts:
        detail = misbehave(dict(request.settings).get("misbehave", ""))
        keep = Verdict(Action.KEEP, "misbehave", detail)
        return Verdicts([keep for _ in request.locks], [keep for _ in request.unreadable])
