"""The indicator engine: computes a catalogued indicator over candles, with a cache for replays.

In a replay the visible candles are a prefix of one fixed series (``MarketData.prefix_source``).
Because every catalogued indicator is causal, its values over ``full[:visible]`` equal the first
``visible`` values over ``full``; so the engine computes the whole series once per (series,
indicator, parameters) and slices it at the cursor. A backtest that asks for RSI at every one of
50,000 bars then pays one computation, not 50,000: the per-call cost stays flat as history grows.

Anything else (a live source, or a resampled interval whose newest candle is still forming) is
computed over the visible candles. Computation runs in a worker thread (``asyncio.to_thread``) so a
long series never blocks the event loop; a cache hit is answered without leaving the loop.
"""

from __future__ import annotations

import asyncio
import logging
import warnings
from collections import OrderedDict
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from app.domain.errors import InsufficientDataError
from app.indicators.catalogue import default_catalogue
from app.indicators.model import Catalogue, IndicatorDef, ParamValues, describe_values
from app.market.port import MarketData, PrefixSource
from app.market.series import Floats, KlineSeries, Times

logger = logging.getLogger(__name__)

_INPUT_COLUMNS = {
    "open_": "open", "high": "high", "low": "low", "close": "close", "volume": "volume"
}


@dataclass(frozen=True, slots=True)
class Computed:
    """An indicator over a whole series.

    Attributes:
        columns: public output name -> float array as long as the series; NaN where undefined.
        first_valid: index of the first bar at which every output is defined (len if none is).
    """

    columns: Mapping[str, Floats]
    first_valid: int


@dataclass(frozen=True, slots=True)
class IndicatorValues:
    """The most recent values of one indicator, newest last."""

    indicator: IndicatorDef
    params: Mapping[str, int | float]
    symbol: str
    interval: str
    timestamps: Times
    columns: Mapping[str, Floats]


def _pick(frame: pd.DataFrame, prefix: str, indicator: IndicatorDef) -> Floats:
    matches = [col for col in frame.columns if str(col).split("_")[0] == prefix]
    if len(matches) != 1:
        raise RuntimeError(
            f"{indicator.name}: expected one pandas-ta column starting {prefix!r}, found "
            f"{matches} among {list(frame.columns)}"
        )
    return frame[matches[0]].to_numpy(dtype=float, na_value=np.nan)


def compute(indicator: IndicatorDef, params: ParamValues, series: KlineSeries) -> Computed:
    """Compute ``indicator`` over every bar of ``series`` (pure; safe in a worker thread).

    Values before the catalogued warm-up are blanked, so an indicator is never shown before it
    is defined the way its reference (TA-Lib where it has one) defines it; infinities from a
    division by a zero range become NaN.
    """
    size = len(series)
    result: Any = None
    if size > 0:
        frame = series.to_frame()
        kwargs: dict[str, Any] = {key: frame[_INPUT_COLUMNS[key]] for key in indicator.inputs}
        for param in indicator.params:
            for keyword in param.keywords():
                kwargs[keyword] = params[param.name]
        kwargs.update(indicator.fixed)
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")  # pandas-ta's deprecation noise, not ours to fix
            if isinstance(indicator.compute, str):
                import pandas_ta as ta  # heavy import, only where computation happens

                function = getattr(ta, indicator.compute)
                kwargs["talib"] = False
            else:
                function = indicator.compute
            result = function(**kwargs)
    if isinstance(result, tuple):  # ICHIMOKU: (lines, future spans); the future part is unused
        result = result[0]
    if isinstance(result, pd.Series):
        result = result.to_frame()
    columns: dict[str, Floats] = {}
    warmup = max(int(indicator.min_bars(params)) - 1, 0)
    values: Floats
    for public, prefix in indicator.outputs:
        if result is None:  # pandas-ta returns None when the series is shorter than a window
            values = np.full(size, np.nan)
        else:
            values = _pick(result, prefix, indicator).copy()
            values[~np.isfinite(values)] = np.nan
        values[:warmup] = np.nan
        columns[public] = values
    defined = np.ones(size, dtype=bool)
    for values in columns.values():
        defined &= ~np.isnan(values)
    first_valid = int(np.argmax(defined)) if defined.any() else size
    return Computed(columns=columns, first_valid=first_valid)


class IndicatorEngine:
    """Computes indicators for tools; holds the replay cache (bounded, least recently used out)."""

    def __init__(self, catalogue: Catalogue | None = None, cache_size: int = 256) -> None:
        self.catalogue = default_catalogue() if catalogue is None else catalogue
        self._cache_size = cache_size
        self._cache: OrderedDict[Hashable, Computed] = OrderedDict()
        self._pending: dict[Hashable, asyncio.Task[Computed]] = {}

    @property
    def cached_entries(self) -> int:
        return len(self._cache)

    async def latest(
        self,
        market: MarketData,
        symbol: str,
        interval: str,
        indicator: IndicatorDef,
        params: ParamValues,
        count: int,
    ) -> IndicatorValues:
        """The newest ``count`` values of ``indicator`` on the candles visible now.

        Raises:
            NotFoundError: from the market, for an unknown symbol or interval.
            InsufficientDataError: fewer bars than the indicator needs for ``count`` values.
        """
        series = await market.series(symbol, interval)
        prefix = market.prefix_source(symbol, interval)
        if prefix is not None and series.last_complete and len(series) == prefix.visible:
            computed = await self._over_prefix(prefix, indicator, params)
            end, timestamps = prefix.visible, prefix.full.timestamp_ms
        else:
            computed = await asyncio.to_thread(compute, indicator, params, series)
            end, timestamps = len(series), series.timestamp_ms
        start = end - count
        needed = max(int(indicator.min_bars(params)), computed.first_valid + 1) + count - 1
        if start < 0 or start < computed.first_valid:
            raise InsufficientDataError(
                f"{indicator.name}({describe_values(params)}) needs {needed} bars for {count} "
                f"value(s), but {series.symbol} {interval} has only {end} bars visible now. Ask "
                "for fewer values, use shorter periods or a shorter interval.",
                details={
                    "indicator": indicator.name,
                    "bars_needed": needed,
                    "bars_available": end,
                    "values": count,
                },
            )
        return IndicatorValues(
            indicator=indicator,
            params=params,
            symbol=series.symbol,
            interval=interval,
            timestamps=timestamps[start:end],
            columns={name: values[start:end] for name, values in computed.columns.items()},
        )

    async def _over_prefix(
        self, prefix: PrefixSource, indicator: IndicatorDef, params: ParamValues
    ) -> Computed:
        key = (prefix.key, len(prefix.full), indicator.name, tuple(sorted(params.items())))
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        task = self._pending.get(key)
        if task is None:
            task = asyncio.create_task(
                asyncio.to_thread(compute, indicator, params, prefix.full),
                name=f"indicator {indicator.name}",
            )
            self._pending[key] = task
            task.add_done_callback(lambda done: self._store(key, done))
        # shielded: one caller giving up must not cancel the computation others are awaiting
        return await asyncio.shield(task)

    def _store(self, key: Hashable, task: asyncio.Task[Computed]) -> None:
        self._pending.pop(key, None)
        if task.cancelled() or task.exception() is not None:
            return
        self._cache[key] = task.result()
        self._cache.move_to_end(key)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
