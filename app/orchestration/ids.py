"""Where agent, task, job, question and notification ids come from.

Every store that makes ids takes an ``IdFactory`` instead of calling ``uuid4`` itself, so a replayed
or backtest run can use ``SeededIds`` and repeat every id exactly: the conversation that mentions a
task id, the job id in a ``job:<id>`` source and the recorded LLM answers all line up again.
"""

from __future__ import annotations

import itertools
import threading
import uuid
from typing import Protocol

# Fixed forever: changing it would change every seeded id and break recorded replays.
NAMESPACE = uuid.UUID("6f1c9d3e-2b47-5a0e-9c1d-4b7e8f2a6c35")


class IdFactory(Protocol):
    def new(self) -> str:
        """Return a fresh uuid-shaped id (36 characters, lower-case hex with dashes)."""
        ...


class RandomIds:
    """Random ids (uuid4): paper and live runs, where nothing must repeat."""

    def new(self) -> str:
        return str(uuid.uuid4())


class SeededIds:
    """Deterministic ids: ``uuid5(NAMESPACE, f"{seed}:{n}")`` for n = start, start + 1, ...

    Two factories with the same seed produce the same sequence, so a run repeated from the same
    seed on a fresh workspace repeats every id. Reusing a seed on a workspace that already holds
    its ids would collide; give ``start`` past the ids already used to continue a sequence.
    Safe to share between threads (the counter is taken under a lock).
    """

    def __init__(self, seed: str | int, start: int = 0) -> None:
        self.seed = str(seed)
        self._counter = itertools.count(start)
        self._lock = threading.Lock()

    def new(self) -> str:
        with self._lock:
            n = next(self._counter)
        return str(uuid.uuid5(NAMESPACE, f"{self.seed}:{n}"))


def keyed_id(key: str) -> str:
    """The id a store gives the thing made for ``key`` (a tool call's ``call_key``).

    A task redelivered after a crash repeats its call keys, so the repeat finds the row the first
    attempt made (a notification, a question) instead of making a second one.
    """
    return str(uuid.uuid5(NAMESPACE, f"key:{key}"))
