"""Run a ``kestrel`` command in this process without leaving its logging set-up behind.

Why: ``app.cli.main.main`` configures the root logger (a console handler, the level) as the
process it normally owns; a test that calls it in-process must hand the next test the logging it
found, or tests that read log records see another level and handler.

A fresh ``python -m app`` costs a second or more of imports before it does anything, so a test
whose subject is what a command does (not the process: its exit status as the shell sees it, a
kill, the console script) runs it here with ``run_cli``, which answers like ``subprocess.run``.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

from app.cli.main import main
from tests.helpers.logs import kept_logging


def run_main(argv: Sequence[str]) -> int:
    """``kestrel argv`` in this process; the root logger is left as it was."""
    with kept_logging():
        return main(list(argv))


@dataclass(frozen=True)
class Ran:
    """What ``subprocess.run(..., capture_output=True, text=True)`` would have given."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str


@contextmanager
def _stdin(text: str | None) -> Iterator[None]:
    saved = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO((text or "").encode()), encoding="utf-8")
    try:
        yield
    finally:
        sys.stdin = saved


def run_cli(*argv: str | Path, stdin: str | None = None) -> Ran:
    """``kestrel argv`` in this process with ``stdin`` as its input; its output captured."""
    args = [str(a) for a in argv]
    out, err = io.StringIO(), io.StringIO()
    with _stdin(stdin), redirect_stdout(out), redirect_stderr(err):
        try:
            code = run_main(args)
        except SystemExit as exc:  # argparse's refusals, as the process would have exited
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    return Ran(args, code, out.getvalue(), err.getvalue())
