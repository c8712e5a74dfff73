"""What a restore would put back, and whether it may: only a backup of this very workspace.

A restore replaces the workspace's account with the file it is given. Given the live database
itself, another workspace's backup or another program's SQLite file, it once said "Restored" and
the workspace opened on a fresh 10,000 USD account, the real ledger moved aside. So the file must
be a Kestrel database (its ledger tables, a schema this Kestrel knows), not the live file, and a
backup of this workspace: its recorded workspace id (``app.store.identity``) is this one's. A
backup made before workspaces had ids is taken only from this workspace's own backups folder.

``read_summary`` says what a database holds (orders, balances, the last equity), for the person to
see before anything is replaced.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path

from app.domain.clock import ms_to_iso
from app.domain.errors import OperationalError
from app.store.backups import list_backups
from app.store.db import SCHEMA_VERSION
from app.store.identity import META_KEY

SQLITE_HEADER = b"SQLite format 3\x00"
LEDGER_TABLES = ("meta", "orders", "fills", "balances")


class RestoreRefused(OperationalError):
    """The file must not replace this workspace's database; nothing was changed."""


class NotAKestrelDatabase(RestoreRefused):
    """The file cannot be read as a Kestrel database; ``reason`` says why, in a few words."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"cannot restore {path}: {reason}; nothing was changed")
        self.reason = reason


@dataclass(frozen=True, slots=True)
class DatabaseSummary:
    """What one Kestrel database holds, as a person checks it before a restore."""

    workspace_id: str | None
    orders: int
    fills: int
    balances: dict[str, Decimal] = field(default_factory=dict)
    quote_currency: str = ""
    equity: Decimal | None = None
    equity_ms: int | None = None
    live_orders: int = 0  # orders sent to a real exchange (the live order journal)

    def describe(self) -> str:
        shown = ", ".join(f"{asset} {_amount(total)}" for asset, total in
                          sorted(self.balances.items())) or "none"
        equity = "no equity recorded yet"
        if self.equity is not None:
            at = f" at {ms_to_iso(self.equity_ms)}" if self.equity_ms is not None else ""
            equity = f"equity {_amount(self.equity)} {self.quote_currency}".rstrip() + at
        live = f", {_count(self.live_orders, 'live order')}" if self.live_orders else ""
        return (f"{_count(self.orders, 'order')}, {_count(self.fills, 'fill')}{live}; "
                f"balances: {shown}; {equity}")


@dataclass(frozen=True, slots=True)
class RestorePlan:
    """A backup that may replace the workspace's database, and what it holds."""

    backup: Path
    taken_ms: int
    summary: DatabaseSummary
    note: str = ""  # why a backup without an id is accepted


