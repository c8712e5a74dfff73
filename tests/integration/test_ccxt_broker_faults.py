"""The live broker under injected faults: never a second order, never a lost fill.

Each test runs ccxt's real ``binance`` class against the fake Binance, injects one fault on the
order endpoints, lets the reconciler do its work, and ends with the same check: no client order
id placed twice, every journal entry in the exchange's state with exactly the exchange's trades
(``assert_journal_matches_exchange``), and the balances the journal explains equal to the
exchange's.
"""

from __future__ import annotations

import asyncio
from decimal import Decimal

import pytest

from app.ccxt.outcome import OrderOutcomeUnknownError
from app.ccxt.reconcile import (
    BalancesMismatched,
    OrderResolved,
    OrderUnresolved,
    ReconcilePolicy,
    Reconciler,
)
from app.domain.errors import ErrorCode, ExchangeError, InsufficientFundsError, InvalidOrderError
from app.domain.trading import OrderStatus, OrderType, Side
from app.store.order_journal import JournalState
from app.trading.port import OrderRequest
from tests.helpers.eventually import eventually
from tests.helpers.fake_exchange import Fault
from tests.helpers.fake_exchange.broker import (
    AdvancingSleep,
    assert_journal_matches_exchange,
    close_broker,
    open_broker,
    reconciler,
)
from tests.integration.ccxt_fixtures import (  # noqa: F401 - fixtures
    fake_exchange_fixture,
    server_fixture,
)

AGENT = "trader-1"


@pytest.fixture(name="venue")
def venue_fixture(server):
    server.binance_account.reset()
    return server


def limit_buy(key: str, qty: str = "0.01", price: str = "50000.00") -> OrderRequest:
    return OrderRequest(AGENT, "BTC/USDT", Side.BUY, OrderType.LIMIT, Decimal(qty),
                        price=Decimal(price), client_order_id=key)


def market_buy(key: str, qty: str = "0.01") -> OrderRequest:
    return OrderRequest(AGENT, "BTC/USDT", Side.BUY, OrderType.MARKET, Decimal(qty),
                        client_order_id=key)


def run(server, tmp_path, scenario, **options):
    async def main():
        broker, market = await open_broker(server, tmp_path / "kestrel.db", **options)
        try:
            return await scenario(broker)
        finally:
            await close_broker(broker, market)

    return asyncio.run(main())


def live_reconciler(broker, server, events):
    """A reconciler with the live venue's policy (its lookup window, its start-up wait)."""
    return Reconciler(broker, notify=events.append, policy=ReconcilePolicy(),
                      sleep=AdvancingSleep(server.now))


async def watch(rec, server, seconds, sweep_s=30):
    """The live venue's watch on fake time: each second the in-flight orders that are due are
    looked up; every ``sweep_s`` the full sweep runs (open orders, missed fills, balances)."""
    for second in range(1, seconds + 1):
        server.now.advance(1000)
        await rec.check_in_flight()
        if second % sweep_s == 0:
            report = await rec.sweep()
            await rec.catch_up_fills(report)
            await rec.check_balances(report)


async def settle(broker, server, events=None):
    """Start-up reconciliation, then the invariants; returns the report."""
    report = await reconciler(broker, server, events).startup()
    assert_journal_matches_exchange(broker, server)
    assert not report.mismatches, report.mismatches
    return report


def test_orders_and_their_fills_are_journaled_as_the_exchange_books_them(venue, tmp_path):
    async def scenario(broker):
        await reconciler(broker, venue).startup()  # the balance baseline
        resting = await broker.create_order(limit_buy("k-t1:1"))
        filled = await broker.create_order(market_buy("k-t1:2"))
        assert resting.status is OrderStatus.SUBMITTED and resting.client_order_id == "k-t1:1"
        assert filled.status is OrderStatus.FILLED and filled.filled_quantity == Decimal("0.01")
        assert [o.order_id for o in await broker.open_orders(AGENT)] == [resting.order_id]
        trades = await broker.trades("BTC/USDT")
        assert sum(t.quantity for t in trades) == Decimal("0.01")
        assert all(t.order_id == filled.order_id for t in trades)
        await settle(broker, venue)

    run(venue, tmp_path, scenario)


