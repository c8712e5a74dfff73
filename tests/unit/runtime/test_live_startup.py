"""What a live account's reconciliation reports become on the bus, and in words."""

from __future__ import annotations

from decimal import Decimal

from app.ccxt.reconcile import (
    BalancesMismatched,
    OrderResolved,
    UnknownOrdersFound,
    exchange_order,
)
from app.domain.trading import OrderType, Side
from app.events import (
    EventBus,
    ReconciliationMismatch,
    UnknownOrdersAwaitDecision,
    UnresolvedOrderFound,
)
from app.runtime.live_startup import BusReports, mismatch_events
from app.store.order_journal import JournalEntry, JournalState
from app.trading.live_account import BalanceMismatch

ORDER = exchange_order({"id": "77", "clientOrderId": "web-1", "symbol": "BTC/USDT",
                          "side": "buy", "type": "limit", "amount": 0.01, "price": 62595.5,
                          "filled": 0, "status": "open"})


def test_an_unknown_order_is_described_with_what_a_person_recognises() -> None:
    assert ORDER.describe() == (
        "BUY 0.01 BTC/USDT LIMIT at 62595.5 (exchange id 77, client id web-1)")


def test_a_balance_gap_becomes_one_mismatch_naming_both_amounts() -> None:
    gap = BalancesMismatched((BalanceMismatch("USDT", Decimal("100000"), Decimal("97500")),))
    (event,) = mismatch_events("binance", gap)
    assert event == ReconciliationMismatch(
        "binance", "balance",
        "USDT: the journal explains 100000, the exchange holds 97500 (difference -2500)")


def test_reports_are_held_during_start_up_and_published_at_once_after() -> None:
    bus = EventBus()
    seen: list[object] = []
    bus.subscribe(ReconciliationMismatch, seen.append)
    bus.subscribe(UnknownOrdersAwaitDecision, seen.append)
    reports = BusReports("binance", bus)
    reports.held = []
    reports(UnknownOrdersFound((ORDER,)))
    assert seen == [] and len(reports.held) == 1
    reports.held = None
    reports(UnknownOrdersFound((ORDER,)))
    reports(OrderResolved(entry=None))  # type: ignore[arg-type] - resolved: nothing to report
    assert seen == [UnknownOrdersAwaitDecision("binance", (ORDER.describe(),))]


def test_an_order_the_person_was_told_was_not_placed_is_announced_when_found() -> None:
    entry = JournalEntry(
        "binance", "kst1", "trader-1", "k-1", "BTC/USDT", Side.BUY, OrderType.MARKET,
        Decimal("0.01"), 0, state=JournalState.FILLED, exchange_order_id="77",
        filled_quantity=Decimal("0.01"), average_price=Decimal("69550.5"), escalated=True)
    (event,) = mismatch_events("binance", OrderResolved(entry))
    assert event == UnresolvedOrderFound("binance", (
        "trader-1's BUY 0.01 BTC/USDT order (client id k-1, exchange id 77) was found on "
        "binance: FILLED, 0.01 filled at 69550.5. Kestrel follows it again with its fills."))
    # found while its outcome was still being checked: the agent learns of it, nobody else
    still_checked = OrderResolved(JournalEntry(
        "binance", "kst2", "trader-1", "k-2", "BTC/USDT", Side.BUY, OrderType.MARKET,
        Decimal("0.01"), 0, state=JournalState.FILLED))
    assert mismatch_events("binance", still_checked) == []
