"""The in-memory account book of the paper broker: balances, reservations, positions, holdings.

Kept apart from order handling so the money arithmetic is in one place: every amount is a Decimal,
quote amounts are kept to 8 decimals, and no balance can go below zero (checked, not assumed).
Per-agent holdings record which agent's capital sits in which position, for the per-agent budgets.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_DOWN, ROUND_UP, Decimal

from app.domain.agents import agent_key
from app.store.ledger import PositionRecord

QUOTE_STEP = Decimal("0.00000001")
AVG_STEP = Decimal("0.0000000001")
ZERO = Decimal(0)


def quote_up(value: Decimal) -> Decimal:
    return value.quantize(QUOTE_STEP, rounding=ROUND_UP)


def quote_down(value: Decimal) -> Decimal:
    return value.quantize(QUOTE_STEP, rounding=ROUND_DOWN)


@dataclass(slots=True)
class PositionBook:
    size: Decimal = ZERO
    avg_price: Decimal = ZERO
    realized_pnl: Decimal = ZERO


class AccountBook:
    """Balances and positions of one spot account in one quote currency."""

    def __init__(self, quote: str) -> None:
        self.quote = quote
        self.balances: dict[str, Decimal] = {quote: ZERO}
        self.reserved: dict[str, Decimal] = {}
        self.positions: dict[str, PositionBook] = {}
        self.holdings: dict[tuple[str, str], tuple[Decimal, Decimal]] = {}

    def total(self, asset: str) -> Decimal:
        return self.balances.get(asset, ZERO)

    def free(self, asset: str) -> Decimal:
        return self.total(asset) - self.reserved.get(asset, ZERO)

    def reserve(self, asset: str, amount: Decimal) -> None:
        self.reserved[asset] = self.reserved.get(asset, ZERO) + amount

    def release(self, asset: str, amount: Decimal) -> None:
        left = self.reserved.get(asset, ZERO) - amount
        if left < 0:
            raise AssertionError(f"released more {asset} than reserved ({left})")
        self.reserved[asset] = left

    def position(self, symbol: str) -> PositionBook:
        book = self.positions.get(symbol)  # not setdefault: that builds a book on every call
        if book is None:
            book = self.positions[symbol] = PositionBook()
        return book

    def position_record(self, symbol: str) -> PositionRecord:
        book = self.position(symbol)
        return PositionRecord(symbol, book.size, book.avg_price, book.realized_pnl)

    def _add(self, asset: str, delta: Decimal) -> None:
        new = self.total(asset) + delta
        if new < 0:
            raise AssertionError(f"{asset} balance would go negative: {new}")
        self.balances[asset] = new

    def apply_buy(
        self, agent_id: str, symbol: str, base: str, qty: Decimal, cost: Decimal, fee: Decimal
    ) -> dict[tuple[str, str], tuple[Decimal, Decimal]]:
        """Book a buy: pay cost and fee in quote, receive base. Returns the changed holdings.

        The fee is part of the position's cost (the average-cost rule the live account's
        position uses, ``app.ccxt.orders.average_cost``), so a sell's realised P&L is net of
        both the buy's fee and its own, on paper as on the exchange."""
        self._add(self.quote, -(cost + fee))
        self._add(base, qty)
        book = self.position(symbol)
        new_size = book.size + qty
        book.avg_price = ((book.size * book.avg_price + cost + fee) / new_size).quantize(AVG_STEP)
        book.size = new_size
        size, spent = self.holdings.get((agent_id, symbol), (ZERO, ZERO))
        self.holdings[(agent_id, symbol)] = (size + qty, spent + cost + fee)
        return {(agent_id, symbol): self.holdings[(agent_id, symbol)]}

    def apply_sell(
        self,
        agent_id: str,
        symbol: str,
        base: str,
        qty: Decimal,
        proceeds: Decimal,
        fee: Decimal,
        price: Decimal,
    ) -> tuple[Decimal, dict[tuple[str, str], tuple[Decimal, Decimal]]]:
        """Book a sell; returns the realised P&L (after this fill's fee) and changed holdings."""
        book = self.position(symbol)
        if qty > book.size:
            raise AssertionError(f"selling {qty} {base} but the position is {book.size}")
        self._add(base, -qty)
        self._add(self.quote, proceeds - fee)
        realized = quote_down((price - book.avg_price) * qty) - fee
        book.size -= qty
        book.realized_pnl += realized
        if book.size == 0:
            book.avg_price = ZERO
        return realized, self._reduce_holdings(agent_id, symbol, qty)

    def _reduce_holdings(
        self, agent_id: str, symbol: str, qty: Decimal
    ) -> dict[tuple[str, str], tuple[Decimal, Decimal]]:
        """Take the sold amount from the seller's own holding first, then from the others'."""
        changed: dict[tuple[str, str], tuple[Decimal, Decimal]] = {}
        owners = [(agent_id, symbol)] + sorted(
            key for key in self.holdings if key[1] == symbol and key[0] != agent_id
        )
        left = qty
        for key in owners:
            size, cost = self.holdings.get(key, (ZERO, ZERO))
            if left <= 0 or size <= 0:
                continue
            take = min(left, size)
            new_cost = ZERO if take == size else quote_down(cost * (size - take) / size)
            self.holdings[key] = (size - take, new_cost)
            changed[key] = self.holdings[key]
            left -= take
        return changed

    def committed_by_agent(self) -> dict[str, Decimal]:
        """Quote capital each agent has in positions (at cost), before open buy orders, keyed by
        ``agent_key`` (ids differing only in case are one agent)."""
        out: dict[str, Decimal] = {}
        for (agent_id, _symbol), (_size, cost) in self.holdings.items():
            key = agent_key(agent_id)
            out[key] = out.get(key, ZERO) + cost
        return out
