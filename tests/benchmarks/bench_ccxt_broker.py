"""Benchmark: placing an order through ``CcxtBroker`` against the bare ccxt ``create_order``.

Run on demand (not collected by pytest):

    .venv/bin/python tests/benchmarks/bench_ccxt_broker.py [--orders 200] [--tmp DIR]

ccxt's own ``binance`` class talks to the fake Binance on 127.0.0.1 (real signed HTTP, real
parsing, the fake's matching engine). Both sides place the same resting LIMIT buy far below the
market (no fill, so the fake's work is the same), interleaved (bare, broker, bare, broker...) so
drift hits both. The broker's extra work is what it promises: the local checks, two durable
journal commits (``synchronous=FULL``: NEW, then SENDING) before the request, one after the
answer. Printed: medians, the overhead (broker - bare) and the ratio broker / bare. The journal
lives in ``--tmp`` (default: a temporary folder), so the disk's fsync is in the number.
"""

from __future__ import annotations

import argparse
import asyncio
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
from app.trading.port import OrderRequest  # noqa: E402
from tests.helpers.fake_exchange import FakeExchangeServer  # noqa: E402
from tests.helpers.fake_exchange.broker import close_broker, open_broker  # noqa: E402

START_MS = 1_770_532_635_250


async def bench(server: FakeExchangeServer, folder: Path, orders: int) -> None:
    server.binance_account.reset({"USDT": "100000000"})
    broker, market = await open_broker(server, folder / "kestrel.db")
    exchange = broker.exchange
    last = await broker.last_price("BTC/USDT")
    price = (last * Decimal("0.5")).quantize(Decimal("0.01"))
    bare_ms, broker_ms = [], []
    try:
        for n in range(orders + 5):  # the first 5 pairs warm up
            t0 = time.perf_counter()
            await exchange.create_order("BTC/USDT", "limit", "buy", 0.001, float(price),
                                        {"newClientOrderId": f"bare{n}"})
            t1 = time.perf_counter()
            await broker.create_order(OrderRequest(
                "bench", "BTC/USDT", Side.BUY, OrderType.LIMIT, Decimal("0.001"), price=price,
                client_order_id=f"k-bench:{n}"))
            t2 = time.perf_counter()
            if n >= 5:
                bare_ms.append((t1 - t0) * 1000)
                broker_ms.append((t2 - t1) * 1000)
    finally:
        await close_broker(broker, market)
    bare, ours = statistics.median(bare_ms), statistics.median(broker_ms)
    print(f"orders: {orders} of each, interleaved; journal in {folder}")
    print(f"bare ccxt create_order     median {bare:7.2f} ms")
    print(f"CcxtBroker.create_order    median {ours:7.2f} ms")
    print(f"overhead {ours - bare:+.2f} ms, ratio broker / bare {ours / bare:.2f}")
    placed = len(server.binance_account.orders)
    assert placed == 2 * (orders + 5), f"{placed} orders on the exchange"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=200)
    parser.add_argument("--tmp", type=Path, default=None)
    args = parser.parse_args()
    with FakeExchangeServer(START_MS) as server, tempfile.TemporaryDirectory() as tmp:
        asyncio.run(bench(server, args.tmp or Path(tmp), args.orders))


if __name__ == "__main__":
    main()
