"""The questions of one evaluation, asked in one batch.

Contract 0.2.0 has a single evidence import, `liveness.ask`: a policy
collects every question it has, each distinct question once, and calls it
once per evaluation; the answers come back in the questions' order.
"""

from typing import Callable, Dict, List, Optional, Tuple

from wit_world.imports.types import (
    HostQuestion,
    Liveness,
    Liveness_Unknown,
    ProcessQuestion,
    Question,
    Question_Host,
    Question_Process,
)


class Batch:
    """Every distinct question asked so far, and where each one is."""

    def __init__(self) -> None:
        self.questions: List[Question] = []
        self._index: Dict[Tuple[str, Optional[int], int], int] = {}

    def process(self, hostname: str, pid: int, since: int) -> int:
        """Whether process `pid` on `hostname`, which wrote a lock at `since`,
        still holds it: the index of the answer to come."""
        return self._add(
            (hostname, pid, since),
            lambda: Question_Process(ProcessQuestion(hostname, pid, since)),
        )

    def host(self, hostname: str, since: int) -> int:
        """Whether host `hostname`, which wrote a lock at `since`, still
        exists: the index of the answer to come."""
        return self._add(
            (hostname, None, since), lambda: Question_Host(HostQuestion(hostname, since))
        )

    def _add(self, key, question: Callable[[], Question]) -> int:
        if key not in self._index:
            self._index[key] = len(self.questions)
            self.questions.append(question())
        return self._index[key]

    def answer(self, ask: Callable[[List[Question]], List[Liveness]]) -> "Answers":
        """Asks every question at once with `ask` (the host's
        `liveness.ask`), or not at all when there is none."""
        return Answers(ask(self.questions) if self.questions else [])


class Answers:
    """The host's answers, by the index `Batch` gave each question."""

    def __init__(self, answers: List[Liveness]) -> None:
        self._answers = answers

    def get(self, index: int) -> Liveness:
        """The answer at `index`; `unknown` if the host gave none, which is
        never a reason to remove a lock."""
        if 0 <= index < len(self._answers):
            return self._answers[index]
        return Liveness_Unknown("the host gave no answer")
