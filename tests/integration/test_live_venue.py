"""The live venue end to end, offline: a workspace's world on a real account of the fake Binance.

ccxt's own binance class signs real requests to the fake over HTTP; the world is built as the
app builds it (``open_world``). Covered: live is opt-in twice (the workspace's confirmation naming
the exchange, each agent's grant); reconciliation before any agent runs (an exchange order the
journal does not know is adopted or left alone as the person chooses, and the agents do not
start until they have); a balance that differs from the journal trips the kill switch; a run of
orders whose outcome is unknown trips it; a loss read from the account trips it; and a Trader's
order goes through the approval policy and the Risk Guard to the exchange, the journal equal to
the exchange's state.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import pytest

from app.ccxt.errors import RequestsPausedError
from app.config.risk import RiskConfig
from app.domain.agents import AgentState, QuestionKind
from app.domain.errors import OperationalError
from app.domain.kill_switch import TripCause
from app.domain.trading import Mode, OrderType, Side
from app.events import (
    ExchangeBanned,
    KillSwitchTripped,
    NotificationRaised,
    OrderOutcomeUnknown,
    UnknownOrdersAwaitDecision,
)
from app.runtime.live_startup import UnknownOrderChoice, UnknownOrdersUndecided
from app.runtime.open_world import open_world
from app.runtime.world import World, WorldOptions
from app.store.order_journal import JournalState
from app.trading.live_account import ExchangeOrder
from app.trading.port import OrderRequest
from app.workspace import Workspace
from tests.helpers.agents import settle
from tests.helpers.fake_exchange import FakeExchangeServer, Fault
from tests.helpers.fake_exchange.broker import assert_journal_matches_exchange
from tests.helpers.fake_exchange.live import (
    call,
    decided,
    grant,
    keyring_with_keys,
    live_settings,
    live_spec,
    live_world,
    market_buy,
    run_live,
    send_buy_signal,
    trader,
)
from tests.integration.ccxt_fixtures import (  # noqa: F401 - fixtures
    START_MS,
    fake_exchange_fixture,
    server_fixture,
)

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


def place_on_exchange(server: FakeExchangeServer, client_id: str = "by-hand-1") -> int:
    """An order the person placed on the exchange's own website: the journal never saw it."""
    account = server.binance_account
    price = Decimal(str(server.state.last("BTC/USDT"))) * Decimal("0.9")
    answer = account.create({"symbol": "BTCUSDT", "side": "BUY", "type": "LIMIT",
                             "quantity": "0.01000", "price": f"{price:.2f}",
                             "newClientOrderId": client_id, "timeInForce": "GTC"})
    return int(answer["orderId"])


async def first_run(folder: Path, server: FakeExchangeServer) -> None:
    """A run that reconciles once (the journal's balance baseline) and stops."""
    world = await live_world(folder, server)
    try:
        await world.start(decided(None))
    finally:
        await world.aclose()


# -- opt-in per workspace --------------------------------------------------------------------------


def test_a_live_venue_the_person_did_not_confirm_for_this_exchange_is_refused(
    tmp_path: Path, server: FakeExchangeServer
) -> None:
    async def scenario() -> None:
        for confirmed in ("", "okx"):
            with pytest.raises(OperationalError, match="REAL money") as caught:
                await open_world(
                    Workspace.at(tmp_path).ensure(), live_spec(server, confirmed=confirmed),
                    WorldOptions(settings=live_settings(server), secrets=keyring_with_keys()))
            assert "--confirm-live binance" in str(caught.value)
        assert server.requests == []  # nothing reached the exchange

    asyncio.run(scenario())


def test_the_live_venue_is_labelled_live_and_runs_the_account_in_live_mode(
    tmp_path: Path, server: FakeExchangeServer
) -> None:
    async def body(world: World) -> None:
        assert world.venue.kind == "live" and world.venue.is_live_account
        assert world.venue.label.startswith("LIVE binance")
        assert world.venue.broker.mode is Mode.LIVE
        assert world.agents.services.mode is Mode.LIVE
        account = await world.venue.broker.account()
        assert account.cash == Decimal("100000")

    run_live(tmp_path, server, body)


