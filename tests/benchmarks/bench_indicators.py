"""Benchmark: the cost of calculate_technical_indicator in a replay, as history grows.

Run with ``python tests/benchmarks/bench_indicators.py`` or
``pytest tests/benchmarks/bench_indicators.py -s``.

1. Replay scaling: RSI(14) and MACD(12,26,9), values=2, called through a real ToolExecutor at every
   bar of the last ``REPLAY_BARS`` bars of a replay whose history holds 1,000, 10,000 and 50,000
   hourly candles. The median cost per call should not depend on history (target: 50k/1k < 2x),
   because the engine computes the whole series once and slices it at the cursor.
2. The cached call: parse + validate + execute (cache hit) + render, median (target < 300 us),
   against the named baseline "uncached": the same call computed over the visible candles.

History longer than the real data (20,000 Coinbase BTC/USD hourly candles, 2017-2019) is built by
appending copies of it with timestamps shifted to follow on, and prices scaled so that each copy
opens where the previous one closed: real bar-to-bar movements, continued in time.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))

from app.domain.clock import ReplayClock  # noqa: E402
from app.indicators.engine import IndicatorEngine  # noqa: E402
from app.market.csv_loader import LoadedFile, load_csv  # noqa: E402
from app.market.replay import ReplayMarketData  # noqa: E402
from app.market.series import KlineSeries  # noqa: E402
from app.tools.executor import MemoryRecorder, ToolExecutor  # noqa: E402
from app.tools.indicator_tools import IndicatorTools  # noqa: E402
from app.tools.registry import ToolRegistry  # noqa: E402
from app.tools.spec import AgentContext  # noqa: E402

DATA = REPO / "resources" / "sample_data" / "BTC-USD_1h_20170701-20191017_coinbase.csv"
HISTORIES = (1_000, 10_000, 50_000)
REPLAY_BARS = 900  # every bar of the 1k history after a 100-bar warm-up
CACHED_REPEATS = 2_000
UNCACHED_REPEATS = 15
CTX = AgentContext("bench")
pytestmark = pytest.mark.benchmark
CALLS = {
    "RSI(14)": "<calculate_technical_indicator><symbol>BTC/USD</symbol><interval>1h</interval>"
    "<indicator_name>RSI</indicator_name><params><param name=\"length\">14</param></params>"
    "<values>2</values></calculate_technical_indicator>",
    "MACD(12,26,9)": "<calculate_technical_indicator><symbol>BTC/USD</symbol><interval>1h"
    "</interval><indicator_name>MACD</indicator_name><params><param name=\"fast\">12</param>"
    "<param name=\"slow\">26</param><param name=\"signal\">9</param></params><values>2</values>"
    "</calculate_technical_indicator>",
}


def extended(loaded: LoadedFile, bars: int) -> LoadedFile:
    """``bars`` candles: the real series, continued by shifted, price-scaled copies of itself."""
    base = loaded.series
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("t", "o", "h", "l", "c", "v")}
    have, offset, scale = 0, 0, 1.0
    span = int(base.timestamp_ms[-1] - base.timestamp_ms[0]) + loaded.bar_ms
    while have < bars:
        parts["t"].append(base.timestamp_ms + offset)
        for key, column in (("o", base.open), ("h", base.high), ("l", base.low),
                            ("c", base.close)):
            parts[key].append(column * scale)
        parts["v"].append(base.volume)
        have += len(base)
        scale = float(parts["c"][-1][-1] / base.open[0])
        offset += span
    joined = {key: np.concatenate(value)[:bars] for key, value in parts.items()}
    series = KlineSeries(base.symbol, base.interval, joined["t"], joined["o"], joined["h"],
                         joined["l"], joined["c"], joined["v"])
    return LoadedFile(loaded.path, series, loaded.bar_ms, 0, loaded.price_decimals)


class NoPrefix:
    """The same market without a prefix: every call computes over the visible candles."""

    def __init__(self, market: ReplayMarketData) -> None:
        self._market = market

    def __getattr__(self, name: str):
        return getattr(self._market, name)

    def prefix_source(self, symbol: str, interval: str) -> None:
        return None


def rig(loaded: LoadedFile, cached: bool = True) -> tuple[ReplayClock, ToolExecutor]:
    clock = ReplayClock(0)
    market = ReplayMarketData(clock, [loaded])
    source = market if cached else NoPrefix(market)
    tools = IndicatorTools(source, IndicatorEngine()).specs()  # type: ignore[arg-type]
    return clock, ToolExecutor(ToolRegistry(tools), MemoryRecorder(capacity=100))


async def timed(executor: ToolExecutor, xml: str) -> float:
    started = time.perf_counter()
    result = await executor.execute_text(CTX, xml)
    elapsed = time.perf_counter() - started
    assert result is not None and result.ok, result
    return elapsed


async def replay_costs(loaded: LoadedFile) -> dict[str, tuple[float, float]]:
    """(median, mean) seconds per call while the cursor walks the last REPLAY_BARS bars."""
    clock, executor = rig(loaded)
    closes = loaded.series.timestamp_ms + loaded.bar_ms
    costs: dict[str, list[float]] = {name: [] for name in CALLS}
    for close_ms in closes[-REPLAY_BARS:]:
        clock.advance_to(int(close_ms))
        for name, xml in CALLS.items():
            costs[name].append(await timed(executor, xml))
    return {name: (statistics.median(v), statistics.fmean(v)) for name, v in costs.items()}


async def cached_vs_uncached(loaded: LoadedFile) -> dict[str, tuple[float, float]]:
    """(cached median, uncached median) seconds for one call at the newest bar."""
    out = {}
    for name, xml in CALLS.items():
        clock, executor = rig(loaded)
        clock.advance_to(int(loaded.series.timestamp_ms[-1]) + loaded.bar_ms)
        await timed(executor, xml)  # fill the cache
        cached = [await timed(executor, xml) for _ in range(CACHED_REPEATS)]
        clock, plain = rig(loaded, cached=False)
        clock.advance_to(int(loaded.series.timestamp_ms[-1]) + loaded.bar_ms)
        uncached = [await timed(plain, xml) for _ in range(UNCACHED_REPEATS)]
        out[name] = (statistics.median(cached), statistics.median(uncached))
    return out


def run() -> dict[str, float]:
    real = load_csv(DATA)
    print(f"data: {DATA.name} ({len(real.series)} real candles); longer histories continue it "
          "with time-shifted, price-scaled copies of itself")
    medians: dict[int, dict[str, tuple[float, float]]] = {}
    for bars in HISTORIES:
        medians[bars] = asyncio.run(replay_costs(extended(real, bars)))
        row = ", ".join(f"{name} median {med * 1e6:7.1f} us (mean {mean * 1e6:7.1f} us)"
                        for name, (med, mean) in medians[bars].items())
        print(f"history {bars:>6} bars, call at each of the last {REPLAY_BARS} bars: {row}")
    results: dict[str, float] = {}
    for name in CALLS:
        ratio = medians[HISTORIES[-1]][name][0] / medians[HISTORIES[0]][name][0]
        results[f"scaling {name}"] = ratio
        print(f"{name}: median per call 50k/1k = {ratio:.2f}x (target < 2x)")
    head_to_head = asyncio.run(cached_vs_uncached(extended(real, HISTORIES[-1])))
    for name, (cached, uncached) in head_to_head.items():
        results[f"cached {name}"] = cached
        print(f"{name} at 50k bars: parse+validate+execute(cached)+render median "
              f"{cached * 1e6:.1f} us (target < 300 us); baseline uncached {uncached * 1e3:.2f} "
              f"ms; uncached/cached = {uncached / cached:.0f}x")
    return results


def test_indicator_call_cost_is_flat_in_history_and_cached_calls_are_cheap() -> None:
    results = run()
    # loose bounds: a shared 2-core machine is noisy; the printed numbers are the measurement
    for name in CALLS:
        assert results[f"scaling {name}"] < 4.0
        assert results[f"cached {name}"] < 1e-3


if __name__ == "__main__":
    run()
