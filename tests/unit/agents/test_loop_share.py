"""Agent steps leave the window its share of the event loop."""

from __future__ import annotations

import asyncio
import time

import pytest

from app.agents.loop_share import LoopShare, NoShare


class WorkClock:
    """Real time plus the CPU time the test's steps pretend to take."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.perf_counter() + self.offset

    def work(self, seconds: float) -> None:
        self.offset += seconds


def test_steps_inside_a_slice_run_at_once_and_the_next_rests() -> None:
    clock = WorkClock()
    share = LoopShare(slice_s=0.010, rest_s=0.003, clock=clock)

    async def run() -> float:
        for _ in range(5):  # 5 x 1.9 ms = 9.5 ms: all inside the slice
            await share.turn()
            clock.work(0.0019)
        assert share.rests == 0
        await share.turn()  # the slice is used up
        clock.work(0.0019)
        started = time.perf_counter()
        await share.turn()
        return time.perf_counter() - started

    waited = asyncio.run(run())
    assert share.rests == 1
    assert waited >= 0.003  # the loop was left alone for the rest


def test_a_step_that_finds_the_loop_idle_starts_at_once() -> None:
    clock = WorkClock()
    share = LoopShare(slice_s=0.010, rest_s=0.003, clock=clock)

    async def run() -> None:
        await share.turn()
        clock.work(0.050)  # one long step used the slice up ...
        await asyncio.sleep(0.004)  # ... then the agents waited on a model: the loop idled
        await share.turn()

    asyncio.run(run())
    assert share.rests == 0


def test_many_agents_share_slices_and_every_one_finishes() -> None:
    clock = WorkClock()
    share = LoopShare(slice_s=0.010, rest_s=0.002, clock=clock)
    granted: list[tuple[float, int]] = []

    async def agent(n: int) -> int:
        for _ in range(20):
            await share.turn()
            granted.append((clock(), n))
            clock.work(0.001)
        return n

    async def run() -> list[int]:
        return list(await asyncio.gather(*(agent(n) for n in range(5))))

    assert asyncio.run(run()) == [0, 1, 2, 3, 4]
    assert share.rests > 0
    # between two rests, no more than a slice of back-to-back steps (10 ms / 1 ms + the last)
    slices: list[int] = [0]
    for (before, _), (after, _) in zip(granted, granted[1:], strict=False):
        if after - before >= 0.002:
            slices.append(0)
        slices[-1] += 1
    assert max(slices) <= 11
    assert len(slices) >= 100 // 11


def test_headless_runs_only_yield_to_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    sleep = asyncio.sleep

    async def recorded(delay: float, result: object = None) -> object:
        slept.append(delay)
        return await sleep(0, result)

    monkeypatch.setattr(asyncio, "sleep", recorded)

    async def run() -> None:
        for _ in range(1000):
            await NoShare().turn()

    asyncio.run(run())
    assert slept == [0] * 1000  # a yield to the loop each turn, never a rest


def test_a_slice_or_rest_that_is_not_positive_is_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        LoopShare(slice_s=0)
    with pytest.raises(ValueError, match="positive"):
        LoopShare(rest_s=-1)


def test_no_step_starts_while_the_window_has_a_repaint_due() -> None:
    quiet = [time.perf_counter() + 0.020]
    share = LoopShare(quiet_until=lambda: quiet[0])

    async def run() -> float:
        started = time.perf_counter()
        await share.turn()
        return time.perf_counter() - started

    waited = asyncio.run(run())
    assert waited >= 0.019
    assert share.rests >= 1
    quiet[0] = float("-inf")  # nothing due: steps go at once, without a rest
    rests = share.rests
    asyncio.run(run())
    assert share.rests == rests
