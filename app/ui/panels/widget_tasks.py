"""Glue between widgets and the one asyncio loop: owned tasks, throttled refreshes, bus links.

Widgets start coroutines from Qt slots (a click, a timer). ``TaskSet`` keeps a reference to each
task (an unreferenced task can be garbage-collected mid-flight), reports a failure to the widget
instead of leaving it unhandled on the loop, and cancels what is left when the widget goes.
``Throttle`` coalesces bursts of events (a backtest makes hundreds of tool calls a second) into at
most one refresh per interval, and never runs two at once. ``RedrawGate`` spaces the heavy
redraws of different panels so they don't all land in one turn of the loop. ``BusLink``
remembers a widget's bus subscriptions and drops them when the widget is destroyed, so the bus
never calls into a deleted C++ object.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from PySide6.QtCore import QObject, QTimer

from app.events import Event, EventBus

logger = logging.getLogger(__name__)
E = TypeVar("E", bound=Event)


def _loop() -> asyncio.AbstractEventLoop:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        # A Qt slot runs inside qasync's loop, which may not be the "running" one while tests
        # pump Qt events directly; the loop set for this thread is the same qasync loop.
        return asyncio.get_event_loop_policy().get_event_loop()


class TaskSet:
    """The tasks a widget started; failures go to ``on_error`` (and the log), not the void."""

    def __init__(self, on_error: Callable[[BaseException], None] | None = None) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()
        self._on_error = on_error
        self.closed = False

    def attach(self, owner: QObject) -> None:
        """Cancel every task, and start no more, once ``owner`` is destroyed: a task resumed
        after that would touch a deleted C++ object."""
        owner.destroyed.connect(lambda *_: self.shutdown())

    def shutdown(self) -> None:
        self.closed = True
        self.cancel_all()

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any] | None:
        if self.closed:
            coro.close()
            return None
        try:
            loop = _loop()
        except RuntimeError:  # the app's loop is gone (shutting down): nothing to update
            coro.close()
            logger.warning("no event loop to update the panel in; update dropped")
            return None
        task = loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is None:
            return
        logger.error("panel task failed", exc_info=exc)
        if self._on_error is not None and not self.closed:
            self._on_error(exc)

    @property
    def busy(self) -> bool:
        return bool(self._tasks)

    async def wait(self) -> None:
        """Wait until every task started so far (and any they start) has finished."""
        while self._tasks:
            if pending := [task for task in self._tasks if not task.done()]:
                await asyncio.wait(pending)
            else:
                # Finished, but their done callbacks (which drop them from the set) are still
                # queued. ``gather`` of finished tasks completes without yielding (3.12), so it
                # would spin here for ever; one trip round the loop runs the callbacks.
                await asyncio.sleep(0)

    def cancel_all(self) -> None:
        for task in list(self._tasks):
            task.cancel()


class Throttle(QObject):
    """Run ``job`` at most once per ``interval_ms``, coalescing requests; never two at once.

    ``request()`` is cheap and may be called for every event. A request that arrives while the job
    runs schedules exactly one more run after it, so the last event is never lost.
    """

    def __init__(
        self,
        job: Callable[[], Awaitable[None]],
        tasks: TaskSet,
        interval_ms: int = 250,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._job = job
        self._tasks = tasks
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self._fire)
        self._running = False
        self._again = False

    def request(self) -> None:
        if self._running:
            self._again = True
        elif not self._timer.isActive():
            self._timer.start()

    @property
    def pending(self) -> bool:
        return self._timer.isActive() or self._running or self._again

    def _fire(self) -> None:
        if self._tasks.spawn(self._run()) is not None:
            self._running = True

    async def _run(self) -> None:
        try:
            await self._job()
        finally:
            self._running = False
            if self._again and not self._tasks.closed:
                self._again = False
                self._timer.start()


async def stop_panel(panel: object) -> None:
    """Before the services a panel reads are closed: drop its bus subscriptions, stop its
    timers, cancel its tasks and wait for them to end (a panel hidden with its window is not
    destroyed, so its ``attach`` hooks have not run)."""
    link = getattr(panel, "link", None)
    if isinstance(link, BusLink):
        link.detach()
    if isinstance(panel, QObject):  # batching and throttling timers would still fire
        for timer in panel.findChildren(QTimer):
            timer.stop()
    tasks = getattr(panel, "tasks", None)
    if isinstance(tasks, TaskSet):
        tasks.shutdown()
        await tasks.wait()


class RedrawGate:
    """Spaces the window's heavy redraws (chart, order book, account) ``spacing_s`` apart.

    Each panel batches its own updates on its own timer; left alone, those timers line up now and
    then, and the chart's, the book's and the account's repaints (15-20 ms, 5-10 ms, 5 ms in the
    desk under live load) all run in one turn of the event loop: a stall a person feels. A panel
    awaits ``turn()`` before it applies an update. The first comes at once; one that follows
    within ``spacing_s`` of the last waits out the rest of the spacing on a timer, so its repaint
    lands in a later turn, after input and other timers. Callers queue in order: each reserves
    the next free moment, so none waits more than one spacing per redraw ahead of it.

    A redraw's repaint runs in the loop's next turn; ``quiet_until`` tells the agents'
    ``LoopShare`` to keep their steps out of that turn: it is set ``quiet_s`` ahead when a
    redraw is applied and cleared two turns of the loop later, after the repaint.
    """

    def __init__(
        self,
        spacing_s: float = 0.030,
        quiet_s: float = 0.040,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        if spacing_s < 0 or quiet_s < 0:
            raise ValueError(f"spacing and quiet time must not be negative: {spacing_s}, {quiet_s}")
        self.spacing_s = spacing_s
        self.quiet_s = quiet_s
        self._clock = clock
        self._next_free = float("-inf")
        self.quiet_until = float("-inf")
        self.delayed = 0  # redraws that had to wait; tests and benchmarks read it

    async def turn(self) -> None:
        now = self._clock()
        start = max(now, self._next_free)
        self._next_free = start + self.spacing_s
        if start > now:
            self.delayed += 1
            await asyncio.sleep(start - now)
        # the repaint this redraw causes runs in the loop's next turn: agents stay off it, and
        # come back in the turn after (or after quiet_s, whichever is first)
        self.quiet_until = until = self._clock() + self.quiet_s
        loop = asyncio.get_running_loop()

        def clear() -> None:
            if self.quiet_until == until:  # not extended by a later redraw
                self.quiet_until = float("-inf")

        loop.call_soon(loop.call_soon, clear)


# one window, one event loop: its panels share one gate
REDRAWS = RedrawGate()


class BusLink:
    """A widget's subscriptions; ``attach`` ties them to the widget's life."""

    def __init__(self, bus: EventBus | None) -> None:
        self.bus = bus
        self._subs: list[tuple[type[Event], Callable[[Any], Any]]] = []

    def subscribe(self, event_type: type[E], handler: Callable[[E], Any]) -> None:
        if self.bus is None:
            return
        self.bus.subscribe(event_type, handler)
        self._subs.append((event_type, handler))

    def attach(self, owner: QObject) -> None:
        # a plain closure, not a bound method of ``owner``: it runs while ``owner`` is destroyed
        owner.destroyed.connect(lambda *_: self.detach())

    def detach(self) -> None:
        if self.bus is None:
            return
        for event_type, handler in self._subs:
            self.bus.unsubscribe(event_type, handler)
        self._subs.clear()
