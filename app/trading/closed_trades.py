"""Closed trades from fills: each round trip with its P&L, and who opened it.

The broker reports fills; the person wants trades: "the trader bought 0.1 BTC at 9,000 on Monday
and it was sold at 9,400 on Wednesday, +38.60 after fees". ``closed_trades`` pairs the fills of
any broker (paper, replay, live through the port) into such round trips, in ``Decimal``.

The account is shared, so a round trip is one actor's holding of one symbol going from nothing to
something and back to nothing: it belongs to whoever bought (an agent, or the person), and a sell
is taken from the seller's own holding first, then from the others' in the order of their ids
(``app.trading.lots``, the rule every P&L view and the paper book follow), so an agent's trip
closed by the person's "Close" or "Flatten all" still counts as that agent's, closed by the
person.

P&L is net of every fee: proceeds - cost - the fees paid in the quote currency (the buys' and the
share of the sells'). A fee paid in the base currency (an exchange that charges a buy's fee in
what it buys) is already in the P&L: it leaves less to sell, so it is not subtracted again; it is
shown among the fees valued at its fill's price. A trip still open is not listed; a sell of
holdings the fills do not show (history cut short) is left out rather than guessed at.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal

from app.domain.trading import Fill
from app.trading.lots import Lot, LotBook

ZERO = Decimal(0)


@dataclass(frozen=True, slots=True)
class ClosedTrade:
    """One finished round trip (spot: always long) in the account currency."""

    symbol: str
    opened_by: str
    closed_by: tuple[str, ...]  # who sold it, in the order they did
    entry_ms: int
    exit_ms: int
    quantity: Decimal
    entry_price: Decimal  # the average of its buys
    exit_price: Decimal  # the average of the sells taken from it
    fees: Decimal
    pnl: Decimal

    @property
    def return_pct(self) -> Decimal:
        cost = self.quantity * self.entry_price
        return self.pnl / cost * 100 if cost else ZERO


@dataclass(frozen=True, slots=True)
class ActorTotals:
    """One actor's closed trades added up."""

    trades: int
    wins: int
    fees: Decimal
    pnl: Decimal


def closed_trades(fills: Iterable[Fill]) -> list[ClosedTrade]:
    """Every finished round trip in ``fills`` (any order), oldest exit first."""
    trades: list[ClosedTrade] = []
    book = LotBook()
    for fill in sorted(fills, key=lambda f: (f.time_ms, f.fill_id)):
        for taken in book.apply(fill):
            if taken.closed:
                trades.append(_finish(taken.lot, fill.time_ms))
    trades.sort(key=lambda t: (t.exit_ms, t.entry_ms, t.symbol, t.opened_by))
    return trades


def _finish(lot: Lot, exit_ms: int) -> ClosedTrade:
    return ClosedTrade(
        symbol=lot.symbol, opened_by=lot.owner, closed_by=tuple(lot.closers),
        entry_ms=lot.entry_ms, exit_ms=exit_ms, quantity=lot.bought,
        entry_price=lot.spent / lot.bought, exit_price=lot.proceeds / lot.sold, fees=lot.fees,
        pnl=lot.proceeds - lot.spent - lot.quote_fees,
    )


def totals_by_actor(trades: Iterable[ClosedTrade]) -> dict[str, ActorTotals]:
    """Per actor who opened them: how many trades, how many won, fees and P&L."""
    out: dict[str, ActorTotals] = {}
    for trade in trades:
        before = out.get(trade.opened_by, ActorTotals(0, 0, ZERO, ZERO))
        out[trade.opened_by] = ActorTotals(
            before.trades + 1, before.wins + (trade.pnl > 0), before.fees + trade.fees,
            before.pnl + trade.pnl,
        )
    return out
