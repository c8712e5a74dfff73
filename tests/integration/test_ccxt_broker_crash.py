"""kill -9 of a live-broker process mid-order: a fresh process reconciles, nothing is doubled.

A real subprocess (``ccxt_crash_worker.py``) places a MARKET buy through ccxt against the fake
Binance (which runs here) and is killed with SIGKILL at one of three moments: after the intent
was committed (NEW), after SENDING was committed but before the request left, and after the
exchange booked and filled the order but before its answer arrived. A fresh process then runs
the start-up reconciliation; the journal must equal the exchange (no order twice, every fill
once), and the same tool call repeated afterwards must not place a second order. The same three
kills hit a position's take profit and stop loss sent as one OCO list: the list is never placed
twice and both legs end as the exchange has them. The time from the kill to the reconciled state
is printed (``-s`` shows it).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import pytest

from app.store.order_journal import JournalState, OrderJournal
from tests.helpers.eventually import eventually_blocking
from tests.helpers.fake_exchange import Fault
from tests.helpers.fake_exchange.broker import assert_journal_matches_exchange
from tests.helpers.fake_exchange.tape import wall_ms
from tests.integration.ccxt_fixtures import (  # noqa: F401 - fixtures
    START_MS,
    fake_exchange_fixture,
    server_fixture,
)

WORKER = Path(__file__).with_name("ccxt_crash_worker.py")
REPO = Path(__file__).resolve().parents[2]
KEY = "k-task-7:3"
OCO_KEY = "k-task-8:2"
pytestmark = pytest.mark.slow


def worker(server, db: Path, wall: int, *args: str) -> subprocess.Popen[str]:
    config = json.dumps(server.ccxt_config("binance"))
    return subprocess.Popen(  # noqa: S603 - our own interpreter and script
        [sys.executable, str(WORKER), args[0], str(db), config, str(START_MS), str(wall),
         *args[1:]],
        stdout=subprocess.PIPE, text=True, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def read_until(proc: subprocess.Popen[str], prefix: str, timeout_s: float = 60) -> str:
    deadline = time.monotonic() + timeout_s
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith(prefix):
            return line.strip()
    proc.kill()
    raise AssertionError(f"the worker never printed {prefix!r}")


def kill_and_reconcile(server, db: Path, wall: int, proc: subprocess.Popen[str]) -> dict:
    proc.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    proc.wait(10)
    fresh = worker(server, db, wall, "reconcile")
    out, _ = fresh.communicate(timeout=120)
    elapsed = time.monotonic() - killed
    assert fresh.returncode == 0, out
    report = json.loads(out.strip().splitlines()[-1])
    report["seconds"] = elapsed
    print(f"\nkill -9 -> reconciled in {elapsed:.2f} s: {report}")
    return report


def repeat_call(server, db: Path, wall: int) -> str:
    again = worker(server, db, wall, "place", "none", KEY)
    out, _ = again.communicate(timeout=120)
    assert again.returncode == 0, out
    return out.strip().splitlines()[-1]


@pytest.fixture(name="live")
def live_fixture(server):
    server.binance_account.reset()
    wall = wall_ms()
    server.now.run_with_wall_clock(wall)
    yield server, wall
    server.now.set(START_MS)


def test_killed_after_the_intent_was_journaled_the_order_was_never_sent(live, tmp_path):
    server, wall = live
    db = tmp_path / "kestrel.db"
    proc = worker(server, db, wall, "place", "journaled", KEY)
    read_until(proc, "AT journaled")
    report = kill_and_reconcile(server, db, wall, proc)
    assert report["not_sent"] == [KEY] and report["mismatches"] == []
    assert server.count("binance", "order.create") == 0
    assert repeat_call(server, db, wall) == "PLACED FILLED"  # never sent: the call may send it
    with OrderJournal(db) as journal:
        assert_journal_matches_exchange(journal, server)
    assert len(server.binance_account.orders) == 1


def test_killed_after_sending_was_journaled_the_order_is_looked_up_and_not_placed(
    live, tmp_path
):
    server, wall = live
    db = tmp_path / "kestrel.db"
    proc = worker(server, db, wall, "place", "sending", KEY)
    read_until(proc, "AT sending")
    report = kill_and_reconcile(server, db, wall, proc)
    assert report["unresolved"] == [[KEY, JournalState.NOT_PLACED.value]]
    assert report["in_flight_after"] == 0 and report["mismatches"] == []
    assert repeat_call(server, db, wall).startswith("REFUSED EXCHANGE_ERROR")  # not resent
    assert server.binance_account.orders == []
    with OrderJournal(db) as journal:
        assert_journal_matches_exchange(journal, server)


def test_killed_between_the_send_and_its_answer_the_filled_order_is_found_once(
    live, tmp_path
):
    server, wall = live
    db = tmp_path / "kestrel.db"
    server.fail("binance", "order.create", Fault.lost("hang"))
    proc = worker(server, db, wall, "place", "none", KEY)
    read_until(proc, "READY")
    eventually_blocking(lambda: server.binance_account.orders)  # booked (and filled)
    assert server.binance_account.orders[0].status == "FILLED"
    report = kill_and_reconcile(server, db, wall, proc)
    assert report["resolved"] == [[KEY, JournalState.FILLED.value]]
    assert report["mismatches"] == []
    assert repeat_call(server, db, wall) == "PLACED FILLED"  # the journal's, not a new one
    assert len(server.binance_account.orders) == 1
    with OrderJournal(db) as journal:
        assert_journal_matches_exchange(journal, server)


def oco_worker(server, db: Path, wall: int, stop_at: str) -> subprocess.Popen[str]:
    """A worker that buys, then protects the position with one OCO list at prices fixed here,
    so a repeated call after the kill asks for exactly the same list."""
    last = Decimal(str(server.state.market("BTC/USDT").tape.last_price(server.now.now_ms())))
    tp, sl = (last * Decimal("1.05")).quantize(Decimal("0.01")), (
        last * Decimal("0.95")).quantize(Decimal("0.01"))
    return worker(server, db, wall, "oco", stop_at, OCO_KEY, str(tp), str(sl))


def sell_orders(server) -> dict[str, str]:
    with server.binance_account.lock:
        return {o.type: o.status for o in server.binance_account.orders if o.side == "SELL"}


def repeat_oco(server, db: Path, wall: int) -> str:
    again = oco_worker(server, db, wall, "none")
    out, _ = again.communicate(timeout=120)
    assert again.returncode == 0, out
    return out.strip().splitlines()[-1]


def test_an_oco_killed_after_its_legs_were_journaled_is_placed_once_by_the_repeated_call(
    live, tmp_path
):
    server, wall = live
    db = tmp_path / "kestrel.db"
    proc = oco_worker(server, db, wall, "journaled")
    read_until(proc, "AT journaled")
    report = kill_and_reconcile(server, db, wall, proc)
    assert sorted(report["not_sent"]) == [f"{OCO_KEY}:sl", f"{OCO_KEY}:tp"]
    assert report["mismatches"] == []
    assert server.count("binance", "orderList.oco") == 0
    assert repeat_oco(server, db, wall) == "PLACED SUBMITTED SUBMITTED"
    assert server.count("binance", "orderList.oco") == 1
    assert sell_orders(server) == {"LIMIT_MAKER": "NEW", "STOP_LOSS_LIMIT": "NEW"}
    with OrderJournal(db) as journal:
        assert_journal_matches_exchange(journal, server)


def test_an_oco_killed_before_its_request_left_is_looked_up_and_never_sent(live, tmp_path):
    server, wall = live
    db = tmp_path / "kestrel.db"
    proc = oco_worker(server, db, wall, "sending")
    read_until(proc, "AT sending")
    report = kill_and_reconcile(server, db, wall, proc)
    assert sorted(report["unresolved"]) == [[f"{OCO_KEY}:sl", JournalState.NOT_PLACED.value],
                                            [f"{OCO_KEY}:tp", JournalState.NOT_PLACED.value]]
    assert report["in_flight_after"] == 0 and report["mismatches"] == []
    assert repeat_oco(server, db, wall).startswith("REFUSED EXCHANGE_ERROR")  # not resent
    assert server.count("binance", "orderList.oco") == 0 and sell_orders(server) == {}
    with OrderJournal(db) as journal:
        assert_journal_matches_exchange(journal, server)


def test_an_oco_killed_between_the_send_and_its_answer_is_found_once_with_both_legs(
    live, tmp_path
):
    server, wall = live
    db = tmp_path / "kestrel.db"
    server.fail("binance", "orderList.oco", Fault.lost("hang"))
    proc = oco_worker(server, db, wall, "none")
    read_until(proc, "READY")
    eventually_blocking(lambda: len(sell_orders(server)) == 2)  # booked the list
    assert sell_orders(server) == {"LIMIT_MAKER": "NEW", "STOP_LOSS_LIMIT": "NEW"}
    report = kill_and_reconcile(server, db, wall, proc)
    assert sorted(report["resolved"]) == [[f"{OCO_KEY}:sl", JournalState.OPEN.value],
                                          [f"{OCO_KEY}:tp", JournalState.OPEN.value]]
    assert report["mismatches"] == []
    assert repeat_oco(server, db, wall) == "PLACED SUBMITTED SUBMITTED"  # the journal's legs
    assert server.count("binance", "orderList.oco") == 1
    assert sell_orders(server) == {"LIMIT_MAKER": "NEW", "STOP_LOSS_LIMIT": "NEW"}
    with OrderJournal(db) as journal:
        assert_journal_matches_exchange(journal, server)
