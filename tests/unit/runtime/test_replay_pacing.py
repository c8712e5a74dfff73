"""The paced replay (the desk, ``kestrel run``): at a speed the agents cannot follow it still
moves one candle at a time and, when told to, lets the agents finish each candle before the
next, so no bar goes unseen and no agent decides on a candle the clock has already left."""

from __future__ import annotations

import asyncio
from decimal import Decimal

from app.domain.clock import ReplayClock
from app.domain.trading import Fill
from app.runtime.replay import ReplayDriver

HOUR_MS = 3_600_000
START = 1_000 * HOUR_MS


class NoBroker:
    def settle(self) -> list[Fill]:
        return []

    def position_size(self, symbol: str) -> Decimal:
        return Decimal(0)


def driver_at_top_speed() -> ReplayDriver:
    driver = ReplayDriver(ReplayClock(START), NoBroker(), end_ms=START + 48 * HOUR_MS)
    driver.set_speed(1e12)  # one tick owes years
    return driver


def test_at_top_speed_every_candle_is_settled_by_the_agents_before_the_clock_moves_on() -> None:
    driver = driver_at_top_speed()
    settled: list[int] = []

    async def agents_finish() -> None:
        at = driver.clock.now_ms()
        await asyncio.sleep(0)  # the agents work; the clock must wait for them
        assert driver.clock.now_ms() == at
        settled.append(at)

    asyncio.run(driver.run_paced(tick_s=0.01, max_step_ms=HOUR_MS, settle=agents_finish))
    assert settled == [START + k * HOUR_MS for k in range(1, 49)]


def test_without_settling_a_tick_moves_at_most_one_candle() -> None:
    driver = driver_at_top_speed()
    end = START + 3 * HOUR_MS
    seen: list[int] = []
    driver.on_advance(seen.append)
    asyncio.run(driver.run_paced(end, tick_s=0.01, max_step_ms=HOUR_MS))
    assert seen == [START + HOUR_MS, START + 2 * HOUR_MS, end]


def test_a_pause_while_catching_up_stops_the_clock_at_the_candle_it_reached() -> None:
    driver = driver_at_top_speed()

    async def person_pauses_at_the_third_candle() -> None:
        if driver.clock.now_ms() == START + 3 * HOUR_MS:
            driver.paused = True

    async def scenario() -> None:
        runner = asyncio.ensure_future(driver.run_paced(
            tick_s=0.01, max_step_ms=HOUR_MS, settle=person_pauses_at_the_third_candle))
        for _ in range(20):  # ticks pass while paused; none moves the clock
            await asyncio.sleep(0.01)
        assert driver.clock.now_ms() == START + 3 * HOUR_MS
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)

    asyncio.run(scenario())
