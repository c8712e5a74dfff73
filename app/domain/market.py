"""Market data types: candles, tickers, order books and bar intervals.

Prices and quantities are ``Decimal`` at this boundary; numeric series inside the market and
indicator layers stay as float arrays.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

_INTERVAL_RE = re.compile(r"^(\d+)([smhdwM])$")
_UNIT_MS = {
    "s": 1_000,
    "m": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
    "w": 7 * 86_400_000,
}
MONTH_APPROX_MS = 30 * 86_400_000


def split_symbol(symbol: str, default_quote: str) -> tuple[str, str]:
    """``BTC/USDT`` -> (BTC, USDT); ``XRP/USDT:USDT`` -> (XRP, USDT); ``GOOG`` -> (GOOG, quote)."""
    if "/" not in symbol:
        return symbol, default_quote
    base, _, rest = symbol.partition("/")
    return base, rest.split(":")[0]


def interval_ms(interval: str) -> int:
    """Return the length of a ccxt-style interval ("1m", "4h", "1d", "1w"; "1M" approximated).

    Raises:
        ValueError: when the text is not an interval.
    """
    match = _INTERVAL_RE.match(interval)
    if match is None:
        raise ValueError(f"not an interval: {interval!r} (expected e.g. 1m, 5m, 1h, 4h, 1d)")
    count, unit = int(match.group(1)), match.group(2)
    if count <= 0:
        raise ValueError(f"not an interval: {interval!r} (count must be positive)")
    if unit == "M":
        return count * MONTH_APPROX_MS
    return count * _UNIT_MS[unit]


def is_interval(text: str) -> bool:
    """Tell whether ``text`` is a well-formed interval."""
    try:
        interval_ms(text)
    except ValueError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class Kline:
    """One candle; ``timestamp_ms`` is the open time in UTC milliseconds (ccxt's layout)."""

    timestamp_ms: int
    open: Decimal
    high: Decimal
    low: Decimal
    close: Decimal
    volume: Decimal


@dataclass(frozen=True, slots=True)
class Ticker:
    """The latest price and the rolling 24-hour statistics of a symbol."""

    symbol: str
    timestamp_ms: int
    last_price: Decimal
    high_24h: Decimal
    low_24h: Decimal
    volume_24h: Decimal
    change_percent_24h: Decimal


@dataclass(frozen=True, slots=True)
class BookLevel:
    """One price level of an order book."""

    price: Decimal
    quantity: Decimal


@dataclass(frozen=True, slots=True)
class OrderBook:
    """Depth of market: bids best (highest) first, asks best (lowest) first.

    ``synthetic``: derived from candles (a replay has no real depth), not a venue's own book;
    whoever shows the book says so.
    """

    symbol: str
    timestamp_ms: int
    bids: tuple[BookLevel, ...]
    asks: tuple[BookLevel, ...]
    synthetic: bool = False

    @property
    def best_bid(self) -> Decimal | None:
        return self.bids[0].price if self.bids else None

    @property
    def best_ask(self) -> Decimal | None:
        return self.asks[0].price if self.asks else None

    @property
    def spread(self) -> Decimal | None:
        if not self.bids or not self.asks:
            return None
        return self.asks[0].price - self.bids[0].price
