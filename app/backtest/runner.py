"""``run_backtest``: load data, build the session, replay a strategy, compute and write the report.

The result is assembled from what the run left in the ledger (the equity curve the broker committed
at every settle and the fills), so the report shows what the durable record says, not a second,
parallel bookkeeping. A run that stops early on an error still reports the bars it ran, writes the
error's details beside that report and says where both are (``BacktestStopped``).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np

from app.backtest.engine import (
    ReplayOutput,
    ReplayProgress,
    Timeline,
    build_timeline,
    last_closes,
    missing_candles,
    replay,
)
from app.backtest.metrics import compute_metrics
from app.backtest.report import BacktestResult, write_report
from app.backtest.session import BrokerSettings, Session, build_session, load_files
from app.backtest.strategy import Strategy, StrategyError
from app.backtest.trades import buy_and_hold, round_trips
from app.domain.clock import ms_to_iso
from app.domain.errors import KestrelError
from app.exchange.paper import split_symbol
from app.risk.config import RiskConfig
from app.tools.spec import ALL_PERMISSIONS, AgentContext

AGENT_ID = "backtest"
LEDGER_NAME = "backtest.db"
ERROR_FILE = "error.txt"


class BacktestStopped(KestrelError):
    """A run ended early on an error; the report of the bars it ran was kept.

    Attributes:
        done: bars run (and reported); total: bars the run was to cover.
        report_dir: where the partial report and ``error.txt`` are, if the run had an output
            folder.
    """

    def __init__(
        self, reason: str, *, done: int, total: int, last_ms: int | None,
        report_dir: Path | None,
    ) -> None:
        reached = f", up to {ms_to_iso(last_ms)}" if last_ms is not None and done else ""
        where = ""
        if report_dir is not None:
            what = "the report of those bars and" if done else "nothing to report;"
            where = f"; {what} the error's details ({ERROR_FILE}) are in {report_dir}"
        super().__init__(f"{reason}. It ran {done:,} of {total:,} bars{reached}{where}")
        self.reason = reason
        self.done = done
        self.total = total
        self.report_dir = report_dir


def stop_reason(error: BaseException) -> str:
    """What stopped a run, in one line: a strategy's own words, or the unexpected error."""
    if isinstance(error, StrategyError):
        return f"the strategy stopped: {error}"
    return f"the run stopped on an unexpected error ({type(error).__name__}: {error})"


def write_error_details(out_dir: Path | None, error: BaseException) -> Path | None:
    """Keep the traceback of the error that stopped a run in ``out_dir/error.txt``."""
    if out_dir is None:
        return None
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / ERROR_FILE).write_text(
        "".join(traceback.format_exception(error)), encoding="utf-8"
    )
    return out_dir


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
    # on an error part-way: write the report of the bars that ran and ``error.txt`` to
    # ``out_dir`` and raise ``BacktestStopped`` saying where (off: the error propagates as raised)
    report_partial: bool = False


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
    reached: ReplayProgress | None = None,
) -> tuple[Timeline, ReplayOutput, float]:
    """Replay ``strategy`` over all of ``session``'s data; return the timeline, output, seconds.

    ``reached`` says how far the replay got if it raises.
    """
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
        reached=reached,
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
    loaded = {s: session.market.loaded(s, i) for s, i in timeline.intervals.items()}
    bar_ms = {s: f.bar_ms for s, f in loaded.items()}
    closes = last_closes(session.market, timeline)
    fills = session.ledger.fills()
    end_ms = int(timeline.time_ms[-1])
    trades = round_trips(
        fills, bar_ms, {s: float(c[-1]) for s, c in closes.items()}, end_ms,
        close_ms={s: f.series.timestamp_ms + f.bar_ms for s, f in loaded.items()},
    )
    stats = {**stats, "missing_candles": missing_candles(session.market, timeline)}
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
        BacktestStopped: with ``options.report_partial``, a run that stopped part-way on an
            error, after writing the report of the bars it ran.
    """
    opts = options or RunOptions()
    files = load_files(data, allow_gaps=opts.allow_gaps)
    _check_one_quote_currency([f.series.symbol for f in files])
    session = build_session(
        files, broker_settings=opts.broker, risk=opts.risk,
        ledger_path=":memory:", record_tool_calls=opts.record_tool_calls,
    )
    try:
        reached = ReplayProgress()
        try:
            timeline, output, seconds = await run_session(
                session, strategy, progress=opts.progress, reached=reached
            )
        except asyncio.CancelledError:  # interrupted (Ctrl-C): keep what ran, stop anyway
            if opts.report_partial:
                _report_partial(session, strategy, data, opts, reached, "interrupted")
            raise
        except Exception as exc:
            if not opts.report_partial:
                raise
            done, total, last = _report_partial(
                session, strategy, data, opts, reached, stop_reason(exc)
            )
            raise BacktestStopped(
                stop_reason(exc), done=done, total=total, last_ms=last,
                report_dir=write_error_details(opts.out_dir, exc),
            ) from exc
        rejected = session.ledger.connection.execute(
            "SELECT COUNT(*) FROM risk_decisions WHERE accepted = 0"
        ).fetchone()[0]
        failures: list[str] = list(getattr(strategy, "failures", []))
        settings = _settings(data, strategy, opts, timeline)
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


def _settings(data: Sequence[Path], strategy: Strategy, opts: RunOptions,
              timeline: Timeline) -> dict[str, Any]:
    return {
        "data": [str(Path(p).name) for p in data],
        "symbols": {s: i for s, i in timeline.intervals.items()},
        "strategy": strategy.name,
        "parameters": strategy.parameters(),
        "cash": float(opts.broker.cash),
        "fee_rate": float(opts.broker.fee_rate),
        "slippage_bps": float(opts.broker.slippage_bps),
        "fill_convention": "market orders placed at a bar's close fill at the next bar's open",
    }


def _report_partial(
    session: Session, strategy: Strategy, data: Sequence[Path], opts: RunOptions,
    reached: ReplayProgress, reason: str,
) -> tuple[int, int, int | None]:
    """Write the report of the steps a stopped replay finished (if any and if there is an output
    folder); return the steps done, the steps planned and the time of the last one done."""
    full = build_timeline(session.market)
    done = reached.steps
    ran = full.slice(0, done)
    if done > 0 and opts.out_dir is not None:
        stats = {"stopped_early": reason, "bars_run": done, "bars_planned": len(full)}
        exposed = np.array(reached.exposed[:done], dtype=bool)
        result = collect_result(
            session, ran, ReplayOutput(exposed, done),
            settings=_settings(data, strategy, opts, ran), stats=stats,
        )
        save_ledger(session, opts.out_dir)
        write_report(result, opts.out_dir)
    return done, len(full), int(ran.time_ms[-1]) if done else None


def run_backtest(
    data: Sequence[Path],
    strategy: Strategy,
    options: RunOptions | None = None,
) -> BacktestResult:
    """Synchronous entry point of ``run_backtest_async`` (one event loop, started here)."""
    return asyncio.run(run_backtest_async(data, strategy, options))
