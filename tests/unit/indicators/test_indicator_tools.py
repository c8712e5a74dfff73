"""The indicator tools end to end: XML in through a real ToolExecutor, a replay market behind a
ReplayClock cursor, XML out; values checked against TA-Lib computed independently on the candles
visible at the cursor."""

from __future__ import annotations

import asyncio
import dataclasses
from decimal import Decimal

import numpy as np
import pytest
import talib

from app.domain.clock import ReplayClock
from app.domain.errors import ErrorCode
from app.indicators.engine import IndicatorEngine
from app.market.csv_loader import LoadedFile
from app.market.replay import ReplayMarketData
from app.tools.executor import MemoryRecorder, ToolExecutor
from app.tools.indicator_tools import IndicatorTools
from app.tools.protocol.render import Element, ToolResult
from app.tools.registry import ToolRegistry
from app.tools.spec import AgentContext, Permission

CTX = AgentContext("analyst-1")
SYMBOL = "BTC/USDT"
HOUR = 3_600_000


@dataclasses.dataclass
class Rig:
    clock: ReplayClock
    market: ReplayMarketData
    engine: IndicatorEngine
    executor: ToolExecutor
    loaded: LoadedFile

    def show_bars(self, count: int) -> None:
        """Move the cursor to the close of bar ``count`` (so ``count`` candles are visible)."""
        stamps = self.loaded.series.timestamp_ms
        self.clock.advance_to(int(stamps[count - 1]) + self.loaded.bar_ms)

    def call(self, xml: str) -> ToolResult:
        result = asyncio.run(self.executor.execute_text(CTX, xml))
        assert result is not None
        return result


def make_rig(loaded: LoadedFile, bars: int) -> Rig:
    clock = ReplayClock(0)
    market = ReplayMarketData(clock, [loaded])
    engine = IndicatorEngine()
    executor = ToolExecutor(ToolRegistry(IndicatorTools(market, engine).specs()), MemoryRecorder())
    rig = Rig(clock, market, engine, executor, loaded)
    rig.show_bars(bars)
    return rig


def calc(name: str, params: dict[str, str] | None = None, values: int | None = None,
         interval: str = "1h", symbol: str = SYMBOL) -> str:
    body = "".join(f'<param name="{k}">{v}</param>' for k, v in (params or {}).items())
    parts = [f"<symbol>{symbol}</symbol>", f"<interval>{interval}</interval>",
             f"<indicator_name>{name}</indicator_name>"]
    if params is not None:
        parts.append(f"<params>{body}</params>")
    if values is not None:
        parts.append(f"<values>{values}</values>")
    return f"<calculate_technical_indicator>{''.join(parts)}</calculate_technical_indicator>"


def points(result: ToolResult) -> list[Element]:
    assert result.status == "success", result.xml
    (payload,) = result.data
    assert payload.tag == "indicator_data"
    return payload.find_all("point")


def column(result: ToolResult, name: str) -> np.ndarray:
    return np.array([float(Decimal(p.attr(name))) for p in points(result)])


def assert_matches(ours: np.ndarray, ref: np.ndarray) -> None:
    np.testing.assert_allclose(ours, ref, rtol=2e-9, atol=1e-9)  # ten significant digits


@pytest.fixture
def rig(btc_usdt_file: LoadedFile) -> Rig:
    return make_rig(btc_usdt_file, 500)  # enough for recursive seeds to converge to TA-Lib's


def test_rsi_values_match_talib_on_the_candles_visible_at_the_cursor(rig: Rig) -> None:
    result = rig.call(calc("RSI", values=3))
    visible = rig.loaded.series.head(500)
    payload = result.data[0]
    assert (payload.attr("name"), payload.attr("symbol"), payload.attr("interval")) == (
        "RSI", SYMBOL, "1h"
    )
    assert payload.attr("params") == "length=14"
    assert [int(p.attr("timestamp_ms")) for p in points(result)] == list(visible.timestamp_ms[-3:])
    assert_matches(column(result, "value"), talib.RSI(visible.close, 14)[-3:])


def test_macd_reports_effective_params_and_matches_talib(rig: Rig) -> None:
    result = rig.call(calc("macd", {"fast": "8"}))
    assert result.data[0].attr("params") == "fast=8,slow=26,signal=9"
    macd, signal, hist = talib.MACD(rig.loaded.series.head(500).close, 8, 26, 9)
    assert_matches(column(result, "macd"), macd[-2:])
    assert_matches(column(result, "signal"), signal[-2:])
    assert_matches(column(result, "histogram"), hist[-2:])


