"""``run_backtest``: load data, build the world, replay a strategy, compute and write the report.

The world is ``build_world``'s, without a workspace: the replay venue over the loaded files, the
paper broker's ledger in memory, the full tool path (XML parse -> executor -> Risk Guard ->
PaperBroker -> SQLite ledger), nothing mocked. The strategy steps through ``run_replay``, the loop
the agent backtest steps through too. The result is assembled from what the run left in the
ledger (the equity curve the broker committed at every settle and the fills), so the report shows
what the durable record says, not a second, parallel bookkeeping. A run that stops early on an
error still reports the bars it ran, writes the error's details beside that report and says where
both are (``BacktestStopped``).
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
import time
import traceback
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np

from app.backtest.metrics import compute_metrics
from app.backtest.report import REPORT_FILES, BacktestResult, write_report
from app.backtest.strategy import BarContext, Strategy, StrategyError
from app.backtest.trades import buy_and_hold, round_trips
from app.config import PaperSettings, Settings
from app.config.risk import RiskConfig, all_in_backtest_config
from app.domain.clock import ms_to_iso
from app.domain.errors import KestrelError
from app.domain.market import split_symbol
from app.domain.trading import Mode
from app.market.csv_loader import LoadedFile, load_csv
from app.market.replay import ReplayMarketData
from app.runtime.output_folder import OutputKind, prepare_output_folder
from app.runtime.progress import progress_bar
from app.runtime.replay import (
    ReplayOutput,
    ReplayProgress,
    Timeline,
    build_timeline,
    last_closes,
    missing_candles,
    run_replay,
)
from app.runtime.venue import VenueSpec
from app.runtime.world import World, WorldOptions, build_world
from app.tools.spec import ALL_PERMISSIONS, AgentContext

AGENT_ID = "backtest"
LEDGER_NAME = "backtest.db"
ERROR_FILE = "error.txt"
# what a run writes into its output folder: only these are replaced when it is used again
OUTPUT = OutputKind("kestrel backtest", (
    *REPORT_FILES.values(), LEDGER_NAME, f"{LEDGER_NAME}-wal", f"{LEDGER_NAME}-shm", ERROR_FILE,
))


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
            A folder is created, or reused only when empty or made by a backtest before
            (``app.runtime.output_folder``).
        record_tool_calls: keep every tool call in the ledger's audit table (off: the report
            cannot count the refused orders, and says so).
    """

    paper: PaperSettings = field(default_factory=PaperSettings)
    risk: RiskConfig | None = None
    out_dir: Path | None = None
    allow_gaps: bool = False
    progress: bool = False
    record_tool_calls: bool = True
    # on an error part-way: write the report of the bars that ran and ``error.txt`` to
    # ``out_dir`` and raise ``BacktestStopped`` saying where (off: the error propagates as raised)
    report_partial: bool = False


def load_files(paths: Sequence[Path], *, allow_gaps: bool = False) -> list[LoadedFile]:
    """Load and validate every data file; a gap is an error unless ``allow_gaps``.

    Raises:
        DataFileError: naming the file, row and field.
    """
    return [load_csv(Path(p), allow_gaps=allow_gaps) for p in paths]


def open_backtest(
    files: Sequence[LoadedFile],
    *,
    paper: PaperSettings | None = None,
    risk: RiskConfig | None = None,
    record_tool_calls: bool = True,
    memory_root: Path | None = None,
) -> World:
    """The world of one strategy backtest over loaded files, its ledger in memory.

    Args:
        paper: cash, fee and slippage (default: the paper account's defaults).
        risk: the Risk Guard's limits (default: ``all_in_backtest_config()``).
        record_tool_calls: keep every call in the ledger's audit table (else the last 10,000 in
            memory).
        memory_root: give the strategy the memory tools, kept there (``kestrel demo``'s journal).
    """
    settings = Settings(paper=paper or PaperSettings(), risk=risk or all_in_backtest_config())
    return build_world(None, VenueSpec(loaded=tuple(files), at_ms=0), WorldOptions(
        mode=Mode.BACKTEST, settings=settings, agents=False, memory=memory_root is not None,
        memory_root=memory_root, announce=False, record_tool_calls=record_tool_calls,
    ))


