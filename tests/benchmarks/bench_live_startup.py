"""Benchmark: a live account's start-up reconciliation against the bare reads it cannot skip.

Run on demand (not collected by pytest):

    .venv/bin/python tests/benchmarks/bench_live_startup.py [--orders 40] [--unknown 5]
        [--rounds 5]

The journal holds ``--orders`` orders placed through ``CcxtBroker`` on the fake Binance (half
resting limits, half filled market orders); ``--unknown`` more were placed on the exchange behind
its back. Each round reconciles a fresh copy of that journal (``LiveStartup.run``: never-sent and
in-flight entries settled, open orders swept, the trade history caught up, balances compared,
the unknown orders adopted), and, interleaved, the baseline: the same exchange object's bare
``fetch_open_orders`` + ``fetch_balance`` (what any start must read). Printed: medians and the
ratio start-up / baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from app.domain.trading import OrderType, Side  # noqa: E402
from app.runtime.live_startup import BusReports, LiveStartup, UnknownOrderChoice  # noqa: E402
from app.trading.port import OrderRequest  # noqa: E402
from tests.helpers.fake_exchange import FakeExchangeServer  # noqa: E402
from tests.helpers.fake_exchange.broker import close_broker, open_broker, reconciler  # noqa: E402

START_MS = 1_770_532_635_250


async def adopt(_orders: object) -> UnknownOrderChoice:
    return UnknownOrderChoice.ADOPT


async def prepare(server: FakeExchangeServer, db: Path, orders: int, unknown: int) -> None:
    server.binance_account.reset({"USDT": "100000000"})
    broker, market = await open_broker(server, db)
    try:
        last = await broker.last_price("BTC/USDT")
        low = (last * Decimal("0.5")).quantize(Decimal("0.01"))
        for n in range(orders):
            limit = n % 2 == 0
            await broker.create_order(OrderRequest(
                "bench", "BTC/USDT", Side.BUY, OrderType.LIMIT if limit else OrderType.MARKET,
                Decimal("0.001"), price=low if limit else None, client_order_id=f"b{n}"))
        await reconciler(broker, server).startup()  # the balance baseline
        for n in range(unknown):
            server.binance_account.create({
                "symbol": "BTCUSDT", "side": "BUY", "type": "LIMIT", "quantity": "0.00100",
                "price": f"{low:.2f}", "newClientOrderId": f"web{n}", "timeInForce": "GTC"})
    finally:
        await close_broker(broker, market)


async def bench(server: FakeExchangeServer, folder: Path, args: argparse.Namespace) -> None:
    master = folder / "master.db"
    await prepare(server, master, args.orders, args.unknown)
    startup_ms, bare_ms = [], []
    for n in range(args.rounds):
        copy = folder / f"round{n}.db"
        shutil.copy(master, copy)
        broker, market = await open_broker(server, copy)
        try:
            t0 = time.perf_counter()
            await broker.exchange.fetch_open_orders()
            await broker.exchange.fetch_balance()
            t1 = time.perf_counter()
            summary = await LiveStartup(reconciler(broker, server),
                                        BusReports(broker.venue, None)).run(adopt)
            t2 = time.perf_counter()
        finally:
            await close_broker(broker, market)
        assert len(summary.adopted) == args.unknown, summary.describe()
        bare_ms.append((t1 - t0) * 1000)
        startup_ms.append((t2 - t1) * 1000)
    bare, startup = statistics.median(bare_ms), statistics.median(startup_ms)
    print(f"journal: {args.orders} orders, {args.unknown} unknown on the exchange; "
          f"{args.rounds} rounds")
    print(f"baseline (bare fetch_open_orders + fetch_balance): median {bare:.1f} ms")
    print(f"start-up reconciliation (LiveStartup.run):         median {startup:.1f} ms")
    print(f"ratio start-up / baseline: {startup / bare:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--orders", type=int, default=40)
    parser.add_argument("--unknown", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with FakeExchangeServer(START_MS) as server, tempfile.TemporaryDirectory() as tmp:
        asyncio.run(bench(server, Path(tmp), args))


if __name__ == "__main__":
    main()
