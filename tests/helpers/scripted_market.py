"""A market whose candles a test writes one bar at a time: any number of symbols, any price path.

Property tests need prices they choose as they go (a move, a gap, a flat bar) over many symbols;
the bundled files hold one symbol and a fixed path. ``ScriptedMarket`` serves what the paper broker
reads (symbols, price precision, the visible candles) behind the same ``ReplayClock`` convention:
a candle is visible once it has closed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

import numpy as np

from app.domain.clock import ReplayClock
from app.exchange.paper import PaperBroker
from app.market.port import PrefixSource
from app.market.series import KlineSeries
from app.store.ledger import Ledger

HOUR_MS = 3_600_000
START_MS = 1_700_000_000_000 - 1_700_000_000_000 % HOUR_MS


@dataclass
class _Bars:
    open: list[float] = field(default_factory=list)
    high: list[float] = field(default_factory=list)
    low: list[float] = field(default_factory=list)
    close: list[float] = field(default_factory=list)
    series: KlineSeries | None = None  # rebuilt when a bar is added


class ScriptedMarket:
    """Hourly candles per symbol, written by the test; serves those closed by the clock's time."""

    def __init__(self, clock: ReplayClock, prices: dict[str, Decimal]) -> None:
        self.clock = clock
        self._bars = {symbol: _Bars() for symbol in sorted(prices)}
        self._start = clock.now_ms() - HOUR_MS
        for symbol, price in prices.items():
            self.add_bar(symbol, price, price, price, price)

    # what the paper broker reads
    def now_ms(self) -> int:
        return self.clock.now_ms()

    def symbols(self) -> tuple[str, ...]:
        return tuple(self._bars)

    def intervals(self, symbol: str) -> tuple[str, ...]:
        return ("1h",)

    def price_decimals(self, symbol: str) -> int:
        return 2

    def prefix_source(self, symbol: str, interval: str) -> PrefixSource:
        """Every candle written so far, and how many of them have closed by now."""
        bars = self._bars[symbol]
        if bars.series is None:
            count = len(bars.close)
            stamps = self._start + HOUR_MS * np.arange(count, dtype=np.int64)
            bars.series = KlineSeries(
                symbol, "1h", stamps, np.array(bars.open), np.array(bars.high),
                np.array(bars.low), np.array(bars.close), np.ones(count),
            )
        full = bars.series
        visible = min(len(full), (self.now_ms() - self._start) // HOUR_MS)
        return PrefixSource((symbol, len(full)), full, int(visible))

    def series_now(self, symbol: str, interval: str) -> KlineSeries:
        source = self.prefix_source(symbol, interval)
        return source.full.head(source.visible)

    # what the test writes
    def last_close(self, symbol: str) -> Decimal:
        return Decimal(f"{self._bars[symbol].close[-1]:.2f}")

    def add_bar(
        self, symbol: str, open_: Decimal, high: Decimal, low: Decimal, close: Decimal
    ) -> None:
        """Append the symbol's next hourly candle (it becomes visible an hour after it opens)."""
        bars = self._bars[symbol]
        bars.open.append(float(open_))
        bars.high.append(float(max(open_, high, low, close)))
        bars.low.append(float(min(open_, high, low, close)))
        bars.close.append(float(close))
        bars.series = None


def make_scripted_broker(
    prices: dict[str, Decimal],
    cash: Decimal = Decimal(100_000),
    **kwargs: object,
) -> tuple[PaperBroker, ScriptedMarket, ReplayClock]:
    """A paper broker with ``cash`` over a scripted market whose first candle of each symbol, at
    ``prices``, is visible; orders fill against the candles the test adds next."""
    clock = ReplayClock(START_MS)
    market = ScriptedMarket(clock, prices)
    broker = PaperBroker(market, clock, Ledger(":memory:"), initial_cash=cash, **kwargs)
    return broker, market, clock


def next_bar(market: ScriptedMarket, broker: PaperBroker, moves: dict[str, Decimal] | None = None):
    """Write one candle per symbol (each close moved by ``moves[symbol]`` as a fraction, else
    flat), advance the clock past it and settle; return the fills."""
    for symbol in market.symbols():
        last = market.last_close(symbol)
        close = (last * (1 + (moves or {}).get(symbol, Decimal(0)))).quantize(Decimal("0.01"))
        close = max(close, Decimal("0.01"))
        market.add_bar(symbol, last, max(last, close), min(last, close), close)
    market.clock.advance_to(market.clock.now_ms() + HOUR_MS)
    return broker.settle()
