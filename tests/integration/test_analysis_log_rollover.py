"""A long run fills the analyst's log: it rolls the log over and keeps recording and signalling.

The memory store refuses a file past ``MemoryLimits.max_file_bytes`` (1 MiB, about 1,100 hourly
analyses). Before the roll-over every later append was refused and each entry was lost. Here the
limit is 20 kB, so the 400-bar run of the record test fills the log many times: every entry must
be in exactly one file (the archives and the live log), no append may be refused after a roll,
and the run must trade exactly as the record test's run does (a full log changes no decision).
"""

from __future__ import annotations

import functools
import json
import sqlite3
from pathlib import Path

import pytest

from app.memory.roles import ANALYSIS_LOG, parse_analysis_log
from app.memory.store import MemoryLimits
from app.runtime import world as world_module
from app.store.texts import install
from tests.integration.test_agent_backtest_record import RECORD, run_record

SMALL = 20_000
SAME_TRADING = ("orders", "fills", "equity_curve", "balances", "positions", "trades",
                "final_equity")


def test_a_full_analysis_log_is_archived_whole_and_the_agents_keep_trading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(world_module, "MemoryLimits",
                        functools.partial(MemoryLimits, max_file_bytes=SMALL))
    got = run_record(tmp_path / "out")
    expected = json.loads(RECORD.read_text(encoding="utf-8"))
    assert {k: got[k] for k in SAME_TRADING} == {k: expected[k] for k in SAME_TRADING}
    assert got["trades"] > 0

    workspace = tmp_path / "out" / "workspace"
    with install(sqlite3.connect(workspace / "kestrel.db")) as db:
        rows = db.execute(
            "SELECT id, agent_id, tool_name, params_json, status, error_code, started_ms "
            "FROM tool_calls ORDER BY id"
        ).fetchall()
        signals = db.execute(
            "SELECT COUNT(*) FROM tasks WHERE task_type='NEW_MARKET_ANALYSIS_SIGNAL'"
        ).fetchone()[0]
    refused = [r for r in rows if r[5] == "INVALID_PARAMETER"]
    appends = [r for r in rows if r[2] == "append_to_agent_memory_file"]
    analyst = appends[0][1]
    rolls = [r for r in rows if r[2] == "write_agent_memory_file"
             and json.loads(r[3])["file_path"] == ANALYSIS_LOG]
    # the log filled several times; each refusal is followed by a roll, never by another refusal
    assert len(rolls) >= 5
    assert len(refused) == len(rolls)
    assert all(json.loads(r[3])["file_path"] == ANALYSIS_LOG for r in refused)
    # every other call succeeded, but for the first look into the archive folder, not made yet
    failed = [(r[2], r[5]) for r in rows if r[4] != "success" and r not in refused]
    assert failed == [("list_agent_memory_files", "NOT_FOUND")]
    # signals still go out and the Trader still trades after the first roll
    first_roll_ms = rolls[0][6]
    assert any(r[2] == "dispatch_task_to_agent" and r[6] > first_roll_ms for r in rows)
    assert any(r[2] == "create_order" and r[6] > first_roll_ms for r in rows)
    assert signals > 0

    folder = workspace / "memory" / analyst
    archives = sorted((folder / "analysis_log_archive").glob("*.md"))
    assert len(archives) == len(rolls)
    files = [*archives, folder / ANALYSIS_LOG]
    assert all(f.stat().st_size <= SMALL for f in files)
    entries = [e for f in files for e in parse_analysis_log(f.read_text(encoding="utf-8"))]
    # one entry per analysis (an append that succeeded, or a refused one written by its roll),
    # each exactly once, in market order
    assert len(entries) == len(appends) == len(appends) - len(refused) + len(rolls)
    times = [e.time for e in entries]
    assert times == sorted(times) and len(set(times)) == len(times)
