"""The check a workspace database passes before anything writes to it.

SQLite opens an empty file as a new database and writes into a file with a corrupt page without
a word; either would quietly turn a person's account into a fresh one or into worse damage. So a
writer opening a workspace first checks its ``kestrel.db``: not empty, a SQLite file, and
``PRAGMA quick_check`` clean. A damaged file is refused and left exactly as it is, and the error
names the newest backup and the command that restores it. Whether each index agrees with its table
is left to the full integrity check every backup runs (``backups``), which repairs an index and
refuses to copy a damaged table: it costs about three quick checks, too much for every open.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from app.domain.errors import OperationalError
from app.store.backups import Backup, list_backups, quick_check

SQLITE_HEADER = b"SQLite format 3\x00"
RESTORE_COMMAND = "kestrel restore-backup"


class DamagedDatabaseError(OperationalError):
    """The workspace database cannot be trusted; a person must restore a backup or move it."""

    def __init__(self, path: Path, problem: str, backup: Backup | None, workspace: Path) -> None:
        if backup is not None:
            advice = (
                f"The newest backup is {backup.describe()}; restore it with: "
                f"{RESTORE_COMMAND} --workspace {workspace} (the damaged file is then moved "
                "aside, not deleted)."
            )
        else:
            advice = (
                "There is no backup of it. Move the file elsewhere to start this workspace with a "
                "fresh paper account (its orders, agents and history stay in the moved file)."
            )
        super().__init__(
            f"the workspace database {path} cannot be used: {problem}. It was left untouched. "
            + advice
        )
        self.path = path
        self.problem = problem
        self.backup = backup


def check_database(db_path: Path, backup_folder: Path) -> None:
    """Refuse a database that is empty, not SQLite, or fails SQLite's quick check.

    A missing file passes: the workspace is new.

    Raises:
        DamagedDatabaseError: naming the problem and the newest backup.
    """
    problem = _problem(db_path)
    if problem is not None:
        backups = list_backups(backup_folder)
        raise DamagedDatabaseError(
            db_path, problem, backups[0] if backups else None, db_path.parent
        )


def _problem(db_path: Path) -> str | None:
    try:
        with db_path.open("rb") as handle:
            header = handle.read(len(SQLITE_HEADER))
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"it cannot be read ({exc})"
    if not header:
        return "it is empty (0 bytes), so it holds no account at all"
    if header != SQLITE_HEADER:
        return "it is not a SQLite database"
    try:
        problems = quick_check(db_path)
    except sqlite3.DatabaseError as exc:
        return f"SQLite cannot read it ({exc})"
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        shown = "; ".join(problems[:3]) + more
        return f"its integrity check failed: {shown}"
    return None
