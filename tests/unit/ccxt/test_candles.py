"""The live candle rule: closed once open + bar <= now, only the newest forming, never stale."""

import numpy as np
import pytest

from app.ccxt.candles import MalformedCandles, merge, ordered, parse_ohlcv, snapshot

H = 3_600_000
T0 = 1_770_000_000_000 - 1_770_000_000_000 % H


def rows(*opens):
    return [[o, 100.0, 101.0, 99.0, 100.5, 2.0] for o in opens]


def snap(table, fetched_at, mono=0.0):
    return snapshot("BTC/USDT", "1h", table, bar_ms=H, fetched_at_ms=fetched_at,
                    fetched_mono_s=mono)


@pytest.mark.parametrize(
    ("fetched_at", "complete"),
    [(T0 + 2 * H - 1, False), (T0 + 2 * H, True), (T0 + 2 * H + 1, True)],
    ids=["one-ms-before-close", "at-close", "after-close"],
)
def test_the_newest_candle_is_closed_exactly_from_its_close_time_on(fetched_at, complete):
    s = snap(parse_ohlcv(rows(T0, T0 + H)), fetched_at).series
    assert s.last_complete is complete
    assert len(s) == 2


def test_a_candle_that_had_not_opened_at_the_fetch_is_not_shown():
    """A skewed exchange clock can hand out the next bucket early: it is not there yet."""
    s = snap(parse_ohlcv(rows(T0, T0 + H, T0 + 2 * H)), T0 + 2 * H - 5).series
    assert s.timestamp_ms.tolist() == [T0, T0 + H]
    assert s.last_complete is False


def test_a_snapshot_with_a_forming_candle_expires_at_that_candles_close():
    made = snap(parse_ohlcv(rows(T0, T0 + H)), T0 + H + 10, mono=100.0)
    assert made.valid_until_ms == T0 + 2 * H
    assert made.usable(T0 + 2 * H - 1, 101.0, max_age_s=5)
    assert not made.usable(T0 + 2 * H, 101.0, max_age_s=5)  # closed since: fetch again
    assert not made.usable(T0 + H + 20, 106.0, max_age_s=5)  # too old


def test_a_snapshot_without_the_forming_candle_expires_at_the_next_close():
    made = snap(parse_ohlcv(rows(T0, T0 + H)), T0 + 3 * H + 10)
    assert made.series.last_complete
    assert made.valid_until_ms == T0 + 4 * H


def test_a_refill_replaces_candles_from_its_start_even_when_it_brought_none():
    old = parse_ohlcv(rows(T0, T0 + H, T0 + 2 * H))
    assert merge(old, np.empty((0, 6)), since=T0 + 2 * H, keep=10)[:, 0].tolist() == [T0, T0 + H]
    new = parse_ohlcv(rows(T0 + 2 * H, T0 + 3 * H))
    merged = merge(old, new, since=T0 + 2 * H, keep=3)
    assert merged[:, 0].tolist() == [T0 + H, T0 + 2 * H, T0 + 3 * H]


def test_candles_are_sorted_and_deduplicated_keeping_the_later_copy():
    table = parse_ohlcv([[T0 + H, 1, 2, 1, 1, 1], [T0, 1, 2, 1, 1, 1], [T0 + H, 5, 6, 4, 5, 1]])
    out = ordered(table)
    assert out[:, 0].tolist() == [T0, T0 + H] and out[1, 1] == 5


@pytest.mark.parametrize(
    "bad",
    [[[T0, None, None, None, None, None]], [[T0, 1, 2]], "not a list", [[T0, 1, 0.5, 2, 1, 1]],
     [[T0, "x", 1, 1, 1, 1]]],
    ids=["nones", "short", "text", "high-below-low", "not-numeric"],
)
def test_malformed_candles_are_refused(bad):
    with pytest.raises(MalformedCandles):
        parse_ohlcv(bad)
