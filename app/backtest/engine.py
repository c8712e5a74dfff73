"""The replay loop: advance the clock bar by bar, settle the broker, let the strategy act.

Each step moves the ``ReplayClock`` to the next candle close of any symbol (the union of all close
times, so multi-symbol and multi-interval runs share one account and one timeline). Then:

1. ``broker.settle()`` fills what the newly visible candles allow (a market order placed at the
   previous step fills at this candle's open) and commits an equity point;
2. the strategy's ``on_bar`` runs to completion; the clock does not move while it is working, so a
   slow agent can never see a later candle than the one it is deciding on.

The engine itself reads market data only to lay out the timeline; everything the strategy sees
comes through the tools, behind the same cursor.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Protocol

import numpy as np
from tqdm import tqdm

from app.backtest.strategy import BarContext, Strategy
from app.domain.clock import ReplayClock
from app.domain.trading import Fill
from app.market.replay import ReplayMarketData
from app.tools.executor import ToolExecutor
from app.tools.spec import AgentContext


class SettlingBroker(Protocol):
    """What the loop needs of a broker: settle newly visible candles, and report holdings."""

    def settle(self) -> list[Fill]:
        ...

    def position_size(self, symbol: str) -> Decimal:
        ...


@dataclass(frozen=True, slots=True)
class Timeline:
    """When the replay stops and which symbols have a fresh candle at each stop.

    Attributes:
        time_ms: every distinct candle close time of every replayed symbol, ascending.
        closed: per step, the symbols whose candle closes exactly then.
        intervals: the interval each symbol is replayed in (its finest file).
        last_index: per symbol, the index of its newest closed candle at each step (-1 before its
            first), used for buy-and-hold and exposure without asking the market again.
    """

    time_ms: np.ndarray
    closed: tuple[tuple[str, ...], ...]
    intervals: dict[str, str]
    last_index: dict[str, np.ndarray]

    def __len__(self) -> int:
        return int(self.time_ms.size)

    def slice(self, start: int, stop: int) -> Timeline:
        """Steps ``start`` to ``stop - 1`` (a run after its warm-up, or the part a run reached)."""
        return Timeline(
            time_ms=self.time_ms[start:stop], closed=self.closed[start:stop],
            intervals=self.intervals,
            last_index={s: idx[start:stop] for s, idx in self.last_index.items()},
        )


def build_timeline(market: ReplayMarketData) -> Timeline:
    """Lay out every step of a replay from the market's files."""
    intervals = {s: market.finest_interval(s) for s in market.symbols()}
    closes = {
        s: market.loaded(s, i).series.timestamp_ms + market.loaded(s, i).bar_ms
        for s, i in intervals.items()
    }
    time_ms = np.unique(np.concatenate(list(closes.values())))
    last_index = {
        s: np.searchsorted(c, time_ms, side="right").astype(np.int64) - 1
        for s, c in closes.items()
    }
    fresh = {s: np.isin(time_ms, c) for s, c in closes.items()}
    closed = tuple(
        tuple(s for s in intervals if fresh[s][k]) for k in range(time_ms.size)
    )
    return Timeline(time_ms, closed, intervals, last_index)


def missing_candles(market: ReplayMarketData, timeline: Timeline) -> dict[str, int]:
    """Per symbol, how many of its candles the data lacks between the first and last step.

    The timeline holds only closes that exist, so the clock steps over a missing candle; this
    says how many it stepped over. Monthly files have no fixed bar length and count none.
    """
    if len(timeline) == 0:
        return {s: 0 for s in timeline.intervals}
    start, end = int(timeline.time_ms[0]), int(timeline.time_ms[-1])
    missing: dict[str, int] = {}
    for symbol, interval in timeline.intervals.items():
        loaded = market.loaded(symbol, interval)
        closes = loaded.series.timestamp_ms + loaded.bar_ms
        inside = closes[(closes >= start) & (closes <= end)]
        if interval.endswith("M") or inside.size < 2:
            missing[symbol] = 0
            continue
        bars = np.diff(inside) // loaded.bar_ms
        missing[symbol] = int(np.sum(bars[bars > 1] - 1))
    return missing


@dataclass(frozen=True, slots=True)
class ReplayOutput:
    exposed: np.ndarray
    steps: int


@dataclass
class ReplayProgress:
    """How far a replay got: the whole steps done and their exposure, readable after an error."""

    steps: int = 0
    exposed: list[bool] = field(default_factory=list)


async def replay(
    *,
    timeline: Timeline,
    clock: ReplayClock,
    broker: SettlingBroker,
    executor: ToolExecutor,
    strategy: Strategy,
    agent: AgentContext,
    progress: bool = False,
    reached: ReplayProgress | None = None,
) -> ReplayOutput:
    """Run ``strategy`` over every step of ``timeline``; the broker's ledger keeps the results.

    Args:
        reached: kept up to date step by step, so a caller can report what ran when a step
            raises (the exception itself propagates unchanged).
    """
    symbols = tuple(timeline.intervals)
    done = reached if reached is not None else ReplayProgress()
    done.steps = 0
    done.exposed = exposed = [False] * len(timeline)
    bar = _progress_bar(len(timeline), strategy.name) if progress else None
    try:
        for k, now in enumerate(timeline.time_ms.tolist()):
            clock.advance_to(now)
            broker.settle()
            for s in symbols:
                if broker.position_size(s) != 0:
                    exposed[k] = True
                    break
            await strategy.on_bar(
                BarContext(  # positional, in field order: one per bar
                    now, k, timeline.closed[k], symbols, timeline.intervals, agent, executor
                )
            )
            done.steps = k + 1
            if bar is not None and k % 256 == 255:
                bar.update(256)
    finally:
        if bar is not None:
            bar.update(len(timeline) - bar.n)
            bar.close()
    return ReplayOutput(exposed=np.array(exposed, dtype=bool), steps=len(timeline))


def _progress_bar(total: int, name: str) -> tqdm[Any]:

    return tqdm(total=total, desc=f"backtest {name}", unit="bar", file=sys.stderr,
                mininterval=0.5, dynamic_ncols=True)


def last_closes(market: ReplayMarketData, timeline: Timeline) -> dict[str, np.ndarray]:
    """Per symbol, its newest visible close at each step (NaN before its first candle)."""
    out: dict[str, np.ndarray] = {}
    for symbol, interval in timeline.intervals.items():
        close = market.loaded(symbol, interval).series.close
        idx = timeline.last_index[symbol]
        values = np.full(idx.size, np.nan)
        seen = idx >= 0
        values[seen] = close[idx[seen]]
        out[symbol] = values
    return out
