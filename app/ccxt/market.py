"""``CcxtMarketData``: the ``MarketData`` port over any ccxt exchange's public endpoints.

It serves the four market tools and the indicators unchanged: candles (closed ones, plus the
forming one marked as such; the rule is in ``candles.py``), the 24h ticker, the exchange's real
order book, the spot symbols and intervals from ``load_markets`` and ``timeframes``, price
decimals and trading rules from the market's precision and limits. No keys: public endpoints only.

Reads go through ccxt's rate limiter (always on), are retried with backoff when the failure is
temporary (``errors.retry_read``) and are translated once into Kestrel's errors, which name the
exchange and what to do. Results are cached with a freshness bound, so the indicator tools do not
refetch on every call, and concurrent reads of one thing share one request. A refill of candles
asks only for what is new since the last fetch. With ``streams=True`` (a ccxt.pro exchange that has
``watch_ohlcv``) the forming candle is refreshed from a websocket between closes instead of by
polling (``streams.py``); tickers and order books are polled, with short cache lifetimes.

Lifecycle: ``await CcxtMarketData.open(exchange_id, settings)`` (or ``start()`` on one built
around an exchange), then ``await close()`` on the same event loop; ccxt's aiohttp session belongs
to the loop that opened it.
"""

from __future__ import annotations

import asyncio
import difflib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from functools import partial
from typing import Any

import numpy as np

from app.ccxt import candles
from app.ccxt.client import build_exchange
from app.ccxt.errors import RetryPolicy, Sleep, retry_read
from app.ccxt.rules import MarketFees, market_fees, market_rules
from app.ccxt.streams import CandleStream
from app.config.exchanges import ExchangeSettings
from app.domain.clock import Clock, WallClock
from app.domain.errors import InvalidParameterError, NotFoundError, OperationalError
from app.domain.market import BookLevel, OrderBook, Ticker, interval_ms, is_interval
from app.domain.market_rules import MarketRules
from app.market.port import PrefixSource
from app.market.series import Floats, KlineSeries, to_decimal

logger = logging.getLogger(__name__)

FIXED_UNITS = ("s", "m", "h", "d", "w")  # months have no fixed length: their close is unknown
TIME_RESYNC_S = 1800.0
DEFAULT_PAGE = 500


@dataclass(frozen=True, slots=True)
class Freshness:
    """How long a fetched answer is served before it is fetched again (seconds).

    Candles are also refetched at the first close after their fetch, whatever their age. With
    streams, the forming candle is refreshed from a stream that spoke within ``stream_s``.
    """

    candles_s: float = 5.0
    ticker_s: float = 2.0
    book_s: float = 1.0
    stream_s: float = 10.0


@dataclass(frozen=True, slots=True)
class _Cached[T]:
    value: T
    mono_s: float


