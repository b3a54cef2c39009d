"""An example lockwarden policy in Python, stricter than the default: the
same rules as lockwarden's Rust example (see rules.py).

build.sh builds it with componentize-py (pinned in requirements.txt) against
the contract `lockwarden:policy@0.2.0` (wit/policy.wit), with `--stub-wasi`:
the component imports nothing but the contract (docs/writing-a-policy.md in
lockwarden's sources). This file is glue only: the decisions are in
rules.py, the one batch of questions in questions.py.
"""

from wit_world import exports
from wit_world.imports import clock, liveness
from wit_world.imports.types import EvaluateRequest, PolicyInfo, Verdicts

import questions
import rules


class Policy(exports.Policy):
    """The export: what lockwarden calls."""

    def info(self) -> PolicyInfo:
        return rules.info()

    def evaluate(self, request: EvaluateRequest) -> Verdicts:
        settings = rules.parse_settings(request.settings)
        now = clock.now()
        local = liveness.local_hostname()

        # First every question, each once; then one call to the host.
        batch = questions.Batch()
        asked = [
            (
                # Only the host's own processes can be asked about.
                batch.process(lock.hostname, lock.pid, lock.time)
                if local == lock.hostname
                else None,
                batch.host(lock.hostname, lock.time),
            )
            for lock in request.locks
        ]
        answers = batch.answer(liveness.ask)

        # One verdict per input, in the request's order.
        locks = [
            rules.decide(
                now,
                settings,
                lock,
                None if process is None else answers.get(process),
                answers.get(host),
            )
            for lock, (process, host) in zip(request.locks, asked)
        ]
        unreadable = [rules.unreadable(now, file) for file in request.unreadable]
        return Verdicts(locks, unreadable)
