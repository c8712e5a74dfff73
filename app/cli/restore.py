"""``kestrel restore-backup``: list the workspace database's backups, or put one back.

The database a restore replaces is renamed aside (``kestrel.db.damaged-<time>``), never deleted;
nothing may hold the workspace meanwhile.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.cli.common import EXIT_OK, EXIT_USAGE, workspace_of
from app.store.lock import WorkspaceLock


def add_restore_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workspace", type=Path, metavar="DIR",
                        help="workspace folder; default: this checkout or the user data folder")
    parser.add_argument("--list", action="store_true", help="only list the backups")
    parser.add_argument("--backup", type=Path, metavar="FILE",
                        help="the backup to restore; default: the newest")


def cmd_restore_backup(args: argparse.Namespace) -> int:
    from app.store.backups import list_backups, restore_backup

    workspace = workspace_of(args)
    backups = list_backups(workspace.backup_dir)
    if args.list:
        if not backups:
            print(f"No backups of {workspace.db_path} yet (they are kept in "
                  f"{workspace.backup_dir}).")
        for backup in backups:
            print(backup.describe())
        return EXIT_OK
    chosen = args.backup.expanduser().resolve() if args.backup else None
    if chosen is None:
        if not backups:
            print(f"kestrel: there is no backup of {workspace.db_path} to restore",
                  file=sys.stderr)
            return EXIT_USAGE
        chosen = backups[0].path
    lock = WorkspaceLock.acquire(workspace.lock_path)
    try:
        aside = restore_backup(workspace.db_path, chosen)
    finally:
        lock.release()
    print(f"Restored {workspace.db_path} from {chosen}.")
    if aside is not None:
        print(f"The database it replaced was moved to {aside}.")
    return EXIT_OK


