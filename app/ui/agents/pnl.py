"""Each agent's P&L from its own fills: realized from the ledger, unrealized against the last price.

The ledger books one account; the agent list wants to know what each agent's orders made. Its
``fills`` rows carry the agent, the fee and the realized P&L the book computed for each sell
(after that sell's fee). This module adds them up per agent, incrementally (only fills after the
last ``seq`` seen are read, off the event loop, through the panels' ``LedgerReader`` connection),
and values each agent's net open quantity per symbol at the broker's last price.

Definitions, so the number means one thing:

* realized = the ledger's realized P&L of the agent's sells minus the fees of its buys, i.e. net
  of every fee the agent has paid;
* unrealized = open quantity x last price - its cost, the cost being the agent's own average buy
  price (fees excluded, they are already in realized);
* a sell larger than what the agent itself bought sold other agents' holdings too (the account is
  shared); the agent's open quantity then stops at zero rather than becoming a short it never had.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal

from app.domain.errors import KestrelError
from app.ui.panels.ledger_reader import LedgerReader

ZERO = Decimal(0)
PriceOf = Callable[[str], Awaitable[Decimal]]

_NEW_FILLS = (  # ordered by seq: ``apply`` relies on it
    "SELECT seq, agent_id, symbol, side, quantity, price, fee, realized_pnl "
    "FROM fills WHERE seq > ? ORDER BY seq"
)


@dataclass(frozen=True, slots=True)
class FillRow:
    """The columns of one fill that the per-agent sums need."""

    seq: int
    agent_id: str
    symbol: str
    side: str
    quantity: Decimal
    price: Decimal
    fee: Decimal
    realized_pnl: Decimal


class AgentFillReader(LedgerReader):
    """The panels' read-only ledger connection, asked for fills after a sequence number."""

    async def fills_after(self, seq: int) -> list[FillRow]:
        def read(conn: sqlite3.Connection) -> list[FillRow]:
            return [
                FillRow(row[0], row[1], row[2], row[3], Decimal(row[4]), Decimal(row[5]),
                        Decimal(row[6]), Decimal(row[7]))
                for row in conn.execute(_NEW_FILLS, (seq,))
            ]

        return await self._query(read)


@dataclass(slots=True)
class _Holding:
    quantity: Decimal = ZERO
    cost: Decimal = ZERO


@dataclass(slots=True)
class _Book:
    realized: Decimal = ZERO
    fees: Decimal = ZERO
    fills: int = 0
    holdings: dict[str, _Holding] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class OpenQuantity:
    """An agent's net open quantity of one symbol; ``price`` is None when none is visible."""

    symbol: str
    quantity: Decimal
    cost: Decimal
    price: Decimal | None

    @property
    def unrealized(self) -> Decimal | None:
        return None if self.price is None else self.quantity * self.price - self.cost


@dataclass(frozen=True, slots=True)
class AgentPnL:
    """One agent's result in the account currency."""

    realized: Decimal
    fees: Decimal
    fills: int
    open: tuple[OpenQuantity, ...]

    @property
    def unrealized(self) -> Decimal:
        return sum((o.unrealized or ZERO for o in self.open), ZERO)

    @property
    def total(self) -> Decimal:
        return self.realized + self.unrealized

    @property
    def fully_priced(self) -> bool:
        """False when an open quantity has no visible price, so the total leaves it out."""
        return all(o.price is not None for o in self.open)


class PnLTracker:
    """Per-agent sums over the ledger's fills, kept up to date a few new rows at a time."""

    def __init__(self, reader: AgentFillReader, price_of: PriceOf) -> None:
        self.reader = reader
        self._price_of = price_of
        self._last_seq = 0
        self._books: dict[str, _Book] = {}

    def close(self) -> None:
        self.reader.close()

    async def update(self) -> dict[str, AgentPnL]:
        """Read the fills added since the last call and value every open quantity now."""
        self.apply(await self.reader.fills_after(self._last_seq))
        symbols = {s for b in self._books.values() for s, h in b.holdings.items() if h.quantity}
        prices = {symbol: await self._price(symbol) for symbol in sorted(symbols)}
        return {agent_id: _result(book, prices) for agent_id, book in self._books.items()}

    def apply(self, rows: Iterable[FillRow]) -> None:
        """Add fills to the sums; a fill already added is skipped, so two refreshes that read
        the same new rows concurrently cannot count them twice."""
        for row in rows:
            if row.seq <= self._last_seq:
                continue
            self._last_seq = row.seq
            book = self._books.setdefault(row.agent_id, _Book())
            book.fills += 1
            book.fees += row.fee
            holding = book.holdings.setdefault(row.symbol, _Holding())
            if row.side == "BUY":
                holding.quantity += row.quantity
                holding.cost += row.quantity * row.price
                book.realized -= row.fee
                continue
            book.realized += row.realized_pnl
            if holding.quantity > 0:
                taken = min(row.quantity, holding.quantity)
                holding.cost -= holding.cost * taken / holding.quantity
                holding.quantity -= taken
                if holding.quantity == 0:
                    holding.cost = ZERO

    async def _price(self, symbol: str) -> Decimal | None:
        try:
            return await self._price_of(symbol)
        except KestrelError:  # a symbol no longer listed, or no candle visible yet
            return None


def _result(book: _Book, prices: dict[str, Decimal | None]) -> AgentPnL:
    open_quantities = tuple(
        OpenQuantity(symbol, h.quantity, h.cost, prices.get(symbol))
        for symbol, h in sorted(book.holdings.items())
        if h.quantity
    )
    return AgentPnL(book.realized, book.fees, book.fills, open_quantities)
