"""Run a ``kestrel`` command in this process without leaving its logging set-up behind.

Why: ``app.cli.main.main`` configures the root logger (a console handler, the level) as the
process it normally owns; a test that calls it in-process must hand the next test the logging it
found, or tests that read log records see another level and handler.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from app.cli.main import main


@contextmanager
def kept_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
                handler.close()
        for handler in handlers:
            if handler not in root.handlers:
                root.addHandler(handler)
        root.setLevel(level)


def run_main(argv: Sequence[str]) -> int:
    """``kestrel argv`` in this process; the root logger is left as it was."""
    with kept_logging():
        return main(list(argv))
