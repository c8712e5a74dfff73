"""The person's order ticket as values: what the form says, read strictly, before anything is sent.

The window's ticket is a form of text fields; ``read_ticket`` turns them into a ``Ticket`` or
refuses with a ``TicketError`` naming the field and what is wrong, so the form can point at it.
Numbers are read with the one syntax every number in Kestrel is read with
(``app.domain.numbers``): a person's ``1,000`` or ``1e3`` is refused with the same words a
model's would be, never guessed at. Whether the account can pay, the market's lot rules and the
Risk Guard's limits are the broker's and the guard's to say (``app.runtime.controls``).

A ticket is one of: a MARKET, LIMIT, STOP or STOP_LIMIT order (optionally with a take-profit and
a stop-loss placed for the whole position once a BUY fills), or TP/SL exits for the position
already held (the ``set_position_tp_sl_orders`` tool).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum

from app.domain.numbers import NumberSyntaxError, parse_decimal
from app.domain.trading import OrderType, Side


class TicketKind(StrEnum):
    MARKET = "MARKET"
    LIMIT = "LIMIT"
    STOP = "STOP"
    STOP_LIMIT = "STOP_LIMIT"
    TP_SL = "TP_SL"  # exits for the position held, not a new order

    @property
    def needs_price(self) -> bool:
        return self in (TicketKind.LIMIT, TicketKind.STOP_LIMIT)

    @property
    def needs_stop(self) -> bool:
        return self in (TicketKind.STOP, TicketKind.STOP_LIMIT)


class TicketError(ValueError):
    """A field of the ticket is missing or wrong; ``field`` names it for the form."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True, slots=True)
class Ticket:
    """A valid ticket. Exactly one of ``quantity`` and ``quote_amount`` is set for an order;
    neither for TP/SL exits."""

    symbol: str
    side: Side
    kind: TicketKind
    quantity: Decimal | None = None
    quote_amount: Decimal | None = None
    price: Decimal | None = None
    stop_price: Decimal | None = None
    take_profit: Decimal | None = None
    stop_loss: Decimal | None = None

    @property
    def order_type(self) -> OrderType:
        if self.kind is TicketKind.TP_SL:
            raise ValueError("TP/SL exits are not one order")
        return OrderType(self.kind.value)

    @property
    def has_exits(self) -> bool:
        return self.take_profit is not None or self.stop_loss is not None


def _positive(fields: Mapping[str, str], name: str, label: str, required: bool) -> Decimal | None:
    text = fields.get(name, "").strip()
    if not text:
        if required:
            raise TicketError(name, f"{label} is required.")
        return None
    try:
        value = parse_decimal(text)
    except NumberSyntaxError as exc:
        raise TicketError(name, f"{label}: {exc}") from None
    if value <= 0:
        raise TicketError(name, f"{label} must be above zero (got {text}).")
    return value


def read_ticket(fields: Mapping[str, str]) -> Ticket:
    """Read the form's fields into a ticket.

    Fields: ``symbol``, ``side`` (BUY/SELL), ``kind`` (a ``TicketKind``), ``amount`` with
    ``unit`` (``base`` for a quantity, ``quote`` for an amount to spend), ``price``,
    ``stop_price``, ``take_profit``, ``stop_loss``. Fields the kind does not use are ignored.

    Raises:
        TicketError: the first field that is missing or wrong, with a sentence for the person.
    """
    symbol = fields.get("symbol", "").strip()
    if not symbol:
        raise TicketError("symbol", "Choose a symbol.")
    try:
        kind = TicketKind(fields.get("kind", "").strip().upper())
    except ValueError:
        raise TicketError("kind", f"Unknown order type {fields.get('kind')!r}: choose one of "
                                  f"{', '.join(k.value for k in TicketKind)}.") from None
    take_profit = _positive(fields, "take_profit", "Take profit", False)
    stop_loss = _positive(fields, "stop_loss", "Stop loss", False)
    if take_profit is not None and stop_loss is not None and take_profit <= stop_loss:
        raise TicketError("take_profit", f"Take profit {take_profit} must be above stop loss "
                                         f"{stop_loss}: both protect a long position.")
    if kind is TicketKind.TP_SL:
        if take_profit is None and stop_loss is None:
            raise TicketError("take_profit", "Give a take profit, a stop loss or both.")
        return Ticket(symbol, Side.SELL, kind, take_profit=take_profit, stop_loss=stop_loss)
    try:
        side = Side(fields.get("side", "").strip().upper())
    except ValueError:
        raise TicketError("side", "Choose BUY or SELL.") from None
    amount = _positive(fields, "amount", "Amount", True)
    unit = fields.get("unit", "base").strip().lower()
    if unit not in ("base", "quote"):
        raise TicketError("unit", f"The amount is in the base or the quote currency, not {unit!r}.")
    price = _positive(fields, "price", "Limit price", True) if kind.needs_price else None
    stop_price = _positive(fields, "stop_price", "Stop price", True) if kind.needs_stop else None
    if (take_profit is not None or stop_loss is not None) and side is Side.SELL:
        raise TicketError("take_profit", "Take profit and stop loss protect a long position: give "
                                         "them with a BUY, or choose TP/SL for a position held.")
    entry = price if kind.needs_price else stop_price if kind.needs_stop else None
    if entry is not None and take_profit is not None and take_profit <= entry:
        raise TicketError("take_profit", f"Take profit {take_profit} must be above the entry "
                                         f"price {entry}.")
    if entry is not None and stop_loss is not None and stop_loss >= entry:
        raise TicketError("stop_loss", f"Stop loss {stop_loss} must be below the entry price "
                                       f"{entry}.")
    return Ticket(
        symbol, side, kind,
        quantity=amount if unit == "base" else None,
        quote_amount=amount if unit == "quote" else None,
        price=price, stop_price=stop_price,
        take_profit=take_profit, stop_loss=stop_loss,
    )
