"""Positions as lots with an owner: who holds which part of a shared spot position.

One spot account holds every coin, but each was bought by someone: an agent, or the person (an
order from the window, an exchange order the person adopted, or coins Kestrel never bought: a
deposit, a balance from before). Order entry lets an agent sell and protect only its own lot, the
others' only with the person's approval, and every P&L view (the agent list, Closed trades)
attributes a sell to the lots it came out of, by the one rule here:

- a buy adds to its buyer's lot, its cost including a fee paid in the quote currency (a fee taken
  in the coin bought leaves less in the lot instead);
- a sell comes out of the seller's own lot first, then out of the others' lots in the order of
  their ids; each part's P&L (its share of the proceeds, less its share of the lot's cost and of
  the sell's fee) belongs to the lot's owner, and the seller is recorded as who closed it.

The rule is the paper book's (``app.exchange.book``), so a budget, a lot size and a P&L agree.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal

from app.domain.agents import agent_key
from app.domain.market import split_symbol
from app.domain.trading import Fill, Side

ZERO = Decimal(0)


@dataclass(slots=True)
class Lot:
    """One owner's open holding of one symbol: a round trip that has not ended yet.

    Attributes:
        size: the base quantity held now.
        cost: what the quantity held now cost, quote fees of its buys included.
        bought, spent: everything the trip bought, and at what price in all (no fees).
        sold, proceeds: what has come out of it so far, and for how much (no fees).
        fees: every fee of the trip, valued in the quote currency (what a person is shown).
        quote_fees: the fees paid in the quote currency (what its P&L subtracts).
        realized: the P&L of what has come out of it so far.
        closers: who sold out of it, in the order they did.
    """

    owner: str
    symbol: str
    entry_ms: int
    size: Decimal = ZERO
    cost: Decimal = ZERO
    bought: Decimal = ZERO
    spent: Decimal = ZERO
    sold: Decimal = ZERO
    proceeds: Decimal = ZERO
    fees: Decimal = ZERO
    quote_fees: Decimal = ZERO
    realized: Decimal = ZERO
    closers: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Taken:
    """One part of a sell, out of one owner's lot."""

    owner: str
    seller: str
    quantity: Decimal
    realized: Decimal
    lot: Lot  # the lot after the take; ``closed`` when nothing of it is left

    @property
    def closed(self) -> bool:
        return self.lot.size <= 0


def _base_fee(fill: Fill) -> Decimal:
    """The fee when it was paid in the base currency (it changes what is held), else zero."""
    return fill.fee if fill.fee_currency == split_symbol(fill.symbol, "")[0] else ZERO


class LotBook:
    """Every owner's lots, kept up to date fill by fill (oldest first)."""

    def __init__(self) -> None:
        self._lots: dict[str, dict[str, Lot]] = {}  # symbol -> owner key -> open lot

    def apply(self, fill: Fill) -> list[Taken]:
        """Book one fill; for a sell, the parts it took out of each lot."""
        lots = self._lots.setdefault(fill.symbol, {})
        base_fee = _base_fee(fill)
        if fill.side is Side.BUY:
            key = agent_key(fill.agent_id)
            lot = lots.get(key)
            if lot is None:
                lot = lots[key] = Lot(fill.agent_id, fill.symbol, fill.time_ms)
            quote_fee = ZERO if base_fee else fill.fee
            lot.size += fill.quantity - base_fee
            lot.cost += fill.quantity * fill.price + quote_fee
            lot.bought += fill.quantity
            lot.spent += fill.quantity * fill.price
            lot.fees += base_fee * fill.price if base_fee else fill.fee
            lot.quote_fees += quote_fee
            return []
        if fill.quantity <= 0:
            return []
        seller = agent_key(fill.agent_id)
        order = [seller] + sorted(k for k in lots if k != seller)
        gone = fill.quantity + base_fee  # what leaves the holdings
        left = gone
        taken: list[Taken] = []
        for key in order:
            lot = lots.get(key)
            if lot is None or left <= 0 or lot.size <= 0:
                continue
            take = min(left, lot.size)
            left -= take
            share = take / gone
            cost_out = lot.cost * take / lot.size
            proceeds = fill.quantity * share * fill.price
            quote_fee = ZERO if base_fee else fill.fee * share
            realized = proceeds - cost_out - quote_fee
            lot.size -= take
            lot.cost -= cost_out
            lot.sold += fill.quantity * share
            lot.proceeds += proceeds
            lot.fees += base_fee * fill.price * share if base_fee else fill.fee * share
            lot.quote_fees += quote_fee
            lot.realized += realized
            if fill.agent_id not in lot.closers:
                lot.closers.append(fill.agent_id)
            if lot.size <= 0:
                del lots[key]
            taken.append(Taken(lot.owner, fill.agent_id, take, realized, lot))
        return taken

    def open_lots(self, symbol: str | None = None) -> list[Lot]:
        """The lots held now, of one symbol or of all, by symbol and owner."""
        symbols = [symbol] if symbol is not None else sorted(self._lots)
        return [lot for s in symbols for _, lot in sorted(self._lots.get(s, {}).items())]

    def size(self, symbol: str, owner: str) -> Decimal:
        lot = self._lots.get(symbol, {}).get(agent_key(owner))
        return ZERO if lot is None else lot.size


def lot_book(fills: Iterable[Fill]) -> LotBook:
    """A book of ``fills`` in any order (booked oldest first)."""
    book = LotBook()
    for fill in sorted(fills, key=lambda f: (f.time_ms, f.fill_id)):
        book.apply(fill)
    return book
