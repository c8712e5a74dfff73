"""The WAL checkpointer: commits made on the event loop never copy the WAL back themselves."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from app.store.checkpointer import WalCheckpointer
from app.store.db import WAL_SIZE_LIMIT_BYTES, connect, is_checkpointed_in_background
from tests.helpers.eventually import eventually_blocking

PAGE = 4096


def _create_table(conn: sqlite3.Connection, checkpointer: WalCheckpointer) -> None:
    conn.execute("CREATE TABLE blob_rows (id INTEGER PRIMARY KEY, body BLOB)")
    assert checkpointer.checkpoint().complete  # the empty table is in the database file


def _fill(conn: sqlite3.Connection, pages: int) -> None:
    for _ in range(pages):
        conn.execute("BEGIN")
        conn.execute("INSERT INTO blob_rows (body) VALUES (?)", (b"x" * (PAGE - 200),))
        conn.execute("COMMIT")


def _rows_in_database_file(path: Path) -> int:
    """Rows the main database file holds, ignoring whatever is still only in the WAL."""
    uri = f"file:{path}?immutable=1"
    conn = sqlite3.connect(uri, uri=True)
    try:
        return int(conn.execute("SELECT count(*) FROM blob_rows").fetchone()[0])
    finally:
        conn.close()


def test_connections_opened_while_a_checkpointer_runs_leave_checkpoints_to_it(
    tmp_path: Path,
) -> None:
    db = tmp_path / "kestrel.db"
    before = connect(db)
    checkpointer = WalCheckpointer(db, interval_s=0.05)
    checkpointer.start()
    try:
        during = connect(db)
        assert during.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
        assert before.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000
        during.close()
    finally:
        checkpointer.stop()
    after = connect(db)
    assert after.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000
    assert not is_checkpointed_in_background(db)
    before.close()
    after.close()


def test_a_writer_past_the_autocheckpoint_size_does_not_checkpoint_but_the_thread_does(
    tmp_path: Path,
) -> None:
    db = tmp_path / "kestrel.db"
    checkpointer = WalCheckpointer(db, interval_s=3600)  # ticks only when the test says so
    checkpointer.start()
    writer = connect(db, durable=False)
    try:
        _create_table(writer, checkpointer)
        _fill(writer, 1500)  # past SQLite's 1,000-page automatic checkpoint
        assert _rows_in_database_file(db) == 0  # no commit copied the WAL back
        result = checkpointer.checkpoint()
        assert result.complete
        assert result.wal_frames >= 1500
        assert _rows_in_database_file(db) == 1500
    finally:
        writer.close()
        checkpointer.stop()


def test_the_thread_keeps_the_wal_small_while_a_writer_commits(tmp_path: Path) -> None:
    db = tmp_path / "kestrel.db"
    checkpointer = WalCheckpointer(db, interval_s=0.02)
    checkpointer.start()
    writer = connect(db, durable=False)
    try:
        _create_table(writer, checkpointer)
        for _ in range(6):
            _fill(writer, 400)
            # a tick that began after the last commit has copied everything
            ticks = checkpointer.checkpoints
            eventually_blocking(lambda t=ticks: checkpointer.checkpoints > t + 1)
            assert checkpointer.last is not None and checkpointer.last.complete
        # the writer starts the WAL over after each complete checkpoint, so it never grows to
        # the ~7,000 pages the 2,400 commits wrote
        wal_pages = (tmp_path / "kestrel.db-wal").stat().st_size // PAGE
        assert wal_pages < 1500
        eventually_blocking(lambda: _rows_in_database_file(db) == 2400)
    finally:
        writer.close()
        checkpointer.stop()
    assert checkpointer.failures == 0


def test_stop_moves_what_is_left_into_the_database(tmp_path: Path) -> None:
    db = tmp_path / "kestrel.db"
    checkpointer = WalCheckpointer(db, interval_s=3600)
    checkpointer.start()
    writer = connect(db, durable=False)
    _create_table(writer, checkpointer)
    _fill(writer, 10)
    assert _rows_in_database_file(db) == 0
    checkpointer.stop()
    assert _rows_in_database_file(db) == 10
    assert not checkpointer.running
    writer.close()


def test_a_failing_checkpoint_is_counted_and_logged_once_and_the_thread_carries_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "kestrel.db"
    checkpointer = WalCheckpointer(db, interval_s=0.02)
    real_checkpoint = checkpointer.checkpoint
    failing = [True]

    def checkpoint():  # noqa: ANN202 - the disk fails while failing[0] is set
        if failing[0]:
            raise sqlite3.OperationalError("disk I/O error")
        return real_checkpoint()

    monkeypatch.setattr(checkpointer, "checkpoint", checkpoint)
    checkpointer.start()
    try:
        eventually_blocking(lambda: checkpointer.failures >= 3)
        assert checkpointer.running
        assert checkpointer.last_error == "disk I/O error"
        assert caplog.text.count("disk I/O error") == 1  # the same error is logged once
        assert str(db) in caplog.text
        failing[0] = False
        ticks = checkpointer.checkpoints
        # the disk is back: it goes on
        eventually_blocking(lambda: checkpointer.checkpoints > ticks)
    finally:
        checkpointer.stop()


def test_starting_twice_or_with_a_bad_interval_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="positive"):
        WalCheckpointer(tmp_path / "kestrel.db", interval_s=0)
    checkpointer = WalCheckpointer(tmp_path / "kestrel.db", interval_s=1)
    checkpointer.start()
    try:
        with pytest.raises(RuntimeError, match="already running"):
            checkpointer.start()
    finally:
        checkpointer.stop()
    with pytest.raises(RuntimeError, match="not started"):
        checkpointer.checkpoint()


def test_a_wal_is_cut_back_only_when_larger_than_the_limit(tmp_path: Path) -> None:
    conn = connect(tmp_path / "kestrel.db")
    try:
        limit = conn.execute("PRAGMA journal_size_limit").fetchone()[0]
    finally:
        conn.close()
    assert limit == WAL_SIZE_LIMIT_BYTES >= 256 * 1024 * 1024
