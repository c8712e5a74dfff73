"""The durable ledger: schema migrations, atomic fills, restart and the audit recorders."""

from __future__ import annotations

import asyncio
import sqlite3
from decimal import Decimal

import pytest

from app.domain.errors import OperationalError
from app.domain.trading import OrderStatus, OrderType, Side
from app.risk.types import RiskDecision
from app.runtime.recorders import SqliteRiskRecorder, SqliteToolCallRecorder
from app.store import db
from app.store.ledger import Ledger
from app.tools.executor import ToolCallRecord
from app.trading.port import OrderRequest
from tests.unit.exchange.support import SYMBOL, make_rig

D = Decimal


def run(coro):
    return asyncio.run(coro)


def test_new_database_is_at_the_latest_schema_version_in_wal_mode(tmp_path):
    ledger = Ledger(tmp_path / "l.db")
    conn = ledger.connection
    assert db.schema_version(conn) == db.SCHEMA_VERSION == len(db.MIGRATIONS)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_version_1_database_migrates_and_keeps_its_data(tmp_path):
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    assert db.migrate(conn, target=1) == 1
    conn.execute("INSERT INTO balances (asset, total) VALUES ('USDT', '1234.5')")
    conn.execute("INSERT INTO meta (key, value) VALUES ('initialized', '1')")
    conn.close()
    ledger = Ledger(path)
    assert db.schema_version(ledger.connection) == db.SCHEMA_VERSION
    snap = ledger.load()
    assert snap.balances == {"USDT": D("1234.5")}
    assert snap.holdings == {}  # table added by step 2
    names = {r[0] for r in ledger.connection.execute("SELECT name FROM sqlite_master")}
    assert {"holdings", "fills_symbol_time", "orders_open"} <= names


def test_database_from_a_newer_kestrel_is_refused(tmp_path):
    path = tmp_path / "new.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version={db.SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(OperationalError, match="upgrade Kestrel"):
        Ledger(path)


def test_file_that_is_not_a_database_is_an_operational_error(tmp_path):
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(OperationalError, match="cannot open the ledger"):
        Ledger(path)


def test_failed_migration_step_rolls_back_to_the_old_version(tmp_path, monkeypatch):
    path = tmp_path / "half.db"
    conn = sqlite3.connect(path, isolation_level=None)
    db.migrate(conn, target=1)
    monkeypatch.setattr(db, "MIGRATIONS", (*db.MIGRATIONS[:1], "CREATE TABLE x (a); BROKEN SQL"))
    with pytest.raises(sqlite3.OperationalError):
        db.migrate(conn, target=2)
    assert db.schema_version(conn) == 1
    assert conn.execute("SELECT name FROM sqlite_master WHERE name='x'").fetchone() is None


def test_restart_from_the_ledger_rebuilds_the_broker_exactly(tmp_path):
    path = tmp_path / "acct.db"
    rig = make_rig(path, visible=1)
    run(rig.broker.create_order(OrderRequest("a1", SYMBOL, Side.BUY, OrderType.MARKET, D("1"))))
    rig.step()
    run(rig.broker.create_order(
        OrderRequest("a1", SYMBOL, Side.BUY, OrderType.LIMIT, D("0.2"), price=D("6000"),
                     client_order_id="low")
    ))
    run(rig.broker.create_order(
        OrderRequest("a1", SYMBOL, Side.SELL, OrderType.LIMIT, D("0.5"), price=D("9000"))
    ))
    run(rig.broker.create_order(
        OrderRequest("a1", SYMBOL, Side.SELL, OrderType.STOP_LIMIT, D("0.3"),
                     stop_price=D("7300"), price=D("7200"))
    ))
    rig.step()
    before = rig.broker.snapshot()
    account_before = run(rig.broker.account())
    rig.ledger.close()

    again = make_rig(path, visible=3)
    assert again.broker.snapshot() == before
    assert run(again.broker.account()) == account_before
    assert again.broker.find_order("a1", "low").status is OrderStatus.SUBMITTED
    assert again.broker.risk_view() == rig.broker.risk_view()


def test_reopening_with_another_mode_or_currency_is_refused(tmp_path):
    from app.domain.trading import Mode

    path = tmp_path / "acct.db"
    make_rig(path).ledger.close()
    with pytest.raises(OperationalError, match="BACKTEST account in USDT"):
        make_rig(path, mode=Mode.PAPER)


def test_fill_and_balance_change_commit_in_one_transaction(tmp_path, monkeypatch):
    """If the fill's transaction fails, neither the fill nor the balance change is stored."""
    path = tmp_path / "acct.db"
    rig = make_rig(path, visible=1)
    run(rig.broker.create_order(OrderRequest("a1", SYMBOL, Side.BUY, OrderType.MARKET, D("1"))))
    original = Ledger._put_balances

    def failing(conn, balances):
        original(conn, balances)
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(Ledger, "_put_balances", staticmethod(failing))
    with pytest.raises(sqlite3.OperationalError):
        rig.step()
    monkeypatch.undo()
    snap = Ledger(path).load()
    assert snap.fill_count == 0
    assert snap.balances == {"USDT": D("10000")}
    assert snap.orders[0].order.status is OrderStatus.SUBMITTED


def test_risk_recorder_stores_every_decision():
    ledger = Ledger()
    recorder = SqliteRiskRecorder(ledger)
    recorder.record(RiskDecision(1, "a1", SYMBOL, Side.BUY, OrderType.MARKET, D("0.5"),
                                 D("3600"), True))
    recorder.record(RiskDecision(2, "a1", SYMBOL, Side.BUY, OrderType.MARKET, D("5"),
                                 D("36000"), False, "max_order_notional", "36000 > 5000"))
    rows = ledger.risk_decisions()
    assert [(r["accepted"], r["rule"], r["notional"]) for r in rows] == [
        (1, "", "3600"), (0, "max_order_notional", "36000")
    ]


def test_tool_call_recorder_stores_params_and_result():
    ledger = Ledger()
    SqliteToolCallRecorder(ledger).record(ToolCallRecord(
        "a1", "create_order", {"quantity": D("0.5"), "side": "BUY"}, "success", None,
        "<tool_result/>", 123, 1.5,
    ))
    (row,) = ledger.tool_calls()
    assert row["params"] == {"quantity": "0.5", "side": "BUY"}
    assert (row["tool_name"], row["status"], row["started_ms"]) == ("create_order", "success", 123)
