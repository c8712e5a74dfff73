"""The one-writer lock of a workspace: an OS lock on the workspace folder, described in
``<workspace>/kestrel.lock``.

Two processes writing one workspace each keep the paper account in memory and write it back, so
they fill orders twice, merge two orders into one row and overwrite each other's balances. A
process that writes a workspace therefore holds an exclusive ``flock`` on the workspace folder for
as long as it runs; a second one is refused and told who holds it (pid, command line, since when,
which the holder writes into ``kestrel.lock``).

Why the folder and not the file: a lock on ``kestrel.lock`` held on the open file, so deleting the
file (a person tidying up, a sync tool) let the next process create a new file, lock it and write
alongside the first. A folder holding ``kestrel.db`` cannot be deleted from under its writer, and
the lock stays on it whatever happens to the files inside. Why not ``kestrel.db`` itself: on BSD
and macOS ``flock`` and SQLite's own ``fcntl`` locks on one file conflict, so the writer would
lock SQLite out of its own database; and a POSIX ``lockf`` lock is dropped as soon as any
descriptor of the file in the process is closed, which SQLite does as connections close.
``kestrel.lock`` is still locked too, after the folder: a Kestrel older than this locks only the
file, and must be refused as well (and refuse us). It is only the holder's description: a
refused process never writes it, and when it was deleted the holder is looked up in the kernel's
lock table (``/proc/locks``, Linux) instead.

The lock, not the file's content, decides: the OS drops a ``flock`` when its process dies, even by
``kill -9``, so a file left behind by a dead process never blocks anyone. ``flock`` locks belong to
an open file, so a second lock in the same process is refused too: one process builds one runtime
per workspace. Where a folder cannot be locked (``flock`` on a folder fails on some network file
systems) only ``kestrel.lock`` is locked, as before, and the log says so. ``fcntl`` is POSIX:
Linux and macOS lock as described (on macOS a holder whose ``kestrel.lock`` was deleted is named
"another Kestrel process": there is no ``/proc/locks``); Windows has no ``fcntl``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from app.domain.clock import ms_to_iso
from app.domain.errors import OperationalError

logger = logging.getLogger(__name__)

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
    return _shown(argv)


def _shown(argv: list[str]) -> str:
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

    def __init__(self, path: Path, fd: int, folder_fd: int | None = None) -> None:
        self.path = path
        self._fd: int | None = fd
        self._folder_fd = folder_fd

    @classmethod
    def acquire(cls, path: Path, command: str | None = None) -> WorkspaceLock:
        """Take the workspace's lock now, without waiting.

        Args:
            path: the lock file (``<workspace>/kestrel.lock``); created when missing. The
                workspace is the folder it is in, which must exist.
            command: what to tell a refused process this one is; default: this command line.

        Raises:
            WorkspaceBusyError: another process (or another runtime in this one) holds it.
            OperationalError: the workspace folder or the lock file cannot be opened or locked.
        """
        folder = path.parent
        folder_fd = _lock_folder(folder, path)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            _unlock(folder_fd)
            raise OperationalError(f"cannot create the workspace lock {path}: {exc}") from exc
        try:
            _lock(fd, folder)
        except WorkspaceBusyError:  # an older Kestrel, which locks only this file, holds it
            os.close(fd)
            holder = _wait_for_holder(path)
            _unlock(folder_fd)
            raise WorkspaceBusyError(folder, holder) from None
        except OperationalError:
            os.close(fd)
            _unlock(folder_fd)
            raise
        written = {"pid": os.getpid(), "command": command or this_command(),
                   "since_ms": int(time.time() * 1000)}
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(written).encode("utf-8"), 0)
        except OSError:
            # the lock holds all the same; a refused process then names no holder
            pass
        return cls(path, fd, folder_fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Let the next process in (idempotent). The file stays: deleting it is harmless now,
        but a Kestrel older than this would take a new file for a free workspace."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        folder_fd, self._folder_fd = self._folder_fd, None
        _unlock(fd)
        _unlock(folder_fd)


def _lock_folder(folder: Path, path: Path) -> int | None:
    """The open workspace folder, locked; None where a folder cannot be locked (some network
    file systems): the lock file alone is locked then, as before.

    Raises:
        WorkspaceBusyError: another process holds the folder.
    """
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return None  # opening the lock file beside it fails too, and says why
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _wait_for_holder(path) or _kernel_holder(fd)
        os.close(fd)
        raise WorkspaceBusyError(folder, holder) from None
    except OSError as exc:
        os.close(fd)
        logger.warning("the workspace folder %s cannot be locked (%s); only %s is locked, which "
                       "a deleted file no longer guards", folder, exc, path.name)
        return None
    return fd


def _lock(fd: int, folder: Path) -> None:
    """An exclusive ``flock`` on ``fd`` now, or WorkspaceBusyError (without a holder)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as exc:
        raise WorkspaceBusyError(folder, None) from exc
    except OSError as exc:
        raise OperationalError(f"cannot lock the workspace {folder}: {exc}") from exc


def _unlock(fd: int | None) -> None:
    if fd is None:
        return
    with contextlib.suppress(OSError):
        fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


def _kernel_holder(fd: int) -> Holder | None:
    """The process holding the ``flock`` on the open folder ``fd``, from the kernel's lock table
    (Linux; None elsewhere or when it cannot be told): the one place that still names the
    holder when its ``kestrel.lock`` was deleted."""
    try:
        st = os.fstat(fd)
        table = Path("/proc/locks").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    for line in table.splitlines():
        # "3: FLOCK  ADVISORY  WRITE 4242 00:2f:1234 0 EOF" ("3: -> FLOCK ..." is a waiter)
        fields = line.split()
        if len(fields) < 6 or fields[1] != "FLOCK" or fields[3] != "WRITE":
            continue
        try:
            major, minor, inode = fields[5].split(":")
            pid = int(fields[4])
            same = (int(inode) == st.st_ino and int(major, 16) == os.major(st.st_dev)
                    and int(minor, 16) == os.minor(st.st_dev))
        except ValueError:
            continue
        if same and pid > 0:
            return _process_holder(pid)
    return None


def _process_holder(pid: int) -> Holder | None:
    """A holder described from ``/proc``: its command line and when the process started."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode("utf-8", "replace")
        started = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        boot = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime "))
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    words = [word for word in argv.split("\0") if word]
    if words[1:3] == ["-m", "app"]:  # python -m app: what a person types as kestrel
        words = ["kestrel", *words[3:]]
    elif words and Path(words[0]).name == "kestrel":
        words[0] = "kestrel"
    since_s = boot + started / os.sysconf("SC_CLK_TCK")
    return Holder(pid, _shown(words or ["?"]), int(since_s * 1000))


def _wait_for_holder(path: Path, timeout_s: float = 0.5) -> Holder | None:
    """The holder's details; a holder that has just taken the lock writes them a moment later."""
    deadline = time.monotonic() + timeout_s
    while True:
        holder = read_holder(path)
        if holder is not None or time.monotonic() >= deadline:
            return holder
        time.sleep(0.02)
