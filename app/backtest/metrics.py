"""Performance metrics of an equity curve and its round-trip trades.

Floats are fine here: these are statistics over a numeric series, reported rounded. A metric that is
undefined for the run (a Sharpe ratio of a flat curve, a profit factor without a losing trade, a
win rate without trades) is ``None`` and shows as ``null``/empty, never a division by zero and never
a made-up 0 or infinity.

Annualisation uses the bar interval over a 365-day, 24-hour year (crypto markets never close):
``periods_per_year = 365 * 86_400_000 / bar_ms``. Sharpe and Sortino are the arithmetic mean of
per-bar returns over their standard / downside deviation, times ``sqrt(periods_per_year)``, with a
risk-free rate of zero.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import numpy.typing as npt

YEAR_MS = 365 * 86_400_000

# the arrays of a run, one item per step: equity and prices, times (ms), whether a position was held
Floats = npt.NDArray[np.float64]
Times = npt.NDArray[np.int64]
Flags = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class RoundTrip:
    """One trade from flat to flat in one symbol (long), with fees of both legs included in pnl."""

    symbol: str
    entry_time_ms: int
    exit_time_ms: int | None
    quantity: float
    entry_price: float
    exit_price: float | None
    pnl: float
    return_pct: float
    fees: float
    bars_held: int
    open: bool = False


@dataclass(frozen=True, slots=True)
class Metrics:
    start_equity: float
    final_equity: float
    total_return_pct: float
    cagr_pct: float | None
    sharpe: float | None
    sortino: float | None
    max_drawdown_pct: float
    trades: int
    win_rate_pct: float | None
    profit_factor: float | None
    exposure_pct: float
    fees_paid: float

    def as_dict(self) -> dict[str, float | int | None]:
        return asdict(self)


def periods_per_year(bar_ms: int) -> float:
    if bar_ms <= 0:
        raise ValueError(f"bar length must be positive, got {bar_ms} ms")
    return YEAR_MS / bar_ms


def drawdown_pct(equity: Floats) -> Floats:
    """Per-bar drawdown from the running peak, in percent (0 at a new high, positive below it)."""
    if equity.size == 0:
        return equity.astype(float)
    peaks = np.maximum.accumulate(equity)
    with np.errstate(divide="ignore", invalid="ignore"):
        dd = np.where(peaks > 0, (peaks - equity) / peaks * 100.0, 0.0)
    return dd


def _ratio(numerator: float, denominator: float) -> float | None:
    if denominator == 0 or not math.isfinite(denominator) or not math.isfinite(numerator):
        return None
    return numerator / denominator


def _cagr(start: float, final: float, years: float) -> float | None:
    """Compound annual growth in percent; None when a very short run would annualise past any
    representable number (a 10% gain in one hour is not a meaningful yearly rate anyway)."""
    if final <= 0:
        return -100.0
    exponent = math.log(final / start) / years
    if exponent > 700:
        return None
    return math.expm1(exponent) * 100.0


def compute_metrics(
    time_ms: Times,
    equity: Floats,
    bar_ms: int,
    trades: Sequence[RoundTrip],
    exposed: Flags,
    fees_paid: float,
    initial: float | None = None,
) -> Metrics:
    """Every summary number of one run.

    Args:
        time_ms: the time of each equity point (bar close), ascending.
        equity: account equity at each point.
        bar_ms: the bar length used for annualisation (the finest interval of the run).
        trades: closed and still-open round trips; open ones count for exposure, not for win rate.
        exposed: per point, whether any position was held.
        initial: the capital the run started with, when it differs from the first point (the
            buy-and-hold curve has already paid its entry fee at its first point).
    """
    if equity.size == 0:
        raise ValueError("an equity curve needs at least one point")
    start = float(equity[0]) if initial is None else initial
    final = float(equity[-1])
    total_return = (final / start - 1.0) * 100.0 if start > 0 else 0.0
    span_ms = float(time_ms[-1] - time_ms[0]) if time_ms.size > 1 else 0.0
    cagr: float | None = None
    if span_ms > 0 and start > 0:
        cagr = _cagr(start, final, span_ms / YEAR_MS)
    sharpe = sortino = None
    if equity.size > 1:
        prev = equity[:-1]
        with np.errstate(divide="ignore", invalid="ignore"):
            returns = np.where(prev > 0, equity[1:] / prev - 1.0, 0.0)
        scale = math.sqrt(periods_per_year(bar_ms))
        mean = float(returns.mean())
        std = float(returns.std(ddof=1)) if returns.size > 1 else 0.0
        downside = float(np.sqrt(np.mean(np.minimum(returns, 0.0) ** 2)))
        raw_sharpe = _ratio(mean, std) if std > 1e-15 else None
        raw_sortino = _ratio(mean, downside) if downside > 1e-15 else None
        sharpe = None if raw_sharpe is None else raw_sharpe * scale
        sortino = None if raw_sortino is None else raw_sortino * scale
    closed = [t for t in trades if not t.open]
    wins = [t.pnl for t in closed if t.pnl > 0]
    losses = [-t.pnl for t in closed if t.pnl < 0]
    win_rate = len(wins) / len(closed) * 100.0 if closed else None
    profit_factor = _ratio(sum(wins), sum(losses)) if losses else None
    return Metrics(
        start_equity=start,
        final_equity=final,
        total_return_pct=total_return,
        cagr_pct=cagr,
        sharpe=sharpe,
        sortino=sortino,
        max_drawdown_pct=float(drawdown_pct(equity).max()),
        trades=len(closed),
        win_rate_pct=win_rate,
        profit_factor=profit_factor,
        exposure_pct=float(np.mean(exposed)) * 100.0 if exposed.size else 0.0,
        fees_paid=fees_paid,
    )
