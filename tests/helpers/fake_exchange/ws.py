"""Binance's public kline websocket, faked for ccxt.pro's ``binance.watch_ohlcv``.

ccxt.pro connects to ``<urls.api.ws.spot>/<n>``, sends ``{"method": "SUBSCRIBE", "params":
["btcusdt@kline_1h"], "id": k}`` and expects ``{"result": null, "id": k}``, then kline events
(``{"e": "kline", "E": ms, "s": "BTCUSDT", "k": {...}}``). The fake pushes, every ``push_s`` of
real time, the current candle of each subscribed stream at the fake now, as Binance pushes a
kline update every second or two.

Faults: ``server.fail("binance", "ws", Fault.drop_ws())`` closes the connection at the next push
(ccxt sees the socket drop and its ``watch_ohlcv`` raises ``NetworkError``); ``pause`` stops the
pushes without closing (a stream that has gone quiet).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import TYPE_CHECKING, Any

from aiohttp import WSMsgType, web

from tests.helpers.fake_exchange.venues import parse_interval

if TYPE_CHECKING:
    from tests.helpers.fake_exchange.server import FakeExchangeServer


class BinanceKlineStreams:
    """Installs ``/binance/ws/{n}`` on the fake server and serves kline subscriptions."""

    def __init__(self, server: FakeExchangeServer, push_s: float = 0.02) -> None:
        self.server = server
        self.push_s = push_s
        self.paused = False
        self.connections = 0
        self.subscriptions: list[str] = []
        server.ws_hooks.append(self.install)

    def install(self, app: web.Application) -> None:
        app.router.add_get("/binance/ws/{n}", self.handle)

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self.connections += 1
        streams: list[str] = []
        pusher = asyncio.ensure_future(self._push(ws, streams))
        try:
            async for message in ws:
                if message.type != WSMsgType.TEXT:
                    continue
                body = json.loads(message.data)
                if body.get("method") == "SUBSCRIBE":
                    streams.extend(body["params"])
                    self.subscriptions.extend(body["params"])
                    await ws.send_str(json.dumps({"result": None, "id": body["id"]}))
        finally:
            pusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pusher
        return ws

    async def _push(self, ws: web.WebSocketResponse, streams: list[str]) -> None:
        while not ws.closed:
            await asyncio.sleep(self.push_s)
            if self.server.take_fault("binance", "ws") is not None:
                await ws.close()
                return
            if self.paused:
                continue
            for stream in list(streams):
                event = self._event(stream)
                if event is not None:
                    await ws.send_str(json.dumps(event))

    def _event(self, stream: str) -> dict[str, Any] | None:
        market_id, _, interval = stream.partition("@kline_")
        venue = self.server.venues["binance"]
        symbol = venue._by_id.get(market_id.upper())  # noqa: SLF001 - the fake's own venue
        if symbol is None:
            return None
        now = self.server.now.now_ms()
        bar = parse_interval(interval)
        candles = self.server.state.candles(symbol, bar, limit=1)
        if not candles:
            return None
        c = candles[-1]
        d = self.server.state.market(symbol).decimals
        return {
            "e": "kline", "E": now, "s": market_id.upper(),
            "k": {
                "t": c.open_ms, "T": c.open_ms + bar - 1, "s": market_id.upper(), "i": interval,
                "f": 1, "L": 2, "o": f"{c.open:.{d}f}", "c": f"{c.close:.{d}f}",
                "h": f"{c.high:.{d}f}", "l": f"{c.low:.{d}f}", "v": f"{c.volume:.8f}", "n": 2,
                "x": c.open_ms + bar <= now, "q": "0", "V": "0", "Q": "0", "B": "0",
            },
        }
