"""``LocalServer``, the threaded aiohttp server every test fake is built on: it answers real HTTP
while the test's own thread is blocked, runs code on its own loop, and stops cleanly."""

from __future__ import annotations

import asyncio
import threading
import urllib.request

import pytest
from aiohttp import web

from tests.helpers.local_server import LocalServer


class _Hello(LocalServer):
    thread_name = "hello-server"

    def make_app(self) -> web.Application:
        self.released = asyncio.Event()
        app = web.Application()
        app.router.add_get("/hello", self._hello)
        return app

    async def before_stop(self) -> None:
        self.released.set()

    async def _hello(self, request: web.Request) -> web.Response:
        return web.Response(text=f"hello from {threading.current_thread().name}")


class _Broken(LocalServer):
    def make_app(self) -> web.Application:
        raise ValueError("no app today")


def test_a_fake_answers_http_on_127_0_0_1_from_its_own_thread():
    with _Hello() as server:
        assert server.base_url == f"http://127.0.0.1:{server.port}"
        with urllib.request.urlopen(f"{server.base_url}/hello", timeout=5) as answer:  # noqa: S310
            assert answer.read() == b"hello from hello-server"


def test_code_runs_on_the_servers_loop_and_stop_releases_its_waiters():
    server = _Hello().start()
    try:
        assert server.run(asyncio.sleep(0, "done")) == "done"
        name = server.run(_thread_name())
        assert name == "hello-server"
        fired = threading.Event()
        server.call_soon(fired.set)
        assert fired.wait(5)
        released = server.released
    finally:
        server.close()
    assert released.is_set() and not server.running
    server.close()  # a second close is harmless


async def _thread_name() -> str:
    return threading.current_thread().name


def test_using_a_fake_that_is_not_started_or_cannot_start_is_a_clear_error():
    with pytest.raises(RuntimeError, match="_Hello is not started"):
        _ = _Hello().base_url
    with pytest.raises(RuntimeError, match="_Broken could not start") as caught:
        _Broken().start()
    assert isinstance(caught.value.__cause__, ValueError)
