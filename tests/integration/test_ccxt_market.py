"""CcxtMarketData against ccxt's real binance and okx classes talking to the fake exchange."""

import asyncio
from decimal import Decimal

import pytest
from lxml import etree

from app.domain.errors import NotFoundError
from app.tools.executor import MemoryRecorder, ToolExecutor
from app.tools.market_tools import MarketTools
from app.tools.registry import ToolRegistry
from app.tools.spec import AgentContext
from tests.helpers.fake_exchange import Fault
from tests.helpers.fake_exchange.client import open_market
from tests.integration.ccxt_fixtures import (  # noqa: F401 - fixtures
    START_MS,
    VENUES,
    fake_exchange_fixture,
    server_fixture,
)

H = 3_600_000
FAR_FUTURE = START_MS + 400 * 86_400_000


def final_candles(server, symbol, bar, opens):
    """What the exchange shows for these candles once they are long closed."""
    tape = server.state.markets[symbol].tape
    return {o: tape.candle(o, bar, FAR_FUTURE) for o in opens}


@pytest.mark.parametrize("venue", VENUES)
def test_symbols_intervals_rules_and_fees_come_from_the_exchanges_markets(server, venue):
    async def scenario():
        market = await open_market(server, venue)
        try:
            assert market.symbols() == ("BTC/USDT", "ETH/USDT")
            intervals = market.intervals("BTC/USDT")
            assert {"1m", "5m", "1h", "4h", "1d", "1w"} <= set(intervals)
            assert "1M" not in intervals  # months have no fixed close time
            rules = market.rules("BTC/USDT")
            tick = {"binance": Decimal("0.01"), "okx": Decimal("0.1")}[venue]
            assert rules.tick == tick and market.price_decimals("BTC/USDT") == -tick.as_tuple()[2]
            assert rules.min_amount == Decimal("0.00001")
            assert market.fees("BTC/USDT").taker > 0
        finally:
            await market.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("venue", VENUES)
def test_candles_are_the_closed_ones_plus_the_forming_one_marked(server, venue):
    async def scenario():
        market = await open_market(server, venue, history=400)
        try:
            series = await market.series("BTC/USDT", "1h")
        finally:
            await market.close()
        opens = series.timestamp_ms.tolist()
        assert len(opens) == 400 and opens == sorted(opens)
        assert opens[-1] == START_MS - START_MS % H  # the bucket now is in
        assert series.last_complete is False
        finals = final_candles(server, "BTC/USDT", H, opens[:-1])
        decimals = 2 if venue == "binance" else 1
        for i, o in enumerate(opens[:-1]):
            assert series.close[i] == round(finals[o].close, decimals)
            assert series.high[i] == round(finals[o].high, decimals)
        assert series.close[-1] != round(final_candles(server, "BTC/USDT", H, [opens[-1]])
                                         [opens[-1]].close, decimals)

    asyncio.run(scenario())


@pytest.mark.parametrize("venue", VENUES)
def test_reads_within_the_freshness_bound_ask_the_exchange_nothing(server, venue):
    async def scenario():
        market = await open_market(server, venue, history=100)
        try:
            first = await market.series("BTC/USDT", "1h")
            asked = server.count(venue, "klines")
            server.now.advance(1_000)
            again = await market.series("BTC/USDT", "1h")
            assert again is first and server.count(venue, "klines") == asked
        finally:
            await market.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("venue", VENUES)
def test_after_a_close_only_the_new_candles_are_fetched(server, venue):
    async def scenario():
        market = await open_market(server, venue, history=100)
        try:
            before = await market.series("BTC/USDT", "1h")
            forming = int(before.timestamp_ms[-1])
            asked = server.count(venue, "klines")
            server.now.advance(2 * H)
            after = await market.series("BTC/USDT", "1h")
        finally:
            await market.close()
        assert server.count(venue, "klines") == asked + 1
        query = [r for r in server.requests if r.endpoint == "klines"][-1].query
        start = int(query["startTime"]) if venue == "binance" else int(query["before"]) + 1
        assert start == forming  # from the candle that was forming, not the whole history
        assert len(after) == 100
        assert after.timestamp_ms[-1] == forming + 2 * H and not after.last_complete
        final = final_candles(server, "BTC/USDT", H, [forming])[forming]
        i = after.timestamp_ms.tolist().index(forming)
        decimals = 2 if venue == "binance" else 1
        assert after.close[i] == round(final.close, decimals)  # refetched, now closed

    asyncio.run(scenario())


@pytest.mark.parametrize("venue", VENUES)
def test_concurrent_reads_of_one_series_share_one_request(server, venue):
    async def scenario():
        market = await open_market(server, venue, history=50)
        try:
            results = await asyncio.gather(*(market.series("ETH/USDT", "5m") for _ in range(6)))
        finally:
            await market.close()
        assert all(r is results[0] for r in results)
        assert server.count(venue, "klines") == 1

    asyncio.run(scenario())


