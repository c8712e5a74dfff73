"""What the real side says, retold in blind terms: which numbers are rescaled and which stay.

Prices and base quantities change between the worlds; quote amounts, percentages and counts do
not. In a refusal a number is rescaled when its details say what it is, or when it follows
"price" or "at"; an order's reason keeps the agent's own words as written.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from decimal import Decimal

import pytest

from app.domain.clock import ms_to_iso, parse_time
from app.domain.errors import InsufficientFundsError, RiskRejection
from app.domain.market_rules import MarketRules
from app.domain.risk_view import RiskView
from app.domain.trading import Order, OrderType, Side
from app.risk.types import OrderIntent
from app.runtime.blind import BlindGuard
from app.runtime.blind_map import WEEK_MS, BlindMap

SHIFT_MS = 2_500 * WEEK_MS


def _blind() -> BlindMap:
    return BlindMap(shift_ms=SHIFT_MS, symbols={"BTC/USDT": "ASSET1/QUOTE"},
                    assets={"USDT": "QUOTE", "BTC": "ASSET1"})


def test_a_broker_refusal_rescales_its_price_and_quantity_and_keeps_its_quote_amounts() -> None:
    refused = InsufficientFundsError(
        "Not enough USDT: the order needs 10010.5 (quantity 1.25 at about 8000, fee and "
        "slippage included) but only 9000 is free.",
        details={"asset": "USDT", "needed": "10010.5", "free": "9000", "quantity": "1.25",
                 "price": "8000"})
    told = _blind().retold(refused)
    assert isinstance(told, InsufficientFundsError)
    assert told.message == (
        "Not enough QUOTE: the order needs 10010.5 (quantity 39.0625 at about 256, fee and "
        "slippage included) but only 9000 is free.")
    assert told.details == {"asset": "QUOTE", "needed": "10010.5", "free": "9000",
                            "quantity": "39.0625", "price": "256"}


def test_a_risk_refusal_keeps_its_amounts_and_percentages_and_shifts_its_times() -> None:
    blocked = RiskRejection(
        "daily_loss_limit", "Daily loss limit reached: equity fell 5.2% below the day's start "
        "10000 USDT (limit 5.0%); new entries are blocked until 2019-10-05T00:00:00Z",
        {"loss_pct": "5.20", "limit_pct": "5", "blocked_until": "2019-10-05T00:00:00Z"})
    told = _blind().retold(blocked)
    until = ms_to_iso(parse_time("2019-10-05T00:00:00Z") - SHIFT_MS)
    assert isinstance(told, RiskRejection) and told.rule == "daily_loss_limit"
    assert told.reason == (
        "Daily loss limit reached: equity fell 5.2% below the day's start 10000 QUOTE (limit "
        f"5.0%); new entries are blocked until {until}")
    assert told.details == {"loss_pct": "5.20", "limit_pct": "5", "blocked_until": until}


def test_an_orders_reason_keeps_the_agents_words_and_rescales_what_the_broker_added() -> None:
    order = Order("P00000001", "c1", "trader-1", "BTC/USDT", Side.BUY, OrderType.LIMIT,
                  Decimal("0.5"), 0, price=Decimal("8000"), filled_quantity=Decimal("0.2"),
                  reason="buy at 250.5 on the dip; filled 0.2 of 0.5; the rest was cancelled "
                         "for lack of funds at the fill price")
    assert _blind().order(order).reason == (
        "buy at 250.5 on the dip; filled 6.25 of 15.625; the rest was cancelled for lack of "
        "funds at the fill price")


class _Account:
    """The real broker, as far as the guard in front of a blind venue asks it."""

    def market_rules(self, symbol: str) -> MarketRules:
        return MarketRules(symbol)

    def risk_view(self) -> RiskView:
        return RiskView(equity=Decimal(8000), cash=Decimal(8000), peak_equity=Decimal(8000),
                        day_start_equity=Decimal(8000), now_ms=0, quote_currency="USDT")


class _NotionalCap:
    """A Risk Guard with one rule: no order worth more than 5000."""

    def __init__(self) -> None:
        self.judged: list[OrderIntent] = []

    @contextlib.contextmanager
    def admit(self, intent: OrderIntent, view: RiskView) -> Iterator[None]:
        self.judged.append(intent)
        raise RiskRejection(
            "max_order_notional",
            f"Order notional {intent.notional:f} USDT > limit 5000 USDT for {intent.symbol}",
            {"notional": f"{intent.notional:f}", "limit": "5000"})
        yield

    def preview(self, intent: OrderIntent, view: RiskView) -> None:
        return None

    def refuse(self, intent: OrderIntent, view: RiskView, rule: str, reason: str) -> None:
        return None


def test_a_risk_refusal_quoting_an_amount_equal_to_the_orders_price_keeps_the_amount() -> None:
    inner = _NotionalCap()
    guard = BlindGuard(inner, _blind(), _Account())  # type: ignore[arg-type]
    # 31.25 blind at 256 is 1 BTC at 8000: worth 8000 USDT, the same number as the price
    intent = OrderIntent("trader-1", "ASSET1/QUOTE", Side.BUY, OrderType.MARKET,
                         Decimal("31.25"), Decimal("256"))
    with pytest.raises(RiskRejection) as refused, guard.admit(intent, _Account().risk_view()):
        pass
    [judged] = inner.judged
    assert (judged.symbol, judged.quantity, judged.reference_price) == (
        "BTC/USDT", Decimal(1), Decimal(8000))  # judged in real terms
    assert refused.value.reason == "Order notional 8000 QUOTE > limit 5000 QUOTE for ASSET1/QUOTE"
    assert refused.value.details == {"notional": "8000", "limit": "5000"}
