"""A full disk: recognising it, and one world's account of what it could not record.

A full disk reaches Kestrel in three shapes: SQLite's "database or disk is full" (SQLITE_FULL);
an ``OSError`` ENOSPC or EDQUOT from a file write (memory files, backups, logs); and EFBIG, when
a file reaches the size this process may write (``ulimit -f``, RLIMIT_FSIZE). SQLite maps only
ENOSPC to SQLITE_FULL: EFBIG, and a full disk met while syncing or growing a file, come out of
it as a plain "disk I/O error" (SQLITE_IOERR_WRITE, _FSYNC, _TRUNCATE...). Such an I/O error is
taken for a full disk only when this process has a file-size limit or the disk holding the
workspace has (almost) no space left; any other I/O error stays what it was, a failing disk is
not a full one.

The database loses nothing to a full disk: each SQLite transaction commits whole or not at all,
so every order and fill committed before it is kept, and one that could not commit never took
effect. What a full disk can lose is what waits in memory to be written (the audit rows a ledger
keeps pending), a memory file an agent was writing, a backup, log lines. A ``DiskFullWatch`` is
one world's account of that: the first disk-full error trips it, which stops a run (``kestrel
run`` cancels its work, closes the world and exits with ``EXIT_DISK_FULL``), and each part that
could not write something names it here, so the run ends with one message saying exactly what
was not recorded, instead of a traceback per failed write and rows dropped without a word.
"""

from __future__ import annotations

import errno
import shutil
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from app.domain.errors import OperationalError

if TYPE_CHECKING:
    import asyncio

try:
    import resource
except ImportError:  # Windows: no file-size limit to meet
    resource = None  # type: ignore[assignment]

T = TypeVar("T")

SQLITE_FULL = 13
SQLITE_IOERR = 10
# SQLite's I/O errors met while writing, syncing or growing a file (extended result codes)
_WRITE_IOERRS = frozenset({
    SQLITE_IOERR,
    SQLITE_IOERR | (3 << 8),  # WRITE
    SQLITE_IOERR | (4 << 8),  # FSYNC
    SQLITE_IOERR | (5 << 8),  # DIR_FSYNC
    SQLITE_IOERR | (6 << 8),  # TRUNCATE
    SQLITE_IOERR | (19 << 8),  # SHMSIZE
})
_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT})
# below this much free space, an I/O error while writing is the disk filling up
LOW_SPACE_BYTES = 1 << 20
SHOWN_PER_KIND = 12  # what the message lists of each kind; the count says the rest


def file_size_limit() -> int | None:
    """The largest file this process may write (``ulimit -f``), None when unlimited."""
    if resource is None:
        return None
    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    return None if soft == resource.RLIM_INFINITY else int(soft)


def _size_limit_reason() -> str:
    limit = file_size_limit()
    shown = "" if limit is None else f" ({limit:,} bytes, ulimit -f)"
    return f"a file reached the largest size this process may write{shown}"


def _errno_reason(number: int) -> str:
    if number == errno.EFBIG:
        return _size_limit_reason()
    if number == errno.EDQUOT:
        return "the disk quota is used up"
    return "no space left on the device"


def _io_error_reason(near: Path | None) -> str | None:
    """Whether an SQLite I/O error while writing is the disk filling up (see the docstring)."""
    if file_size_limit() is not None:
        return _size_limit_reason()
    if near is None:
        return None
    try:
        free = shutil.disk_usage(near).free
    except OSError:
        return None
    if free < LOW_SPACE_BYTES:
        return f"disk I/O error with {free:,} bytes free"
    return None


def _reason_of(exc: BaseException, near: Path | None) -> str | None:
    if isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS:
        return _errno_reason(exc.errno)
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)
        if code is not None and code & 0xFF == SQLITE_FULL:
            return "database or disk is full"
        if code in _WRITE_IOERRS or (code is None and "disk I/O error" in str(exc)):
            return _io_error_reason(near)
    return None


def disk_full_reason(exc: BaseException | None, near: Path | None = None) -> str | None:
    """Why ``exc`` (or an error it was raised from) is the disk filling up, in a few words;
    None when it is something else.

    Args:
        near: a path on the disk in question (the workspace), to judge an SQLite I/O error by
            the space left there.
    """
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        reason = _reason_of(exc, near)
        if reason is not None:
            return reason
        exc = exc.__cause__ or exc.__context__
    return None


class DiskFullError(OperationalError):
    """The disk holding a workspace is full; the message says what stopped, what was not
    recorded, and to free space and run again (``kestrel`` exits with ``EXIT_DISK_FULL``)."""


def disk_full_error(where: Path | None, reason: str, what: str) -> DiskFullError:
    """The one message of a full disk: where, why, ``what`` it stopped, and what to do."""
    place = "the workspace" if where is None else str(where)
    return DiskFullError(
        f"the disk holding {place} is full ({reason}): {what}. Free space on that disk and run "
        "again."
    )


class DiskFullStop(Exception):  # noqa: N818 - a signal to the caller, not a failure of its own
    """``DiskFullWatch.run`` stopped its work because the disk filled up."""


@dataclass(frozen=True, slots=True)
class Kind:
    """A kind of record that could not be written, in the singular and the plural."""

    one: str
    many: str

    def count(self, n: int) -> str:
        return f"{n} {self.one if n == 1 else self.many}"


AUDIT_CALLS = Kind("tool call of the audit trail", "tool calls of the audit trail")
RISK_DECISIONS = Kind("Risk Guard decision", "Risk Guard decisions")
MEMORY_WRITES = Kind("memory write", "memory writes")
BACKUPS = Kind("backup", "backups")
LOG_LINES = Kind("log line", "log lines")


