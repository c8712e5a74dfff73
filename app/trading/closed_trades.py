"""Closed trades from fills: each round trip with its P&L, and who opened it.

The broker reports fills; the person wants trades: "the trader bought 0.1 BTC at 9,000 on Monday
and it was sold at 9,400 on Wednesday, +38.60 after fees". ``closed_trades`` pairs the fills of
any broker (paper, replay, live through the port) into such round trips, in ``Decimal``.

The account is shared, so a round trip is one actor's holding of one symbol going from nothing to
something and back to nothing: it belongs to whoever bought (an agent, or the person), and a sell
is taken from the seller's own holding first, then from the others' in the order of their ids -
the rule the paper book follows (``app.exchange.book``), so an agent's trip closed by the
person's "Close" or "Flatten all" still counts as that agent's, closed by the person.

P&L is net of every fee: proceeds - cost - the fees paid in the quote currency (the buys' and the
share of the sells'). A fee paid in the base currency (an exchange that charges a buy's fee in
what it buys) is already in the P&L: it leaves less to sell, so it is not subtracted again; it is
shown among the fees valued at its fill's price. A trip still open is not listed; a sell of
holdings the fills do not show (history cut short) is left out rather than guessed at.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal

from app.domain.trading import Fill, Side

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


@dataclass(slots=True)
class _Trip:
    entry_ms: int
    open: Decimal = ZERO
    bought: Decimal = ZERO
    cost: Decimal = ZERO
    sold: Decimal = ZERO
    proceeds: Decimal = ZERO
    fees: Decimal = ZERO  # every fee, valued in the quote currency (what the person is shown)
    quote_fees: Decimal = ZERO  # the fees paid in the quote currency (what the P&L subtracts)
    closers: list[str] = field(default_factory=list)


def _base_fee(fill: Fill) -> Decimal:
    """The fee when it was paid in the base currency (it changes what is held), else zero."""
    return fill.fee if fill.fee_currency == fill.symbol.split("/", 1)[0] else ZERO


def _add_fee(trip: _Trip, fill: Fill, share: Decimal) -> None:
    base_fee = _base_fee(fill)
    if base_fee:
        trip.fees += base_fee * fill.price * share
    else:
        trip.fees += fill.fee * share
        trip.quote_fees += fill.fee * share


def closed_trades(fills: Iterable[Fill]) -> list[ClosedTrade]:
    """Every finished round trip in ``fills`` (any order), oldest exit first."""
    trades: list[ClosedTrade] = []
    holdings: dict[str, dict[str, _Trip]] = {}  # symbol -> actor -> open trip
    for fill in sorted(fills, key=lambda f: (f.time_ms, f.fill_id)):
        trips = holdings.setdefault(fill.symbol, {})
        if fill.side is Side.BUY:
            trip = trips.get(fill.agent_id)
            if trip is None:
                trip = trips[fill.agent_id] = _Trip(fill.time_ms)
            trip.open += fill.quantity - _base_fee(fill)
            trip.bought += fill.quantity
            trip.cost += fill.quantity * fill.price
            _add_fee(trip, fill, Decimal(1))
            continue
        if fill.quantity <= 0:
            continue
        owners = [fill.agent_id] + sorted(a for a in trips if a != fill.agent_id)
        gone = fill.quantity + _base_fee(fill)  # what leaves the holdings
        left = gone
        for owner in owners:
            trip = trips.get(owner)
            if trip is None or left <= 0:
                continue
            take = min(left, trip.open)
            left -= take
            trip.open -= take
            share = take / gone
            trip.sold += fill.quantity * share
            trip.proceeds += fill.quantity * share * fill.price
            _add_fee(trip, fill, share)
            if fill.agent_id not in trip.closers:
                trip.closers.append(fill.agent_id)
            if trip.open == 0:
                del trips[owner]
                trades.append(_finish(fill.symbol, owner, trip, fill.time_ms))
    trades.sort(key=lambda t: (t.exit_ms, t.entry_ms, t.symbol, t.opened_by))
    return trades


def _finish(symbol: str, owner: str, trip: _Trip, exit_ms: int) -> ClosedTrade:
    return ClosedTrade(
        symbol=symbol, opened_by=owner, closed_by=tuple(trip.closers), entry_ms=trip.entry_ms,
        exit_ms=exit_ms, quantity=trip.bought, entry_price=trip.cost / trip.bought,
        exit_price=trip.proceeds / trip.sold, fees=trip.fees,
        pnl=trip.proceeds - trip.cost - trip.quote_fees,
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
