"""The ``MarketData`` port: what every tool, agent and chart asks of a market, in every mode.

The replay source (backtest and the offline demo) and ccxt (paper and live) both implement it. A
source whose visible history is a prefix of a fixed series says so through ``prefix_source``, so the
indicator layer can compute a whole series once and slice it at the cursor (causality makes that
safe).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Protocol

from app.domain.market import OrderBook, Ticker
from app.market.series import KlineSeries


@dataclass(frozen=True, slots=True)
class PrefixSource:
    """The fixed full series and how much of it is visible now.

    Attributes:
        key: identifies the full series for caching; stable for the life of the source.
        visible: the number of leading candles of ``full`` that are visible and complete.
    """

    key: Hashable
    full: KlineSeries
    visible: int


class MarketData(Protocol):
    def now_ms(self) -> int:
        """The market's current time: the replay cursor, or the wall clock."""
        ...

    def symbols(self) -> tuple[str, ...]:
        """Every symbol this source can serve."""
        ...

    def intervals(self, symbol: str) -> tuple[str, ...]:
        """The intervals ``symbol`` can be served in (native and resampled)."""
        ...

    def price_decimals(self, symbol: str) -> int:
        """Decimal places of the symbol's prices."""
        ...

    async def series(self, symbol: str, interval: str) -> KlineSeries:
        """Every candle visible now, oldest first; the newest may still be forming.

        Raises:
            NotFoundError: unknown symbol or interval, listing what exists.
        """
        ...

    async def ticker(self, symbol: str) -> Ticker: ...

    async def order_book(self, symbol: str, limit: int) -> OrderBook: ...

    def prefix_source(self, symbol: str, interval: str) -> PrefixSource | None:
        """The full fixed series when the visible one is exactly its prefix; else ``None``."""
        ...