def history(world: World) -> ReplayMarketData:
    """The replayed files of a backtest's world (its venue is a replay)."""
    market = world.venue.history
    if market is None:
        raise ValueError(f"a backtest replays history; this world runs on {world.venue.label}")
    return market


def save_ledger(world: World, out_dir: Path) -> Path:
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
        world.ledger.connection.backup(target)
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


async def run_strategy(
    world: World,
    strategy: Strategy,
    *,
    progress: bool = False,
    agent_id: str = AGENT_ID,
    reached: ReplayProgress | None = None,
) -> tuple[Timeline, ReplayOutput, float]:
    """Replay ``strategy`` over all of ``world``'s data; return the timeline, output, seconds.

    ``reached`` says how far the replay got if it raises.
    """
    timeline = build_timeline(history(world))
    symbols = tuple(timeline.intervals)
    agent = AgentContext(
        agent_id=agent_id,
        permissions=ALL_PERMISSIONS,
        role="backtest",
        watched_symbols=symbols,
        interval=next(iter(timeline.intervals.values())),
    )
    closed, intervals, executor = timeline.closed, timeline.intervals, world.executor
    on_bar = strategy.on_bar

    async def act(k: int, now: int) -> None:
        # positional, in field order: one per bar
        await on_bar(BarContext(now, k, closed[k], symbols, intervals, agent, executor))

    bar = progress_bar(len(timeline), strategy.name) if progress else None

    def advanced(done: int, total: int) -> None:
        if bar is not None and (done % 256 == 0 or done == total):
            bar.update(done - bar.n)

    started = time.perf_counter()
    try:
        output = await run_replay(timeline, world.venue, act, reached=reached,
                                  progress=advanced if bar is not None else None)
    finally:
        if bar is not None:
            bar.close()
    return timeline, output, time.perf_counter() - started


# the calls that place an order (an entry, a position's exits, a close)
ORDER_TOOLS = ("create_order", "set_position_tp_sl_orders", "close_position")
_RULE = re.compile(r"<rule>([^<]*)</rule>")


def refused_orders(world: World) -> dict[str, int]:
    """The run's refused order calls, by error code ("INVALID_ORDER") or by the Risk Guard's
    rule ("risk guard: max_position_weight"), from the ledger's audit of tool calls."""
    rows = world.ledger.connection.execute(
        "SELECT status, error_code, result_xml FROM tool_calls "
        "WHERE status != 'success' AND tool_name IN (?, ?, ?)", ORDER_TOOLS,
    ).fetchall()
    refused: Counter[str] = Counter()
    for status, code, xml in rows:
        if status == "rejected":
            rule = _RULE.search(xml)
            refused[f"risk guard: {rule.group(1) if rule else 'unknown rule'}"] += 1
        else:
            refused[code or status] += 1
    return dict(sorted(refused.items()))


