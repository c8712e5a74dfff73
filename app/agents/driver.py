"""The market driver: moves the replay clock and lets everything that depends on time react.

Order matters and is fixed: the clock moves, the paper broker settles the candles that closed (fills
happen), each fill is routed to the agent that placed the order, due jobs fire, and only then the
world is told. In a backtest the driver waits until every running agent's inbox is idle before the
next bar, so a run is deterministic and no agent ever sees a bar before it has finished with the
previous one. In paced replay (the demo, ``kestrel run``) simulated time follows the wall clock at a
chosen speed, like a live market.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from app.agents.fills import FillRouter
from app.domain.clock import ReplayClock
from app.events import ClockAdvanced, EventBus


class MarketDriver:
    def __init__(
        self,
        clock: ReplayClock,
        broker: Any,
        scheduler: Any,
        fills: FillRouter,
        manager: Any,
        bus: EventBus | None = None,
    ) -> None:
        self.clock = clock
        self.broker = broker
        self.scheduler = scheduler
        self.fills = fills
        self.manager = manager
        self.bus = bus
        self.speed = 60.0
        self.paused = False

    def advance_to(self, now_ms: int) -> int:
        """Move to ``now_ms`` (never back); return how many fills the move produced."""
        if now_ms <= self.clock.now_ms():
            return 0
        self.clock.advance_to(now_ms)
        fills = self.broker.settle()
        self.fills.route()
        self.scheduler.fire_due(now_ms)
        if self.bus is not None:
            self.bus.publish_nowait(ClockAdvanced(now_ms, len(fills)))
        return len(fills)

    async def run_steps(
        self,
        times_ms: Iterable[int],
        *,
        on_step: Callable[[int, int], Awaitable[None] | None] | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> int:
        """Backtest: move to each time in turn, waiting for idle agents before the next one.

        The times are the replay's timeline (every candle close that exists), so a candle
        missing from the data is stepped over rather than stepped onto. ``on_step(k, t)`` runs
        after the agents have finished with step ``k``; returns how many steps were taken.
        """
        steps = 0
        for k, t in enumerate(times_ms):
            if cancelled is not None and cancelled():
                break
            self.advance_to(t)
            await self.manager.wait_idle()
            if on_step is not None:
                outcome = on_step(k, t)
                if outcome is not None:
                    await outcome
            steps += 1
        return steps

    def set_speed(self, speed: float) -> None:
        if speed <= 0:
            raise ValueError(f"speed must be positive, got {speed}")
        self.speed = speed

    async def run_paced(
        self, end_ms: int, *, tick_s: float = 0.1, max_step_ms: int | None = None
    ) -> None:
        """Let simulated time flow at ``speed`` x the wall clock until ``end_ms``.

        ``max_step_ms`` caps one tick's jump so a slow tick never skips a scheduled job's bar.
        """
        last = time.monotonic()
        while self.clock.now_ms() < end_ms:
            await asyncio.sleep(tick_s)
            now = time.monotonic()
            elapsed, last = now - last, now
            if self.paused:
                continue
            jump = int(elapsed * 1000 * self.speed)
            if max_step_ms is not None:
                jump = min(jump, max_step_ms)
            if jump > 0:
                self.advance_to(min(end_ms, self.clock.now_ms() + jump))

    def step_once(self, step_ms: int) -> int:
        """Advance one step by hand (the GUI's "step" button while paused)."""
        return self.advance_to(self.clock.now_ms() + step_ms)
