"""Each agent's P&L from the lots it holds and held: realized as sold, unrealized at the last price.

The broker books one account; the agent list wants to know what each agent's money made. The
account's fills are read once through the ``Broker`` port, and every later one arrives as an
``OrderFilled`` event, so nothing is read twice. They are booked as lots with an owner
(``app.trading.lots``), the attribution Closed trades uses too, so the two never disagree:

* realized = the P&L of what came out of the agent's own lots, whoever sold it (the agent, or the
  person's Close), net of every fee: a buy's quote fee is in its lot's cost, a sell's fee is
  shared among the lots it came out of; a sale of another owner's lot (the person's, with the
  person's approval) is that owner's P&L, not the seller's;
* unrealized = the agent's open lots at the last price, less what they cost (their buys' fees
  included; a fee taken in the base asset leaves less quantity instead), so selling at the last
  price would realize it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal

from app.domain.errors import KestrelError
from app.domain.market import split_symbol
from app.domain.trading import Fill
from app.trading.lots import LotBook
from app.trading.port import Broker

ZERO = Decimal(0)
PriceOf = Callable[[str], Awaitable[Decimal]]


@dataclass(slots=True)
class _Book:
    realized: Decimal = ZERO
    fees: Decimal = ZERO
    fills: int = 0


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
        self._lots = LotBook()
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
        held = self._lots.open_lots()
        prices = {symbol: await self._price(symbol) for symbol in sorted({lot.symbol for lot
                                                                          in held})}
        open_of: dict[str, list[OpenQuantity]] = {}
        for lot in held:
            open_of.setdefault(lot.owner, []).append(
                OpenQuantity(lot.symbol, lot.size, lot.cost, prices.get(lot.symbol)))
        return {agent_id: AgentPnL(book.realized, book.fees, book.fills,
                                   tuple(open_of.get(agent_id, ())))
                for agent_id, book in self._books.items()}

    def apply(self, fills: Iterable[Fill]) -> None:
        """Add fills, oldest first, to the sums; a fill already added is skipped (the history
        and an event may both hold it)."""
        for row in fills:
            if row.fill_id in self._seen:
                continue
            self._seen.add(row.fill_id)
            book = self._book(row.agent_id)
            book.fills += 1
            base, _quote = split_symbol(row.symbol, "")
            # in the account currency: a fee taken in the base asset is worth its fill's price
            book.fees += row.fee * (row.price if row.fee_currency == base else 1)
            for taken in self._lots.apply(row):
                self._book(taken.owner).realized += taken.realized

    def _book(self, owner: str) -> _Book:
        book = self._books.get(owner)
        if book is None:
            book = self._books[owner] = _Book()
        return book

    async def _price(self, symbol: str) -> Decimal | None:
        try:
            return await self._price_of(symbol)
        except KestrelError:  # a symbol no longer listed, or no candle visible yet
            return None
