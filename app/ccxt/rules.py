"""A ccxt market's precision, limits and fees as Kestrel's ``MarketRules`` and ``MarketFees``.

The paper broker and the Risk Guard refuse what the real exchange would refuse, so on a live venue
they must use the exchange's own numbers. ccxt states precision in one of three modes, per
exchange (``exchange.precisionMode``): a tick size (most exchanges in ccxt 4), a count of decimal
places, or significant digits. The first two give a tick exactly; significant digits give none
independent of the price, so such a market gets the finest tick Kestrel's quote arithmetic keeps
(1e-8) and the exchange's own check stays the last word.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from app.domain.errors import OperationalError
from app.domain.market_rules import MarketRules

# ccxt.base.decimal_to_precision's constants, copied so this module needs no ccxt import.
DECIMAL_PLACES = 2
SIGNIFICANT_DIGITS = 3
TICK_SIZE = 4
FINEST_TICK = Decimal("0.00000001")


@dataclass(frozen=True, slots=True)
class MarketFees:
    """Maker and taker fee rates of one market (0.001 = 0.1%), as ccxt reports them."""

    maker: Decimal
    taker: Decimal


def precision_step(value: Any, precision_mode: int) -> Decimal | None:
    """The increment a ccxt precision value stands for, or ``None`` when it has none.

    Raises:
        OperationalError: the value is not a number ccxt could have meant.
    """
    if value is None:
        return None
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        raise OperationalError(f"ccxt reported a precision of {value!r}, not a number") from None
    if precision_mode == TICK_SIZE:
        return number if number > 0 else None
    if precision_mode == DECIMAL_PLACES:
        return Decimal(1).scaleb(-int(number))
    return None  # SIGNIFICANT_DIGITS: no increment without a price


def market_rules(market: Mapping[str, Any], precision_mode: int) -> MarketRules:
    """``MarketRules`` of one entry of ``exchange.markets``.

    Missing numbers fall back to the finest values (tick and step 1e-8, no minimum notional), so
    a sparse market never blocks an order the exchange would take.
    """
    precision = market.get("precision") or {}
    limits = market.get("limits") or {}
    tick = precision_step(precision.get("price"), precision_mode) or FINEST_TICK
    step = precision_step(precision.get("amount"), precision_mode) or FINEST_TICK
    min_amount = _decimal((limits.get("amount") or {}).get("min")) or step
    min_notional = _decimal((limits.get("cost") or {}).get("min")) or Decimal(0)
    return MarketRules(
        symbol=str(market["symbol"]),
        tick=tick,
        step=step,
        min_amount=max(min_amount, step),
        min_notional=min_notional,
    )


def market_fees(market: Mapping[str, Any], default: Decimal) -> MarketFees:
    """The market's maker and taker rates; ``default`` for a rate ccxt does not state."""
    maker = _decimal(market.get("maker"))
    taker = _decimal(market.get("taker"))
    return MarketFees(
        maker=default if maker is None else maker,
        taker=default if taker is None else taker,
    )


def _decimal(value: Any) -> Decimal | None:
    if value is None:
        return None
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        return None
    return number if number.is_finite() and number >= 0 else None
