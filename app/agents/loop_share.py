"""The agents' share of the event loop they run on together with the window.

With qasync the agents' steps and Qt's painting, input and timers take turns on one thread. A
language model's step mostly waits on the network, but the rule engine's never waits: ten rule
engine agents on an accelerated replay can keep the loop busy back to back, and the window then
paints only between their steps, late. So each step first asks for a turn. Steps may run back to
back for ``slice_s``; after that, the next step rests ``rest_s`` on a real timer, during which Qt
runs everything pending (paints, input, the window's timers), and the first step to wake opens a
new slice. A step that found the loop idle (no step asked for ``rest_s``) opens a slice at once,
so agents that wait on a model or an exchange are never slowed. And while the window has a
repaint due (``quiet_until``: it just applied a new chart, book or account), no step starts.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


class LoopShare:
    """Time-slices agent steps on the event loop (see the module docstring).

    The defaults leave the window at least 60% of a loop that agents would otherwise fill: in the
    desk benchmark (ten rule-engine agents, a bar every 100 ms) the agents still keep up with the
    replay, and the longest stall halves.

    Args:
        slice_s: how long steps may follow one another without a rest.
        rest_s: how long the loop is left to the window after a full slice.
        clock: seconds, monotonic (a test's fake clock).
        quiet_until: the window's: until when (on ``clock``) a repaint is due, during which no
            step starts (the desk's ``RedrawGate.quiet_until``).
    """

    def __init__(
        self,
        slice_s: float = 0.006,
        rest_s: float = 0.010,
        clock: Callable[[], float] = time.perf_counter,
        quiet_until: Callable[[], float] | None = None,
    ) -> None:
        if slice_s <= 0 or rest_s <= 0:
            raise ValueError(f"slice and rest must be positive, not {slice_s} and {rest_s}")
        self.slice_s = slice_s
        self.rest_s = rest_s
        self._clock = clock
        self._quiet_until = quiet_until
        self._slice_started = float("-inf")
        self._last_turn = float("-inf")
        self.rests = 0  # how often a step had to wait; the benchmark and tests read it

    async def turn(self) -> None:
        """Return when this step may run: at once inside a slice, after a rest otherwise."""
        while True:
            now = self._clock()
            if self._quiet_until is not None:
                hold = self._quiet_until() - now
                if hold > 0:  # the window is about to repaint: it goes first
                    self.rests += 1
                    await asyncio.sleep(min(hold, self.rest_s))
                    continue
            if now - self._last_turn >= self.rest_s:
                self._slice_started = now  # the loop was left alone meanwhile: a new slice
            if now - self._slice_started < self.slice_s:
                self._last_turn = now
                return
            self.rests += 1
            await asyncio.sleep(self.rest_s)


class NoShare:
    """Headless runs (the CLI, a backtest) have no window to leave time to."""

    async def turn(self) -> None:
        await asyncio.sleep(0)
