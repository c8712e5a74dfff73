"""``kestrel restore-backup``: list the workspace database's backups, or put one back.

Only a backup of this workspace is put back (``app.store.restore_check``): the live file itself,
another workspace's backup and a file that is not a Kestrel database are refused with the reason
(exit 2). Before anything is replaced the command shows what the backup holds (when it was taken,
its orders, balances and equity) beside what it replaces, and asks at the terminal; ``--yes``
restores without asking, and without a terminal to ask at nothing is replaced without it. The
database a restore replaces is renamed aside (``kestrel.db.damaged-<time>``), never deleted;
nothing may hold the workspace meanwhile.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.cli.common import EXIT_OK, EXIT_USAGE, terminal_ask, workspace_of
from app.domain.clock import ms_to_iso
from app.store.lock import WorkspaceLock

EXIT_DECLINED = 1  # the person answered no: nothing was changed


def add_restore_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workspace", type=Path, metavar="DIR",
                        help="workspace folder; default: this checkout or the user data folder")
    parser.add_argument("--list", action="store_true", help="only list the backups")
    parser.add_argument("--backup", type=Path, metavar="FILE",
                        help="the backup to restore (one of this workspace's); default: the "
                             "newest")
    parser.add_argument("--yes", action="store_true",
                        help="restore without asking (what it restores is still shown)")


def cmd_restore_backup(args: argparse.Namespace) -> int:
    from app.store.backups import list_backups, restore_backup
    from app.store.restore_check import NotAKestrelDatabase, check_restorable, read_summary

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
    plan = check_restorable(chosen, db_path=workspace.db_path, backup_dir=workspace.backup_dir,
                            workspace_id=workspace.identity())
    lock = WorkspaceLock.acquire(workspace.lock_path)
    try:
        print(f"Restore {workspace.db_path} from {chosen}")
        print(f"  the backup, taken {ms_to_iso(plan.taken_ms)}: {plan.summary.describe()}")
        if plan.note:
            print(f"  ({plan.note})")
        if workspace.db_path.exists():
            try:
                now = read_summary(workspace.db_path, held=True).describe()
            except NotAKestrelDatabase as exc:
                now = exc.reason
            print(f"  replaces the database now in place: {now}")
            print("  (that one is moved aside, not deleted)")
        if not args.yes:
            answer = terminal_ask("Type yes to restore it: ")
            if answer is None:
                print("kestrel: nothing was restored: confirm at a terminal, or add --yes to "
                      "restore without asking", file=sys.stderr)
                return EXIT_USAGE
            if answer.strip().lower() != "yes":
                print("Not restored: nothing was changed.")
                return EXIT_DECLINED
        aside = restore_backup(workspace.db_path, chosen)
    finally:
        lock.release()
    print(f"Restored {workspace.db_path} from {chosen}.")
    if aside is not None:
        print(f"The database it replaced was moved to {aside}.")
    return EXIT_OK
