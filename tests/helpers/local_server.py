"""The one way the test fakes serve HTTP: aiohttp on a free 127.0.0.1 port, in its own thread.

Why a thread with its own event loop (a test-rig habit the app itself never has): a fake must
answer whatever the test's loop is doing. A sync test has no loop, a test may block its loop on
purpose, and a fault that hangs must never stall the code under test.

A fake subclasses ``LocalServer``, builds its application in ``make_app`` (run on the server's
loop, so it may create asyncio objects there) and, when handlers may be waiting, releases them in
``before_stop``. Everything else is here::

    with FakeSomething() as server:        # or server = FakeSomething().start(); server.close()
        server.base_url                    # http://127.0.0.1:<port>
        server.port
        server.call_soon(event.set)        # from the test's thread, onto the server's loop
        server.run(coroutine)              # run it on the server's loop; its result
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Self, TypeVar

from aiohttp import web

T = TypeVar("T")
START_TIMEOUT_S = 10.0


class LocalServer:
    """A threaded aiohttp server; see the module docstring.

    Class attributes a fake may set:
        thread_name: the server thread's name (shows in thread dumps).
        shutdown_timeout: how long ``close`` lets running handlers finish before cancelling them.
        access_log: whether aiohttp logs each request (to ``aiohttp.access``).
    """

    thread_name = "local-server"
    shutdown_timeout = 1.0
    access_log = True

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._port = 0

    # -- what a fake provides ------------------------------------------------------------------

    def make_app(self) -> web.Application:
        """The application to serve (called on the server's loop)."""
        raise NotImplementedError

    async def before_stop(self) -> None:
        """Release waiting handlers before the server stops (on the server's loop)."""

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> Self:
        ready = threading.Event()
        failure: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, args=(ready, failure),
                                        name=self.thread_name, daemon=True)
        self._thread.start()
        if not ready.wait(START_TIMEOUT_S):
            raise RuntimeError(f"{type(self).__name__} did not start within {START_TIMEOUT_S} s")
        if failure:
            raise RuntimeError(f"{type(self).__name__} could not start") from failure[0]
        return self

    def _run(self, ready: threading.Event, failure: list[BaseException]) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._serve())
        except Exception as exc:  # handed to start(), which raises it in the test's thread
            failure.append(exc)
            ready.set()
            loop.close()
            return
        self._loop = loop
        ready.set()
        loop.run_forever()
        loop.run_until_complete(self._stop())
        loop.close()

    async def _serve(self) -> None:
        kwargs: dict[str, Any] = {} if self.access_log else {"access_log": None}
        self._runner = web.AppRunner(self.make_app(), shutdown_timeout=self.shutdown_timeout,
                                     **kwargs)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = self._runner.addresses[0][1]

    async def _stop(self) -> None:
        await self.before_stop()
        assert self._runner is not None
        await self._runner.cleanup()

    def close(self) -> None:
        """Stop serving and wait for the thread (idempotent; a no-op when never started)."""
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
            self._loop = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what tests use ------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if not self._port:
            raise RuntimeError(f"{type(self).__name__} is not started; use it as a context "
                               "manager or call start()")
        return self._port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self._loop is not None

    def call_soon(self, callback: Callable[..., object], *args: object) -> None:
        """Call ``callback(*args)`` on the server's loop soon (from any thread); nothing when
        the server is not running."""
        loop = self._loop
        if loop is not None:
            loop.call_soon_threadsafe(callback, *args)

    def run(self, coroutine: Coroutine[Any, Any, T], timeout_s: float = 10.0) -> T:
        """Run ``coroutine`` on the server's loop from another thread and return its result."""
        loop = self._loop
        if loop is None:
            coroutine.close()
            raise RuntimeError(f"{type(self).__name__} is not running")
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result(timeout_s)