@pytest.mark.parametrize("how", ["drop", "status", "garbage", "truncated"])
def test_an_order_whose_answer_is_lost_is_unknown_then_found_by_client_id_never_resent(
    venue, tmp_path, how
):
    async def scenario(broker):
        await reconciler(broker, venue).startup()
        venue.fail("binance", "order.create", Fault.lost(how, 503))
        with pytest.raises(OrderOutcomeUnknownError) as caught:
            await broker.create_order(market_buy("k-t2:1"))
        assert caught.value.details["do_not_resend"] is True
        assert "outcome is unknown" in caught.value.message
        entry = broker.journal.by_agent_order_id("binance", AGENT, "k-t2:1")
        assert entry.state is JournalState.UNKNOWN
        assert broker.unknown_run == 1
        # the task is redelivered: the same call finds the order instead of sending it again
        again = await broker.create_order(market_buy("k-t2:1"))
        assert again.status is OrderStatus.FILLED
        assert venue.count("binance", "order.create") == 1
        await settle(broker, venue)

    run(venue, tmp_path, scenario)


def test_the_non_json_answer_that_ccxt_turns_into_an_order_without_id_is_unknown(
    venue, tmp_path
):
    async def scenario(broker):
        venue.fail("binance", "order.create", Fault.lost("garbage"))
        with pytest.raises(OrderOutcomeUnknownError) as caught:
            await broker.create_order(limit_buy("k-t3:1"))
        assert "no order id" in caught.value.message
        events = []
        report = await settle(broker, venue, events)
        assert [e.agent_order_id for e in report.resolved] == ["k-t3:1"]
        assert isinstance(events[0], OrderResolved)
        assert report.resolved[0].state is JournalState.OPEN

    run(venue, tmp_path, scenario)


def test_a_filled_market_order_whose_answer_was_lost_is_never_filled_twice(venue, tmp_path):
    """Binance takes a reused client id once the first order is closed: only the journal
    stands between a lost answer and a second fill."""
    async def scenario(broker):
        await reconciler(broker, venue).startup()
        venue.fail("binance", "order.create", Fault.lost("drop"))
        with pytest.raises(OrderOutcomeUnknownError):
            await broker.create_order(market_buy("k-t4:1"))
        for _ in range(3):
            await broker.create_order(market_buy("k-t4:1"))
        account = venue.binance_account
        assert len(account.orders) == 1 and account.orders[0].status == "FILLED"
        assert account.total("BTC") == Decimal("0.00999")  # one fill, less its fee
        await settle(broker, venue)

    run(venue, tmp_path, scenario)


def test_a_refused_duplicate_client_id_is_looked_up_not_marked_rejected(venue, tmp_path):
    """The exchange already holds an open order under the id (e.g. a journal restored from an
    older backup): Binance refuses with -2010, which ccxt calls InvalidOrder."""
    async def scenario(broker):
        from app.ccxt.client_ids import derive

        cid = derive("binance", AGENT, "k-t5:1")
        account = venue.binance_account
        with account.lock:
            account.create({"symbol": "BTCUSDT", "side": "BUY", "type": "LIMIT",
                            "quantity": "0.01", "price": "50000.00", "newClientOrderId": cid})
        order = await broker.create_order(limit_buy("k-t5:1"))
        assert order.status is OrderStatus.SUBMITTED
        assert order.order_id == str(account.orders[0].order_id)
        assert broker.journal.get("binance", cid).state is JournalState.OPEN
        assert_journal_matches_exchange(broker, venue)

    run(venue, tmp_path, scenario)


