"""The account's trades as the window shows them: every fill booked once, as lots with an owner.

Open trades, Closed trades, Performance and the chat's fill cards all say whose money made what.
They read it here, from one book kept for the whole window: the account's fills are read once
through the ``Broker`` port, each later one arrives as an ``OrderFilled`` event, and each is booked
by ``app.trading.lots`` (the rule order entry, the agent list and the paper book follow), so no
two views can disagree on a lot, its cost or a P&L.

For every sell the book keeps the parts it took out of each owner's lot (``Taken``: quantity and
realized P&L, belonging to the lot's owner), and in time order what each owner realized, for the
daily P&L and the P&L curves. Qt-free: listeners are plain callables.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal

from app.domain.agents import agent_key
from app.domain.errors import KestrelError
from app.domain.trading import ExitKind, Fill, Order, Side
from app.events import EventBus, OrderFilled
from app.trading.closed_trades import ClosedTrade, closed_trades
from app.trading.lots import Lot, LotBook, Taken
from app.trading.port import Broker

logger = logging.getLogger(__name__)
ZERO = Decimal(0)


@dataclass(frozen=True, slots=True)
class Realized:
    """What one sell realized for one owner: a part of a lot sold, at the sell's time."""

    time_ms: int
    owner: str
    seller: str
    symbol: str
    quantity: Decimal
    pnl: Decimal
    fill_id: str


@dataclass(frozen=True, slots=True)
class FillNews:
    """A fill as the person is told of it: who traded, what, and for a sell whose lots it
    came out of and what each part realized.

    Attributes:
        order: the order it filled (its exit kind says a take profit or a stop loss), when
            known (a fill of an earlier run read from the history may have none).
    """

    fill: Fill
    order: Order | None
    takes: tuple[Taken, ...]

    @property
    def exit_kind(self) -> ExitKind:
        return self.order.exit_kind if self.order is not None else ExitKind.NONE

    @property
    def pnl(self) -> Decimal | None:
        """What the sell realized, every part of it (None for a buy)."""
        if self.fill.side is Side.BUY:
            return None
        return sum((t.realized for t in self.takes), ZERO)

    @property
    def owners(self) -> tuple[str, ...]:
        """Whose lots a sell came out of, in order (empty for a buy)."""
        return tuple(dict.fromkeys(t.owner for t in self.takes))


Listener = Callable[[FillNews], None]


def _order_key(fill: Fill) -> tuple[int, str]:
    return fill.time_ms, fill.fill_id


