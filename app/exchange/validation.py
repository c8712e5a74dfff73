"""Checks on an order request before it can touch the book: numbers, fields, market rules.

Every refusal names the field and the number, because the reader is a model that must correct its
next call from the message alone.
"""

from __future__ import annotations

from decimal import Decimal

from app.domain.errors import InvalidParameterError
from app.domain.market_rules import MAX_PRICE, MAX_QUANTITY, MarketRules
from app.domain.trading import OrderType
from app.trading.port import OrderRequest


def check_number(field: str, value: Decimal | None, limit: Decimal) -> None:
    """Refuse NaN, infinities, zero, negatives and absurdly large values, naming the field."""
    if value is None:
        return
    if not isinstance(value, Decimal) or not value.is_finite():
        raise InvalidParameterError(
            f"Parameter <{field}> must be a finite number, got {value}.",
            details={"parameter": field, "got": str(value)},
        )
    if value <= 0:
        raise InvalidParameterError(
            f"Parameter <{field}> must be greater than 0, got {value}.",
            details={"parameter": field, "got": str(value)},
        )
    if value > limit:
        raise InvalidParameterError(
            f"Parameter <{field}> is absurdly large: {value} > {limit}.",
            details={"parameter": field, "got": str(value), "maximum": str(limit)},
        )


def check_request(req: OrderRequest) -> None:
    """Field-level checks that do not need the market: numbers and which prices a type needs."""
    check_number("price", req.price, MAX_PRICE)
    check_number("stop_price", req.stop_price, MAX_PRICE)
    check_number("quote_amount", req.quote_amount, MAX_QUANTITY * MAX_PRICE)
    if req.quote_amount is None:
        check_number("quantity", req.quantity, MAX_QUANTITY)
    kind = req.order_type
    needs_price = kind in (OrderType.LIMIT, OrderType.STOP_LIMIT)
    needs_stop = kind in (OrderType.STOP, OrderType.STOP_LIMIT)
    if needs_price and req.price is None:
        raise InvalidParameterError(
            f"A {kind.value} order needs <price> (the limit price).",
            details={"parameter": "price", "order_type": kind.value},
        )
    if not needs_price and req.price is not None:
        raise InvalidParameterError(
            f"<price> is not used by a {kind.value} order; remove it, or use "
            f"{'LIMIT' if kind is OrderType.MARKET else 'STOP_LIMIT'}.",
            details={"parameter": "price", "order_type": kind.value},
        )
    if needs_stop and req.stop_price is None:
        raise InvalidParameterError(
            f"A {kind.value} order needs <stop_price> (the trigger price).",
            details={"parameter": "stop_price", "order_type": kind.value},
        )
    if not needs_stop and req.stop_price is not None:
        raise InvalidParameterError(
            f"<stop_price> is not used by a {kind.value} order; remove it, or use STOP or "
            "STOP_LIMIT.",
            details={"parameter": "stop_price", "order_type": kind.value},
        )


def check_rules(req: OrderRequest, quantity: Decimal, ref: Decimal, rules: MarketRules) -> None:
    """Exchange rules: amount step and minimum, price tick, minimum notional."""
    rules.check_quantity(quantity)
    if req.price is not None:
        rules.check_price(req.price, "price")
    if req.stop_price is not None:
        rules.check_price(req.stop_price, "stop_price")
    valued_at = req.price if req.price is not None else (req.stop_price or ref)
    rules.check_notional(quantity, valued_at)