def test_an_order_invisible_for_a_while_after_acceptance_is_found_on_a_later_lookup(
    venue, tmp_path
):
    async def scenario(broker):
        venue.binance_account.hide_new_s = 5.0
        venue.fail("binance", "order.create", Fault.lost("status", 502))
        with pytest.raises(OrderOutcomeUnknownError):
            await broker.create_order(limit_buy("k-t6:1"))
        report = await settle(broker, venue)
        assert [e.state for e in report.resolved] == [JournalState.OPEN]
        # looked up at +2 s and +4 s (hidden), found at +6 s
        assert venue.count("binance", "order.get") == 3

    run(venue, tmp_path, scenario)


def test_an_order_hidden_past_the_lookup_limit_is_raised_to_the_person_then_reattached(
    venue, tmp_path
):
    async def scenario(broker):
        venue.binance_account.hide_new_s = 60.0
        venue.fail("binance", "order.create", Fault.lost("drop"))
        with pytest.raises(OrderOutcomeUnknownError):
            await broker.create_order(limit_buy("k-t7:1"))
        events = []
        rec = reconciler(broker, venue, events)
        report = await rec.startup()
        assert [e.state for e in report.unresolved] == [JournalState.NOT_PLACED]
        assert isinstance(events[0], OrderUnresolved) and "k-t7:1" in events[0].message
        with pytest.raises(ExchangeError, match="not found"):
            await broker.create_order(limit_buy("k-t7:1"))  # not resent under this id
        venue.now.advance(60_000)
        report = await rec.sweep()
        assert [e.state for e in report.resolved] == [JournalState.OPEN]
        assert_journal_matches_exchange(broker, venue)
        assert venue.count("binance", "order.create") == 1

    run(venue, tmp_path, scenario)


def test_partial_fills_of_a_resting_order_are_all_journaled_once(venue, tmp_path):
    async def scenario(broker):
        await reconciler(broker, venue).startup()
        last = await broker.last_price("BTC/USDT")
        account = venue.binance_account
        account.fill_cap = Decimal("0.004")
        order = await broker.create_order(limit_buy("k-t8:1", "0.01", f"{last + 200:.2f}"))
        assert order.status is OrderStatus.PARTIALLY_FILLED
        rec = reconciler(broker, venue)
        for _ in range(3):
            venue.now.advance(60_000)
            await rec.sweep()
            await rec.catch_up_fills()
        entry = broker.journal.by_agent_order_id("binance", AGENT, "k-t8:1")
        assert entry.state is JournalState.FILLED
        assert len(broker.journal.fills("binance", client_order_id=entry.client_order_id)) == 3
        await rec.catch_up_fills()  # seen again: stored once
        await settle(broker, venue)

    run(venue, tmp_path, scenario)


def test_a_market_order_the_book_cannot_fill_expires_with_its_partial_fill(venue, tmp_path):
    async def scenario(broker):
        await reconciler(broker, venue).startup()
        venue.binance_account.book_levels = 1
        venue.binance_account.fill_cap = Decimal("0.003")
        order = await broker.create_order(market_buy("k-t9:1"))
        assert order.status is OrderStatus.EXPIRED
        assert order.filled_quantity == Decimal("0.003")
        await settle(broker, venue)

    run(venue, tmp_path, scenario)


@pytest.mark.parametrize("code", [429, 418])
def test_a_rate_limit_on_create_is_a_rejection_with_the_exchanges_reason(venue, tmp_path, code):
    async def scenario(broker):
        venue.fail("binance", "order.create", Fault.status(code))
        with pytest.raises(Exception) as caught:
            await broker.create_order(limit_buy("k-t10:1"))
        assert caught.value.code is ErrorCode.RATE_LIMITED
        assert "Too many requests" in caught.value.details["exchange_message"]
        entry = broker.journal.by_agent_order_id("binance", AGENT, "k-t10:1")
        assert entry.state is JournalState.REJECTED and "Too many requests" in entry.reason
        assert broker.unknown_run == 0
        # a refused order was never booked: the same call may send it, once the pause is over
        venue.now.advance(int(caught.value.retry_after_s * 1000))
        order = await broker.create_order(limit_buy("k-t10:1"))
        assert order.status is OrderStatus.SUBMITTED
        await settle(broker, venue)

    run(venue, tmp_path, scenario)


