"""Agent steps leave the window its share of the event loop.

Time here is a fake clock that only the steps' pretended work and the loop's sleeps move
(``asyncio.sleep`` is replaced for each test), so what the share decides never depends on how
busy the machine running the tests is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from app.agents.loop_share import LoopShare, NoShare

REAL_SLEEP = asyncio.sleep


class WorkClock:
    """Seconds of the steps' pretended CPU time and of the loop's sleeps."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def work(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[WorkClock]:
    """A fake clock that ``asyncio.sleep`` moves on by the time slept, once the sleeper has let
    the loop run."""
    fake = WorkClock()

    async def sleep(delay: float, result: object = None) -> object:
        await REAL_SLEEP(0)
        fake.work(delay)
        return result

    monkeypatch.setattr(asyncio, "sleep", sleep)
    yield fake


def test_steps_inside_a_slice_run_at_once_and_the_next_rests(clock: WorkClock) -> None:
    share = LoopShare(slice_s=0.010, rest_s=0.003, clock=clock)

    async def run() -> float:
        for _ in range(5):  # 5 x 1.9 ms = 9.5 ms: all inside the slice
            await share.turn()
            clock.work(0.0019)
        assert share.rests == 0
        await share.turn()  # the slice is used up
        clock.work(0.0019)
        started = clock()
        await share.turn()
        return clock() - started

    waited = asyncio.run(run())
    assert share.rests == 1
    assert waited == pytest.approx(0.003)  # the loop was left alone for the rest


def test_a_step_that_finds_the_loop_idle_starts_at_once(clock: WorkClock) -> None:
    share = LoopShare(slice_s=0.010, rest_s=0.003, clock=clock)

    async def run() -> None:
        await share.turn()
        clock.work(0.050)  # one long step used the slice up ...
        await asyncio.sleep(0.004)  # ... then the agents waited on a model: the loop idled
        await share.turn()

    asyncio.run(run())
    assert share.rests == 0


def test_many_agents_share_slices_and_every_one_finishes(clock: WorkClock) -> None:
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

    async def recorded(delay: float, result: object = None) -> object:
        slept.append(delay)
        return await REAL_SLEEP(0, result)

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
    answers = [True, True]  # the window has a repaint due the first two times it is asked
    asked: list[bool] = []

    def quiet_until() -> float:
        due = answers.pop(0) if answers else False
        asked.append(due)
        return float("inf") if due else float("-inf")

    share = LoopShare(quiet_until=quiet_until)
    asyncio.run(share.turn())
    assert asked == [True, True, False]  # the step started only once nothing was due
    assert share.rests == 2
    rests = share.rests
    asyncio.run(share.turn())  # nothing due: the step goes at once, without a rest
    assert share.rests == rests
