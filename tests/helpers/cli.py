"""Run a ``kestrel`` command in this process without leaving its logging set-up behind.

Why: ``app.cli.main.main`` configures the root logger (a console handler, the level) as the
process it normally owns; a test that calls it in-process must hand the next test the logging it
found, or tests that read log records see another level and handler.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.cli.main import main
from tests.helpers.logs import kept_logging


def run_main(argv: Sequence[str]) -> int:
    """``kestrel argv`` in this process; the root logger is left as it was."""
    with kept_logging():
        return main(list(argv))
