"""Exchange market rules per symbol: price tick, amount step, minimum amount and notional.

A real exchange refuses an order that breaks these, so the paper broker refuses it the same way,
with the rule and the numbers, and an agent trained on paper meets no surprise when it goes live.
Defaults come from the data's price precision now; ccxt's ``markets`` structure can fill them later
(``from_ccxt_market``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_DOWN, ROUND_UP, Decimal
from typing import Any

from app.domain.errors import InvalidOrderError

# Anything above these is a typo or an attack, not an order (1e12 units, 1e12 quote per unit).
MAX_QUANTITY = Decimal("1e12")
MAX_PRICE = Decimal("1e12")


@dataclass(frozen=True, slots=True)
class MarketRules:
    """The trading rules of one symbol.

    Attributes:
        tick: smallest price increment; prices must be multiples of it.
        step: smallest amount increment; quantities must be multiples of it.
        min_amount: smallest base quantity an order may have.
        min_notional: smallest quote value (quantity x price) an order may have.
    """

    symbol: str
    tick: Decimal = Decimal("0.01")
    step: Decimal = Decimal("0.000001")
    min_amount: Decimal = Decimal("0.000001")
    min_notional: Decimal = Decimal("10")

    @property
    def price_decimals(self) -> int:
        return max(-self.tick.normalize().as_tuple().exponent, 0)  # type: ignore[operator]

    @property
    def amount_decimals(self) -> int:
        return max(-self.step.normalize().as_tuple().exponent, 0)  # type: ignore[operator]

    def floor_amount(self, quantity: Decimal) -> Decimal:
        """Round a quantity down to the step: what one can actually buy with a given budget."""
        return (quantity / self.step).to_integral_value(rounding=ROUND_DOWN) * self.step

    def round_price(self, price: Decimal, *, up: bool) -> Decimal:
        """Round a price to the tick, in the direction that is adverse to the trader."""
        rounding = ROUND_UP if up else ROUND_DOWN
        return (price / self.tick).to_integral_value(rounding=rounding) * self.tick

    def check_quantity(self, quantity: Decimal, field: str = "quantity") -> None:
        """Raise INVALID_ORDER unless ``quantity`` is on the step and at least the minimum."""
        if quantity % self.step != 0:
            example = self.floor_amount(quantity)
            raise InvalidOrderError(
                f"{field} {fmt(quantity)} breaks the amount precision of {self.symbol}: it "
                f"must be a multiple of {fmt(self.step)} (e.g. {fmt(example)}).",
                details={"rule": "amount_precision", "field": field, "value": fmt(quantity),
                         "step": fmt(self.step), "example": fmt(example)},
            )
        if quantity < self.min_amount:
            raise InvalidOrderError(
                f"{field} {fmt(quantity)} is below the minimum amount {fmt(self.min_amount)} "
                f"for {self.symbol}.",
                details={"rule": "min_amount", "field": field, "value": fmt(quantity),
                         "min_amount": fmt(self.min_amount)},
            )

    def check_price(self, price: Decimal, field: str) -> None:
        """Raise INVALID_ORDER unless ``price`` is a multiple of the tick."""
        if price % self.tick != 0:
            example = self.round_price(price, up=False)
            raise InvalidOrderError(
                f"{field} {fmt(price)} breaks the price precision of {self.symbol}: it must be a "
                f"multiple of {fmt(self.tick)} (e.g. {fmt(example)}).",
                details={"rule": "price_precision", "field": field, "value": fmt(price),
                         "tick": fmt(self.tick), "example": fmt(example)},
            )

    def check_notional(self, quantity: Decimal, price: Decimal) -> None:
        """Raise INVALID_ORDER when quantity x price is below the minimum notional."""
        notional = quantity * price
        if notional < self.min_notional:
            raise InvalidOrderError(
                f"Order value {fmt(notional)} ({fmt(quantity)} x {fmt(price)}) is below the "
                f"minimum notional {fmt(self.min_notional)} for {self.symbol}.",
                details={"rule": "min_notional", "notional": fmt(notional),
                         "min_notional": fmt(self.min_notional), "quantity": fmt(quantity),
                         "price": fmt(price)},
            )


def default_rules(symbol: str, price_decimals: int) -> MarketRules:
    """Rules for a symbol without exchange metadata: tick from the data's precision."""
    tick = Decimal(1).scaleb(-price_decimals) if price_decimals > 0 else Decimal(1)
    return MarketRules(symbol=symbol, tick=tick)


def from_ccxt_market(market: Mapping[str, Any]) -> MarketRules:
    """Build rules from one entry of ccxt's ``exchange.markets`` (TICK_SIZE precision mode)."""
    precision = market.get("precision") or {}
    limits = market.get("limits") or {}
    amount_limits = limits.get("amount") or {}
    cost_limits = limits.get("cost") or {}
    tick = Decimal(str(precision.get("price") or "0.01"))
    step = Decimal(str(precision.get("amount") or "0.000001"))
    return MarketRules(
        symbol=str(market["symbol"]),
        tick=tick,
        step=step,
        min_amount=Decimal(str(amount_limits.get("min") or step)),
        min_notional=Decimal(str(cost_limits.get("min") or 0)),
    )


def fmt(value: Decimal) -> str:
    """A Decimal as plain text without exponent or trailing zeros, for messages."""
    text = format(value, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text or "0"