def collect_result(
    world: World,
    timeline: Timeline,
    output: ReplayOutput,
    *,
    settings: dict[str, Any],
    stats: dict[str, Any],
    audited: bool = True,
) -> BacktestResult:
    """Turn the ledger's record of a finished run into metrics, trades and the baseline.

    ``audited``: the run kept its tool calls in the ledger, so its refused orders can be
    counted (otherwise the report says they were not)."""
    market = history(world)
    curve = {t: float(e) for t, e, _cash in world.ledger.equity_curve()}
    account = world.venue.real_broker  # the ledger's terms
    cash = float(world.settings.paper.initial_cash)  # a backtest's ledger starts fresh
    equity = np.array([curve.get(int(t), np.nan) for t in timeline.time_ms])
    if np.isnan(equity).any():
        missing = int(np.isnan(equity).sum())
        raise RuntimeError(f"the ledger has no equity point for {missing} steps of the run")
    loaded = {s: market.loaded(s, i) for s, i in timeline.intervals.items()}
    bar_ms = {s: f.bar_ms for s, f in loaded.items()}
    closes = last_closes(market, timeline)
    fills = world.ledger.fills()
    end_ms = int(timeline.time_ms[-1])
    trades = round_trips(
        fills, bar_ms, {s: float(c[-1]) for s, c in closes.items()}, end_ms,
        close_ms={s: f.series.timestamp_ms + f.bar_ms for s, f in loaded.items()},
    )
    stats = {**stats, "missing_candles": missing_candles(market, timeline)}
    fees = float(sum((f.fee for f in fills if f.fee_currency == account.quote_currency),
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
        settings=settings, stats=stats, refused=refused_orders(world) if audited else None,
    )


async def run_backtest_async(
    data: Sequence[Path],
    strategy: Strategy,
    options: RunOptions | None = None,
) -> BacktestResult:
    """Run one backtest end to end; write the report when ``options.out_dir`` is set.

    Raises:
        DataFileError: a data file is missing or malformed (gaps too, unless allowed).
        OutputFolderRefused: ``options.out_dir`` is not this command's to write (a workspace,
            another command's output, other files: ``app.runtime.output_folder``).
        BacktestStopped: with ``options.report_partial``, a run that stopped part-way on an
            error, after writing the report of the bars it ran.
    """
    opts = options or RunOptions()
    files = load_files(data, allow_gaps=opts.allow_gaps)
    _check_one_quote_currency([f.series.symbol for f in files])
    if opts.out_dir is not None:
        prepare_output_folder(opts.out_dir, OUTPUT)
    world = open_backtest(files, paper=opts.paper, risk=opts.risk,
                          record_tool_calls=opts.record_tool_calls)
    try:
        reached = ReplayProgress()
        try:
            timeline, output, seconds = await run_strategy(
                world, strategy, progress=opts.progress, reached=reached
            )
        except asyncio.CancelledError:  # interrupted (Ctrl-C): keep what ran, stop anyway
            if opts.report_partial:
                _report_partial(world, strategy, data, opts, reached, "interrupted")
            raise
        except Exception as exc:
            if not opts.report_partial:
                raise
            done, total, last = _report_partial(
                world, strategy, data, opts, reached, stop_reason(exc)
            )
            raise BacktestStopped(
                stop_reason(exc), done=done, total=total, last_ms=last,
                report_dir=write_error_details(opts.out_dir, exc),
            ) from exc
        rejected = world.ledger.connection.execute(
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
        result = collect_result(world, timeline, output, settings=settings, stats=stats,
                                audited=opts.record_tool_calls)
        if opts.out_dir is not None:
            save_ledger(world, opts.out_dir)
    finally:
        world.close()
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
        "cash": float(opts.paper.initial_cash),
        "fee_rate": float(opts.paper.fee_rate),
        "slippage_bps": float(opts.paper.slippage_bps),
        "fill_convention": "market orders placed at a bar's close fill at the next bar's open",
    }


def _report_partial(
    world: World, strategy: Strategy, data: Sequence[Path], opts: RunOptions,
    reached: ReplayProgress, reason: str,
) -> tuple[int, int, int | None]:
    """Write the report of the steps a stopped replay finished (if any and if there is an output
    folder); return the steps done, the steps planned and the time of the last one done."""
    full = build_timeline(history(world))
    done = reached.steps
    ran = full.slice(0, done)
    if done > 0 and opts.out_dir is not None:
        stats = {"stopped_early": reason, "bars_run": done, "bars_planned": len(full)}
        exposed = np.array(reached.exposed[:done], dtype=bool)
        result = collect_result(
            world, ran, ReplayOutput(exposed, done),
            settings=_settings(data, strategy, opts, ran), stats=stats,
            audited=opts.record_tool_calls,
        )
        save_ledger(world, opts.out_dir)
        write_report(result, opts.out_dir)
    return done, len(full), int(ran.time_ms[-1]) if done else None


def run_backtest(
    data: Sequence[Path],
    strategy: Strategy,
    options: RunOptions | None = None,
) -> BacktestResult:
    """Synchronous entry point of ``run_backtest_async`` (one event loop, started here)."""
    return asyncio.run(run_backtest_async(data, strategy, options))