# -- reconciliation before any agent runs ----------------------------------------------------------


def test_an_unknown_exchange_order_is_adopted_when_the_person_chooses_so(
    tmp_path: Path, server: FakeExchangeServer
) -> None:
    async def scenario() -> None:
        order_id = place_on_exchange(server)
        seen: list[ExchangeOrder] = []
        world = await live_world(tmp_path, server)
        shown: list[UnknownOrdersAwaitDecision] = []
        world.bus.subscribe(UnknownOrdersAwaitDecision, shown.append)
        try:
            await world.start(decided(UnknownOrderChoice.ADOPT, seen))
            assert [o.exchange_order_id for o in seen] == [str(order_id)]
            assert "BUY 0.01 BTC/USDT LIMIT" in shown[0].orders[0]
            entry = world.venue.broker.journal.by_exchange_id("binance", str(order_id))
            assert entry is not None and entry.adopted and entry.agent_id == "person"
            orders = await world.venue.broker.open_orders()
            assert [o.order_id for o in orders] == [str(order_id)]
            assert_journal_matches_exchange(world.venue.broker, server)
            assert world.agents.kill_switch.active() is None
        finally:
            await world.aclose()

    asyncio.run(scenario())


def test_an_unknown_exchange_order_left_alone_is_never_listed_or_touched_again(
    tmp_path: Path, server: FakeExchangeServer
) -> None:
    async def scenario() -> None:
        order_id = place_on_exchange(server)
        world = await live_world(tmp_path, server)
        try:
            await world.start(decided(UnknownOrderChoice.IGNORE))
            journal = world.venue.broker.journal
            assert journal.by_exchange_id("binance", str(order_id)) is None
            assert journal.ignored("binance") == {str(order_id)}
            assert await world.venue.broker.open_orders() == []
            report = await world.venue.before_agents.reconciler.sweep()
            assert report.unknown_orders == []
            (kept,) = server.binance_account.orders
            assert kept.status == "NEW"  # still open on the exchange, as the person left it
        finally:
            await world.aclose()
        # the next start asks nothing: the decision is kept
        world = await live_world(tmp_path, server)
        try:
            await world.start(None)
        finally:
            await world.aclose()

    asyncio.run(scenario())


def test_no_agent_starts_while_an_unknown_exchange_order_waits_for_the_person(
    tmp_path: Path, server: FakeExchangeServer
) -> None:
    async def scenario() -> None:
        world = await live_world(tmp_path, server)
        try:
            await world.start(decided(None))
            agent = await trader(world)
            assert world.agents.manager.get_agent(agent).state is AgentState.RUNNING
        finally:
            await world.aclose()
        place_on_exchange(server)
        world = await live_world(tmp_path, server)
        try:
            with pytest.raises(UnknownOrdersUndecided, match="--adopt-unknown") as caught:
                await world.start(decided(None))
            assert "BUY 0.01 BTC/USDT" in str(caught.value)
            assert not world.agents.manager._started  # noqa: SLF001 - no agent loop runs
            assert world.agents.queue.tasks(agent) == []
        finally:
            await world.aclose()

    asyncio.run(scenario())


