"""The kill switch: halt all trading at once, by hand or by itself, until a person resets it.

A trip is committed first (``KillSwitchLog``, forced to disk): from that instant the Risk Guard's
first rule refuses every new entry, whatever else happens next. Then the trip's actions run, in
this order: every running agent is paused (``control(agent_id, "pause")``, the Agents panel's
own button), every open order is cancelled through the broker port (``cancel_order`` per order,
the paper broker now and a live one alike), the person is told on every channel (the window's
alert, the tray, Telegram, e-mail) and ``KillSwitchTripped`` goes out on the bus as soon as the
trip is committed. Reduce-only take-profit and stop-loss exits stay unless
``[risk.kill_switch] cancel_exits`` says otherwise: they only protect positions, and a halted
desk is when they matter most. A crash between the commit and the end of the actions is
completed at the next start (``complete_unfinished``): the trip record keeps what the actions did,
and ``None`` until they have run.

It trips by itself on:

- the daily loss limit or the drawdown halt, judged on the account after each settle
  (``check_account``, given the broker's ``RiskView``: the runtime calls it after each clock
  advance; a live venue calls it after each account update), rather than on the first order
  the halt refuses: a halt reached while no agent is trading is a halt all the same;
- a reconciliation mismatch a live broker reports (``ReconciliationMismatch`` on the bus); an
  order whose outcome stayed unknown through its lookup window (kind ``unresolved_order``) trips
  it only as ``[risk.kill_switch] on_unresolved_order`` says, and is otherwise told to the person
  as an alert; that such an order was found after all (``UnresolvedOrderFound``) is told too;
- a run of orders whose outcome stayed unknown (``OrderOutcomeUnknown`` with its ``consecutive``
  count reaching ``unknown_outcomes_limit``).

An automatic trip names what it answers (``Trip.cause_key``: the day of a daily loss, the peak
of a drawdown, a mismatch's words, an order's id); once a person has reset the switch the same
breach does not trip it again at the next settle, a new one does. The halts themselves keep
refusing entries as long as they hold.

Reset is a person's deliberate act (the window's dialog, or ``/reset`` with a typed confirmation
in ``kestrel chat``); agents stay paused after it: the person resumes those that should run.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from app.config.risk import RiskConfig
from app.domain.agents import AgentInfo, AgentState, Urgency
from app.domain.clock import Clock
from app.domain.kill_switch import Trip, TripCause
from app.domain.risk_view import RiskView
from app.domain.trading import Order
from app.events import (
    AccountRefreshed,
    ClockAdvanced,
    EventBus,
    KillSwitchReset,
    KillSwitchTripped,
    OrderOutcomeUnknown,
    ReconciliationMismatch,
    UnresolvedOrderFound,
)
from app.orchestration.notify import NotificationService, PersonAlert
from app.orchestration.ports import OpenOrders
from app.risk.rules import DAY_MS, amount, daily_loss_breach, drawdown_violation, pct
from app.store.kill_switch_log import KillSwitchLog

logger = logging.getLogger(__name__)

SUBJECT = "Kestrel: kill switch"  # its notifications' subjects begin so (the window's banner)
UNRESOLVED_ORDER = "unresolved_order"  # the ``ReconciliationMismatch`` kind of a given-up order
PAUSABLE = (AgentState.RUNNING, AgentState.WAITING_FOR_USER)


class AgentControl(Protocol):
    """What a trip needs of the agent manager: the agents, and their pause button."""

    def list_agents(self) -> list[AgentInfo]:
        ...

    async def control(self, agent_id: str, action: str) -> AgentInfo:
        ...


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class TripPreview:
    """What tripping now would do, for a confirmation a person reads first."""

    orders_to_cancel: int
    exits_kept: int
    agents_to_pause: int

    def describe(self) -> str:
        orders = (f"cancels {_count(self.orders_to_cancel, 'open order')}"
                  if self.orders_to_cancel else "cancels nothing (no open order)")
        kept = (f" ({_count(self.exits_kept, 'take-profit/stop-loss exit')} stay to protect "
                "positions)" if self.exits_kept else "")
        agents = (f"pauses {_count(self.agents_to_pause, 'running agent')}"
                  if self.agents_to_pause else "pauses no agent (none is running)")
        return f"Refuses every new order, {orders}{kept} and {agents}."


@dataclass
class _Outcome:
    cancelled: list[Order] = field(default_factory=list)
    kept: list[Order] = field(default_factory=list)
    paused: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def describe(self) -> str:
        parts = [f"Cancelled {_count(len(self.cancelled), 'open order')}" if self.cancelled
                 else "No open order to cancel"]
        if self.kept:
            parts.append(f"kept {_count(len(self.kept), 'take-profit/stop-loss exit')}")
        parts.append(f"paused {_count(len(self.paused), 'agent')}" if self.paused
                     else "no agent was running")
        text = ", ".join(parts) + "."
        if self.problems:
            text += " Not done: " + "; ".join(self.problems) + "."
        return text


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


class KillSwitch:
    """The one switch that halts trading; Qt-free, so the window, Telegram and the CLI share it.

    Args:
        log: where trips are kept (the Risk Guard's rule reads the same log).
        broker: whose open orders a trip cancels.
        agents: whose agents a trip pauses (the ``AgentManager``).
        clock: the market clock (a replay's simulated time, kept with each trip).
        risk: the risk settings: the loss halts' limits and ``[risk.kill_switch]``.
        notifications: how the person is told; None: only logged (tests of the rule alone).
        bus: where ``KillSwitchTripped`` and ``KillSwitchReset`` are published.
        wall_ms: the wall clock (injected in tests).
    """

    def __init__(
        self,
        log: KillSwitchLog,
        broker: OpenOrders,
        agents: AgentControl,
        *,
        clock: Clock,
        risk: RiskConfig,
        notifications: NotificationService | None = None,
        bus: EventBus | None = None,
        wall_ms: Callable[[], int] = _wall_ms,
    ) -> None:
        self.log = log
        self.broker = broker
        self.agents = agents
        self.clock = clock
        self.risk = risk
        self.config = risk.kill_switch
        self.alert = PersonAlert(notifications)
        self.bus = bus
        self._wall_ms = wall_ms
        self._answered = log.answered_keys()
        self._account_view: Callable[[], RiskView] | None = None

    # -- reading ---------------------------------------------------------------------------------

    def is_tripped(self) -> bool:
        return self.log.active() is not None

    def active(self) -> Trip | None:
        """The trip in force, or None when the switch is armed."""
        return self.log.active()

    def halt_reason(self) -> str | None:
        """Why trading is halted, or None (the seam ``OrderGate.kill_switch`` expects)."""
        trip = self.log.active()
        return None if trip is None else trip.halt_reason()

    def history(self, limit: int = 50) -> list[Trip]:
        return self.log.history(limit)

    async def preview(self) -> TripPreview:
        """What a trip would do now (what the confirmation says)."""
        orders = await self.broker.open_orders()
        kept = sum(1 for o in orders if self._keeps(o))
        agents = sum(1 for a in self.agents.list_agents() if a.state in PAUSABLE)
        return TripPreview(len(orders) - kept, kept, agents)

    # -- tripping and resetting ------------------------------------------------------------------

    async def trip(
        self,
        reason: str,
        by: str,
        *,
        cause: TripCause = TripCause.MANUAL,
        cause_key: str = "",
    ) -> str | None:
        """Halt trading now; return what was done, in a sentence for the person.

        Tripping a tripped switch changes nothing and says so. The trip is committed before
        anything else happens, so no order can pass the guard after this is called, even when
        an action below fails or the process dies.
        """
        reason = " ".join(reason.split()) or "no reason given"
        by = " ".join(by.split()) or "someone not named"
        trip, new = self.log.trip(
            cause=cause, cause_key=cause_key, reason=reason, by=by,
            tripped_ms=self._wall_ms(), market_ms=self.clock.now_ms(),
        )
        if not new:
            return f"The kill switch was already {trip.describe()}."
        if cause_key:
            self._answered.add(cause_key)
        logger.info("kill switch %s", trip.describe())
        if self.bus is not None:
            await self.bus.publish(KillSwitchTripped(
                trip.trip_id, trip.cause.value, trip.reason, trip.by, trip.tripped_ms,
                trip.market_ms))
        return await self._act(trip)

    async def complete_unfinished(self) -> str | None:
        """Finish the actions of a trip the last run committed but did not complete (a crash
        came in between); call before the agents start. None when there is nothing to finish."""
        trip = self.log.active()
        if trip is None or trip.actions is not None:
            return None
        logger.warning("completing the kill switch trip of the last run: %s", trip.describe())
        return await self._act(trip, resumed=True)

    async def reset(self, by: str) -> str:
        """Let orders pass the Risk Guard again; agents stay paused. Returns what was done.

        Raises:
            NotTrippedError: the switch is not tripped.
        """
        by = " ".join(by.split()) or "someone not named"
        trip = self.log.reset(by=by, reset_ms=self._wall_ms(), market_ms=self.clock.now_ms())
        logger.info("kill switch reset by %s (it was %s)", by, trip.describe())
        if self.bus is not None:
            await self.bus.publish(KillSwitchReset(trip.trip_id, by, trip.reset_ms or 0))
        paused = sum(1 for a in self.agents.list_agents() if a.state is AgentState.PAUSED)
        after = (f" {_count(paused, 'agent')} {'stays' if paused == 1 else 'stay'} paused: "
                 "resume those that should trade." if paused else "")
        done = f"Kill switch reset by {by}: new orders pass the Risk Guard again.{after}"
        await self._notify(done, f"{SUBJECT} reset", Urgency.HIGH)
        return done

    async def _act(self, trip: Trip, *, resumed: bool = False) -> str:
        outcome = _Outcome()
        for info in self.agents.list_agents():
            if info.state not in PAUSABLE:
                continue
            try:
                await self.agents.control(info.agent_id, "pause")
            except Exception as exc:  # one agent must not keep the others running
                logger.exception("the kill switch could not pause agent %s", info.agent_id)
                outcome.problems.append(f"agent {info.name} could not be paused ({exc})")
            else:
                outcome.paused.append(info.name)
        try:
            orders = await self.broker.open_orders()
        except Exception as exc:  # the broker is unreachable: say so, the halt stands
            logger.exception("the kill switch could not list the open orders")
            outcome.problems.append(f"the open orders could not be listed ({exc}); cancel them "
                                    "in the Account panel")
            orders = []
        for order in orders:
            if self._keeps(order):
                outcome.kept.append(order)
                continue
            try:
                await self.broker.cancel_order(order.agent_id, order.symbol, order.order_id)
            except Exception as exc:  # one order must not keep the others open
                logger.exception("the kill switch could not cancel %s", order.order_id)
                outcome.problems.append(f"order {order.order_id} could not be cancelled ({exc})")
            else:
                outcome.cancelled.append(order)
        done = outcome.describe()
        self.log.record_actions(trip.trip_id, done)
        when = "Completed after a restart: " if resumed else ""
        await self._notify(
            f"Kill switch {trip.describe()}. {when}{done} New orders are refused until a person "
            "resets it in the Kestrel window.",
            f"{SUBJECT} tripped", Urgency.CRITICAL,
        )
        return done

    def _keeps(self, order: Order) -> bool:
        return order.reduce_only and not self.config.cancel_exits

    async def _notify(self, message: str, subject: str, urgency: Urgency) -> None:
        await self.alert.send(message, subject, urgency)  # the halt stands either way

    # -- tripping by itself ----------------------------------------------------------------------

    def watch(self, bus: EventBus, account_view: Callable[[], RiskView] | None = None) -> None:
        """Trip on the bus's reports of live brokers and, given ``account_view``, on the loss
        halts after every clock advance (a replay's settle) and every account reading of a live
        broker (``AccountRefreshed``)."""
        bus.subscribe(OrderOutcomeUnknown, self.on_unknown_outcome)
        bus.subscribe(ReconciliationMismatch, self.on_mismatch)
        bus.subscribe(UnresolvedOrderFound, self.on_order_found)
        if account_view is not None:
            self._account_view = account_view
            bus.subscribe(ClockAdvanced, self._on_clock)
            bus.subscribe(AccountRefreshed, self._on_clock)

    def _on_clock(
        self, _event: ClockAdvanced | AccountRefreshed
    ) -> Awaitable[str | None] | None:
        # judged at once, on every tick of a paced replay; a task is started only to trip
        if self._account_view is None:
            return None
        breach = self._loss_breach(self._account_view())
        return None if breach is None else self._auto_trip(*breach)

    async def check_account(self, view: RiskView) -> str | None:
        """Trip when the account has reached the daily loss limit or the drawdown halt."""
        breach = self._loss_breach(view)
        return None if breach is None else await self._auto_trip(*breach)

    def _loss_breach(self, view: RiskView) -> tuple[TripCause, str, str, str] | None:
        """The halt the account has reached and not yet answered by a trip: (cause, key,
        reason, by); None when there is none, or the switch is tripped or told not to."""
        if not self.config.on_loss_halt or self.is_tripped():
            return None
        daily, drawdown = self.risk.daily_loss_limit, self.risk.max_drawdown_halt
        if drawdown.enabled:
            violation = drawdown_violation(view, drawdown.limit_pct)
            key = f"drawdown:{view.peak_equity}"
            if violation is not None and key not in self._answered:
                why = violation.reason.removeprefix("Trading halted: ")
                return (TripCause.DRAWDOWN, key, why[:1].upper() + why[1:],
                        "Kestrel (drawdown halt)")
        if daily.enabled:
            loss = daily_loss_breach(view, daily.limit_pct)
            key = f"daily_loss:{view.now_ms // DAY_MS}"
            if loss is not None and key not in self._answered:
                return (TripCause.DAILY_LOSS, key,
                        f"Daily loss limit reached: equity {amount(view.equity)} "
                        f"{view.quote_currency} is {pct(loss)} below the day's start "
                        f"{amount(view.day_start_equity)} (limit {pct(daily.limit_pct)})",
                        "Kestrel (daily loss limit)")
        return None

    async def on_unknown_outcome(self, event: OrderOutcomeUnknown) -> str | None:
        limit = self.config.unknown_outcomes_limit
        if limit == 0 or event.consecutive < limit:
            return None
        return await self._auto_trip(
            TripCause.UNKNOWN_OUTCOMES,
            f"unknown_outcomes:{event.venue}:{event.client_order_id}",
            f"{_count(event.consecutive, 'order')} in a row on {event.venue} ended with an "
            f"unknown outcome (limit {limit}); the last, {event.client_order_id} "
            f"({event.symbol}, agent {event.agent_id}): {event.reason}",
            "Kestrel (unknown order outcomes)")

    async def on_mismatch(self, event: ReconciliationMismatch) -> str | None:
        unresolved = event.kind == UNRESOLVED_ORDER
        off = ("on_reconciliation_mismatch" if not self.config.on_reconciliation_mismatch
               else "on_unresolved_order" if unresolved and not self.config.on_unresolved_order
               else None)
        if off is not None:
            if unresolved:  # not a trip, but a person must still look
                await self._notify(
                    f"{event.detail} The kill switch was not tripped ([risk.kill_switch] {off} "
                    "is off): trading goes on.",
                    f"Kestrel: order outcome unknown on {event.venue}", Urgency.HIGH)
            return None
        return await self._auto_trip(
            TripCause.RECONCILIATION, f"reconciliation:{event.venue}:{event.kind}:{event.detail}",
            f"Reconciliation with {event.venue} found a mismatch ({event.kind}): {event.detail}",
            f"Kestrel (reconciliation with {event.venue})")

    async def on_order_found(self, event: UnresolvedOrderFound) -> None:
        """An order the person was told was not placed turned up after all: say so (a trip
        made for it stays until a person resets it)."""
        await self._notify(
            f"{event.detail} It had been reported as not placed; check it against what you did "
            "since.", f"Kestrel: order found on {event.venue}", Urgency.HIGH)

    async def _auto_trip(self, cause: TripCause, key: str, reason: str, by: str) -> str | None:
        if self.is_tripped() or key in self._answered:
            return None
        return await self.trip(reason, by, cause=cause, cause_key=key)
