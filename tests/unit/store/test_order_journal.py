"""The order journal: entries and fills survive a reopen; a fill learnt twice is stored once."""

from __future__ import annotations

from decimal import Decimal

import pytest

from app.ccxt.orders import average_cost, changes_from, to_order
from app.domain.trading import OrderStatus, OrderType, Side
from app.store.db import connect
from app.store.order_journal import JournalEntry, JournalFill, JournalState, OrderJournal


def entry(n: int = 1, **kw) -> JournalEntry:
    return JournalEntry("binance", f"kst{n}", "agent", f"k-t:{n}", "BTC/USDT", Side.BUY,
                        OrderType.LIMIT, Decimal("0.01"), 1000, price=Decimal("50000"), **kw)


def fill(trade_id: str, side=Side.BUY, qty="0.01", price="50000", fee="0.00001",
         fee_currency="BTC") -> JournalFill:
    q, p = Decimal(qty), Decimal(price)
    return JournalFill("binance", trade_id, "kst1", "77", "BTC/USDT", side, q, p, q * p,
                       Decimal(fee), fee_currency, 2000)


def test_entries_and_fills_survive_a_reopen_exactly(tmp_path):
    with OrderJournal(tmp_path / "k.db") as journal:
        e = journal.record(entry())
        e = journal.update(e, state=JournalState.OPEN, exchange_order_id="77")
        assert journal.add_fills([fill("5"), fill("5"), fill("6")]) == [fill("5"), fill("6")]
        assert journal.add_fills([fill("6")]) == []
    with OrderJournal(tmp_path / "k.db") as journal:
        assert journal.get("binance", "kst1") == e
        assert journal.by_exchange_id("binance", "77") == e
        assert journal.by_agent_order_id("binance", "agent", "k-t:1") == e
        assert [f.trade_id for f in journal.fills("binance")] == ["5", "6"]
        assert journal.unfinished("binance") == [e]


def test_a_second_entry_with_the_same_client_id_is_refused(tmp_path):
    import sqlite3

    with OrderJournal(tmp_path / "k.db") as journal:
        journal.record(entry())
        with pytest.raises(sqlite3.IntegrityError):
            journal.record(entry())


def test_the_journal_is_committed_with_synchronous_full(tmp_path):
    with OrderJournal(tmp_path / "k.db") as journal:
        assert journal.db.conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    conn = connect(tmp_path / "k.db")
    assert conn.execute("SELECT COUNT(*) FROM order_journal").fetchone()[0] == 0
    conn.close()


def test_an_unknown_entry_shows_as_submitted_with_its_outcome_being_checked():
    order = to_order(entry(state=JournalState.UNKNOWN))
    assert order.status is OrderStatus.SUBMITTED and "being checked" in order.reason
    assert order.order_id == "kst1" and order.client_order_id == "k-t:1"


def test_an_exchange_order_sets_state_amounts_and_fee():
    changes = changes_from({"id": 77, "status": "open", "filled": 0.004, "average": 50000.0,
                            "fee": {"cost": 0.000004, "currency": "BTC"}}, 5)
    assert changes["state"] is JournalState.PARTIALLY_FILLED
    assert changes["filled_quantity"] == Decimal("0.004")
    assert (changes["fee"], changes["fee_currency"]) == (Decimal("0.000004"), "BTC")
    assert changes_from({"id": "1", "status": "closed"}, 5)["state"] is JournalState.FILLED
    assert changes_from({"id": "1", "status": None}, 5)["state"] is JournalState.ACCEPTED


def test_average_cost_with_fees_in_base_and_in_quote():
    fills = [fill("1", qty="0.01", price="50000", fee="0.00001"),
             fill("2", qty="0.01", price="60000", fee="0.00001"),
             fill("3", side=Side.SELL, qty="0.01", price="70000", fee="0.7",
                  fee_currency="USDT")]
    size, avg, realized = average_cost(fills, "BTC", "USDT")
    assert avg == Decimal("1100") / Decimal("0.01998")  # cost over what was received
    assert size == Decimal("0.00998")
    assert realized[2] == (Decimal("70000") - avg) * Decimal("0.01") - Decimal("0.7")
