"""A disk that fills up under ``kestrel run``: one clear message, a clean stop, nothing lost unsaid.

The disk is filled for real, without root: each run is a subprocess whose file-size limit
(RLIMIT_FSIZE, ``ulimit -f``) is set before it starts, with SIGXFSZ ignored, so a write that
reaches the limit fails with EFBIG part-way, as a write to a full disk fails with ENOSPC. SQLite
reports that as a "disk I/O error", the memory files, backups and logs as OSError: each is met
somewhere in the run, and the run must end the same way whichever comes first.
"""

from __future__ import annotations

import resource
import signal
import subprocess
import sys
from pathlib import Path

from tests.helpers.paths import REPO

EXIT_DISK_FULL = 74  # documented in app.cli.common (sysexits' EX_IOERR)


def limited(limit: int | None):  # noqa: ANN201 - a preexec_fn
    """Start the child with files limited to ``limit`` bytes (None: unlimited)."""

    def preexec() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails: EFBIG
        if limit is not None:
            hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))

    return preexec


def kestrel(*args: str | Path, limit: int | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - our own command line
        [sys.executable, "-m", "app", *map(str, args)], capture_output=True, text=True,
        timeout=300, cwd=REPO, check=False, preexec_fn=limited(limit),  # noqa: PLW1509
    )


def test_a_disk_too_full_to_open_the_workspace_says_so_and_runs_nothing(tmp_path):
    workspace = tmp_path / "ws"
    done = kestrel("run", "--workspace", workspace, "--for", "1h", limit=100_000)
    assert done.returncode == EXIT_DISK_FULL, done.stderr[-3000:]
    assert done.stderr.strip().splitlines() == [
        f"kestrel: the disk holding {workspace} is full (a file reached the largest size this "
        f"process may write (100,000 bytes, ulimit -f)): the database {workspace}/kestrel.db "
        "could not be opened. Free space on that disk and run again."
    ]
    assert "Offline replay" not in done.stdout
