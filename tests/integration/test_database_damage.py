"""A damaged workspace database is refused at open, left untouched, and a backup restores it.

Real SQLite files: an empty one, one that is not SQLite, and a real ledger with garbage written
over one of its pages. Backups are taken with SQLite's online backup API while the workspace is
open and rotate; ``kestrel restore-backup`` puts one back and moves the damaged file aside.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

from app.domain.errors import OperationalError
from app.store.backups import BackupKeeper, list_backups, quick_check, take_backup
from app.store.health import DamagedDatabaseError
from app.store.ledger import Ledger
from app.store.lock import WorkspaceLock
from app.workspace import Workspace
from tests.helpers.agents import tool_world
from tests.helpers.cli import run_cli
from tests.helpers.paths import BTC_USD_1H, REPO

AT = 1_560_000_000_000  # 2019-06-08


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def used_workspace(tmp_path: Path) -> Workspace:
    """A workspace whose account has a history: a few hundred audit rows over many pages."""
    ws = Workspace.at(tmp_path / "ws")
    world = tool_world(ws, [BTC_USD_1H], at_ms=AT)
    for i in range(400):
        world.ledger.record_tool_call(
            ("agent", "get_order_book", "{}", "success", None, f"<r>{i}" + "x" * 300 + "</r>", i,
             1.0)
        )
    world.close(final_backup=True)  # as the app closes: its last work is backed up
    return ws


def corrupt_a_page(db: Path) -> None:
    conn = sqlite3.connect(db)
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    root = conn.execute(
        "SELECT rootpage FROM sqlite_master WHERE name='tool_call_rows'").fetchone()[0]
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    with db.open("r+b") as handle:
        handle.seek((root - 1) * page_size)
        handle.write(b"\xde\xad\xbe\xef" * (page_size // 4))


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (lambda db: db.write_bytes(b""), "it is empty (0 bytes)"),
        (lambda db: db.write_bytes(b"these are not the pages you are looking for" * 100),
         "it is not a SQLite database"),
        (corrupt_a_page, ("its integrity check failed", "database disk image is malformed")),
    ],
    ids=["empty", "not-sqlite", "corrupt-page"],
)
def test_a_damaged_database_is_refused_at_open_and_left_untouched(tmp_path, damage, said):
    ws = used_workspace(tmp_path)
    for extra in ("-wal", "-shm"):
        ws.db_path.with_name(ws.db_path.name + extra).unlink(missing_ok=True)
    damage(ws.db_path)
    before = digest(ws.db_path)
    with pytest.raises(DamagedDatabaseError) as refused:
        tool_world(ws, [BTC_USD_1H], at_ms=AT)
    message = str(refused.value)
    said = (said,) if isinstance(said, str) else said
    assert str(ws.db_path) in message and "left untouched" in message
    assert any(words in message for words in said), message
    newest = list_backups(ws.backup_dir)[0]
    assert str(newest.path) in message
    assert f"kestrel restore-backup --workspace {ws.root}" in message
    assert digest(ws.db_path) == before, "the damaged file is exactly as it was"
    # and the workspace is free again for the restore
    WorkspaceLock.acquire(ws.lock_path).release()


def test_restore_backup_brings_the_account_back_and_keeps_the_damaged_file(tmp_path):
    ws = used_workspace(tmp_path)
    corrupt_a_page(ws.db_path)
    damaged = digest(ws.db_path)

    listed = run_cli("restore-backup", "--workspace", ws.root, "--list")
    assert listed.returncode == 0 and "kestrel-" in listed.stdout

    done = run_cli("restore-backup", "--workspace", ws.root, "--yes")
    assert done.returncode == 0, done.stderr
    aside = next(ws.root.glob("kestrel.db.damaged-*"))
    assert f"moved to {aside}" in done.stdout
    assert digest(aside) == damaged
    assert quick_check(ws.db_path) == []
    world = tool_world(ws, [BTC_USD_1H], at_ms=AT)
    try:
        assert world.venue.broker.free("USD") == Decimal(10_000)
        assert len(world.ledger.tool_calls()) == 400, "the history is back"
    finally:
        world.close()


def test_restore_is_refused_while_the_workspace_is_open(tmp_path):
    ws = used_workspace(tmp_path)
    hold = ws.hold_for_writing()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "app", "restore-backup", "--workspace", str(ws.root)],
            capture_output=True, text=True, timeout=120, cwd=REPO,
        )
    finally:
        hold.release()
    assert done.returncode == 75 and "in use by process" in done.stderr
    assert not list(ws.root.glob("kestrel.db.damaged-*"))


def test_backups_are_healthy_copies_and_only_the_newest_five_are_kept(tmp_path):
    db = tmp_path / "kestrel.db"
    ledger = Ledger(db)
    ledger.initialize({"USD": Decimal(100)}, {"quote_currency": "USD"})
    folder = tmp_path / "backups"
    taken = [take_backup(db, folder, now_ms=1_700_000_000_000 + i * 1000) for i in range(7)]
    ledger.close()
    kept = list_backups(folder)
    assert [b.path for b in kept] == [b.path for b in reversed(taken[2:])]
    assert not list(folder.glob("*.partial")) and not list(folder.glob("*-wal"))
    copy = Ledger(kept[0].path, read_only=True)
    try:
        assert copy.load().balances == {"USD": Decimal(100)}
    finally:
        copy.close()


def test_the_keeper_backs_up_when_due_and_at_the_end_only_after_changes(tmp_path):
    db = tmp_path / "kestrel.db"
    ledger = Ledger(db)
    folder = tmp_path / "backups"
    keeper = BackupKeeper(db, folder, interval_s=3600)
    keeper.start()
    keeper.stop(final=False)
    assert len(list_backups(folder)) == 1, "none existed: one at start"
    again = BackupKeeper(db, folder, interval_s=3600)
    again.start()
    again.stop(final=True)
    assert len(list_backups(folder)) == 1, "a fresh backup and nothing changed since"
    ledger.initialize({"USD": Decimal(5)}, {"quote_currency": "USD"})
    last = BackupKeeper(db, folder, interval_s=3600)
    last.start()
    last.stop(final=True)
    assert len(list_backups(folder)) == 2, "the change is backed up at the end"
    ledger.close()


def integrity(db: Path) -> list[str]:
    conn = sqlite3.connect(db)
    try:
        rows = [row[0] for row in conn.execute("PRAGMA integrity_check").fetchall()]
    finally:
        conn.close()
    return [] if rows == ["ok"] else rows


def desync_an_index(db: Path) -> None:
    """Make the index tool_calls_agent disagree with its table, as a bug or a torn write could:
    hide the index from the schema, change the rows it indexes, put it back unchanged."""
    conn = sqlite3.connect(db, isolation_level=None)
    row = conn.execute("SELECT type, name, tbl_name, rootpage, sql FROM sqlite_master "
                       "WHERE name = 'tool_calls_agent'").fetchone()
    conn.execute("PRAGMA writable_schema = ON")
    conn.execute("DELETE FROM sqlite_master WHERE name = 'tool_calls_agent'")
    conn.close()
    conn = sqlite3.connect(db, isolation_level=None)  # a schema without the index
    conn.execute("UPDATE tool_call_rows SET agent_id = 'renamed' WHERE id % 2 = 0")
    conn.close()
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA writable_schema = ON")
    conn.execute("INSERT INTO sqlite_master (type, name, tbl_name, rootpage, sql) "
                 "VALUES (?, ?, ?, ?, ?)", row)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def test_a_backup_rebuilds_an_index_that_disagrees_with_its_table_and_says_so(tmp_path, caplog):
    ws = used_workspace(tmp_path)
    desync_an_index(ws.db_path)
    assert quick_check(ws.db_path) == [], "the start-up check cannot see it"
    assert any("missing from index tool_calls_agent" in p for p in integrity(ws.db_path))

    with caplog.at_level(logging.WARNING, logger="app.store.backups"):
        backup = take_backup(ws.db_path, ws.backup_dir)
    assert integrity(ws.db_path) == [], "the workspace's own database is repaired"
    assert integrity(backup.path) == [], "and its backup is whole"
    assert backup.repaired == ("tool_calls_agent",)
    said = caplog.text
    assert "index tool_calls_agent disagreed with its table" in said, said
    assert "rebuilt (REINDEX)" in said, said
    conn = sqlite3.connect(ws.db_path)
    try:
        by_index = conn.execute("SELECT COUNT(*) FROM tool_call_rows INDEXED BY tool_calls_agent "
                                "WHERE agent_id = 'renamed'").fetchone()[0]
    finally:
        conn.close()
    assert by_index == 200, "a query through the index sees every renamed row"


def test_a_backup_of_a_database_whose_table_is_damaged_is_refused_and_says_so(tmp_path):
    ws = used_workspace(tmp_path)
    before = list_backups(ws.backup_dir)
    corrupt_a_page(ws.db_path)
    with pytest.raises(OperationalError) as refused:
        take_backup(ws.db_path, ws.backup_dir)
    message = str(refused.value)
    assert f"{ws.db_path} is damaged beyond its indexes" in message, message
    assert "No backup was taken" in message, message
    assert f"the {len(before)} backups in {ws.backup_dir} are kept" in message, message
    assert "kestrel restore-backup" in message, message
    assert list_backups(ws.backup_dir) == before, "no damaged copy, no healthy one dropped"
    assert not list(ws.backup_dir.glob("*.partial"))
