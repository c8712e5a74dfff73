"""A backtest's progress on the terminal: bars done, bars a second and the time left.

Both kinds of backtest show the same line (tqdm, on stderr, so a report piped from stdout stays
clean). An agent backtest runs for minutes on a long file; a bare count said how far it was but
not how long the rest would take.
"""

from __future__ import annotations

import sys
from typing import Any

from tqdm import tqdm


def progress_bar(total: int, name: str) -> tqdm[Any]:
    return tqdm(total=total, desc=f"backtest {name}", unit="bar", file=sys.stderr,
                mininterval=0.5, dynamic_ncols=True)


class TerminalProgress:
    """A ``progress(done, total)`` callback drawing ``progress_bar``: opened at the first call,
    closed when the run is done, or by ``close`` when it stops before (an error, Ctrl-C), so
    what is printed next starts on its own line. A later run through the same callback (the
    rule-engine baseline after an LLM run) draws its own."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._bar: tqdm[Any] | None = None

    def __call__(self, done: int, total: int) -> None:
        if self._bar is None:
            self._bar = progress_bar(total, self.name)
        self._bar.update(done - self._bar.n)
        if done >= total:
            self.close()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