def test_a_balance_the_journal_cannot_explain_trips_the_kill_switch_before_agents_run(
    tmp_path: Path, server: FakeExchangeServer
) -> None:
    async def scenario() -> None:
        await first_run(tmp_path, server)
        with server.binance_account.lock:  # someone sold BTC... no: someone moved USDT away
            server.binance_account.balances["USDT"][0] -= Decimal("2500")
        world = await live_world(tmp_path, server)
        trips: list[KillSwitchTripped] = []
        world.bus.subscribe(KillSwitchTripped, trips.append)
        try:
            await world.start(decided(None))
            trip = world.agents.kill_switch.active()
            assert trip is not None and trip.cause is TripCause.RECONCILIATION
            assert "USDT: the journal explains 100000, the exchange holds 97500" in trip.reason
            assert len(trips) == 1
            # the Risk Guard refuses the next entry, even of an agent allowed to trade live
            agent = await trader(world)
            grant(world, agent)
            result = await call(world, agent, market_buy())
            assert result.status == "rejected" and "kill switch" in result.xml
            assert server.count("binance", "order.create") == 0
        finally:
            await world.aclose()

    asyncio.run(scenario())


class AheadClock:
    """This machine's clock, ``ahead_ms`` ahead of the exchange's (a skew NTP has not fixed)."""

    def __init__(self, server: FakeExchangeServer, ahead_ms: int) -> None:
        self.server, self.ahead_ms = server, ahead_ms

    def now_ms(self) -> int:
        return self.server.now.now_ms() + self.ahead_ms


def test_fills_stamped_by_an_exchange_whose_clock_is_behind_ours_are_no_mismatch(
    tmp_path: Path, server: FakeExchangeServer
) -> None:
    async def scenario() -> None:
        spec = replace(live_spec(server), time_source=AheadClock(server, 5_000))
        world = await open_world(
            Workspace.at(tmp_path).ensure(), spec,
            WorldOptions(settings=live_settings(server), secrets=keyring_with_keys()))
        try:
            await world.start(decided(None))  # the balance baseline, on our clock
            agent = await trader(world)
            grant(world, agent)
            result = await call(world, agent, market_buy())
            assert result.status == "success", result.xml
            report = await world.venue.before_agents.reconciler.check_balances()
            assert report.mismatches == []
            await world.bus.drain()
            assert world.agents.kill_switch.active() is None
        finally:
            await world.aclose()

    asyncio.run(scenario())


def test_a_position_bought_with_the_fee_taken_in_the_coin_can_be_protected_and_closed(
    tmp_path: Path, server: FakeExchangeServer
) -> None:
    async def body(world: World) -> None:
        agent = "desk-1"  # a caller with no agent loop of its own (no fill tasks race it)
        grant(world, agent)
        bought = await call(world, agent, market_buy("0.01000"))
        assert bought.status == "success", bought.xml
        held = server.binance_account.total("BTC")
        assert held == Decimal("0.00999")  # 0.1% of it went to the fee
        price = await world.venue.broker.last_price("BTC/USDT")
        # (a stop-loss exit is not tried here: Binance spot lists no stop-market type)
        protect = await call(world, agent, (
            "<set_position_tp_sl_orders><symbol>BTC/USDT</symbol>"
            f"<take_profit_price>{(price * Decimal('1.05')).quantize(Decimal('0.01'))}"
            "</take_profit_price></set_position_tp_sl_orders>"))
        assert protect.status == "success", protect.xml
        exits = await world.venue.broker.open_orders(agent)
        assert {o.quantity for o in exits} == {Decimal("0.00999")}
        closed = await call(world, agent, (
            "<close_position><symbol>BTC/USDT</symbol><reason>test</reason>"
            "</close_position>"))
        assert closed.status == "success", closed.xml
        assert server.binance_account.total("BTC") == 0
        assert await world.venue.broker.open_orders(agent) == []
        assert_journal_matches_exchange(world.venue.broker, server)

    run_live(tmp_path, server, body)