def test_bbands_with_period_alias_and_float_param(rig: Rig) -> None:
    result = rig.call(calc("bBands", {"period": "10", "std": "2.5"}, values=5))
    assert result.data[0].attr("params") == "length=10,std=2.5"
    upper, middle, lower = talib.BBANDS(rig.loaded.series.head(500).close, 10, 2.5, 2.5)
    assert_matches(column(result, "upper"), upper[-5:])
    assert_matches(column(result, "middle"), middle[-5:])
    assert_matches(column(result, "lower"), lower[-5:])
    assert len(points(result)) == 5


def test_values_are_decimal_strings_of_ten_significant_digits(rig: Rig) -> None:
    result = rig.call(calc("EMA", values=50))
    for point in points(result):
        text = point.attr("value")
        assert "e" not in text.lower()
        assert len(text.replace(".", "").lstrip("0")) <= 10


def test_a_forming_candle_of_a_resampled_interval_is_computed_over_the_visible_series(
    rig: Rig,
) -> None:
    for _ in range(4):  # step hour by hour until the current 4h bucket is still forming
        rig.clock.advance_to(rig.clock.now_ms() + HOUR)
        visible = rig.market.series_now(SYMBOL, "4h")
        if not visible.last_complete:
            break
    assert not visible.last_complete
    result = rig.call(calc("SMA", {"length": "5"}, interval="4h"))
    assert int(points(result)[-1].attr("timestamp_ms")) == int(visible.timestamp_ms[-1])
    assert_matches(column(result, "value"), talib.SMA(visible.close, 5)[-2:])


def test_list_shows_every_indicator_or_one_category(rig: Rig) -> None:
    result = rig.call("<list_technical_indicators></list_technical_indicators>")
    listed = result.data[0].find_all("indicator")
    assert len(listed) == len(rig.engine.catalogue) >= 40
    macd = next(item for item in listed if item.attr("name") == "MACD")
    assert macd.attr("outputs") == "macd,signal,histogram"
    assert macd.attr("category") == "momentum"
    trend = rig.call("<list_technical_indicators><category>Trend</category>"
                     "</list_technical_indicators>").data[0].find_all("indicator")
    assert trend and {item.attr("category") for item in trend} == {"trend"}
    bad = rig.call("<list_technical_indicators><category>magic</category>"
                   "</list_technical_indicators>")
    assert bad.error_code is ErrorCode.INVALID_PARAMETER


def test_describe_lists_parameters_with_defaults_and_ranges(rig: Rig) -> None:
    result = rig.call("<describe_technical_indicator><indicator_name>rsi</indicator_name>"
                      "</describe_technical_indicator>")
    described = result.data[0]
    assert (described.attr("name"), described.attr("category"), described.attr("outputs")) == (
        "RSI", "momentum", "value"
    )
    assert described.attr("min_bars") == "15"
    (param,) = described.find_all("param")
    assert {k: param.attr(k) for k in ("name", "type", "default", "min", "max")} == {
        "name": "length", "type": "int", "default": "14", "min": "2", "max": "500"
    }
    bbands = rig.call("<describe_technical_indicator><indicator_name>BBANDS</indicator_name>"
                      "</describe_technical_indicator>").data[0]
    assert [p.attr("type") for p in bbands.find_all("param")] == ["int", "float"]


@pytest.mark.parametrize(
    ("xml", "code", "fragments"),
    [
        (calc("MCAD"), ErrorCode.UNKNOWN_INDICATOR, ["MACD"]),
        (calc("RSI", {"lenght": "14"}), ErrorCode.INVALID_PARAMETER, ["lenght", "length"]),
        (calc("RSI", {"length": "1000"}), ErrorCode.INVALID_PARAMETER, ["between 2 and 500"]),
        (calc("RSI", {"length": "fourteen"}), ErrorCode.INVALID_PARAMETER, ["whole number"]),
        (calc("BBANDS", {"std": "two"}), ErrorCode.INVALID_PARAMETER, ["number"]),
        (calc("MACD", {"fast": "40"}), ErrorCode.INVALID_PARAMETER, ["smaller than 'slow'"]),
        (calc("RSI", values=501), ErrorCode.INVALID_PARAMETER, ["at most 500"]),
        (calc("RSI", symbol="DOGE/USDT"), ErrorCode.NOT_FOUND, ["DOGE/USDT", "BTC/USDT"]),
        (calc("RSI", interval="7x"), ErrorCode.INVALID_PARAMETER, ["'7x'"]),
        (calc("RSI", interval="1m"), ErrorCode.NOT_FOUND, ["1m"]),
        (calc("ICHIMOKU", values=450), ErrorCode.INSUFFICIENT_DATA, ["needs 526 bars", "500"]),
    ],
)
def test_each_documented_error_is_specific(rig: Rig, xml: str, code: ErrorCode,
                                           fragments: list[str]) -> None:
    result = rig.call(xml)
    assert result.status == "error"
    assert result.error_code is code, result.xml
    for fragment in fragments:
        assert fragment in result.message


