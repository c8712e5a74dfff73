"""What the paper broker sees of the market: each symbol's finest candles up to the cursor.

Settlement walks the candles that became visible since the last settle, and positions are valued
at the last visible close; both read the market through this window, which asks the market once
for what does not change (a symbol's price precision, its finest interval) and reads the visible
prefix of the candles without copying them where the market can hand out its arrays.
"""

from __future__ import annotations

from decimal import Decimal

from app.exchange.matching import Bar
from app.market.port import MarketData
from app.market.series import KlineSeries, to_decimal


class BarWindow:
    def __init__(self, market: MarketData) -> None:
        self.market = market
        self._price_decimals: dict[str, int] = {}
        self._finest: dict[str, str] = {}

    def decimals(self, symbol: str) -> int:
        """The symbol's price precision, asked once: the market rules are built on it too."""
        decimals = self._price_decimals.get(symbol)
        if decimals is None:
            decimals = self._price_decimals[symbol] = self.market.price_decimals(symbol)
        return decimals

    def interval(self, symbol: str) -> str:
        """The finest interval of ``symbol``, asked once (settle needs it every bar)."""
        interval = self._finest.get(symbol)
        if interval is None:
            finest = getattr(self.market, "finest_interval", None)
            interval = finest(symbol) if finest is not None else self.market.intervals(symbol)[0]
            self._finest[symbol] = interval
        return interval

    def bars(self, symbol: str) -> tuple[KlineSeries, int]:
        """The symbol's finest candles and how many of them are visible and complete now."""
        interval = self.interval(symbol)
        source = self.market.prefix_source(symbol, interval)
        if source is not None:
            return source.full, source.visible
        series_now = getattr(self.market, "series_now", None)
        if series_now is None:
            raise TypeError("PaperBroker needs a market with prefix_source or series_now")
        series: KlineSeries = series_now(symbol, interval)
        return series, len(series) if series.last_complete else len(series) - 1

    def mark(self, symbol: str, bars: tuple[KlineSeries, int] | None = None) -> Decimal | None:
        """The last visible close: the price positions are valued at and market orders refer to.

        Args:
            bars: ``bars(symbol)`` when the caller has just read it at the same clock time.
        """
        full, visible = self.bars(symbol) if bars is None else bars
        if visible <= 0:
            return None
        return to_decimal(full.close.item(visible - 1), self.decimals(symbol))

    @staticmethod
    def bar(full: KlineSeries, index: int, decimals: int) -> Bar:
        """Candle ``index`` of ``full`` in Decimals, as the matching rules take it."""
        return Bar(
            full.timestamp_ms.item(index),
            to_decimal(full.open.item(index), decimals),
            to_decimal(full.high.item(index), decimals),
            to_decimal(full.low.item(index), decimals),
            to_decimal(full.close.item(index), decimals),
        )