def test_a_5xx_before_booking_is_unknown_then_not_placed_after_the_lookups(venue, tmp_path):
    async def scenario(broker):
        venue.fail("binance", "order.create", Fault.status(503))
        with pytest.raises(OrderOutcomeUnknownError):
            await broker.create_order(market_buy("k-t11:1"))
        events = []
        report = await settle(broker, venue, events)
        assert [e.state for e in report.unresolved] == [JournalState.NOT_PLACED]
        assert venue.binance_account.orders == []
        assert venue.count("binance", "order.get") == 4
        assert any(isinstance(e, OrderUnresolved) for e in events)

    run(venue, tmp_path, scenario)


def test_a_refused_timestamp_is_a_rejection_and_the_clock_is_measured_for_the_next(
    venue, tmp_path
):
    async def scenario(broker):
        venue.binance_account.check_timestamps = True  # the local clock is off the fake's
        with pytest.raises(Exception) as caught:
            await broker.create_order(limit_buy("k-t12:1"))
        assert "recvWindow" in caught.value.message
        assert broker.journal.by_agent_order_id("binance", AGENT, "k-t12:1").state is (
            JournalState.REJECTED)
        order = await broker.create_order(limit_buy("k-t12:2"))
        assert order.status is OrderStatus.SUBMITTED
        assert len(venue.binance_account.orders) == 1

    run(venue, tmp_path, scenario)


def test_a_task_cancelled_while_the_order_is_in_flight_leaves_it_unknown_then_found(
    venue, tmp_path
):
    async def scenario(broker):
        venue.fail("binance", "order.create", Fault.lost("hang"))
        task = asyncio.ensure_future(broker.create_order(limit_buy("k-t13:1")))
        await eventually(lambda: venue.binance_account.orders)  # the fake has booked it
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert broker.journal.by_agent_order_id("binance", AGENT, "k-t13:1").state is (
            JournalState.UNKNOWN)
        report = await settle(broker, venue)
        assert [e.state for e in report.resolved] == [JournalState.OPEN]

    run(venue, tmp_path, scenario)


def test_definitive_refusals_carry_the_exchanges_reason_and_reset_the_unknown_run(
    venue, tmp_path
):
    async def scenario(broker):
        venue.fail("binance", "order.create", Fault.lost("drop"))
        with pytest.raises(OrderOutcomeUnknownError):
            await broker.create_order(limit_buy("k-t14:1"))
        assert broker.unknown_run == 1
        with pytest.raises(InsufficientFundsError) as caught:
            await broker.create_order(limit_buy("k-t14:2", "5", "50000.00"))
        assert "insufficient balance" in caught.value.details["exchange_message"]
        assert broker.unknown_run == 0
        with pytest.raises(InvalidOrderError, match="amount precision"):
            await broker.create_order(limit_buy("k-t14:3", "0.000015"))
        await settle(broker, venue)

    run(venue, tmp_path, scenario)


def test_foreign_open_orders_are_listed_then_adopted_or_ignored(venue, tmp_path):
    async def scenario(broker):
        account = venue.binance_account
        with account.lock:
            for n in (1, 2):
                account.create({"symbol": "BTCUSDT", "side": "BUY", "type": "LIMIT",
                                "quantity": "0.01", "price": f"5000{n}.00",
                                "newClientOrderId": f"web_{n}"})
        rec = reconciler(broker, venue)
        report = await rec.startup()
        assert sorted(o.client_order_id for o in report.unknown_orders) == ["web_1", "web_2"]
        adopted = await rec.adopt(report.unknown_orders[0])
        rec.ignore(report.unknown_orders[1])
        assert adopted.state is JournalState.OPEN and adopted.adopted
        assert (await rec.sweep()).unknown_orders == []
        assert [o.client_order_id for o in await broker.open_orders("person")] == [
            adopted.client_order_id]
        assert [o.status for o in account.orders] == ["NEW", "NEW"]  # both left on the book

    run(venue, tmp_path, scenario)


