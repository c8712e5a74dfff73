"""A live-broker process for ``test_ccxt_broker_crash.py``, killed with SIGKILL mid-order.

Usage:
    python ccxt_crash_worker.py place DB CONFIG_JSON START_MS WALL_MS STOP_AT KEY
    python ccxt_crash_worker.py oco DB CONFIG_JSON START_MS WALL_MS STOP_AT KEY TP SL
    python ccxt_crash_worker.py reconcile DB CONFIG_JSON START_MS WALL_MS

``place`` reconciles at start-up (as the app does before any agent runs), then places one MARKET
buy with the tool-call key KEY; with STOP_AT ``journaled`` or ``sending`` it prints ``AT <step>``
at that step and waits there to be killed; with ``none`` it places the order and prints
``PLACED <status>`` (or ``REFUSED <code>``). ``oco`` first buys 0.01 BTC at market (key
``k-buy:1``: a second run finds that order in the journal and buys nothing), then places its take
profit TP and stop loss SL as one OCO list with the keys ``KEY:tp`` and ``KEY:sl``, stopping at
STOP_AT the same way and printing ``PLACED <tp status> <sl status>``. ``reconcile`` is the fresh
process after the kill: it reconciles and prints the report as one JSON line. The fake exchange
runs in the test process; both share its fake time through ``LinkedClock``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from decimal import Decimal
from pathlib import Path

from app.ccxt.broker import CcxtBroker, build_broker_exchange
from app.ccxt.errors import RetryPolicy
from app.ccxt.market import CcxtMarketData
from app.ccxt.reconcile import ReconcilePolicy, Reconciler
from app.config.exchanges import ExchangeSettings
from app.domain.errors import ToolError
from app.domain.trading import ExitKind, OrderType, Side
from app.store.order_journal import JournalEntry, OrderJournal
from app.trading.port import OrderRequest
from tests.helpers.fake_exchange.broker import DUMMY_KEYS
from tests.helpers.fake_exchange.tape import LinkedClock

AGENT = "crash-agent"
HELD = Decimal("0.00999")  # 0.01 BTC bought, less the 0.1% fee the fake Binance takes in BTC
POLICY = ReconcilePolicy(first_check_s=0.3, interval_s=0.3, lookup_window_s=0.9, sweep_s=0)


async def open_broker(
    db: str, config: dict, clock: LinkedClock, stop_at: str, key: str
) -> CcxtBroker:
    settings = ExchangeSettings.model_validate(
        {"timeout_s": 30.0, "ccxt_config": {**config, "rateLimit": 1}})

    async def on_step(name: str, entry: JournalEntry) -> None:
        if name == stop_at and entry.agent_order_id.startswith(key):  # not the oco's buy
            print(f"AT {name} {entry.client_order_id}", flush=True)
            await asyncio.sleep(3600)

    market = CcxtMarketData(build_broker_exchange("binance", settings, DUMMY_KEYS), clock=clock)
    market.exchange.timeout_on_exit = 0
    await market.start()
    return CcxtBroker(market.exchange, market, OrderJournal(Path(db)), clock=clock,
                      retry=RetryPolicy(retries=2, base_s=0.05), on_step=on_step,
                      balance_fresh_s=0.0)


def exits(key: str, tp: str, sl: str) -> tuple[OrderRequest, OrderRequest]:
    """The position's take profit and stop loss, as the Trader's set_position_tp_sl_orders asks."""
    return (
        OrderRequest(AGENT, "BTC/USDT", Side.SELL, OrderType.LIMIT, HELD, price=Decimal(tp),
                     reduce_only=True, exit_kind=ExitKind.TAKE_PROFIT, reason="take profit",
                     client_order_id=f"{key}:tp"),
        OrderRequest(AGENT, "BTC/USDT", Side.SELL, OrderType.STOP, HELD, stop_price=Decimal(sl),
                     reduce_only=True, exit_kind=ExitKind.STOP_LOSS, reason="stop loss",
                     client_order_id=f"{key}:sl"),
    )


async def main(argv: list[str]) -> None:
    command, db, config_json, start_ms, wall_ms = argv[:5]
    clock = LinkedClock(int(start_ms), int(wall_ms))
    stop_at = argv[5] if command in ("place", "oco") else "none"
    key = argv[6] if command in ("place", "oco") else ""
    broker = await open_broker(db, json.loads(config_json), clock, stop_at, key)
    try:
        report = await Reconciler(broker, policy=POLICY).startup()
        if command == "reconcile":
            print(json.dumps({
                "not_sent": [e.agent_order_id for e in report.not_sent],
                "resolved": [[e.agent_order_id, e.state.value] for e in report.resolved],
                "unresolved": [[e.agent_order_id, e.state.value] for e in report.unresolved],
                "mismatches": [[m.asset, str(m.expected), str(m.actual)]
                               for m in report.mismatches],
                "unknown_orders": len(report.unknown_orders),
                "in_flight_after": len(Reconciler(broker).in_flight()),
            }), flush=True)
            return
        if command == "oco":
            await broker.create_order(OrderRequest(
                AGENT, "BTC/USDT", Side.BUY, OrderType.MARKET, Decimal("0.01"),
                client_order_id="k-buy:1"))
        print("READY", flush=True)
        try:
            if command == "oco":
                take, stop = await broker.create_oco(*exits(argv[6], argv[7], argv[8]))
                print(f"PLACED {take.status.value} {stop.status.value}", flush=True)
                return
            req = OrderRequest(AGENT, "BTC/USDT", Side.BUY, OrderType.MARKET, Decimal("0.01"),
                               client_order_id=argv[6])
            order = await broker.create_order(req)
        except ToolError as exc:
            print(f"REFUSED {exc.code.value} {type(exc).__name__}", flush=True)
            return
        print(f"PLACED {order.status.value}", flush=True)
    finally:
        await broker.close()
        broker.journal.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
