"""The replay: its driver, its timeline, and the one loop both backtests step through.

``ReplayDriver`` moves a replay's clock, in a fixed order: the clock moves, the paper broker
settles the candles that closed (its fills are announced as each commits, so each reaches the
agent that placed the order), the time-dependent services run (due jobs fire), and only then the
world is told (``ClockAdvanced``). In paced replay (the desk, ``kestrel run``) simulated time
follows the wall clock at a chosen speed, like a live market.

A backtest steps the same driver over a ``Timeline``: every distinct candle close of every
replayed symbol (the union, so multi-symbol and multi-interval runs share one account and one
clock). ``run_replay`` is that loop, for a strategy and for agents alike: at each step the driver
advances (fills, jobs), then the step's action runs to completion (a strategy's ``on_bar``; for
agents, waiting until every inbox is idle). The clock does not move while the action works, so
nothing can see a later candle than the one it is deciding on.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt

from app.backtest.metrics import Flags
from app.domain.clock import ReplayClock
from app.domain.trading import Fill
from app.events import ClockAdvanced, EventBus
from app.market.replay import ReplayMarketData
from app.market.series import Floats, Times

if TYPE_CHECKING:
    from app.runtime.venue import Venue


class SettlingBroker(Protocol):
    """What a replay needs of its broker: settle newly visible candles, and report holdings."""

    def settle(self) -> list[Fill]:
        ...

    def position_size(self, symbol: str) -> Decimal:
        ...


class ReplayDriver:
    """Moves a ``ReplayClock`` over history (see the module docstring for the order of things).

    Args:
        end_ms: where the data ends: paced replay stops there.
        bus: where ``ClockAdvanced`` goes; None tells nobody (a strategy backtest).
    """

    def __init__(
        self,
        clock: ReplayClock,
        broker: SettlingBroker,
        *,
        end_ms: int | None = None,
        bus: EventBus | None = None,
    ) -> None:
        self.clock = clock
        self.broker = broker
        self.end_ms = end_ms
        self.bus = bus
        self.speed = 60.0
        self.paused = False
        self.last_error: str | None = None  # a replay reads no market: nothing can fail
        self.held: str | None = None  # nor be held by an exchange
        self._services: list[Callable[[int], object]] = []

    def on_advance(self, service: Callable[[int], object]) -> None:
        self._services.append(service)

    def advance_to(self, now_ms: int) -> int:
        """Move to ``now_ms`` (never back); return how many fills the move produced."""
        if now_ms <= self.clock.now_ms():
            return 0
        self.clock.advance_to(now_ms)
        fills = self.broker.settle()
        for service in self._services:
            service(now_ms)
        if self.bus is not None:
            self.bus.publish_nowait(ClockAdvanced(now_ms, len(fills)))
        return len(fills)

    def set_speed(self, speed: float) -> None:
        if speed <= 0:
            raise ValueError(f"speed must be positive, got {speed}")
        self.speed = speed

    async def run_paced(
        self, end_ms: int | None = None, *, tick_s: float = 0.1, max_step_ms: int | None = None,
        settle: Callable[[], Awaitable[object]] | None = None,
    ) -> None:
        """Let simulated time flow at ``speed`` x the wall clock until ``end_ms`` (default: the
        end of the data).

        ``max_step_ms`` caps one move so a slow tick never skips a scheduled job's bar. Without
        ``settle`` a tick makes one capped move and the rest of its time is dropped. With it, a
        tick that owes more than the cap makes capped moves until it has caught up, awaiting
        ``settle`` (the agents being idle) after each: at a speed the agents cannot follow, the
        replay runs as fast as they decide, every bar seen, as a backtest steps.
        """
        end = self.end_ms if end_ms is None else end_ms
        if end is None:
            raise ValueError("a replay needs an end to run to")
        last = time.monotonic()
        while self.clock.now_ms() < end:
            await asyncio.sleep(tick_s)
            now = time.monotonic()
            elapsed, last = now - last, now
            if self.paused:
                continue
            jump = int(elapsed * 1000 * self.speed)
            if max_step_ms is None or jump <= max_step_ms:
                self.advance_to(min(end, self.clock.now_ms() + jump))
                continue
            if settle is None:
                self.advance_to(min(end, self.clock.now_ms() + max_step_ms))
                continue
            target = min(end, self.clock.now_ms() + jump)
            while self.clock.now_ms() < target and not self.paused:
                self.advance_to(min(target, self.clock.now_ms() + max_step_ms))
                await settle()

    def step_once(self, step_ms: int) -> int:
        """Advance one step by hand (the window's "step" button while paused)."""
        return self.advance_to(self.clock.now_ms() + step_ms)


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

    time_ms: Times
    closed: tuple[tuple[str, ...], ...]
    intervals: dict[str, str]
    last_index: dict[str, npt.NDArray[np.intp]]

    def __len__(self) -> int:
        return int(self.time_ms.size)

    def slice(self, start: int, stop: int) -> Timeline:
        """Steps ``start`` to ``stop - 1`` (a run after its warm-up)."""
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


def last_closes(market: ReplayMarketData, timeline: Timeline) -> dict[str, Floats]:
    """Per symbol, its newest visible close at each step (NaN before its first candle)."""
    out: dict[str, Floats] = {}
    for symbol, interval in timeline.intervals.items():
        close = market.loaded(symbol, interval).series.close
        idx = timeline.last_index[symbol]
        values = np.full(idx.size, np.nan)
        seen = idx >= 0
        values[seen] = close[idx[seen]]
        out[symbol] = values
    return out


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
    """What a replay leaves beside the ledger: per step, whether a position was held during the
    bar that closed then, and how many steps ran."""

    exposed: Flags
    steps: int


@dataclass
class ReplayProgress:
    """How far a replay got: the whole steps done and their exposure, readable after an error."""

    steps: int = 0
    exposed: list[bool] = field(default_factory=list)


StepAction = Callable[[int, int], Awaitable[None]]


async def run_replay(
    timeline: Timeline,
    venue: Venue,
    act: StepAction,
    *,
    cancelled: Callable[[], bool] | None = None,
    progress: Callable[[int, int], None] | None = None,
    reached: ReplayProgress | None = None,
) -> ReplayOutput:
    """Step ``venue``'s driver through ``timeline``, running ``act(step, now_ms)`` after each
    advance.

    Args:
        cancelled: asked before each step; True stops the run there.
        progress: told (steps done, steps in all) after each step.
        reached: kept up to date step by step, so a caller can report what ran when a step
            raises (the exception itself propagates unchanged).
    """
    driver, broker = venue.driver, venue.real_broker  # real symbols: the timeline's
    symbols = tuple(timeline.intervals)
    total = len(timeline)
    done = reached if reached is not None else ReplayProgress()
    done.steps = 0
    done.exposed = exposed = [False] * total
    steps = 0
    for k, now in enumerate(timeline.time_ms.tolist()):
        if cancelled is not None and cancelled():
            break
        driver.advance_to(now)
        for s in symbols:
            if broker.position_size(s) != 0:
                exposed[k] = True
                break
        await act(k, now)
        steps = done.steps = k + 1
        if progress is not None:
            progress(steps, total)
    return ReplayOutput(exposed=np.array(exposed, dtype=bool), steps=steps)
