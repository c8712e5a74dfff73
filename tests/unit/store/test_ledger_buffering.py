"""The ledger's buffered records: audit rows and deferred settle points are never lost on a normal
close, commit with the next order or fill, and stay pending across a failed transaction."""

from __future__ import annotations

import asyncio
import sqlite3
from decimal import Decimal

import pytest

from app.domain.trading import Mode, OrderType, Side
from app.exchange.paper import PaperBroker
from app.runtime.recorders import SqliteToolCallRecorder
from app.store.ledger import Ledger
from app.store.texts import install
from app.tools.executor import ToolCallRecord
from app.trading.port import OrderRequest
from tests.unit.exchange.support import SYMBOL, make_rig

D = Decimal


def _call(i: int) -> ToolCallRecord:
    return ToolCallRecord(
        agent_id="a1", tool_name="get_historical_klines", params={"limit": i, "symbol": "BTC/USDT"},
        status="success", error_code=None, result_xml=f"<tool_result>{i}</tool_result>",
        started_ms=1_000 + i, duration_ms=0.5,
    )


def _risk_row(i: int) -> tuple[object, ...]:
    return (1_000 + i, "a1", "BTC/USDT", "BUY", "MARKET", "0.1", "100", 1, "", "")


def _count(path, table: str) -> int:
    conn = install(sqlite3.connect(path))
    try:
        return conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]  # noqa: S608
    finally:
        conn.close()


def test_buffered_audit_trail_loses_nothing_on_a_normal_close(tmp_path):
    path = tmp_path / "audit.db"
    ledger = Ledger(path, durable=False, audit_batch=256)
    recorder = SqliteToolCallRecorder(ledger)
    for i in range(1_000):  # several full batches plus an unflushed tail of 232
        recorder.record(_call(i))
    for i in range(10):
        ledger.record_risk_decision(_risk_row(i))
    assert ledger.pending > 0
    ledger.close()

    assert _count(path, "tool_calls") == 1_000
    assert _count(path, "risk_decisions") == 10
    reopened = Ledger(path)
    calls = reopened.tool_calls()
    reopened.close()
    assert [c["params"]["limit"] for c in calls] == list(range(1_000))  # in call order
    assert calls[-1]["result_xml"] == "<tool_result>999</tool_result>"


def test_audit_rows_wait_for_the_batch_then_are_written_together(tmp_path):
    path = tmp_path / "audit.db"
    ledger = Ledger(path, durable=False, audit_batch=4)
    recorder = SqliteToolCallRecorder(ledger)
    for i in range(3):
        recorder.record(_call(i))
    assert _count(path, "tool_calls") == 0 and ledger.pending == 3
    recorder.record(_call(3))
    assert _count(path, "tool_calls") == 4 and ledger.pending == 0
    ledger.close()


def test_a_default_ledger_writes_every_audit_record_at_once(tmp_path):
    path = tmp_path / "audit.db"
    ledger = Ledger(path)
    SqliteToolCallRecorder(ledger).record(_call(1))
    ledger.record_risk_decision(_risk_row(1))
    assert ledger.pending == 0
    assert _count(path, "tool_calls") == 1 and _count(path, "risk_decisions") == 1
    ledger.close()


def test_reading_through_the_ledger_shows_pending_rows():
    ledger = Ledger(durable=False, audit_batch=100)
    SqliteToolCallRecorder(ledger).record(_call(7))
    assert [c["params"]["limit"] for c in ledger.tool_calls()] == [7]
    assert ledger.connection.execute("SELECT COUNT(*) FROM tool_calls").fetchone()[0] == 1
    ledger.close()


def test_pending_rows_survive_a_transaction_that_rolls_back():
    ledger = Ledger(durable=False, audit_batch=100)
    SqliteToolCallRecorder(ledger).record(_call(1))
    with pytest.raises(RuntimeError), ledger.transaction():
        raise RuntimeError("the unit of work failed")
    assert ledger.pending == 1
    assert len(ledger.tool_calls()) == 1
    ledger.close()


def test_an_audit_batch_below_one_is_refused():
    with pytest.raises(ValueError, match="audit_batch"):
        Ledger(audit_batch=0)


def test_deferred_meta_is_rewritten_after_a_direct_write_changed_it():
    ledger = Ledger(durable=False)
    ledger.record_settle(1, D(100), D(100), {"k": 1}, defer=True)
    ledger.flush()
    ledger.record_settle(2, D(100), D(100), {"k": 2})  # written at once
    ledger.record_settle(3, D(100), D(100), {"k": 1}, defer=True)  # same text as before
    ledger.flush()
    assert ledger.load().meta["k"] == "1"
    ledger.close()


def test_a_backtest_broker_defers_its_per_bar_points_until_an_order_commits(tmp_path):
    path = tmp_path / "bt.db"
    rig = make_rig(path, visible=2, mode=Mode.BACKTEST)
    before = _count(path, "equity_curve")
    for _ in range(3):
        rig.clock.advance_to(rig.clock.now_ms() + 86_400_000)
        rig.broker.settle()
    assert _count(path, "equity_curve") == before  # three points wait in memory
    _place_market_buy(rig.broker)  # the order's commit carries them
    assert _count(path, "equity_curve") == before + 3
    rig.ledger.close()


def test_a_backtest_broker_loses_no_point_on_a_normal_close(tmp_path):
    path = tmp_path / "bt.db"
    rig = make_rig(path, visible=2, mode=Mode.BACKTEST)
    for _ in range(5):
        rig.clock.advance_to(rig.clock.now_ms() + 86_400_000)
        rig.broker.settle()
    curve = rig.ledger.equity_curve()
    rig.ledger.close()
    reopened = Ledger(path)
    assert reopened.equity_curve() == curve and len(curve) >= 5
    assert reopened.load().meta["settled_ms"] == str(curve[-1][0])
    reopened.close()


def test_a_paper_broker_commits_every_settle_at_once(tmp_path):
    path = tmp_path / "paper.db"
    rig = make_rig(path, visible=2, mode=Mode.PAPER)
    before = _count(path, "equity_curve")
    rig.clock.advance_to(rig.clock.now_ms() + 86_400_000)
    rig.broker.settle()
    assert _count(path, "equity_curve") == before + 1
    assert rig.ledger.pending == 0
    rig.ledger.close()


def _place_market_buy(broker: PaperBroker) -> None:
    asyncio.run(broker.create_order(OrderRequest(
        agent_id="a1", symbol=SYMBOL, side=Side.BUY, order_type=OrderType.MARKET,
        quantity=D("0.01"),
    )))
