"""The four market data tools through the real executor, values checked against the data file."""

import asyncio

import pandas as pd
import pytest
from lxml import etree

from app.domain.clock import ReplayClock
from app.market.replay import ReplayMarketData
from app.tools.executor import MemoryRecorder, ToolExecutor
from app.tools.market_tools import MarketTools
from app.tools.registry import ToolRegistry
from app.tools.spec import AgentContext
from tests.helpers.paths import BTC_USD_1D, BTC_USD_1H, BTC_USDT_1H

HOUR = 3_600_000
FRAME = pd.read_csv(BTC_USD_1H)
CURSOR_INDEX = 20011  # 2019-10-13: both BTC/USD and BTC/USDT have data
CURSOR = int(FRAME.timestamp_ms[CURSOR_INDEX]) + HOUR


@pytest.fixture()
def executor() -> ToolExecutor:
    clock = ReplayClock(0)
    market = ReplayMarketData.from_paths(clock, [BTC_USD_1H, BTC_USD_1D, BTC_USDT_1H])
    clock.advance_to(CURSOR)
    return ToolExecutor(ToolRegistry(MarketTools(market).specs()), MemoryRecorder(), clock)


CTX = AgentContext("analyst-1", watched_symbols=("BTC/USD",), interval="1h")


def run(executor: ToolExecutor, xml: str):
    result = asyncio.run(executor.execute_text(CTX, xml))
    assert result is not None
    root = etree.fromstring(result.xml)
    return result, root


def test_klines_default_to_the_last_100_visible_candles(executor):
    result, root = run(
        executor,
        "<get_historical_klines><symbol>BTC/USD</symbol><interval>1h</interval></get_historical_klines>",
    )
    assert result.ok
    klines = root.findall("./data/klines_data/kline")
    assert len(klines) == 100
    expected = FRAME.iloc[CURSOR_INDEX - 99 : CURSOR_INDEX + 1]
    assert [int(k.get("timestamp_ms")) for k in klines] == expected.timestamp_ms.tolist()
    last = klines[-1]
    row = FRAME.iloc[CURSOR_INDEX]
    assert float(last.get("open")) == row.open
    assert float(last.get("high")) == row.high
    assert float(last.get("low")) == row.low
    assert float(last.get("close")) == row.close
    assert float(last.get("volume")) == pytest.approx(row.volume)


@pytest.mark.parametrize("limit", [3, 40])  # a few candles and a slice take two paths
def test_each_candle_carries_its_open_time_in_iso_beside_the_milliseconds(executor, limit):
    _, root = run(
        executor,
        "<get_historical_klines><symbol>BTC/USD</symbol><interval>1h</interval>"
        f"<limit>{limit}</limit></get_historical_klines>",
    )
    klines = root.findall("./data/klines_data/kline")
    assert len(klines) == limit
    for kline in klines:
        stamp = pd.Timestamp(int(kline.get("timestamp_ms")), unit="ms", tz="UTC")
        assert kline.get("time_iso") == stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert klines[-1].get("time_iso") == "2019-10-13T06:00:00Z"
    _, snapshot = run(
        executor, "<get_market_snapshot><symbol>BTC/USD</symbol></get_market_snapshot>"
    )
    (bar,) = snapshot.findall("./data/market_snapshot/bar")
    assert bar.get("time_iso") == klines[-1].get("time_iso")


def test_klines_honour_limit_and_end_time(executor):
    end = int(FRAME.timestamp_ms[19000])
    _, root = run(
        executor,
        "<get_historical_klines><symbol>BTC/USD</symbol><interval>1h</interval><limit>5</limit>"
        f"<end_time_ms>{end}</end_time_ms></get_historical_klines>",
    )
    stamps = [int(k.get("timestamp_ms")) for k in root.iter("kline")]
    assert stamps == FRAME.timestamp_ms[18995:19000].tolist()


def test_klines_limit_above_1000_is_refused_with_the_range(executor):
    result, _ = run(
        executor,
        "<get_historical_klines><symbol>BTC/USD</symbol><interval>1h</interval><limit>1001</limit>"
        "</get_historical_klines>",
    )
    assert result.error_code == "INVALID_PARAMETER"
    assert "at most 1000" in result.message


