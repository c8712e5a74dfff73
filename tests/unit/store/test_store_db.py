"""The table stores' database helper: one unit of work, dict rows and inserts, light to import."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from app.store.db import StoreDb, unit_of_work


def test_a_unit_of_work_commits_whole_or_not_at_all(tmp_path):
    db = StoreDb(tmp_path / "kestrel.db")
    db.insert("meta", {"key": "kept", "value": "1"})
    with pytest.raises(RuntimeError), db.transaction() as conn:
        db.insert("meta", {"key": "lost", "value": "2"})
        conn.execute("UPDATE meta SET value='changed' WHERE key='kept'")
        raise RuntimeError("the store's code failed half-way")
    assert db.rows("SELECT key, value FROM meta ORDER BY key") == [{"key": "kept", "value": "1"}]
    db.close()


def test_a_commit_that_fails_leaves_no_transaction_open_for_the_next_unit(tmp_path):
    """A refused COMMIT must not leave its transaction open: the next unit of work would then
    be a savepoint inside it, "committed" only in memory and gone at close."""
    db = StoreDb(tmp_path / "kestrel.db")
    db.conn.execute("PRAGMA defer_foreign_keys=ON")  # the violation is found at COMMIT
    with pytest.raises(sqlite3.IntegrityError), unit_of_work(db.conn) as conn:
        conn.execute(
            "INSERT INTO fills (fill_id, order_id, agent_id, symbol, side, quantity, price, fee, "
            "fee_currency, time_ms, realized_pnl, is_maker) "
            "VALUES ('f1', 'no-such-order', 'a', 'BTC/USDT', 'BUY', '1', '1', '0', 'USDT', 0, "
            "'0', 0)")
    assert not db.conn.in_transaction
    with unit_of_work(db.conn) as conn:
        conn.execute("INSERT INTO meta (key, value) VALUES ('kept', '1')")
    db.close()
    again = StoreDb(tmp_path / "kestrel.db")
    assert again.rows("SELECT key FROM meta") == [{"key": "kept"}]
    assert again.rows("SELECT fill_id FROM fills") == []
    again.close()


def test_a_second_store_on_the_same_file_sees_the_schema_and_the_rows(tmp_path):
    first = StoreDb(tmp_path / "kestrel.db")
    first.insert("meta", {"key": "k", "value": "v"})
    second = StoreDb(tmp_path / "kestrel.db", read_only=True)
    assert second.rows("SELECT value FROM meta WHERE key=?", ("k",)) == [{"value": "v"}]
    first.close()
    second.close()


def test_the_command_line_and_the_window_start_without_loading_sqlite_utils_or_pandas():
    code = ("import sys, app.cli.main, app.workspace, app.store.db, app.ui.app; "
            "print(sorted(m for m in ('sqlite_utils', 'pandas') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"


def test_a_new_database_gets_the_schema_its_migration_scripts_write(tmp_path):
    """Each migration step runs statement by statement in its own transaction; the result is
    what SQLite makes of the same scripts run whole."""
    from app.store.db import MIGRATIONS, SCHEMA_VERSION, connect, install

    migrated = connect(tmp_path / "kestrel.db")
    whole = install(sqlite3.connect(":memory:"))
    for script in MIGRATIONS:
        whole.executescript(script)
    schema = "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"
    assert migrated.execute(schema).fetchall() == whole.execute(schema).fetchall()
    assert migrated.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    migrated.close()


def test_a_statement_ends_only_at_a_semicolon_sqlite_would_end_it_at():
    from app.store.db import _statements

    script = (
        "CREATE TABLE t (a TEXT DEFAULT 'x;y'); -- a note; with a semicolon\n"
        "CREATE TRIGGER tr AFTER INSERT ON t BEGIN\n"
        "  UPDATE t SET a = a || ';'; DELETE FROM t WHERE a = '';\nEND;\n"
        "/* one more; */ INSERT INTO t VALUES ('z')"
    )
    statements = _statements(script)
    assert [s.split()[:2] for s in statements] == [
        ["CREATE", "TABLE"], ["--", "a"], ["/*", "one"]]
    conn = sqlite3.connect(":memory:")
    for statement in statements:
        conn.execute(statement)
    assert conn.execute("SELECT a FROM t").fetchall() == [("z;",)]


def test_closing_a_store_waits_for_a_read_on_another_thread_to_finish(tmp_path: Path) -> None:
    """A panel's refresh reads in an executor thread while the window closes the workspace:
    the close waits for the read's statement (closing under it crashed the process)."""
    store = StoreDb(tmp_path / "kestrel.db")
    reading, release = threading.Event(), threading.Event()
    answers: list[object] = []

    def reader() -> None:
        with store.lock:
            reading.set()
            release.wait(30)
            answers.append(store.conn.execute("SELECT 1").fetchone())

    thread = threading.Thread(target=reader)
    thread.start()
    assert reading.wait(30)
    closer = threading.Thread(target=store.close)
    closer.start()
    closer.join(0.05)
    assert closer.is_alive()  # it cannot close while the read holds the store
    release.set()
    thread.join(30)
    closer.join(30)
    assert answers == [(1,)]
    with pytest.raises(sqlite3.ProgrammingError):
        store.conn.execute("SELECT 1")
