"""A heartbeat on the event loop: how long the loop was kept from running a ready task.

The app shares one event loop with its Qt window, so the longest pause of a task that only sleeps
``beat_s`` at a time is what a person would feel as a frozen window.
"""

from __future__ import annotations

import asyncio

BEAT_S = 0.005


class Heartbeat:
    """Sleeps ``beat_s`` again and again; ``longest`` is the longest extra delay since ``reset``,
    ``beats`` how many times it woke since then (the tests ask whether the loop ran at all; how
    long it paused is for the benchmarks to measure).

    Use as ``with Heartbeat() as beat:`` inside a running loop.
    """

    def __init__(self, beat_s: float = BEAT_S) -> None:
        self.beat_s = beat_s
        self.longest = 0.0
        self.beats = 0
        self._task: asyncio.Task[None] | None = None

    async def _beat(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            await asyncio.sleep(self.beat_s)
            self.longest = max(self.longest, loop.time() - started - self.beat_s)
            self.beats += 1

    def reset(self) -> None:
        self.longest = 0.0
        self.beats = 0

    def __enter__(self) -> Heartbeat:
        self._task = asyncio.get_running_loop().create_task(self._beat())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