def test_a_balance_the_journal_cannot_explain_is_reported_not_absorbed(venue, tmp_path):
    async def scenario(broker):
        rec = reconciler(broker, venue)
        await rec.startup()
        await broker.create_order(market_buy("k-t16:1"))
        assert (await rec.check_balances()).mismatches == []
        with venue.binance_account.lock:
            venue.binance_account.balances["USDT"][0] += Decimal("250")  # a deposit
        mismatches = (await rec.check_balances()).mismatches
        assert [(m.asset, m.difference) for m in mismatches] == [("USDT", Decimal("250"))]
        assert (await rec.check_balances()).mismatches == mismatches  # still, until accepted
        rec.accept_balances()
        assert (await rec.check_balances()).mismatches == []

    run(venue, tmp_path, scenario)


def test_an_order_found_by_lookup_after_a_lost_answer_keeps_the_fee_its_trades_say(
    venue, tmp_path
):
    async def scenario(broker):
        await reconciler(broker, venue).startup()
        venue.fail("binance", "order.create", Fault.lost("status", 503))
        with pytest.raises(OrderOutcomeUnknownError):
            await broker.create_order(market_buy("k-t17:1"))
        report = await settle(broker, venue)
        (found,) = report.resolved
        (trade,) = venue.binance_account.trades
        assert found.state is JournalState.FILLED
        assert (found.fee, found.fee_currency) == (Decimal(trade["commission"]), "BTC")
        entry = broker.journal.get("binance", found.client_order_id)
        assert (entry.fee, entry.fee_currency) == (Decimal("0.00001"), "BTC")
        order = await broker.get_order(AGENT, "BTC/USDT", found.exchange_order_id)
        assert (order.fee, order.fee_currency) == (Decimal("0.00001"), "BTC")

    run(venue, tmp_path, scenario)


def test_an_order_never_booked_is_looked_up_through_its_window_before_it_is_not_placed(
    venue, tmp_path
):
    async def scenario(broker):
        events = []
        rec = live_reconciler(broker, venue, events)
        await rec.startup()
        venue.fail("binance", "order.create", Fault.status(503))  # refused before booking
        with pytest.raises(OrderOutcomeUnknownError):
            await broker.create_order(market_buy("k-t18:1"))
        await watch(rec, venue, 9 * 60)
        entry = broker.journal.by_agent_order_id("binance", AGENT, "k-t18:1")
        assert entry.state is JournalState.UNKNOWN and events == []
        looked_up = venue.count("binance", "order.get")
        await watch(rec, venue, 60)
        entry = broker.journal.by_agent_order_id("binance", AGENT, "k-t18:1")
        assert entry.state is JournalState.NOT_PLACED
        assert venue.count("binance", "order.get") > looked_up  # looked up to the end
        (unresolved,) = events
        assert isinstance(unresolved, OrderUnresolved)
        assert "within its 10 min lookup window" in unresolved.message
        assert venue.binance_account.orders == []
        assert venue.count("binance", "order.create") == 1

    run(venue, tmp_path, scenario)


def test_start_up_waits_a_bounded_time_for_an_order_in_flight_then_the_watch_finds_it(
    venue, tmp_path
):
    async def scenario(broker):
        venue.binance_account.hide_new_s = 120.0
        venue.fail("binance", "order.create", Fault.lost("status", 503))
        with pytest.raises(OrderOutcomeUnknownError):
            await broker.create_order(limit_buy("k-t19:1"))
        events = []
        rec = live_reconciler(broker, venue, events)
        sent_ms = venue.now.now_ms()
        report = await rec.startup()
        assert venue.now.now_ms() - sent_ms <= 30_000  # fake time: the agents start then
        assert [e.agent_order_id for e in report.pending] == ["k-t19:1"]
        assert report.unresolved == [] and events == []
        await watch(rec, venue, 120)
        entry = broker.journal.by_agent_order_id("binance", AGENT, "k-t19:1")
        assert entry.state is JournalState.OPEN
        assert [type(e) for e in events] == [OrderResolved]
        assert_journal_matches_exchange(broker, venue)

    run(venue, tmp_path, scenario)


