"""What a process holds while it writes a workspace: its lock, a checked database, backups.

Opening a workspace for writing happens in one order, here: take the one-writer lock (refused
when another process holds it), check the database (refused when damaged, file untouched), back
it up before a schema upgrade, create or upgrade the schema, and start the backup keeper. Every
runtime that writes a workspace (``kestrel tool``, ``run``, ``chat``, the window) goes through it.

An agent backtest's own workspace is held without backups: it is the run's output, made again by
running it again, and a copy of it doubled the run's size on disk (800 MB for two years of hourly
bars) and added seconds to its end.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from app.store.backups import BackupKeeper, take_backup
from app.store.db import SCHEMA_VERSION, connect
from app.store.health import check_database
from app.store.lock import WorkspaceLock


@dataclass
class WriterHold:
    """The lock and backup keeper of one writing process; ``release`` once, at its end."""

    lock: WorkspaceLock
    keeper: BackupKeeper | None  # None: held without backups

    def release(self, *, final_backup: bool = False) -> None:
        """Stop the backups (taking a last one first with ``final_backup``) and unlock.

        Call it off the event loop when ``final_backup`` is set: a backup can take seconds.
        """
        try:
            if self.keeper is not None:
                self.keeper.stop(final=final_backup)
        finally:
            self.lock.release()


def hold_for_writing(
    db_path: Path, lock_path: Path, backup_folder: Path, *, command: str | None = None,
    backups: bool = True,
) -> WriterHold:
    """Open a workspace's database for this process alone (``backups``: keep backing it up).

    Raises:
        WorkspaceBusyError: another process holds the workspace.
        DamagedDatabaseError: the database is empty, not SQLite, or fails its quick check.
        OperationalError: the database cannot be opened or upgraded.
    """
    lock = WorkspaceLock.acquire(lock_path, command)
    try:
        check_database(db_path, backup_folder)
        if 0 < _version(db_path) < SCHEMA_VERSION:
            take_backup(db_path, backup_folder)  # an upgrade can be undone by restoring it
        connect(db_path).close()
        keeper = BackupKeeper(db_path, backup_folder) if backups else None
        if keeper is not None:
            keeper.start()
    except BaseException:
        lock.release()
        raise
    return WriterHold(lock, keeper)


def _version(db_path: Path) -> int:
    if not db_path.exists():
        return 0
    conn = sqlite3.connect(str(db_path), isolation_level=None)
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    finally:
        conn.close()
