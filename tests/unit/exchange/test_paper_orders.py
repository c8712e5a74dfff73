"""Order acceptance rules of the paper broker: every bad order gets a specific error."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import pytest

from app.domain.errors import (
    AccessDeniedError,
    ErrorCode,
    InsufficientFundsError,
    InvalidOrderError,
    InvalidParameterError,
    NotFoundError,
)
from app.domain.market_rules import MarketRules
from app.domain.trading import OrderStatus, OrderType, Side
from app.trading.port import OrderRequest
from tests.unit.exchange.support import SYMBOL, make_rig

D = Decimal


def run(coro):
    return asyncio.run(coro)


def req(side=Side.BUY, kind=OrderType.MARKET, qty="0.5", agent="a1", **kw) -> OrderRequest:
    return OrderRequest(agent, SYMBOL, side, kind, D(qty), **kw)


@pytest.mark.parametrize(
    ("field", "kwargs", "fragment"),
    [
        ("quantity", {"qty": "-1"}, "greater than 0"),
        ("quantity", {"qty": "0"}, "greater than 0"),
        ("quantity", {"qty": "NaN"}, "finite"),
        ("quantity", {"qty": "Infinity"}, "finite"),
        ("quantity", {"qty": "1e20"}, "absurdly large"),
        ("price", {"kind": OrderType.LIMIT, "price": D("-5")}, "greater than 0"),
        ("price", {"kind": OrderType.LIMIT, "price": D("1e30")}, "absurdly large"),
        ("stop_price", {"kind": OrderType.STOP, "stop_price": D("NaN")}, "finite"),
        ("price", {"kind": OrderType.LIMIT}, "needs <price>"),
        ("stop_price", {"kind": OrderType.STOP}, "needs <stop_price>"),
        ("stop_price", {"kind": OrderType.STOP_LIMIT, "price": D("7000")}, "needs <stop_price>"),
        ("price", {"price": D("7000")}, "not used by a MARKET order"),
    ],
)
def test_bad_numbers_and_missing_prices_are_invalid_parameter_naming_the_field(
    field, kwargs, fragment
):
    rig = make_rig()
    with pytest.raises(InvalidParameterError) as info:
        run(rig.broker.create_order(req(**kwargs)))
    assert info.value.details["parameter"] == field
    assert fragment in info.value.message
    assert rig.ledger.load().orders == []  # nothing reached the ledger


def test_unknown_symbol_is_not_found_listing_the_tradable_ones():
    rig = make_rig()
    with pytest.raises(NotFoundError) as info:
        run(rig.broker.create_order(OrderRequest("a1", "DOGE/USDT", Side.BUY,
                                                 OrderType.MARKET, D(1))))
    assert "DOGE/USDT" in info.value.message
    assert "BTC/USDT" in info.value.message


@pytest.mark.parametrize(
    ("kwargs", "rule"),
    [
        ({"qty": "0.0000001"}, "amount_precision"),
        ({"kind": OrderType.LIMIT, "price": D("7000.001")}, "price_precision"),
        ({"qty": "0.001"}, "min_notional"),  # 0.001 x 7200.85 = 7.2 < 10
        ({"qty": "0.0001", "kind": OrderType.LIMIT, "price": D("7000")}, "min_notional"),
    ],
)
def test_market_rule_violations_are_invalid_order_with_rule_and_numbers(kwargs, rule):
    rig = make_rig()
    with pytest.raises(InvalidOrderError) as info:
        run(rig.broker.create_order(req(**kwargs)))
    assert info.value.details["rule"] == rule
    assert info.value.code is ErrorCode.INVALID_ORDER


def test_min_amount_rule_from_exchange_rules():
    rules = {SYMBOL: MarketRules(SYMBOL, D("0.01"), D("0.0001"), D("0.001"), D("5"))}
    rig = make_rig(rules=rules)
    with pytest.raises(InvalidOrderError) as info:
        run(rig.broker.create_order(req(qty="0.0005")))
    assert info.value.details["rule"] == "min_amount"
    assert "0.001" in info.value.message


def test_buy_beyond_free_cash_is_insufficient_funds_with_needed_and_free():
    rig = make_rig()
    with pytest.raises(InsufficientFundsError) as info:
        run(rig.broker.create_order(req(qty="2")))
    # 2 x 7200.85 x 1.0002 x 1.001 = 14418.46..., free 10000
    assert info.value.details["free"] == "10000"
    assert D(info.value.details["needed"]) > D("14418")
    assert "needs" in info.value.message and "10000" in info.value.message


def test_reserved_cash_is_not_spendable_twice():
    rig = make_rig(visible=2)
    run(rig.broker.create_order(req(qty="1", kind=OrderType.LIMIT, price=D("6000"))))
    with pytest.raises(InsufficientFundsError) as info:
        run(rig.broker.create_order(req(qty="1", kind=OrderType.LIMIT, price=D("6000"))))
    assert info.value.details["free"] == "3994"  # 10000 - 6000 x 1.001


def test_sell_without_holding_is_invalid_order_long_only():
    rig = make_rig()
    with pytest.raises(InvalidOrderError) as info:
        run(rig.broker.create_order(req(side=Side.SELL)))
    assert "hold no BTC" in info.value.message
    assert "short" in info.value.message


def test_sell_more_than_held_is_insufficient_funds_naming_the_asset():
    rig = make_rig()
    run(rig.broker.create_order(req()))
    rig.step()
    with pytest.raises(InsufficientFundsError) as info:
        run(rig.broker.create_order(req(side=Side.SELL, qty="0.6")))
    assert info.value.details == {"asset": "BTC", "needed": "0.6", "free": "0.5", "held": "0.5",
                                  "reserved": "0"}


def test_same_client_order_id_returns_the_same_order_never_two():
    rig = make_rig()
    first = run(rig.broker.create_order(req(client_order_id="x-1")))
    again = run(rig.broker.create_order(req(client_order_id="x-1", qty="0.7")))
    assert again is first
    assert len(rig.ledger.load().orders) == 1
    assert len(rig.step()) == 1


def test_client_order_ids_are_per_agent():
    rig = make_rig()
    mine = run(rig.broker.create_order(req(client_order_id="same")))
    theirs = run(rig.broker.create_order(req(client_order_id="same", agent="a2")))
    assert mine.order_id != theirs.order_id


def test_cancel_releases_reservation_and_is_final():
    rig = make_rig(visible=2)
    order = run(rig.broker.create_order(req(kind=OrderType.LIMIT, price=D("6000"))))
    cancelled = run(rig.broker.cancel_order("a1", SYMBOL, order.order_id))
    assert cancelled.status is OrderStatus.CANCELLED
    assert rig.broker.free("USDT") == D("10000")
    with pytest.raises(InvalidOrderError, match="already CANCELLED"):
        run(rig.broker.cancel_order("a1", SYMBOL, order.order_id))
    assert rig.step(3) == []


def test_cancel_by_client_order_id():
    rig = make_rig(visible=2)
    order = run(rig.broker.create_order(
        req(kind=OrderType.LIMIT, price=D("6000"), client_order_id="mine")
    ))
    cancelled = run(rig.broker.cancel_order("a1", SYMBOL, client_order_id="mine"))
    assert cancelled.order_id == order.order_id


def test_cancel_unknown_order_is_not_found():
    rig = make_rig()
    with pytest.raises(NotFoundError, match="P99"):
        run(rig.broker.cancel_order("a1", SYMBOL, "P99"))


def test_cancel_of_another_agents_order_is_access_denied():
    rig = make_rig(visible=2)
    order = run(rig.broker.create_order(req(kind=OrderType.LIMIT, price=D("6000"))))
    with pytest.raises(AccessDeniedError) as info:
        run(rig.broker.cancel_order("a2", SYMBOL, order.order_id))
    assert info.value.details["owner"] == "a1"
    assert order.status is OrderStatus.SUBMITTED


def test_order_placed_before_a_bar_never_fills_in_an_earlier_bar():
    """Look-ahead: an order made at the cursor only sees bars that open at or after it."""
    rig = make_rig(visible=5)
    rig.clock.advance_to(rig.clock.now_ms())
    order = run(rig.broker.create_order(req(kind=OrderType.LIMIT, price=D("6900"))))
    # bars 0..4 are visible and bar 2 reached 6871.04, but they are history for this order
    assert rig.broker.settle() == []
    assert order.status is OrderStatus.SUBMITTED