class CcxtMarketData:
    """Public market data of one ccxt exchange; implements the ``MarketData`` port.

    Args:
        exchange: a ccxt async exchange (``client.build_exchange``); closed by ``close``.
        clock: the local clock; ``now_ms`` adds the measured offset to the exchange's time.
        history: candles kept per symbol and interval (fetched in pages on first use).
        freshness: cache lifetimes.
        retry: how temporary failures of reads are retried.
        symbols: serve only these (BASE/QUOTE); default every active spot market.
        streams: keep ccxt.pro candle streams (``watch_ohlcv``) where the exchange has them,
            to refresh forming candles without polling; needs a ccxt.pro exchange.
        sleep: injected so retry tests need not wait.
    """

    def __init__(
        self,
        exchange: Any,
        *,
        clock: Clock | None = None,
        history: int = 1000,
        freshness: Freshness = Freshness(),  # noqa: B008 - frozen
        retry: RetryPolicy = RetryPolicy(),  # noqa: B008 - frozen
        symbols: Iterable[str] | None = None,
        streams: bool = False,
        sleep: Sleep = asyncio.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.exchange = exchange
        self._clock = clock or WallClock()
        self._history = history
        self._freshness = freshness
        self._retry = retry
        self._only = None if symbols is None else frozenset(symbols)
        self._sleep = sleep
        self._mono = monotonic
        self._markets: dict[str, Mapping[str, Any]] = {}
        self._rules: dict[str, MarketRules] = {}
        self._intervals: tuple[str, ...] = ()
        self._offset_ms = 0
        self._synced_mono: float | None = None
        self._candles: dict[tuple[str, str], candles.CandleSnapshot] = {}
        self._tickers: dict[str, _Cached[Ticker]] = {}
        self._books: dict[str, _Cached[OrderBook]] = {}
        self._inflight: dict[Any, asyncio.Future[Any]] = {}
        self._use_streams = streams and bool((exchange.has or {}).get("watchOHLCV"))
        self._streams: dict[tuple[str, str], CandleStream] = {}
        self._stream_epoch: dict[tuple[str, str], int] = {}

    @classmethod
    async def open(
        cls, exchange_id: str, settings: ExchangeSettings | None = None, **options: Any
    ) -> CcxtMarketData:
        """Build the exchange, load its markets and measure its clock.

        Raises:
            OperationalError: ccxt is missing, the id is unknown, or the exchange lists no
                spot market.
            ToolError: the markets could not be loaded (network, rate limit...), translated.
        """
        exchange = build_exchange(exchange_id, settings, streams=bool(options.get("streams")))
        market = cls(exchange, **options)
        try:
            await market.start()
        except BaseException:
            await market.close()
            raise
        return market

    @property
    def exchange_id(self) -> str:
        return str(self.exchange.id)

    async def start(self) -> None:
        """Load the markets and the exchange's time offset; needed before any other call."""
        loaded = await self._read(self.exchange.load_markets, "loading the list of markets")
        markets = {
            symbol: market
            for symbol, market in loaded.items()
            if market.get("spot") and market.get("active") is not False
            and (self._only is None or symbol in self._only)
        }
        if not markets:
            raise OperationalError(
                f"{self.exchange_id} lists no active spot market"
                + (f" among {', '.join(sorted(self._only))}" if self._only else "")
                + "; Kestrel trades spot only. Choose another exchange or other symbols."
            )
        mode = int(self.exchange.precisionMode)
        self._rules = {symbol: market_rules(m, mode) for symbol, m in markets.items()}
        self._markets = markets
        timeframes = getattr(self.exchange, "timeframes", None) or {}
        self._intervals = tuple(sorted(
            (tf for tf in timeframes if is_interval(tf) and tf[-1] in FIXED_UNITS),
            key=interval_ms,
        ))
        await self.sync_time()

    @property
    def streaming(self) -> bool:
        """Whether forming candles are refreshed from ccxt.pro streams."""
        return self._use_streams

    async def close(self) -> None:
        """Stop streams and pending reads, close ccxt's sessions (on the loop that opened them)."""
        for stream in list(self._streams.values()):
            await stream.stop()
        self._streams.clear()
        for future in list(self._inflight.values()):
            future.cancel()
        self._inflight.clear()
        await self.exchange.close()

    # -- time ----------------------------------------------------------------------------------

    def now_ms(self) -> int:
        """The exchange's current time as estimated here: the clock plus the measured offset."""
        return self._clock.now_ms() + self._offset_ms

    @property
    def clock_offset_ms(self) -> int:
        """How far the exchange's clock is ahead of the local one (negative: behind)."""
        return self._offset_ms

    async def sync_time(self) -> None:
        """Measure the exchange's clock against the local one (the middle of the round trip).

        An exchange without a time endpoint is taken to agree with the local clock.
        """
        if not self.exchange.has.get("fetchTime"):
            self._synced_mono = self._mono()
            return
        before = self._clock.now_ms()
        server = await self._read(self.exchange.fetch_time, "reading the exchange's clock")
        after = self._clock.now_ms()
        if not isinstance(server, int | float):
            logger.warning("%s: no server time in its answer; using the local clock",
                           self.exchange_id)
            server = (before + after) // 2
        self._offset_ms = int(server) - (before + after) // 2
        self._synced_mono = self._mono()

    async def _keep_time(self) -> None:
        if self._synced_mono is None or self._mono() - self._synced_mono > TIME_RESYNC_S:
            await self._shared(("time",), self.sync_time)

    # -- what exists ---------------------------------------------------------------------------

    def symbols(self) -> tuple[str, ...]:
        return tuple(sorted(self._markets))

    def intervals(self, symbol: str) -> tuple[str, ...]:
        self._symbol(symbol)
        return self._intervals

    def price_decimals(self, symbol: str) -> int:
        return self.rules(symbol).price_decimals

    def rules(self, symbol: str) -> MarketRules:
        """The exchange's precision and limits for ``symbol``, for the broker and the guard."""
        return self._rules[self._symbol(symbol)]

    def fees(self, symbol: str, default: Decimal = Decimal("0.001")) -> MarketFees:
        """The market's maker and taker fee rates (``default`` where ccxt states none)."""
        return market_fees(self._markets[self._symbol(symbol)], default)

    def prefix_source(self, symbol: str, interval: str) -> PrefixSource | None:
        return None  # live candles are not a prefix of a fixed series

    def _symbol(self, symbol: str) -> str:
        if symbol in self._markets:
            return symbol
        upper = symbol.upper()
        if upper in self._markets:
            return upper
        if not self._markets:
            raise RuntimeError("CcxtMarketData.start() must run before it is used")
        by_id = {str(m.get("id", "")).upper(): s for s, m in self._markets.items()}
        exact = by_id.get(upper.replace("/", "").replace("-", ""))
        close = [exact] if exact else difflib.get_close_matches(
            upper, list(self._markets), n=5, cutoff=0.6)
        hint = f" Closest: {', '.join(close)}." if close else ""
        raise NotFoundError(
            f"{self.exchange_id} has no spot market {symbol!r}.{hint} Write symbols as "
            f"BASE/QUOTE, e.g. BTC/USDT ({len(self._markets)} markets are available).",
            details={"exchange": self.exchange_id, "symbol": symbol, "closest": close},
        )

    def _interval(self, symbol: str, interval: str) -> int:
        if interval in self._intervals:
            return interval_ms(interval)
        if not is_interval(interval):
            raise InvalidParameterError(
                f"{interval!r} is not an interval; use e.g. 1m, 5m, 15m, 1h, 4h or 1d.",
                details={"parameter": "interval", "got": interval},
            )
        raise NotFoundError(
            f"{self.exchange_id} has no {interval} candles for {symbol}. Available intervals: "
            f"{', '.join(self._intervals)}.",
            details={"exchange": self.exchange_id, "symbol": symbol, "interval": interval,
                     "available": list(self._intervals)},
        )

    # -- candles -------------------------------------------------------------------------------

    async def series(self, symbol: str, interval: str) -> KlineSeries:
        """Candles up to now, oldest first; the newest may be forming (``last_complete``).

        Raises:
            NotFoundError: unknown symbol or interval, naming what exists.
            ToolError: the exchange failed (translated; temporary failures retried first).
        """
        symbol = self._symbol(symbol)
        bar = self._interval(symbol, interval)
        await self._keep_time()
        key = (symbol, interval)
        cached = self._candles.get(key)
        if cached is not None:
            now, mono = self.now_ms(), self._mono()
            if cached.usable(now, mono, self._freshness.candles_s):
                return cached.series
            streamed = self._from_stream(key, cached, now, mono)
            if streamed is not None:
                return streamed.series
        snap = await self._shared(("candles", *key), lambda: self._refill(symbol, interval, bar))
        if self._use_streams and key not in self._streams:
            stream = CandleStream(self.exchange, symbol, interval, monotonic=self._mono,
                                  sleep=self._sleep, retry=self._retry)
            self._streams[key] = stream
            stream.start()
        return snap.series

    def _from_stream(
        self, key: tuple[str, str], cached: candles.CandleSnapshot, now: int, mono: float
    ) -> candles.CandleSnapshot | None:
        """The snapshot with its forming candle refreshed from a fresh stream, if there is one.

        Only the forming candle is taken, and only before its close (the caller checked the
        snapshot is still valid now): a closed candle always comes from REST after its close.
        A stream that broke since the snapshot's refill is not trusted until the next refill.
        """
        stream = self._streams.get(key)
        forming = cached.forming_open_ms
        if (
            stream is None or forming is None or now >= cached.valid_until_ms
            or not stream.fresh(mono, self._freshness.stream_s)
            or stream.epoch != self._stream_epoch.get(key)
        ):
            return None
        rows = stream.rows_from(forming, forming)
        heard = stream.last_message_mono
        if len(rows) == 0 or heard is None or heard <= cached.fetched_mono_s:
            return None  # nothing newer than what the snapshot already has
        table = candles.table_of(cached)
        table[-1, 1:] = rows[-1, 1:]
        refreshed = candles.snapshot(
            cached.series.symbol, cached.series.interval, table, bar_ms=cached.bar_ms,
            fetched_at_ms=cached.fetched_at_ms, fetched_mono_s=heard,
        )
        self._candles[key] = refreshed
        return refreshed

    async def _refill(self, symbol: str, interval: str, bar: int) -> candles.CandleSnapshot:
        """Fetch what is new since the last snapshot (or the whole history) and merge it."""
        old = self._candles.get((symbol, interval))
        stream = self._streams.get((symbol, interval))
        self._stream_epoch[(symbol, interval)] = 0 if stream is None else stream.epoch
        fetched_at = self.now_ms()
        mono = self._mono()
        page = self._page_limit()
        current_open = fetched_at - fetched_at % bar
        since: int | None
        if old is not None and len(old.series):
            since = int(old.series.timestamp_ms[-1])
            if old.series.last_complete:
                since += bar
            count = (current_open - since) // bar + 1
            if count > page:
                old, since, count = None, None, self._history
        else:
            old, since, count = None, None, self._history
        if since is None:  # the whole history, oldest page first
            since = current_open - (count - 1) * bar
        table = await self._fetch_candles(symbol, interval, bar, since, count, page)
        merged = candles.merge(None if old is None else candles.table_of(old), table,
                               since=since, keep=self._history)
        snap = candles.snapshot(symbol, interval, merged, bar_ms=bar, fetched_at_ms=fetched_at,
                                fetched_mono_s=mono)
        self._candles[(symbol, interval)] = snap
        return snap

    async def _fetch_candles(
        self, symbol: str, interval: str, bar: int, since: int, count: int, page: int
    ) -> Floats:
        parts: list[Floats] = []
        start = since
        for _ in range(candles.pages_needed(count, page)):
            limit = min(page, count - sum(len(p) for p in parts)) or 1
            part = await self._read(
                partial(self._ohlcv, symbol, interval, start, limit),
                f"fetching {symbol} {interval} candles",
            )
            if len(part) == 0:
                break
            parts.append(part)
            start = int(part[-1, 0]) + bar
            if start > self.now_ms():
                break
        if not parts:
            return np.empty((0, 6))
        return candles.ordered(np.concatenate(parts))

    async def _ohlcv(self, symbol: str, interval: str, since: int, limit: int) -> Floats:
        rows = await self.exchange.fetch_ohlcv(symbol, interval, since=since, limit=limit)
        return candles.parse_ohlcv(rows)

    def _page_limit(self) -> int:
        features = getattr(self.exchange, "features", None) or {}
        spot = features.get("spot") or {}
        limit = (spot.get("fetchOHLCV") or {}).get("limit")
        return int(limit) if isinstance(limit, int) and limit > 0 else DEFAULT_PAGE

    # -- ticker and book -----------------------------------------------------------------------

    async def ticker(self, symbol: str) -> Ticker:
        symbol = self._symbol(symbol)
        cached = self._tickers.get(symbol)
        if cached is not None and self._mono() - cached.mono_s <= self._freshness.ticker_s:
            return cached.value
        return await self._shared(("ticker", symbol), lambda: self._fetch_ticker(symbol))

    async def _fetch_ticker(self, symbol: str) -> Ticker:
        mono = self._mono()
        decimals = self.price_decimals(symbol)

        async def attempt() -> Ticker:
            raw = await self.exchange.fetch_ticker(symbol)
            return parse_ticker(symbol, raw, decimals, self.now_ms())

        ticker = await self._read(attempt, f"fetching the {symbol} ticker")
        self._tickers[symbol] = _Cached(ticker, mono)
        return ticker

    async def order_book(self, symbol: str, limit: int) -> OrderBook:
        """The exchange's own order book, ``limit`` levels a side, best first."""
        symbol = self._symbol(symbol)
        cached = self._books.get(symbol)
        if (
            cached is not None
            and self._mono() - cached.mono_s <= self._freshness.book_s
            and min(len(cached.value.bids), len(cached.value.asks)) >= limit
        ):
            return _trimmed(cached.value, limit)
        book = await self._shared(("book", symbol, limit),
                                  lambda: self._fetch_book(symbol, limit))
        return _trimmed(book, limit)

    async def _fetch_book(self, symbol: str, limit: int) -> OrderBook:
        mono = self._mono()
        rules = self.rules(symbol)

        async def attempt() -> OrderBook:
            raw = await self.exchange.fetch_order_book(symbol, limit)
            return parse_book(symbol, raw, rules, self.now_ms())

        book = await self._read(attempt, f"fetching the {symbol} order book")
        self._books[symbol] = _Cached(book, mono)
        return book

    # -- plumbing ------------------------------------------------------------------------------

    async def _read[T](self, call: Callable[[], Awaitable[T]], what: str) -> T:
        return await retry_read(
            call,
            self.exchange_id,
            what=what,
            policy=self._retry,
            response_headers=lambda: getattr(self.exchange, "last_response_headers", None),
            sleep=self._sleep,
        )

    async def _shared[T](self, key: Any, make: Callable[[], Awaitable[T]]) -> T:
        """Run ``make`` once for concurrent callers of the same ``key``.

        The request runs as its own task, so a caller that is cancelled (a tool's deadline)
        does not cancel the others' read; its result still fills the cache.
        """
        future = self._inflight.get(key)
        if future is None:
            future = asyncio.ensure_future(make())
            self._inflight[key] = future
            future.add_done_callback(lambda done: self._settled(key, done))
        return await asyncio.shield(future)

    def _settled(self, key: Any, done: asyncio.Future[Any]) -> None:
        if self._inflight.get(key) is done:
            del self._inflight[key]
        if not done.cancelled():
            done.exception()  # retrieved: a failure nobody awaited any more is not "lost"


def parse_ticker(symbol: str, raw: Mapping[str, Any], decimals: int, now_ms: int) -> Ticker:
    """Kestrel's ticker from ccxt's unified one.

    Raises:
        ValueError: the exchange left out the last price or the 24h figures.
    """
    last = raw.get("last") if raw.get("last") is not None else raw.get("close")
    change = raw.get("percentage")
    if change is None and raw.get("open") and last is not None:
        change = (float(last) - float(raw["open"])) / float(raw["open"]) * 100
    missing = [name for name, value in (("last", last), ("high", raw.get("high")),
                                        ("low", raw.get("low")), ("percentage", change))
               if value is None]
    if missing:
        raise ValueError(f"the ticker lacks {', '.join(missing)}")
    volume = raw.get("baseVolume")
    timestamp = raw.get("timestamp")
    return Ticker(
        symbol=symbol,
        timestamp_ms=int(timestamp) if isinstance(timestamp, int | float) else now_ms,
        last_price=to_decimal(float(last), decimals),  # type: ignore[arg-type]
        high_24h=to_decimal(float(raw["high"]), decimals),
        low_24h=to_decimal(float(raw["low"]), decimals),
        volume_24h=to_decimal(float(volume or 0), 8),
        change_percent_24h=to_decimal(float(change), 2),  # type: ignore[arg-type]
    )


def parse_book(symbol: str, raw: Mapping[str, Any], rules: MarketRules, now_ms: int) -> OrderBook:
    """Kestrel's order book from ccxt's unified one, prices and sizes at the market's precision.

    Raises:
        ValueError: the sides are not lists of [price, amount] with positive numbers.
    """
    price_d, amount_d = rules.price_decimals, max(rules.amount_decimals, 8)

    def side(levels: Any) -> tuple[BookLevel, ...]:
        if not isinstance(levels, list):
            raise ValueError("an order book side is not a list")
        out = []
        for level in levels:
            price, amount = float(level[0]), float(level[1])
            if not (price > 0 and amount >= 0 and np.isfinite(price) and np.isfinite(amount)):
                raise ValueError(f"an order book level is not a positive price: {level[:2]}")
            out.append(BookLevel(to_decimal(price, price_d), to_decimal(amount, amount_d)))
        return tuple(out)

    timestamp = raw.get("timestamp")
    return OrderBook(
        symbol=symbol,
        timestamp_ms=int(timestamp) if isinstance(timestamp, int | float) else now_ms,
        bids=side(raw.get("bids")),
        asks=side(raw.get("asks")),
    )


def _trimmed(book: OrderBook, limit: int) -> OrderBook:
    if len(book.bids) <= limit and len(book.asks) <= limit:
        return book
    return OrderBook(book.symbol, book.timestamp_ms, book.bids[:limit], book.asks[:limit],
                     book.synthetic)
