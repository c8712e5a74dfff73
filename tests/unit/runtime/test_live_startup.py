"""What a live account's reconciliation reports become on the bus, and in words."""

from __future__ import annotations

from decimal import Decimal

from app.ccxt.reconcile import (
    BalancesMismatched,
    OrderResolved,
    UnknownOrdersFound,
    exchange_order,
)
from app.events import EventBus, ReconciliationMismatch, UnknownOrdersAwaitDecision
from app.runtime.live_startup import BusReports, mismatch_events
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
