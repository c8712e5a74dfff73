"""Market data tools (Part A §1 and Part B §1b) over the ``MarketData`` port.

The same four tools serve a backtest, the offline demo and a live exchange: they only ask the port,
and the port shows nothing after its clock's cursor.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.domain.clock import ms_to_iso
from app.domain.errors import InvalidParameterError, NotFoundError
from app.domain.market import is_interval
from app.market.port import MarketData
from app.market.series import KlineSeries, decimal_text
from app.tools.group import ToolDef, ToolGroup
from app.tools.protocol.render import Element, el
from app.tools.spec import AgentContext, ParamSpec, ParamType, Permission

KLINES_MAX = 1000
KLINES_DEFAULT = 100
BOOK_MAX = 100
BOOK_DEFAULT = 10
TICKER_MAX_SYMBOLS = 50
_FEW_ROWS = 8

SYMBOL = ParamSpec(
    "symbol",
    ParamType.STRING,
    'The trading symbol, e.g. "BTC/USDT"',
    required=True,
    max_length=40,
)


def _check_interval(market: MarketData, symbol: str, interval: str) -> str:
    served = market.intervals(symbol)
    if interval in served:  # every served interval is well-formed: the common case, checked first
        return interval
    if not is_interval(interval):
        raise InvalidParameterError(
            f"Parameter <interval> must look like 1m, 5m, 15m, 1h, 4h or 1d; got {interval!r}.",
            details={"parameter": "interval", "got": interval},
        )
    if interval not in served:
        raise NotFoundError(
            f"{symbol} is not available in {interval}. Available intervals: {', '.join(served)}.",
            details={"symbol": symbol, "interval": interval, "available": list(served)},
        )
    return interval


def _bar_attrs(series: KlineSeries, index: int, decimals: int) -> dict[str, Any]:
    return {
        "open": decimal_text(series.open.item(index), decimals),
        "high": decimal_text(series.high.item(index), decimals),
        "low": decimal_text(series.low.item(index), decimals),
        "close": decimal_text(series.close.item(index), decimals),
        "volume": decimal_text(series.volume.item(index), 8),
    }


def _kline_rows(series: KlineSeries, start: int, stop: int, decimals: int) -> list[Element]:
    """``<kline>`` elements for candles ``start:stop``, built straight from the float columns.

    This is the busiest result of all (a strategy polls it every bar), so the attributes are
    formatted here, once, in the order the spec shows, instead of through ``el``'s keywords.
    Each candle carries its open time twice: ``timestamp_ms`` for arithmetic and ``time_iso``
    for a model, which otherwise reads a date out of thirteen digits (``ms_to_iso`` is cached,
    and consecutive polls share all but one candle).
    """
    if stop - start <= _FEW_ROWS:  # reading single items beats slicing six columns
        ts_, open_, high_, low_, close_, volume_ = (
            series.timestamp_ms.item, series.open.item, series.high.item, series.low.item,
            series.close.item, series.volume.item,
        )
        return [
            Element("kline", (
                ("timestamp_ms", str(ts_(i))),
                ("time_iso", ms_to_iso(ts_(i))),
                ("open", decimal_text(open_(i), decimals)),
                ("high", decimal_text(high_(i), decimals)),
                ("low", decimal_text(low_(i), decimals)),
                ("close", decimal_text(close_(i), decimals)),
                ("volume", decimal_text(volume_(i), 8)),
            ))
            for i in range(start, stop)
        ]
    part = slice(start, stop)
    columns = zip(
        series.timestamp_ms[part].tolist(), series.open[part].tolist(),
        series.high[part].tolist(), series.low[part].tolist(), series.close[part].tolist(),
        series.volume[part].tolist(), strict=True,
    )
    return [
        Element("kline", (
            ("timestamp_ms", str(ts)),
            ("time_iso", ms_to_iso(ts)),
            ("open", decimal_text(o, decimals)),
            ("high", decimal_text(h, decimals)),
            ("low", decimal_text(low, decimals)),
            ("close", decimal_text(c, decimals)),
            ("volume", decimal_text(v, 8)),
        ))
        for ts, o, h, low, c, v in columns
    ]


class MarketTools(ToolGroup):
    """The market data tools, bound to one market."""

    GROUP = "Market Data Tools"
    TOOLS = (
        ToolDef(
            name="get_historical_klines",
            description=(
                "Fetches historical K-line (candlestick) data for a trading symbol, oldest first. "
                "timestamp_ms and time_iso are each candle's open time (UTC); the newest candle "
                "may still be forming."
            ),
            params=(
                SYMBOL,
                ParamSpec(
                    "interval",
                    ParamType.STRING,
                    'The K-line interval, e.g. "1m", "5m", "15m", "1h", "4h", "1d"',
                    required=True,
                    max_length=8,
                ),
                ParamSpec(
                    "limit",
                    ParamType.INTEGER,
                    "Number of K-lines to fetch",
                    default=KLINES_DEFAULT,
                    minimum=1,
                    maximum=KLINES_MAX,
                ),
                ParamSpec(
                    "end_time_ms",
                    ParamType.LONG,
                    "Unix timestamp in milliseconds; fetches K-lines that open before this time",
                    minimum=0,
                ),
            ),
            permission=Permission.MARKET,
            returns=(
                '<klines_data symbol="BTC/USDT" interval="1h">\n'
                '    <kline timestamp_ms="long" time_iso="iso8601" open="decimal" '
                'high="decimal" low="decimal" close="decimal" volume="decimal" />\n</klines_data>'
            ),
        ),
        ToolDef(
            name="get_current_ticker_info",
            description="Fetches the last price and 24h statistics for one or more symbols",
            params=(
                ParamSpec(
                    "symbols",
                    ParamType.LIST,
                    "Trading symbol(s), at least one",
                    required=True,
                    item_tag="symbol",
                    maximum=TICKER_MAX_SYMBOLS,
                ),
            ),
            permission=Permission.MARKET,
            returns=(
                "<tickers_data>\n"
                '    <ticker symbol="string" last_price="decimal" high_24h="decimal" '
                'low_24h="decimal" volume_24h="decimal" change_percent_24h="decimal" />\n'
                "</tickers_data>"
            ),
        ),
        ToolDef(
            name="get_order_book",
            description=(
                "Fetches the current order book (depth of market) for a symbol; best prices first."
            ),
            params=(
                SYMBOL,
                ParamSpec(
                    "limit",
                    ParamType.INTEGER,
                    "Number of bid and ask levels to return",
                    default=BOOK_DEFAULT,
                    minimum=1,
                    maximum=BOOK_MAX,
                ),
            ),
            permission=Permission.MARKET,
            returns=(
                '<order_book_data symbol="string">\n'
                '    <bids><level price="decimal" quantity="decimal" /></bids>\n'
                '    <asks><level price="decimal" quantity="decimal" /></asks>\n'
                "</order_book_data>"
            ),
        ),
        ToolDef(
            name="get_market_snapshot",
            description=(
                "The current candle of one symbol or of every symbol you watch (market.observe). "
                'complete="false" marks a candle that is still forming.'
            ),
            params=(
                ParamSpec(
                    "symbol",
                    ParamType.STRING,
                    "One symbol; default: every symbol you watch",
                    max_length=40,
                ),
                ParamSpec(
                    "interval",
                    ParamType.STRING,
                    "Candle interval; default: your configured interval",
                    max_length=8,
                ),
            ),
            permission=Permission.MARKET,
            returns=(
                '<market_snapshot time_ms="long" time_iso="string">\n'
                '    <bar symbol="string" interval="1h" timestamp_ms="long" time_iso="string" '
                'complete="true" '
                'open="decimal" high="decimal" low="decimal" close="decimal" volume="decimal" />\n'
                "</market_snapshot>"
            ),
        ),
    )

    def __init__(self, market: MarketData) -> None:
        self._market = market

    async def get_historical_klines(self, ctx: AgentContext, args: dict[str, Any]) -> Element:
        """Candles up to ``end_time_ms`` (or the newest), oldest first."""
        market = self._market
        symbol = args["symbol"]
        # its first step, market.intervals(symbol), answers an unknown symbol with NOT_FOUND
        interval = _check_interval(market, symbol, args["interval"])
        series = await market.series(symbol, interval)
        stop = len(series)
        if args["end_time_ms"] is not None:
            stop = series.count_before(args["end_time_ms"])
        start = max(stop - args["limit"], 0)
        klines = _kline_rows(series, start, stop, market.price_decimals(symbol))
        return Element("klines_data", (("symbol", symbol), ("interval", interval)), None,
                       tuple(klines))

    async def get_current_ticker_info(self, ctx: AgentContext, args: dict[str, Any]) -> Element:
        """One ticker per distinct symbol; any unknown symbol refuses the whole call, naming
        the symbols there are."""
        market = self._market
        symbols: list[str] = args["symbols"]
        unknown = [
            s for s in symbols if s not in market.symbols() and s.upper() not in market.symbols()
        ]
        if unknown:
            raise NotFoundError(
                f"Unknown symbol(s): {', '.join(unknown)}. Available symbols: "
                f"{', '.join(market.symbols())}.",
                details={"unknown": unknown, "available": list(market.symbols())},
            )
        tickers = []
        for symbol in dict.fromkeys(symbols):
            ticker = await market.ticker(symbol)
            tickers.append(
                el(
                    "ticker",
                    None,
                    symbol=ticker.symbol,
                    last_price=ticker.last_price,
                    high_24h=ticker.high_24h,
                    low_24h=ticker.low_24h,
                    volume_24h=ticker.volume_24h,
                    change_percent_24h=ticker.change_percent_24h,
                )
            )
        return el("tickers_data", None, *tickers)

    async def get_order_book(self, ctx: AgentContext, args: dict[str, Any]) -> Element:
        """The book's best ``limit`` levels each side."""
        book = await self._market.order_book(args["symbol"], args["limit"])
        bids = [el("level", None, price=lvl.price, quantity=lvl.quantity) for lvl in book.bids]
        asks = [el("level", None, price=lvl.price, quantity=lvl.quantity) for lvl in book.asks]
        return el(
            "order_book_data",
            None,
            el("bids", None, *bids),
            el("asks", None, *asks),
            symbol=book.symbol,
        )

    async def get_market_snapshot(self, ctx: AgentContext, args: dict[str, Any]) -> Element:
        """The newest candle of one symbol or of the caller's watched ones, in the caller's
        interval unless it names one."""
        market = self._market
        if args["symbol"]:
            symbols: Sequence[str] = [args["symbol"]]
        else:
            symbols = ctx.watched_symbols or market.symbols()
        interval = args["interval"] or ctx.interval
        now = market.now_ms()
        bars = []
        for symbol in symbols:
            checked = _check_interval(market, symbol, interval)
            series = await market.series(symbol, checked)
            if len(series) == 0:
                continue
            decimals = market.price_decimals(symbol)
            bars.append(
                el(
                    "bar",
                    None,
                    symbol=series.symbol,
                    interval=checked,
                    timestamp_ms=series.timestamp_ms.item(len(series) - 1),
                    time_iso=ms_to_iso(series.timestamp_ms.item(len(series) - 1)),
                    complete=series.last_complete,
                    **_bar_attrs(series, len(series) - 1, decimals),
                )
            )
        return el("market_snapshot", None, *bars, time_ms=now, time_iso=ms_to_iso(now))
