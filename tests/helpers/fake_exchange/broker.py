"""Open a ``CcxtBroker`` on the fake Binance, and check its journal against the fake's account.

ccxt's own ``binance`` class signs real requests to the fake (dummy keys: the fake takes any
signature). ``AdvancingSleep`` moves the fake now instead of waiting, so a reconciler's lookups
spaced seconds apart run in milliseconds while the fake sees the seconds pass.
"""

from __future__ import annotations

from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

from app.ccxt.broker import CcxtBroker, build_broker_exchange
from app.ccxt.credentials import ApiKeys
from app.ccxt.errors import RetryPolicy
from app.ccxt.market import CcxtMarketData
from app.ccxt.reconcile import ReconcilePolicy, Reconciler
from app.ccxt.sending import StepHook
from app.store.order_journal import JournalState, OrderJournal
from tests.helpers.fake_exchange.client import RecordedSleep, fake_settings, open_market
from tests.helpers.fake_exchange.server import FakeExchangeServer
from tests.helpers.fake_exchange.tape import FakeNow

DUMMY_KEYS = ApiKeys("fake-api-key-0123456789", "fake-secret-0123456789")
ON_EXCHANGE = {
    JournalState.OPEN: ("NEW",), JournalState.PARTIALLY_FILLED: ("PARTIALLY_FILLED",),
    JournalState.FILLED: ("FILLED",), JournalState.CANCELED: ("CANCELED",),
    JournalState.EXPIRED: ("EXPIRED",),
}
ABSENT = (JournalState.REJECTED, JournalState.NOT_SENT, JournalState.NOT_PLACED)


class AdvancingSleep:
    """A ``sleep`` that advances the fake now by the wait, at once."""

    def __init__(self, now: FakeNow) -> None:
        self.now = now
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now.advance(int(seconds * 1000))


async def open_broker(
    server: FakeExchangeServer,
    db: Path,
    *,
    on_step: StepHook | None = None,
    timeout_s: float = 5.0,
    clock: Any = None,
    events: Any = None,
    quote_currency: str = "USDT",
) -> tuple[CcxtBroker, CcxtMarketData]:
    """A broker on the fake Binance with its journal in ``db``; close both when done."""
    market = await open_market(server, "binance", timeout_s=timeout_s, clock=clock)
    exchange = build_broker_exchange(
        "binance", fake_settings(server, "binance", timeout_s), DUMMY_KEYS)
    exchange.timeout_on_exit = 0
    await exchange.load_markets()
    broker = CcxtBroker(
        exchange, market, OrderJournal(db), clock=clock or server.now,
        retry=RetryPolicy(retries=2, base_s=0.0), sleep=RecordedSleep(), on_step=on_step,
        balance_fresh_s=0.0, events=events, quote_currency=quote_currency,
    )
    return broker, market


async def close_broker(broker: CcxtBroker, market: CcxtMarketData) -> None:
    await broker.close()
    await market.close()
    broker.journal.close()


def reconciler(broker: CcxtBroker, server: FakeExchangeServer, events: list | None = None,
               policy: ReconcilePolicy | None = None) -> Reconciler:
    return Reconciler(broker, notify=(events.append if events is not None else None),
                      policy=policy or ReconcilePolicy(first_check_s=2, interval_s=2,
                                                       lookup_window_s=8, sweep_s=0),
                      sleep=AdvancingSleep(server.now))


def assert_journal_matches_exchange(
    broker: CcxtBroker | OrderJournal, server: FakeExchangeServer
) -> None:
    """Zero duplicates, zero lost fills, and every entry's state equal to the exchange's."""
    journal = broker if isinstance(broker, OrderJournal) else broker.journal
    account = server.binance_account
    with account.lock:
        orders = list(account.orders)
        trades = list(account.trades)
    per_client = Counter(o.client_id for o in orders)
    duplicates = {cid: n for cid, n in per_client.items() if n > 1}
    assert not duplicates, f"orders placed twice: {duplicates}"
    entries = journal.entries("binance")
    known = {e.client_order_id for e in entries}
    strangers = [o.client_id for o in orders if o.client_id not in known]
    assert not strangers, f"exchange orders the journal does not know: {strangers}"
    for entry in entries:
        assert not entry.state.in_flight, f"{entry.client_order_id} still {entry.state}"
        placed = [o for o in orders if o.client_id == entry.client_order_id]
        if entry.state in ABSENT:
            assert not placed, f"{entry.client_order_id} is {entry.state} but exists"
            continue
        assert len(placed) == 1, f"{entry.client_order_id}: {len(placed)} exchange orders"
        order = placed[0]
        assert entry.exchange_order_id == str(order.order_id)
        assert order.status in ON_EXCHANGE[entry.state], (entry.state, order.status)
        assert entry.filled_quantity == order.executed
        exchange_trades = {str(t["id"]): t for t in trades if t["orderId"] == order.order_id}
        fills = journal.fills("binance", client_order_id=entry.client_order_id)
        assert {f.trade_id for f in fills} == set(exchange_trades), "a fill lost or invented"
        for fill in fills:
            trade = exchange_trades[fill.trade_id]
            assert fill.quantity == Decimal(trade["qty"])
            assert fill.price == Decimal(trade["price"])
            assert fill.fee == Decimal(trade["commission"])
        assert sum((f.quantity for f in fills), Decimal(0)) == order.executed
