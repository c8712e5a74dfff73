"""Each agent's P&L from its own fills: realized as booked, unrealized at the last price.

The broker books one account; the agent list wants to know what each agent's orders made. Each
fill carries the agent, the fee and the realized P&L the book computed for each sell (after that
sell's fee). This module adds them up per agent: the account's fills are read once through the
``Broker`` port, and every later one arrives as an ``OrderFilled`` event, so nothing is read twice;
each agent's net open quantity per symbol is valued at the broker's last price.

Definitions, so the number means one thing:

* realized = the ledger's realized P&L of the agent's sells, which is net of every fee: both
  venues count a buy's fee in the position's cost (paper's book, the live journal's average
  cost), so a sell realizes what the round trip made;
* unrealized = open quantity x last price - its cost, the cost being what the agent's own buys
  paid, their fees included (a fee taken in the base asset leaves less quantity instead), so
  selling at the last price would realize it;
* a sell larger than what the agent itself bought sold other agents' holdings too (the account is
  shared); the agent's open quantity then stops at zero rather than becoming a short it never had.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal

from app.domain.errors import KestrelError
from app.domain.market import split_symbol
from app.domain.trading import Fill, Side
from app.trading.port import Broker

ZERO = Decimal(0)
PriceOf = Callable[[str], Awaitable[Decimal]]


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
    """Per-agent sums over the account's fills: read once, then kept up to date by events.

    Args:
        broker: whose fills (``trades``) are summed, and whose last prices value what is open.
    """

    def __init__(self, broker: Broker, price_of: PriceOf) -> None:
        self.broker = broker
        self._price_of = price_of
        self._seen: set[str] = set()
        self._books: dict[str, _Book] = {}
        self._history_read = False
        self._early: list[Fill] = []  # fills announced while the history is being read

    def on_fill(self, fill: Fill) -> None:
        """A new fill (an ``OrderFilled`` event): added now, or after the history when that is
        still being read (the sums need the fills in order)."""
        if self._history_read:
            self.apply([fill])
        else:
            self._early.append(fill)

    async def update(self) -> dict[str, AgentPnL]:
        """Value every agent's open quantity now (reading the account's fills the first time)."""
        if not self._history_read:
            history = await self.broker.trades(None, None)  # newest first
            self.apply(reversed(history))
            self._history_read = True
            early, self._early = self._early, []
            self.apply(early)
        symbols = {s for b in self._books.values() for s, h in b.holdings.items() if h.quantity}
        prices = {symbol: await self._price(symbol) for symbol in sorted(symbols)}
        return {agent_id: _result(book, prices) for agent_id, book in self._books.items()}

    def apply(self, fills: Iterable[Fill]) -> None:
        """Add fills, oldest first, to the sums; a fill already added is skipped (the history
        and an event may both hold it)."""
        for row in fills:
            if row.fill_id in self._seen:
                continue
            self._seen.add(row.fill_id)
            book = self._books.setdefault(row.agent_id, _Book())
            book.fills += 1
            base, quote = split_symbol(row.symbol, "")
            # in the account currency: a fee taken in the base asset is worth its fill's price
            book.fees += row.fee * (row.price if row.fee_currency == base else 1)
            holding = book.holdings.setdefault(row.symbol, _Holding())
            if row.side is Side.BUY:
                holding.quantity += row.quantity - (row.fee if row.fee_currency == base else ZERO)
                holding.cost += row.quantity * row.price + (
                    row.fee if row.fee_currency == quote else ZERO)
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