def test_klines_never_show_a_candle_after_the_cursor(executor):
    _, root = run(
        executor,
        "<get_historical_klines><symbol>BTC/USD</symbol><interval>1h</interval><limit>1000</limit>"
        f"<end_time_ms>{CURSOR + 100 * HOUR}</end_time_ms></get_historical_klines>",
    )
    assert (
        max(int(k.get("timestamp_ms")) for k in root.iter("kline"))
        == FRAME.timestamp_ms[CURSOR_INDEX]
    )


def test_ticker_serves_several_symbols_in_one_call(executor):
    result, root = run(
        executor,
        "<get_current_ticker_info><symbols><symbol>BTC/USD</symbol><symbol>BTC/USDT</symbol>"
        "</symbols></get_current_ticker_info>",
    )
    assert result.ok
    tickers = root.findall("./data/tickers_data/ticker")
    assert [t.get("symbol") for t in tickers] == ["BTC/USD", "BTC/USDT"]
    assert float(tickers[0].get("last_price")) == FRAME.close[CURSOR_INDEX]
    window = FRAME.iloc[CURSOR_INDEX - 23 : CURSOR_INDEX + 1]
    assert float(tickers[0].get("high_24h")) == window.high.max()


def test_ticker_with_an_unknown_symbol_names_it_and_what_exists(executor):
    result, _ = run(
        executor,
        "<get_current_ticker_info><symbols><symbol>DOGE/USDT</symbol></symbols></get_current_ticker_info>",
    )
    assert result.error_code == "NOT_FOUND"
    assert "DOGE/USDT" in result.message and "BTC/USD, BTC/USDT" in result.message


def test_ticker_without_symbols_is_a_missing_parameter(executor):
    result, _ = run(executor, "<get_current_ticker_info></get_current_ticker_info>")
    assert result.error_code == "MISSING_PARAMETER"


def test_order_book_defaults_to_ten_levels_and_caps_at_100(executor):
    result, root = run(executor, "<get_order_book><symbol>BTC/USD</symbol></get_order_book>")
    assert result.ok
    assert len(root.findall("./data/order_book_data/bids/level")) == 10
    assert len(root.findall("./data/order_book_data/asks/level")) == 10
    best_bid = float(root.find("./data/order_book_data/bids/level").get("price"))
    best_ask = float(root.find("./data/order_book_data/asks/level").get("price"))
    assert best_bid <= FRAME.close[CURSOR_INDEX] <= best_ask
    result, _ = run(
        executor, "<get_order_book><symbol>BTC/USD</symbol><limit>101</limit></get_order_book>"
    )
    assert result.error_code == "INVALID_PARAMETER"


def test_snapshot_defaults_to_the_watched_symbols_current_bar(executor):
    result, root = run(executor, "<get_market_snapshot></get_market_snapshot>")
    assert result.ok
    snapshot = root.find("./data/market_snapshot")
    assert int(snapshot.get("time_ms")) == CURSOR
    bars = snapshot.findall("bar")
    assert [b.get("symbol") for b in bars] == ["BTC/USD"]
    assert float(bars[0].get("close")) == FRAME.close[CURSOR_INDEX]


def test_snapshot_of_a_forming_four_hour_bar_says_it_is_incomplete(executor):
    _, root = run(
        executor,
        "<get_market_snapshot><symbol>BTC/USD</symbol><interval>4h</interval></get_market_snapshot>",
    )
    bar = root.find("./data/market_snapshot/bar")
    bucket = (CURSOR - HOUR) // (4 * HOUR) * (4 * HOUR)
    assert int(bar.get("timestamp_ms")) == bucket
    assert bar.get("complete") == ("true" if CURSOR % (4 * HOUR) == 0 else "false")


def test_malformed_interval_is_an_invalid_parameter(executor):
    result, _ = run(
        executor,
        "<get_historical_klines><symbol>BTC/USD</symbol><interval>hourly</interval></get_historical_klines>",
    )
    assert result.error_code == "INVALID_PARAMETER"
    assert "1h" in result.message


def test_every_call_is_recorded_with_its_duration(executor):
    run(executor, "<get_order_book><symbol>BTC/USD</symbol></get_order_book>")
    run(executor, "<get_order_book><symbol>NOPE</symbol></get_order_book>")
    entries = list(executor._recorder.entries)
    assert [(e.tool_name, e.status) for e in entries] == [
        ("get_order_book", "success"),
        ("get_order_book", "error"),
    ]
    assert entries[0].params == {"symbol": "BTC/USD", "limit": 10}
    assert all(e.duration_ms >= 0 and e.agent_id == "analyst-1" for e in entries)
