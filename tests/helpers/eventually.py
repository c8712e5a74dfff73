"""Waiting for a condition instead of for a fixed time.

A fixed sleep is too long on an idle machine and too short on a loaded one (the suite runs on every
core, beside whatever else the machine does), and a timeout tight enough to notice slowness turns
load into failures. So a test waits for what it means to see: the condition is polled, a passing
test goes on as soon as it holds, and only a failing one waits the whole ``PATIENCE_S`` before it
says which condition never held. Speed is measured by the benchmarks, not here.

Three ways to wait, one rule:

- ``await eventually(condition)`` inside a running event loop (the qasync loop of the UI tests or
  ``asyncio.run``): the loop, and with qasync Qt's events, run while it polls;
- ``eventually_on(loop, condition)`` from plain test code, driving a loop that is not running;
- ``eventually_blocking(condition)`` where no loop is involved: the condition is moved by another
  thread or process, and the test's thread only sleeps between looks;
- ``eventually_qt(condition)`` for widgets without an asyncio loop: Qt's events are processed
  between looks (layouts, deferred resizes);
- ``await settled(value)`` for a layout to stop moving: ``value()`` the same a few looks in a
  row.

``condition`` may return an awaitable (for ``eventually``), whose result is the answer.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from typing import Any

PATIENCE_S = 60.0
"""How long a condition may take before the test fails: long enough for a machine running the whole
suite on every core beside other work; a passing test never waits for it."""

POLL_S = 0.01


def _describe(condition: Callable[[], Any]) -> str:
    try:
        return inspect.getsource(condition).strip()
    except (OSError, TypeError):
        return repr(condition)


async def eventually(condition: Callable[[], Any], within: float = PATIENCE_S) -> None:
    """Let the running loop go on until ``condition()`` is true (awaiting it if it returns an
    awaitable); fail once ``within`` seconds have passed without it."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        result = condition()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return
        if loop.time() > deadline:
            raise AssertionError(f"never held within {within} s: {_describe(condition)}")
        await asyncio.sleep(POLL_S)


async def settled(value: Callable[[], Any], looks: int = 3, within: float = PATIENCE_S) -> None:
    """Let the running loop go on until ``value()`` gives the same answer ``looks`` times in a
    row: a layout that has stopped moving (Qt lays out in passes, some posted for later, such as
    a window's default dock sizes after its first layout); fail once ``within`` seconds have
    passed with it still changing."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    last, same = value(), 1
    while same < looks:
        if loop.time() > deadline:
            raise AssertionError(f"still changing after {within} s: {_describe(value)}")
        await asyncio.sleep(POLL_S)
        now = value()
        same = same + 1 if now == last else 1
        last = now


def eventually_on(
    loop: asyncio.AbstractEventLoop, condition: Callable[[], Any], within: float = PATIENCE_S
) -> None:
    """``eventually`` from code outside the loop: run ``loop`` until ``condition()`` holds."""
    loop.run_until_complete(eventually(condition, within))


def eventually_blocking[T](
    condition: Callable[[], T], within: float = PATIENCE_S, *, what: str = ""
) -> T:
    """Sleep between looks until ``condition()`` holds, for a state that another thread or process
    changes (no event loop runs here); return what it returned. ``what`` names the condition in
    the failure."""
    deadline = time.monotonic() + within
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"never held within {within} s: {what or _describe(condition)}")
        time.sleep(POLL_S)
    return value


def eventually_qt(condition: Callable[[], Any], within: float = PATIENCE_S) -> None:
    """Process Qt's events between looks until ``condition()`` holds (no asyncio loop runs)."""
    from PySide6.QtTest import QTest

    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never held within {within} s: {_describe(condition)}")
        QTest.qWait(int(POLL_S * 1000))
