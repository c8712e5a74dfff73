"""The driver of a live venue: the runtime moves with the wall clock and the market's updates.

A replay's driver moves its cursor; a live market's time moves by itself, so ``LiveDriver`` only
lets what depends on time react to it, in the replay's order: read the market (``refresh``: the
paper broker's quotes, a live broker's order states), settle the broker on what was read (fills
are announced as each commits), run the time-dependent services (due jobs fire), then tell the
world (``ClockAdvanced``). It does so every ``tick_s`` seconds, and at once when an order is
placed (an ``OrderPlaced`` on the bus wakes it), so a market order fills within one round trip.

A failed read (the network, the exchange) does not stop the driver: it is logged once, kept in
``last_error`` for the window to show, and the next tick tries again; settling and jobs go on
with the last quotes read (an order only ever fills against a quote read after it was placed).

While the exchange holds requests (a ban or a rate limit, ``hold`` says until when), the driver
does not read at all: asking during a ban only lengthens it. ``held`` says so for the window, and
settling and jobs go on with the last reads until the pause ends.

Typed against the ports and two callables only, so the paper-on-live-quotes venue and the live
venue share it: the venue builder passes what reads and what settles.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence

from app.domain.clock import Clock
from app.events import ClockAdvanced, EventBus, OrderPlaced

logger = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]
DEFAULT_TICK_S = 1.0


class LiveDriver:
    """Implements ``Driver`` for a market that runs on the wall clock.

    Args:
        clock: the venue's clock (a ``LiveClock``; tests give one on a fake exchange's time).
        settle: fills what the latest reads allow; returns the fills (a broker's ``settle``).
        refresh: reads the market before each settle; None reads nothing.
        bus: where ``ClockAdvanced`` goes, and whose ``OrderPlaced`` wakes the driver.
        tick_s: seconds between two rounds when nothing wakes the driver.
        sleep: waits between rounds (tests inject one that moves a fake clock instead).
        hold: why the market may not be read now, in words (the exchange's pause: "binance:
            requests paused until 12:34:56 UTC (ban, HTTP 418)"), None when it may; None: never
            held.
    """

    def __init__(
        self,
        clock: Clock,
        settle: Callable[[], Sequence[object]],
        *,
        refresh: Callable[[], Awaitable[object]] | None = None,
        bus: EventBus | None = None,
        tick_s: float = DEFAULT_TICK_S,
        sleep: Sleep | None = None,
        hold: Callable[[], str | None] | None = None,
    ) -> None:
        if tick_s <= 0:
            raise ValueError(f"tick_s must be positive, got {tick_s}")
        self.clock = clock
        self.bus = bus
        self.tick_s = tick_s
        self.paused = False
        self.last_error: str | None = None
        self.rounds = 0
        self._settle = settle
        self._refresh = refresh
        self._sleep = sleep
        self._hold = hold
        self._held_said: str | None = None
        self._services: list[Callable[[int], object]] = []
        self._last_ms = clock.now_ms()
        self._wake = asyncio.Event()
        if bus is not None:
            bus.subscribe(OrderPlaced, self._order_placed)

    # -- the Driver port -----------------------------------------------------------------------

    @property
    def speed(self) -> float:
        """A live market runs at the wall clock's pace: always 1."""
        return 1.0

    @speed.setter
    def speed(self, value: float) -> None:
        """Ignored: a setting of the replay speed does not apply to a live market."""

    def set_speed(self, speed: float) -> None:
        """Refused unless 1: live time cannot be sped up or slowed down.

        Raises:
            ValueError: any speed but 1.
        """
        if speed != 1:
            raise ValueError("a live market runs in real time; its speed cannot be changed")

    def on_advance(self, service: Callable[[int], object]) -> None:
        self._services.append(service)

    def advance_to(self, now_ms: int) -> int:
        """Settle on what was last read and run the services at ``now_ms`` (the clock's now;
        an earlier time is ignored: time never moves back); return the fills it produced."""
        if now_ms < self._last_ms:
            return 0
        self._last_ms = now_ms
        fills = self._settle()
        for service in self._services:
            service(now_ms)
        if self.bus is not None:
            self.bus.publish_nowait(ClockAdvanced(now_ms, len(fills)))
        return len(fills)

    def step_once(self, step_ms: int) -> int:
        """Settle now on the last reads (a live market cannot be stepped ahead)."""
        return self.advance_to(self.clock.now_ms())

    async def run_paced(
        self, end_ms: int | None = None, *, tick_s: float | None = None,
        max_step_ms: int | None = None, settle: Callable[[], Awaitable[object]] | None = None,
    ) -> None:
        """Run rounds until the clock reaches ``end_ms`` (None: until cancelled).

        ``tick_s`` overrides the driver's own; ``max_step_ms`` and ``settle`` are a replay's and
        mean nothing here (a live market has no candles to skip, and its time cannot be owed).
        """
        wait = self.tick_s if tick_s is None else tick_s
        while end_ms is None or self.clock.now_ms() < end_ms:
            await self._pause(wait)
            if self.paused:
                continue
            await self.round()

    @property
    def held(self) -> str | None:
        """Why the market is not read now (the exchange paused requests), None when it is."""
        return None if self._hold is None else self._hold()

    # -- one round -----------------------------------------------------------------------------

    async def round(self) -> int:
        """Read the market (unless the exchange holds requests), then settle and run the
        services now; return the fills."""
        self.rounds += 1
        if self._refresh is not None and self._may_read():
            try:
                await self._refresh()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - a failed read is reported, not fatal
                self._failed(exc)
            else:
                if self.last_error is not None:
                    logger.info("live market reads work again")
                self.last_error = None
        return self.advance_to(self.clock.now_ms())

    def _may_read(self) -> bool:
        """False while the exchange holds requests (said once in the log per pause); the pause
        then stands for the read that met it, whose failure is no longer shown."""
        held = self.held
        if held is not None:
            if held != self._held_said:
                logger.info("live market reads wait: %s", held)
            self.last_error = None
        self._held_said = held
        return held is None

    def wake(self) -> None:
        """Run the next round now instead of at the next tick."""
        self._wake.set()

    def _order_placed(self, event: OrderPlaced) -> None:
        self.wake()

    def _failed(self, exc: Exception) -> None:
        text = str(exc) or type(exc).__name__
        if text != self.last_error:
            logger.warning("live market read failed (the next tick tries again): %s", text)
        self.last_error = text

    async def _pause(self, seconds: float) -> None:
        if self._sleep is not None:
            await self._sleep(seconds)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), seconds)
        self._wake.clear()