def test_a_not_placed_order_whose_trade_turns_up_is_reattached_with_its_fill_and_told(
    venue, tmp_path
):
    async def scenario(broker):
        account = venue.binance_account
        events = []
        rec = reconciler(broker, venue, events)  # its lookup window: 8 s
        await rec.startup()
        account.hide_new_s = 120.0
        account.hide_trades_s = 0.0  # the trade shows at once; no read finds its order yet
        venue.fail("binance", "order.create", Fault.lost("status", 503))
        with pytest.raises(OrderOutcomeUnknownError):
            await broker.create_order(market_buy("k-t20:1"))
        for _ in range(4):
            venue.now.advance(2000)
            await rec.check_in_flight()
        entry = broker.journal.by_agent_order_id("binance", AGENT, "k-t20:1")
        assert entry.state is JournalState.NOT_PLACED
        assert [type(e) for e in events] == [OrderUnresolved]
        venue.now.advance(30_000)
        report = await rec.catch_up_fills()  # the trade is listed, its order not yet
        assert report.foreign_trades == 0
        assert broker.journal.fills("binance", client_order_id=entry.client_order_id) == []
        venue.now.advance(90_000)
        report = await rec.catch_up_fills()
        entry = broker.journal.by_agent_order_id("binance", AGENT, "k-t20:1")
        assert entry.state is JournalState.FILLED and entry.filled_quantity == Decimal("0.01")
        assert report.foreign_trades == 0
        assert [e.agent_order_id for e in report.resolved] == ["k-t20:1"]
        assert isinstance(events[-1], OrderResolved) and events[-1].entry.escalated
        assert (await rec.check_balances()).mismatches == []
        assert_journal_matches_exchange(broker, venue)
        assert venue.count("binance", "order.create") == 1

    run(venue, tmp_path, scenario)


def test_trades_of_orders_that_are_not_kestrels_stay_foreign(venue, tmp_path):
    async def scenario(broker):
        rec = reconciler(broker, venue)
        await broker.create_order(market_buy("k-t21:1"))
        with venue.binance_account.lock:  # bought on the exchange's website
            venue.binance_account.create({"symbol": "BTCUSDT", "side": "BUY", "type": "MARKET",
                                          "quantity": "0.01", "newClientOrderId": "web_1"})
        report = await rec.catch_up_fills()
        assert report.foreign_trades == 1 and report.resolved == []
        assert [e.agent_order_id for e in broker.journal.entries("binance")] == ["k-t21:1"]
        assert (await rec.catch_up_fills()).foreign_trades == 0  # the cursor moved past it

    run(venue, tmp_path, scenario)


def test_a_fill_of_an_order_invisible_for_a_minute_after_its_lost_answer_is_never_lost(
    venue, tmp_path
):
    """The order is booked and filled, its answer lost, and no read shows it (nor its trade)
    for a minute: the watch keeps looking it up, the sweeps meanwhile raise no balance alarm,
    and it ends FILLED with its fill, the balances explained, nothing sent twice."""
    async def scenario(broker):
        events = []
        rec = live_reconciler(broker, venue, events)
        await rec.startup()
        venue.binance_account.hide_new_s = 60.0
        venue.fail("binance", "order.create", Fault.lost("status", 503))
        with pytest.raises(OrderOutcomeUnknownError):
            await broker.create_order(market_buy("k-t22:1"))
        await watch(rec, venue, 15 * 60)
        entry = broker.journal.by_agent_order_id("binance", AGENT, "k-t22:1")
        assert entry.state is JournalState.FILLED and entry.filled_quantity == Decimal("0.01")
        assert [type(e) for e in events] == [OrderResolved]  # no unresolved order, no mismatch
        assert venue.count("binance", "order.create") == 1
        assert (await rec.check_balances()).mismatches == []
        assert_journal_matches_exchange(broker, venue)

    run(venue, tmp_path, scenario)


