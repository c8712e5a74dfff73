"""Benchmark: a market tool call on the live ccxt adapter, against the bare ccxt call it makes.

Run on demand (not collected by pytest):

    .venv/bin/python tests/benchmarks/bench_ccxt_market.py [--calls 300] [--venue binance]

ccxt's own exchange class talks to the fake exchange on 127.0.0.1 (real HTTP, real parsing). The
rate limiter stays on with a 1 ms spacing, so it paces both sides alike and the fake's answer time
is in both. Pairs are interleaved (bare, tool, bare, tool...) so drift hits both. Printed per
pair: medians, the overhead (tool - bare) and the ratio tool / bare. The issue's budget: the
overhead of a tool call over the bare ccxt call, median under 2 ms.

- ticker: ``get_current_ticker_info`` through the executor with the ticker cache off (every call
  fetches) vs ``exchange.fetch_ticker``.
- klines: ``get_historical_klines`` (100 candles rendered) with the candle cache off, so each call
  refills from the forming candle on, vs ``exchange.fetch_ohlcv`` of that same refill.
- cached klines: the same tool call with the default freshness (served from the snapshot) vs the
  bare refill fetch: what the cache saves.
- live-paper ticker: the same ticker call through the whole world of a workspace opened on the
  live-paper venue by ``open_world`` (the composition the window and ``kestrel run`` use: its
  executor, the SQLite audit trail, the event bus), the ticker cache off, vs the bare call.

Start-up: a cold ``python -c "import app.cli.main"`` (what the app imports before its window)
against the same plus ``import ccxt.async_support``, the cost ccxt would add if anything imported
it at start-up (``tests/unit/core/test_no_ccxt_at_startup.py`` proves nothing does).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from app.ccxt.market import CcxtMarketData, Freshness  # noqa: E402
from app.tools.executor import MemoryRecorder, ToolExecutor  # noqa: E402
from app.tools.market_tools import MarketTools  # noqa: E402
from app.tools.registry import ToolRegistry  # noqa: E402
from app.tools.spec import AgentContext  # noqa: E402
from tests.helpers.fake_exchange import FakeExchangeServer  # noqa: E402
from tests.helpers.fake_exchange.client import fake_settings  # noqa: E402

START_MS = 1_770_532_635_250
CTX = AgentContext("bench", watched_symbols=("BTC/USDT",), interval="1h")
TICKER = ("<get_current_ticker_info><symbols><symbol>BTC/USDT</symbol></symbols>"
          "</get_current_ticker_info>")
KLINES = ("<get_historical_klines><symbol>BTC/USDT</symbol><interval>1h</interval>"
          "<limit>100</limit></get_historical_klines>")


async def timed(call: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await call()
    return (time.perf_counter() - started) * 1000


async def pair(
    calls: int, bare: Callable[[], Awaitable[Any]], tool: Callable[[], Awaitable[Any]]
) -> tuple[float, float]:
    for _ in range(10):  # warm both paths (connection pool, caches)
        await bare()
        await tool()
    bare_ms, tool_ms = [], []
    for _ in range(calls):
        bare_ms.append(await timed(bare))
        tool_ms.append(await timed(tool))
    return statistics.median(bare_ms), statistics.median(tool_ms)


def report(name: str, bare: float, tool: float) -> None:
    print(f"{name:<16} bare ccxt {bare:7.3f} ms   tool call {tool:7.3f} ms   "
          f"overhead {tool - bare:+7.3f} ms   ratio {tool / bare:5.2f}x")


async def run(server: FakeExchangeServer, venue: str, calls: int) -> None:
    async def open_with(freshness: Freshness) -> tuple[CcxtMarketData, ToolExecutor]:
        market = await CcxtMarketData.open(venue, fake_settings(server, venue),
                                           clock=server.now, history=300, freshness=freshness)
        market.exchange.timeout_on_exit = 0
        executor = ToolExecutor(ToolRegistry(MarketTools(market).specs()), MemoryRecorder())
        return market, executor

    async def tool(executor: ToolExecutor, xml: str) -> None:
        result = await executor.execute_text(CTX, xml)
        assert result is not None and result.ok, result

    live, live_exec = await open_with(Freshness(candles_s=0, ticker_s=0, book_s=0))
    cached, cached_exec = await open_with(Freshness())
    try:
        exchange = live.exchange
        report("ticker", *await pair(
            calls, lambda: exchange.fetch_ticker("BTC/USDT"),
            lambda: tool(live_exec, TICKER)))

        series = await live.series("BTC/USDT", "1h")
        forming = int(series.timestamp_ms[-1])
        report("klines", *await pair(
            calls, lambda: exchange.fetch_ohlcv("BTC/USDT", "1h", since=forming, limit=1),
            lambda: tool(live_exec, KLINES)))
        report("cached klines", *await pair(
            calls, lambda: exchange.fetch_ohlcv("BTC/USDT", "1h", since=forming, limit=1),
            lambda: tool(cached_exec, KLINES)))
        await live_paper(server, venue, calls, exchange)
    finally:
        await live.close()
        await cached.close()


async def live_paper(server: FakeExchangeServer, venue: str, calls: int, exchange: Any) -> None:
    """The ticker tool call through a live-paper world vs the bare ccxt call."""
    from dataclasses import replace

    from app.config import Settings
    from app.runtime.open_world import open_world
    from app.runtime.venue import VenueSpec
    from app.runtime.world import WorldOptions
    from app.workspace import Workspace

    settings = Settings.model_validate({"exchanges": {
        venue: fake_settings(server, venue).model_dump(mode="json", exclude_defaults=True)}})
    spec = replace(VenueSpec.live_paper(venue, ("BTC/USDT",)), time_source=server.now,
                   market_options={"freshness": Freshness(candles_s=0, ticker_s=0, book_s=0)})
    with tempfile.TemporaryDirectory(prefix="kestrel-bench-live-") as folder:
        world = await open_world(Workspace.at(Path(folder)).ensure(), spec,
                                 WorldOptions(settings=settings, agents=False))
        try:
            async def call() -> None:
                result = await world.executor.execute_text(CTX, TICKER)
                assert result is not None and result.ok, result

            before = server.count(venue, "ticker")
            report("live-paper tick", *await pair(
                calls, lambda: exchange.fetch_ticker("BTC/USDT"), call))
            fetched = server.count(venue, "ticker") - before
            assert fetched >= 2 * calls, f"only {fetched} tickers fetched: a cache answered"
        finally:
            await world.aclose()


def cold_import_s(code: str, runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def startup(runs: int) -> None:
    cold_import_s("import app.cli.main, ccxt.async_support", 1)  # warm the disk cache for both
    base = cold_import_s("import app.cli.main", runs)
    with_ccxt = cold_import_s("import app.cli.main, ccxt.async_support", runs)
    print(f"start-up         import app.cli {base * 1000:7.0f} ms   with ccxt "
          f"{with_ccxt * 1000:7.0f} ms   ccxt would add {(with_ccxt - base) * 1000:+6.0f} ms "
          f"({with_ccxt / base:4.2f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--venue", choices=("binance", "okx"), default="binance")
    parser.add_argument("--startup-runs", type=int, default=5)
    args = parser.parse_args()
    with FakeExchangeServer(START_MS) as server:
        print(f"{args.venue} via ccxt against the fake exchange, {args.calls} interleaved pairs, "
              "medians:")
        asyncio.run(run(server, args.venue, args.calls))
    if args.startup_runs:
        startup(args.startup_runs)


if __name__ == "__main__":
    main()
