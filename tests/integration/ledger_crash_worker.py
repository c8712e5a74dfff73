"""A paper-trading loop run as a subprocess by ``test_ledger_crash.py`` and killed with SIGKILL.

Usage: python ledger_crash_worker.py DB DATA [PACE_S]

It opens (or resumes) a broker on the ledger DB, replays the data from the last committed settle,
and trades a fixed, deterministic rule set. Decisions depend only on the bar index and on the
fills committed before the bar, so a resumed run makes exactly the decisions the uninterrupted run
made, and every order carries a client order id derived from the bar, so a decision repeated after
a crash returns the order already placed instead of placing a second one. It prints ``FILL <id>``
after each committed fill so the test can kill it at chosen moments.
"""

from __future__ import annotations

import asyncio
import sys
from decimal import Decimal
from pathlib import Path

from app.domain.clock import ReplayClock
from app.domain.errors import ToolError
from app.domain.trading import ExitKind, Fill, Mode, OrderType, Side
from app.exchange.paper import PaperBroker
from app.market.csv_loader import load_csv
from app.market.replay import ReplayMarketData
from app.store.ledger import Ledger
from app.trading.port import OrderRequest

CASH = Decimal("10000")
AGENT = "crash-test"


def state_before(fills: list[Fill], t: int) -> tuple[Decimal, Decimal]:
    """Cash and BTC held as of the fills committed before time ``t`` (fills carry bar open)."""
    cash, btc = CASH, Decimal(0)
    for fill in fills:
        if fill.time_ms >= t:
            continue
        notional = fill.quantity * fill.price
        if fill.side is Side.BUY:
            cash -= notional.quantize(Decimal("1e-8"), rounding="ROUND_UP") + fill.fee
            btc += fill.quantity
        else:
            cash += notional.quantize(Decimal("1e-8"), rounding="ROUND_DOWN") - fill.fee
            btc -= fill.quantity
    return cash, btc


async def place(broker: PaperBroker, req: OrderRequest) -> None:
    try:
        await broker.create_order(req)
    except ToolError as exc:
        print(f"REFUSED {req.client_order_id} {exc.code.value}", flush=True)


async def decide(broker: PaperBroker, index: int, t: int, close: Decimal) -> None:
    symbol = "BTC/USDT"
    cash, btc = state_before(broker.ledger.fills(), t)
    if index % 6 == 0 and btc == 0:
        await place(broker, OrderRequest(AGENT, symbol, Side.BUY, OrderType.MARKET, Decimal(0),
                                         client_order_id=f"buy-{t}", quote_amount=cash / 5))
    if index % 6 == 2 and btc > 0:
        tp = (close * Decimal("1.01")).quantize(Decimal("0.01"))
        sl = (close * Decimal("0.99")).quantize(Decimal("0.01"))
        await place(broker, OrderRequest(AGENT, symbol, Side.SELL, OrderType.LIMIT, btc,
                                         price=tp, reduce_only=True, client_order_id=f"tp-{t}",
                                         exit_kind=ExitKind.TAKE_PROFIT))
        await place(broker, OrderRequest(AGENT, symbol, Side.SELL, OrderType.STOP, btc,
                                         stop_price=sl, reduce_only=True,
                                         client_order_id=f"sl-{t}", exit_kind=ExitKind.STOP_LOSS))
    if index % 4 == 1:
        price = (close * Decimal("0.995")).quantize(Decimal("0.01"))
        await place(broker, OrderRequest(AGENT, symbol, Side.BUY, OrderType.LIMIT,
                                         Decimal("0.01"), price=price, client_order_id=f"lim-{t}"))
    if index % 9 == 8 and btc > 0:
        await place(broker, OrderRequest(AGENT, symbol, Side.SELL, OrderType.MARKET, btc,
                                         reduce_only=True, exit_kind=ExitKind.CLOSE,
                                         client_order_id=f"close-{t}"))
    for order in await broker.open_orders(AGENT, symbol):
        if order.order_type is OrderType.LIMIT and not order.reduce_only and (
            t - order.created_ms >= 3 * 3_600_000
        ):
            await broker.cancel_order(AGENT, symbol, order.order_id)


async def main(db: Path, data: Path, pace: float) -> None:
    loaded = load_csv(data)
    closes = loaded.series.timestamp_ms + loaded.bar_ms
    clock = ReplayClock(int(closes[0]))
    market = ReplayMarketData(clock, [loaded])
    broker = PaperBroker(market, clock, Ledger(db, durable=False), initial_cash=CASH,
                         mode=Mode.PAPER)
    resume = max(broker.settled_ms, int(closes[0]))
    print(f"START {resume}", flush=True)
    for index, close_ms in enumerate(closes):
        t = int(close_ms)
        if t < resume:
            continue
        clock.advance_to(t)
        for fill in broker.settle():
            print(f"FILL {fill.fill_id}", flush=True)
        close = Decimal(str(loaded.series.close[index]))
        await decide(broker, index, t, close)
        if pace:
            await asyncio.sleep(pace)
    print("DONE", flush=True)


if __name__ == "__main__":
    pace_s = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
    asyncio.run(main(Path(sys.argv[1]), Path(sys.argv[2]), pace_s))
