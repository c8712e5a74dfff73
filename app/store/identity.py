"""Which workspace a database belongs to: an id made once per workspace, kept in two places.

``kestrel restore-backup`` once put any SQLite file in place of the workspace database (the live
file itself, another workspace's backup, a file of another program), said "Restored", and the
workspace opened on a fresh account while its real ledger sat aside. A restore now takes only a
backup of this workspace, and the id says which that is.

The id is a random hex string, kept in the workspace's ``workspace.id`` file and in its
database's ``meta`` table (``workspace_id``); every backup is a copy of the database and carries
it too (``take_backup`` writes it into a copy of a database that has none yet). The file is what a
restore compares with when the database itself is damaged or missing. A workspace made before ids
gets one the next time a process opens it for writing; its older backups have none.

When the two disagree (a ``kestrel.db`` copied in by hand from another workspace) the database
wins: the id names the account's history, which the backups copy.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import uuid
from pathlib import Path

logger = logging.getLogger(__name__)

WORKSPACE_ID_FILE = "workspace.id"
META_KEY = "workspace_id"
_SQLITE_HEADER = b"SQLite format 3\x00"


def new_id() -> str:
    return uuid.uuid4().hex


def read_id_file(root: Path) -> str | None:
    """The id in the workspace's ``workspace.id``; None when missing or unreadable."""
    try:
        text = (root / WORKSPACE_ID_FILE).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeError):
        return None
    return text or None


def database_id(db_path: Path, *, held: bool = False) -> str | None:
    """The id kept in a database's meta, read without writing; None when it has none (an old
    workspace, a file that is not Kestrel's) or cannot be read.

    ``held``: this process holds the workspace, so an ordinary connection reads it (closing last,
    it removes the ``-wal`` and ``-shm`` files, which a read-only one would leave behind).
    """
    if not db_path.is_file():
        return None
    try:
        if held:
            conn = sqlite3.connect(str(db_path), isolation_level=None)
            conn.execute("PRAGMA query_only=ON")
        else:
            conn = sqlite3.connect(f"{db_path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return None
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (META_KEY,)).fetchone()
    except sqlite3.Error:
        return None
    finally:
        conn.close()
    return str(row[0]) if row and row[0] else None


def workspace_id(root: Path, db_path: Path) -> str | None:
    """This workspace's id: its file's, else its database's; None when neither has one."""
    return read_id_file(root) or database_id(db_path)


def ensure_id_file(root: Path, db_path: Path) -> str | None:
    """Give the workspace its ``workspace.id`` before it is opened for writing, so that the first
    backup taken already records it.

    The id is the database's when it has one, else a new one (a new workspace, or one made before
    ids). Nothing is created while the database cannot be read (damaged: a restore then goes by
    where its backups are, and the id is settled once a healthy database opens). Returns the id,
    or None when it was left unsettled.
    """
    existing = read_id_file(root)
    if existing is not None:
        return existing
    if db_path.exists() and not _readable(db_path):
        return None
    identity = database_id(db_path) or new_id()
    path = root / WORKSPACE_ID_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:  # another process made it a moment ago
        return read_id_file(root)
    except OSError as exc:
        logger.warning("cannot write the workspace id %s: %s", path, exc)
        return None
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(identity + "\n")
    return identity


def record_id(root: Path, db_path: Path) -> str | None:
    """Keep the id in the database and the file alike; call it while holding the workspace.

    A database without an id takes the file's; one with another id keeps its own, and the file
    follows it (see the module docstring). Returns the workspace's id.
    """
    in_file = read_id_file(root) or ensure_id_file(root, db_path)
    in_db = database_id(db_path, held=True)
    if in_db is None:
        if in_file is None:
            return None
        try:
            conn = sqlite3.connect(str(db_path), isolation_level=None)
            try:
                conn.execute("PRAGMA busy_timeout=10000")
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO NOTHING",
                    (META_KEY, in_file),
                )
            finally:
                conn.close()
        except sqlite3.Error as exc:  # the backups still record it (``stamp_copy``)
            logger.warning("cannot record the workspace id in %s: %s", db_path, exc)
            return in_file
        return database_id(db_path, held=True) or in_file
    if in_db != in_file:
        if in_file is not None:
            logger.warning("the database %s belongs to workspace %s, not %s as %s said; the "
                           "workspace now takes the database's id", db_path, in_db, in_file,
                           root / WORKSPACE_ID_FILE)
        _write_file(root, in_db)
    return in_db


def stamp_copy(conn: sqlite3.Connection, root: Path) -> None:
    """Write the workspace's id into a copy of its database that has none yet (a backup taken
    before the database recorded it). A copy without a ``meta`` table is left as it is."""
    identity = read_id_file(root)
    if identity is None:
        return
    with contextlib.suppress(sqlite3.OperationalError):  # no meta table: not yet a ledger
        conn.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO NOTHING",
            (META_KEY, identity),
        )


def _readable(db_path: Path) -> bool:
    """Whether the file looks like a SQLite database whose tables can be listed (an empty file
    or another file is not: the id is then left for a healthy database to settle)."""
    try:
        with db_path.open("rb") as handle:
            if handle.read(len(_SQLITE_HEADER)) != _SQLITE_HEADER:
                return False
        conn = sqlite3.connect(f"{db_path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        finally:
            conn.close()
    except (OSError, sqlite3.Error):
        return False
    return True


def _write_file(root: Path, identity: str) -> None:
    path = root / WORKSPACE_ID_FILE
    temp = path.with_name(path.name + ".new")
    try:
        temp.write_text(identity + "\n", encoding="utf-8")
        temp.replace(path)
    except OSError as exc:
        logger.warning("cannot write the workspace id %s: %s", path, exc)
