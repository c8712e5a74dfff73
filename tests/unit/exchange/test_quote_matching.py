"""Quote-based matching: what a paper order does against one live quote (pure rules)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from app.domain.market_rules import default_rules
from app.domain.trading import Order, OrderType, Side
from app.exchange.quote_matching import match_quote
from app.exchange.quotes import Quote

RULES = default_rules("BTC/USDT", 2)
SLIP = Decimal("0.0002")
QUOTE = Quote("BTC/USDT", bid=Decimal("100.00"), ask=Decimal("100.10"), last=Decimal("100.05"),
              time_ms=1_000)


def order(side: Side, kind: OrderType, price: str | None = None, stop: str | None = None,
          triggered: bool = False) -> Order:
    return Order("P1", "c1", "a", "BTC/USDT", side, kind, Decimal("1"), 0,
                 price=None if price is None else Decimal(price),
                 stop_price=None if stop is None else Decimal(stop), triggered=triggered)


def test_a_market_buy_takes_the_ask_and_a_sell_the_bid_with_adverse_slippage():
    bought = match_quote(order(Side.BUY, OrderType.MARKET), QUOTE, SLIP, RULES, resting=False)
    sold = match_quote(order(Side.SELL, OrderType.MARKET), QUOTE, SLIP, RULES, resting=False)
    assert bought is not None and bought.price == Decimal("100.13") and bought.taker
    assert sold is not None and sold.price == Decimal("99.98") and sold.taker


def test_a_market_order_waits_when_its_side_of_the_book_is_empty():
    empty = Quote("BTC/USDT", None, None, Decimal(100), 1_000)
    assert match_quote(order(Side.BUY, OrderType.MARKET), empty, SLIP, RULES,
                       resting=False) is None


@pytest.mark.parametrize(("side", "limit", "resting", "expected", "taker"), [
    (Side.BUY, "100.20", False, "100.10", True),   # marketable on arrival: takes the ask
    (Side.BUY, "100.20", True, "100.20", False),   # rested, the ask came through it: its price
    (Side.BUY, "100.05", True, None, None),        # the ask is above it: waits
    (Side.SELL, "99.90", False, "100.00", True),
    (Side.SELL, "99.90", True, "99.90", False),
    (Side.SELL, "100.05", True, None, None),
])
def test_a_limit_fills_when_the_touch_crosses_it(side, limit, resting, expected, taker):
    match = match_quote(order(side, OrderType.LIMIT, limit), QUOTE, SLIP, RULES, resting=resting)
    if expected is None:
        assert match is None
        return
    assert match is not None and match.price == Decimal(expected) and match.taker is taker


def test_a_stop_triggers_on_the_last_price_and_fills_at_the_touch():
    sell_stop = order(Side.SELL, OrderType.STOP, stop="100.05")
    match = match_quote(sell_stop, QUOTE, SLIP, RULES, resting=True)
    assert match is not None and match.price == Decimal("99.98") and match.taker
    below = order(Side.SELL, OrderType.STOP, stop="100.00")
    assert match_quote(below, QUOTE, SLIP, RULES, resting=True) is None


def test_a_stop_limit_that_cannot_fill_at_the_touch_rests_as_a_limit():
    stop_limit = order(Side.BUY, OrderType.STOP_LIMIT, price="100.08", stop="100.00")
    match = match_quote(stop_limit, QUOTE, SLIP, RULES, resting=True)
    assert match is not None and match.triggered_only
    allowed = order(Side.BUY, OrderType.STOP_LIMIT, price="100.10", stop="100.00")
    filled = match_quote(allowed, QUOTE, SLIP, RULES, resting=True)
    assert filled is not None and filled.price == Decimal("100.10")
