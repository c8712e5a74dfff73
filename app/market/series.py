"""``KlineSeries``: candles as float arrays, the form indicators and charts consume.

Floats live only inside series; anything that leaves as a result is turned into ``Decimal`` at the
boundary (``to_klines``), rounded to the symbol's price precision.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

import numpy as np
import numpy.typing as npt
import pandas as pd

from app.domain.market import Kline

# a series' arrays: prices and volumes, and open times in ms
Floats = npt.NDArray[np.float64]
Times = npt.NDArray[np.int64]
COLUMNS = ("open", "high", "low", "close", "volume")
_FIXED = tuple(f".{d}f" for d in range(19))  # format specs of decimal_text, built once


@dataclass(slots=True)
class KlineSeries:
    """Candles of one symbol and interval, oldest first; treat as read-only.

    Not frozen: a series is sliced on every market tool call and every settle, and a frozen
    dataclass's ``__init__`` (nine ``object.__setattr__`` calls) would cost more than the slicing.

    Attributes:
        last_complete: False when the newest candle is still forming (a resampled bucket whose
            time is not over yet, or a live candle).
    """

    symbol: str
    interval: str
    timestamp_ms: Times
    open: Floats
    high: Floats
    low: Floats
    close: Floats
    volume: Floats
    last_complete: bool = True

    def __len__(self) -> int:
        return int(self.timestamp_ms.shape[0])

    def head(self, count: int) -> KlineSeries:
        """The first ``count`` candles (all complete, since the tail was cut off)."""
        return self._slice(slice(0, count), last_complete=True if count < len(self) else None)

    def tail(self, count: int) -> KlineSeries:
        start = max(len(self) - count, 0)
        return self._slice(slice(start, len(self)))

    def before(self, end_time_ms: int) -> KlineSeries:
        """Candles that open strictly before ``end_time_ms``."""
        return self.head(self.count_before(end_time_ms))

    def count_before(self, end_time_ms: int) -> int:
        """How many candles open strictly before ``end_time_ms`` (they are the first ones)."""
        return int(np.searchsorted(self.timestamp_ms, end_time_ms, side="left"))

    def _slice(self, part: slice, last_complete: bool | None = None) -> KlineSeries:
        return KlineSeries(
            symbol=self.symbol,
            interval=self.interval,
            timestamp_ms=self.timestamp_ms[part],
            open=self.open[part],
            high=self.high[part],
            low=self.low[part],
            close=self.close[part],
            volume=self.volume[part],
            last_complete=self.last_complete if last_complete is None else last_complete,
        )

    def to_frame(self) -> pd.DataFrame:
        """A pandas frame indexed by UTC open time, as pandas-ta expects."""
        index = pd.to_datetime(self.timestamp_ms, unit="ms", utc=True)
        return pd.DataFrame(
            {name: getattr(self, name) for name in COLUMNS},
            index=index,
        )

    def to_klines(self, price_decimals: int, volume_decimals: int = 8) -> list[Kline]:
        """Convert to Decimal candles rounded to the market's precision."""
        out: list[Kline] = []
        for i in range(len(self)):
            out.append(
                Kline(
                    timestamp_ms=int(self.timestamp_ms[i]),
                    open=to_decimal(self.open[i], price_decimals),
                    high=to_decimal(self.high[i], price_decimals),
                    low=to_decimal(self.low[i], price_decimals),
                    close=to_decimal(self.close[i], price_decimals),
                    volume=to_decimal(self.volume[i], volume_decimals),
                )
            )
        return out


def to_decimal(value: float, decimals: int) -> Decimal:
    """Round a float to ``decimals`` places and return an exact Decimal of that rounded value."""
    return Decimal(f"{float(value):.{decimals}f}")


def decimal_text(value: float, decimals: int) -> str:
    """The rendered text of ``to_decimal(value, decimals)`` (no exponent, no trailing zeros).

    Result rows render thousands of prices; going straight from the rounded digits to the text
    skips building a Decimal only to print it again. The digits are the same ones ``to_decimal``
    reads, so the text is the one ``format_value`` would give for that Decimal.

    Raises:
        ValueError: for NaN or an infinity, as rendering a non-finite Decimal does.
    """
    text = format(value, _FIXED[decimals] if 0 <= decimals < len(_FIXED) else f".{decimals}f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    elif not text[-1:].isdigit():  # nan, inf, -inf
        raise ValueError(f"cannot render non-finite number {value}")
    return "0" if text == "-0" else text


def concat_one(series: KlineSeries, extra: KlineSeries) -> KlineSeries:
    """Append the candles of ``extra`` (already aligned and later) to ``series``."""
    return KlineSeries(
        symbol=series.symbol,
        interval=series.interval,
        timestamp_ms=np.concatenate([series.timestamp_ms, extra.timestamp_ms]),
        open=np.concatenate([series.open, extra.open]),
        high=np.concatenate([series.high, extra.high]),
        low=np.concatenate([series.low, extra.low]),
        close=np.concatenate([series.close, extra.close]),
        volume=np.concatenate([series.volume, extra.volume]),
        last_complete=extra.last_complete,
    )