def test_a_balance_check_while_an_order_is_in_flight_waits_for_it_instead_of_reporting(
    venue, tmp_path
):
    async def scenario(broker):
        events = []
        rec = reconciler(broker, venue, events)
        await rec.startup()
        venue.binance_account.hide_new_s = 6.0
        venue.fail("binance", "order.create", Fault.lost("status", 503))
        with pytest.raises(OrderOutcomeUnknownError):
            await broker.create_order(market_buy("k-t23:1"))
        assert venue.binance_account.total("BTC") == Decimal("0.00999")  # filled already
        assert (await rec.check_balances()).mismatches == []
        assert events == []
        venue.now.advance(6000)
        await rec.check_in_flight()
        entry = broker.journal.by_agent_order_id("binance", AGENT, "k-t23:1")
        assert entry.state is JournalState.FILLED
        assert (await rec.check_balances()).mismatches == []
        assert [type(e) for e in events] == [OrderResolved]
        assert_journal_matches_exchange(broker, venue)

    run(venue, tmp_path, scenario)


def test_a_balance_gap_no_order_in_flight_could_make_is_reported_at_once(venue, tmp_path):
    async def scenario(broker):
        events = []
        rec = reconciler(broker, venue, events)
        await rec.startup()
        account = venue.binance_account
        account.hide_new_s = 6.0
        venue.fail("binance", "order.create", Fault.lost("status", 503))
        with pytest.raises(OrderOutcomeUnknownError):
            await broker.create_order(market_buy("k-t24:1"))  # 0.01 BTC: about 700 USDT
        with account.lock:
            account.balances["USDT"][0] -= Decimal("5000")  # beyond what the order could cost
            account.balances["ETH"][0] += Decimal("1")  # an asset the order does not trade
        mismatches = (await rec.check_balances()).mismatches
        assert [m.asset for m in mismatches] == ["ETH", "USDT"]  # BTC: the order's, waited out
        assert isinstance(events[-1], BalancesMismatched)
        assert list(events[-1].mismatches) == mismatches
        venue.now.advance(6000)
        await rec.check_in_flight()  # the order is found: its fill explains BTC and its cost
        mismatches = (await rec.check_balances()).mismatches
        assert [(m.asset, m.difference) for m in mismatches] == [
            ("ETH", Decimal("1")), ("USDT", Decimal("-5000"))]

    run(venue, tmp_path, scenario)


def test_a_resting_order_that_fills_just_before_the_balances_are_read_is_no_mismatch(
    venue, tmp_path
):
    async def scenario(broker):
        events = []
        rec = reconciler(broker, venue, events)
        await rec.startup()
        last = await broker.last_price("BTC/USDT")
        venue.binance_account.fill_cap = Decimal("0.004")  # a partial fill each minute
        await broker.create_order(limit_buy("k-t25:1", "0.01", f"{last + 200:.2f}"))
        venue.now.advance(60_000)  # its next fill comes with the next read of the account
        assert (await rec.check_balances()).mismatches == []
        assert events == []
        assert_journal_matches_exchange(broker, venue)

    run(venue, tmp_path, scenario)


def test_an_order_resting_on_the_book_does_not_hide_a_balance_gap(venue, tmp_path):
    async def scenario(broker):
        rec = reconciler(broker, venue)
        await rec.startup()
        await broker.create_order(limit_buy("k-t26:1", "0.01", "50000.00"))  # 500 USDT held
        with venue.binance_account.lock:
            venue.binance_account.balances["USDT"][0] -= Decimal("300")
        mismatches = (await rec.check_balances()).mismatches
        assert [(m.asset, m.difference) for m in mismatches] == [("USDT", Decimal("-300"))]

    run(venue, tmp_path, scenario)
