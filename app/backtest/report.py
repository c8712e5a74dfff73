"""Write a backtest's result: ``summary.json``, ``equity.csv``, ``trades.csv`` and ``equity.png``.

The result is produced once (``BacktestResult``) and only formatted here, so the CLI, the tests and
later the GUI read the same numbers. The chart uses matplotlib's Agg backend: it renders to a file
with no display, and importing it never touches Qt. What is written is redacted: a run whose agents
faulted carries the fault reasons, and those quote servers' error text.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.backtest.metrics import Flags, Floats, Metrics, RoundTrip, Times, drawdown_pct
from app.domain.clock import ms_to_iso
from app.redaction import REDACTOR

TRADE_FIELDS = (
    "symbol", "entry_time_iso", "exit_time_iso", "entry_time_ms", "exit_time_ms", "quantity",
    "entry_price", "exit_price", "pnl", "return_pct", "fees", "bars_held", "open",
)


@dataclass(frozen=True)
class BacktestResult:
    """Everything one run produced, before any formatting.

    Attributes:
        time_ms: close time of each step; ``equity`` and ``baseline_equity`` align with it.
        settings: what was run (data files, strategy and parameters, cash, fees), for the record.
        faults: one line per agent that faulted during the run (reason and what to do); a
            report with any opens with them.
        warnings: what makes the result doubtful though nothing failed (a language model run
            over a period before its training cutoff); shown after the faults.
        refused: the orders refused during the run (the broker's, order entry's and the Risk
            Guard's refusals of order, exit and close calls), counted by error code or by the
            guard's rule; None when the run kept no audit of its tool calls to count them from.
            Shown next to the trades, so a run with no trade because every order was refused
            never reads as a clean "0 trades".
    """

    time_ms: Times
    equity: Floats
    baseline_equity: Floats
    exposed: Flags
    trades: list[RoundTrip]
    metrics: Metrics
    baseline: Metrics
    settings: dict[str, Any] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)
    faults: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    refused: dict[str, int] | None = None

    @property
    def refused_orders(self) -> int | None:
        return None if self.refused is None else sum(self.refused.values())


def refusals_line(refused: dict[str, int] | None) -> str:
    """The refused orders by reason, in one line (for the report under the table)."""
    if refused is None:
        return "Refused orders: not counted (the run kept no audit of its tool calls)."
    if not refused:
        return "Refused orders: none."
    return "Refused orders by reason: " + ", ".join(
        f"{reason} {count}" for reason, count in sorted(refused.items())) + "."


def refusal_warning(result: BacktestResult) -> str | None:
    """A warning when orders were refused and nothing traded: the run did not trade because
    its orders were refused, which a bare "0 trades" would hide."""
    refused = result.refused_orders
    if not refused or result.metrics.trades:
        return None
    return (f"No trade was made, but {refused} order(s) were refused "
            f"({refusals_line(result.refused).removeprefix('Refused orders by reason: ')}): "
            "the run did not trade because its orders were refused, not because nothing was "
            "worth trading.")


def _warnings(result: BacktestResult) -> list[str]:
    refused = refusal_warning(result)
    return [*([refused] if refused else []), *result.warnings]


def strategy_figures(result: BacktestResult) -> dict[str, Any]:
    """The strategy's metrics, with its refused orders (and their reasons) next to its trades."""
    figures: dict[str, Any] = {}
    for key, value in result.metrics.as_dict().items():
        figures[key] = value
        if key == "trades":
            figures["refused_orders"] = result.refused_orders
            figures["refused_orders_by"] = result.refused
    return figures


def _clean(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 10) if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def summary(result: BacktestResult) -> dict[str, Any]:
    """The JSON summary: strategy metrics and the buy-and-hold baseline side by side (after the
    faults, when agents faulted)."""
    faults = {"faults": list(result.faults)} if result.faults else {}
    warned = _warnings(result)
    warnings = {"warnings": warned} if warned else {}
    cleaned: dict[str, Any] = _clean(
        {
            **faults,
            **warnings,
            "settings": result.settings,
            "strategy": strategy_figures(result),
            "buy_and_hold": result.baseline.as_dict(),
            "bars": int(result.time_ms.size),
            "start_iso": ms_to_iso(int(result.time_ms[0])),
            "end_iso": ms_to_iso(int(result.time_ms[-1])),
            "stats": result.stats,
        }
    )
    return cleaned


def _fmt(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def summary_table(result: BacktestResult) -> str:
    """A plain-text table of the strategy beside buy-and-hold, for the terminal."""
    rows = [
        ("Final equity", _fmt(result.metrics.final_equity), _fmt(result.baseline.final_equity)),
        ("Total return %", _fmt(result.metrics.total_return_pct),
         _fmt(result.baseline.total_return_pct)),
        ("CAGR %", _fmt(result.metrics.cagr_pct), _fmt(result.baseline.cagr_pct)),
        ("Sharpe", _fmt(result.metrics.sharpe), _fmt(result.baseline.sharpe)),
        ("Sortino", _fmt(result.metrics.sortino), _fmt(result.baseline.sortino)),
        ("Max drawdown %", _fmt(result.metrics.max_drawdown_pct),
         _fmt(result.baseline.max_drawdown_pct)),
        ("Trades", str(result.metrics.trades), str(result.baseline.trades)),
        ("Refused orders", _count(result.refused_orders), "n/a"),
        ("Win rate %", _fmt(result.metrics.win_rate_pct), _fmt(result.baseline.win_rate_pct)),
        ("Profit factor", _fmt(result.metrics.profit_factor),
         _fmt(result.baseline.profit_factor)),
        ("Exposure %", _fmt(result.metrics.exposure_pct), _fmt(result.baseline.exposure_pct)),
        ("Fees paid", _fmt(result.metrics.fees_paid, 4), _fmt(result.baseline.fees_paid, 4)),
    ]
    width = max(len(r[0]) for r in rows)
    lines = []
    if result.faults:
        lines += [f"WARNING: {len(result.faults)} agent(s) FAULTED during this run; the results "
                  "below do not show what the agents would have done.",
                  *(f"  {line}" for line in result.faults), ""]
    warned = _warnings(result)
    lines += [*(f"WARNING: {line}" for line in warned), *([""] if warned else [])]
    lines.append(f"{'':<{width}}  {'strategy':>16}  {'buy & hold':>16}")
    lines += [f"{name:<{width}}  {a:>16}  {b:>16}" for name, a, b in rows]
    if result.refused_orders:
        lines += ["", refusals_line(result.refused)]
    return "\n".join(lines)


def _count(value: int | None) -> str:
    return "n/a" if value is None else str(value)


def gaps_line(result: BacktestResult) -> str | None:
    """One line on the candles the data lacks within the run, or None when it lacks none."""
    missing = {s: n for s, n in result.stats.get("missing_candles", {}).items() if n}
    if not missing:
        return None
    total = sum(missing.values())
    each = ", ".join(f"{s} {n:,}" for s, n in missing.items())
    return (f"The data lacks {total:,} candle{'s' if total != 1 else ''} within the run ({each}); "
            "the clock stepped over them, and equity, exposure and metrics cover the bars that "
            "exist.")


# the files ``write_report`` writes, by key
REPORT_FILES = {"summary": "summary.json", "equity": "equity.csv", "trades": "trades.csv",
                "chart": "equity.png"}


def write_report(result: BacktestResult, out_dir: Path) -> dict[str, Path]:
    """Write every output file into ``out_dir`` (created if needed) and return their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {key: out_dir / name for key, name in REPORT_FILES.items()}
    document = REDACTOR.redact_data(summary(result))
    paths["summary"].write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    _write_equity(result, paths["equity"])
    _write_trades(result, paths["trades"])
    write_chart(result, paths["chart"])
    return paths


def _write_equity(result: BacktestResult, path: Path) -> None:
    dd = drawdown_pct(result.equity)
    base_dd = drawdown_pct(result.baseline_equity)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["time_ms", "time_iso", "equity", "drawdown_pct", "in_market",
                         "buy_hold_equity", "buy_hold_drawdown_pct"])
        for i in range(result.time_ms.size):
            writer.writerow([
                int(result.time_ms[i]), ms_to_iso(int(result.time_ms[i])),
                f"{result.equity[i]:.8f}", f"{dd[i]:.6f}", int(bool(result.exposed[i])),
                f"{result.baseline_equity[i]:.8f}", f"{base_dd[i]:.6f}",
            ])


def _write_trades(result: BacktestResult, path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(TRADE_FIELDS)
        for t in result.trades:
            writer.writerow([
                t.symbol, ms_to_iso(t.entry_time_ms),
                "" if t.exit_time_ms is None else ms_to_iso(t.exit_time_ms),
                t.entry_time_ms, "" if t.exit_time_ms is None else t.exit_time_ms,
                f"{t.quantity:.10g}", f"{t.entry_price:.10g}",
                "" if t.exit_price is None else f"{t.exit_price:.10g}",
                f"{t.pnl:.8f}", f"{t.return_pct:.6f}", f"{t.fees:.8f}", t.bars_held,
                int(t.open),
            ])


def write_chart(result: BacktestResult, path: Path) -> None:
    """Equity of the strategy and buy-and-hold above, their drawdowns below.

    Drawn on a ``Figure`` of its own, not through ``pyplot``: pyplot keeps its figures in one
    process-wide registry, so two runs writing their charts at once from two threads (a sweep's
    cells on a threaded worker, the window's runs) could draw into each other's figure.
    """
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
    from matplotlib.figure import Figure

    times = (result.time_ms.astype("datetime64[ms]")).astype(object)
    fig = Figure(figsize=(11, 6.5))
    top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    top.plot(times, result.equity, label="strategy", color="#1f77b4", linewidth=1.1)
    top.plot(times, result.baseline_equity, label="buy & hold", color="#999999",
             linewidth=0.9)
    top.set_ylabel("equity")
    top.legend(loc="upper left")
    top.grid(alpha=0.3)
    name = result.settings.get("strategy", "strategy")
    faulted = f"{len(result.faults)} agent(s) FAULTED - " if result.faults else ""
    top.set_title(
        f"{faulted}{name}: return {result.metrics.total_return_pct:.2f}% vs buy & hold "
        f"{result.baseline.total_return_pct:.2f}%"
    )
    bottom.fill_between(times, -drawdown_pct(result.equity), 0, color="#d62728", alpha=0.5,
                        label="strategy")
    bottom.plot(times, -drawdown_pct(result.baseline_equity), color="#999999",
                linewidth=0.8, label="buy & hold")
    bottom.set_ylabel("drawdown %")
    bottom.grid(alpha=0.3)
    locator = AutoDateLocator()
    bottom.xaxis.set_major_locator(locator)
    bottom.xaxis.set_major_formatter(ConciseDateFormatter(locator))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
