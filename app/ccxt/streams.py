"""ccxt.pro candle streams kept alive in the background, as a cache of the forming candle.

Where the exchange has ``watch_ohlcv``, a ``CandleStream`` per symbol and interval keeps one
subscription open in its own task and remembers the newest rows with the time each arrived. The
adapter uses it only to refresh the *forming* candle between closes, and only while the stream is
fresh (a message within the freshness bound): closed candles always come from a REST fetch made
after their close, so a missed final update can never show as a closed candle.

A dropped connection makes ``watch_ohlcv`` raise; the stream forgets what it had, counts the break
in ``epoch`` (the adapter refills from REST before trusting it again) and resubscribes after a
backoff. ccxt.pro reconnects on the next ``watch_*`` call.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import numpy as np

from app.ccxt.candles import MalformedCandles, ordered, parse_ohlcv
from app.ccxt.errors import RetryPolicy, Sleep, is_ccxt_error
from app.market.series import Floats

logger = logging.getLogger(__name__)

KEEP_ROWS = 4  # the forming candle and a few before it are all the adapter ever reads


class CandleStream:
    """One ``watch_ohlcv`` subscription and the newest candles it delivered.

    Attributes:
        epoch: how many times the stream broke; a snapshot refilled at an older epoch may
            not be extended from the stream.
        last_message_mono: ``monotonic()`` of the last update, ``None`` while (re)connecting.
    """

    def __init__(
        self,
        exchange: Any,
        symbol: str,
        interval: str,
        *,
        monotonic: Callable[[], float],
        sleep: Sleep = asyncio.sleep,
        retry: RetryPolicy = RetryPolicy(),  # noqa: B008 - frozen
    ) -> None:
        self.exchange = exchange
        self.symbol = symbol
        self.interval = interval
        self.epoch = 0
        self.last_message_mono: float | None = None
        self._rows: Floats = np.empty((0, 6))
        self._mono = monotonic
        self._sleep = sleep
        self._retry = retry
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def fresh(self, now_mono: float, max_age_s: float) -> bool:
        return self.last_message_mono is not None and now_mono - self.last_message_mono <= max_age_s

    def rows_from(self, open_ms: int, until_ms: int) -> Floats:
        """Streamed candles opening in ``[open_ms, until_ms]``, ascending."""
        rows = self._rows
        return rows[(rows[:, 0] >= open_ms) & (rows[:, 0] <= until_ms)]

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def _run(self) -> None:
        failures = 0
        while True:
            try:
                update = await self.exchange.watch_ohlcv(self.symbol, self.interval)
                table = parse_ohlcv(update)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not (is_ccxt_error(exc) or isinstance(exc, MalformedCandles)):
                    # not the network's fault: stop streaming, the adapter keeps polling REST
                    logger.exception("%s: %s %s stream stopped", self.exchange.id, self.symbol,
                                     self.interval)
                    self._broke(exc)
                    return
                failures += 1
                self._broke(exc)
                await self._sleep(self._retry.backoff_s(min(failures, 6)))
                continue
            failures = 0
            merged = ordered(np.concatenate([self._rows, table])) if len(table) else self._rows
            self._rows = merged[-KEEP_ROWS:]
            self.last_message_mono = self._mono()

    def _broke(self, exc: BaseException) -> None:
        self.epoch += 1
        self.last_message_mono = None
        self._rows = np.empty((0, 6))
        logger.info("%s: %s %s stream broke (%s: %s); REST until it is back",
                    self.exchange.id, self.symbol, self.interval, type(exc).__name__, exc)
