"""Live candles as fetched: the closed/forming rule, how long a fetch stays true, merging refills.

The rule is the replay's: a candle is closed once its close time (open + bar) is at or before
now, and only the newest candle may be forming, marked ``last_complete=False``. "Now" is the
*exchange's* time as Kestrel estimates it (the wall clock corrected by the offset measured against
the exchange's server time, see ``CcxtMarketData.sync_time``): candles are stamped and closed by
the exchange's clock, so a local clock running ahead would otherwise call a candle closed while
the exchange is still trading into it.

A fetch is a ``CandleSnapshot``. Its closed/forming marks are decided against the moment the
request was *sent*, and the snapshot is only served until the next close time after that moment:
a candle fetched while forming is never later shown as closed with the values it had then; the
first read after its close fetches it again.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.market.series import Floats, KlineSeries


class MalformedCandles(ValueError):
    """The exchange's candles are not [open_ms, open, high, low, close, volume] rows of numbers."""


@dataclass(frozen=True, slots=True)
class CandleSnapshot:
    """Candles of one symbol and interval as one fetch saw them.

    Attributes:
        series: ascending, the newest marked forming when it had not closed at ``fetched_at_ms``.
        fetched_at_ms: exchange time when the request was sent.
        fetched_mono_s: ``time.monotonic()`` then, for the freshness bound.
        bar_ms: the interval's length.
    """

    series: KlineSeries
    fetched_at_ms: int
    fetched_mono_s: float
    bar_ms: int

    @property
    def valid_until_ms(self) -> int:
        """The first close time after the fetch: from then on the snapshot is out of date."""
        if len(self.series) == 0:
            return self.fetched_at_ms - self.fetched_at_ms % self.bar_ms + self.bar_ms
        last_open = int(self.series.timestamp_ms[-1])
        behind = max(self.fetched_at_ms - last_open, 0) // self.bar_ms
        return last_open + (behind + 1) * self.bar_ms

    def usable(self, now_ms: int, now_mono_s: float, max_age_s: float) -> bool:
        """Whether serving this snapshot now shows the same closed candles a fetch would."""
        return now_ms < self.valid_until_ms and now_mono_s - self.fetched_mono_s <= max_age_s

    @property
    def forming_open_ms(self) -> int | None:
        """Open time of the forming candle, if the snapshot has one."""
        if len(self.series) == 0 or self.series.last_complete:
            return None
        return int(self.series.timestamp_ms[-1])


def parse_ohlcv(rows: Sequence[Sequence[Any]]) -> Floats:
    """ccxt's OHLCV rows as an (n, 6) float array, checked.

    Raises:
        MalformedCandles: a row is short, not numeric, not finite, or inconsistent (high < low).
    """
    if not isinstance(rows, list | tuple):
        raise MalformedCandles(f"expected a list of candles, got {type(rows).__name__}")
    try:
        table = np.array([row[:6] for row in rows], dtype=float).reshape(len(rows), 6)
    except (TypeError, ValueError, IndexError) as exc:
        raise MalformedCandles(f"candles are not rows of six numbers ({exc})") from None
    if not np.isfinite(table).all():
        raise MalformedCandles("candles hold missing or non-finite numbers")
    if (table[:, 2] < table[:, 3]).any():
        raise MalformedCandles("a candle's high is below its low")
    return table


def ordered(table: Floats) -> Floats:
    """Rows ascending by open time, one per open time (the later copy of a duplicate wins)."""
    if len(table) < 2:
        return table
    table = table[np.argsort(table[:, 0], kind="stable")]
    keep = np.append(table[1:, 0] != table[:-1, 0], True)
    kept: Floats = table[keep]
    return kept


def merge(old: Floats | None, new: Floats, *, since: int, keep: int) -> Floats:
    """Old candles that opened before ``since``, then the refill (fetched from ``since``).

    Old candles from ``since`` on are dropped even when the refill brought none: they were
    fetched while forming, and only a fetch after their close may show them closed.
    """
    if old is None or len(old) == 0:
        merged = new
    else:
        cut = int(np.searchsorted(old[:, 0], since, side="left"))
        merged = np.concatenate([old[:cut], new]) if len(new) else old[:cut]
    return merged[-keep:] if len(merged) > keep else merged


def snapshot(
    symbol: str,
    interval: str,
    table: Floats,
    *,
    bar_ms: int,
    fetched_at_ms: int,
    fetched_mono_s: float,
) -> CandleSnapshot:
    """Build the snapshot: drop candles that had not opened at the fetch, mark the forming one."""
    started = table[table[:, 0] <= fetched_at_ms] if len(table) else table
    last_complete = True
    if len(started):
        last_complete = int(started[-1, 0]) + bar_ms <= fetched_at_ms
    series = KlineSeries(
        symbol=symbol,
        interval=interval,
        timestamp_ms=started[:, 0].astype(np.int64),
        open=np.ascontiguousarray(started[:, 1]),
        high=np.ascontiguousarray(started[:, 2]),
        low=np.ascontiguousarray(started[:, 3]),
        close=np.ascontiguousarray(started[:, 4]),
        volume=np.ascontiguousarray(started[:, 5]),
        last_complete=last_complete,
    )
    return CandleSnapshot(series, fetched_at_ms, fetched_mono_s, bar_ms)


def table_of(snap: CandleSnapshot) -> Floats:
    """The snapshot's candles back as an (n, 6) array, for merging a refill into."""
    s = snap.series
    return np.column_stack([s.timestamp_ms.astype(float), s.open, s.high, s.low, s.close,
                            s.volume])


def pages_needed(count: int, page: int) -> int:
    return max(math.ceil(count / max(page, 1)), 1)
