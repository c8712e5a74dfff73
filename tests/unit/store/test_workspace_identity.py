"""Every workspace has one id, made once, kept in its ``workspace.id`` file and its database, and
recorded in every backup, so a restore can tell this workspace's backups from any other file.

Workspaces made before ids (a database without one, no file) get theirs the next time a process
opens them for writing; their earlier backups keep having none.
"""

from __future__ import annotations

import sqlite3
from decimal import Decimal
from pathlib import Path

from app.store.backups import take_backup
from app.store.db import connect
from app.store.ledger import Ledger
from app.workspace import Workspace

ID_FILE = "workspace.id"
META_KEY = "workspace_id"


def id_in_database(path: Path) -> str | None:
    conn = sqlite3.connect(path)
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (META_KEY,)).fetchone()
    finally:
        conn.close()
    return None if row is None else row[0]


def id_in_file(ws: Workspace) -> str | None:
    path = ws.root / ID_FILE
    return path.read_text(encoding="utf-8").strip() if path.exists() else None


def opened_and_closed(ws: Workspace) -> None:
    ws.hold_for_writing(backups=False).release()


def test_a_new_workspace_gets_one_id_in_its_file_its_database_and_its_backups(tmp_path):
    ws = Workspace.at(tmp_path / "ws")
    opened_and_closed(ws)
    identity = id_in_file(ws)
    assert identity and len(identity) == 32
    assert id_in_database(ws.db_path) == identity
    backup = take_backup(ws.db_path, ws.backup_dir)
    assert id_in_database(backup.path) == identity

    opened_and_closed(ws)
    assert id_in_file(ws) == identity, "made once, kept"
    other = Workspace.at(tmp_path / "other")
    opened_and_closed(other)
    assert id_in_file(other) != identity, "each workspace its own"


def test_an_old_workspace_gets_its_id_when_next_opened_and_its_old_backups_keep_none(tmp_path):
    ws = Workspace.at(tmp_path / "old").ensure()
    ledger = Ledger(ws.db_path)  # as a Kestrel before ids left it: a ledger, no id anywhere
    ledger.initialize({"USD": Decimal(10_000)}, {"quote_currency": "USD"})
    ledger.close()
    old_backup = take_backup(ws.db_path, ws.backup_dir, now_ms=1_700_000_000_000)
    assert id_in_database(ws.db_path) is None and id_in_file(ws) is None

    opened_and_closed(ws)

    identity = id_in_file(ws)
    assert identity is not None
    assert id_in_database(ws.db_path) == identity
    assert id_in_database(old_backup.path) is None, "an earlier backup is left as it was"
    assert id_in_database(take_backup(ws.db_path, ws.backup_dir).path) == identity


def test_a_backup_taken_before_the_database_records_the_id_still_records_it(tmp_path):
    ws = Workspace.at(tmp_path / "ws")
    opened_and_closed(ws)
    identity = id_in_file(ws)
    assert identity is not None
    conn = connect(ws.db_path)  # as when the backup keeper runs before the id is recorded
    conn.execute("DELETE FROM meta WHERE key = ?", (META_KEY,))
    conn.close()

    backup = take_backup(ws.db_path, ws.backup_dir)

    assert id_in_database(backup.path) == identity
    assert id_in_database(ws.db_path) is None, "a backup never writes the live database"


def test_a_database_copied_in_from_another_workspace_keeps_its_own_id(tmp_path):
    first, second = Workspace.at(tmp_path / "a"), Workspace.at(tmp_path / "b")
    opened_and_closed(first)
    opened_and_closed(second)
    second.db_path.unlink()
    first_id = id_in_file(first)
    assert first_id is not None and id_in_file(second) not in (None, first_id)
    second.db_path.write_bytes(first.db_path.read_bytes())

    opened_and_closed(second)

    assert id_in_database(second.db_path) == first_id
    assert id_in_file(second) == first_id, "the id follows the account's history"
