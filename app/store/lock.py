"""The one-writer lock of a workspace: an OS lock on ``<workspace>/kestrel.lock``.

Two processes writing one workspace each keep the paper account in memory and write it back, so
they fill orders twice, merge two orders into one row and overwrite each other's balances. A
process that writes a workspace therefore holds an exclusive ``flock`` on its lock file for as
long as it runs; a second one is refused and told who holds it (pid, command line, since when,
which the holder writes into the file).

The lock, not the file's content, decides: the OS drops a ``flock`` when its process dies, even
by ``kill -9``, so a file left behind by a dead process never blocks anyone, and the file is
never deleted (deleting a lock file lets two processes lock two different files). ``flock``
locks belong to an open file, so a second lock in the same process is refused too: one process
builds one runtime per workspace.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from app.domain.clock import ms_to_iso
from app.domain.errors import OperationalError

LOCK_FILE_NAME = "kestrel.lock"
_COMMAND_LIMIT = 300  # characters of the holder's command line kept in the file


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds a workspace, as the holder wrote it into the lock file."""

    pid: int
    command: str
    since_ms: int

    def describe(self) -> str:
        return f"process {self.pid} ({self.command}), since {ms_to_iso(self.since_ms)}"


class WorkspaceBusyError(OperationalError):
    """Another live process writes this workspace; this one must not."""

    def __init__(self, root: Path, holder: Holder | None, hint: str = "") -> None:
        who = holder.describe() if holder is not None else "another Kestrel process"
        super().__init__(
            f"the workspace {root} is in use by {who}. A workspace has one writer: close that "
            f"one first, or give this command another --workspace{hint}"
        )
        self.root = root
        self.holder = holder


def this_command() -> str:
    """This process's command line, as a person typed it (``kestrel tool …``)."""
    argv = list(sys.argv) or ["?"]
    first = Path(argv[0])
    if first.name == "__main__.py":  # python -m <package>
        argv[0] = "kestrel" if first.parent.name == "app" else f"python -m {first.parent.name}"
    elif first.name == "kestrel":
        argv[0] = "kestrel"
    text = shlex.join(argv)
    return text if len(text) <= _COMMAND_LIMIT else text[: _COMMAND_LIMIT - 1] + "…"


def read_holder(path: Path) -> Holder | None:
    """The holder named in the lock file, if that process is alive (else the file is stale)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        holder = Holder(int(data["pid"]), str(data["command"]), int(data["since_ms"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:  # alive, another user's
        pass
    return holder


class WorkspaceLock:
    """An exclusive hold on one workspace, released by ``release`` or by this process's end."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, path: Path, command: str | None = None) -> WorkspaceLock:
        """Take the workspace's lock now, without waiting.

        Args:
            path: the lock file (``<workspace>/kestrel.lock``); created when missing.
            command: what to tell a refused process this one is; default: this command line.

        Raises:
            WorkspaceBusyError: another process (or another runtime in this one) holds it.
            OperationalError: the lock file cannot be created.
        """
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise OperationalError(f"cannot create the workspace lock {path}: {exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise WorkspaceBusyError(path.parent, _wait_for_holder(path)) from None
        except OSError as exc:
            os.close(fd)
            raise OperationalError(f"cannot lock the workspace {path.parent}: {exc}") from exc
        holder = {"pid": os.getpid(), "command": command or this_command(),
                  "since_ms": int(time.time() * 1000)}
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(holder).encode("utf-8"), 0)
        except OSError:
            # the lock holds all the same; a refused process then names no holder
            pass
        return cls(path, fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Let the next process in (idempotent). The file stays: see the module docstring."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _wait_for_holder(path: Path, timeout_s: float = 0.5) -> Holder | None:
    """The holder's details; a holder that has just taken the lock writes them a moment later."""
    deadline = time.monotonic() + timeout_s
    while True:
        holder = read_holder(path)
        if holder is not None or time.monotonic() >= deadline:
            return holder
        time.sleep(0.02)
