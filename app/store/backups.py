"""Rotating backups of the workspace database, and restoring one.

A backup is a full copy of ``kestrel.db`` made with SQLite's online backup API, so it is a
consistent snapshot even while the agents write: ``<workspace>/backups/kestrel-<UTC time>.db``.
A copy is written under a temporary name, checked and only then renamed into place, so a listed
backup is always a whole, healthy database; the newest ``KEEP`` are kept.

The check is ``PRAGMA integrity_check``, the full one: the start-up check (``health``) runs only
``quick_check``, which is cheap enough for every open but does not compare an index with its
table, so an index missing rows (a query through it silently misses them) passed it. A backup
reads every page anyway, on its own thread, and it checks the copy, so the writer is not held up
(measured on a 200 MB database: copy 0.56 s, quick_check 0.21 s, integrity_check 0.59 s).
What it finds decides:

- only indexes disagree with their tables: the table rows are the truth and an index can be
  rebuilt from them, so the workspace's database is repaired (``REINDEX`` of those indexes), the
  log says which, and the backup is taken of the repaired database (``Backup.repaired``);
- a table itself is damaged (or SQLite cannot read a page): no backup is taken, since a damaged
  copy must never push a healthy backup out of the rotation, and the error says so and how to
  restore the newest backup.

Every copy records the workspace's id (``app.store.identity``), which a restore checks.

While a process writes the workspace a ``BackupKeeper`` thread takes one when the newest is older
than its interval (at open, then periodically) and, for the app, a last one at close when
anything changed since: a backup of a large database takes seconds and must never stall the
window's event loop.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sqlite3
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from app.domain.clock import ms_to_iso
from app.domain.errors import OperationalError
from app.store.disk_full import DiskFullWatch, disk_full_reason
from app.store.identity import stamp_copy

logger = logging.getLogger(__name__)

BACKUP_DIR_NAME = "backups"
KEEP = 5
INTERVAL_S = 3600.0
_PREFIX = "kestrel-"
_SUFFIX = ".db"
_STAMP = "%Y%m%dT%H%M%S"
_SIDE_FILES = ("-wal", "-shm")
# what integrity_check says of an index that disagrees with its table (and of nothing else)
_INDEX_PROBLEM = re.compile(
    r"^(?:row \d+ missing from|wrong # of entries in|non-unique entry in) index (\S+)$")
_CORRUPT_CODES = (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB: the file, not the moment, is at fault


@dataclass(frozen=True, slots=True)
class Backup:
    """One backup file; ``repaired``: the indexes rebuilt in the database before it was taken."""

    path: Path
    taken_ms: int
    size: int
    repaired: tuple[str, ...] = ()

    def describe(self) -> str:
        return f"{self.path} (taken {ms_to_iso(self.taken_ms)}, {self.size:,} bytes)"


def list_backups(folder: Path) -> list[Backup]:
    """The backups in ``folder``, newest first (files with any other name are ignored)."""
    found = []
    with contextlib.suppress(FileNotFoundError):
        for entry in folder.iterdir():
            name = entry.name
            if not (name.startswith(_PREFIX) and name.endswith(_SUFFIX)):
                continue
            stamp = name[len(_PREFIX): -len(_SUFFIX)]
            try:
                when = datetime.strptime(stamp[:15], _STAMP).replace(tzinfo=UTC)
                millis = int(stamp[16:19]) if len(stamp) >= 19 else 0
                size = entry.stat().st_size
            except (ValueError, OSError):
                continue
            found.append(Backup(entry, int(when.timestamp() * 1000) + millis, size))
    found.sort(key=lambda b: (b.taken_ms, b.path.name), reverse=True)
    return found


def quick_check(path: Path) -> list[str]:
    """SQLite's quick check of a database file: ``[]`` when healthy, else what is wrong.

    Raises:
        sqlite3.DatabaseError: the file is not a database at all.
    """
    conn = sqlite3.connect(str(path), isolation_level=None)
    try:
        rows = [row[0] for row in conn.execute("PRAGMA quick_check").fetchall()]
    finally:
        conn.close()
    return [] if rows == ["ok"] else rows


def integrity_check(path: Path) -> list[str]:
    """SQLite's full integrity check (indexes compared with their tables too): ``[]`` when
    healthy, else what is wrong (at most SQLite's first 100 findings).

    Raises:
        sqlite3.DatabaseError: the file is not a database, or a page cannot be read at all.
    """
    conn = sqlite3.connect(str(path), isolation_level=None)
    try:
        rows = [row[0] for row in conn.execute("PRAGMA integrity_check").fetchall()]
    finally:
        conn.close()
    return [] if rows == ["ok"] else rows


def damaged_indexes(problems: list[str]) -> tuple[str, ...] | None:
    """The indexes named when every problem is an index disagreeing with its table; None when
    anything else is wrong (a table's pages, a constraint, the file)."""
    names: dict[str, None] = {}
    for problem in problems:
        match = _INDEX_PROBLEM.match(problem.strip())
        if match is None:
            return None
        names[match.group(1)] = None
    return tuple(names)


class DamagedDatabaseBackupError(OperationalError):
    """The database is damaged beyond its indexes: no backup was taken of it."""


def _copy(db_path: Path, partial: Path) -> None:
    """A self-contained copy of the database (no -wal beside it, whatever mode it runs in)."""
    _remove(partial)
    source = sqlite3.connect(str(db_path), isolation_level=None)
    try:
        target = sqlite3.connect(str(partial), isolation_level=None)
        try:
            source.backup(target)
            target.execute("PRAGMA journal_mode=DELETE")
            # which workspace it is a backup of, even before its database recorded it
            stamp_copy(target, db_path.parent)
        finally:
            target.close()
    finally:
        source.close()


def _reindex(db_path: Path, indexes: tuple[str, ...]) -> None:
    """Rebuild the indexes from their tables, in the live database (waits for the writer)."""
    conn = sqlite3.connect(str(db_path), isolation_level=None, timeout=30)
    try:
        known = {row[0] for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index'")}
        for name in indexes:
            if name in known:
                conn.execute('REINDEX "' + name.replace('"', '""') + '"')
    finally:
        conn.close()


def _damaged(db_path: Path, folder: Path, problems: list[str]) -> DamagedDatabaseBackupError:
    kept = len(list_backups(folder))
    shown = "; ".join(" ".join(p.split()) for p in problems[:3])
    more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
    return DamagedDatabaseBackupError(
        f"{db_path} is damaged beyond its indexes: {shown}{more}. No backup was taken, so the "
        f"{kept} backups in {folder} are kept as they are. Close Kestrel and put the newest "
        f"back with: kestrel restore-backup --workspace {db_path.parent}"
    )


def take_backup(
    db_path: Path, folder: Path, *, keep: int = KEEP, now_ms: int | None = None
) -> Backup:
    """Copy the database into ``folder`` as a new backup; drop the oldest beyond ``keep``.

    Raises:
        OperationalError: the copy could not be made, or fails its check (it is not kept).
    """
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    when = datetime.fromtimestamp(now_ms / 1000, tz=UTC)
    name = f"{_PREFIX}{when.strftime(_STAMP)}.{now_ms % 1000:03d}Z{_SUFFIX}"
    final = folder / name
    partial = folder / (name + ".partial")
    repaired: tuple[str, ...] = ()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        _copy(db_path, partial)
        problems = integrity_check(partial)
        if problems:
            indexes = damaged_indexes(problems)
            if not indexes:
                raise _damaged(db_path, folder, problems)
            _reindex(db_path, indexes)
            repaired = indexes
            logger.warning(
                "%s: the index %s disagreed with its table (%s); it was rebuilt (REINDEX) "
                "before this backup", db_path, ", ".join(indexes), problems[0].strip())
            _copy(db_path, partial)
            problems = integrity_check(partial)
            if problems:
                raise _damaged(db_path, folder, problems)
        partial.replace(final)
    except sqlite3.DatabaseError as exc:
        _remove(partial)
        if getattr(exc, "sqlite_errorcode", 0) & 0xFF in _CORRUPT_CODES:
            raise _damaged(db_path, folder, [str(exc)]) from exc
        raise OperationalError(f"cannot back up {db_path} into {folder}: {exc}") from exc
    except OSError as exc:
        _remove(partial)
        raise OperationalError(f"cannot back up {db_path} into {folder}: {exc}") from exc
    except OperationalError:
        _remove(partial)
        raise
    for old in list_backups(folder)[keep:]:
        _remove(old.path)
    return Backup(final, now_ms, final.stat().st_size, repaired)


def restore_backup(db_path: Path, backup: Path) -> Path | None:
    """Put ``backup`` in place of the database; the file it replaces is renamed aside.

    Call it only while holding the workspace's lock. Returns where the replaced database went
    (``kestrel.db.damaged-<UTC time>``, with its -wal/-shm beside it), or None if there was none.

    Raises:
        OperationalError: the backup is missing or damaged (nothing is changed then), or a file
            cannot be moved.
    """
    try:
        problems = quick_check(backup)
    except sqlite3.Error as exc:
        problems = [str(exc)]
    if not backup.is_file() or problems:
        why = "it does not exist" if not backup.is_file() else f"it is damaged ({problems[0]})"
        raise OperationalError(f"cannot restore {backup}: {why}; nothing was changed")
    stamp = datetime.now(tz=UTC).strftime(_STAMP)
    aside = db_path.with_name(f"{db_path.name}.damaged-{stamp}")
    moved: Path | None = None
    try:
        if db_path.exists():
            db_path.replace(aside)
            moved = aside
        for side in _SIDE_FILES:
            extra = db_path.with_name(db_path.name + side)
            if extra.exists():
                extra.replace(aside.with_name(aside.name + side))
        partial = db_path.with_name(db_path.name + ".restoring")
        source = sqlite3.connect(str(backup), isolation_level=None)
        try:
            target = sqlite3.connect(str(partial), isolation_level=None)
            try:
                source.backup(target)
            finally:
                target.close()
        finally:
            source.close()
        partial.replace(db_path)
    except (OSError, sqlite3.Error) as exc:
        raise OperationalError(
            f"cannot restore {backup} to {db_path}: {exc}"
            + (f"; the replaced database is at {moved}" if moved else "")
        ) from exc
    return moved


def _remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def _changed_ms(db_path: Path) -> int:
    """When the database (or its WAL) was last written."""
    newest = 0
    for candidate in (db_path, db_path.with_name(db_path.name + "-wal")):
        with contextlib.suppress(FileNotFoundError):
            newest = max(newest, candidate.stat().st_mtime_ns // 1_000_000)
    return newest


class BackupKeeper:
    """Takes backups of one database on its own thread while a process writes the workspace.

    Args:
        interval_s: a backup is due when the newest is older than this (checked at start and
            every interval).
    """

    def __init__(
        self, db_path: Path, folder: Path, *, keep: int = KEEP, interval_s: float = INTERVAL_S
    ) -> None:
        if interval_s <= 0 or keep < 1:
            raise ValueError(f"need interval_s > 0 and keep >= 1, got {interval_s}, {keep}")
        self.db_path = db_path
        self.folder = folder
        self.keep = keep
        self.interval_s = interval_s
        self.taken: list[Backup] = []
        self.last_error: str | None = None
        self.disk_full: str | None = None  # why the last backup failed, when the disk was full
        # the world's account of a full disk (set by the world that holds the workspace)
        self.disk: DiskFullWatch | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError(f"the backup keeper of {self.db_path} is already running")
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._run, name=f"backup:{self.db_path.name}", daemon=True
        )
        self._thread.start()

    def stop(self, *, final: bool) -> None:
        """Stop the thread; with ``final``, back up once more if anything changed since the last
        backup (call it off the event loop: it can take seconds)."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        if final:
            newest = list_backups(self.folder)
            if not newest or _changed_ms(self.db_path) >= newest[0].taken_ms:
                self._take()

    def _run(self) -> None:
        while True:
            newest = list_backups(self.folder)
            age_s = (time.time() * 1000 - newest[0].taken_ms) / 1000 if newest else None
            if age_s is None or age_s >= self.interval_s:
                self._take()
                wait = self.interval_s
            else:
                wait = self.interval_s - age_s
            if self._stop.wait(wait):
                return

    def _take(self) -> None:
        try:
            self.taken.append(take_backup(self.db_path, self.folder, keep=self.keep))
            self.last_error = None
            self.disk_full = None
        except OperationalError as exc:
            # the app runs on; the next interval tries again and the log says why. A copy needs
            # room for the whole database, so one that does not fit does not stop the app; once
            # the app is stopping for a full disk, though, that run says so, naming this backup
            self.disk_full = disk_full_reason(exc, self.folder.parent)
            said_by_run = self.disk_full is not None and self.disk is not None and self.disk.full
            if str(exc) != self.last_error:
                logger.log(logging.INFO if said_by_run else logging.WARNING, "%s", exc)
            self.last_error = str(exc)
