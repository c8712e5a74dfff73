"""The order ticket's 25% / 50% / 100% buttons: an amount from what the account has free.

A buy's share is of the quote currency free now, spent at the ticket's own price (its limit, its
stop, or the last price for a market order) with the fee counted, so 100% is what the review can
accept; a sell's is of the base currency free (what open sells do not already hold). The amount is
rounded down to the market's step, never up: a button never asks for more than there is. It only
fills the amount field; the review and the Risk Guard judge the order as always.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import ROUND_DOWN, Decimal
from typing import Protocol, runtime_checkable

from PySide6.QtWidgets import QHBoxLayout, QPushButton, QWidget

from app.domain.errors import KestrelError
from app.domain.market import split_symbol
from app.domain.numbers import NumberSyntaxError, parse_decimal
from app.domain.trading import Side
from app.trading.port import TradingBroker

FRACTIONS = (Decimal("0.25"), Decimal("0.5"), Decimal("1"))
#: A broker that does not say its fee (a live exchange): Binance's standard spot taker fee.
ASSUMED_FEE = Decimal("0.001")


@runtime_checkable
class QuotesCosts(Protocol):
    """A broker that says what a fill costs (the paper broker)."""

    @property
    def fee_taker(self) -> Decimal: ...

    @property
    def slippage(self) -> Decimal: ...


class SizingError(ValueError):
    """No amount can be worked out now; the message says why, for the ticket."""


def size_for(
    fraction: Decimal, side: Side, *, free_quote: Decimal, free_base: Decimal,
    price: Decimal | None, step: Decimal, cost_rate: Decimal,
) -> Decimal:
    """``fraction`` of what is free, as a base quantity on the market's ``step`` (rounded down).

    Raises:
        SizingError: a buy without a price, or nothing free.
    """
    if side is Side.BUY:
        if price is None or price <= 0:
            raise SizingError("Give the price first: a buy's share is worked out at it.")
        budget = free_quote * fraction
        quantity = budget / (price * (1 + cost_rate))
    else:
        quantity = free_base * fraction
    rounded = (quantity / step).to_integral_value(rounding=ROUND_DOWN) * step
    if rounded <= 0:
        held = "quote currency" if side is Side.BUY else "coins"
        raise SizingError(f"Nothing to size: not enough {held} free for one step of this "
                          "market.")
    return rounded


def _price_in(form: Mapping[str, str], name: str) -> Decimal | None:
    text = form.get(name, "").strip()
    if not text:
        return None
    try:
        value = parse_decimal(text)
    except NumberSyntaxError as exc:
        raise SizingError(f"The price {text!r} is not a number: {exc}") from None
    return value if value > 0 else None


async def sized_amount(broker: TradingBroker, form: Mapping[str, str],
                       fraction: Decimal) -> Decimal:
    """The base quantity ``fraction`` of the ticket ``form`` (the ticket's ``form()``) is.

    Raises:
        SizingError: why no amount can be given (no price, nothing free, an unknown symbol).
    """
    try:
        symbol = broker.canonical_symbol(form.get("symbol", ""))
        rules = broker.market_rules(symbol)
        state = await broker.account()
    except KestrelError as exc:
        raise SizingError(str(exc)) from None
    side = Side.SELL if form.get("side") == "SELL" else Side.BUY
    kind = form.get("kind", "MARKET")
    base, quote = split_symbol(symbol, broker.quote_currency)
    free = {asset.currency: asset.free for asset in state.assets}
    price = None
    if side is Side.BUY:
        if kind in ("LIMIT", "STOP_LIMIT"):
            price = _price_in(form, "price")
        elif kind == "STOP":
            price = _price_in(form, "stop_price")
        if price is None and kind == "MARKET":
            try:
                price = await broker.last_price(symbol)
            except KestrelError as exc:
                raise SizingError(str(exc)) from None
    if isinstance(broker, QuotesCosts):
        cost = broker.fee_taker + (broker.slippage if kind in ("MARKET", "STOP") else 0)
    else:
        cost = ASSUMED_FEE
    return size_for(fraction, side, free_quote=free.get(quote, Decimal(0)),
                    free_base=free.get(base, Decimal(0)), price=price, step=rules.step,
                    cost_rate=Decimal(cost))


class SizeButtons(QWidget):
    """25% / 50% / 100% beside the ticket's amount; ``pick`` sizes for the ticket's form."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(4)
        self.buttons: dict[Decimal, QPushButton] = {}
        for fraction in FRACTIONS:
            button = QPushButton(f"{fraction * 100:.0f}%")
            button.setObjectName(f"ticketSize{fraction * 100:.0f}")
            button.setAutoDefault(False)
            button.setToolTip(f"{fraction * 100:.0f}% of what is free: of the quote currency for "
                              "a buy (at the ticket's price, fee counted), of the coins for a "
                              "sell; rounded down to the market's step")
            self.buttons[fraction] = button
            row.addWidget(button)
        row.addStretch(1)
