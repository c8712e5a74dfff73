"""The table stores' database helper: one unit of work, dict rows and inserts, light to import."""

from __future__ import annotations

import subprocess
import sys

import pytest

from app.store.db import StoreDb


def test_a_unit_of_work_commits_whole_or_not_at_all(tmp_path):
    db = StoreDb(tmp_path / "kestrel.db")
    db.insert("meta", {"key": "kept", "value": "1"})
    with pytest.raises(RuntimeError), db.transaction() as conn:
        db.insert("meta", {"key": "lost", "value": "2"})
        conn.execute("UPDATE meta SET value='changed' WHERE key='kept'")
        raise RuntimeError("the store's code failed half-way")
    assert db.rows("SELECT key, value FROM meta ORDER BY key") == [{"key": "kept", "value": "1"}]
    db.close()


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
