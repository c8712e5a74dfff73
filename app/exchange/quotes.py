"""Live quotes for the paper broker: the touch (best bid and ask) and the last price per symbol.

On a live venue the paper broker fills against the exchange's own book instead of candles. The
broker's settle is synchronous (the driver calls it between the clock's move and the due jobs),
so the reading is split in two: ``QuoteFeed.refresh`` (async, run by the live driver before each
settle) reads the book's top and the ticker of every symbol the account has an open order or a
position in, through the ``MarketData`` port, and keeps the newest ``Quote`` of each on a
``QuoteBoard``; the settle then reads the board. ``QuoteWindow`` is what the broker values
positions with: the last traded price, as the exchange reports it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal

from app.domain.clock import Clock
from app.market.port import MarketData

BOOK_DEPTH = 5  # the touch is all a paper fill needs; 5 is the smallest depth most venues serve


@dataclass(frozen=True, slots=True)
class Quote:
    """One symbol's market at one moment.

    Attributes:
        bid, ask: the best bid and ask of the exchange's book; None when that side is empty.
        last: the last traded price (the ticker's), which positions are valued at and stops
            trigger on.
        time_ms: when the book was read, on the local clock (the book's stamp, which is the
            exchange's time, moved by the measured difference between the exchange's clock and
            the local one); an order fills only against a quote read after it was placed.
    """

    symbol: str
    bid: Decimal | None
    ask: Decimal | None
    last: Decimal
    time_ms: int


class QuoteBoard:
    """The newest quote of each symbol; written by the feed, read by the settle."""

    def __init__(self) -> None:
        self._quotes: dict[str, Quote] = {}

    def put(self, quote: Quote) -> None:
        old = self._quotes.get(quote.symbol)
        if old is None or quote.time_ms >= old.time_ms:
            self._quotes[quote.symbol] = quote

    def get(self, symbol: str) -> Quote | None:
        return self._quotes.get(symbol)


class QuoteFeed:
    """Reads the touch and last price of the symbols in play into a ``QuoteBoard``.

    Args:
        clock: the venue's (local) clock, which orders are stamped with.
        wanted: the symbols to read at each refresh (the broker's open orders and positions);
            set with ``follow`` once the broker exists.
    """

    def __init__(self, market: MarketData, clock: Clock, board: QuoteBoard | None = None,
                 depth: int = BOOK_DEPTH) -> None:
        self.market = market
        self.clock = clock
        self.board = board or QuoteBoard()
        self.depth = depth
        self._wanted: Callable[[], Iterable[str]] = tuple

    def follow(self, wanted: Callable[[], Iterable[str]]) -> None:
        self._wanted = wanted

    async def refresh(self) -> int:
        """Read every wanted symbol at once; return how many quotes were read.

        Raises:
            ToolError: a read failed (translated by the adapter, after its retries); the quotes
                that were read are kept.
        """
        symbols = sorted(set(self._wanted()))
        if not symbols:
            return 0
        results = await asyncio.gather(*(self.read(s) for s in symbols), return_exceptions=True)
        failures = [r for r in results if isinstance(r, BaseException)]
        for failure in failures:
            if not isinstance(failure, Exception):
                raise failure  # a cancellation is not a failed read
        if failures:
            raise failures[0]
        return len(results)

    async def read(self, symbol: str) -> Quote:
        """The symbol's quote now (the adapter's short-lived caches apply), kept on the board."""
        book, ticker = await asyncio.gather(
            self.market.order_book(symbol, self.depth), self.market.ticker(symbol)
        )
        exchange_ahead_ms = self.market.now_ms() - self.clock.now_ms()
        quote = Quote(symbol, book.best_bid, book.best_ask, ticker.last_price,
                      book.timestamp_ms - exchange_ahead_ms)
        self.board.put(quote)
        return quote

    async def last_price(self, symbol: str) -> Decimal:
        """The last traded price from the ticker (cached briefly by the adapter)."""
        ticker = await self.market.ticker(symbol)
        return ticker.last_price


class QuoteWindow:
    """What the paper broker sees of a live market: the newest quote's last price per symbol.

    The same face as ``BarWindow`` where the broker values positions (``decimals``, ``mark``).
    """

    def __init__(self, market: MarketData, board: QuoteBoard) -> None:
        self.market = market
        self.board = board
        self._price_decimals: dict[str, int] = {}

    def decimals(self, symbol: str) -> int:
        decimals = self._price_decimals.get(symbol)
        if decimals is None:
            decimals = self._price_decimals[symbol] = self.market.price_decimals(symbol)
        return decimals

    def mark(self, symbol: str, bars: object | None = None) -> Decimal | None:
        """The last price of the newest quote (``bars`` is the bar window's; unused here)."""
        quote = self.board.get(symbol)
        return None if quote is None else quote.last
