"""Aggregate candles into a coarser interval, aligned to UTC (weeks start on Monday, as exchanges
do).

A bucket's open is its first candle's open, high/low the extremes, close the last close and volume
the sum. Buckets with no source candles (gaps) are left out, exactly as an exchange leaves them out.
"""

from __future__ import annotations

from typing import overload

import numpy as np

from app.domain.market import interval_ms
from app.market.series import KlineSeries, Times

_WEEK_OFFSET_MS = 4 * 86_400_000  # 1970-01-01 was a Thursday; 1970-01-05 a Monday


def can_resample(source_interval: str, target_interval: str) -> bool:
    """Tell whether ``target`` is a whole multiple of ``source`` that can be aligned to UTC."""
    if source_interval.endswith("M") or target_interval.endswith("M"):
        return False
    source, target = interval_ms(source_interval), interval_ms(target_interval)
    return target > source and target % source == 0


@overload
def bucket_start(timestamp_ms: int, target_interval: str) -> int: ...
@overload
def bucket_start(timestamp_ms: Times, target_interval: str) -> Times: ...
def bucket_start(timestamp_ms: Times | int, target_interval: str) -> Times | int:
    size = interval_ms(target_interval)
    offset = _WEEK_OFFSET_MS if target_interval.endswith("w") else 0
    return (timestamp_ms - offset) // size * size + offset


def resample(series: KlineSeries, target_interval: str) -> KlineSeries:
    """Aggregate every candle of ``series``; the last bucket is marked complete or not by the
    caller."""
    if len(series) == 0:
        return KlineSeries(
            series.symbol,
            target_interval,
            series.timestamp_ms.copy(),
            series.open.copy(),
            series.high.copy(),
            series.low.copy(),
            series.close.copy(),
            series.volume.copy(),
        )
    buckets = bucket_start(series.timestamp_ms, target_interval)
    starts = np.flatnonzero(np.r_[True, buckets[1:] != buckets[:-1]])
    ends = np.r_[starts[1:], len(series)] - 1
    return KlineSeries(
        symbol=series.symbol,
        interval=target_interval,
        timestamp_ms=buckets[starts].astype(np.int64),
        open=series.open[starts],
        high=np.maximum.reduceat(series.high, starts),
        low=np.minimum.reduceat(series.low, starts),
        close=series.close[ends],
        volume=np.add.reduceat(series.volume, starts),
        last_complete=True,
    )