def test_insufficient_data_early_in_a_replay_says_what_is_needed(btc_usdt_file) -> None:
    rig = make_rig(btc_usdt_file, 20)
    result = rig.call(calc("MACD"))
    assert result.error_code is ErrorCode.INSUFFICIENT_DATA
    assert result.details == {"indicator": "MACD", "bars_needed": 35, "bars_available": 20,
                              "values": 2}
    rig.show_bars(35)
    assert rig.call(calc("MACD")).ok


def test_a_spike_after_the_cursor_changes_no_returned_value(btc_usdt_file) -> None:
    """Look-ahead: plant a huge spike after the cursor; no indicator may see it."""
    cursor = 400
    series = btc_usdt_file.series
    spiked = dataclasses.replace(
        series,
        high=series.high.copy(), close=series.close.copy(), volume=series.volume.copy(),
    )
    spiked.high[cursor:cursor + 12] *= 3
    spiked.close[cursor:cursor + 12] *= 3
    spiked.volume[cursor:cursor + 12] *= 100
    clean = make_rig(btc_usdt_file, cursor)
    dirty = make_rig(dataclasses.replace(btc_usdt_file, series=spiked), cursor)
    for indicator in clean.engine.catalogue:
        xml = calc(indicator.name, values=5)
        assert clean.call(xml).xml == dirty.call(xml).xml, indicator.name
    clean.show_bars(cursor + 3)
    dirty.show_bars(cursor + 3)
    assert clean.call(calc("RSI")).xml != dirty.call(calc("RSI")).xml  # the spike is real


class NoPrefix:
    """The same market, but never offering a prefix: forces computation over the visible series."""

    def __init__(self, market: ReplayMarketData) -> None:
        self._market = market

    def __getattr__(self, name: str):
        return getattr(self._market, name)

    def prefix_source(self, symbol: str, interval: str) -> None:
        return None


def test_cached_replay_values_equal_values_computed_over_the_visible_candles(btc_usdt_file) -> None:
    rig = make_rig(btc_usdt_file, 100)
    engine = IndicatorEngine(rig.engine.catalogue)
    uncached = ToolExecutor(
        ToolRegistry(IndicatorTools(NoPrefix(rig.market), engine).specs()), MemoryRecorder()
    )
    for bars in range(100, 130):
        rig.show_bars(bars)
        for xml in (calc("RSI"), calc("MACD", values=3), calc("ADX")):
            expected = asyncio.run(uncached.execute_text(CTX, xml))
            assert rig.call(xml).xml == expected.xml
    assert rig.engine.cached_entries == 3  # one whole-series computation per indicator
    assert engine.cached_entries == 0


def test_concurrent_calls_share_one_computation(rig: Rig) -> None:
    async def many() -> list[ToolResult]:
        return await asyncio.gather(
            *(rig.executor.execute_text(CTX, calc("KAMA")) for _ in range(5))
        )

    results = asyncio.run(many())
    assert len({result.xml for result in results}) == 1
    assert results[0].ok
    assert rig.engine.cached_entries == 1


def test_tools_belong_to_the_indicator_group_and_permission(rig: Rig) -> None:
    specs = list(rig.executor.registry)
    assert [spec.name for spec in specs] == [
        "calculate_technical_indicator", "list_technical_indicators",
        "describe_technical_indicator",
    ]
    for spec in specs:
        assert spec.group == "Indicator Tools"
        assert spec.permission is Permission.INDICATOR
        assert spec.returns.strip().startswith("<")
    no_rights = AgentContext("x", permissions=frozenset())
    denied = asyncio.run(rig.executor.execute_text(no_rights, calc("RSI")))
    assert denied.error_code is ErrorCode.PERMISSION_DENIED
