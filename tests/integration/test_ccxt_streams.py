"""ccxt.pro candle streams (binance): the forming candle from the stream, REST after a break.

The fake Binance websocket pushes the forming candle at the fake now every 20 ms; tests wait on
conditions (polling), never on fixed sleeps.
"""

import asyncio

import pytest

from app.ccxt.market import Freshness
from tests.helpers.eventually import eventually
from tests.helpers.fake_exchange import Fault
from tests.helpers.fake_exchange.client import open_market
from tests.integration.ccxt_fixtures import (  # noqa: F401 - fixtures
    START_MS,
    fake_exchange_fixture,
    server_fixture,
)

H = 3_600_000
M = 60_000
# candles are read again after 50 ms; a stream counts as live for as long as a test lasts, so a push
# a loaded machine delivers late is not taken for a quiet stream (the quiet stream's test sets its
# own)
QUICK = Freshness(candles_s=0.05, stream_s=60.0)


def forming_close(server, now):
    tape = server.state.markets["BTC/USDT"].tape
    return tape.candle(now - now % H, H, now).close


@pytest.fixture(autouse=True)
def pushes_on(server):
    server.streams.paused = False
    yield
    server.streams.paused = False


def test_the_forming_candle_follows_the_stream_without_polling_rest(server):
    async def scenario():
        market = await open_market(server, "binance", streams=True, freshness=QUICK,
                                   history=50)
        try:
            assert market.streaming
            await market.series("BTC/USDT", "1h")
            polled = server.count("binance", "klines")
            server.now.advance(20 * M)  # later in the same hour: the forming candle moved on
            want = forming_close(server, server.now.now_ms())

            async def caught_up():
                series = await market.series("BTC/USDT", "1h")
                return not series.last_complete and series.close[-1] == want

            await eventually(caught_up)
            assert server.count("binance", "klines") == polled  # no REST poll was needed
            assert "btcusdt@kline_1h" in server.streams.subscriptions
        finally:
            await market.close()

    asyncio.run(scenario())


def test_a_dropped_stream_means_rest_until_a_refill_after_the_reconnect(server):
    async def scenario():
        market = await open_market(server, "binance", streams=True, freshness=QUICK,
                                   history=50)
        try:
            await market.series("BTC/USDT", "1h")
            stream = market._streams[("BTC/USDT", "1h")]  # noqa: SLF001 - observing, not driving

            async def streaming():
                return stream.last_message_mono is not None

            await eventually(streaming)
            server.fail("binance", "ws", Fault.drop_ws())

            async def broke():
                return stream.epoch == 1

            await eventually(broke)
            before = server.count("binance", "klines")
            await asyncio.sleep(QUICK.candles_s * 2)
            await market.series("BTC/USDT", "1h")  # not from the broken stream: REST
            assert server.count("binance", "klines") == before + 1
            await eventually(streaming)  # reconnected and subscribed again
            assert server.streams.connections >= 2
            server.now.advance(5 * M)
            want = forming_close(server, server.now.now_ms())
            polled = server.count("binance", "klines")

            async def caught_up():
                series = await market.series("BTC/USDT", "1h")
                return series.close[-1] == want

            await eventually(caught_up)
            assert server.count("binance", "klines") <= polled + 1  # at most the one refill
        finally:
            await market.close()

    asyncio.run(scenario())


def test_a_stream_gone_quiet_is_stale_and_rest_is_polled_again(server):
    async def scenario():
        market = await open_market(server, "binance", streams=True,
                                   freshness=Freshness(candles_s=0.05, stream_s=0.1), history=50)
        try:
            await market.series("BTC/USDT", "1h")
            stream = market._streams[("BTC/USDT", "1h")]  # noqa: SLF001

            async def streaming():
                return stream.last_message_mono is not None

            await eventually(streaming)
            server.streams.paused = True
            await asyncio.sleep(0.25)
            before = server.count("binance", "klines")
            await market.series("BTC/USDT", "1h")
            assert server.count("binance", "klines") == before + 1
        finally:
            await market.close()

    asyncio.run(scenario())


def test_without_streams_the_adapter_polls_rest_and_opens_no_websocket(server):
    connections = server.streams.connections

    async def scenario():
        market = await open_market(server, "binance", streams=False, history=10)
        try:
            await market.series("BTC/USDT", "1h")
            assert not market.streaming
        finally:
            await market.close()

    asyncio.run(scenario())
    assert server.streams.connections == connections
    assert server.count("binance", "klines") == 1

    asyncio.run(scenario())
