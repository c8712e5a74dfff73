"""What an exchange can do (ccxt's ``has``) and whether Kestrel can reach it now.

Settings > Exchanges lists these for the exchange a person picks, before any workspace depends
on it: which of the features Kestrel uses the exchange offers (candles, book, ticker, websocket
streams, orders), and a "Test connection" that loads its markets and reads one ticker through
the same adapter a live venue uses, with the same per-exchange options (URLs, proxy), reporting
the time it took or the adapter's own sentence on failure. Both block (importing ccxt takes about
a second; a test is network I/O): callers run them off the window's thread.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from app.ccxt.client import ccxt_module
from app.config.exchanges import ExchangeSettings
from app.domain.errors import KestrelError, OperationalError

# (ccxt's ``has`` key, what Kestrel uses it for)
ABILITIES: tuple[tuple[str, str], ...] = (
    ("fetchOHLCV", "candles"),
    ("fetchOrderBook", "order book"),
    ("fetchTicker", "ticker"),
    ("fetchTime", "server time"),
    ("watchOHLCV", "candle stream"),
    ("watchOrderBook", "book stream"),
    ("watchTicker", "ticker stream"),
    ("createOrder", "place orders"),
    ("cancelOrder", "cancel orders"),
    ("fetchBalance", "balances"),
)


@dataclass(frozen=True, slots=True)
class Ability:
    key: str
    what: str
    offered: bool | str  # ccxt says True, False, or "emulated"


@dataclass(frozen=True, slots=True)
class ProbeResult:
    ok: bool
    message: str
    latency_ms: float | None = None


def exchange_abilities(exchange_id: str) -> list[Ability]:
    """The features Kestrel uses, as ``exchange.has`` of ccxt.pro's class states them (the
    REST ones plus the ``watch*`` streams); nothing is sent to the exchange.

    Raises:
        OperationalError: ccxt is missing or has no exchange of that id.
    """
    module = ccxt_module(streams=True)
    klass = getattr(module, exchange_id, None)
    if klass is None or exchange_id not in module.exchanges:
        plain = ccxt_module()
        klass = getattr(plain, exchange_id, None)
        if klass is None:
            raise OperationalError(f"ccxt has no exchange {exchange_id!r}")
    has = klass().has or {}
    return [Ability(key, what, _offered(has.get(key))) for key, what in ABILITIES]


def _offered(value: object) -> bool | str:
    if value == "emulated":
        return "emulated"
    return bool(value)


def describe_abilities(abilities: list[Ability]) -> str:
    """One line a person reads: what is offered, emulated and missing."""
    parts = []
    for ability in abilities:
        mark = "✓" if ability.offered is True else "✗" if ability.offered is False else "≈"
        parts.append(f"{mark} {ability.what}")
    return "   ".join(parts)


async def probe_exchange(
    exchange_id: str, settings: ExchangeSettings, symbol: str | None = None
) -> ProbeResult:
    """Load the markets and read one ticker (``symbol``, or the first market) as a live venue
    would; never raises for what the exchange or the network does."""
    from app.ccxt.market import CcxtMarketData

    started = time.perf_counter()
    try:
        market = await CcxtMarketData.open(exchange_id, settings)
    except KestrelError as exc:
        return ProbeResult(False, str(exc))
    try:
        symbols = market.symbols()
        chosen = symbol if symbol in symbols else (
            "BTC/USDT" if "BTC/USDT" in symbols else symbols[0])
        ticker = await market.ticker(chosen)
    except KestrelError as exc:
        return ProbeResult(False, str(exc))
    finally:
        await market.close()
    latency = (time.perf_counter() - started) * 1000
    return ProbeResult(
        True,
        f"Connected to {exchange_id} in {latency:,.0f} ms: {len(symbols):,} spot markets; "
        f"{chosen} last {ticker.last_price}.",
        latency,
    )


def probe_exchange_blocking(
    exchange_id: str, settings: ExchangeSettings, symbol: str | None = None
) -> ProbeResult:
    """``probe_exchange`` on its own event loop, for a worker thread (the window's)."""
    return asyncio.run(probe_exchange(exchange_id, settings, symbol))
