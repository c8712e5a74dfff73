"""Stops on markets that list no stop-market order: sent as stop-limits, and said so.

Why: Binance spot lists LIMIT, LIMIT_MAKER, MARKET, STOP_LOSS_LIMIT and TAKE_PROFIT_LIMIT for
BTCUSDT but no STOP_LOSS (its stop-market), and ccxt refuses a market order with a stop price
there before anything is sent. A stop-loss that cannot be placed leaves a live position
unprotected, so on such a market a STOP becomes a STOP_LIMIT (Binance's STOP_LOSS_LIMIT, for a
sell stop below the market and a buy stop above it alike) whose limit lies a protection band
beyond the stop (``[exchanges.<id>] stop_limit_band``), rounded to the tick away from the stop
so it stays fillable. The trade-off is stated on the order itself: in a gap past the limit a
stop-limit may not fill.

Where the market lists its stop-market type, or lists no order types at all (ccxt then decides),
the STOP is sent as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from decimal import Decimal
from typing import Any

from app.domain.market_rules import MarketRules, fmt
from app.domain.trading import OrderType, Side
from app.trading.port import STOP_LIMIT_NOTE, OrderRequest

DEFAULT_BAND = Decimal("0.005")
# the exchange's own names of its spot stop-market and stop-limit orders
STOP_MARKET_TYPES: Mapping[str, str] = {"binance": "STOP_LOSS"}
STOP_LIMIT_TYPES: Mapping[str, str] = {"binance": "STOP_LOSS_LIMIT"}


def listed_order_types(market: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The order types the exchange lists for a market (ccxt's raw ``info.orderTypes``)."""
    info = market.get("info") or {}
    types = info.get("orderTypes") if isinstance(info, Mapping) else None
    return None if types is None else tuple(str(t).upper() for t in types)


def stop_kinds(exchange_id: str, market: Mapping[str, Any]) -> tuple[bool, bool]:
    """Whether the market holds a stop-market order and a stop-limit order: from the types it
    lists where Kestrel knows the exchange's names for them; otherwise ccxt decides, and both
    are taken as held (ccxt refuses what the exchange cannot take, before anything is sent)."""
    listed = listed_order_types(market)
    stop_market = STOP_MARKET_TYPES.get(exchange_id)
    stop_limit = STOP_LIMIT_TYPES.get(exchange_id)
    if listed is None or stop_market is None or stop_limit is None:
        return True, True
    return stop_market in listed, stop_limit in listed


def needs_stop_limit(exchange_id: str, market: Mapping[str, Any]) -> bool:
    """True when the market lists order types, a stop-limit among them, but no stop-market."""
    listed = listed_order_types(market)
    stop_market = STOP_MARKET_TYPES.get(exchange_id)
    stop_limit = STOP_LIMIT_TYPES.get(exchange_id)
    if listed is None or stop_market is None or stop_limit is None:
        return False
    return stop_market not in listed and stop_limit in listed


def limit_for(stop: Decimal, side: Side, band: Decimal, rules: MarketRules) -> Decimal:
    """The limit a band beyond the stop: below it for a sell, above for a buy, rounded to the
    tick away from the stop (a lower sell limit and a higher buy limit fill more readily)."""
    if side is Side.SELL:
        limit = rules.round_price(stop * (1 - band), up=False)
        return max(limit, rules.tick)
    return rules.round_price(stop * (1 + band), up=True)


def as_stop_limit(
    req: OrderRequest, exchange_id: str, rules: MarketRules, band: Decimal
) -> OrderRequest:
    """``req`` as the stop-limit it is sent as (see the module docstring), the reason saying so.

    Only a STOP with its stop price is changed; the caller has checked it needs to be.
    """
    if req.order_type is not OrderType.STOP or req.stop_price is None:
        return req
    limit = limit_for(req.stop_price, req.side, band, rules)
    where = "below" if req.side is Side.SELL else "above"
    note = (f"{STOP_LIMIT_NOTE}: {exchange_id} lists no stop-market order for {rules.symbol}; "
            f"triggers at {fmt(req.stop_price)}, limit {fmt(limit)} ({fmt(band * 100)}% {where} "
            "the stop, [exchanges] stop_limit_band); if the price gaps past the limit it may not "
            "fill")
    reason = f"{req.reason}; {note}" if req.reason else note
    return replace(req, order_type=OrderType.STOP_LIMIT, price=limit, reason=reason)
