"""A workspace has one writer: processes racing on it are refused, never merged into its ledger.

Real subprocesses place hundreds of orders in one workspace at the same time (each call the code
``kestrel tool`` runs); each call is either executed or refused, never both, every order is
filled at most once and the balances are exactly what the fills imply.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest

from app.domain.clock import parse_time
from app.store.ledger import Ledger
from app.store.lock import read_holder
from app.store.texts import install
from tests.helpers.eventually import eventually_blocking
from tests.helpers.paths import BTC_USD_1H, REPO
from tests.integration.ledger_crash_worker import state_before

WORKER = Path(__file__).with_name("workspace_race_worker.py")
START_MS = parse_time("2019-06-01T00:00:00Z")
WORKERS = 4
CALLS = 50  # per worker: 200 orders tried


def kestrel(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - our own interpreter
        [sys.executable, "-m", "app", *args], capture_output=True, text=True, timeout=120,
        cwd=REPO,
    )


@pytest.mark.slow

def holds_the_workspace(run: subprocess.Popen[str], ws: Path) -> bool:
    """``kestrel run`` has taken the workspace's lock (and has not ended instead)."""
    assert run.poll() is None, run.stderr.read() if run.stderr else run.returncode
    holder = read_holder(ws / "kestrel.lock")
    return holder is not None and holder.pid == run.pid

def test_racing_processes_never_fill_an_order_twice_and_balances_match_the_fills(tmp_path):
    ws = tmp_path / "ws"
    workers = [
        subprocess.Popen(  # noqa: S603 - our own interpreter and script
            [sys.executable, str(WORKER), str(ws), str(BTC_USD_1H), str(n), str(CALLS),
             str(START_MS)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
        )
        for n in range(WORKERS)
    ]
    calls = []
    for proc in workers:
        out, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, err
        calls.extend(json.loads(line) for line in out.splitlines())
    assert len(calls) == WORKERS * CALLS

    crashed = [c for c in calls if c["rc"] == -1]
    assert not crashed, crashed[0]["err"]
    executed = {c["cid"] for c in calls if c["rc"] == 0}
    refused = {c["cid"] for c in calls if c["rc"] != 0}
    for call in calls:
        if call["rc"] == 0:
            assert "<order_created" in call["out"], call
        else:  # refused with one line naming why, and no envelope of an order
            assert call["rc"] in (2, 75), call
            assert call["out"] == "" and call["err"].count("\n") == 1, call

    # one last call settles every open order to the end of the data
    final = kestrel("tool", "--workspace", str(ws), "--data", str(BTC_USD_1H),
                    "<get_open_orders/>")
    assert final.returncode == 0, final.stderr

    ledger = Ledger(ws / "kestrel.db")
    try:
        snap = ledger.load()
        fills = ledger.fills()
    finally:
        ledger.close()
    by_client = Counter(r.order.client_order_id for r in snap.orders)
    assert set(by_client) == executed, "an order exists exactly when its call was executed"
    assert max(by_client.values()) == 1
    assert not executed & refused
    fills_per_order = Counter(f.order_id for f in fills)
    assert fills_per_order and max(fills_per_order.values()) == 1, "an order filled twice"
    filled = {r.order.order_id for r in snap.orders if r.order.filled_quantity > 0}
    assert filled == set(fills_per_order)
    for record in snap.orders:
        order_fills = [f for f in fills if f.order_id == record.order.order_id]
        assert sum((f.quantity for f in order_fills), Decimal(0)) == record.order.filled_quantity
    cash, btc = state_before(fills, 2**62)
    assert snap.balances["USD"] == cash
    assert snap.balances.get("BTC", Decimal(0)) == btc
    print(f"\n{len(calls)} orders tried, {len(executed)} executed, {len(refused)} refused, "
          f"{len(fills)} fills, 0 double fills; USD {cash} BTC {btc} match the fills")


def test_while_kestrel_run_holds_a_workspace_writers_are_refused_and_readers_answered(tmp_path):
    ws = tmp_path / "ws"
    run = subprocess.Popen(  # noqa: S603 - our own interpreter
        [sys.executable, "-m", "app", "run", "--workspace", str(ws), "--speed", "1",
         "--for", "30d"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=REPO,
    )
    try:
        eventually_blocking(lambda: holds_the_workspace(run, ws))

        order = ("<create_order><symbol>BTC/USD</symbol><side>BUY</side>"
                 "<quote_amount>50</quote_amount></create_order>")
        refused = kestrel("tool", "--workspace", str(ws), order)
        assert refused.returncode == 75
        assert refused.stdout == ""
        assert refused.stderr.count("\n") == 1
        assert f"in use by process {run.pid} (kestrel run --workspace {ws}" in refused.stderr
        assert "since 20" in refused.stderr

        chat = subprocess.run(  # noqa: S603 - our own interpreter
            [sys.executable, "-m", "app", "chat", "--workspace", str(ws)], input="",
            capture_output=True, text=True, timeout=120, cwd=REPO,
        )
        assert chat.returncode == 75 and f"process {run.pid}" in chat.stderr

        balance = kestrel("tool", "--workspace", str(ws), "<get_account_balance/>")
        assert balance.returncode == 0, balance.stderr
        assert "<status>success</status>" in balance.stdout
        assert "read-only" in balance.stderr and "not recorded" in balance.stderr
        assert run.poll() is None, "the run goes on"
    finally:
        run.kill()  # SIGKILL: the OS drops its lock
        run.wait()
    conn = install(sqlite3.connect(ws / "kestrel.db"))
    try:
        operator_calls = conn.execute(
            "SELECT COUNT(*) FROM tool_calls WHERE agent_id='operator'").fetchone()[0]
    finally:
        conn.close()
    assert operator_calls == 0, "neither the refused nor the read-only call wrote the ledger"
    placed = kestrel("tool", "--workspace", str(ws), order)
    assert placed.returncode == 0, placed.stderr
    assert "<order_created" in placed.stdout


def test_deleting_the_lock_file_under_a_running_writer_lets_no_second_writer_in(tmp_path):
    """The lock file only describes the holder; the lock itself is on the workspace folder, which
    cannot be deleted from under a running writer."""
    ws = tmp_path / "ws"
    run = subprocess.Popen(  # noqa: S603 - our own interpreter
        [sys.executable, "-m", "app", "run", "--workspace", str(ws), "--speed", "1",
         "--for", "30d"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=REPO,
    )
    try:
        eventually_blocking(lambda: holds_the_workspace(run, ws))
        (ws / "kestrel.lock").unlink()

        order = ("<create_order><symbol>BTC/USD</symbol><side>BUY</side>"
                 "<quote_amount>50</quote_amount></create_order>")
        refused = kestrel("tool", "--workspace", str(ws), order)
        assert refused.returncode == 75, refused.stdout + refused.stderr
        assert refused.stdout == "" and refused.stderr.count("\n") == 1, refused.stderr
        assert f"in use by process {run.pid} (kestrel run --workspace {ws}" in refused.stderr
        assert not (ws / "kestrel.lock").exists(), "a refused process writes no lock file"
        assert run.poll() is None, "the run goes on"
    finally:
        run.kill()
        run.wait()
    conn = install(sqlite3.connect(ws / "kestrel.db"))
    try:
        operator_calls = conn.execute(
            "SELECT COUNT(*) FROM tool_calls WHERE agent_id='operator'").fetchone()[0]
    finally:
        conn.close()
    assert operator_calls == 0, "the refused call wrote nothing"
