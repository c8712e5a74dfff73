"""What the fake exchange answers, shaped as Binance's and OKX's public REST APIs answer.

Each venue turns the shared market state (the tapes at the fake now, the recorded order book
shape) into the exact JSON the real endpoint sends, so ccxt's own ``binance`` and ``okx`` classes
parse it with their real code. Shapes follow the recorded responses in ``tests/data/ccxt/``;
values come from the tape, so candles, ticker and book agree with each other at any fake time.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.helpers.fake_exchange.tape import MINUTE, Candle, FakeNow, Tape

DATA = Path(__file__).resolve().parents[2] / "data" / "ccxt"
DAY = 86_400_000
TAPE_CSV = DATA / "BTC-USD_1m_20200101-20200101_bitstamp.csv"


def load(name: str) -> Any:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


class NotServed(Exception):
    """The request names a symbol or interval the fake does not list (the venue's own error)."""


@dataclass(frozen=True, slots=True)
class Market:
    """One spot market the fake serves: its tape and (Binance's) price decimals."""

    base: str
    quote: str
    tape: Tape
    decimals: int


def build_markets() -> dict[str, Market]:
    """BTC/USDT and ETH/USDT, their tapes scaled to the recorded 2026 price levels."""
    btc = load("binance_fetch_ohlcv_BTC_USDT.json")["parsed_response"][0][1]
    eth = load("binance_fetch_ticker_ETH_USDT.json")["parsed_response"]["last"]
    return {
        "BTC/USDT": Market("BTC", "USDT", Tape.from_csv(TAPE_CSV, float(btc), 2), 2),
        "ETH/USDT": Market("ETH", "USDT", Tape.from_csv(TAPE_CSV, float(eth), 2), 2),
    }


Shape = tuple[list[tuple[float, float]], list[tuple[float, float]]]


def book_shape(raw: Mapping[str, Any]) -> Shape:
    """A recorded book as (offset from its best bid, size) per level, best first."""
    bids = [(float(level[0]), float(level[1])) for level in raw["bids"]]
    asks = [(float(level[0]), float(level[1])) for level in raw["asks"]]
    best = bids[0][0]
    return [(p - best, q) for p, q in bids], [(p - best, q) for p, q in asks]


class MarketState:
    """The fake's world at the fake now: candles, ticker, order book and trades per symbol."""

    def __init__(self, now: FakeNow) -> None:
        self.now = now
        self.markets = build_markets()

    def market(self, symbol: str) -> Market:
        found = self.markets.get(symbol)
        if found is None:
            raise NotServed(symbol)
        return found

    def candles(self, symbol: str, bar_ms: int, **window: Any) -> list[Candle]:
        return self.market(symbol).tape.candles(bar_ms, self.now.now_ms(), **window)

    def day(self, symbol: str) -> Candle:
        """The rolling 24 hours up to now, as one candle."""
        now = self.now.now_ms()
        minute_start = (now - DAY) // MINUTE * MINUTE
        candle = self.market(symbol).tape.candle(minute_start, now - minute_start, now)
        assert candle is not None
        return candle

    def last(self, symbol: str) -> float:
        return self.market(symbol).tape.last_price(self.now.now_ms())

    def book(
        self, symbol: str, depth: int, shape: Shape, decimals: int
    ) -> tuple[list[list[str]], list[list[str]]]:
        """``depth`` levels a side with the best bid at the last price, in a recorded shape.

        Beyond the recorded levels the shape repeats, each repetition further out.
        """
        last = self.last(symbol)
        tick = 10 ** -decimals
        sides = []
        for levels_shape, sign in ((shape[0], -1), (shape[1], 1)):
            span = abs(levels_shape[-1][0]) + tick
            levels = []
            for i in range(depth):
                offset, size = levels_shape[i % len(levels_shape)]
                price = last + offset + sign * (i // len(levels_shape)) * span
                levels.append([f"{price:.{decimals}f}", f"{size:.8f}"])
            sides.append(levels)
        return sides[0], sides[1]

    def trades(self, symbol: str, limit: int) -> list[dict[str, Any]]:
        """The recorded Binance trades, re-stamped to end now and re-priced around the last."""
        raw = load("binance_fetch_trades_BTC_USDT.json")["http_response"]
        last_recorded = float(raw[-1]["p"])
        end = int(raw[-1]["T"])
        now = self.now.now_ms()
        last = self.last(symbol)
        decimals = self.market(symbol).decimals
        out = []
        for trade in raw[-limit:]:
            shifted = dict(trade)
            shifted["T"] = now - (end - int(trade["T"]))
            shifted["p"] = f"{float(trade['p']) - last_recorded + last:.{decimals}f}"
            out.append(shifted)
        return out


def parse_interval(text: str) -> int:
    """Milliseconds of "1m", "1h", "1d", "1w" (Binance) or "1H", "4Hutc", "1Dutc" (OKX)."""
    text = text.removesuffix("utc")
    unit = {"s": 1000, "m": MINUTE, "h": 3_600_000, "H": 3_600_000, "d": DAY, "D": DAY,
            "w": 7 * DAY, "W": 7 * DAY, "M": 30 * DAY}.get(text[-1:])
    if unit is None or not text[:-1].isdigit():
        raise NotServed(text)
    return int(text[:-1]) * unit


# -- Binance ----------------------------------------------------------------------------------


class Binance:
    """Binance spot public API (/api/v3): exchangeInfo, time, klines, depth, ticker, aggTrades."""

    name = "binance"
    endpoints: Mapping[str, str] = {
        "/api/v3/exchangeInfo": "markets",
        "/api/v3/time": "time",
        "/api/v3/klines": "klines",
        "/api/v3/depth": "depth",
        "/api/v3/ticker/24hr": "ticker",
        "/api/v3/aggTrades": "trades",
    }

    def __init__(self, state: MarketState) -> None:
        self.state = state
        static = load("binance_static_markets.json")
        self._infos = {symbol: static[symbol]["info"] for symbol in state.markets}
        self.infos = self._infos
        self._ticker_template = load("binance_fetch_ticker_BTC_USDT.json")["http_response"]
        self._by_id = {info["symbol"]: symbol for symbol, info in self._infos.items()}
        self._shape = book_shape(load("binance_fetch_order_book_BTC_USDT.json")["http_response"])
        self.shape = self._shape

    def symbol(self, query: Mapping[str, str]) -> str:
        found = self._by_id.get(query.get("symbol", ""))
        if found is None:
            raise NotServed(query.get("symbol", ""))
        return found

    def not_served(self, what: str) -> tuple[int, Any]:
        return 400, {"code": -1121, "msg": "Invalid symbol."}

    def answer(self, endpoint: str, query: Mapping[str, str]) -> tuple[int, Any]:
        now = self.state.now.now_ms()
        if endpoint == "markets":
            return 200, {
                "timezone": "UTC",
                "serverTime": now,
                "rateLimits": [
                    {"rateLimitType": "REQUEST_WEIGHT", "interval": "MINUTE", "intervalNum": 1,
                     "limit": 6000},
                ],
                "exchangeFilters": [],
                "symbols": list(self._infos.values()),
            }
        if endpoint == "time":
            return 200, {"serverTime": now}
        symbol = self.symbol(query)
        decimals = self.state.market(symbol).decimals
        if endpoint == "klines":
            bar = parse_interval(query["interval"])
            limit = min(int(query.get("limit", 500)), 1000)
            candles = self.state.candles(
                symbol, bar, limit=limit,
                start_ms=int(query["startTime"]) if "startTime" in query else None,
                end_ms=int(query["endTime"]) if "endTime" in query else None,
            )
            return 200, [
                [c.open_ms, f"{c.open:.{decimals}f}", f"{c.high:.{decimals}f}",
                 f"{c.low:.{decimals}f}", f"{c.close:.{decimals}f}", f"{c.volume:.8f}",
                 c.open_ms + bar - 1, f"{c.volume * c.close:.8f}", 100, "0", "0", "0"]
                for c in candles
            ]
        if endpoint == "depth":
            depth = min(int(query.get("limit", 100)), 5000)
            bids, asks = self.state.book(symbol, depth, self._shape, decimals)
            return 200, {"lastUpdateId": now, "bids": bids, "asks": asks}
        if endpoint == "ticker":
            day = self.state.day(symbol)
            bids, asks = self.state.book(symbol, 1, self._shape, decimals)
            last = self.state.last(symbol)
            out = dict(self._ticker_template)
            out.update(
                symbol=query["symbol"],
                priceChange=f"{last - day.open:.{decimals}f}",
                priceChangePercent=f"{(last - day.open) / day.open * 100:.3f}",
                lastPrice=f"{last:.{decimals}f}",
                openPrice=f"{day.open:.{decimals}f}",
                highPrice=f"{day.high:.{decimals}f}",
                lowPrice=f"{day.low:.{decimals}f}",
                volume=f"{day.volume:.8f}",
                quoteVolume=f"{day.volume * last:.8f}",
                bidPrice=bids[0][0], askPrice=asks[0][0],
                openTime=now - DAY, closeTime=now,
            )
            return 200, out
        if endpoint == "trades":
            return 200, self.state.trades(symbol, min(int(query.get("limit", 500)), 1000))
        raise AssertionError(endpoint)

    @staticmethod
    def rate_limited(retry_after: str | None) -> tuple[int, Any]:
        return 429, {"code": -1003, "msg": "Too many requests; current limit is 6000 per minute."}

    @staticmethod
    def banned(until_ms: int) -> Any:
        return {"code": -1003, "msg": f"Way too many requests; IP(127.0.0.1) banned until "
                f"{until_ms}. Please use the websocket for live updates to avoid bans."}

    @staticmethod
    def server_error(status: int) -> tuple[int, Any]:
        return status, {"code": -1001, "msg": "Internal error; unable to process your request."}


# -- OKX --------------------------------------------------------------------------------------


class Okx:
    """OKX v5 public API: instruments, time, candles, books, ticker, trades."""

    name = "okx"
    endpoints: Mapping[str, str] = {
        "/api/v5/public/instruments": "markets",
        "/api/v5/public/time": "time",
        "/api/v5/market/candles": "klines",
        "/api/v5/market/history-candles": "klines",
        "/api/v5/market/books": "depth",
        "/api/v5/market/ticker": "ticker",
        "/api/v5/market/trades": "trades",
    }

    def __init__(self, state: MarketState) -> None:
        self.state = state
        self._instruments = load("okx_spot_instruments.json")["data"]
        self._ticker_template = load("okx_fetch_ticker_BTC_USDT.json")["http_response"]["data"][0]
        self._shape = book_shape(load("okx_fetch_order_book_BTC_USDT.json")["http_response"]
                                 ["data"][0])
        self._decimals = {row["instId"].replace("-", "/"): len(row["tickSz"].split(".")[1])
                          for row in self._instruments}

    @staticmethod
    def ok(data: Any) -> tuple[int, Any]:
        return 200, {"code": "0", "msg": "", "data": data}

    def not_served(self, what: str) -> tuple[int, Any]:
        return 200, {"code": "51001", "msg": "Instrument ID does not exist", "data": []}

    def symbol(self, query: Mapping[str, str]) -> str:
        return query.get("instId", "").replace("-", "/")

    def answer(self, endpoint: str, query: Mapping[str, str]) -> tuple[int, Any]:
        now = self.state.now.now_ms()
        if endpoint == "markets":
            if query.get("instType") != "SPOT":
                return self.ok([])
            return self.ok(self._instruments)
        if endpoint == "time":
            return self.ok([{"ts": str(now)}])
        symbol = self.symbol(query)
        self.state.market(symbol)
        decimals = self._decimals[symbol]
        if endpoint == "klines":
            bar = parse_interval(query.get("bar", "1m"))
            limit = min(int(query.get("limit", 100)), 300)
            # after: records older than ts; before: records newer than ts (OKX v5)
            end = int(query["after"]) - 1 if "after" in query else None
            start = int(query["before"]) + 1 if "before" in query else None
            if start is None:
                candles = self.state.candles(symbol, bar, limit=limit, end_ms=end)
            elif end is None:  # the newest `limit` after `before`, as OKX pages from the top
                candles = [c for c in self.state.candles(symbol, bar, limit=limit)
                           if c.open_ms >= start]
            else:
                span = max((end - start) // bar + 1, 1)
                candles = self.state.candles(
                    symbol, bar, limit=span, start_ms=start, end_ms=end)[-limit:]
            return self.ok([
                [str(c.open_ms), f"{c.open:.{decimals}f}", f"{c.high:.{decimals}f}",
                 f"{c.low:.{decimals}f}", f"{c.close:.{decimals}f}", f"{c.volume:.8f}",
                 f"{c.volume * c.close:.8f}", f"{c.volume * c.close:.8f}",
                 "1" if c.open_ms + bar <= now else "0"]
                for c in reversed(candles)
            ])
        if endpoint == "depth":
            bids, asks = self.state.book(symbol, min(int(query.get("sz", 1)), 400), self._shape,
                                         decimals)
            return self.ok([{
                "asks": [[p, q, "0", "1"] for p, q in asks],
                "bids": [[p, q, "0", "1"] for p, q in bids],
                "ts": str(now),
            }])
        if endpoint == "ticker":
            day = self.state.day(symbol)
            bids, asks = self.state.book(symbol, 1, self._shape, decimals)
            last = self.state.last(symbol)
            out = dict(self._ticker_template)
            out.update(
                instId=query["instId"], last=f"{last:.{decimals}f}",
                open24h=f"{day.open:.{decimals}f}", high24h=f"{day.high:.{decimals}f}",
                low24h=f"{day.low:.{decimals}f}", vol24h=f"{day.volume:.8f}",
                volCcy24h=f"{day.volume * last:.8f}", bidPx=bids[0][0], askPx=asks[0][0],
                ts=str(now),
            )
            return self.ok([out])
        if endpoint == "trades":
            raw = self.state.trades(symbol, min(int(query.get("limit", 100)), 500))
            return self.ok([
                {"instId": query["instId"], "side": "sell" if t["m"] else "buy", "sz": t["q"],
                 "px": t["p"], "source": "0", "tradeId": str(t["a"]), "ts": str(t["T"])}
                for t in reversed(raw)
            ])
        raise AssertionError(endpoint)

    @staticmethod
    def rate_limited(retry_after: str | None) -> tuple[int, Any]:
        return 429, {"code": "50011", "msg": "Too Many Requests", "data": []}

    @staticmethod
    def banned(until_ms: int) -> Any:
        return {"code": "50011", "msg": f"Too Many Requests; banned until {until_ms}",
                "data": []}

    @staticmethod
    def server_error(status: int) -> tuple[int, Any]:
        return status, {"code": "50001", "msg": "Service temporarily unavailable", "data": []}
