"""``run_backtest``: load data, build the session, replay a strategy, compute and write the report.

The result is assembled from what the run left in the ledger (the equity curve the broker committed
at every settle and the fills), so the report shows what the durable record says, not a second,
parallel bookkeeping.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np

from app.backtest.engine import ReplayOutput, Timeline, build_timeline, last_closes, replay
from app.backtest.metrics import compute_metrics
from app.backtest.report import BacktestResult, write_report
from app.backtest.session import BrokerSettings, Session, build_session, load_files
from app.backtest.strategy import Strategy
from app.backtest.trades import buy_and_hold, round_trips
from app.config.risk import RiskConfig
from app.exchange.paper_account import split_symbol
from app.tools.spec import ALL_PERMISSIONS, AgentContext

AGENT_ID = "backtest"
LEDGER_NAME = "backtest.db"


@dataclass(frozen=True)
class RunOptions:
    """How to run, beyond the data and the strategy.

    Attributes:
        out_dir: where the report and the run's ledger (``backtest.db``) go; None writes nothing.
        record_tool_calls: keep every tool call in the ledger's audit table.
    """

    broker: BrokerSettings = field(default_factory=BrokerSettings)
    risk: RiskConfig | None = None
    out_dir: Path | None = None
    allow_gaps: bool = False
    progress: bool = False
    record_tool_calls: bool = True


def save_ledger(session: Session, out_dir: Path) -> Path:
    """Copy the run's in-memory ledger to ``out_dir/backtest.db`` in one step.

    The replay keeps its ledger in memory (same schema, same code, same transactions) and writes
    the file once at the end: a per-bar commit to a file costs more than the rest of a bar's work,
    and a backtest interrupted half-way is simply run again. A previous run's file is replaced,
    like its report.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / LEDGER_NAME
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    target = sqlite3.connect(str(path))
    try:
        session.ledger.connection.backup(target)
    finally:
        target.close()
    return path


def _check_one_quote_currency(symbols: Sequence[str]) -> None:
    """One account holds one quote currency; refuse a mix before replaying anything.

    Raises:
        ValueError: naming each symbol's quote currency.
    """
    quotes = {s: split_symbol(s, "")[1] for s in symbols}
    if len(set(quotes.values())) > 1:
        listed = ", ".join(f"{s} is quoted in {q or 'nothing'}" for s, q in quotes.items())
        raise ValueError(
            f"all data files of one backtest must share one quote currency ({listed}); "
            "run them as separate backtests"
        )


async def run_session(
    session: Session,
    strategy: Strategy,
    *,
    progress: bool = False,
    agent_id: str = AGENT_ID,
) -> tuple[Timeline, ReplayOutput, float]:
    """Replay ``strategy`` over all of ``session``'s data; return the timeline, output, seconds."""
    timeline = build_timeline(session.market)
    agent = AgentContext(
        agent_id=agent_id,
        permissions=ALL_PERMISSIONS,
        role="backtest",
        watched_symbols=tuple(timeline.intervals),
        interval=next(iter(timeline.intervals.values())),
    )
    started = time.perf_counter()
    output = await replay(
        timeline=timeline, clock=session.clock, broker=session.broker,
        executor=session.executor, strategy=strategy, agent=agent, progress=progress,
    )
    return timeline, output, time.perf_counter() - started


def collect_result(
    session: Session,
    timeline: Timeline,
    output: ReplayOutput,
    *,
    settings: dict[str, Any],
    stats: dict[str, Any],
) -> BacktestResult:
    """Turn the ledger's record of a finished run into metrics, trades and the baseline."""
    curve = {t: float(e) for t, e, _cash in session.ledger.equity_curve()}
    cash = float(session.broker.initial_cash)
    equity = np.array([curve.get(int(t), np.nan) for t in timeline.time_ms])
    if np.isnan(equity).any():
        missing = int(np.isnan(equity).sum())
        raise RuntimeError(f"the ledger has no equity point for {missing} steps of the run")
    bar_ms = {
        s: session.market.loaded(s, i).bar_ms for s, i in timeline.intervals.items()
    }
    closes = last_closes(session.market, timeline)
    fills = session.ledger.fills()
    end_ms = int(timeline.time_ms[-1])
    trades = round_trips(
        fills, bar_ms, {s: float(c[-1]) for s, c in closes.items()}, end_ms
    )
    fees = float(sum((f.fee for f in fills if f.fee_currency == session.broker.quote_currency),
                     start=Decimal(0)))
    step_ms = min(bar_ms.values())
    metrics = compute_metrics(
        timeline.time_ms, equity, step_ms, trades, output.exposed, fees, initial=cash
    )
    fee_rate = float(settings.get("fee_rate", 0.0))
    base_equity, base_trades = buy_and_hold(timeline.time_ms, closes, cash, fee_rate)
    base_exposed = np.zeros(len(timeline), dtype=bool)
    for symbol in closes:
        base_exposed |= timeline.last_index[symbol] >= 0
    baseline = compute_metrics(
        timeline.time_ms, base_equity, step_ms, base_trades, base_exposed,
        sum(t.fees for t in base_trades), initial=cash,
    )
    return BacktestResult(
        time_ms=timeline.time_ms, equity=equity, baseline_equity=base_equity,
        exposed=output.exposed, trades=trades, metrics=metrics, baseline=baseline,
        settings=settings, stats=stats,
    )


async def run_backtest_async(
    data: Sequence[Path],
    strategy: Strategy,
    options: RunOptions | None = None,
) -> BacktestResult:
    """Run one backtest end to end; write the report when ``options.out_dir`` is set.

    Raises:
        DataFileError: a data file is missing or malformed (gaps too, unless allowed).
    """
    opts = options or RunOptions()
    files = load_files(data, allow_gaps=opts.allow_gaps)
    _check_one_quote_currency([f.series.symbol for f in files])
    session = build_session(
        files, broker_settings=opts.broker, risk=opts.risk,
        ledger_path=":memory:", record_tool_calls=opts.record_tool_calls,
    )
    try:
        timeline, output, seconds = await run_session(session, strategy, progress=opts.progress)
        rejected = session.ledger.connection.execute(
            "SELECT COUNT(*) FROM risk_decisions WHERE accepted = 0"
        ).fetchone()[0]
        failures: list[str] = list(getattr(strategy, "failures", []))
        settings = {
            "data": [str(Path(p).name) for p in data],
            "symbols": {s: i for s, i in timeline.intervals.items()},
            "strategy": strategy.name,
            "parameters": strategy.parameters(),
            "cash": float(opts.broker.cash),
            "fee_rate": float(opts.broker.fee_rate),
            "slippage_bps": float(opts.broker.slippage_bps),
            "fill_convention": "market orders placed at a bar's close fill at the next bar's open",
        }
        stats = {
            "seconds": round(seconds, 3),
            "bars_per_second": round(output.steps / seconds, 1) if seconds > 0 else None,
            "risk_rejections": int(rejected),
            "failed_tool_calls": len(failures),
            "first_failures": failures[:5],
        }
        result = collect_result(session, timeline, output, settings=settings, stats=stats)
        if opts.out_dir is not None:
            save_ledger(session, opts.out_dir)
    finally:
        session.ledger.close()
    if opts.out_dir is not None:
        write_report(result, opts.out_dir)
    return result


def run_backtest(
    data: Sequence[Path],
    strategy: Strategy,
    options: RunOptions | None = None,
) -> BacktestResult:
    """Synchronous entry point of ``run_backtest_async`` (one event loop, started here)."""
    return asyncio.run(run_backtest_async(data, strategy, options))
