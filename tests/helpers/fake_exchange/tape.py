"""The fake exchange's price tape: real one-minute candles, replayed on a loop, cut at a fake now.

Why: tests must drive time. The tape maps fake minute ``m`` (open time ``m * 60_000``) to row
``m % len(rows)`` of a real day of Bitstamp BTC/USD minutes, scaled to the symbol's price level, so
any moment has a candle and every interval is the aggregate of its minutes. A bucket that contains
``now`` is *forming*: it holds the minutes already over plus the current minute's part so far
(its close moved linearly from the minute's open toward its final close), so its values differ
from the ones it will have once closed, and a test can tell a forming candle served as closed.
"""

from __future__ import annotations

import csv
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MINUTE = 60_000


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


class LinkedClock:
    """A ``Clock`` that reads the fake time of a ``FakeNow`` running with the wall clock, from
    another process (the crash tests' workers)."""

    def __init__(self, start_ms: int, wall_base_ms: int) -> None:
        self.start_ms, self.wall_base_ms = start_ms, wall_base_ms

    def now_ms(self) -> int:
        return self.start_ms + wall_ms() - self.wall_base_ms


class FakeNow:
    """The fake exchange's clock, shared with the client under test; thread-safe, settable.

    It doubles as the adapter's ``Clock`` (``now_ms``), so the server and the client see one time.
    """

    def __init__(self, now_ms: int) -> None:
        self._now = now_ms
        self._wall_base: int | None = None
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        with self._lock:
            if self._wall_base is not None:
                return self._now + wall_ms() - self._wall_base
            return self._now

    def set(self, now_ms: int) -> None:
        with self._lock:
            self._now = now_ms
            self._wall_base = None

    def run_with_wall_clock(self, wall_base_ms: int) -> None:
        """From now on move with the wall clock: ``now + (wall - wall_base_ms)``. Another process
        given the same two numbers (``LinkedClock``) then shares this fake time."""
        with self._lock:
            self._wall_base = wall_base_ms

    def advance(self, delta_ms: int) -> int:
        with self._lock:
            self._now += delta_ms
            return self._now


@dataclass(frozen=True, slots=True)
class Candle:
    open_ms: int
    open: float
    high: float
    low: float
    close: float
    volume: float


class Tape:
    """OHLCV of one symbol at any time, from the looped real minutes.

    Args:
        rows: (n, 5) float array of open, high, low, close, volume, one row per minute.
        price_scale: multiplies prices (moves the real 2020 BTC/USD level to the symbol's).
        decimals: prices are rounded to this many places, as the exchange's tick would.
    """

    def __init__(self, rows: np.ndarray, price_scale: float, decimals: int) -> None:
        self._rows = rows
        self._scale = price_scale
        self._decimals = decimals

    @classmethod
    def from_csv(cls, path: Path, price_level: float, decimals: int) -> Tape:
        """Load a uniform kline CSV; scale it so its first open equals ``price_level``."""
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            rows = np.array(
                [[float(r[k]) for k in ("open", "high", "low", "close", "volume")] for r in reader]
            )
        return cls(rows, price_level / rows[0, 0], decimals)

    def minutes(self, first: int, count: int) -> np.ndarray:
        """Rows of fake minutes ``first .. first + count - 1`` as (count, 5), scaled."""
        index = np.arange(first, first + count) % len(self._rows)
        out = self._rows[index].copy()
        out[:, :4] = np.round(out[:, :4] * self._scale, self._decimals)
        return out

    def candle(self, open_ms: int, bar_ms: int, now_ms: int) -> Candle | None:
        """The candle of bucket ``[open_ms, open_ms + bar_ms)`` as known at ``now_ms``.

        ``None`` when the bucket has not started. Closed when ``open_ms + bar_ms <= now_ms``.
        """
        if open_ms >= now_ms:
            return None
        first = open_ms // MINUTE
        full = min(bar_ms, now_ms - open_ms) // MINUTE
        part = (min(bar_ms, now_ms - open_ms) % MINUTE) / MINUTE
        rows = self.minutes(first, full + (1 if part > 0 else 0))
        if part > 0:  # the current minute so far
            o, h, low, c, v = rows[-1]
            c_now = round(o + (c - o) * part, self._decimals)
            rows[-1] = (o, max(o, c_now), min(o, c_now), c_now, v * part)
        return Candle(
            open_ms=open_ms,
            open=float(rows[0, 0]),
            high=float(rows[:, 1].max()),
            low=float(rows[:, 2].min()),
            close=float(rows[-1, 3]),
            volume=float(rows[:, 4].sum()),
        )

    def candles(
        self,
        bar_ms: int,
        now_ms: int,
        *,
        limit: int,
        start_ms: int | None = None,
        end_ms: int | None = None,
    ) -> list[Candle]:
        """Candles opening in ``[start_ms, end_ms]``, at most ``limit``, ascending.

        Without ``start_ms`` the newest ``limit`` candles up to ``end_ms`` (or now): the last one
        is the forming bucket that contains ``now_ms``.
        """
        newest = (now_ms - 1) // bar_ms * bar_ms  # the bucket containing the last instant
        last = newest if end_ms is None else min(newest, end_ms // bar_ms * bar_ms)
        if start_ms is None:
            first = last - (limit - 1) * bar_ms
        else:
            first = -(-start_ms // bar_ms) * bar_ms
            last = min(last, first + (limit - 1) * bar_ms)
        out = []
        for open_ms in range(max(first, 0), last + 1, bar_ms):
            candle = self.candle(open_ms, bar_ms, now_ms)
            if candle is not None:
                out.append(candle)
        return out

    def last_price(self, now_ms: int) -> float:
        minute = self.candle((now_ms - 1) // MINUTE * MINUTE, MINUTE, now_ms)
        assert minute is not None
        return minute.close
