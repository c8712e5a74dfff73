"""The kill switch service over a real paper broker, a real SQLite file and real notifications:
what a trip does, what a reset does, and when it trips by itself (and when not again)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from app.config.risk import (
    DailyLossLimitConfig,
    KillSwitchConfig,
    MaxDrawdownHaltConfig,
    RiskConfig,
)
from app.domain.agents import AgentState, Channel, DeliveryStatus, Urgency
from app.domain.errors import NetworkError
from app.domain.kill_switch import TripCause
from app.domain.trading import ExitKind, Order, OrderStatus, OrderType, Side
from app.events import (
    Event,
    EventBus,
    KillSwitchReset,
    KillSwitchTripped,
    NotificationRaised,
    OrderOutcomeUnknown,
    ReconciliationMismatch,
    UnresolvedOrderFound,
)
from app.orchestration.ids import SeededIds
from app.orchestration.kill_switch import KillSwitch
from app.orchestration.notify import BusNotifier, NotificationService, UnconfiguredNotifier
from app.store.kill_switch_log import KillSwitchLog, NotTrippedError
from app.trading.port import OrderRequest
from tests.unit.exchange.support import SYMBOL, Rig, make_rig
from tests.unit.orchestration.fakes import FakeDirectory
from tests.unit.risk.factories import NOON_MS, view

WALL = 1_800_000_000_000
DAY_MS = 86_400_000


@dataclass
class Desk:
    rig: Rig
    agents: FakeDirectory
    log: KillSwitchLog
    notifications: NotificationService
    bus: EventBus
    switch: KillSwitch
    events: list[Event] = field(default_factory=list)

    def orders(self) -> dict[str, Order]:
        return {r.order.order_id: r.order for r in self.rig.ledger.load().orders}


def make_desk(tmp_path: Path, risk: RiskConfig | None = None, broker: Any = None) -> Desk:
    db = tmp_path / "kestrel.db"
    rig = make_rig(db=db, visible=1)
    bus = EventBus()
    events: list[Event] = []
    for kind in (KillSwitchTripped, KillSwitchReset):
        bus.subscribe(kind, events.append)
    notifications = NotificationService(db, rig.clock, SeededIds("n"), {
        Channel.UI_ALERT: BusNotifier(Channel.UI_ALERT, bus),
        Channel.TRAY: BusNotifier(Channel.TRAY, bus),
        Channel.TELEGRAM: UnconfiguredNotifier(Channel.TELEGRAM, "no bot"),
    })
    agents = FakeDirectory(rig.clock, SeededIds("a"))
    log = KillSwitchLog(db)
    switch = KillSwitch(log, broker or rig.broker, agents, clock=rig.clock,
                        risk=risk or RiskConfig(), notifications=notifications, bus=bus,
                        wall_ms=lambda: WALL)
    return Desk(rig, agents, log, notifications, bus, switch, events)


def with_orders(desk: Desk) -> dict[str, str]:
    """A held position protected by a take-profit and a stop-loss, and two entries waiting."""
    broker = desk.rig.broker
    run = asyncio.run
    run(broker.create_order(OrderRequest("trader", SYMBOL, Side.BUY, OrderType.MARKET,
                                         Decimal("0.1"))))
    desk.rig.step()  # filled at bar 1's open
    ids = {}
    for name, req in {
        "tp": OrderRequest("trader", SYMBOL, Side.SELL, OrderType.LIMIT, Decimal("0.1"),
                           price=Decimal(7600), reduce_only=True, exit_kind=ExitKind.TAKE_PROFIT),
        "sl": OrderRequest("trader", SYMBOL, Side.SELL, OrderType.STOP, Decimal("0.1"),
                           stop_price=Decimal(6500), reduce_only=True,
                           exit_kind=ExitKind.STOP_LOSS),
        "entry": OrderRequest("trader", SYMBOL, Side.BUY, OrderType.LIMIT, Decimal("0.05"),
                              price=Decimal(6600)),
        "other": OrderRequest("scalper", SYMBOL, Side.BUY, OrderType.LIMIT, Decimal("0.01"),
                              price=Decimal(6700)),
    }.items():
        ids[name] = run(broker.create_order(req)).order_id
    return ids


def test_a_trip_pauses_running_agents_cancels_entries_keeps_exits_and_tells_everyone(
    tmp_path: Path,
) -> None:
    desk = make_desk(tmp_path)
    ids = with_orders(desk)
    running = desk.agents.add("Trader")
    waiting = desk.agents.add("Analyst", state=AgentState.WAITING_FOR_USER)
    stopped = desk.agents.add("Old", state=AgentState.STOPPED)

    preview = asyncio.run(desk.switch.preview())
    assert preview.describe() == (
        "Refuses every new order, cancels 2 open orders (2 take-profit/stop-loss exits stay to "
        "protect positions) and pauses 2 running agents.")
    done = asyncio.run(desk.switch.trip("the model went wild", "the person in the window"))

    assert done == "Cancelled 2 open orders, kept 2 take-profit/stop-loss exits, paused 2 agents."
    orders = desk.orders()
    assert orders[ids["entry"]].status is OrderStatus.CANCELLED
    assert orders[ids["other"]].status is OrderStatus.CANCELLED  # every agent's orders
    assert orders[ids["tp"]].status.is_open and orders[ids["sl"]].status.is_open
    states = {a.agent_id: a.state for a in desk.agents.list_agents()}
    assert states == {running.agent_id: AgentState.PAUSED, waiting.agent_id: AgentState.PAUSED,
                      stopped.agent_id: AgentState.STOPPED}
    trip = desk.switch.active()
    assert trip is not None and trip.actions == done and trip.cause is TripCause.MANUAL
    assert trip.market_ms == desk.rig.clock.now_ms() and trip.tripped_ms == WALL
    (note,) = desk.notifications.recent()
    assert note.urgency is Urgency.CRITICAL and note.subject == "Kestrel: kill switch tripped"
    assert "the model went wild" in note.message and done in note.message
    statuses = {s.channel: s.delivery_status for s in note.statuses}
    assert statuses[Channel.UI_ALERT] is DeliveryStatus.SUCCESS
    assert statuses[Channel.TRAY] is DeliveryStatus.SUCCESS
    assert statuses[Channel.TELEGRAM] is DeliveryStatus.FAILED  # not set up: said, not hidden
    assert desk.events == [KillSwitchTripped(trip.trip_id, "manual", "the model went wild",
                                             "the person in the window", WALL, trip.market_ms)]


def test_cancel_exits_makes_a_trip_cancel_take_profits_and_stop_losses_too(
    tmp_path: Path,
) -> None:
    desk = make_desk(tmp_path, RiskConfig(kill_switch=KillSwitchConfig(cancel_exits=True)))
    ids = with_orders(desk)
    done = asyncio.run(desk.switch.trip("flatten the book", "me"))
    assert done == "Cancelled 4 open orders, no agent was running."
    assert all(not desk.orders()[i].status.is_open for i in ids.values())


def test_tripping_a_tripped_switch_changes_nothing_and_says_so(tmp_path: Path) -> None:
    desk = make_desk(tmp_path)
    asyncio.run(desk.switch.trip("first", "me"))
    again = asyncio.run(desk.switch.trip("second", "someone else"))
    assert again is not None and again.startswith("The kill switch was already tripped")
    assert "first" in again
    assert len(desk.notifications.recent()) == 1 and len(desk.events) == 1


class FlakyBroker:
    """The paper broker, except that cancelling one order fails as a lost connection would."""

    def __init__(self, rig: Rig, failing: str) -> None:
        self.rig = rig
        self.failing = failing

    async def open_orders(self, agent_id: str | None = None, symbol: str | None = None):
        return await self.rig.broker.open_orders(agent_id, symbol)

    async def cancel_order(self, agent_id: str, symbol: str, order_id: str | None = None,
                           client_order_id: str | None = None) -> Order:
        if order_id == self.failing:
            raise NetworkError("the exchange did not answer")
        return await self.rig.broker.cancel_order(agent_id, symbol, order_id, client_order_id)


def test_an_order_that_cannot_be_cancelled_is_named_and_the_others_still_are(
    tmp_path: Path,
) -> None:
    desk = make_desk(tmp_path)
    ids = with_orders(desk)
    desk.switch.broker = FlakyBroker(desk.rig, ids["entry"])  # type: ignore[assignment]
    done = asyncio.run(desk.switch.trip("stop", "me"))
    assert done is not None
    assert done.startswith("Cancelled 1 open order, kept 2 take-profit/stop-loss exits")
    assert f"order {ids['entry']} could not be cancelled (the exchange did not answer)" in done
    assert desk.orders()[ids["other"]].status is OrderStatus.CANCELLED
    assert desk.switch.is_tripped()  # the halt stands


def test_a_reset_lets_orders_through_again_and_leaves_agents_paused(tmp_path: Path) -> None:
    desk = make_desk(tmp_path)
    trader = desk.agents.add("Trader")
    asyncio.run(desk.switch.trip("stop", "me"))
    done = asyncio.run(desk.switch.reset("the person in the window"))
    assert done == ("Kill switch reset by the person in the window: new orders pass the Risk "
                    "Guard again. 1 agent stays paused: resume those that should trade.")
    assert not desk.switch.is_tripped() and desk.switch.halt_reason() is None
    assert desk.agents.agents[trader.agent_id].state is AgentState.PAUSED
    assert isinstance(desk.events[-1], KillSwitchReset)
    assert desk.notifications.recent()[0].subject == "Kestrel: kill switch reset"
    (trip,) = desk.switch.history()
    assert trip.reset_by == "the person in the window" and trip.reset_ms == WALL
    with pytest.raises(NotTrippedError):
        asyncio.run(desk.switch.reset("again"))


def test_a_trip_whose_actions_a_crash_cut_short_is_completed_at_the_next_start(
    tmp_path: Path,
) -> None:
    desk = make_desk(tmp_path)
    ids = with_orders(desk)
    trader = desk.agents.add("Trader")
    # what the last run committed before it died: the trip, not its actions
    desk.log.trip(cause=TripCause.MANUAL, cause_key="", reason="stop", by="me",
                  tripped_ms=WALL, market_ms=desk.rig.clock.now_ms())
    done = asyncio.run(desk.switch.complete_unfinished())
    assert done == "Cancelled 2 open orders, kept 2 take-profit/stop-loss exits, paused 1 agent."
    assert desk.orders()[ids["entry"]].status is OrderStatus.CANCELLED
    assert desk.agents.agents[trader.agent_id].state is AgentState.PAUSED
    assert "Completed after a restart" in desk.notifications.recent()[0].message
    assert asyncio.run(desk.switch.complete_unfinished()) is None  # nothing left to finish


# -- tripping by itself ------------------------------------------------------------------------

def test_the_drawdown_halt_trips_it_once_per_peak(tmp_path: Path) -> None:
    desk = make_desk(tmp_path)
    check = desk.switch.check_account
    assert asyncio.run(check(view(equity="80000", peak_equity="100000"))) is None  # 20% < 25%
    assert asyncio.run(check(view(equity="74000", peak_equity="100000"))) is not None
    trip = desk.switch.active()
    assert trip is not None and trip.cause is TripCause.DRAWDOWN
    assert trip.by == "Kestrel (drawdown halt)"
    assert trip.reason == ("Drawdown 26.0% from the peak equity 100000 USDT >= limit 25.0%")
    asyncio.run(desk.switch.reset("me"))
    # still in the same drawdown at the next settle: already answered by the trip
    assert asyncio.run(check(view(equity="73000", peak_equity="100000"))) is None
    assert not desk.switch.is_tripped()
    # a new peak, then a new drawdown from it: a new trip
    assert asyncio.run(check(view(equity="82000", peak_equity="110000"))) is not None


def test_the_daily_loss_limit_trips_it_once_a_day(tmp_path: Path) -> None:
    desk = make_desk(tmp_path)
    check = desk.switch.check_account
    assert asyncio.run(check(view(equity="96000", day_start_equity="100000"))) is None
    asyncio.run(check(view(equity="94000", day_start_equity="100000")))
    trip = desk.switch.active()
    assert trip is not None and trip.cause is TripCause.DAILY_LOSS
    assert trip.reason == ("Daily loss limit reached: equity 94000 USDT is 6.0% below the day's "
                           "start 100000 (limit 5.0%)")
    asyncio.run(desk.switch.reset("me"))
    assert asyncio.run(check(view(equity="93000", day_start_equity="100000"))) is None
    tomorrow = view(equity="88000", day_start_equity="93000", now_ms=NOON_MS + DAY_MS)
    assert asyncio.run(check(tomorrow)) is not None


def test_the_answered_breaches_are_remembered_across_a_restart(tmp_path: Path) -> None:
    desk = make_desk(tmp_path)
    asyncio.run(desk.switch.check_account(view(equity="74000", peak_equity="100000")))
    asyncio.run(desk.switch.reset("me"))
    reopened = KillSwitch(KillSwitchLog(tmp_path / "kestrel.db"), desk.rig.broker, desk.agents,
                          clock=desk.rig.clock, risk=RiskConfig())
    assert asyncio.run(reopened.check_account(view(equity="74000", peak_equity="100000"))) is None
    assert not reopened.is_tripped()


@pytest.mark.parametrize("risk", [
    RiskConfig(kill_switch=KillSwitchConfig(on_loss_halt=False)),
    RiskConfig(max_drawdown_halt=MaxDrawdownHaltConfig(enabled=False),
               daily_loss_limit=DailyLossLimitConfig(enabled=False)),
], ids=["watch-off", "halts-off"])
def test_no_loss_trip_when_the_watch_or_the_halts_are_off(tmp_path: Path, risk) -> None:
    desk = make_desk(tmp_path, risk)
    asyncio.run(desk.switch.check_account(
        view(equity="50000", peak_equity="100000", day_start_equity="100000")))
    assert not desk.switch.is_tripped()


def unknown(n: int, venue: str = "binance") -> OrderOutcomeUnknown:
    return OrderOutcomeUnknown(venue, "trader", "BTC/USDT", f"k-{n}", "RequestTimeout", n)


def test_a_run_of_unknown_order_outcomes_trips_it_at_the_limit(tmp_path: Path) -> None:
    desk = make_desk(tmp_path)
    desk.switch.watch(desk.bus)
    for n in (1, 2):
        asyncio.run(desk.bus.publish(unknown(n)))
    assert not desk.switch.is_tripped()
    asyncio.run(desk.bus.publish(unknown(3)))
    trip = desk.switch.active()
    assert trip is not None and trip.cause is TripCause.UNKNOWN_OUTCOMES
    assert trip.reason == ("3 orders in a row on binance ended with an unknown outcome (limit "
                           "3); the last, k-3 (BTC/USDT, agent trader): RequestTimeout")


def test_unknown_outcomes_never_trip_it_with_a_limit_of_zero(tmp_path: Path) -> None:
    desk = make_desk(tmp_path, RiskConfig(kill_switch=KillSwitchConfig(
        unknown_outcomes_limit=0)))
    desk.switch.watch(desk.bus)
    asyncio.run(desk.bus.publish(unknown(50)))
    assert not desk.switch.is_tripped()


def test_a_reconciliation_mismatch_trips_it_and_the_same_one_not_again(tmp_path: Path) -> None:
    desk = make_desk(tmp_path)
    desk.switch.watch(desk.bus)
    usdt = ReconciliationMismatch("binance", "balance", "USDT: journal 1000, exchange 940")
    asyncio.run(desk.bus.publish(usdt))
    trip = desk.switch.active()
    assert trip is not None and trip.cause is TripCause.RECONCILIATION
    assert trip.by == "Kestrel (reconciliation with binance)"
    asyncio.run(desk.switch.reset("me"))
    asyncio.run(desk.bus.publish(usdt))  # the next sweep reports it again
    assert not desk.switch.is_tripped()
    asyncio.run(desk.bus.publish(
        ReconciliationMismatch("binance", "balance", "BTC: journal 0.5, exchange 0.3")))
    assert desk.switch.is_tripped()


def test_a_mismatch_does_not_trip_it_when_that_is_turned_off(tmp_path: Path) -> None:
    desk = make_desk(tmp_path, RiskConfig(kill_switch=KillSwitchConfig(
        on_reconciliation_mismatch=False)))
    desk.switch.watch(desk.bus)
    asyncio.run(desk.bus.publish(ReconciliationMismatch("binance", "unknown_orders", "2")))
    assert not desk.switch.is_tripped()


GIVEN_UP = ReconciliationMismatch(
    "binance", "unresolved_order", "trader's BUY 0.01 BTC/USDT order (client id k-1) was sent "
    "but its answer was lost, and it was not found on binance by client order id within its "
    "10 min lookup window (121 lookups).")


def alerts_of(desk: Desk) -> list[NotificationRaised]:
    seen: list[NotificationRaised] = []
    desk.bus.subscribe(NotificationRaised, lambda e: seen.append(e) if e.channel == "UI_ALERT"
                       else None)
    return seen


def test_an_order_given_up_after_its_lookup_window_trips_it_by_default(tmp_path: Path) -> None:
    assert KillSwitchConfig().on_unresolved_order is True
    desk = make_desk(tmp_path)
    desk.switch.watch(desk.bus)
    asyncio.run(desk.bus.publish(GIVEN_UP))
    trip = desk.switch.active()
    assert trip is not None and trip.cause is TripCause.RECONCILIATION
    assert "within its 10 min lookup window" in trip.reason


def test_with_on_unresolved_order_off_a_given_up_order_is_told_and_trading_goes_on(
    tmp_path: Path,
) -> None:
    desk = make_desk(tmp_path, RiskConfig(kill_switch=KillSwitchConfig(
        on_unresolved_order=False)))
    desk.switch.watch(desk.bus)
    alerts = alerts_of(desk)
    asyncio.run(desk.bus.publish(GIVEN_UP))
    assert not desk.switch.is_tripped()
    (alert,) = alerts
    assert alert.subject == "Kestrel: order outcome unknown on binance"
    assert GIVEN_UP.detail in alert.message and "not tripped" in alert.message
    # a balance that differs still trips it: the setting is about unresolved orders only
    asyncio.run(desk.bus.publish(
        ReconciliationMismatch("binance", "balance", "USDT: journal 1000, exchange 940")))
    assert desk.switch.is_tripped()


def test_an_order_reported_not_placed_and_found_after_all_is_told(tmp_path: Path) -> None:
    desk = make_desk(tmp_path)
    desk.switch.watch(desk.bus)
    alerts = alerts_of(desk)
    asyncio.run(desk.bus.publish(UnresolvedOrderFound(
        "binance", "trader's BUY 0.01 BTC/USDT order (client id k-1, exchange id 7) was found "
        "on binance: FILLED, 0.01 filled at 70000.")))
    (alert,) = alerts
    assert alert.subject == "Kestrel: order found on binance"
    assert "FILLED, 0.01 filled" in alert.message and "reported as not placed" in alert.message
    assert not desk.switch.is_tripped()
