"""The live driver: reads, settles and runs services in order, wakes on an order, survives a
failed read, and never moves time back; the live clock never runs backwards."""

from __future__ import annotations

import asyncio
import copy

import pytest

from app.domain.trading import Order, OrderType, Side
from app.events import ClockAdvanced, EventBus, OrderPlaced
from app.runtime.live_clock import LiveClock
from app.runtime.live_driver import LiveDriver


class SteppedClock:
    def __init__(self, now_ms: int) -> None:
        self.now = now_ms

    def now_ms(self) -> int:
        return self.now


def test_the_live_clock_holds_still_when_the_system_clock_steps_back():
    source = SteppedClock(10_000)
    clock = LiveClock(source)
    source.now = 9_000  # an NTP correction
    assert clock.now_ms() == 10_000
    source.now = 10_500
    assert clock.now_ms() == 10_500


def test_a_round_reads_then_settles_then_runs_the_services_then_tells_the_world():
    clock = SteppedClock(1_000)
    bus = EventBus()
    seen: list[str] = []

    async def refresh() -> None:
        seen.append("read")

    def settle() -> list[object]:
        seen.append("settle")
        return ["fill"]

    driver = LiveDriver(clock, settle, refresh=refresh, bus=bus)
    driver.on_advance(lambda now: seen.append(f"jobs@{now}"))
    bus.subscribe(ClockAdvanced, lambda e: seen.append(f"told:{e.fills}"))
    assert asyncio.run(driver.round()) == 1
    assert seen == ["read", "settle", "jobs@1000", "told:1"]


def test_a_failed_read_is_reported_and_the_next_round_tries_again():
    clock = SteppedClock(1_000)
    calls = {"n": 0}

    async def refresh() -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise ConnectionError("binance unreachable")

    settled: list[int] = []
    driver = LiveDriver(clock, lambda: settled.append(1) or [], refresh=refresh)

    async def two_rounds() -> None:
        await driver.round()
        assert driver.last_error == "binance unreachable"
        await driver.round()

    asyncio.run(two_rounds())
    assert driver.last_error is None and len(settled) == 2  # settling went on regardless


def test_an_order_placed_wakes_the_driver_before_its_tick():
    clock = SteppedClock(1_000)
    bus = EventBus()
    driver = LiveDriver(clock, list, bus=bus, tick_s=30.0)

    async def scenario() -> None:
        runner = asyncio.ensure_future(driver.run_paced())
        await asyncio.sleep(0.05)
        assert driver.rounds == 0
        order = Order("P1", "c", "a", "BTC/USDT", Side.BUY, OrderType.MARKET, 1, 1_000)
        bus.publish_nowait(OrderPlaced(copy.copy(order)))
        await asyncio.sleep(0.05)
        assert driver.rounds == 1  # not 30 s later
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)

    asyncio.run(scenario())


def test_run_paced_stops_at_its_end_on_an_injected_time():
    clock = SteppedClock(0)

    async def time_passes(seconds: float) -> None:
        clock.now += int(seconds * 1000)

    driver = LiveDriver(clock, list, tick_s=5.0, sleep=time_passes)
    asyncio.run(driver.run_paced(60_000))
    assert driver.rounds == 12 and clock.now == 60_000


def test_a_live_market_refuses_a_replay_speed_and_ignores_the_setting():
    driver = LiveDriver(SteppedClock(0), list)
    driver.speed = 600.0  # what a replay speed setting does to any driver
    assert driver.speed == 1.0
    with pytest.raises(ValueError, match="real time"):
        driver.set_speed(60)


def test_while_the_exchange_holds_requests_a_round_reads_nothing_but_still_settles():
    clock = SteppedClock(1_000)
    reads: list[int] = []
    hold: list[str] = []

    async def refresh() -> None:
        reads.append(1)
        if hold:
            raise ConnectionError("the read that met the ban")

    settled: list[int] = []
    driver = LiveDriver(clock, lambda: settled.append(1) or [], refresh=refresh,
                        hold=lambda: hold[0] if hold else None)

    async def rounds() -> None:
        hold.append("binance: requests paused until 00:02:01 UTC (ban, HTTP 418)")
        await driver.round()
        await driver.round()
        assert driver.held == hold[0] and driver.last_error is None
        hold.clear()
        await driver.round()

    asyncio.run(rounds())
    assert reads == [1] and len(settled) == 3 and driver.held is None
