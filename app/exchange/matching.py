"""Bar-based order matching: when and at what price an order fills within one candle.

Pure functions over one bar, so the fill convention is stated once and tested on its own:
- MARKET fills at the open of the first bar that starts at or after the order's time, with
  slippage against the trader (buys higher, sells lower), rounded to the tick adversely.
- LIMIT fills at its price when the bar's low (buy) / high (sell) reaches it, or at the open
  when the bar opens already through it (a gap in the trader's favour).
- STOP becomes a market order when the high (buy) / low (sell) reaches the stop: it fills at the
  stop, or at the open when the bar gaps through it, with slippage like any market order.
- STOP_LIMIT triggers like STOP, then fills at the trigger price if the limit allows, else rests
  as a LIMIT from the next bar on.
There are no partial fills from volume: an order fills whole, or less only when funds at the fill
price do not allow the whole quantity (the rest is cancelled and the order says why).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from app.domain.market_rules import MarketRules
from app.domain.trading import Order, OrderType, Side


@dataclass(frozen=True, slots=True)
class Bar:
    open_ms: int
    open: Decimal
    high: Decimal
    low: Decimal
    close: Decimal


@dataclass(frozen=True, slots=True)
class Match:
    """The outcome of one order against one bar.

    Attributes:
        price: the execution price (None when the order only triggered and now rests as a limit).
        at_open: the fill happened at the bar's open; such fills come before intrabar ones.
        taker: market-like execution (taker fee) rather than a resting limit (maker fee).
    """

    price: Decimal | None
    at_open: bool
    taker: bool

    @property
    def triggered_only(self) -> bool:
        return self.price is None


def slipped(price: Decimal, side: Side, slippage: Decimal, rules: MarketRules) -> Decimal:
    """Move a market execution price against the trader and round it to the tick, adversely."""
    if side is Side.BUY:
        return rules.round_price(price * (1 + slippage), up=True)
    return rules.round_price(price * (1 - slippage), up=False)


def _limit(order: Order, bar: Bar) -> Match | None:
    limit = order.price
    assert limit is not None
    if order.side is Side.BUY:
        if bar.open <= limit:
            return Match(bar.open, at_open=True, taker=False)
        if bar.low <= limit:
            return Match(limit, at_open=False, taker=False)
        return None
    if bar.open >= limit:
        return Match(bar.open, at_open=True, taker=False)
    if bar.high >= limit:
        return Match(limit, at_open=False, taker=False)
    return None


def _trigger(order: Order, bar: Bar) -> tuple[Decimal, bool] | None:
    """The price at which a stop triggers in this bar, and whether it was at the open."""
    stop = order.stop_price
    assert stop is not None
    if order.side is Side.BUY:
        if bar.open >= stop:
            return bar.open, True
        if bar.high >= stop:
            return stop, False
        return None
    if bar.open <= stop:
        return bar.open, True
    if bar.low <= stop:
        return stop, False
    return None


def match_order(order: Order, bar: Bar, slippage: Decimal, rules: MarketRules) -> Match | None:
    """How ``order`` executes in ``bar``; ``None`` when nothing happens."""
    kind = order.order_type
    if kind is OrderType.MARKET:
        return Match(slipped(bar.open, order.side, slippage, rules), at_open=True, taker=True)
    if kind is OrderType.LIMIT or (kind is OrderType.STOP_LIMIT and order.triggered):
        return _limit(order, bar)
    trigger = _trigger(order, bar)
    if trigger is None:
        return None
    price, at_open = trigger
    if kind is OrderType.STOP:
        return Match(slipped(price, order.side, slippage, rules), at_open=at_open, taker=True)
    limit = order.price
    assert limit is not None
    allowed = price <= limit if order.side is Side.BUY else price >= limit
    if allowed:
        return Match(price, at_open=at_open, taker=True)
    return Match(None, at_open=at_open, taker=False)


def priority(order: Order, match: Match) -> tuple[int, int]:
    """Execution order inside one bar: fills at the open first, then stops before limits.

    Putting stops first is the pessimistic reading of a bar that touched both a take-profit and a
    stop-loss: the bar's path is unknown, so the loss is assumed to have come first.
    """
    is_stop = order.order_type in (OrderType.STOP, OrderType.STOP_LIMIT) and not order.triggered
    return (0 if match.at_open else 1, 0 if is_stop else 1)
