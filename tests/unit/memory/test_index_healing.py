"""The recall index is derived from the files: when it is unreadable it is rebuilt from them, and
the memory tool calls succeed."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from app.domain.clock import ReplayClock
from app.memory.bank import MemoryBank
from app.memory.store import INDEX_DIR
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