def test_a_balance_check_while_an_order_is_in_flight_does_not_trip_the_kill_switch(
    tmp_path: Path, server: FakeExchangeServer
) -> None:
    """The order is filled on the exchange, its answer lost and not yet visible: the balances
    differ by its fill until the watch finds it, and that is no mismatch."""
    async def body(world: World) -> None:
        agent = "desk-1"
        grant(world, agent)
        server.binance_account.hide_new_s = 8.0
        server.fail("binance", "order.create", Fault.lost("status", 503))
        result = await call(world, agent, market_buy())
        assert result.status == "error", result.xml
        reconciler = world.venue.before_agents.reconciler
        assert (await reconciler.check_balances()).mismatches == []
        await world.bus.drain()
        assert world.agents.kill_switch.active() is None
        server.now.advance(10_000)
        await world.venue.driver.round()  # the watch finds the order
        assert (await reconciler.check_balances()).mismatches == []
        await world.bus.drain()
        assert world.agents.kill_switch.active() is None
        assert_journal_matches_exchange(world.venue.broker, server)

    run_live(tmp_path, server, body)


def test_a_balance_gap_beyond_what_an_order_in_flight_could_make_trips_the_kill_switch(
    tmp_path: Path, server: FakeExchangeServer
) -> None:
    async def body(world: World) -> None:
        agent = "desk-1"
        grant(world, agent)
        server.binance_account.hide_new_s = 8.0
        server.fail("binance", "order.create", Fault.lost("status", 503))
        result = await call(world, agent, market_buy())  # 0.01 BTC: about 700 USDT
        assert result.status == "error", result.xml
        with server.binance_account.lock:
            server.binance_account.balances["USDT"][0] -= Decimal("5000")
        await world.venue.before_agents.reconciler.check_balances()
        await world.bus.drain()
        trip = world.agents.kill_switch.active()
        assert trip is not None and trip.cause is TripCause.RECONCILIATION
        assert "USDT: the journal explains 100000" in trip.reason
        assert "BTC" not in trip.reason  # the order's own fill is not called a mismatch

    run_live(tmp_path, server, body)


# -- opt-in per agent ------------------------------------------------------------------------------


def test_an_agent_not_allowed_to_trade_live_is_refused_with_a_clear_error(
    tmp_path: Path, server: FakeExchangeServer
) -> None:
    async def body(world: World) -> None:
        agent = await trader(world)
        result = await call(world, agent, market_buy())
        assert result.status == "error"
        assert "<error_code>ACCESS_DENIED</error_code>" in result.xml
        assert "may not trade live on binance" in result.xml
        assert "may trade live" in result.xml
        assert server.count("binance", "order.create") == 0
        assert world.venue.broker.journal.entries("binance") == []
        grant(world, agent)
        result = await call(world, agent, market_buy())
        assert result.status == "success", result.xml
        assert server.count("binance", "order.create") == 1
        assert_journal_matches_exchange(world.venue.broker, server)

    run_live(tmp_path, server, body)


# -- the kill switch trips by itself ---------------------------------------------------------------


def test_a_run_of_unknown_order_outcomes_trips_the_kill_switch(
    tmp_path: Path, server: FakeExchangeServer
) -> None:
    async def body(world: World) -> None:
        agent = await trader(world)
        grant(world, agent)
        server.fail("binance", "order.create", Fault.lost("status", 503), times=3)
        for n in range(3):
            result = await call(world, agent, market_buy())
            assert result.status == "error", result.xml
            if n < 2:
                await world.bus.drain()
                assert world.agents.kill_switch.active() is None
        await world.bus.drain()
        trip = world.agents.kill_switch.active()
        assert trip is not None and trip.cause is TripCause.UNKNOWN_OUTCOMES
        assert "3 orders in a row on binance" in trip.reason
        # the orders were booked; reconciliation finds each by client id, none doubled
        server.now.advance(10_000)
        await world.venue.driver.round()
        assert_journal_matches_exchange(world.venue.broker, server)

    run_live(tmp_path, server, body)