class DeskTrades:
    """Every fill of the account, booked as lots with an owner, kept current by events.

    Args:
        broker: whose fills are read (``trades``) and whose orders are looked up for a fill
            of the history (``get_order``).
        bus: where ``OrderFilled`` arrives; None: only what ``load`` read.
    """

    def __init__(self, broker: Broker, bus: EventBus | None) -> None:
        self.broker = broker
        self.bus = bus
        self.fills: dict[str, Fill] = {}
        self.orders: dict[str, Order] = {}  # by order id: the orders fills were seen with
        self.takes: dict[str, tuple[Taken, ...]] = {}  # by sell fill id
        self.realized: list[Realized] = []  # oldest first
        self.version = 0  # grows with every change: a view redraws when it moved
        self._book = LotBook()
        self._last: tuple[int, str] | None = None
        self._listeners: list[Listener] = []
        self._early: list[OrderFilled] = []
        self._loading: asyncio.Task[None] | None = None
        self._closed: tuple[int, list[ClosedTrade]] = (-1, [])
        self._owners: tuple[int, list[str]] = (-1, [])
        self.ready = False
        if bus is not None:
            bus.subscribe(OrderFilled, self._on_filled)

    def detach(self) -> None:
        if self.bus is not None:
            self.bus.unsubscribe(OrderFilled, self._on_filled)
        self._listeners.clear()

    def listen(self, listener: Listener) -> Callable[[], None]:
        """Tell ``listener`` of every new fill once it is booked; returns what stops that."""
        self._listeners.append(listener)

        def stop() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)
        return stop

    # -- reading -----------------------------------------------------------------------------

    async def load(self) -> None:
        """Read the account's fills once (every caller waits for the one read)."""
        if self.ready:
            return
        if self._loading is None:
            self._loading = asyncio.ensure_future(self._read())
        await asyncio.shield(self._loading)

    async def _read(self) -> None:
        history = await self.broker.trades(None, None)  # newest first
        for fill in sorted(history, key=_order_key):
            self._book_fill(fill)
        self.ready = True
        early, self._early = self._early, []
        for event in early:
            self._on_filled(event)
        self.version += 1

    def _on_filled(self, event: OrderFilled) -> None:
        if not self.ready:
            self._early.append(event)
            return
        self.orders[event.order.order_id] = event.order
        if event.fill.fill_id in self.fills:
            return
        self._book_fill(event.fill)
        self.version += 1
        news = self.news(event.fill)
        for listener in list(self._listeners):
            try:
                listener(news)
            except Exception:  # one view's failure must not keep the fill from the others
                logger.exception("a view failed on fill %s", event.fill.fill_id)

    def _book_fill(self, fill: Fill) -> None:
        if fill.fill_id in self.fills:
            return
        self.fills[fill.fill_id] = fill
        key = _order_key(fill)
        if self._last is not None and key < self._last:
            self._rebook()  # a fill older than one booked (a live account's catch-up)
            return
        self._apply(fill)

    def _apply(self, fill: Fill) -> None:
        self._last = _order_key(fill)
        taken = tuple(self._book.apply(fill))
        if fill.side is Side.SELL:
            self.takes[fill.fill_id] = taken
            self.realized.extend(
                Realized(fill.time_ms, t.owner, fill.agent_id, fill.symbol, t.quantity,
                         t.realized, fill.fill_id) for t in taken)

    def _rebook(self) -> None:
        self._book = LotBook()
        self.takes, self.realized, self._last = {}, [], None
        for fill in sorted(self.fills.values(), key=_order_key):
            self._apply(fill)

    # -- what the views read -----------------------------------------------------------------

    def news(self, fill: Fill) -> FillNews:
        return FillNews(fill, self.orders.get(fill.order_id), self.takes.get(fill.fill_id, ()))

    async def order_of(self, fill: Fill) -> Order | None:
        """The order ``fill`` filled (looked up through the broker for a fill of the history)."""
        found = self.orders.get(fill.order_id)
        if found is None:
            try:
                found = await self.broker.get_order(fill.agent_id, fill.symbol, fill.order_id)
            except KestrelError:
                return None
            self.orders[fill.order_id] = found
        return found

    def open_lots(self) -> list[Lot]:
        """Every lot held now, by symbol and owner."""
        return self._book.open_lots()

    def lots_of(self, symbol: str) -> list[Lot]:
        return self._book.open_lots(symbol)

    def closed(self) -> list[ClosedTrade]:
        """Every finished round trip, oldest exit first (made again only after a change)."""
        if self._closed[0] != self.version:
            self._closed = (self.version, closed_trades(self.fills.values()))
        return self._closed[1]

    def fills_between(self, since_ms: int | None, until_ms: int | None) -> list[Fill]:
        """The fills in [since, until), oldest first (None: no bound)."""
        return sorted((f for f in self.fills.values()
                       if (since_ms is None or f.time_ms >= since_ms)
                       and (until_ms is None or f.time_ms < until_ms)), key=_order_key)

    def owners(self) -> list[str]:
        """Everyone who has held a lot, in the order they first bought (made again only after
        a change: the account panel asks on every refresh)."""
        if self._owners[0] != self.version:
            seen: dict[str, str] = {}
            for fill in sorted(self.fills.values(), key=_order_key):
                if fill.side is Side.BUY:
                    seen.setdefault(agent_key(fill.agent_id), fill.agent_id)
            self._owners = (self.version, list(seen.values()))
        return list(self._owners[1])


def same_owner(a: str, b: str) -> bool:
    """Whether two actor ids name one owner (ids are compared case-insensitively)."""
    return agent_key(a) == agent_key(b)


def realized_by_owner(realized: Iterable[Realized]) -> dict[str, Decimal]:
    out: dict[str, Decimal] = {}
    for part in realized:
        out[part.owner] = out.get(part.owner, ZERO) + part.pnl
    return out
