"""The replay market: kline files served behind a cursor that hides every candle after it.

The cursor is the injected ``Clock``. A candle is visible once it has closed (``open + bar <=
now``); a coarser interval resampled from finer files shows its current bucket as a forming candle
built only from the finer candles already closed. The 24h ticker and the order book are derived from
the visible candles, consistently (best bid <= last price <= best ask), so offline agents see a
coherent market.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from app.domain.clock import Clock, ms_to_iso
from app.domain.errors import InsufficientDataError, InvalidParameterError, NotFoundError
from app.domain.market import OrderBook, Ticker, interval_ms, is_interval
from app.market.csv_loader import LoadedFile, load_csv
from app.market.port import PrefixSource
from app.market.resample import bucket_start, can_resample, resample
from app.market.series import KlineSeries, Times, concat_one, to_decimal
from app.market.synthetic import synthetic_order_book

DAY_MS = 86_400_000


class ReplayMarketData:
    """Serves validated kline files at the clock's cursor; implements the ``MarketData`` port."""

    def __init__(self, clock: Clock, files: Iterable[LoadedFile]) -> None:
        self._clock = clock
        self._files: dict[str, dict[str, LoadedFile]] = {}
        self._close_ms: dict[tuple[str, str], Times] = {}
        self._resampled: dict[tuple[str, str], tuple[KlineSeries, str]] = {}
        self._served: dict[str, tuple[str, ...]] = {}
        for loaded in files:
            symbol, interval = loaded.series.symbol, loaded.series.interval
            by_interval = self._files.setdefault(symbol, {})
            if interval in by_interval:
                raise ValueError(
                    f"two files for {symbol} {interval}: {by_interval[interval].path.name} and "
                    f"{loaded.path.name}"
                )
            by_interval[interval] = loaded
            self._close_ms[(symbol, interval)] = loaded.series.timestamp_ms + loaded.bar_ms

    @classmethod
    def from_paths(cls, clock: Clock, paths: Iterable[Path]) -> ReplayMarketData:
        return cls(clock, [load_csv(Path(p)) for p in paths])

    # -- what exists ---------------------------------------------------------------------------

    def now_ms(self) -> int:
        return self._clock.now_ms()

    def symbols(self) -> tuple[str, ...]:
        return tuple(sorted(self._files))

    def native_intervals(self, symbol: str) -> tuple[str, ...]:
        return tuple(sorted(self._known(symbol), key=interval_ms))

    def intervals(self, symbol: str) -> tuple[str, ...]:
        """Native and resampled intervals; computed once per symbol since the files never change."""
        cached = self._served.get(symbol)
        if cached is None:
            cached = self._served[symbol] = self._compute_intervals(symbol)
        return cached

    def _compute_intervals(self, symbol: str) -> tuple[str, ...]:
        native = self._known(symbol)
        served = set(native)
        for target in (
            "1m",
            "3m",
            "5m",
            "15m",
            "30m",
            "1h",
            "2h",
            "4h",
            "6h",
            "8h",
            "12h",
            "1d",
            "3d",
            "1w",
        ):
            if any(can_resample(source, target) for source in native):
                served.add(target)
        return tuple(sorted(served, key=interval_ms))

    def price_decimals(self, symbol: str) -> int:
        return max(f.price_decimals for f in self._known(symbol).values())

    def start_ms(self) -> int:
        """When the earliest file's first candle closes: the first moment any data is visible."""
        return min(
            int(self._close_ms[(s, i)][0]) for s, files in self._files.items() for i in files
        )

    def end_ms(self) -> int:
        """When the latest candle of any file closes: the cursor that shows all data."""
        return max(
            int(self._close_ms[(s, i)][-1]) for s, files in self._files.items() for i in files
        )

    def finest_interval(self, symbol: str) -> str:
        return self.native_intervals(symbol)[0]

    def loaded(self, symbol: str, interval: str) -> LoadedFile:
        return self._known(symbol)[interval]

    def _known(self, symbol: str) -> dict[str, LoadedFile]:
        found = self._files.get(symbol)
        if found is None:
            found = self._files.get(symbol.upper())
        if found is None:
            close = difflib.get_close_matches(symbol.upper(), list(self._files), n=3, cutoff=0.4)
            hint = f" Closest: {', '.join(close)}." if close else ""
            raise NotFoundError(
                f"Unknown symbol {symbol!r}. Available symbols: {', '.join(self.symbols())}.{hint}",
                details={"symbol": symbol, "available": list(self.symbols())},
            )
        return found

    def _canonical(self, symbol: str) -> str:
        return symbol if symbol in self._files else symbol.upper()

    # -- candles -------------------------------------------------------------------------------

    def _visible_count(self, symbol: str, interval: str, now: int) -> int:
        return int(self._close_ms[(symbol, interval)].searchsorted(now, side="right"))

    def _check_interval(self, symbol: str, interval: str) -> None:
        if not is_interval(interval):
            raise InvalidParameterError(
                f"{interval!r} is not an interval; use e.g. 1m, 5m, 15m, 1h, 4h or 1d. "
                f"{symbol} is available in: {', '.join(self.intervals(symbol))}.",
                details={"parameter": "interval", "got": interval},
            )

    def _resampled_full(self, symbol: str, interval: str) -> tuple[KlineSeries, str]:
        self._check_interval(symbol, interval)
        key = (symbol, interval)
        cached = self._resampled.get(key)
        if cached is None:
            native = self._known(symbol)
            sources = [s for s in native if can_resample(s, interval)]
            if not sources:
                raise NotFoundError(
                    f"{symbol} has no {interval} candles and none can be built from its data. "
                    f"Available intervals: {', '.join(self.intervals(symbol))}.",
                    details={
                        "symbol": symbol,
                        "interval": interval,
                        "available": list(self.intervals(symbol)),
                    },
                )
            source = max(sources, key=interval_ms)
            full = resample(native[source].series, interval)
            cached = (full, source)
            self._resampled[key] = cached
            self._close_ms[key] = full.timestamp_ms + interval_ms(interval)
        return cached

    def prefix_source(self, symbol: str, interval: str) -> PrefixSource | None:
        symbol = self._canonical(symbol)
        native = self._known(symbol)
        now = self.now_ms()
        if interval in native:
            visible = self._visible_count(symbol, interval, now)
            return PrefixSource((id(self), symbol, interval), native[interval].series, visible)
        full, _ = self._resampled_full(symbol, interval)
        visible = self._visible_count(symbol, interval, now)
        return PrefixSource((id(self), symbol, interval), full, visible)

    def series_now(self, symbol: str, interval: str) -> KlineSeries:
        """Synchronous form of ``series`` for non-async callers (charts, the backtest engine)."""
        symbol = self._canonical(symbol)
        native = self._known(symbol)
        now = self.now_ms()
        if interval in native:
            return native[interval].series.head(self._visible_count(symbol, interval, now))
        full, source = self._resampled_full(symbol, interval)
        complete = self._visible_count(symbol, interval, now)
        visible = full.head(complete)
        base = native[source].series
        base_visible = self._visible_count(symbol, source, now)
        if base_visible == 0:
            return visible
        current_bucket = int(bucket_start(now, interval))
        if complete and int(full.timestamp_ms[complete - 1]) >= current_bucket:
            return visible
        first = int(np.searchsorted(base.timestamp_ms, current_bucket, side="left"))
        if first >= base_visible:
            return visible
        forming = resample(base._slice(slice(first, base_visible)), interval)
        forming = KlineSeries(
            forming.symbol,
            interval,
            forming.timestamp_ms,
            forming.open,
            forming.high,
            forming.low,
            forming.close,
            forming.volume,
            last_complete=False,
        )
        return concat_one(visible, forming)

    async def series(self, symbol: str, interval: str) -> KlineSeries:
        return self.series_now(symbol, interval)

    def _finest_visible(self, symbol: str) -> KlineSeries:
        symbol = self._canonical(symbol)
        series = self.series_now(symbol, self.finest_interval(symbol))
        if len(series) == 0:
            first = int(self._close_ms[(symbol, self.finest_interval(symbol))][0])
            raise InsufficientDataError(
                f"No {symbol} candles are visible yet at {ms_to_iso(self.now_ms())}; the data "
                f"starts closing at {ms_to_iso(first)}.",
                details={"symbol": symbol, "first_visible_ms": first},
            )
        return series

    # -- derived views -------------------------------------------------------------------------

    def ticker_now(self, symbol: str) -> Ticker:
        symbol = self._canonical(symbol)
        series = self._finest_visible(symbol)
        decimals = self.price_decimals(symbol)
        now = self.now_ms()
        start = int(np.searchsorted(series.timestamp_ms, now - DAY_MS, side="left"))
        start = min(start, len(series) - 1)
        window = series._slice(slice(start, len(series)))
        last = float(window.close[-1])
        first_open = float(window.open[0])
        change = (last - first_open) / first_open * 100 if first_open else 0.0
        return Ticker(
            symbol=symbol,
            timestamp_ms=now,
            last_price=to_decimal(last, decimals),
            high_24h=to_decimal(float(window.high.max()), decimals),
            low_24h=to_decimal(float(window.low.min()), decimals),
            volume_24h=to_decimal(float(window.volume.sum()), 8),
            change_percent_24h=to_decimal(change, 2),
        )

    async def ticker(self, symbol: str) -> Ticker:
        return self.ticker_now(symbol)

    def order_book_now(self, symbol: str, limit: int) -> OrderBook:
        symbol = self._canonical(symbol)
        series = self._finest_visible(symbol)
        return synthetic_order_book(
            symbol=symbol,
            series=series,
            limit=limit,
            price_decimals=self.price_decimals(symbol),
            now_ms=self.now_ms(),
        )

    async def order_book(self, symbol: str, limit: int) -> OrderBook:
        return self.order_book_now(symbol, limit)
