"""Kill -9 in the middle of a paper run: nothing committed is lost, nothing is duplicated.

A real subprocess (``ledger_crash_worker.py``) trades through the paper broker on real BTC/USDT
hourly data and is killed with SIGKILL after a seeded number of fills plus a seeded delay, so the
kill lands anywhere: between bars, between two orders, inside a settle. After each kill the ledger
is reopened and checked against the uninterrupted reference run, then the run is resumed to the
end and must finish exactly where the reference finished.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import pytest

from app.store.ledger import Ledger
from tests.helpers.paths import BTC_USDT_1H
from tests.integration.ledger_crash_worker import CASH, state_before

WORKER = Path(__file__).with_name("ledger_crash_worker.py")
DATA = BTC_USDT_1H
REPO = Path(__file__).resolve().parents[2]


def run_worker(db: Path, pace: float = 0.0) -> subprocess.Popen[str]:
    return subprocess.Popen(  # noqa: S603 - our own interpreter and script
        [sys.executable, str(WORKER), str(db), str(DATA), str(pace)],
        stdout=subprocess.PIPE, text=True, cwd=REPO,
    )


def finish(db: Path) -> None:
    proc = run_worker(db)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    assert out.rstrip().endswith("DONE")


def dump(db: Path) -> dict:
    ledger = Ledger(db)
    try:
        snap = ledger.load()
        return {
            "fills": [
                (f.fill_id, f.order_id, f.side, f.quantity, f.price, f.fee, f.time_ms,
                 f.realized_pnl) for f in ledger.fills()
            ],
            "orders": [
                (r.order.order_id, r.order.client_order_id, r.order.status, r.order.quantity,
                 r.order.filled_quantity, r.reserved) for r in snap.orders
            ],
            "balances": snap.balances,
            "positions": {s: (p.size, p.avg_price, p.realized_pnl)
                          for s, p in snap.positions.items()},
            "equity": ledger.equity_curve(),
            "cursor": snap.meta.get("cursor:BTC/USDT"),
        }
    finally:
        ledger.close()


def check_consistent_prefix(state: dict, reference: dict) -> None:
    fills = state["fills"]
    assert fills == reference["fills"][: len(fills)], "a committed fill differs or was lost"
    ledger_fills = Ledger(state["db"]).fills()
    cash, btc = state_before(ledger_fills, 2**62)
    assert state["balances"].get("USDT", CASH) == cash
    assert state["balances"].get("BTC", Decimal(0)) == btc
    assert state["positions"].get("BTC/USDT", (Decimal(0),))[0] == btc
    client_ids = [o[1] for o in state["orders"]]
    assert len(client_ids) == len(set(client_ids)), "an order was placed twice"
    ref_orders = {o[0]: o[1] for o in reference["orders"]}
    assert all(ref_orders[o[0]] == o[1] for o in state["orders"])
    filled_orders = [f[1] for f in fills]
    assert len(filled_orders) == len(set(filled_orders)), "an order filled twice"


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    db = tmp_path_factory.mktemp("ref") / "ref.db"
    finish(db)
    return dump(db)


@pytest.mark.slow
def test_kill_9_at_seeded_moments_then_resume_matches_the_uninterrupted_run(tmp_path, reference):
    total = len(reference["fills"])
    assert total > 100
    rng = random.Random(20261122)
    points = sorted(rng.sample(range(1, total - 10), 4))
    killed = 0
    for n in points:
        db = tmp_path / f"kill-{n}.db"
        proc = run_worker(db, pace=0.0005)
        assert proc.stdout is not None
        seen = 0
        for line in proc.stdout:
            if line.startswith("FILL"):
                seen += 1
                if seen == n:
                    time.sleep(rng.uniform(0, 0.003))
                    proc.send_signal(signal.SIGKILL)
                    break
        proc.wait(timeout=60)
        proc.stdout.close()
        killed += proc.returncode == -signal.SIGKILL

        state = dump(db)
        state["db"] = db
        assert len(state["fills"]) >= n  # every fill reported as committed is there
        check_consistent_prefix(state, reference)

        finish(db)  # the run can continue from the ledger alone
        final = dump(db)
        for key in ("fills", "orders", "balances", "positions", "equity", "cursor"):
            assert final[key] == reference[key], key
    assert killed == len(points)