@pytest.mark.parametrize("trips", [True, False])
def test_an_order_unknown_through_its_lookup_window_trips_the_kill_switch_as_set_then_is_found(
    tmp_path: Path, server: FakeExchangeServer, trips: bool
) -> None:
    """Booked, its answer lost, and no read shows it for twelve minutes: it is looked up for
    ten, then given up (the switch trips, or with on_unresolved_order off the person is only
    alerted); when it shows at last it is re-attached and the person told it was found."""
    risk = RiskConfig.model_validate({"kill_switch": {"on_unresolved_order": trips}})

    async def scenario() -> None:
        world = await live_world(tmp_path, server, settings=live_settings(server, risk=risk))
        alerts: list[NotificationRaised] = []
        world.bus.subscribe(NotificationRaised, alerts.append)

        async def minutes(count: int) -> None:
            for _ in range(count):
                server.now.advance(60_000)
                await world.venue.driver.round()
            await world.bus.drain()

        def told(subject: str) -> list[str]:
            return [a.message for a in alerts if a.channel == "UI_ALERT" and a.subject == subject]

        try:
            await world.start(decided(None))
            agent = "desk-1"
            grant(world, agent)
            price = await world.venue.broker.last_price("BTC/USDT")
            server.binance_account.hide_new_s = 720.0
            server.fail("binance", "order.create", Fault.lost("status", 503))
            result = await call(world, agent, (
                "<create_order><symbol>BTC/USDT</symbol><side>BUY</side><order_type>LIMIT"
                f"</order_type><price>{(price * Decimal('0.92')).quantize(Decimal('0.01'))}"
                "</price><quantity>0.01000</quantity></create_order>"))
            assert result.status == "error", result.xml
            await minutes(9)
            assert world.agents.kill_switch.active() is None  # still being looked up
            await minutes(2)
            journal = world.venue.broker.journal
            (entry,) = journal.entries("binance")
            assert entry.state.value == "NOT_PLACED"
            trip = world.agents.kill_switch.active()
            if trips:
                assert trip is not None and trip.cause is TripCause.RECONCILIATION
                assert "within its 10 min lookup window" in trip.reason
            else:
                assert trip is None
                (alert,) = told("Kestrel: order outcome unknown on binance")
                assert "within its 10 min lookup window" in alert and "not tripped" in alert
            await minutes(2)  # the order shows at last
            (entry,) = journal.entries("binance")
            assert entry.state.value == "OPEN"
            (found,) = told("Kestrel: order found on binance")
            assert "was found on binance: OPEN" in found
            assert server.count("binance", "order.create") == 1
            assert_journal_matches_exchange(world.venue.broker, server)
        finally:
            await world.aclose()

    asyncio.run(scenario())


def test_orders_held_by_a_ban_are_not_placed_and_never_trip_the_unknown_outcome_run(
    tmp_path: Path, server: FakeExchangeServer
) -> None:
    async def body(world: World) -> None:
        agent = "desk-1"
        grant(world, agent)
        unknown: list[OrderOutcomeUnknown] = []
        world.bus.subscribe(OrderOutcomeUnknown, unknown.append)
        server.fail("binance", "order.create", Fault.lost("status", 503), times=2)
        for _ in range(2):  # two lost answers: one more unknown outcome would trip the switch
            result = await call(world, agent, market_buy())
            assert "outcome is unknown" in result.xml, result.xml
        broker = world.venue.broker
        assert broker.unknown_run == 2
        server.ban("binance", 120)
        await world.venue.driver.round()  # the account watcher's poll meets the ban
        sent = server.count("binance", "order.create")
        for n in range(3):
            with pytest.raises(RequestsPausedError, match="binance has banned requests until "
                               "06:39:15 UTC .HTTP 418, Retry-After 120 s.; nothing is sent"):
                await broker.create_order(OrderRequest(
                    agent, "BTC/USDT", Side.BUY, OrderType.MARKET, Decimal("0.01"),
                    client_order_id=f"held-{n}"))
        result = await call(world, agent, market_buy())  # what an agent is told
        assert "RATE_LIMITED" in result.xml and "banned requests until 06:39:15 UTC" in result.xml
        assert server.count("binance", "order.create") == sent  # none left
        held = [e for e in broker.journal.entries("binance")
                if e.agent_order_id.startswith("held-")]
        assert [e.state for e in held] == [JournalState.NOT_SENT] * 3
        assert broker.unknown_run == 2
        await world.bus.drain()
        assert len(unknown) == 2
        assert world.agents.kill_switch.active() is None

    run_live(tmp_path, server, body)


