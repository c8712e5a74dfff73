"""How far orders still in flight could move an account's balances, for the balance check.

A balance read while an order is in flight (sent and not yet found, or filled on the exchange
with fills the journal has not stored yet) differs from what the journal explains by whatever
part of that order has filled meanwhile. That difference is not a mismatch yet: the order
resolves seconds later and the journal catches up. Each such order can move each asset of its
market anywhere between not filling at all and filling in full, fee included (``Reach``); a
difference within the sum of those ranges is waited out, and the next check after the orders are
resolved tells whether it was theirs. A difference beyond them, or in an asset no such order
trades, is a mismatch at once.

An order found on the exchange is not counted at its full size: the reconciler reads it again
right after the balances, so only what the exchange says it executed beyond the stored fills is
uncertain, and the fills learnt by that read (made just before or just after the balances were
read). A take profit resting for days hides nothing. Pure functions: the reconciler reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from app.domain.market import split_symbol
from app.domain.trading import Side
from app.store.order_journal import JournalEntry, JournalState

ZERO = Decimal(0)
# entries whose fills the journal may not hold in full yet: sent and not found, on the book, or
# closed on the exchange before every fill was stored
MAY_STILL_FILL = (
    JournalState.SENDING, JournalState.UNKNOWN, JournalState.ACCEPTED, JournalState.OPEN,
    JournalState.PARTIALLY_FILLED, JournalState.FILLED, JournalState.CANCELED,
    JournalState.EXPIRED,
)


@dataclass(frozen=True, slots=True)
class Reach:
    """How far orders could move one asset's balance: down by ``low`` (<= 0), up by ``high``."""

    low: Decimal = ZERO
    high: Decimal = ZERO

    def __add__(self, other: Reach) -> Reach:
        return Reach(self.low + other.low, self.high + other.high)

    def covers(self, difference: Decimal) -> bool:
        return self.low <= difference <= self.high


def unfilled(entry: JournalEntry, stored: Decimal) -> Decimal:
    """The part of ``entry`` the exchange may have filled beyond the ``stored`` fills: all of an
    order in flight (not found yet), what one found executed beyond them by its latest read."""
    if entry.state.in_flight:
        return max(entry.quantity - stored, ZERO)
    if entry.state in MAY_STILL_FILL:
        return max(entry.filled_quantity - stored, ZERO)
    return ZERO


def either_way(deltas: dict[str, Decimal]) -> dict[str, Reach]:
    """The reach of a fill stored after the balances were read, which the reading may or may not
    hold already: the journal counts its ``deltas``, the balances maybe not."""
    return {asset: Reach(min(ZERO, -delta), max(ZERO, -delta)) for asset, delta in deltas.items()}


def order_reach(
    entry: JournalEntry, left: Decimal, spent: Decimal, low_price: Decimal,
    high_price: Decimal, fee: Decimal,
) -> dict[str, Reach]:
    """How ``left`` more of ``entry`` filling could move its base and quote assets.

    Args:
        spent: the quote its stored fills cost (a buy for a quote amount spends the rest).
        low_price, high_price: the band its fills may lie in.
        fee: the largest fee a fill may pay, as a fraction of what it trades.
    """
    base, quote = split_symbol(entry.symbol, "")
    if entry.side is Side.BUY:
        if entry.quote_amount is not None and not entry.state.final:
            budget = max(entry.quote_amount - spent, ZERO)
            return {base: Reach(ZERO, budget / low_price),
                    quote: Reach(-(budget * (1 + fee)), ZERO)}
        return {base: Reach(ZERO, left), quote: Reach(-(left * high_price * (1 + fee)), ZERO)}
    return {base: Reach(-(left * (1 + fee)), ZERO), quote: Reach(ZERO, left * high_price)}
