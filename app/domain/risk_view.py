"""The account as the Risk Guard sees it: a plain snapshot a broker builds and the guard reads.

It lives beneath both (the broker port must not depend on ``app.risk``), and holds what every
exposure limit needs: positions at their mark, and every order that is pending, i.e. open at the
broker or accepted by the guard and still on its way there, with the quote amount it holds back.
A limit that looked at positions alone let three 19% buys placed within one bar end at 58% of
equity; the exposure helpers below count both, so no rule can forget the pending part.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from decimal import Decimal

from app.domain.agents import agent_key
from app.domain.trading import Side

ZERO = Decimal(0)


@dataclass(frozen=True, slots=True)
class PositionView:
    size: Decimal
    avg_price: Decimal
    last_price: Decimal

    @property
    def value(self) -> Decimal:
        return self.size * self.last_price


@dataclass(frozen=True, slots=True)
class PendingOrder:
    """An order that may still add to the account's exposure.

    Attributes:
        reserved_quote: the quote amount it holds back (for a buy: cost, fee and slippage; what it
            can spend). Zero for a sell, which commits base currency, not quote.
        exit: reduce-only (take-profit, stop-loss, close): it can only shrink a position.
    """

    agent_id: str
    symbol: str
    side: Side
    reserved_quote: Decimal = ZERO
    exit: bool = False


@dataclass(frozen=True, slots=True)
class RiskView:
    """The account at the moment of a decision.

    Attributes:
        day_start_equity: equity at the start of the current UTC day (of the market clock).
        peak_equity: the highest equity seen, for the drawdown halt.
        pending: every pending order, open at the broker or just accepted by the guard.
        agent_cost: quote capital each agent has in positions, at cost, keyed by ``agent_key``.
    """

    now_ms: int
    quote_currency: str
    equity: Decimal
    cash: Decimal
    day_start_equity: Decimal
    peak_equity: Decimal
    positions: Mapping[str, PositionView] = field(default_factory=dict)
    pending: tuple[PendingOrder, ...] = ()
    agent_cost: Mapping[str, Decimal] = field(default_factory=dict)

    def with_pending(self, orders: Iterable[PendingOrder]) -> RiskView:
        """This view with more pending orders (those the guard accepted that are not open yet)."""
        more = tuple(orders)
        return replace(self, pending=self.pending + more) if more else self

    @property
    def open_orders(self) -> int:
        """Pending orders of every kind, exits included."""
        return len(self.pending)

    @property
    def open_buy_notional(self) -> Decimal:
        """Quote held back by all pending buys: cash that is spoken for."""
        return sum((o.reserved_quote for o in self.pending if o.side is Side.BUY), ZERO)

    def pending_buys(self, symbol: str) -> Decimal:
        """Quote held back by pending buys of ``symbol``: exposure that has not filled yet."""
        return sum(
            (o.reserved_quote for o in self.pending if o.side is Side.BUY and o.symbol == symbol),
            ZERO,
        )

    def exposure(self, symbol: str) -> Decimal:
        """What ``symbol`` can be worth once pending buys fill: the position at its mark plus the
        quote reserved by pending buys (pending sells may never fill, so they do not reduce it)."""
        held = self.positions.get(symbol)
        value = abs(held.value) if held is not None else ZERO
        return value + self.pending_buys(symbol)

    def exposed_symbols(self) -> frozenset[str]:
        """Symbols with an open position or a pending buy: the positions open or about to be."""
        held = {s for s, p in self.positions.items() if p.size != 0}
        return frozenset(held | {o.symbol for o in self.pending if o.side is Side.BUY})

    def agent_committed(self, agent_id: str) -> Decimal:
        """Quote capital ``agent_id`` has in positions (at cost) plus in its pending buys.

        Agent ids are matched without regard to case (``agent_key``).
        """
        key = agent_key(agent_id)
        pending = sum(
            (o.reserved_quote for o in self.pending
             if o.side is Side.BUY and agent_key(o.agent_id) == key),
            ZERO,
        )
        return self.agent_cost.get(key, ZERO) + pending
