"""A write the paper account's ledger refuses loses no fill and doubles none.

The database refuses for real here (a trigger aborts the insert of a fill or a cancel's update,
so the transaction rolls back as it would on a failing disk); the paper account must then be
what the ledger holds: the next settle makes a refused fill exactly once, and an order whose
cancel was refused is still open and still fills.
"""

from __future__ import annotations

import asyncio
import sqlite3
from decimal import Decimal
from pathlib import Path

import pytest

from app.domain.trading import Mode, OrderStatus, OrderType, Side
from app.trading.port import OrderRequest
from tests.unit.exchange.support import BAR0_OPEN, DAY, SYMBOL, Rig, make_rig

D = Decimal
REFUSE = ("CREATE TEMP TRIGGER refuse_fills BEFORE INSERT ON fills "
          "BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END")


def buy(rig: Rig, agent: str, qty: str = "0.5"):  # noqa: ANN201 - the placed Order
    return asyncio.run(rig.broker.create_order(
        OrderRequest(agent, SYMBOL, Side.BUY, OrderType.MARKET, D(qty))))


def refuse_fills(rig: Rig, *, after: int = 0) -> None:
    """Make the database refuse every fill after the first ``after`` ones."""
    conn = rig.ledger.connection
    if after:
        conn.execute(REFUSE.replace("BEGIN", f"WHEN (SELECT COUNT(*) FROM fills) >= {after} BEGIN"))
    else:
        conn.execute(REFUSE)


def accept_fills(rig: Rig) -> None:
    rig.ledger.connection.execute("DROP TRIGGER refuse_fills")


def stored_cash(db: Path) -> Decimal:
    conn = sqlite3.connect(db)
    try:
        return D(conn.execute("SELECT total FROM balances WHERE asset = 'USDT'").fetchone()[0])
    finally:
        conn.close()


@pytest.mark.parametrize("mode", [Mode.BACKTEST, Mode.PAPER])
def test_a_fill_the_ledger_refused_is_made_once_at_the_next_settle(tmp_path: Path,
                                                                    mode: Mode) -> None:
    db = tmp_path / "ledger.db"
    rig = make_rig(db, visible=1, mode=mode)
    order = buy(rig, "a1")
    refuse_fills(rig)
    rig.clock.advance_to(BAR0_OPEN + 2 * DAY)
    with pytest.raises(sqlite3.DatabaseError, match="disk I/O error"):
        rig.broker.settle()

    # the account is what the ledger holds: no fill, the order still open, the cash untouched
    assert order.status is OrderStatus.SUBMITTED
    assert asyncio.run(rig.broker.account()).cash == D("10000")
    assert rig.ledger.fills() == []

    accept_fills(rig)
    (fill,) = rig.broker.settle()
    assert fill.price == D("7202.22")  # bar 1's open plus slippage, as without the refusal
    assert fill.time_ms == BAR0_OPEN + DAY
    assert order.status is OrderStatus.FILLED  # the object its caller holds
    cash = D("10000") - D("3601.11") - D("3.60111")
    assert asyncio.run(rig.broker.account()).cash == cash
    assert rig.broker.settle() == []
    assert len(rig.ledger.fills()) == 1
    rig.ledger.close()

    reopened = make_rig(db, visible=2, mode=mode)  # what a restart reads
    assert asyncio.run(reopened.broker.account()).cash == cash == stored_cash(db)
    assert len(reopened.ledger.fills()) == 1
    reopened.ledger.close()


def test_fills_committed_before_a_refused_one_are_not_made_again(tmp_path: Path) -> None:
    rig = make_rig(tmp_path / "ledger.db", visible=1)
    first, second = buy(rig, "a1"), buy(rig, "a2", qty="0.25")
    refuse_fills(rig, after=1)  # the first fill commits, the second is refused
    rig.clock.advance_to(BAR0_OPEN + 2 * DAY)
    with pytest.raises(sqlite3.DatabaseError):
        rig.broker.settle()
    assert first.status is OrderStatus.FILLED
    assert second.status is OrderStatus.SUBMITTED
    assert [f.order_id for f in rig.ledger.fills()] == [first.order_id]

    accept_fills(rig)
    (fill,) = rig.broker.settle()
    assert fill.order_id == second.order_id and fill.quantity == D("0.25")
    fills = rig.ledger.fills()
    assert sorted(f.order_id for f in fills) == sorted([first.order_id, second.order_id])
    spent = sum((f.quantity * f.price + f.fee for f in fills), D(0))
    assert asyncio.run(rig.broker.account()).cash == D("10000") - spent
    rig.ledger.close()


def test_an_order_whose_cancel_the_ledger_refused_stays_open_and_fills(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    rig = make_rig(db, visible=1)
    order = buy(rig, "a1")
    rig.ledger.connection.execute(
        "CREATE TEMP TRIGGER refuse_cancels BEFORE UPDATE ON orders "
        "WHEN NEW.status = 'CANCELLED' BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END")
    with pytest.raises(sqlite3.DatabaseError, match="disk I/O error"):
        asyncio.run(rig.broker.cancel_order("a1", SYMBOL, order.order_id))
    assert order.status is OrderStatus.SUBMITTED  # as the ledger holds it
    assert [o.order_id for o in asyncio.run(rig.broker.open_orders())] == [order.order_id]

    (fill,) = rig.step()
    assert fill.order_id == order.order_id
    assert order.status is OrderStatus.FILLED
    rig.ledger.close()
    reopened = make_rig(db, visible=2)
    assert asyncio.run(reopened.broker.open_orders()) == []
    assert len(reopened.ledger.fills()) == 1
    reopened.ledger.close()