def test_during_a_ban_the_live_driver_polls_nothing_and_the_desk_is_told_until_when(
    tmp_path: Path, server: FakeExchangeServer
) -> None:
    async def body(world: World) -> None:
        banned: list[ExchangeBanned] = []
        world.bus.subscribe(ExchangeBanned, banned.append)
        driver = world.venue.driver
        await driver.round()
        assert driver.held is None and driver.last_error is None
        server.ban("binance", 120)
        await driver.round()  # one poll meets the ban
        await world.bus.drain()
        (event,) = banned
        assert (event.venue, event.until_ms, event.status) == ("binance", START_MS + 120_000, 418)
        assert "Way too many requests" in event.reason
        assert driver.held == "binance: requests paused until 06:39:15 UTC (ban, HTTP 418)"
        asked = len(server.requests)
        for _ in range(7):
            server.now.advance(1000)  # a tick each
            await driver.round()
        assert len(server.requests) == asked  # no poll while banned
        server.now.set(START_MS + 120_000)
        assert driver.held is None
        await driver.round()
        assert len(server.requests) > asked and driver.last_error is None

    run_live(tmp_path, server, body)


def test_a_daily_loss_read_from_the_account_trips_the_kill_switch(
    tmp_path: Path, server: FakeExchangeServer
) -> None:
    risk = RiskConfig.model_validate({"daily_loss_limit": {"enabled": True, "limit_pct": "5"}})

    async def scenario() -> None:
        world = await live_world(tmp_path, server, settings=live_settings(server, risk=risk))
        try:
            await world.start(decided(None))
            await world.venue.driver.round()  # the day's first reading: 100000 USDT
            await world.bus.drain()
            assert world.agents.kill_switch.active() is None
            with server.binance_account.lock:
                server.binance_account.balances["USDT"][0] = Decimal("90000")
            await world.venue.driver.round()
            await world.bus.drain()
            trip = world.agents.kill_switch.active()
            assert trip is not None and trip.cause is TripCause.DAILY_LOSS
        finally:
            await world.aclose()

    asyncio.run(scenario())


# -- a live session end to end ---------------------------------------------------------------------


def test_a_traders_live_order_waits_for_approval_then_reaches_the_exchange_through_the_guard(
    tmp_path: Path, server: FakeExchangeServer
) -> None:
    async def scenario() -> None:
        world = await live_world(tmp_path, server)
        try:
            await world.start(decided(None))
            assert world.venue.before_agents.summary is not None
            agent = await trader(world)
            grant(world, agent)
            await send_buy_signal(world, agent)
            await settle(world)
            (question,) = world.agents.questions.pending()
            assert question.kind is QuestionKind.APPROVAL
            assert "every LIVE order needs your approval" in question.text
            assert server.count("binance", "order.create") == 0
            approved = 0
            while world.agents.questions.pending() and approved < 3:
                # the rule Trader may size again on the exchange's amount step: asked again
                (question,) = world.agents.questions.pending()
                world.agents.manager.answer(question.question_id, "Approve")
                approved += 1
                await settle(world)
            await world.venue.driver.round()
            assert server.count("binance", "order.create") >= 1
            decisions = world.ledger.risk_decisions()
            assert any(d["accepted"] and d["agent_id"] == agent for d in decisions)
            records = world.agents.approvals.all()
            assert len(records) == approved
            assert all(r.decision == "approved" for r in records) and records[-1].order_id
            assert server.binance_account.total("BTC") > 0
            assert_journal_matches_exchange(world.venue.broker, server)
        finally:
            await world.aclose()

    asyncio.run(scenario())
