"""Running a backtest for the window: data file facts, the date range, progress and cancel.

Why a worker thread with its own event loop: a backtest is CPU work (thousands of tool calls per
second) that only yields between bars, so run on the window's loop it would freeze the window.
Both kinds of run (the ``sma_cross`` strategy and agent templates) therefore run in a thread
(``asyncio.run`` there), write their progress into a ``Progress`` the window polls on a timer,
and look at a ``threading.Event`` to stop early. The date range is applied by writing the chosen
rows of each data file, byte for byte, to the run's folder, so the engine sees exactly the
candles the person picked (plus the warm-up the agents need before the first decision).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from app.backtest.report import BacktestResult
from app.backtest.strategy import BarContext
from app.config import LLMSettings
from app.domain.clock import ms_to_iso
from app.domain.errors import DataFileError
from app.market.csv_loader import load_csv


class BacktestCancelled(Exception):  # noqa: N818 - a person's decision, not an error
    """The person pressed Cancel; the run stopped at the bar it had reached."""


@dataclass(frozen=True, slots=True)
class DataInfo:
    """What the form needs to know about one data file."""

    path: Path
    symbol: str
    interval: str
    first_ms: int
    last_ms: int
    bars: int
    bar_ms: int
    gaps: int

    @property
    def label(self) -> str:
        first, last = ms_to_iso(self.first_ms)[:10], ms_to_iso(self.last_ms)[:10]
        return f"{self.symbol} {self.interval} · {self.bars:,} bars · {first} → {last}"


def inspect_file(path: Path) -> DataInfo:
    """Load and validate one file (blocking: call from a thread).

    Raises:
        DataFileError: naming the file, row and field.
    """
    loaded = load_csv(Path(path), allow_gaps=True)
    ts = loaded.series.timestamp_ms
    if ts.size < 2:
        raise DataFileError(f"{path}: only {ts.size} candle(s); a backtest needs at least two")
    return DataInfo(Path(path), loaded.series.symbol, loaded.series.interval, int(ts[0]),
                    int(ts[-1]), int(ts.size), loaded.bar_ms, loaded.gaps)


def trim_file(info: DataInfo, start_ms: int, end_ms: int, out_dir: Path,
              warmup_bars: int = 0) -> tuple[Path, int]:
    """Copy the header and the rows from ``warmup_bars`` before ``start_ms`` to ``end_ms``.

    Returns the new file (same name, so symbol and interval still come from it) and the number
    of candles in the chosen range (without the warm-up).

    Raises:
        DataFileError: nothing of the file lies in the range.
    """
    lines = info.path.read_text(encoding="utf-8").splitlines(keepends=True)
    header, rows = lines[0], [r for r in lines[1:] if r.strip()]
    stamps = [int(r.split(",", 1)[0]) for r in rows]
    first = next((i for i, t in enumerate(stamps) if t >= start_ms), len(stamps))
    last = max((i for i, t in enumerate(stamps) if t <= end_ms), default=-1)
    if last < first:
        raise DataFileError(
            f"{info.path.name}: no candles between the chosen start and end dates")
    begin = max(0, first - warmup_bars)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / info.path.name
    target.write_text(header + "".join(rows[begin:last + 1]), encoding="utf-8")
    return target, last - first + 1


class Progress:
    """Bars done out of a total, written by the worker thread and read by the window."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.done = 0
        self.total = 0
        self.started = time.monotonic()
        self.cancel = threading.Event()

    def set(self, done: int, total: int) -> None:
        with self._lock:
            self.done, self.total = done, total

    def update(self, done: int, total: int) -> None:
        """``set``, then stop the run here if the person cancelled."""
        self.set(done, total)
        if self.cancel.is_set():
            raise BacktestCancelled(f"cancelled after {done:,} of {total:,} bars")

    def snapshot(self) -> tuple[int, int, float | None]:
        """(done, total, seconds left or None while unknown)."""
        with self._lock:
            done, total = self.done, self.total
        elapsed = time.monotonic() - self.started
        if done <= 0 or total <= 0:
            return done, total, None
        return done, total, elapsed / done * max(total - done, 0)


