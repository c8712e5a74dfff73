"""Market rules and the one-bar matching convention, on plain values."""

from __future__ import annotations

from decimal import Decimal

import pytest

from app.domain.errors import InvalidOrderError
from app.domain.market_rules import MarketRules, default_rules, from_ccxt_market
from app.domain.trading import Order, OrderType, Side
from app.exchange.matching import Bar, match_order, priority

D = Decimal
RULES = MarketRules("BTC/USDT")
BAR = Bar(0, D("100"), D("110"), D("90"), D("105"))


def order(side: Side, kind: OrderType, price: str | None = None, stop: str | None = None,
          triggered: bool = False) -> Order:
    return Order("o", "c", "a", "BTC/USDT", side, kind, D(1), 0,
                 price=None if price is None else D(price),
                 stop_price=None if stop is None else D(stop), triggered=triggered)


def test_default_rules_take_the_tick_from_the_data_precision():
    assert default_rules("X/USDT", 2).tick == D("0.01")
    assert default_rules("X/USDT", 5).tick == D("0.00001")
    assert default_rules("X/USDT", 0).tick == D("1")


def test_rules_from_a_ccxt_market_structure():
    rules = from_ccxt_market({
        "symbol": "BTC/USDT",
        "precision": {"price": 0.01, "amount": 0.00001},
        "limits": {"amount": {"min": 0.00001}, "cost": {"min": 5}},
    })
    assert (rules.tick, rules.step, rules.min_amount, rules.min_notional) == (
        D("0.01"), D("0.00001"), D("0.00001"), D("5"))


def test_floor_amount_and_adverse_price_rounding():
    assert RULES.floor_amount(D("0.1234567")) == D("0.123456")
    assert RULES.round_price(D("100.001"), up=True) == D("100.01")
    assert RULES.round_price(D("100.009"), up=False) == D("100.00")


def test_precision_errors_suggest_a_valid_value():
    with pytest.raises(InvalidOrderError, match=r"e\.g\. 0\.123456"):
        RULES.check_quantity(D("0.1234567"))
    with pytest.raises(InvalidOrderError, match=r"multiple of 0\.01"):
        RULES.check_price(D("100.001"), "price")


@pytest.mark.parametrize(
    ("o", "expected", "at_open"),
    [
        (order(Side.BUY, OrderType.MARKET), D("100.02"), True),
        (order(Side.SELL, OrderType.MARKET), D("99.98"), True),
        (order(Side.BUY, OrderType.LIMIT, price="95"), D("95"), False),
        (order(Side.BUY, OrderType.LIMIT, price="101"), D("100"), True),
        (order(Side.SELL, OrderType.LIMIT, price="108"), D("108"), False),
        (order(Side.SELL, OrderType.LIMIT, price="99"), D("100"), True),
        (order(Side.BUY, OrderType.STOP, stop="108"), D("108.03"), False),  # 108.0216 up
        (order(Side.SELL, OrderType.STOP, stop="92"), D("91.98"), False),  # 91.9816 down
        (order(Side.SELL, OrderType.STOP, stop="101"), D("99.98"), True),
        (order(Side.BUY, OrderType.STOP_LIMIT, price="109", stop="108"), D("108"), False),
        (order(Side.BUY, OrderType.STOP_LIMIT, price="96", stop="120", triggered=True),
         D("96"), False),
    ],
)
def test_match_prices(o, expected, at_open):
    match = match_order(o, BAR, D("0.0002"), RULES)
    assert match is not None
    assert (match.price, match.at_open) == (expected, at_open)


@pytest.mark.parametrize(
    "o",
    [
        order(Side.BUY, OrderType.LIMIT, price="89"),
        order(Side.SELL, OrderType.LIMIT, price="111"),
        order(Side.BUY, OrderType.STOP, stop="111"),
        order(Side.SELL, OrderType.STOP, stop="89"),
    ],
)
def test_prices_outside_the_bar_do_not_fill(o):
    assert match_order(o, BAR, D("0.0002"), RULES) is None


def test_stop_limit_triggered_beyond_its_limit_only_triggers():
    o = order(Side.SELL, OrderType.STOP_LIMIT, price="102", stop="101")  # opens 100 < 102
    match = match_order(o, BAR, D("0"), RULES)
    assert match is not None and match.triggered_only and match.at_open


def test_priority_puts_open_fills_first_and_stops_before_limits():
    stop = order(Side.SELL, OrderType.STOP, stop="92")
    limit = order(Side.SELL, OrderType.LIMIT, price="108")
    m_stop = match_order(stop, BAR, D(0), RULES)
    m_limit = match_order(limit, BAR, D(0), RULES)
    market = order(Side.BUY, OrderType.MARKET)
    m_market = match_order(market, BAR, D(0), RULES)
    ranked = sorted([(priority(limit, m_limit), "limit"), (priority(stop, m_stop), "stop"),
                     (priority(market, m_market), "market")])
    assert [name for _, name in ranked] == ["market", "stop", "limit"]
