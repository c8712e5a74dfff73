"""One contract, every ``MarketData`` adapter: the replay and ccxt (binance and okx, live).

Whatever serves the market, the tools and indicators rely on the same things: candles oldest
first, none after now, closed ones only plus at most one forming candle marked as such and shown
closed only once its time is over, unknown symbols and intervals refused with the right error,
coherent tickers and books.
"""

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import pytest

from app.domain.clock import ReplayClock
from app.domain.errors import InvalidParameterError, NotFoundError
from app.domain.market import interval_ms
from app.market.port import MarketData
from app.market.replay import ReplayMarketData
from tests.helpers.fake_exchange.client import open_market
from tests.helpers.paths import BTC_USDT_1H
from tests.integration.ccxt_fixtures import (  # noqa: F401 - fixtures
    fake_exchange_fixture,
    server_fixture,
)

INTERVAL = "4h"
BAR = interval_ms(INTERVAL)
H = 3_600_000


@dataclass
class Harness:
    market: MarketData
    advance: Callable[[int], None]
    symbol: str = "BTC/USDT"


@asynccontextmanager
async def replay_harness(server):
    clock = ReplayClock(0)
    market = ReplayMarketData.from_paths(clock, [BTC_USDT_1H])
    first = market.start_ms()
    cursor = first - first % BAR + 50 * BAR + 2 * H  # two hours into a 4h bucket
    clock.advance_to(cursor)
    yield Harness(market, lambda ms: clock.advance_to(clock.now_ms() + ms))


def ccxt_harness(venue):
    @asynccontextmanager
    async def harness(server):
        market = await open_market(server, venue, history=300)
        try:
            yield Harness(market, server.now.advance)
        finally:
            await market.close()

    return harness


ADAPTERS = {
    "replay": replay_harness,
    "ccxt-binance": ccxt_harness("binance"),
    "ccxt-okx": ccxt_harness("okx"),
}


@pytest.fixture(params=sorted(ADAPTERS))
def contract(request, server):
    def run(scenario: Callable[[Harness], Awaitable[None]]) -> None:
        async def main():
            async with ADAPTERS[request.param](server) as harness:
                await scenario(harness)

        asyncio.run(main())

    return run


def assert_closed_rule(series, now):
    opens = series.timestamp_ms.tolist()
    assert opens == sorted(set(opens)), "oldest first, one candle per open time"
    assert all(o <= now for o in opens), "no candle opens after now"
    assert all(o + BAR <= now for o in opens[:-1]), "every candle but the newest has closed"
    assert series.last_complete == (opens[-1] + BAR <= now), "the newest is marked by its close"


def test_candles_are_oldest_first_closed_and_only_the_newest_forming(contract):
    async def scenario(h):
        series = await h.market.series(h.symbol, INTERVAL)
        assert len(series) > 10 and series.interval == INTERVAL
        assert_closed_rule(series, h.market.now_ms())
        assert series.last_complete is False  # the harnesses sit mid-bucket

    contract(scenario)


def test_a_forming_candle_is_shown_closed_only_after_its_close_and_at_the_same_time(contract):
    async def scenario(h):
        before = await h.market.series(h.symbol, INTERVAL)
        forming = int(before.timestamp_ms[-1])
        h.advance(forming + BAR - h.market.now_ms() - 1)  # one ms before the close
        still = await h.market.series(h.symbol, INTERVAL)
        assert int(still.timestamp_ms[-1]) == forming and not still.last_complete
        h.advance(1)  # exactly at the close
        closed = await h.market.series(h.symbol, INTERVAL)
        assert_closed_rule(closed, h.market.now_ms())
        index = closed.timestamp_ms.tolist().index(forming)
        assert index < len(closed) - 1 or closed.last_complete

    contract(scenario)


def test_unknown_symbols_are_not_found_everywhere(contract):
    async def scenario(h):
        for call in (
            lambda: h.market.series("NOPE/USDT", INTERVAL),
            lambda: h.market.ticker("NOPE/USDT"),
            lambda: h.market.order_book("NOPE/USDT", 5),
        ):
            with pytest.raises(NotFoundError):
                await call()
        with pytest.raises(NotFoundError):
            h.market.intervals("NOPE/USDT")

    contract(scenario)


def test_unknown_and_malformed_intervals_are_refused(contract):
    async def scenario(h):
        with pytest.raises(NotFoundError):
            await h.market.series(h.symbol, "7m")
        with pytest.raises(InvalidParameterError):
            await h.market.series(h.symbol, "hourly")

    contract(scenario)


def test_what_exists_is_stated(contract):
    async def scenario(h):
        assert h.symbol in h.market.symbols()
        assert INTERVAL in h.market.intervals(h.symbol)
        assert h.market.price_decimals(h.symbol) >= 0
        assert isinstance(h.market.now_ms(), int)
        prefix = h.market.prefix_source(h.symbol, INTERVAL)
        if prefix is not None:  # a prefix source must agree with the series it stands for
            series = await h.market.series(h.symbol, INTERVAL)
            closed = len(series) - (0 if series.last_complete else 1)
            assert prefix.visible == closed
            assert prefix.full.timestamp_ms[:closed].tolist() == \
                series.timestamp_ms[:closed].tolist()

    contract(scenario)


def test_ticker_and_book_are_coherent_and_the_book_honours_its_limit(contract):
    async def scenario(h):
        ticker = await h.market.ticker(h.symbol)
        assert ticker.symbol == h.symbol
        assert ticker.low_24h <= ticker.last_price <= ticker.high_24h
        book = await h.market.order_book(h.symbol, 7)
        assert 0 < len(book.bids) <= 7 and 0 < len(book.asks) <= 7
        assert [b.price for b in book.bids] == sorted((b.price for b in book.bids), reverse=True)
        assert [a.price for a in book.asks] == sorted(a.price for a in book.asks)
        assert book.best_bid < book.best_ask

    contract(scenario)
