"""A paper account whose stored money is out of range is refused at opening, naming the value;
one that traded with it is never started over in place."""

from __future__ import annotations

import asyncio
import sqlite3
from decimal import Decimal

import pytest

from app.domain.errors import OperationalError
from app.domain.trading import OrderType, Side
from app.store.ledger import Ledger
from app.trading.port import OrderRequest
from tests.unit.exchange.support import SYMBOL, make_rig


def test_an_account_that_traded_with_a_huge_cash_is_refused_and_not_started_over(tmp_path):
    db = tmp_path / "kestrel.db"
    rig = make_rig(db, visible=1)
    asyncio.run(rig.broker.create_order(
        OrderRequest("a1", SYMBOL, Side.BUY, OrderType.MARKET, Decimal("0.5"))))
    assert len(rig.step()) == 1
    rig.ledger.close()
    conn = sqlite3.connect(db)
    conn.execute("UPDATE meta SET value='-1' WHERE key='initial_cash'")
    conn.commit()
    conn.close()

    with pytest.raises(OperationalError) as refused:
        make_rig(db, visible=3)
    message = str(refused.value)
    assert "holds an initial cash of -1 USDT, outside the range" in message
    assert "Its 1 orders and 1 fills were made with that money" in message
    assert "reset-paper-account" not in message

    ledger = Ledger(db)
    with pytest.raises(OperationalError, match="this one has 1 orders and 1 fills"):
        ledger.start_over("USDT", Decimal(10_000))
    assert ledger.meta_value("initial_cash") == "-1", "nothing changed"
    ledger.close()


def test_an_account_in_range_opens_as_before(tmp_path):
    db = tmp_path / "kestrel.db"
    make_rig(db, cash="1000000000000").ledger.close()  # the largest cash a setting allows
    rig = make_rig(db, visible=2)
    assert rig.broker.initial_cash == Decimal(10) ** 12
