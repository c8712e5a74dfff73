"""The recall index is derived from the files: when it is unreadable it is rebuilt from them, and
the memory tool calls succeed."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from app.domain.clock import ReplayClock
from app.memory import index as index_module
from app.memory.bank import MemoryBank
from app.memory.store import INDEX_DIR
from app.memory.text import grams
from tests.unit.memory.support import START, ToolRunner, call

AGENT = "trader-1"
GARBAGE = b"not an index at all \x00\xff" * 500


def index_file(root: Path) -> Path:
    return root / INDEX_DIR / f"{AGENT}.sqlite3"


def seeded(root: Path) -> None:
    bank = MemoryBank(root, ReplayClock(START))
    bank.write_note(AGENT, "plan", "buy the dips in BTC/USDT when RSI is oversold")
    bank.close()


def overwrite_garbage(path: Path) -> None:
    for extra in ("-wal", "-shm"):
        path.with_name(path.name + extra).unlink(missing_ok=True)
    path.write_bytes(GARBAGE)


def wrong_schema(path: Path) -> None:
    for extra in ("-wal", "-shm"):
        path.with_name(path.name + extra).unlink(missing_ok=True)
    path.unlink()
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE unrelated (x)")
    conn.execute("PRAGMA user_version=4")  # the current version, but not its tables
    conn.commit()
    conn.close()


@pytest.mark.parametrize("damage", [overwrite_garbage, wrong_schema], ids=["garbage", "schema"])
def test_an_unreadable_index_is_rebuilt_from_the_files_and_tools_succeed(tmp_path, damage):
    root = tmp_path / "memory"
    seeded(root)
    damage(index_file(root))
    bank = MemoryBank(root, ReplayClock(START + 1))
    run = ToolRunner(bank, AGENT)
    try:
        recalled = run(call("recall_memory", query="oversold"))
        assert recalled.ok, recalled.xml
        assert 'source="notes/plan.md"' in recalled.xml
        written = run(call("log_journal_entry", content="bought 0.1 BTC"))
        assert written.ok, written.xml
        assert run(call("read_agent_memory_file", file_path="notes/plan.md")).ok
    finally:
        bank.close()


def test_an_index_damaged_while_open_heals_on_the_next_call(tmp_path):
    root = tmp_path / "memory"
    seeded(root)
    bank = MemoryBank(root, ReplayClock(START + 1))
    run = ToolRunner(bank, AGENT)
    try:
        assert run(call("recall_memory", query="oversold")).ok
        overwrite_garbage(index_file(root))
        recalled = run(call("recall_memory", query="oversold"))
        assert recalled.ok, recalled.xml
        assert 'source="notes/plan.md"' in recalled.xml
        assert run(call("write_note", key="exit", content="sell above the upper band")).ok
        found = run(call("recall_memory", query="upper band"))
        assert found.ok and 'source="notes/exit.md"' in found.xml
    finally:
        bank.close()


def as_schema_5(path: Path) -> None:
    """Rewrite an index in the schema before (texts in an FTS5 table with their own content
    and a grams column; chunks without their text), as an older Kestrel left it."""
    conn = sqlite3.connect(path, isolation_level=None)
    rows = conn.execute("SELECT id, path, line, digest, body FROM chunks ORDER BY id").fetchall()
    conn.execute("BEGIN")
    for table in ("chunks", "fts", "gram_fts"):
        conn.execute(f"DROP TABLE {table}")
    conn.execute("CREATE TABLE chunks(id INTEGER PRIMARY KEY, path TEXT NOT NULL, "
                 "line INTEGER NOT NULL, digest BLOB NOT NULL)")
    conn.execute("CREATE INDEX chunks_by_path ON chunks(path)")
    conn.execute("CREATE VIRTUAL TABLE fts USING fts5(body, grams, tokenize='trigram')")
    for chunk_id, chunk_path, line, chunk_digest, stored in rows:
        conn.execute("INSERT INTO chunks VALUES (?, ?, ?, ?)",
                     (chunk_id, chunk_path, line, chunk_digest))
        body = index_module._unpack(stored)
        conn.execute("INSERT INTO fts(rowid, body, grams) VALUES (?, ?, ?)",
                     (chunk_id, body, " ".join(f"|{g.strip('|')}|" for g in grams(body).split())))
    conn.execute("PRAGMA user_version=5")
    conn.execute("COMMIT")
    conn.close()


def test_an_index_of_the_schema_before_is_upgraded_in_place_and_recalls_as_before(tmp_path):
    """The upgrade keeps every chunk's row id, its market time: rebuilding from the files
    would give each chunk the time of the rebuild."""
    root = tmp_path / "memory"
    clock = ReplayClock(START)
    bank = MemoryBank(root, clock)
    for hour in range(30):
        clock.advance_to(START + hour * 3_600_000)
        bank.log_journal_entry(AGENT, f"BTC/USDT hour {hour}: RSI {30 + hour} ma 4h 缩量下跌")
    bank.write_note(AGENT, "plan", "buy the dips in BTC/USDT when RSI is oversold")
    queries = ("RSI", "ma", "缩量", "oversold", "hour 17")
    before = {q: bank.recall(AGENT, q, 5) for q in queries}
    bank.close()
    as_schema_5(index_file(root))

    bank = MemoryBank(root, ReplayClock(START + 30 * 3_600_000))
    try:
        assert {q: bank.recall(AGENT, q, 5) for q in queries} == before
        assert all(before.values())
    finally:
        bank.close()
    conn = sqlite3.connect(index_file(root))
    assert conn.execute("PRAGMA user_version").fetchone()[0] == index_module.SCHEMA_VERSION
    conn.close()
