"""The replay market hides the future, resamples correctly, derives a coherent ticker and book."""

import numpy as np
import pandas as pd
import pytest

from app.domain.clock import ReplayClock
from app.domain.errors import InsufficientDataError, NotFoundError
from app.market.replay import ReplayMarketData
from tests.helpers.paths import BTC_USD_1D, BTC_USD_1H, BTC_USDT_1H

HOUR = 3_600_000


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return pd.read_csv(BTC_USD_1H)


def make_market(at_ms: int) -> tuple[ReplayMarketData, ReplayClock]:
    clock = ReplayClock(0)
    market = ReplayMarketData.from_paths(clock, [BTC_USD_1H, BTC_USD_1D, BTC_USDT_1H])
    clock.advance_to(at_ms)
    return market, clock


def test_only_candles_closed_by_the_cursor_are_visible(frame):
    open_ms = int(frame.timestamp_ms[5000])
    market, _ = make_market(open_ms + HOUR)  # bar 5000 just closed
    series = market.series_now("BTC/USD", "1h")
    assert len(series) == 5001
    assert series.timestamp_ms[-1] == open_ms
    market, _ = make_market(open_ms + HOUR - 1)  # one ms before it closes
    assert market.series_now("BTC/USD", "1h").timestamp_ms[-1] == frame.timestamp_ms[4999]


def test_four_hour_candles_aggregate_the_hourly_file_aligned_to_utc(frame):
    market, _ = make_market(int(frame.timestamp_ms.iloc[-1]) + HOUR)
    four = market.series_now("BTC/USD", "4h")
    assert (four.timestamp_ms % (4 * HOUR) == 0).all()
    t = pd.to_datetime(frame.timestamp_ms, unit="ms", utc=True)
    expected = (
        frame.set_index(t)
        .resample("4h", origin="epoch")
        .agg({"open": "first", "high": "max", "low": "min", "close": "last", "volume": "sum"})
        .dropna()
    )
    assert len(four) == len(expected)
    np.testing.assert_allclose(four.open, expected.open)
    np.testing.assert_allclose(four.high, expected.high)
    np.testing.assert_allclose(four.low, expected.low)
    np.testing.assert_allclose(four.close, expected.close)
    np.testing.assert_allclose(four.volume, expected.volume)


def test_the_current_bucket_is_a_forming_candle_built_only_from_closed_hours(frame):
    # 2019-01-01 00:00 + 2h: the 00:00 4h bucket has two closed hourly candles so far
    start = 1546300800000
    market, _ = make_market(start + 2 * HOUR)
    four = market.series_now("BTC/USD", "4h")
    assert four.timestamp_ms[-1] == start
    assert not four.last_complete
    hours = frame[(frame.timestamp_ms >= start) & (frame.timestamp_ms < start + 2 * HOUR)]
    assert four.open[-1] == hours.open.iloc[0]
    assert four.close[-1] == hours.close.iloc[-1]
    assert four.high[-1] == hours.high.max()
    assert four.volume[-1] == pytest.approx(hours.volume.sum())


def test_daily_requests_prefer_the_native_daily_file():
    market, _ = make_market(1546300800000)
    daily = market.series_now("BTC/USD", "1d")
    assert daily.timestamp_ms[0] == 1417392000000  # the 1d file starts in 2014; the 1h file in 2017


def test_unknown_symbol_and_interval_list_what_exists():
    market, _ = make_market(1546300800000)
    with pytest.raises(NotFoundError, match="Available symbols: BTC/USD, BTC/USDT"):
        market.series_now("ETH/USDT", "1h")
    with pytest.raises(NotFoundError, match="Available intervals: 1h, 2h, 4h"):
        market.series_now("BTC/USD", "5m")


def test_ticker_is_the_last_24_hours_of_visible_candles(frame):
    i = 10000
    market, _ = make_market(int(frame.timestamp_ms[i]) + HOUR)
    ticker = market.ticker_now("BTC/USD")
    window = frame.iloc[i - 23 : i + 1]
    assert float(ticker.last_price) == pytest.approx(frame.close[i])
    assert float(ticker.high_24h) == pytest.approx(window.high.max())
    assert float(ticker.low_24h) == pytest.approx(window.low.min())
    assert float(ticker.volume_24h) == pytest.approx(window.volume.sum(), rel=1e-9)
    change = (frame.close[i] - window.open.iloc[0]) / window.open.iloc[0] * 100
    assert float(ticker.change_percent_24h) == pytest.approx(change, abs=0.006)


def test_order_book_is_consistent_with_the_last_price(frame):
    market, _ = make_market(int(frame.timestamp_ms[12000]) + HOUR)
    book = market.order_book_now("BTC/USD", 20)
    last = market.ticker_now("BTC/USD").last_price
    assert len(book.bids) == len(book.asks) == 20
    assert book.bids[0].price <= last <= book.asks[0].price
    assert all(a.price > b.price for a, b in zip(book.bids, book.bids[1:], strict=False))
    assert all(a.price < b.price for a, b in zip(book.asks, book.asks[1:], strict=False))
    assert all(level.quantity > 0 for level in book.bids + book.asks)
    assert book == market.order_book_now("BTC/USD", 20)  # deterministic


def test_nothing_is_visible_before_the_first_candle_closes():
    market, _ = make_market(1498906800000)
    with pytest.raises(InsufficientDataError, match="No BTC/USD candles are visible yet"):
        market.ticker_now("BTC/USD")


def test_replay_clock_never_moves_backwards():
    clock = ReplayClock(100)
    with pytest.raises(ValueError, match="backwards"):
        clock.advance_to(99)


def test_a_malformed_interval_is_an_invalid_parameter_not_a_crash():
    from app.domain.errors import InvalidParameterError

    market, _ = make_market(1546300800000)
    with pytest.raises(InvalidParameterError, match="'7x' is not an interval"):
        market.series_now("BTC/USD", "7x")
    with pytest.raises(InvalidParameterError):
        market.prefix_source("BTC/USD", "7x")
