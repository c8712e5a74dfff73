"""A disk that fills up under ``kestrel run``: one clear message, a clean stop, nothing lost unsaid.

The disk is filled for real, without root: each run is a subprocess whose file-size limit
(RLIMIT_FSIZE, ``ulimit -f``) is set before it starts, with SIGXFSZ ignored, so a write that
reaches the limit fails with EFBIG part-way, as a write to a full disk fails with ENOSPC. SQLite
reports that as a "disk I/O error", the memory files, backups and logs as OSError: each is met
somewhere in the run, and the run must end the same way whichever comes first.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import resource
import signal
import sqlite3
import subprocess
import sys
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

from app.cli.agents import _stop_for_full_disk
from app.domain.clock import ms_to_iso
from app.domain.trading import Side
from app.runtime.desk import workspace_resume_ms
from app.store.ledger import Ledger
from app.store.texts import install
from app.workspace import Workspace
from tests.helpers.agents import HOUR_MS, START_MS, agent_world
from tests.helpers.paths import REPO

SETUP = "watch BTC/USDT on 1h every 1h with a trend analyst and a trader"
WORKER = Path(__file__).with_name("disk_full_worker.py")
EXIT_DISK_FULL = 74  # documented in app.cli.common (sysexits' EX_IOERR)


def limited(limit: int | None):  # noqa: ANN201 - a preexec_fn
    """Start the child with files limited to ``limit`` bytes (None: unlimited)."""

    def preexec() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails: EFBIG
        if limit is not None:
            hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))

    return preexec


def kestrel(*args: str | Path, limit: int | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - our own command line
        [sys.executable, "-m", "app", *map(str, args)], capture_output=True, text=True,
        timeout=300, cwd=REPO, check=False, preexec_fn=limited(limit),  # noqa: PLW1509
    )


def assert_one_clear_message(done: subprocess.CompletedProcess[str], workspace: Path) -> str:
    """Exit 74 and stderr is the one message, nothing else: no traceback, no log line."""
    assert done.returncode == EXIT_DISK_FULL, done.stderr[-3000:]
    assert "Traceback" not in done.stderr + done.stdout
    lines = done.stderr.strip().splitlines()
    assert lines[0].startswith(f"kestrel: the disk holding {workspace} is full ("), lines
    assert "Free space on that disk and run again." in lines[0]
    assert "its agents stopped and the workspace closed" in lines[0]
    assert not [line for line in lines if re.match(r"(WARNING|ERROR|CRITICAL) ", line)], lines
    said = lines[1]
    assert said == "Nothing waiting to be written was lost." or " not recorded: " in said, lines
    assert all(line.startswith("Interrupted, and run again at the next start: ")
               for line in lines[2:]), lines
    return done.stderr


def stopped_at(message: str) -> str:
    found = re.search(r"the run stopped at market time (\S+), ", message)
    assert found, message
    return found.group(1)


def assert_ledger_intact(db: Path) -> int:
    """The database is whole, and its orders, fills and balances agree; returns the fills."""
    conn = install(sqlite3.connect(db))
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    finally:
        conn.close()
    ledger = Ledger(db, read_only=True)
    try:
        snap, fills = ledger.load(), ledger.fills()
    finally:
        ledger.close()
    filled: dict[str, Decimal] = defaultdict(Decimal)
    balances: dict[str, Decimal] = defaultdict(Decimal, USDT=Decimal(10_000))
    for fill in fills:
        filled[fill.order_id] += fill.quantity
        base, quote = fill.symbol.split("/")
        sign = 1 if fill.side is Side.BUY else -1
        balances[base] += sign * fill.quantity
        balances[quote] -= sign * fill.quantity * fill.price
        balances[fill.fee_currency] -= fill.fee
    for record in snap.orders:
        assert record.order.filled_quantity == filled.get(record.order.order_id, 0), record
    assert {k: v for k, v in snap.balances.items() if v} == {
        k: v for k, v in balances.items() if v}
    return len(fills)


def test_a_disk_too_full_to_open_the_workspace_says_so_and_runs_nothing(tmp_path):
    workspace = tmp_path / "ws"
    done = kestrel("run", "--workspace", workspace, "--for", "1h", limit=100_000)
    assert done.returncode == EXIT_DISK_FULL, done.stderr[-3000:]
    assert done.stderr.strip().splitlines() == [
        f"kestrel: the disk holding {workspace} is full (a file reached the largest size this "
        f"process may write (100,000 bytes, ulimit -f)): the database {workspace}/kestrel.db "
        "could not be opened. Free space on that disk and run again."
    ]
    assert "Offline replay" not in done.stdout


def test_a_disk_filling_up_under_a_new_workspace_stops_the_run_with_one_message(tmp_path):
    workspace = tmp_path / "ws"
    done = kestrel("run", "--workspace", workspace, "--setup", SETUP, "--for", "3d",
                   "--speed", "1000000", limit=2_000_000)  # a 2 MB disk
    message = assert_one_clear_message(done, workspace)
    assert "ulimit -f" in message
    assert "Market time now" not in done.stdout, "the run stopped: no summary as if it ended"
    assert_ledger_intact(workspace / "kestrel.db")

    again = kestrel("run", "--workspace", workspace, "--for", "2h", "--speed", "1000000")
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"Offline replay from {stopped_at(message)}" in again.stdout, "it resumes there"


def test_a_trading_workspace_keeps_its_orders_and_fills_and_names_the_backup_not_taken(
    tmp_path,
):
    workspace = tmp_path / "ws"
    first = kestrel("run", "--workspace", workspace, "--setup", SETUP, "--start",
                    "2019-10-08T00:00:00Z", "--for", "2d", "--speed", "1000000")
    assert first.returncode == 0, first.stderr[-3000:]
    db = workspace / "kestrel.db"
    fills = assert_ledger_intact(db)
    assert fills >= 1, first.stdout[-2000:]

    # the disk fills before the database could be copied whole: the closing backup fails
    done = kestrel("run", "--workspace", workspace, "--for", "5d", "--speed", "1000000",
                   limit=db.stat().st_size * 6 // 10)
    message = assert_one_clear_message(done, workspace)
    assert f"1 backup was not recorded: the closing backup of {db}." in message
    assert assert_ledger_intact(db) >= fills, "every fill committed before is kept"
    assert not list((workspace / "backups").glob("*.partial")), "no half-written backup left"

    again = kestrel("run", "--workspace", workspace, "--for", "2h", "--speed", "1000000")
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"Offline replay from {stopped_at(message)}" in again.stdout


def test_what_the_full_disk_kept_from_being_written_is_named_call_by_call(tmp_path):
    workspace = tmp_path / "ws"
    done = subprocess.run(  # noqa: S603 - our own interpreter and script
        [sys.executable, str(WORKER), str(workspace)], capture_output=True, text=True,
        timeout=120, cwd=REPO, check=False, env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    report = json.loads(done.stdout)
    said = report["said"]
    assert said.startswith(f"the disk holding {workspace} is full (a file reached the largest "
                           "size this process may write"), said
    assert "): the workspace was closed. Free space on that disk and run again.\n" in said
    made = report["made"]
    assert all(call[1] == "success" for call in made[:-1]), "the market reads still answer"
    assert made[-1][1] == "error" and "could not be saved: the disk is full" in made[-1][2]

    conn = install(sqlite3.connect(workspace / "kestrel.db"))
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        recorded = dict(conn.execute(
            "SELECT tool_name, COUNT(*) FROM tool_calls GROUP BY tool_name").fetchall())
    finally:
        conn.close()
    # 3 reads and a small memory write before the limit, 8 reads and the big write under it
    snapshots_lost = 3 + 8 - recorded["get_market_snapshot"]
    writes_lost = 2 - recorded["write_agent_memory_file"]
    assert snapshots_lost >= 1, "some rows could not be written: the test filled the disk"
    assert (
        f"\n1 memory write and {snapshots_lost + writes_lost} tool calls of the audit trail "
        "were not recorded: notes/big.md (Disk Test); ") in said, said
    times = "" if snapshots_lost == 1 else f"{snapshots_lost} x "
    assert f"{times}get_market_snapshot at 2019-06-08 13:20 (Disk Test)" in said
    if writes_lost:
        assert "write_agent_memory_file at 2019-06-08 13:20 (Disk Test)" in said
    big = workspace / "memory" / "disk-test" / "notes" / "big.md"
    assert big.read_bytes() == b"x" * 10, "the file keeps its last whole content"


def test_the_full_disk_message_names_where_the_next_run_continues_not_where_the_clock_got(
    tmp_path,
):
    """The clock moves to a candle before that candle's settle is written: when the disk
    refuses the write, the message must name the last committed settle, where the next run
    starts, not the candle the clock had reached."""
    async def scenario() -> str:
        world = agent_world(tmp_path / "ws", agents=False)
        settled = world.venue.clock.now_ms() + HOUR_MS
        world.venue.driver.advance_to(settled)  # settled and committed
        world.venue.clock.advance_to(settled + 2 * HOUR_MS)  # moved; its settle never written
        await world.aclose()
        return str(_stop_for_full_disk(world))

    message = asyncio.run(scenario())
    assert stopped_at(message) == ms_to_iso(START_MS + HOUR_MS), message
    assert workspace_resume_ms(Workspace.at(tmp_path / "ws")) == START_MS + HOUR_MS
