"""Position sizing by risk, and the Trader's rules for learning from its record with a symbol.

quantity = equity x risk% / |entry - stop|, capped so the position is worth at most
``max_position_pct`` of equity (a hair under, so fees and the next bar's open do not push it over
the Risk Guard's weight limit) and never more than the cash on hand, rounded down to the amount
step. A size whose value is under the minimum notional is no trade at all.

Memory rules (deterministic, from ``trades.yaml``):
- after ``STREAK`` losing trades in a row with the symbol, only signals with confidence of at
  least ``STREAK_CONFIDENCE`` are taken;
- with ``POOR_RECORD_TRADES`` or more closed trades and a win rate under ``POOR_WIN_RATE``%, the
  risk per trade is halved.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_DOWN, Decimal

from app.memory.roles import TradesFile

CAP_MARGIN = Decimal("0.995")
CASH_MARGIN = Decimal("0.99")
DEFAULT_STEP = Decimal("0.000001")
MIN_NOTIONAL = Decimal(10)
STREAK = 3
STREAK_CONFIDENCE = Decimal("0.75")
POOR_RECORD_TRADES = 10
POOR_WIN_RATE = Decimal(30)


@dataclass(frozen=True, slots=True)
class Size:
    quantity: Decimal
    explanation: str


def position_size(
    *,
    equity: Decimal,
    cash: Decimal,
    entry: Decimal,
    stop: Decimal,
    risk_pct: Decimal,
    max_position_pct: Decimal,
    step: Decimal = DEFAULT_STEP,
) -> Size:
    """The quantity to buy, and how it was reached, in words a person can check."""
    distance = abs(entry - stop)
    if entry <= 0 or distance == 0:
        return Size(Decimal(0), "no size: the entry and the stop-loss are the same price")
    risk_amount = equity * risk_pct / 100
    by_risk = risk_amount / distance
    by_weight = equity * max_position_pct / 100 * CAP_MARGIN / entry
    by_cash = cash * CASH_MARGIN / entry
    quantity = min(by_risk, by_weight, by_cash)
    limit = ("risk" if quantity == by_risk else
             f"the {max_position_pct}% position cap" if quantity == by_weight else "the cash")
    quantity = (quantity / step).to_integral_value(rounding=ROUND_DOWN) * step
    text = (
        f"risk {risk_pct}% of equity {equity:.2f} = {risk_amount:.2f} over a stop distance of "
        f"{distance:f} gives {by_risk:.6f}; limited by {limit} to {quantity:f}"
    )
    if quantity * entry < MIN_NOTIONAL:
        return Size(Decimal(0), f"{text}, worth less than the minimum order of {MIN_NOTIONAL}")
    return Size(quantity, text)


def losing_streak(trades: TradesFile) -> int:
    """Closed losing trades in a row at the end of the record (into its archive, if every
    closed trade still in the file lost)."""
    closed = trades.closed_pnls
    streak = 0
    for pnl in reversed(closed):
        if pnl > 0:
            return streak
        streak += 1
    return streak + (trades.archived.trailing_losses if trades.archived else 0)


def risk_adjustment(trades: TradesFile) -> tuple[Decimal, str]:
    """The factor on the risk per trade, and why (1 and "" for an ordinary record)."""
    totals = trades.totals
    closed = totals.wins + totals.losses
    if closed < POOR_RECORD_TRADES:
        return Decimal(1), ""
    rate = Decimal(100) * totals.wins / closed
    if rate < POOR_WIN_RATE:
        return Decimal("0.5"), (
            f"my win rate with this symbol is {rate:.0f}% over {closed} trades, under "
            f"{POOR_WIN_RATE}%: risk halved"
        )
    return Decimal(1), ""
