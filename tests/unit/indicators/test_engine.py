"""The engine's execution model: a replay computes each (series, indicator, params) once and slices
it; anything else is computed off the event loop; the cache stays bounded."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pandas as pd

from app.domain.clock import ReplayClock
from app.indicators.engine import IndicatorEngine
from app.indicators.model import Catalogue, IndicatorDef, ParamDef
from app.market.replay import ReplayMarketData
from tests.unit.indicators.test_indicator_tools import NoPrefix


class Recorder:
    """A trivially simple indicator (rolling mean) that records where and how often it runs."""

    def __init__(self) -> None:
        self.threads: list[int] = []

    def __call__(self, close: pd.Series, length: int) -> pd.Series:
        self.threads.append(threading.get_ident())
        return close.rolling(length).mean().rename(f"AVG_{length}")


def _indicator(name: str, recorder: Recorder) -> IndicatorDef:
    return IndicatorDef(
        name, "overlap", "Rolling mean, recording its calls.", recorder, ("close",),
        (ParamDef("length", int, 5, 2, 50, "Window."),), (("value", "AVG"),),
        lambda p: int(p["length"]),
    )


def _market(btc_usdt_file, bars: int) -> tuple[ReplayClock, ReplayMarketData]:
    clock = ReplayClock(0)
    market = ReplayMarketData(clock, [btc_usdt_file])
    clock.advance_to(int(btc_usdt_file.series.timestamp_ms[bars - 1]) + btc_usdt_file.bar_ms)
    return clock, market


def test_a_replay_computes_once_and_answers_later_cursors_from_the_cache(btc_usdt_file) -> None:
    recorder = Recorder()
    indicator = _indicator("AVG", recorder)
    engine = IndicatorEngine(Catalogue((indicator,)))
    clock, market = _market(btc_usdt_file, 100)

    async def walk() -> list[float]:
        latest = []
        for bars in range(100, 160):
            clock.advance_to(int(btc_usdt_file.series.timestamp_ms[bars - 1]) + 3_600_000)
            values = await engine.latest(market, "BTC/USDT", "1h", indicator, {"length": 5}, 1)
            latest.append(float(values.columns["value"][-1]))
        return latest

    latest = asyncio.run(walk())
    assert len(recorder.threads) == 1
    closes = btc_usdt_file.series.close
    expected = [float(closes[bars - 5:bars].mean()) for bars in range(100, 160)]
    np.testing.assert_allclose(latest, expected, rtol=1e-12)


def test_uncached_computation_runs_off_the_event_loop_thread(btc_usdt_file) -> None:
    recorder = Recorder()
    indicator = _indicator("AVG", recorder)
    engine = IndicatorEngine(Catalogue((indicator,)))
    _, market = _market(btc_usdt_file, 100)

    async def twice() -> int:
        for _ in range(2):
            await engine.latest(NoPrefix(market), "BTC/USDT", "1h", indicator, {"length": 5}, 2)
        return threading.get_ident()

    loop_thread = asyncio.run(twice())
    assert len(recorder.threads) == 2  # no prefix, no cache: computed at every call
    assert loop_thread not in recorder.threads


def test_the_cache_keeps_only_the_most_recently_used_entries(btc_usdt_file) -> None:
    recorder = Recorder()
    indicator = _indicator("AVG", recorder)
    engine = IndicatorEngine(Catalogue((indicator,)), cache_size=2)
    _, market = _market(btc_usdt_file, 100)

    async def lengths(*values: int) -> None:
        for length in values:
            await engine.latest(market, "BTC/USDT", "1h", indicator, {"length": length}, 1)

    asyncio.run(lengths(5, 6, 7))
    assert engine.cached_entries == 2
    asyncio.run(lengths(6, 7))
    assert len(recorder.threads) == 3  # 6 and 7 were still cached
    asyncio.run(lengths(5))
    assert len(recorder.threads) == 4  # 5 had been evicted