@dataclass(frozen=True, slots=True)
class _Item:
    kind: Kind
    what: str
    agent_id: str | None
    count: int = 1


class DiskFullWatch:
    """One world's account of a full disk: the first error trips it; what could not be
    written is named to it (from any thread); ``run`` stops a coroutine when it trips.

    Args:
        workspace: the folder whose disk it watches (None: a world in memory).
    """

    def __init__(self, workspace: Path | None) -> None:
        self.workspace = workspace
        self.reason: str | None = None
        self.agent_names: dict[str, str] = {}  # filled before the stores close, for the message
        self._items: list[_Item] = []
        self._interrupted: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tripped: asyncio.Event | None = None
        self._listeners: list[tuple[asyncio.AbstractEventLoop, Callable[[str], object]]] = []

    def listen(self, loop: asyncio.AbstractEventLoop, told: Callable[[str], object]) -> None:
        """Call ``told(reason)`` on ``loop`` when the watch trips (at once if it has): the
        window, which runs no ``run`` of its own, stops its work and says so."""
        with self._lock:
            self._listeners.append((loop, told))
            reason = self.reason
        if reason is not None:
            loop.call_soon_threadsafe(told, reason)

    @property
    def full(self) -> bool:
        return self.reason is not None

    def check(self, exc: BaseException) -> bool:
        """Whether ``exc`` is the disk filling up; the first one trips the watch."""
        reason = disk_full_reason(exc, self.workspace)
        if reason is None:
            return False
        self.trip(reason)
        return True

    def trip(self, reason: str) -> None:
        """The disk is full: keep the first reason and wake ``run`` (from any thread)."""
        with self._lock:
            if self.reason is not None:
                return
            self.reason = reason
            loop, tripped = self._loop, self._tripped
            listeners = list(self._listeners)
        if loop is not None and tripped is not None and not loop.is_closed():
            loop.call_soon_threadsafe(tripped.set)
        for where, told in listeners:
            if not where.is_closed():
                where.call_soon_threadsafe(told, reason)

    def unrecorded(
        self, kind: Kind, what: str, agent_id: str | None = None, *, count: int = 1
    ) -> None:
        """Name a record (or ``count`` of them, ``what`` says which) the full disk kept from
        being written (from any thread)."""
        with self._lock:
            self._items.append(_Item(kind, what, agent_id, count))

    def interrupted(self, what: str, agent_id: str) -> None:
        """Name an agent's task that was stopped half-way (it runs again at the next start)."""
        with self._lock:
            self._interrupted.append((what, agent_id))

    async def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` to its end, unless the disk fills first: then it is cancelled and
        ``DiskFullStop`` raised, as when it fails with a disk-full error itself. The caller
        closes its world, then raises ``error()``, which names what was not recorded."""
        # imported here: ``kestrel``'s error handling imports this module, and the window's
        # first second must not pay for asyncio
        import asyncio
        self._loop = asyncio.get_running_loop()
        self._tripped = asyncio.Event()
        if self.full:
            self._tripped.set()
        task = asyncio.ensure_future(work)
        waiter = asyncio.ensure_future(self._tripped.wait())
        try:
            await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if task.cancelled():
            if self.full:
                raise DiskFullStop(self.reason)
            raise asyncio.CancelledError
        exc = task.exception()
        if exc is None:
            return task.result()
        # once the disk is full, whatever failed next failed of it (a write after the first)
        if self.check(exc) or self.full:
            raise DiskFullStop(self.reason) from exc
        raise exc

    def error(self, what: str) -> DiskFullError:
        """The message ``kestrel`` ends with: the disk, why, ``what`` stopped, and what could
        not be recorded (by name) or was interrupted."""
        message = str(disk_full_error(self.workspace, self.reason or "no space", what))
        lines = [message, self.not_recorded()]
        if self._interrupted:
            tasks = "; ".join(f"{what} of {self._name(agent)}" for what, agent in
                              self._interrupted)
            lines.append(f"Interrupted, and run again at the next start: {tasks}.")
        return DiskFullError("\n".join(lines))

    def not_recorded(self) -> str:
        """``3 tool calls of the audit trail and 1 memory write were not recorded: ...``."""
        with self._lock:
            items = list(self._items)
        if not items:
            return "Nothing waiting to be written was lost."
        kinds: dict[Kind, list[_Item]] = {}
        for item in items:
            kinds.setdefault(item.kind, []).append(item)
        totals = {kind: sum(item.count for item in found) for kind, found in kinds.items()}
        counts = [kind.count(total) for kind, total in totals.items()]
        said = counts[0] if len(counts) == 1 else ", ".join(counts[:-1]) + " and " + counts[-1]
        verb = "was" if sum(totals.values()) == 1 else "were"
        parts = []
        for found in kinds.values():
            # the same record made several times (a tool called again in the same minute) is
            # said once with its count
            same = Counter(self._describe(item) for item in found)
            shown = [what if n == 1 else f"{n} x {what}" for what, n in same.items()]
            if len(shown) > SHOWN_PER_KIND:
                shown[SHOWN_PER_KIND:] = [f"and {len(shown) - SHOWN_PER_KIND} more"]
            parts.append(", ".join(shown))
        return f"{said} {verb} not recorded: " + "; ".join(parts) + "."

    def _describe(self, item: _Item) -> str:
        return item.what if item.agent_id is None else f"{item.what} ({self._name(item.agent_id)})"

    def _name(self, agent_id: str) -> str:
        return self.agent_names.get(agent_id, agent_id[:8])
