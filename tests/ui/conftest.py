"""Fixtures for the pytest-qt tests: one qasync loop over the test QApplication.

The app runs asyncio inside Qt's loop (qasync), so widgets that await services are tested the
same way: ``qloop.run_until_complete(coro)`` drives both the coroutine and Qt events. Any exception
left unhandled in an asyncio task fails the test instead of vanishing into a log line.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from typing import Any

import pyqtgraph as pg
import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


@pytest.fixture(autouse=True)
def themed(qapp: Any) -> Iterator[None]:
    """The application's theme, as ``app.ui.app`` sets it before any window: the widgets take
    their look from its style sheet. A test that switches themes gets the dark one back."""
    from app.ui.theme import apply_theme, palette

    if qapp.styleSheet() == "" or palette().name != "dark":
        apply_theme(qapp, "dark")
    yield
    if palette().name != "dark":
        apply_theme(qapp, "dark")


@pytest.fixture(autouse=True)
def _closed_widgets_are_deleted(qapp: Any) -> Iterator[None]:
    """pytest-qt closes a test's widgets and asks Qt to delete them later, but between tests no
    event loop runs to do it: every window of every earlier test stayed alive (about 2,500
    widgets a desk), and each theme switch, polish and event pass of later tests walked them."""
    yield
    from PySide6.QtCore import QCoreApplication, QEvent

    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)


@pytest.fixture
def qloop(qapp: Any) -> Iterator[asyncio.AbstractEventLoop]:
    import gc

    import qasync

    # the previous test's loop and widgets are dropped only after its teardown; collect them
    # now, on this thread, rather than letting a later collection destroy their Qt timers from
    # a worker thread ("Timers cannot be stopped from another thread")
    gc.collect()
    # as in the app (app.ui.app), no collection may start in a worker thread during the test:
    # it would destroy Qt objects there and crash; the test's garbage is collected at teardown
    gc.disable()
    loop = qasync.QEventLoop(qapp, already_running=False)
    errors: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    asyncio.set_event_loop(loop)
    try:
        yield loop
    finally:
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        asyncio.set_event_loop(None)
        loop.close()
        gc.collect()
        gc.enable()
    if errors:
        raise AssertionError(f"unhandled exceptions in asyncio tasks: {errors}")


@pytest.fixture
def desk(tmp_path: Any, qapp: Any, qtbot: Any, qloop: Any) -> Iterator[Any]:
    """A ``tests.ui.desk.Desk``: main windows opened on one workspace, as restarts would."""
    from tests.ui.desk import Desk

    qapp.setQuitOnLastWindowClosed(False)  # as app.ui.app sets it: the window may go to the tray
    yield Desk(tmp_path, qtbot, qloop)
    qapp.setQuitOnLastWindowClosed(True)


@pytest.fixture
def every_mouse_move() -> Iterator[None]:
    """pyqtgraph drops mouse moves closer together than 10 ms; a test's moves all count."""
    kept = pg.getConfigOption("mouseRateLimit")
    pg.setConfigOption("mouseRateLimit", -1)
    yield
    pg.setConfigOption("mouseRateLimit", kept)