def read_summary(path: Path, *, held: bool = False) -> DatabaseSummary:
    """What the Kestrel database at ``path`` holds, read without writing to it.

    Args:
        held: ``path`` is the database of a workspace this process holds. It is read through an
            ordinary connection (that writes nothing: ``query_only``), which, closing last, takes
            its ``-wal`` and ``-shm`` files away with it as every Kestrel process does; a
            read-only connection could not, and would leave them behind. Any other file is
            opened read-only.

    Raises:
        NotAKestrelDatabase: the file is missing, not SQLite, damaged, not a Kestrel database,
            or made by a newer Kestrel.
    """
    problem = _not_sqlite(path)
    if problem is not None:
        raise NotAKestrelDatabase(path, problem)
    try:
        conn = _open(path, held=held)
    except sqlite3.Error as exc:
        raise NotAKestrelDatabase(path, f"it cannot be read ({exc})") from exc
    try:
        problems = [row[0] for row in conn.execute("PRAGMA quick_check").fetchall()]
        if problems != ["ok"]:
            raise NotAKestrelDatabase(path, f"it is damaged ({problems[0]})")
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        tables = {row[0] for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        missing = [t for t in LEDGER_TABLES if t not in tables]
        if version == 0 or missing:
            lacking = missing or list(LEDGER_TABLES)
            raise NotAKestrelDatabase(
                path, f"it is a SQLite file but not a Kestrel database (it has no "
                      f"{', '.join(lacking)} table{'s' if len(lacking) > 1 else ''} of a "
                      "Kestrel ledger)")
        if version > SCHEMA_VERSION:
            raise NotAKestrelDatabase(
                path, f"it was written by a newer Kestrel (schema {version}, this one knows up "
                      f"to {SCHEMA_VERSION})")
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        balances = {asset: _decimal(total) for asset, total in
                    conn.execute("SELECT asset, total FROM balances")}
        orders = int(conn.execute("SELECT COUNT(*) FROM orders").fetchone()[0])
        fills = int(conn.execute("SELECT COUNT(*) FROM fills").fetchone()[0])
        last = None
        if "equity_curve" in tables:
            last = conn.execute(
                "SELECT time_ms, equity FROM equity_curve ORDER BY time_ms DESC LIMIT 1"
            ).fetchone()
        live = 0
        if "order_journal" in tables:
            live = int(conn.execute("SELECT COUNT(*) FROM order_journal").fetchone()[0])
    except sqlite3.Error as exc:
        raise NotAKestrelDatabase(path, f"it cannot be read ({exc})") from exc
    finally:
        conn.close()
    return DatabaseSummary(
        workspace_id=meta.get(META_KEY) or None, orders=orders, fills=fills,
        balances=balances, quote_currency=meta.get("quote_currency", ""),
        equity=_decimal(last[1]) if last else None, equity_ms=int(last[0]) if last else None,
        live_orders=live,
    )


def check_restorable(
    backup: Path, *, db_path: Path, backup_dir: Path, workspace_id: str | None
) -> RestorePlan:
    """Whether ``backup`` may replace the database at ``db_path``, and what it would put back.

    Args:
        backup_dir: the workspace's backups folder (a backup from before ids is taken only
            from there).
        workspace_id: this workspace's id (``Workspace.identity``), None when it has none yet.

    Raises:
        RestoreRefused: the file is the live database, not a Kestrel database, or another
            workspace's; nothing was changed.
    """
    if not backup.is_file():
        why = "it does not exist" if not backup.exists() else "it is not a file"
        raise RestoreRefused(f"cannot restore {backup}: {why}; nothing was changed")
    if _same_file(backup, db_path):
        raise RestoreRefused(
            f"cannot restore {backup}: it is the workspace's live database itself, not a "
            f"backup of it; nothing was changed. Its backups are in {backup_dir} "
            "(kestrel restore-backup --list)")
    summary = read_summary(backup)
    in_own_folder = _same_file(backup.parent, backup_dir)
    note = ""
    if summary.workspace_id is not None and workspace_id is not None:
        if summary.workspace_id != workspace_id:
            raise RestoreRefused(
                f"cannot restore {backup}: it is a backup of another workspace (id "
                f"{summary.workspace_id}; this workspace, {db_path.parent}, is "
                f"{workspace_id}); nothing was changed. Restore it in its own workspace, or "
                f"choose one of this workspace's backups (kestrel restore-backup --list)")
    elif in_own_folder:
        note = ("it records no workspace id (it was made before Kestrel recorded one), and is "
                "taken because it is in this workspace's backups folder"
                if summary.workspace_id is None else
                "this workspace has no id to compare with, and the backup is taken because it "
                "is in this workspace's backups folder")
    else:
        what = ("it records no workspace id (made before Kestrel recorded one)"
                if summary.workspace_id is None else "this workspace has no id to compare it with")
        raise RestoreRefused(
            f"cannot restore {backup}: {what}, and it is not in this workspace's backups folder "
            f"{backup_dir}, so nothing says it is a backup of this workspace; nothing was "
            "changed. Choose one of this workspace's backups (kestrel restore-backup --list)")
    return RestorePlan(backup, _taken_ms(backup), summary, note)


def _open(path: Path, *, held: bool) -> sqlite3.Connection:
    if held:
        conn = sqlite3.connect(str(path), isolation_level=None)
        conn.execute("PRAGMA query_only=ON")
        return conn
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)


def _not_sqlite(path: Path) -> str | None:
    try:
        with path.open("rb") as handle:
            header = handle.read(len(SQLITE_HEADER))
    except FileNotFoundError:
        return "it does not exist"
    except OSError as exc:
        return f"it cannot be read ({exc.strerror or exc})"
    if not header:
        return "it is empty (0 bytes)"
    if header != SQLITE_HEADER:
        return "it is not a SQLite database, so not a Kestrel backup"
    return None


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b)
    except OSError:
        return False


def _taken_ms(backup: Path) -> int:
    """When the backup was taken: from its name when it is one of the workspace's backups,
    else when the file was last written."""
    for listed in list_backups(backup.parent):
        if listed.path.name == backup.name:
            return listed.taken_ms
    return backup.stat().st_mtime_ns // 1_000_000


def _count(n: int, what: str) -> str:
    return f"{n:,} {what}{'' if n == 1 else 's'}"


def _decimal(text: object) -> Decimal:
    try:
        return Decimal(str(text))
    except InvalidOperation:
        return Decimal(0)


def _amount(value: Decimal) -> str:
    """A balance as a person reads it: thousands separated, no trailing zeros past the cents."""
    if value == value.to_integral_value():
        return f"{value:,.2f}"
    return f"{value.normalize():,f}"
