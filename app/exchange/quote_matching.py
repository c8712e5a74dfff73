"""Quote-based order matching: when and at what price an order fills against a live quote.

The live counterpart of ``matching`` (which fills against candles), pure and stated once:
- MARKET fills at the touch, the best ask for a buy and the best bid for a sell, with slippage
  against the trader, rounded to the tick adversely (taker).
- LIMIT fills when the touch crosses it: a buy when the ask is at or below the limit, a sell when
  the bid is at or above it. An order that crosses on the first quote after it was placed was
  marketable: it takes the touch (taker, the better price). One that rested first fills at its
  own limit (maker): the market moved through it between two reads.
- STOP triggers on the last traded price (a buy when it reaches the stop from below, a sell from
  above) and then fills as a market order at the touch.
- STOP_LIMIT triggers like STOP, then fills at the touch if the limit allows it, else rests as a
  LIMIT from the next quote on.
A side with no price (an empty book side) fills nothing. There are no partial fills from the
book's depth: an order fills whole, as against candles.
"""

from __future__ import annotations

from decimal import Decimal

from app.domain.market_rules import MarketRules
from app.domain.trading import Order, OrderType, Side
from app.exchange.matching import Match, slipped
from app.exchange.quotes import Quote


def touch(quote: Quote, side: Side) -> Decimal | None:
    """The price an order of ``side`` takes: the ask for a buy, the bid for a sell."""
    return quote.ask if side is Side.BUY else quote.bid


def _limit(order: Order, quote: Quote, resting: bool) -> Match | None:
    limit = order.price
    assert limit is not None
    price = touch(quote, order.side)
    if price is None:
        return None
    crossed = price <= limit if order.side is Side.BUY else price >= limit
    if not crossed:
        return None
    if resting:
        return Match(limit, at_open=False, taker=False)
    return Match(price, at_open=True, taker=True)


def _triggered(order: Order, quote: Quote) -> bool:
    stop = order.stop_price
    assert stop is not None
    return quote.last >= stop if order.side is Side.BUY else quote.last <= stop


def match_quote(
    order: Order, quote: Quote, slippage: Decimal, rules: MarketRules, *, resting: bool
) -> Match | None:
    """How ``order`` executes against ``quote``; ``None`` when nothing happens.

    Args:
        resting: the order was already on the book at an earlier quote without filling.
    """
    kind = order.order_type
    if kind is OrderType.MARKET:
        price = touch(quote, order.side)
        if price is None:
            return None
        return Match(slipped(price, order.side, slippage, rules), at_open=True, taker=True)
    if kind is OrderType.LIMIT or (kind is OrderType.STOP_LIMIT and order.triggered):
        return _limit(order, quote, resting)
    if not _triggered(order, quote):
        return None
    price = touch(quote, order.side)
    if kind is OrderType.STOP:
        if price is None:
            return None
        return Match(slipped(price, order.side, slippage, rules), at_open=False, taker=True)
    limit = order.price
    assert limit is not None
    allowed = price is not None and (price <= limit if order.side is Side.BUY else price >= limit)
    if allowed:
        return Match(price, at_open=False, taker=True)
    return Match(None, at_open=False, taker=False)