@pytest.mark.parametrize("venue", VENUES)
def test_ticker_and_order_book_are_the_exchanges_own(server, venue):
    async def scenario():
        market = await open_market(server, venue)
        try:
            ticker = await market.ticker("BTC/USDT")
            book = await market.order_book("BTC/USDT", 20)
            again = await market.order_book("BTC/USDT", 5)
        finally:
            await market.close()
        last = server.state.last("BTC/USDT")
        assert float(ticker.last_price) == pytest.approx(last, abs=0.1)
        assert ticker.low_24h <= ticker.last_price <= ticker.high_24h
        assert len(book.bids) == len(book.asks) == 20
        assert [lvl.price for lvl in book.bids] == sorted((lvl.price for lvl in book.bids),
                                                         reverse=True)
        assert [lvl.price for lvl in book.asks] == sorted(lvl.price for lvl in book.asks)
        assert book.best_bid < book.best_ask
        assert again.bids == book.bids[:5]
        assert server.count(venue, "depth") == 1  # the deeper cached book served the shallower

    asyncio.run(scenario())


@pytest.mark.parametrize("venue", VENUES)
def test_an_unknown_symbol_names_the_closest_and_asks_the_exchange_nothing(server, venue):
    async def scenario():
        market = await open_market(server, venue)
        try:
            with pytest.raises(NotFoundError, match=f"{venue} has no spot market 'BTC/USD'") as e:
                await market.series("BTC/USD", "1h")
            assert "BTC/USDT" in e.value.details["closest"]
            with pytest.raises(NotFoundError, match="Closest: BTC/USDT"):
                await market.ticker("btcusdt")
            with pytest.raises(NotFoundError, match="Available intervals"):
                await market.series("BTC/USDT", "7m")
        finally:
            await market.close()
        assert server.count(venue, "klines") == server.count(venue, "ticker") == 0

    asyncio.run(scenario())


class Skewed:
    def __init__(self, base, delta_ms):
        self.base, self.delta = base, delta_ms

    def now_ms(self):
        return self.base.now_ms() + self.delta


@pytest.mark.parametrize("venue", VENUES)
def test_now_is_the_exchanges_clock_even_when_the_local_clock_is_off(server, venue):
    async def scenario():
        market = await open_market(server, venue, clock=Skewed(server.now, -45_000))
        try:
            assert market.clock_offset_ms == 45_000
            assert market.now_ms() == server.now.now_ms()
        finally:
            await market.close()

    asyncio.run(scenario())


CTX = AgentContext("analyst-1", watched_symbols=("BTC/USDT",), interval="1h")


def run_tool(market, xml):
    executor = ToolExecutor(ToolRegistry(MarketTools(market).specs()), MemoryRecorder())
    return executor.execute_text(CTX, xml)


@pytest.mark.parametrize("venue", VENUES)
def test_the_market_tools_work_unchanged_over_the_live_adapter(server, venue):
    async def scenario():
        market = await open_market(server, venue, history=200)
        try:
            klines = await run_tool(market, "<get_historical_klines><symbol>BTC/USDT</symbol>"
                                    "<interval>1h</interval><limit>5</limit>"
                                    "</get_historical_klines>")
            snap = await run_tool(market, "<get_market_snapshot></get_market_snapshot>")
            book = await run_tool(market, "<get_order_book><symbol>BTC/USDT</symbol>"
                                  "<limit>3</limit></get_order_book>")
            tick = await run_tool(market, "<get_current_ticker_info><symbols><symbol>ETH/USDT"
                                  "</symbol></symbols></get_current_ticker_info>")
        finally:
            await market.close()
        for result in (klines, snap, book, tick):
            assert result.ok, result.xml
        rows = etree.fromstring(klines.xml).findall("./data/klines_data/kline")
        assert len(rows) == 5
        assert int(rows[-1].get("timestamp_ms")) == START_MS - START_MS % H
        bar = etree.fromstring(snap.xml).find("./data/market_snapshot/bar")
        assert bar.get("complete") == "false" and bar.get("symbol") == "BTC/USDT"
        assert len(etree.fromstring(book.xml).findall("./data/order_book_data/bids/level")) == 3
        assert etree.fromstring(tick.xml).find("./data/tickers_data/ticker").get("symbol") == \
            "ETH/USDT"

    asyncio.run(scenario())


@pytest.mark.parametrize("venue", VENUES)
def test_a_failing_data_tool_answers_with_an_envelope_naming_the_exchange_and_what_to_do(
        server, venue):
    async def scenario():
        market = await open_market(server, venue)
        try:
            server.fail(venue, "klines", Fault.status(503), times=None)
            return await run_tool(market, "<get_historical_klines><symbol>BTC/USDT</symbol>"
                                  "<interval>4h</interval></get_historical_klines>")
        finally:
            await market.close()

    result = asyncio.run(scenario())
    assert not result.ok
    root = etree.fromstring(result.xml)
    assert root.findtext("./status") == "error"
    assert result.error_code.value == "NETWORK_ERROR"
    assert result.message.startswith(f"{venue}: fetching BTC/USDT 4h candles failed after 3 "
                                     "retries")
    assert "try again" in result.message
    assert result.details["exchange"] == venue and result.details["kind"] == "temporary"