class TrackedStrategy:
    """Wraps a strategy to report each bar to ``Progress`` (and stop there when cancelled)."""

    def __init__(self, inner: Any, progress: Progress, total: int) -> None:
        self.inner = inner
        self.progress = progress
        self.total = total
        self.name = inner.name

    @property
    def failures(self) -> list[str]:
        return list(getattr(self.inner, "failures", []))

    def parameters(self) -> dict[str, object]:
        return dict(self.inner.parameters())

    async def on_bar(self, ctx: BarContext) -> None:
        self.progress.update(ctx.step, self.total)
        await self.inner.on_bar(ctx)


@dataclass
class SmaRequest:
    files: Sequence[DataInfo]
    start_ms: int
    end_ms: int
    cash: Decimal
    fast: int
    slow: int
    out_dir: Path


@dataclass
class AgentRequest:
    files: Sequence[DataInfo]
    start_ms: int
    end_ms: int
    cash: Decimal
    templates: Sequence[str]
    out_dir: Path
    warmup_bars: int = 60
    llm: LLMSettings = field(default_factory=LLMSettings)  # the agents are created under these
    blind: bool = False  # the agents see a disguised market (app.runtime.blind)


@dataclass
class RunOutcome:
    result: BacktestResult
    title: str
    note: str = ""


def _run_in_new_loop(coro: Any) -> Any:
    # a plain asyncio loop for this worker thread, whatever loop the window runs on
    return asyncio.run(coro, loop_factory=asyncio.SelectorEventLoop)


def run_sma(request: SmaRequest, progress: Progress) -> RunOutcome:
    """The ``sma_cross`` strategy over the chosen range (blocking: call from a thread)."""
    from app.backtest.sma_cross import SmaCross
    from app.config import PaperSettings
    from app.runtime.output_folder import prepare_output_folder
    from app.runtime.strategy_backtest import OUTPUT, RunOptions, run_backtest_async

    if request.fast >= request.slow:
        raise ValueError(f"the fast SMA ({request.fast}) must be shorter than the slow SMA "
                         f"({request.slow})")
    prepare_output_folder(request.out_dir, OUTPUT)  # made the run's before its data goes in
    data_dir = request.out_dir / "data"
    trimmed = [trim_file(f, request.start_ms, request.end_ms, data_dir) for f in request.files]
    bars = max(count for _path, count in trimmed)
    if bars <= request.slow:
        raise ValueError(f"the range holds {bars} bars; the slow SMA needs more than "
                         f"{request.slow} to give a single signal")
    strategy = TrackedStrategy(SmaCross(fast=request.fast, slow=request.slow), progress, bars)
    options = RunOptions(paper=PaperSettings(initial_cash=request.cash), out_dir=request.out_dir,
                         allow_gaps=True)
    result = _run_in_new_loop(run_backtest_async([p for p, _ in trimmed], strategy, options))
    progress.update(bars, bars)
    return RunOutcome(result, f"sma_cross ({request.fast}/{request.slow})",
                      "rule-based strategy: no language model involved")


def run_agents(request: AgentRequest, progress: Progress) -> RunOutcome:
    """Agent templates bar by bar over the chosen range (blocking: call from a thread)."""
    from app.runtime.agent_backtest import OUTPUT, AgentBacktestOptions, run_agent_backtest
    from app.runtime.output_folder import prepare_output_folder

    prepare_output_folder(request.out_dir, OUTPUT)  # made the run's before its data goes in
    data_dir = request.out_dir / "data"
    trimmed = [trim_file(f, request.start_ms, request.end_ms, data_dir, request.warmup_bars)
               for f in request.files]
    options = AgentBacktestOptions(
        templates=list(request.templates), cash=request.cash, warmup_bars=request.warmup_bars,
        progress=progress.set, cancelled=progress.cancel.is_set,
        llm=request.llm, allow_gaps=True, blind=request.blind,
    )
    stopped = "cancelled after {done:,} of {total:,} bars"
    try:
        outcome = _run_in_new_loop(
            run_agent_backtest([p for p, _ in trimmed], options, request.out_dir))
    except RuntimeError:
        # a run stopped early has no equity for the bars it never reached: that is the cancel
        if progress.cancel.is_set():
            raise BacktestCancelled(
                stopped.format(done=progress.done, total=progress.total)) from None
        raise
    if progress.cancel.is_set():
        raise BacktestCancelled(stopped.format(done=progress.done, total=progress.total))
    note = (f"{outcome.llm_calls:,} LLM calls, {outcome.tool_calls:,} tool calls, "
            f"cost ${outcome.cost}")
    title = ", ".join(request.templates) + (" (blind)" if request.blind else "")
    return RunOutcome(outcome.result, title, note)
